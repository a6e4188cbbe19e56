package frontend

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"execd/internal/jsonrpc"
)

// Input from the client while a request runs: an elicitation, a sampled
// message, the client's roots. The two eras ask differently:
//
//   - legacy: a server-to-client request on the request's own stream; the
//     client's response is intercepted before routing (intercept.go) and
//     handed to the waiting handler;
//   - modern: the server never sends requests (spec:
//     docs/specification/2026-07-28/basic/index.mdx); the handler answers
//     resultType "input_required" with keyed inputRequests, and the client
//     retries the request, under a new id, with inputResponses and the
//     requestState it was given (schema 2026-07-28 InputRequiredResult).
//     requestState travels through the client, so it is sealed with an HMAC
//     bound to the principal and to its owner, and expires.

// Input is one answer a handler needs from the client.
type Input struct {
	// Key names the input in inputRequests and inputResponses.
	Key string
	// Method is elicitation/create, sampling/createMessage or roots/list.
	Method string
	// Params are the method's params.
	Params any
}

// Capability is the client capability Method needs.
func (in Input) Capability() string {
	switch in.Method {
	case "sampling/createMessage":
		return "sampling"
	case "roots/list":
		return "roots"
	}
	return "elicitation"
}

// Retry is what a modern retry of an input_required round carries.
type Retry struct {
	// Responses are inputResponses by key.
	Responses map[string]json.RawMessage
	// State is the verified requestState's data; nil when none was sent.
	State map[string]json.RawMessage
}

// Retry reads inputResponses and requestState of a modern request and
// verifies the state, which must have been sealed for owner (a tool or
// prompt name) and this principal. The legacy era carries neither.
func (c *Call) Retry(owner string) (Retry, *jsonrpc.Error) {
	var r Retry
	if c.era != EraModern {
		return r, nil
	}
	var p map[string]json.RawMessage
	_ = json.Unmarshal(c.params, &p)
	if raw, ok := p["inputResponses"]; ok {
		if !jsonrpc.IsObject(raw) {
			return r, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: inputResponses must be an object keyed by the inputRequests keys")
		}
		if err := json.Unmarshal(raw, &r.Responses); err != nil {
			return r, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: inputResponses: %v", err)
		}
	}
	if raw, ok := p["requestState"]; ok {
		st, isStr := jsonrpc.String(raw)
		if !isStr {
			return r, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: requestState must be a string")
		}
		state, jerr := c.srv.openState(c.principal, owner, st)
		if jerr != nil {
			return r, jerr
		}
		r.State = state
	}
	return r, nil
}

// Gather obtains the client's answers to ins. Legacy: it asks the client
// now, on the request's stream, one input after another. Modern: it takes
// them from r; when some are missing the request must answer an
// input_required result asking for them, with state (if not nil) sealed
// as requestState for owner. When every answer is in, ok is true and got
// holds each key of ins; otherwise the handler returns res and jerr as
// they are: that input_required result, an error, or nothing at all when
// the client went away while it was asked.
func (c *Call) Gather(ctx context.Context, owner string, r Retry, ins []Input, state map[string]any) (got map[string]json.RawMessage, ok bool, res any, jerr *jsonrpc.Error) {
	got = map[string]json.RawMessage{}
	var missing []Input
	for _, in := range ins {
		if c.era == EraModern {
			if raw, ok := r.Responses[in.Key]; ok {
				if jerr := validateResponse(in, raw); jerr != nil {
					return nil, false, nil, jerr
				}
				got[in.Key] = raw
				continue
			}
			missing = append(missing, in)
			continue
		}
		answer, jerr := c.askClient(ctx, in.Method, in.Params)
		if jerr != nil || answer == nil {
			return nil, false, nil, jerr
		}
		if jerr := validateResponse(in, answer); jerr != nil {
			return nil, false, nil, jerr
		}
		got[in.Key] = answer
	}
	if len(missing) == 0 {
		return got, true, nil, nil
	}
	reqs := map[string]any{}
	for _, in := range missing {
		reqs[in.Key] = map[string]any{"method": in.Method, "params": in.Params}
	}
	pending := map[string]any{"resultType": "input_required", "inputRequests": reqs}
	if state != nil {
		pending["requestState"] = c.srv.sealState(c.principal, owner, state)
	}
	return nil, false, pending, nil
}

