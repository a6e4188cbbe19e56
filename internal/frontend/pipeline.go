package frontend

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"go.uber.org/zap"

	"execd/internal/jsonrpc"
)

// The pipeline every message takes, whatever carried it (an HTTP POST, an
// item of an HTTP batch, a stdio line, an item of a stdio batch):
//
//	decode     the transport's jsonrpc.Decode
//	admit      the era's rules find the message's peer and judge a request
//	           (admit.go); this is where a request is refused
//	intercept  a cancel or a client response acts at once and goes no
//	           further (intercept.go)
//	run        the handler, on a context that every way of ending the
//	           call cancels (client, stream close, session end, deadline,
//	           shutdown)
//	finish     answer, or stay silent for a request the client cancelled:
//	           decided here and nowhere else
//	log        one line per request
//
// A transport provides an origin (where the message came from) and a sink
// (how to write back), and does nothing else.

// sink carries one message's answer back to the client.
type sink interface {
	// reply answers without a run: a refusal, or the legacy handshake.
	reply(r *reply)
	// open is called when a request has been admitted, before it runs; an
	// HTTP answer chooses between JSON and SSE here.
	open(method string)
	// send writes a notification or a server request on the request's own
	// stream; it fails when the answer has no stream.
	send(b []byte) error
	// answer writes the response.
	answer(b []byte) error
	// silent ends the request without any response.
	silent()
	// accepted acknowledges a notification or a client response.
	accepted()
}

// reply is an answer given without running anything.
type reply struct {
	status     int // HTTP status; stdio and batch items carry none
	id         jsonrpc.ID
	err        *jsonrpc.Error
	result     any    // when err is nil
	session    string // Mcp-Session-Id minted by initialize
	retryAfter bool   // the Retry-After of a Too Many Requests
}

func refuse(status int, id jsonrpc.ID, err *jsonrpc.Error) *reply {
	return &reply{status: status, id: id, err: err}
}

// encode writes the reply. A result that cannot be encoded becomes a
// -32603 error, logged, rather than an empty body.
func (r *reply) encode(log *zap.Logger) []byte {
	if r.err != nil {
		return jsonrpc.EncodeError(r.id, r.err)
	}
	b, err := jsonrpc.EncodeResult(r.id, r.result)
	if err != nil {
		log.Error("encode reply", zap.String("id", r.id.String()), zap.Error(err))
		return jsonrpc.EncodeError(r.id, jsonrpc.Errorf(jsonrpc.CodeInternalError, "Internal error: cannot encode the result"))
	}
	return b
}

// handle takes one decoded message through the pipeline and returns the
// task to run, or nil when there is nothing to run: the message was
// refused, answered by the handshake, or intercepted. The caller runs the
// task where its transport allows (HTTP: on the request's goroutine;
// stdio: on its own, so that the reader goes on).
func (s *Server) handle(o origin, msg *jsonrpc.Message, out sink) *task {
	meta := readMeta(msg.Params)
	a, r := o.admit(s, msg, &meta)
	if r != nil {
		s.answerWithout(o, a, msg, &meta, r, out)
		return nil
	}
	if !msg.IsRequest() {
		s.intercept(a.peer, msg)
		out.accepted()
		return nil
	}
	c, m, r := s.admitRequest(o, a, msg, meta)
	if r == nil && m.intercepted {
		// Like a cancel, it acts on a call already running: it answers at
		// once, before the limits that could make it wait or refuse it.
		c.out = out
		s.answerWithout(o, a, msg, &meta, s.serveIntercepted(c, m), out)
		return nil
	}
	if r == nil {
		r = s.admitPolicy(o, msg)
	}
	if r != nil {
		s.answerWithout(o, a, msg, &meta, r, out)
		return nil
	}
	c.out = out
	t, r := s.register(o, a, c, m, s.requestInfo(o, a.era, a.version, msg, &meta, c))
	if r != nil {
		o.release(s)
		s.answerWithout(o, a, msg, &meta, r, out)
		return nil
	}
	o.admitted(a.era)
	return t
}

