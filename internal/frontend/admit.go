package frontend

import (
	"net/http"
	"strings"

	"go.uber.org/zap"

	"execd/internal/jsonrpc"
)

// The era rules: which era a message is served in, which peer it belongs
// to, and whether a request may run. HTTP decides per message, from the
// body first (a _meta with io.modelcontextprotocol/protocolVersion is the
// 2026-07-28 era; RATIONALE.md) and the headers as a cross-check; stdio
// pins the process's era on its first accepted message. The refusals are
// answered with the HTTP status the rule names; stdio and batch items
// carry only the JSON-RPC error.

// admission is what the era rules found for one message.
type admission struct {
	era     Era
	version string
	peer    *peer    // the scope of its id; nil: none (modern HTTP)
	session *session // legacy HTTP
	logMin  int
}

// stdio era pins: a process starts unpinned, and its first accepted
// message (initialize, or a request with the modern envelope) pins it;
// errors do not pin, and ping answers before pinning.
const (
	pinNone int32 = iota
	pinLegacy
	pinModern
)

// admitHTTP classifies one message of a POST. In order: a client response
// belongs to its session; initialize starts the legacy era (refused with a
// modern MCP-Protocol-Version); a _meta claim is the modern era; a modern
// header without a claim is refused (-32602, missing envelope); anything
// else is legacy and needs a live session of this principal and a legacy
// MCP-Protocol-Version, when one is sent.
func (s *Server) admitHTTP(o *httpOrigin, msg *jsonrpc.Message, meta *requestMeta) (admission, *reply) {
	hdr := o.header
	if msg.IsResponse() {
		// A client's answer to a server request goes to the session's
		// waiting request if the session is live, and is accepted anyway.
		a := admission{era: EraLegacy}
		if sess := s.sessions.get(hdr.Get("Mcp-Session-Id"), o.principal); sess != nil {
			a.peer = sess.peer
		}
		return a, nil
	}
	hdrVersion := strings.TrimSpace(hdr.Get("Mcp-Protocol-Version")) // canonical: Get copies no other spelling
	modernHeader := hdrVersion != "" && hdrVersion >= VersionModern
	switch {
	case msg.Method == "initialize" && !meta.claim:
		if modernHeader {
			return admission{}, refuse(http.StatusBadRequest, msg.ID, headerError("MCP-Protocol-Version", "a legacy version with initialize", hdrVersion, false))
		}
		return admission{}, s.handshakeHTTP(o, msg)
	case meta.claim:
		if !msg.IsRequest() {
			// Nothing a modern notification says is acted on over HTTP: a
			// cancel's id cannot be attributed to a stateless run (closing
			// the stream is the cancel).
			return admission{era: EraModern}, nil
		}
		return s.admitModern(msg, meta, hdr, hdrVersion)
	case modernHeader:
		if !msg.IsRequest() {
			return admission{era: EraModern}, nil
		}
		missing := []string{metaVersion}
		if meta.capabilities == nil {
			missing = append(missing, metaCapabilities)
		}
		return admission{era: EraModern}, refuse(http.StatusBadRequest, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams,
			"Invalid params: missing _meta %s (MCP-Protocol-Version %s needs the per-request envelope)", strings.Join(missing, ", "), hdrVersion))
	}
	a := admission{era: EraLegacy}
	sid := hdr.Get("Mcp-Session-Id")
	if sid == "" {
		if !msg.IsRequest() {
			return a, nil // a notification outside any session has nothing to act on
		}
		return a, refuse(http.StatusBadRequest, msg.ID, jsonrpc.Errorf(jsonrpc.CodeServerPolicy, "Bad Request: Mcp-Session-Id header is required (send initialize first)"))
	}
	sess := s.sessions.get(sid, o.principal)
	if sess == nil {
		return a, refuse(http.StatusNotFound, msg.ID, jsonrpc.Errorf(jsonrpc.CodeSessionNotFound, "Session not found"))
	}
	if hdrVersion != "" && !isLegacyVersion(hdrVersion) {
		return a, refuse(http.StatusBadRequest, msg.ID, &jsonrpc.Error{Code: jsonrpc.CodeServerPolicy,
			Message: "Bad Request: unsupported MCP-Protocol-Version " + hdrVersion,
			Data:    map[string]any{"supported": legacyVersions, "requested": hdrVersion}})
	}
	a.version, a.peer, a.session, a.logMin = sess.version, sess.peer, sess, int(sess.peer.logMin.Load())
	return a, nil
}

