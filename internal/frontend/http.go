package frontend

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"execd/internal/jsonrpc"
)

// The streamable-HTTP transport: it reads a POST's body, hands each message
// to the pipeline with a sink that writes JSON or SSE, and serves the
// legacy GET stream and DELETE. It decides nothing about what a message
// means.

// Handler returns the HTTP handler: the MCP endpoint at Options.Path and
// /healthz.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if s.draining.Load() {
			writeHead(w, http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "shutting down\n")
			return
		}
		writeHead(w, http.StatusOK)
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc(s.opts.Path, s.serveMCP)
	return mux
}

// writeJSONError answers with an HTTP status and a JSON-RPC error body.
func writeJSONError(w http.ResponseWriter, status int, id jsonrpc.ID, e *jsonrpc.Error) {
	writeJSON(w, status, jsonrpc.EncodeError(id, e))
}

// Header values shared by every answer (net/http only reads them).
var (
	jsonContentType = []string{"application/json"}
)

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = jsonContentType
	writeHead(w, status)
	_, _ = w.Write(body)
}

// writeHead sends an answer's status and headers: every answer of the
// front end goes through it, for its Date header.
func writeHead(w http.ResponseWriter, status int) {
	w.Header()["Date"] = httpDate(time.Now())
	w.WriteHeader(status)
}

// httpDate is the Date header of an answer sent at now. It has a second's
// resolution (RFC 9110 §5.6.7), so it is formatted once a second and
// shared, where net/http would format it for each answer.
func httpDate(now time.Time) []string {
	sec := now.Unix()
	if d := lastDate.Load(); d != nil && d.sec == sec {
		return d.value
	}
	d := &dateHeader{sec: sec, value: []string{now.UTC().Format(http.TimeFormat)}}
	lastDate.Store(d)
	return d.value
}

type dateHeader struct {
	sec   int64
	value []string // net/http only reads it
}

var lastDate atomic.Pointer[dateHeader]

func policyError(format string, args ...any) *jsonrpc.Error {
	return jsonrpc.Errorf(jsonrpc.CodeServerPolicy, format, args...)
}

