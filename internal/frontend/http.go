package frontend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"execd/internal/jsonrpc"
)

const keepAliveEvery = 15 * time.Second

// Handler returns the HTTP handler: the MCP endpoint at server.path and
// /healthz.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if s.draining.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "shutting down\n")
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc(s.cfg.Server.Path, s.serveMCP)
	return mux
}

// writeJSONError answers with an HTTP status and a JSON-RPC error body.
func writeJSONError(w http.ResponseWriter, status int, id jsonrpc.ID, e *jsonrpc.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(jsonrpc.EncodeError(id, e))
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// isLoopbackHost reports whether a Host header names this machine.
func isLoopbackHost(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.Trim(h, "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// originAllowed applies server.allowed_origins; with none configured, only
// loopback origins are allowed.
func (s *Server) originAllowed(origin string) bool {
	for _, o := range s.cfg.Server.AllowedOrigins {
		if o == "*" || strings.EqualFold(o, origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	return isLoopbackHost(u.Host)
}

// listenerIsLoopback reports whether the configured listen address is on a
// loopback interface, where a foreign Host means DNS rebinding.
func (s *Server) listenerIsLoopback() bool {
	host, _, err := net.SplitHostPort(s.cfg.Server.Listen)
	if err != nil {
		return true
	}
	if host == "" {
		return false
	}
	return isLoopbackHost(host)
}

func acceptAdmits(accept, typ string) bool {
	if strings.TrimSpace(accept) == "" {
		return true
	}
	major := typ[:strings.IndexByte(typ, '/')]
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if q, ok := params["q"]; ok && strings.TrimSpace(q) == "0" {
			continue
		}
		if mt == "*/*" || mt == typ || mt == major+"/*" {
			return true
		}
	}
	return false
}

func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != s.cfg.Server.Path {
		http.NotFound(w, r)
		return
	}
	// Origin and Host first (DNS rebinding), then auth.
	if origin := r.Header.Get("Origin"); origin != "" && !s.originAllowed(origin) {
		writeJSONError(w, http.StatusForbidden, jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeServerPolicy, "Forbidden: origin %q is not allowed", origin))
		return
	}
	if s.listenerIsLoopback() && !isLoopbackHost(r.Host) {
		writeJSONError(w, http.StatusForbidden, jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeServerPolicy, "Forbidden: host %q is not allowed", r.Host))
		return
	}
	principal := s.auth.principal(r.Header.Get("Authorization"))
	if principal == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="execd"`)
		writeJSONError(w, http.StatusUnauthorized, jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeServerPolicy, "Unauthorized: a valid bearer token is required"))
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.servePost(w, r, principal)
	case http.MethodGet, http.MethodDelete:
		sid := r.Header.Get("Mcp-Session-Id")
		if sid == "" {
			w.Header().Set("Allow", "POST")
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		sess := s.sessions.get(sid, principal)
		if sess == nil {
			writeJSONError(w, http.StatusNotFound, jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeSessionNotFound, "Session not found"))
			return
		}
		if r.Method == http.MethodDelete {
			s.sessions.remove(sid, principal)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		release, ok := s.openStream(principal)
		if !ok {
			s.tooMany(w, jsonrpc.NullID)
			return
		}
		defer release()
		s.serveGetStream(w, r, sess)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

// serveGetStream holds a legacy session's GET stream open with keep-alive
// comments until the client leaves, the session ends or execd stops. execd
// sends nothing else on it.
func (s *Server) serveGetStream(w http.ResponseWriter, r *http.Request, sess *session) {
	if !acceptAdmits(r.Header.Get("Accept"), "text/event-stream") {
		writeJSONError(w, http.StatusNotAcceptable, jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeServerPolicy, "Not Acceptable: the GET stream is text/event-stream"))
		return
	}
	sw := newSSE(w)
	if sw == nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	sw.begin(keepAliveEvery)
	defer sw.end()
	select {
	case <-r.Context().Done():
	case <-sess.ctx.Done():
	case <-s.stopping:
	}
}

func (s *Server) servePost(w http.ResponseWriter, r *http.Request, principal string) {
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != "application/json" {
		writeJSONError(w, http.StatusUnsupportedMediaType, jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeServerPolicy, "Unsupported Media Type: Content-Type must be application/json"))
		return
	}
	// A slow body is cut off by server.read_timeout; the deadline is lifted
	// once the body is in, so that long SSE answers are not affected.
	rc := http.NewResponseController(w)
	if d := s.cfg.Server.ReadTimeout.Duration; d > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(d))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.Server.MaxBodyBytes))
	if err == nil {
		_ = rc.SetReadDeadline(time.Time{})
	} else {
		// The rest of the body is not worth waiting for: answer and close.
		w.Header().Set("Connection", "close")
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeJSONError(w, http.StatusRequestEntityTooLarge, jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeServerPolicy, "Request Entity Too Large: the body exceeds %d bytes", s.cfg.Server.MaxBodyBytes))
			return
		}
		writeJSONError(w, http.StatusBadRequest, jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeParseError, "Parse error: cannot read the body"))
		return
	}
	accept := r.Header.Get("Accept")
	acceptJSON, acceptSSE := acceptAdmits(accept, "application/json"), acceptAdmits(accept, "text/event-stream")
	if !acceptJSON && !acceptSSE {
		writeJSONError(w, http.StatusNotAcceptable, jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeServerPolicy, "Not Acceptable: Accept must admit application/json or text/event-stream"))
		return
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		s.serveBatch(w, r, principal, trimmed)
		return
	}
	msg, jerr := jsonrpc.Decode(trimmed)
	if jerr != nil {
		id := jsonrpc.NullID
		if msg != nil && msg.ID.Valid() {
			id = msg.ID
		}
		writeJSONError(w, http.StatusBadRequest, id, jerr)
		return
	}
	// Requests count against the principal's cap; notifications and
	// responses never do, so a cancel always gets through.
	if msg.IsRequest() {
		release, ok := s.openStream(principal)
		if !ok {
			s.tooMany(w, msg.ID)
			return
		}
		defer release()
	}
	h := &httpReq{s: s, w: w, r: r, principal: principal, acceptJSON: acceptJSON, acceptSSE: acceptSSE}
	h.handle(msg)
}

func (s *Server) tooMany(w http.ResponseWriter, id jsonrpc.ID) {
	w.Header().Set("Retry-After", "1")
	writeJSONError(w, http.StatusTooManyRequests, id, jsonrpc.Errorf(jsonrpc.CodeServerPolicy,
		"Too Many Requests: at most %d requests and streams may be open at once (server.max_streams_per_principal)", s.cfg.Server.MaxStreams))
}

// httpReq is one POST being served.
type httpReq struct {
	s          *Server
	w          http.ResponseWriter
	r          *http.Request
	principal  string
	acceptJSON bool
	acceptSSE  bool
}

func (h *httpReq) fail(status int, id jsonrpc.ID, e *jsonrpc.Error) {
	writeJSONError(h.w, status, id, e)
}

func (h *httpReq) handle(msg *jsonrpc.Message) {
	s := h.s
	// Interception: responses are delivered to the server request that
	// waits for them; nothing is routed, nothing waits.
	if msg.IsResponse() {
		if sid := h.r.Header.Get("Mcp-Session-Id"); sid != "" {
			if sess := s.sessions.get(sid, h.principal); sess != nil {
				s.pending.deliver("s:"+sess.id, msg)
			}
		}
		h.w.WriteHeader(http.StatusAccepted)
		return
	}
	meta := readMeta(msg.Params)
	hdrVersion := strings.TrimSpace(h.r.Header.Get("MCP-Protocol-Version"))
	modernHeader := hdrVersion != "" && hdrVersion >= VersionModern

	switch {
	case msg.Method == "initialize" && !meta.claim:
		if modernHeader {
			h.fail(http.StatusBadRequest, msg.ID, headerError("MCP-Protocol-Version", "a legacy version with initialize", hdrVersion))
			return
		}
		h.serveLegacy(msg, meta)
	case meta.claim:
		h.serveModern(msg, meta, hdrVersion)
	case modernHeader:
		if msg.IsNotification() {
			h.w.WriteHeader(http.StatusAccepted)
			return
		}
		missing := []string{metaVersion}
		if _, ok := meta.raw[metaCapabilities]; !ok {
			missing = append(missing, metaCapabilities)
		}
		h.fail(http.StatusBadRequest, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: missing _meta %s (MCP-Protocol-Version %s needs the per-request envelope)", strings.Join(missing, ", "), hdrVersion))
	default:
		h.serveLegacy(msg, meta)
	}
}

// serveModern applies §1.2 step 9 and dispatches.
func (h *httpReq) serveModern(msg *jsonrpc.Message, meta requestMeta, hdrVersion string) {
	s := h.s
	if msg.IsNotification() {
		// Modern HTTP notifications carry nothing execd acts on: a cancel's
		// id cannot be attributed to a stateless run (closing the stream is
		// the cancel).
		h.w.WriteHeader(http.StatusAccepted)
		return
	}
	if jerr := meta.validateModern(); jerr != nil {
		h.fail(http.StatusBadRequest, msg.ID, jerr)
		return
	}
	if hdrVersion != meta.version {
		h.fail(http.StatusBadRequest, msg.ID, headerError("MCP-Protocol-Version", meta.version, hdrVersion))
		return
	}
	if !isModernVersion(meta.version) {
		h.fail(http.StatusBadRequest, msg.ID, versionError(meta.version))
		return
	}
	if jerr := h.checkMethodHeaders(msg, meta); jerr != nil {
		h.fail(http.StatusBadRequest, msg.ID, jerr)
		return
	}
	m, jerr := s.lookup(EraModern, msg.Method)
	if jerr != nil {
		h.fail(http.StatusNotFound, msg.ID, jerr)
		return
	}
	if msg.Method == "tools/call" {
		if status, jerr := h.checkToolHeaders(msg, meta); jerr != nil {
			h.fail(status, msg.ID, jerr)
			return
		}
	}
	logMin := -1
	if meta.logLevel != "" {
		logMin = levelRank(meta.logLevel)
	}
	c := &call{era: EraModern, version: meta.version, principal: h.principal, transport: "http",
		id: msg.ID, method: msg.Method, params: msg.Params, meta: meta, logMin: logMin}
	// Modern: closing the response stream is the cancel (MH-11).
	h.run(c, m, true, "")
}

// checkMethodHeaders validates Mcp-Method and Mcp-Name (MH-6, MH-7).
func (h *httpReq) checkMethodHeaders(msg *jsonrpc.Message, meta requestMeta) *jsonrpc.Error {
	vals := h.r.Header.Values("Mcp-Method")
	if len(vals) == 0 {
		return headerError("Mcp-Method", msg.Method, "")
	}
	got, err := decodeHeaderValue(vals[0])
	if err != nil || len(vals) > 1 {
		return headerError("Mcp-Method", msg.Method, vals[0])
	}
	if got != msg.Method {
		return headerError("Mcp-Method", msg.Method, got)
	}
	var want string
	switch msg.Method {
	case "tools/call", "prompts/get":
		want = rawString(meta.head.Name)
	case "resources/read":
		want = rawString(meta.head.URI)
	default:
		return nil
	}
	nv := h.r.Header.Values("Mcp-Name")
	if len(nv) == 0 {
		return headerError("Mcp-Name", want, "")
	}
	name, err := decodeHeaderValue(nv[0])
	if err != nil || len(nv) > 1 {
		return headerError("Mcp-Name", want, nv[0])
	}
	if name != want {
		return headerError("Mcp-Name", want, name)
	}
	return nil
}

// checkToolHeaders validates the client capabilities a tool needs (MM-2)
// and its Mcp-Param-* headers (MH-8).
func (h *httpReq) checkToolHeaders(msg *jsonrpc.Message, meta requestMeta) (int, *jsonrpc.Error) {
	p, jerr := parseToolCall(meta)
	if jerr != nil {
		return http.StatusOK, nil // the handler answers in-band
	}
	t := h.s.tools.byName[p.Name]
	if t == nil {
		return http.StatusOK, nil
	}
	if miss := missingCapabilities(t.needs, meta.capabilities); miss != nil {
		return http.StatusBadRequest, &jsonrpc.Error{Code: jsonrpc.CodeMissingCapability,
			Message: "Missing required client capability", Data: map[string]any{"requiredCapabilities": miss}}
	}
	if len(t.headers) == 0 {
		return http.StatusOK, nil
	}
	var args map[string]json.RawMessage
	_ = json.Unmarshal(p.Arguments, &args)
	for hname, arg := range t.headers {
		header := "Mcp-Param-" + headerTitle(hname)
		vals := h.r.Header.Values(header)
		raw, present := args[arg]
		if present && string(bytes.TrimSpace(raw)) == "null" {
			present = false
		}
		var want string
		if present {
			if json.Unmarshal(raw, &want) != nil {
				// Not a string: the tool answers the bad argument in-band.
				continue
			}
		}
		switch {
		case !present && len(vals) == 0:
		case present && len(vals) == 0:
			return http.StatusBadRequest, headerError(header, want, "")
		case len(vals) > 1:
			return http.StatusBadRequest, headerError(header, want, strings.Join(vals, ", "))
		default:
			got, err := decodeHeaderValue(vals[0])
			if err != nil {
				e := headerError(header, want, vals[0])
				e.Message = "Invalid header value: " + header + ": " + err.Error()
				return http.StatusBadRequest, e
			}
			if !present || got != want {
				return http.StatusBadRequest, headerError(header, want, got)
			}
		}
	}
	return http.StatusOK, nil
}

// headerTitle turns "workspace" into "Workspace" for messages.
func headerTitle(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// serveLegacy applies §1.2 step 10 and dispatches.
func (h *httpReq) serveLegacy(msg *jsonrpc.Message, meta requestMeta) {
	s := h.s
	sid := h.r.Header.Get("Mcp-Session-Id")
	if msg.Method == "initialize" {
		if sid != "" {
			h.fail(http.StatusBadRequest, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: initialize inside a session; start a new session without Mcp-Session-Id"))
			return
		}
		if !msg.IsRequest() {
			h.fail(http.StatusBadRequest, jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: initialize must be a request"))
			return
		}
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(msg.Params, &p)
		res, v := s.initializeResult(p.ProtocolVersion)
		sess := s.sessions.create(h.principal, v)
		b, _ := jsonrpc.EncodeResult(msg.ID, res)
		h.w.Header().Set("Mcp-Session-Id", sess.id)
		writeJSON(h.w, http.StatusOK, b)
		s.log.Info("session", zap.String("session", sess.id), zap.String("version", v), zap.String("principal", h.principal))
		return
	}
	if sid == "" {
		if msg.IsNotification() {
			// A notification outside any session has nothing to act on.
			h.w.WriteHeader(http.StatusAccepted)
			return
		}
		h.fail(http.StatusBadRequest, msg.ID, jsonrpc.Errorf(jsonrpc.CodeServerPolicy, "Bad Request: Mcp-Session-Id header is required (send initialize first)"))
		return
	}
	sess := s.sessions.get(sid, h.principal)
	if sess == nil {
		h.fail(http.StatusNotFound, msg.ID, jsonrpc.Errorf(jsonrpc.CodeSessionNotFound, "Session not found"))
		return
	}
	if hv := strings.TrimSpace(h.r.Header.Get("MCP-Protocol-Version")); hv != "" && !isLegacyVersion(hv) {
		h.fail(http.StatusBadRequest, msg.ID, &jsonrpc.Error{Code: jsonrpc.CodeServerPolicy,
			Message: "Bad Request: unsupported MCP-Protocol-Version " + hv,
			Data:    map[string]any{"supported": legacyVersions, "requested": hv}})
		return
	}
	if msg.IsNotification() {
		if msg.Method == "notifications/cancelled" {
			s.cancelFromNotification("s:"+sess.id, msg.Params)
		}
		h.w.WriteHeader(http.StatusAccepted)
		return
	}
	m, jerr := s.lookup(EraLegacy, msg.Method)
	if jerr != nil {
		h.fail(http.StatusOK, msg.ID, jerr)
		return
	}
	c := &call{era: EraLegacy, version: sess.version, principal: h.principal, transport: "http",
		id: msg.ID, method: msg.Method, params: msg.Params, meta: meta, session: sess, logMin: int(sess.logMin.Load())}
	h.run(c, m, s.cfg.Protocol.CancelOnDisconnect, "s:"+sess.id)
}

// cancelFromNotification handles notifications/cancelled: the named
// request of this scope stops; unknown or malformed cancels are ignored.
func (s *Server) cancelFromNotification(scope string, params json.RawMessage) {
	var p struct {
		RequestID jsonrpc.ID `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || !p.RequestID.Valid() {
		return
	}
	if s.inflight.cancel(scope, p.RequestID) {
		s.log.Debug("cancelled", zap.String("scope", scope), zap.String("id", p.RequestID.String()))
	}
}

// run executes a validated call and writes its answer: SSE for tools/call
// and listen when the client accepts it, JSON otherwise. cancelOnClose ties
// the call to the HTTP request's life. scope registers the call for
// notifications/cancelled ("" = not cancellable by notification).
func (h *httpReq) run(c *call, m method, cancelOnClose bool, scope string) {
	s := h.s
	start := time.Now()
	ctx, cancel := context.WithCancelCause(s.runCtx)
	defer cancel(nil)
	if cancelOnClose {
		stop := context.AfterFunc(h.r.Context(), func() { cancel(errClientGone) })
		defer stop()
	}
	if c.session != nil {
		stop := context.AfterFunc(c.session.ctx, func() { cancel(context.Cause(c.session.ctx)) })
		defer stop()
		defer c.session.begin()()
	}
	if scope != "" {
		if !s.inflight.add(scope, c.id, cancel) {
			h.fail(http.StatusOK, c.id, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: request id %s is already in use in this session", c.id))
			return
		}
		defer s.inflight.remove(scope, c.id)
	}
	s.calls.Add(1)
	defer s.calls.Done()

	useSSE := h.acceptSSE && (!h.acceptJSON || c.method == "tools/call" || c.method == "subscriptions/listen")
	var sw *sseWriter
	if useSSE {
		sw = newSSE(h.w)
	}
	if sw != nil {
		sw.begin(keepAliveEvery)
		defer sw.end()
		c.out = &sseOut{sw: sw, pending: s.pending, scope: scope}
	} else {
		c.out = jsonOnly{}
	}

	res, jerr := s.serve(ctx, c, m)
	c.finish()
	status := "ok"
	switch {
	case res == nil && jerr == nil:
		status = "cancelled"
		if sw == nil {
			// No response may be sent: drop the connection rather than
			// invent one.
			s.logCall(c, start, status)
			panic(http.ErrAbortHandler)
		}
	case jerr != nil:
		status = "error"
		b := jsonrpc.EncodeError(c.id, jerr)
		if sw != nil {
			_ = sw.last(b)
		} else {
			writeJSON(h.w, http.StatusOK, b)
		}
	default:
		b := jsonrpc.EncodeRawResult(c.id, res)
		if sw != nil {
			if sw.last(b) != nil {
				status = "undelivered"
			}
		} else {
			writeJSON(h.w, http.StatusOK, b)
		}
	}
	s.logCall(c, start, status)
}

func (s *Server) logCall(c *call, start time.Time, status string) {
	c.mu.Lock()
	ws := c.workspace
	c.mu.Unlock()
	fields := []zap.Field{
		zap.String("id", c.id.String()), zap.String("method", c.method), zap.String("era", c.era.String()),
		zap.String("transport", c.transport), zap.String("principal", c.principal),
		zap.String("status", status), zap.Duration("duration", time.Since(start)),
	}
	if ws != "" {
		fields = append(fields, zap.String("workspace", ws))
	}
	s.log.Info("request", fields...)
}

// jsonOnly is the outbound of a JSON response: it carries no notifications.
type jsonOnly struct{}

func (jsonOnly) Notify(string, any) error { return errNoStream }
func (jsonOnly) Request(jsonrpc.ID, string, any) error {
	return errNoStream
}

var errNoStream = errors.New("the response is JSON: no stream for notifications")

// sseOut writes a call's notifications and server requests on its SSE
// stream.
type sseOut struct {
	sw      *sseWriter
	pending *pendingRequests
	scope   string
}

func (o *sseOut) Notify(method string, params any) error {
	b, err := jsonrpc.EncodeNotification(method, params)
	if err != nil {
		return err
	}
	return o.sw.event(b)
}

func (o *sseOut) Request(id jsonrpc.ID, method string, params any) error {
	b, err := jsonrpc.EncodeRequest(id, method, params)
	if err != nil {
		return err
	}
	return o.sw.event(b)
}

// sseWriter writes server-sent events, flushing each one. Writes are
// serialised; after a failed write every later write fails.
type sseWriter struct {
	mu  sync.Mutex
	w   http.ResponseWriter
	f   http.Flusher
	err error

	timer     *time.Timer // header delay, then keep-alives
	keepAlive time.Duration
	flushed   bool
}

func newSSE(w http.ResponseWriter) *sseWriter {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil
	}
	return &sseWriter{w: w, f: f}
}

// headerDelay is how long the headers of a silent stream wait for the
// first event, so that a quick answer leaves in one write while a slow one
// still shows the client its stream at once.
const headerDelay = 20 * time.Millisecond

// begin sends the stream's status and arms the stream's one timer: the
// headers of a silent stream leave after headerDelay, then a keep-alive
// comment every keepAlive (0: none).
func (s *sseWriter) begin(keepAlive time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
	s.keepAlive = keepAlive
	s.timer = time.AfterFunc(headerDelay, s.tick)
}

func (s *sseWriter) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	if s.flushed && s.put([][]byte{sseKeepAlive, sseEnd}) != nil {
		return
	}
	s.f.Flush()
	s.flushed = true
	if s.keepAlive > 0 {
		s.timer.Reset(s.keepAlive)
	}
}

