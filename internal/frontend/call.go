package frontend

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"execd/internal/jsonrpc"
	"execd/internal/progress"
)

// Call is one request being served: what a handler may read of it, and
// its way back to the client on the request's own stream. The methods are
// safe for concurrent use; after the response nothing more is sent.
type Call struct {
	srv       *Server
	era       Era
	version   string
	principal string
	transport string // "http" or "stdio"
	id        jsonrpc.ID
	method    string
	params    json.RawMessage
	meta      requestMeta
	toolCall  toolCallParams // tools/call: its params, read by prepareTool
	toolErr   *jsonrpc.Error // why they could not be read
	tool      *tool          // a known tool
	args      arguments      // its arguments, read by exact key
	peer      *peer          // nil for a modern HTTP request
	out       sink
	ctx       context.Context // the call's context, once registered
	logMin    int             // least severe level sent as notifications/message; -1 none

	mu        sync.Mutex
	responded bool      // after the response, nothing more is sent
	tags      []string  // key, value, …: for the log line and Running
	tagRoom   [4]string // tags' first array: a tool's two tags take no allocation

	progress atomic.Pointer[string] // the latest progress message, for Server.Running

	task callTask // how the call may become a task (tasks.go)
}

// Era is the era the request is served in.
func (c *Call) Era() Era { return c.era }

// Version is the protocol version the request is served in: the legacy
// session's or process's negotiated one, or the modern _meta's.
func (c *Call) Version() string { return c.version }

// ID is the request's JSON-RPC id, as text.
func (c *Call) ID() string { return c.id.String() }

// Principal is the authenticated client the request belongs to
// (LocalPrincipal without auth).
func (c *Call) Principal() string { return c.principal }

// Params are the request's params as the client sent them.
func (c *Call) Params() json.RawMessage { return c.params }

// ProgressToken is the request's _meta progressToken, or nil when the
// client asked for no progress.
func (c *Call) ProgressToken() json.RawMessage { return c.meta.progressToken }

// Declared reports whether a modern request declared the client
// capability name (its _meta clientCapabilities). The legacy era carries
// no per-request capabilities: it is false there.
func (c *Call) Declared(name string) bool {
	return c.era == EraModern && c.meta.hasCapability(name)
}

// CanElicit reports whether the client can be asked a form-mode
// elicitation for this request: a modern request declares it in its
// _meta, a legacy client at initialize.
func (c *Call) CanElicit() bool {
	if c.era == EraModern {
		return elicitsForms(c.meta.capabilities)
	}
	return c.peer != nil && elicitsForms(c.peer.capabilities())
}

// errStreamClosed is what a write after the response, or without a way
// back, reports.
var errStreamClosed = errors.New("stream closed")

// Notify sends a notification on the request's own stream. It fails when
// the request has answered or its answer cannot carry notifications (a
// JSON answer, a batch).
func (c *Call) Notify(method string, params any) error {
	b, err := jsonrpc.EncodeNotification(method, params)
	if err != nil {
		return err
	}
	return c.send(b)
}

func (c *Call) send(b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Nothing is sent after the response, nor once the client has
	// cancelled (spec: basic/utilities/cancellation.mdx).
	if c.responded || c.ctx != nil && clientEnded(c.ctx) {
		return errStreamClosed
	}
	return c.out.send(b)
}

// Log sends notifications/message at level when the client asked for
// that level (legacy: logging/setLevel, default info; modern: _meta
// logLevel, none without it).
func (c *Call) Log(level string, data any) {
	if c.logMin < 0 || levelRank(level) < c.logMin {
		return
	}
	_ = c.Notify("notifications/message", map[string]any{"level": level, "logger": ServerName, "data": data})
}

// Tag names what the call acts on (key "workspace", say), for its log
// line and the operator's view (Server.Running). A later value of a key
// replaces the earlier one.
func (c *Call) Tag(key, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 0; i+1 < len(c.tags); i += 2 {
		if c.tags[i] == key {
			c.tags[i+1] = value
			return
		}
	}
	if c.tags == nil {
		c.tags = c.tagRoom[:0]
	}
	c.tags = append(c.tags, key, value)
}

// appendTagFields appends the call's tags to fields, for its log line.
func (c *Call) appendTagFields(fields []zap.Field) []zap.Field {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 0; i+1 < len(c.tags); i += 2 {
		fields = append(fields, zap.String(c.tags[i], c.tags[i+1]))
	}
	return fields
}

// tagged returns the call's tags.
func (c *Call) tagged() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.tags...)
}

// emitter adapts a call to progress.Emitter.
type emitter struct{ c *Call }

func (e emitter) Notify(method string, params any) error { return e.c.Notify(method, params) }

// Reporter is a progress reporter bound to the request's own stream and
// progressToken (it sends nothing when the client asked for no progress),
// with the server's heartbeat; the latest message is also the call's
// progress in Server.Running. Stop it before the handler returns.
func (c *Call) Reporter() *progress.Reporter {
	return progress.New(emitter{c}, c.meta.progressToken, progress.Options{Heartbeat: c.srv.opts.ProgressHeartbeat,
		Seen: func(m string) { c.progress.Store(&m) }})
}

// peer is the client end a request belongs to beyond itself: a legacy
// HTTP session or a stdio process. Request ids are unique per peer, so
// cancels and client responses are matched within the peer's scope; the
// legacy log level is the peer's too.
type peer struct {
	scope  string
	logMin atomic.Int32
	caps   atomic.Pointer[json.RawMessage] // the client's capabilities, from initialize
	// stream writes a message on the peer's own stream, outside any
	// request (a legacy task's notifications): stdout, or the session's
	// GET stream while one is open. Nil: none.
	stream atomic.Pointer[func([]byte) error]
}

// send writes b on the peer's own stream.
func (p *peer) send(b []byte) error {
	if f := p.stream.Load(); f != nil {
		return (*f)(b)
	}
	return errNoStream
}

func (p *peer) setCapabilities(caps json.RawMessage) { p.caps.Store(&caps) }

// capabilities are what the client declared at initialize; nil before.
func (p *peer) capabilities() json.RawMessage {
	if c := p.caps.Load(); c != nil {
		return *c
	}
	return nil
}

func newPeer(scope string) *peer {
	p := &peer{scope: scope}
	p.logMin.Store(int32(levelRank("info")))
	return p
}

func (p *peer) setLogLevel(rank int) { p.logMin.Store(int32(rank)) }