// askClient sends a server-to-client request on the call's own stream and
// waits for the client's response. Legacy era only. A nil result with a
// nil error means ctx ended first.
func (c *Call) askClient(ctx context.Context, method string, params any) (json.RawMessage, *jsonrpc.Error) {
	if c.era != EraLegacy || c.peer == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "Internal error: no server requests in the %s era", c.era)
	}
	id, ch, done := c.srv.pending.open(c.peer.scope)
	defer done()
	// A 2025-11-25 task asks on its peer's stream, saying which task asks
	// (tasks.mdx: Associating Task-Related Messages); meanwhile the task is
	// input_required.
	lt := c.liveTask()
	if lt != nil {
		params = withRelatedTaskMeta(params, lt.id)
	}
	b, err := jsonrpc.EncodeRequest(id, method, params)
	if err == nil {
		err = c.send(b)
	}
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "Internal error: cannot send %s: %v (the request needs an SSE stream)", method, err)
	}
	if lt != nil {
		c.srv.legacyTaskWaits(lt, true)
		defer c.srv.legacyTaskWaits(lt, false)
	}
	select {
	case <-ctx.Done():
		return nil, nil
	case m := <-ch:
		if m.Error != nil {
			return nil, &jsonrpc.Error{Code: m.Error.Code, Message: "the client answered " + method + " with an error: " + m.Error.Message}
		}
		return m.Result, nil
	}
}

// validateResponse checks that a response has the shape of the result of
// its request (ElicitResult, CreateMessageResult, ListRootsResult).
func validateResponse(in Input, raw json.RawMessage) *jsonrpc.Error {
	bad := func(what string) *jsonrpc.Error {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: inputResponses.%s must be %s", in.Key, what)
	}
	var m map[string]json.RawMessage
	if !jsonrpc.IsObject(raw) || json.Unmarshal(raw, &m) != nil {
		return bad("an object")
	}
	switch in.Method {
	case "elicitation/create":
		action, _ := jsonrpc.String(m["action"])
		if action != "accept" && action != "decline" && action != "cancel" {
			return bad(`an ElicitResult with action "accept", "decline" or "cancel"`)
		}
		if c, ok := m["content"]; ok && !jsonrpc.IsObject(c) && !jsonrpc.IsNull(c) {
			return bad("an ElicitResult whose content is an object")
		}
	case "sampling/createMessage":
		if _, ok := jsonrpc.String(m["role"]); !ok || len(m["content"]) == 0 {
			return bad("a CreateMessageResult with role and content")
		}
	case "roots/list":
		var roots []json.RawMessage
		if json.Unmarshal(m["roots"], &roots) != nil || roots == nil {
			return bad("a ListRootsResult with a roots array")
		}
	}
	return nil
}

// statePayload is what requestState carries, under an HMAC.
type statePayload struct {
	// From names the process that sealed it (Server.stateFrom): a state
	// of an earlier process cannot be verified, and is said to be one.
	From    string                     `json:"f"`
	Owner   string                     `json:"o"`
	Expires int64                      `json:"e"`
	Data    map[string]json.RawMessage `json:"d"`
}

// sealState encodes data for owner as requestState:
// base64url(payload) "." base64url(HMAC-SHA256(principal, payload)).
func (s *Server) sealState(principal, owner string, data map[string]any) string {
	d := make(map[string]json.RawMessage, len(data))
	for k, v := range data {
		d[k], _ = json.Marshal(v)
	}
	b, _ := json.Marshal(statePayload{From: s.stateFrom, Owner: owner, Expires: time.Now().Add(s.opts.InputTimeout).Unix(), Data: d})
	body := base64.RawURLEncoding.EncodeToString(b)
	return body + "." + base64.RawURLEncoding.EncodeToString(s.stateMAC(principal, body))
}

func (s *Server) stateMAC(principal, body string) []byte {
	m := hmac.New(sha256.New, s.stateKey)
	m.Write([]byte(principal))
	m.Write([]byte{0})
	m.Write([]byte(body))
	return m.Sum(nil)
}

// openState verifies and decodes a requestState sealed for owner and
// principal.
func (s *Server) openState(principal, owner, st string) (map[string]json.RawMessage, *jsonrpc.Error) {
	bad := jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: requestState failed its integrity check")
	body, sig, ok := strings.Cut(st, ".")
	if !ok {
		return nil, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return nil, bad
	}
	var p statePayload
	if json.Unmarshal(raw, &p) != nil {
		return nil, bad
	}
	if got, err := base64.RawURLEncoding.DecodeString(sig); err != nil || !hmac.Equal(got, s.stateMAC(principal, body)) {
		if p.From != s.stateFrom {
			// Each process seals with a key of its own: what an earlier
			// one asked for ended with it. (The claim is unverified, and
			// gains a forger nothing but this message.)
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: requestState was issued before execd restarted, and the run that asked for input ended with that process; call again without requestState")
		}
		return nil, bad
	}
	if p.Owner != owner {
		return nil, bad
	}
	if time.Now().Unix() > p.Expires {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: requestState has expired; call again without it")
	}
	if p.Data == nil {
		p.Data = map[string]json.RawMessage{}
	}
	return p.Data, nil
}