// answerWithout answers a message without running anything (a refusal, the
// legacy handshake) and, for a request, gives it its log line and reports
// it to the Observer: the one way out of the pipeline before a run.
func (s *Server) answerWithout(o origin, a admission, msg *jsonrpc.Message, meta *requestMeta, r *reply, out sink) {
	out.reply(r)
	if msg.IsRequest() {
		s.logReply(o, a.era, msg, r)
		s.observeReply(o, a, msg, meta, r)
	}
}

// admitPolicy applies the server's own limits to an admitted request: no
// new work once shutdown has begun, and what the transport holds for a
// request (the per-principal cap on open HTTP requests). A request that
// passes holds it until its task ends.
func (s *Server) admitPolicy(o origin, msg *jsonrpc.Message) *reply {
	if s.draining.Load() {
		return refuse(http.StatusServiceUnavailable, msg.ID, jsonrpc.Errorf(jsonrpc.CodeServerPolicy, "Service Unavailable: execd is shutting down"))
	}
	if !o.hold(s) {
		r := refuse(http.StatusTooManyRequests, msg.ID, s.tooMany())
		r.retryAfter = true
		return r
	}
	return nil
}

func (s *Server) tooMany() *jsonrpc.Error {
	return jsonrpc.Errorf(jsonrpc.CodeServerPolicy,
		"Too Many Requests: at most %d requests and streams may be open at once (server.max_streams_per_principal)", s.opts.MaxStreamsPerPrincipal)
}

// task is an admitted request with everything its end must undo.
type task struct {
	s      *Server
	o      origin
	c      *Call
	m      method
	ctx    context.Context
	cancel context.CancelCauseFunc
	start  time.Time

	observed  func(RequestEnd) // reports its end to the Observer
	scope     string           // its id is registered in this peer's scope
	session   *session         // it is in flight in this session
	stopClose func() bool      // the end of its connection no longer cancels it
}