// end stops the timer and every later write; call it before the handler
// returns.
func (s *sseWriter) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.err = errStreamEnded
}

var errStreamEnded = errors.New("stream ended")

func (s *sseWriter) write(parts ...[]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.put(parts); err != nil {
		return err
	}
	s.f.Flush()
	s.flushed = true
	return nil
}

// last writes the stream's final event and ends the stream. It is not
// flushed: the handler returns next and net/http sends what is buffered in
// one write, so a stream whose only event is its answer costs one write
// (with a Content-Length) instead of a flush and a closing chunk.
func (s *sseWriter) last(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.put([][]byte{sseData, b, sseEnd}); err != nil {
		return err
	}
	s.err = errStreamEnded
	return nil
}

// put writes parts unless the stream has failed or ended; s.mu is held.
func (s *sseWriter) put(parts [][]byte) error {
	if s.err != nil {
		return s.err
	}
	for _, p := range parts {
		if _, err := s.w.Write(p); err != nil {
			s.err = err
			return err
		}
	}
	return nil
}

var (
	sseData      = []byte("data: ")
	sseEnd       = []byte("\n\n")
	sseKeepAlive = []byte(": keepalive")
)

// event writes one message as a data event. JSON from encoding/json has no
// raw newlines, so one data line suffices.
func (s *sseWriter) event(b []byte) error { return s.write(sseData, b, sseEnd) }