func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != s.opts.Path {
		http.NotFound(w, r)
		return
	}
	// Origin and Host first (DNS rebinding), then auth.
	if origin := r.Header.Get("Origin"); origin != "" && !s.originAllowed(origin) {
		writeJSONError(w, http.StatusForbidden, jsonrpc.NullID, policyError("Forbidden: origin %q is not allowed", origin))
		return
	}
	if s.loopback && !isLoopbackHost(r.Host) {
		writeJSONError(w, http.StatusForbidden, jsonrpc.NullID, policyError("Forbidden: host %q is not allowed", r.Host))
		return
	}
	// Authorization is a single credential (RFC 9110 §11.6.2): two of them
	// would let a proxy and execd each read a different one.
	if len(r.Header.Values("Authorization")) > 1 {
		writeJSONError(w, http.StatusBadRequest, jsonrpc.NullID, policyError("Bad Request: more than one Authorization header"))
		return
	}
	principal := s.auth.principal(r.Header.Get("Authorization"))
	if principal == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="execd"`)
		writeJSONError(w, http.StatusUnauthorized, jsonrpc.NullID, policyError("Unauthorized: a valid bearer token is required"))
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.servePost(w, r, principal)
	case http.MethodGet, http.MethodDelete:
		sid := r.Header.Get("Mcp-Session-Id")
		if sid == "" {
			w.Header().Set("Allow", "POST")
			writeHead(w, http.StatusMethodNotAllowed)
			return
		}
		sess := s.sessions.get(sid, principal)
		if sess == nil {
			writeJSONError(w, http.StatusNotFound, jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeSessionNotFound, "Session not found"))
			return
		}
		if r.Method == http.MethodDelete {
			s.sessions.remove(sid, principal)
			writeHead(w, http.StatusNoContent)
			return
		}
		if !s.streams.take(principal) {
			w.Header().Set("Retry-After", "1")
			writeJSONError(w, http.StatusTooManyRequests, jsonrpc.NullID, s.tooMany())
			return
		}
		defer s.streams.release(principal)
		s.serveGetStream(w, r, sess)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeHead(w, http.StatusMethodNotAllowed)
	}
}

// serveGetStream holds a legacy session's GET stream open with keep-alive
// comments until the client leaves, the session ends or execd stops. execd
// sends on it only what belongs to the session and to no request.
func (s *Server) serveGetStream(w http.ResponseWriter, r *http.Request, sess *session) {
	if !acceptAdmits(r.Header.Get("Accept"), "text/event-stream") {
		writeJSONError(w, http.StatusNotAcceptable, jsonrpc.NullID, policyError("Not Acceptable: the GET stream is text/event-stream"))
		return
	}
	sw := newSSE(w)
	if sw == nil {
		writeHead(w, http.StatusInternalServerError)
		return
	}
	defer sw.end()
	// While it is open, the stream carries what belongs to the session
	// and to no request: its tasks' notifications, tools/list_changed.
	// It is the session's before its headers leave, so that what follows
	// them reaches it.
	send := sw.event
	sess.peer.stream.Store(&send)
	defer sess.peer.stream.CompareAndSwap(&send, nil)
	defer s.listening.add(sess.peer)()
	sw.begin(keepAliveEvery, false)
	select {
	case <-r.Context().Done():
	case <-sess.ctx.Done():
	case <-s.stopping:
	}
}

func (s *Server) servePost(w http.ResponseWriter, r *http.Request, principal string) {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			writeJSONError(w, http.StatusUnsupportedMediaType, jsonrpc.NullID, policyError("Unsupported Media Type: Content-Type must be application/json"))
			return
		}
	}
	// A slow body is cut off by the read timeout; the deadline is lifted
	// once the body is in, so that long SSE answers are not affected.
	rc := http.NewResponseController(w)
	if d := s.opts.ReadTimeout; d > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(d))
	}
	body, err := readBody(r, w, s.opts.MaxBodyBytes)
	if err == nil {
		_ = rc.SetReadDeadline(time.Time{})
	} else {
		// The rest of the body is not worth waiting for: answer and close.
		w.Header().Set("Connection", "close")
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeJSONError(w, http.StatusRequestEntityTooLarge, jsonrpc.NullID, policyError("Request Entity Too Large: the body exceeds %d bytes", s.opts.MaxBodyBytes))
			return
		}
		writeJSONError(w, http.StatusBadRequest, jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeParseError, "Parse error: cannot read the body"))
		return
	}
	acceptJSON, acceptSSE := accepts(r.Header.Get("Accept"))
	if !acceptJSON && !acceptSSE {
		writeJSONError(w, http.StatusNotAcceptable, jsonrpc.NullID, policyError("Not Acceptable: Accept must admit application/json or text/event-stream"))
		return
	}
	o := newHTTPOrigin(principal, r)
	if first(body) == '[' {
		s.serveBatch(w, o, body)
		return
	}
	msg, jerr := jsonrpc.Decode(body)
	if jerr != nil {
		id := jsonrpc.NullID
		if msg != nil && msg.ID.Valid() {
			id = msg.ID
		}
		writeJSONError(w, http.StatusBadRequest, id, jerr)
		return
	}
	out := &postSink{w: w, log: s.log, acceptJSON: acceptJSON, acceptSSE: acceptSSE}
	if t := s.handle(o, msg, out); t != nil {
		// The call runs on the request's own goroutine.
		t.run()
	}
	out.close()
	if out.abort {
		// No response may be written and a JSON answer has no empty form:
		// the connection is dropped rather than invent one.
		panic(http.ErrAbortHandler)
	}
}

// readBody reads the whole body, at most max bytes, into one buffer sized
// by Content-Length when the client sent one.
func readBody(r *http.Request, w http.ResponseWriter, max int64) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, max)
	if n := r.ContentLength; n > 0 && n <= max {
		b := make([]byte, n)
		if _, err := io.ReadFull(body, b); err != nil {
			return nil, err
		}
		// A body longer than announced is a read error too.
		var one [1]byte
		if k, _ := body.Read(one[:]); k > 0 {
			return nil, io.ErrUnexpectedEOF
		}
		return b, nil
	}
	return io.ReadAll(body)
}

// first is the first byte of b that is not JSON white space.
func first(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}

// postSink writes the answer of one POST: JSON, or SSE for a request that
// may stream (tools/call and subscriptions/listen, or any request from a
// client that accepts only SSE). A tools/call whose answer is all it has
// to send, within headerDelay, is answered as JSON when the client
// accepts it.
type postSink struct {
	w                     http.ResponseWriter
	log                   *zap.Logger
	acceptJSON, acceptSSE bool
	sse                   *sseWriter
	abort                 bool
}

func (p *postSink) reply(r *reply) {
	if r.session != "" {
		p.w.Header().Set("Mcp-Session-Id", r.session)
	}
	if r.retryAfter {
		p.w.Header().Set("Retry-After", "1")
	}
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	writeJSON(p.w, status, r.encode(p.log))
}

func (p *postSink) open(method string) {
	if p.acceptSSE && (!p.acceptJSON || method == "tools/call" || method == "subscriptions/listen") {
		if p.sse = newSSE(p.w); p.sse != nil {
			p.sse.begin(keepAliveEvery, p.acceptJSON && method == "tools/call")
		}
	}
}

var errNoStream = errors.New("the response is JSON: no stream for notifications")

func (p *postSink) send(b []byte) error {
	if p.sse == nil {
		return errNoStream
	}
	return p.sse.event(b)
}

func (p *postSink) answer(b []byte) error {
	if p.sse != nil {
		return p.sse.last(b)
	}
	writeJSON(p.w, http.StatusOK, b)
	return nil
}

func (p *postSink) silent() {
	if p.sse == nil {
		p.abort = true
	}
}

func (p *postSink) accepted() { writeHead(p.w, http.StatusAccepted) }

// close ends an SSE answer before the handler returns.
func (p *postSink) close() {
	if p.sse != nil {
		p.sse.end()
	}
}

// serveBatch answers a JSON array body: allowed only inside a 2025-03-26
// session (the one revision with batches), never with initialize or a
// modern claim. Every message of it goes through the pipeline as one
// message of its own (each request counts against the stream cap, runs
// in the session and gets its log line); the answers are collected into
// one array.
func (s *Server) serveBatch(w http.ResponseWriter, o *httpOrigin, body []byte) {
	items, jerr := splitBatch(body)
	if jerr != nil {
		writeJSONError(w, http.StatusBadRequest, jsonrpc.NullID, jerr)
		return
	}
	sess := s.sessions.get(o.header.Get("Mcp-Session-Id"), o.principal)
	if sess == nil || sess.version != Version20250326 || len(items) == 0 {
		writeJSONError(w, http.StatusBadRequest, jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: batches are allowed only in a 2025-03-26 session"))
		return
	}
	msgs := make([]*jsonrpc.Message, len(items))
	for i, it := range items {
		m, jerr := decodeBatchItem(it)
		if jerr != nil {
			writeJSONError(w, http.StatusBadRequest, jsonrpc.NullID, jerr)
			return
		}
		msgs[i] = m
	}
	answers := &batchAnswers{log: s.log}
	var wg sync.WaitGroup
	for _, m := range msgs {
		if t := s.handle(o, m, answers.item(nil)); t != nil {
			wg.Add(1)
			go func() { defer wg.Done(); t.run() }()
		}
	}
	wg.Wait()
	if len(answers.list) == 0 {
		writeHead(w, http.StatusAccepted)
		return
	}
	writeJSON(w, http.StatusOK, answers.array())
}

// splitBatch splits a batch into its items; a syntax error is -32700.
func splitBatch(b []byte) ([][]byte, *jsonrpc.Error) {
	var items [][]byte
	if err := jsonrpc.Array(b, func(item []byte) error { items = append(items, item); return nil }); err != nil {
		_, jerr := jsonrpc.Decode(b) // encoding/json's words for the syntax error
		if jerr == nil || jerr.Code != jsonrpc.CodeParseError {
			jerr = jsonrpc.Errorf(jsonrpc.CodeParseError, "Parse error: %v", err)
		}
		return nil, jerr
	}
	return items, nil
}

// decodeBatchItem decodes one message of a batch, which may be neither
// initialize nor of the modern era (batches exist only in 2025-03-26).
func decodeBatchItem(b []byte) (*jsonrpc.Message, *jsonrpc.Error) {
	m, jerr := jsonrpc.Decode(b)
	if jerr == nil && (m.Method == "initialize" || readMeta(m.Params).claim) {
		jerr = jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: a batch may not carry initialize or a modern _meta")
	}
	return m, jerr
}

// batchAnswers collects the answers of a batch's requests, in the order
// they are given.
type batchAnswers struct {
	log  *zap.Logger
	mu   sync.Mutex
	list [][]byte
}

func (a *batchAnswers) add(b []byte) {
	a.mu.Lock()
	a.list = append(a.list, b)
	a.mu.Unlock()
}

func (a *batchAnswers) array() []byte {
	n := 2
	for _, b := range a.list {
		n += len(b) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, b := range a.list {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, b...)
	}
	return append(out, ']')
}

// item is the sink of one message of the batch: its answer joins the
// array; its notifications go to notify, or nowhere when it is nil (an
// HTTP batch is answered as JSON, which carries none).
func (a *batchAnswers) item(notify func([]byte) error) sink {
	return &batchItem{a: a, notify: notify}
}

type batchItem struct {
	a      *batchAnswers
	notify func([]byte) error
}

func (b *batchItem) reply(r *reply) { b.a.add(r.encode(b.a.log)) }
func (b *batchItem) open(string)    {}
func (b *batchItem) send(m []byte) error {
	if b.notify == nil {
		return errNoStream
	}
	return b.notify(m)
}
func (b *batchItem) answer(m []byte) error { b.a.add(m); return nil }
func (b *batchItem) silent()               {}
func (b *batchItem) accepted()             {}