// register gives an admitted request its context and makes it reachable:
// by notifications/cancelled within its peer, by the end of its
// connection (as the era says), by the end of its session, and by
// shutdown. It fails when the request's id is already in flight in its
// peer.
func (s *Server) register(o origin, a admission, c *Call, m method, ri RequestInfo) (*task, *reply) {
	// A session's request is a child of the session's context, itself a
	// child of runCtx: the end of the session and shutdown both reach it,
	// with their own cause, without a hook per request.
	parent := s.runCtx
	if a.session != nil {
		parent = a.session.ctx
	}
	ctx, cancel := context.WithCancelCause(parent)
	t := &task{s: s, o: o, c: c, m: m, ctx: ctx, cancel: cancel, start: ri.Start}
	if a.peer != nil {
		if !s.inflight.add(a.peer.scope, c.id, cancel) {
			cancel(nil)
			return nil, refuse(http.StatusOK, c.id, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: request id %s is already in use", c.id))
		}
		t.scope = a.peer.scope
	}
	t.ctx, t.observed = s.obs.RequestStart(ctx, ri)
	c.ctx = t.ctx
	s.running.add(t)
	if closed := o.src().closed; closed != nil && o.cancelsOnClose(s, a.era) {
		t.stopClose = context.AfterFunc(closed, t.clientGone)
	}
	if sess := a.session; sess != nil {
		t.session = sess
		sess.begin()
	}
	s.calls.Add(1)
	return t, nil
}

func (t *task) clientGone() { t.cancel(t.o.goneCause()) }

// run runs the task and answers; it must be called exactly once.
func (t *task) run() {
	defer t.end()
	t.c.out.open(t.c.method)
	if t.c.task.mode != taskNo {
		t.runMaybeTask()
		return
	}
	res, jerr := t.s.serve(t.ctx, t.c, t.m)
	t.finish(res, jerr)
}

// serveIntercepted serves an intercepted request: at once, on the caller's
// goroutine (its handler never waits), with no context of its own.
func (s *Server) serveIntercepted(c *Call, m method) *reply {
	c.ctx = s.runCtx
	res, jerr := s.serve(s.runCtx, c, m)
	if jerr != nil {
		return refuse(http.StatusOK, c.id, jerr)
	}
	return &reply{status: http.StatusOK, id: c.id, result: res}
}

func (t *task) end() {
	if t.session != nil {
		t.session.end()
	}
	if t.stopClose != nil {
		t.stopClose()
	}
	t.cancel(nil)
	t.o.release(t.s)
	if t.scope != "" {
		t.s.inflight.remove(t.scope, t.c.id)
	}
	t.s.running.remove(t)
	t.s.calls.Done()
}

// finish answers the request, or stays silent when the client cancelled
// it: this is the one place that decides, for every method and every
// transport (spec: basic/utilities/cancellation.mdx: the receiver SHOULD
// NOT send a response for a cancelled request).
func (t *task) finish(res json.RawMessage, jerr *jsonrpc.Error) {
	c := t.c
	c.mu.Lock()
	c.responded = true
	c.mu.Unlock()
	status := "ok"
	switch {
	case clientEnded(t.ctx):
		status = "cancelled"
		t.s.logCall(c, t.start, status, 0)
		t.observe(status, 0)
		c.out.silent()
		return
	case jerr == nil && res == nil:
		// The handler gave up because its context ended for execd's own
		// reason (shutdown): the client still waits for an answer.
		why := "the handler returned no result"
		if cause := context.Cause(t.ctx); cause != nil {
			why = cause.Error()
		}
		jerr = jsonrpc.Errorf(jsonrpc.CodeInternalError, "Internal error: the request ended without a result: %s", why)
		fallthrough
	case jerr != nil:
		status = "error"
		_ = c.out.answer(jsonrpc.EncodeError(c.id, jerr))
		t.s.logCall(c, t.start, status, jerr.Code)
		t.observe(status, jerr.Code)
		return
	}
	if c.out.answer(jsonrpc.EncodeRawResult(c.id, res)) != nil {
		status = "undelivered"
	}
	t.s.logCall(c, t.start, status, 0)
	t.observe(status, 0)
}

// observe reports the task's end to the Observer.
func (t *task) observe(status string, code int) {
	t.observed(RequestEnd{Outcome: status, Code: code, Cancel: cancelSource(t.ctx), Duration: time.Since(t.start)})
}

// logCall is the request's one log line once it ran.
func (s *Server) logCall(c *Call, start time.Time, status string, code int) {
	ce := s.reqLog.Check(zap.InfoLevel, "request") // nil when off or sampled out
	if ce == nil {
		return
	}
	fields := make([]zap.Field, 0, 8+len(c.tagRoom)/2)
	fields = append(fields,
		zap.String("id", c.id.String()), zap.String("method", c.method), zap.String("era", c.era.String()),
		zap.String("transport", c.transport), zap.String("principal", c.principal),
		zap.String("status", status), zap.Duration("duration", time.Since(start)))
	if code != 0 {
		fields = append(fields, zap.Int("code", code))
	}
	ce.Write(c.appendTagFields(fields)...)
}

// logReply is the one log line of a request answered without a run.
func (s *Server) logReply(o origin, era Era, msg *jsonrpc.Message, r *reply) {
	ce := s.reqLog.Check(zap.InfoLevel, "request")
	if ce == nil {
		return
	}
	fields := []zap.Field{
		zap.String("id", msg.ID.String()), zap.String("method", msg.Method), zap.String("era", era.String()),
		zap.String("transport", o.src().transport), zap.String("principal", o.src().principal),
	}
	if r.err != nil {
		fields = append(fields, zap.String("status", "refused"), zap.Int("code", r.err.Code))
	} else {
		fields = append(fields, zap.String("status", "ok"))
	}
	if r.session != "" {
		fields = append(fields, zap.String("session", r.session))
	}
	ce.Write(fields...)
}
