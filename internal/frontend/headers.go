package frontend

import (
	"encoding/base64"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"execd/internal/jsonrpc"
)

// HTTP headers: the DNS-rebinding checks (Origin, Host), Accept, and the
// headers a modern client mirrors from the body, which must agree with it
// (spec: docs/specification/2026-07-28/basic/transports/streamable-http.mdx
// §Standard headers and §Custom headers).

// isLoopbackHost reports whether a Host header names this machine.
func isLoopbackHost(host string) bool {
	h := host
	if strings.LastIndexByte(h, ':') > strings.LastIndexByte(h, ']') {
		if hh, _, err := net.SplitHostPort(host); err == nil {
			h = hh
		}
	}
	h = strings.Trim(h, "[]")
	if h == "127.0.0.1" || h == "::1" || strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// originAllowed applies Options.AllowedOrigins; loopback origins are
// always allowed.
func (s *Server) originAllowed(origin string) bool {
	for _, o := range s.opts.AllowedOrigins {
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

// listenerIsLoopback reports whether the listen address is on a loopback
// interface, where a foreign Host means DNS rebinding.
func listenerIsLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return true
	}
	if host == "" {
		return false
	}
	return isLoopbackHost(host)
}

// accepts reports which of the two answer types an Accept header admits;
// the values real clients send are known without parsing.
func accepts(accept string) (jsonOK, sseOK bool) {
	switch accept {
	case "", "*/*", "application/json, text/event-stream", "text/event-stream, application/json":
		return true, true
	case "application/json":
		return true, false
	case "text/event-stream":
		return false, true
	}
	return acceptAdmits(accept, "application/json"), acceptAdmits(accept, "text/event-stream")
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

// checkMethodHeaders validates Mcp-Method and Mcp-Name against the body.
func checkMethodHeaders(hdr http.Header, msg *jsonrpc.Message, meta *requestMeta) *jsonrpc.Error {
	if jerr := checkMirror(hdr, "Mcp-Method", msg.Method); jerr != nil {
		return jerr
	}
	switch msg.Method {
	case "tools/call", "prompts/get":
		return checkMirror(hdr, "Mcp-Name", rawString(meta.head.name))
	case "resources/read":
		return checkMirror(hdr, "Mcp-Name", rawString(meta.head.uri))
	case "tasks/get", "tasks/update", "tasks/cancel":
		// The task's instance is found by its id (experimental-ext-tasks
		// tasks.mdx, Streamable HTTP: Routing Headers).
		return checkMirror(hdr, "Mcp-Name", rawString(meta.head.taskID))
	}
	return nil
}

// checkMirror checks that header is present once and, decoded, equals want.
func checkMirror(hdr http.Header, header, want string) *jsonrpc.Error {
	vals := hdr.Values(header)
	if len(vals) == 0 {
		return headerError(header, want, "", true)
	}
	got, err := decodeHeaderValue(vals[0])
	if err != nil || len(vals) > 1 {
		return headerError(header, want, vals[0], false)
	}
	if got != want {
		return headerError(header, want, got, false)
	}
	return nil
}

// checkParamHeaders validates the Mcp-Param-* headers that mirror a tool's
// x-mcp-header arguments: present exactly when the argument is present and
// not null, and equal to it once decoded. An argument that is not a string
// is left to the tool, which answers it in-band.
func checkParamHeaders(hdr http.Header, t *tool, args arguments) *jsonrpc.Error {
	for _, mh := range t.mirrors {
		header := "Mcp-Param-" + mh.header
		vals := hdr.Values(header)
		raw := args.get(mh.arg)
		present := !jsonrpc.IsNull(raw)
		var want string
		if present {
			var ok bool
			if want, ok = jsonrpc.String(raw); !ok {
				continue
			}
		}
		switch {
		case !present && len(vals) == 0:
		case present && len(vals) == 0:
			return headerError(header, want, "", true)
		case len(vals) > 1:
			return headerError(header, want, strings.Join(vals, ", "), false)
		default:
			got, err := decodeHeaderValue(vals[0])
			if err != nil {
				e := headerError(header, want, vals[0], false)
				e.Message = "Invalid header value: " + header + ": " + err.Error()
				return e
			}
			if !present || got != want {
				return headerError(header, want, got, false)
			}
		}
	}
	return nil
}

// headerError is the -32020 answer to a missing or mismatched header.
// missing says which: an empty value is a mismatch, not an absence.
func headerError(header, expected, actual string, missing bool) *jsonrpc.Error {
	msg := "Header mismatch"
	if missing {
		msg = "Missing required header"
	}
	return &jsonrpc.Error{
		Code:    jsonrpc.CodeHeaderMismatch,
		Message: fmt.Sprintf("%s: %s", msg, header),
		Data:    map[string]any{"header": header, "expected": expected, "actual": actual},
	}
}

// decodeHeaderValue turns a mirrored header value into the text it stands
// for: OWS trimmed, and a =?base64?…?= value decoded (strict standard
// base64 of UTF-8). A value without both the prefix and the suffix is
// literal.
func decodeHeaderValue(v string) (string, error) {
	v = strings.Trim(v, " \t")
	if !strings.HasPrefix(v, "=?base64?") || !strings.HasSuffix(v, "?=") || len(v) < len("=?base64??=") {
		for i := 0; i < len(v); i++ {
			if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
				return "", fmt.Errorf("control character in header value")
			}
		}
		return v, nil
	}
	enc := v[len("=?base64?") : len(v)-len("?=")]
	b, err := base64.StdEncoding.Strict().DecodeString(enc)
	if err != nil {
		return "", fmt.Errorf("invalid base64 in header value: %v", err)
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("base64 header value is not UTF-8")
	}
	return string(b), nil
}