// serveBatch answers a JSON array body: allowed only inside a 2025-03-26
// session, never with initialize or a modern claim.
func (s *Server) serveBatch(w http.ResponseWriter, r *http.Request, principal string, body []byte) {
	var items []json.RawMessage
	if err := json.Unmarshal(body, &items); err != nil {
		writeJSONError(w, http.StatusBadRequest, jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeParseError, "Parse error: %v", err))
		return
	}
	sess := s.sessions.get(r.Header.Get("Mcp-Session-Id"), principal)
	if sess == nil || sess.version != Version20250326 || len(items) == 0 {
		writeJSONError(w, http.StatusBadRequest, jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: batches are allowed only in a 2025-03-26 session"))
		return
	}
	msgs := make([]*jsonrpc.Message, len(items))
	for i, it := range items {
		m, jerr := jsonrpc.Decode(it)
		if jerr == nil && (m.Method == "initialize" || readMeta(m.Params).claim) {
			jerr = jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: a batch may not carry initialize or a modern _meta")
		}
		if jerr != nil {
			writeJSONError(w, http.StatusBadRequest, jsonrpc.NullID, jerr)
			return
		}
		msgs[i] = m
	}
	var out []json.RawMessage
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range msgs {
		switch {
		case m.IsResponse():
			s.pending.deliver("s:"+sess.id, m)
		case m.IsNotification():
			if m.Method == "notifications/cancelled" {
				s.cancelFromNotification("s:"+sess.id, m.Params)
			}
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				b := s.serveQuiet(r.Context(), sess, principal, m)
				if b != nil {
					mu.Lock()
					out = append(out, b)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if len(out) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	b, _ := json.Marshal(out)
	writeJSON(w, http.StatusOK, b)
}

// serveQuiet serves one request of a batch: a JSON answer, no stream.
func (s *Server) serveQuiet(reqCtx context.Context, sess *session, principal string, msg *jsonrpc.Message) []byte {
	m, jerr := s.lookup(EraLegacy, msg.Method)
	if jerr != nil {
		return jsonrpc.EncodeError(msg.ID, jerr)
	}
	ctx, cancel := context.WithCancelCause(s.runCtx)
	defer cancel(nil)
	scope := "s:" + sess.id
	if !s.inflight.add(scope, msg.ID, cancel) {
		return jsonrpc.EncodeError(msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: request id %s is already in use in this session", msg.ID))
	}
	defer s.inflight.remove(scope, msg.ID)
	if s.cfg.Protocol.CancelOnDisconnect {
		stop := context.AfterFunc(reqCtx, func() { cancel(errClientGone) })
		defer stop()
	}
	s.calls.Add(1)
	defer s.calls.Done()
	c := &call{era: EraLegacy, version: sess.version, principal: principal, transport: "http", id: msg.ID,
		method: msg.Method, params: msg.Params, meta: readMeta(msg.Params), session: sess, out: jsonOnly{}, logMin: -1}
	res, jerr := s.serve(ctx, c, m)
	c.finish()
	switch {
	case jerr != nil:
		return jsonrpc.EncodeError(msg.ID, jerr)
	case res == nil:
		return nil
	}
	return jsonrpc.EncodeRawResult(msg.ID, res)
}