// handshakeHTTP answers a legacy initialize: a new session.
func (s *Server) handshakeHTTP(o *httpOrigin, msg *jsonrpc.Message) *reply {
	if o.header.Get("Mcp-Session-Id") != "" {
		return refuse(http.StatusBadRequest, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: initialize inside a session; start a new session without Mcp-Session-Id"))
	}
	if !msg.IsRequest() {
		return refuse(http.StatusBadRequest, jsonrpc.NullID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: initialize must be a request"))
	}
	requested, caps, jerr := validateInitialize(msg.Params)
	if jerr != nil {
		return refuse(http.StatusBadRequest, msg.ID, jerr)
	}
	res, v := s.initializeResult(requested)
	sess := s.sessions.create(o.principal, v, caps)
	s.log.Info("session", zap.String("session", sess.id), zap.String("version", v), zap.String("principal", o.principal))
	return &reply{status: http.StatusOK, id: msg.ID, result: res, session: sess.id}
}

// admitModern applies the modern request ladder, over HTTP and per line on
// stdio (where hdr is nil and no header is checked): the envelope (-32602),
// MCP-Protocol-Version equal to the envelope's version (-32020, checked
// before the version itself), a supported version (-32022), Mcp-Method and
// Mcp-Name equal to the body (-32020).
func (s *Server) admitModern(msg *jsonrpc.Message, meta *requestMeta, hdr http.Header, hdrVersion string) (admission, *reply) {
	a := admission{era: EraModern, logMin: -1}
	if jerr := meta.validateModern(); jerr != nil {
		return a, refuse(http.StatusBadRequest, msg.ID, jerr)
	}
	if hdr != nil && hdrVersion != meta.versionStr {
		return a, refuse(http.StatusBadRequest, msg.ID, headerError("MCP-Protocol-Version", meta.versionStr, hdrVersion, hdrVersion == ""))
	}
	if !isModernVersion(meta.versionStr) {
		return a, refuse(http.StatusBadRequest, msg.ID, versionError(meta.versionStr))
	}
	if hdr != nil {
		if jerr := checkMethodHeaders(hdr, msg, meta); jerr != nil {
			return a, refuse(http.StatusBadRequest, msg.ID, jerr)
		}
	}
	a.version = meta.versionStr
	if meta.logLevel != "" {
		a.logMin = levelRank(meta.logLevel)
	}
	return a, nil
}

// admitStdio applies the era pin to one message of a stdio process.
func (s *Server) admitStdio(p *stdioProc, msg *jsonrpc.Message, meta *requestMeta) (admission, *reply) {
	a := admission{era: EraLegacy, peer: p.peer}
	if !msg.IsRequest() {
		return a, nil // cancels and responses are honoured whatever the pin
	}
	pin := p.pin.Load()
	switch {
	case meta.claim:
		if pin == pinLegacy {
			return a, refuse(0, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: this process is pinned to the legacy era (initialize was sent); _meta %s is not accepted", metaVersion))
		}
		m, r := s.admitModern(msg, meta, nil, "")
		m.peer = p.peer
		return m, r
	case msg.Method == "initialize":
		if pin == pinModern {
			return a, refuse(0, msg.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: initialize (this process speaks %s)", VersionModern))
		}
		if pin == pinLegacy {
			return a, refuse(0, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: initialize was already sent"))
		}
		requested, caps, jerr := validateInitialize(msg.Params)
		if jerr != nil {
			return a, refuse(0, msg.ID, jerr)
		}
		res, v := s.initializeResult(requested)
		p.version = v
		p.peer.setCapabilities(caps)
		p.pin.Store(pinLegacy)
		return a, &reply{id: msg.ID, result: res}
	case pin == pinModern:
		a.era = EraModern
		if removedInModern[msg.Method] {
			return a, refuse(0, msg.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: %s", msg.Method))
		}
		return a, refuse(0, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: missing _meta %s, %s", metaVersion, metaCapabilities))
	case pin == pinNone:
		if msg.Method == "ping" {
			return a, &reply{id: msg.ID, result: struct{}{}}
		}
		return a, refuse(0, msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: send initialize or a request with modern _meta first"))
	}
	a.version, a.logMin = p.version, int(p.peer.logMin.Load())
	return a, nil
}

// admitRequest finds the method of a request its era admitted and, for a
// tool call, reads what must be judged before it runs (prepareTool). It
// returns the call, ready but for its sink.
func (s *Server) admitRequest(o origin, a admission, msg *jsonrpc.Message, meta requestMeta) (*Call, method, *reply) {
	m, jerr := s.lookup(a.era, msg.Method)
	if jerr != nil {
		status := http.StatusOK
		if a.era == EraModern {
			status = http.StatusNotFound // streamable-http.mdx of 2026-07-28
		}
		return nil, method{}, refuse(status, msg.ID, jerr)
	}
	src := o.src()
	c := &Call{srv: s, era: a.era, version: a.version, principal: src.principal, transport: src.transport,
		id: msg.ID, method: msg.Method, params: msg.Params, meta: meta, peer: a.peer, logMin: a.logMin}
	if a.era == EraLegacy {
		if jerr := c.meta.validateLegacy(); jerr != nil {
			return nil, method{}, refuse(http.StatusOK, msg.ID, jerr)
		}
	}
	if m.taskMethod {
		if a.era == EraModern && !c.meta.hasExtension(extTasks) {
			return nil, method{}, missingTasksExtension(msg.ID)
		}
		if a.era == EraLegacy && a.version != VersionLatest {
			return nil, method{}, refuse(http.StatusOK, msg.ID, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: %s (tasks exist from protocol version %s)", msg.Method, VersionLatest))
		}
	}
	if msg.Method == "tools/call" {
		if r := s.prepareTool(c, src.header); r != nil {
			return nil, method{}, r
		}
	}
	return c, m, nil
}
