package frontend

import (
	"context"
	"net/http"

	"execd/internal/jsonrpc"
)

// An origin is where one message came from: an HTTP POST (or an item of
// its batch) or a line of a stdio process. The pipeline asks it what
// differs between the transports — the era rules, the stream cap, what
// the end of the connection means — and nothing else does.
type origin interface {
	src() *source
	// admit applies the transport's era rules to a message (admit.go).
	admit(s *Server, msg *jsonrpc.Message, meta *requestMeta) (admission, *reply)
	// hold takes what an admitted request costs the transport, failing at
	// its limit; release gives it back once the request has ended.
	hold(s *Server) bool
	release(s *Server)
	// cancelsOnClose reports whether the end of the connection cancels a
	// request of era.
	cancelsOnClose(s *Server, era Era) bool
	// goneCause is the cause a request is cancelled with when the
	// connection ends.
	goneCause() error
	// admitted is told that a request of era was admitted.
	admitted(era Era)
}

// source is what every origin knows of its message.
type source struct {
	transport string // "http" or "stdio"
	principal string
	// header are the HTTP request's headers; nil on stdio.
	header http.Header
	// closed ends when the client's side of the message's connection ends:
	// the HTTP request's context, the stdio process's input.
	closed context.Context
}

func (s *source) src() *source { return s }

// httpOrigin is a message of an HTTP POST. Each request counts against
// its principal's stream cap while it runs. Closing the response stream
// cancels a modern request always, a legacy one only when configured
// (streamable-http.mdx of 2026-07-28; RATIONALE.md).
type httpOrigin struct{ source }

func newHTTPOrigin(principal string, r *http.Request) *httpOrigin {
	return &httpOrigin{source{transport: "http", principal: principal, header: r.Header, closed: r.Context()}}
}

func (o *httpOrigin) admit(s *Server, msg *jsonrpc.Message, meta *requestMeta) (admission, *reply) {
	return s.admitHTTP(o, msg, meta)
}

func (o *httpOrigin) hold(s *Server) bool { return s.streams.take(o.principal) }
func (o *httpOrigin) release(s *Server)   { s.streams.release(o.principal) }
func (o *httpOrigin) goneCause() error    { return errClientGone }
func (o *httpOrigin) admitted(Era)        {}
func (o *httpOrigin) cancelsOnClose(s *Server, era Era) bool {
	return era == EraModern || s.opts.CancelOnDisconnect
}

// stdioOrigin is a line of a stdio process. Its requests are not capped;
// the end of its input cancels them all (with the cause the process's
// context gives: EOF or shutdown); the first admitted request pins the
// process's era.
type stdioOrigin struct {
	source
	proc *stdioProc
}

func (o *stdioOrigin) admit(s *Server, msg *jsonrpc.Message, meta *requestMeta) (admission, *reply) {
	return s.admitStdio(o.proc, msg, meta)
}

func (o *stdioOrigin) hold(*Server) bool                { return true }
func (o *stdioOrigin) release(*Server)                  {}
func (o *stdioOrigin) cancelsOnClose(*Server, Era) bool { return true }
func (o *stdioOrigin) goneCause() error                 { return context.Cause(o.closed) }
func (o *stdioOrigin) admitted(era Era) {
	if era == EraModern {
		o.proc.pin.CompareAndSwap(pinNone, pinModern)
	}
}
