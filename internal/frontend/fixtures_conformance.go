//go:build conformance

package frontend

// The fixtures of the official conformance suites (protocol.md §9). They
// exist only in a build with the conformance tag; production execd never
// lists them. execute_code and the workspace tools stay first in
// tools/list, because the header scenarios call the first listed tool.

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"execd/internal/jsonrpc"
)

// Minimal media for the content fixtures: a 1x1 red PNG and a mono 8-bit
// WAV of eight silent samples.
const (
	fixturePNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
	fixtureWAV = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA=="
)

// requestStateTTL bounds how long an input_required round may be answered.
const requestStateTTL = 10 * time.Minute

// fixtures holds what the fixture handlers share: the key that protects
// requestState, fresh for every process.
type fixtures struct {
	s   *Server
	key []byte
}

func registerFixtures(s *Server) {
	fx := &fixtures{s: s, key: make([]byte, 32)}
	if _, err := rand.Read(fx.key); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	for _, t := range fx.tools() {
		s.tools.add(t)
	}
	s.feat.prompts = &promptSet{list: fixturePrompts(), get: fx.getPrompt}
	s.feat.resources = &resourceSet{list: fixtureResources(), templates: fixtureTemplates(), read: fx.readResource}
	s.feat.completes = true
}

// Content helpers.

func textContent(text string) map[string]any { return map[string]any{"type": "text", "text": text} }

func textResult(text string) map[string]any {
	return map[string]any{"content": []any{textContent(text)}}
}

func noArgs() map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{}}
}

func fixtureTool(name, desc string, schema map[string]any, needs []string,
	run func(ctx context.Context, c *call, args json.RawMessage) (any, *jsonrpc.Error)) *tool {
	if schema == nil {
		schema = noArgs()
	}
	return &tool{name: name, def: map[string]any{"description": desc, "inputSchema": schema}, needs: needs, run: run}
}

// pause waits d unless ctx ends first; it reports whether the wait completed.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (fx *fixtures) tools() []*tool {
	return []*tool{
		fixtureTool("test_simple_text", "Returns a simple text response.", nil, nil,
			func(context.Context, *call, json.RawMessage) (any, *jsonrpc.Error) {
				return textResult("This is a simple text response for testing."), nil
			}),
		fixtureTool("test_image_content", "Returns an image.", nil, nil,
			func(context.Context, *call, json.RawMessage) (any, *jsonrpc.Error) {
				return map[string]any{"content": []any{map[string]any{"type": "image", "data": fixturePNG, "mimeType": "image/png"}}}, nil
			}),
		fixtureTool("test_audio_content", "Returns audio.", nil, nil,
			func(context.Context, *call, json.RawMessage) (any, *jsonrpc.Error) {
				return map[string]any{"content": []any{map[string]any{"type": "audio", "data": fixtureWAV, "mimeType": "audio/wav"}}}, nil
			}),
		fixtureTool("test_embedded_resource", "Returns an embedded resource.", nil, nil,
			func(context.Context, *call, json.RawMessage) (any, *jsonrpc.Error) {
				return map[string]any{"content": []any{map[string]any{"type": "resource", "resource": map[string]any{
					"uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content.",
				}}}}, nil
			}),
		fixtureTool("test_multiple_content_types", "Returns text, an image and a resource.", nil, nil,
			func(context.Context, *call, json.RawMessage) (any, *jsonrpc.Error) {
				return map[string]any{"content": []any{
					textContent("Multiple content types test:"),
					map[string]any{"type": "image", "data": fixturePNG, "mimeType": "image/png"},
					map[string]any{"type": "resource", "resource": map[string]any{
						"uri": "test://mixed-content-resource", "mimeType": "application/json", "text": `{"test":"data","value":123}`,
					}},
				}}, nil
			}),
		fixtureTool("test_tool_with_logging", "Sends three log messages while it runs.", nil, nil, fx.withLogging),
		fixtureTool("test_error_handling", "Always returns a tool error.", nil, nil,
			func(context.Context, *call, json.RawMessage) (any, *jsonrpc.Error) {
				return map[string]any{"isError": true, "content": []any{textContent("This tool intentionally returns an error for testing")}}, nil
			}),
		fixtureTool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100.", nil, nil, fx.withProgress),
		fixtureTool("test_sampling", "Asks the client to sample a message.", map[string]any{
			"type":       "object",
			"properties": map[string]any{"prompt": map[string]any{"type": "string", "description": "The prompt to send to the LLM"}},
			"required":   []string{"prompt"},
		}, []string{"sampling"}, fx.sampling),
		fixtureTool("test_elicitation", "Asks the user for information.", map[string]any{
			"type":       "object",
			"properties": map[string]any{"message": map[string]any{"type": "string", "description": "The message to show the user"}},
			"required":   []string{"message"},
		}, []string{"elicitation"}, fx.elicitation),
		fixtureTool("test_elicitation_sep1034_defaults", "Elicits with defaults for every primitive type.", nil, []string{"elicitation"}, fx.elicitDefaults),
		fixtureTool("test_elicitation_sep1330_enums", "Elicits with every enum variant.", nil, []string{"elicitation"}, fx.elicitEnums),
		{
			name: "json_schema_2020_12_tool",
			def: map[string]any{
				"description": "Tool with JSON Schema 2020-12 features",
				"inputSchema": jsonSchema202012(),
			},
			run: func(context.Context, *call, json.RawMessage) (any, *jsonrpc.Error) { return textResult("ok"), nil },
		},
		fixtureTool("test_reconnection", "Answers after a short delay (SSE polling scenario).", nil, nil,
			func(ctx context.Context, _ *call, _ json.RawMessage) (any, *jsonrpc.Error) {
				if !pause(ctx, 100*time.Millisecond) {
					return nil, nil
				}
				return textResult("Reconnection test completed"), nil
			}),
		// Modern-era diagnostics of server-stateless.
		fixtureTool("test_missing_capability", "Needs the sampling client capability.", nil, []string{"sampling"},
			func(context.Context, *call, json.RawMessage) (any, *jsonrpc.Error) {
				return textResult("The client declared sampling."), nil
			}),
		fixtureTool("test_logging_tool", "Logs at info level; sends nothing unless the request asked for logs.", nil, nil,
			func(_ context.Context, c *call, _ json.RawMessage) (any, *jsonrpc.Error) {
				c.logMessage("info", "test_logging_tool ran")
				return textResult("Logged, if the request set a log level."), nil
			}),
		fixtureTool("test_streaming_elicitation", "Needs user input: asks with an input_required result, never a server request.", nil, []string{"elicitation"}, fx.greetByName("test_streaming_elicitation")),
		// MRTR (input_required) fixtures.
		fixtureTool("test_input_required_result_elicitation", "Asks for the user's name.", nil, []string{"elicitation"}, fx.greetByName("test_input_required_result_elicitation")),
		fixtureTool("test_input_required_result_sampling", "Asks the client to sample an answer.", nil, []string{"sampling"}, fx.mrtrSampling),
		fixtureTool("test_input_required_result_list_roots", "Asks for the client's roots.", nil, []string{"roots"}, fx.mrtrRoots),
		fixtureTool("test_input_required_result_request_state", "Asks for a confirmation and round-trips requestState.", nil, []string{"elicitation"}, fx.mrtrRequestState("test_input_required_result_request_state")),
		fixtureTool("test_input_required_result_multiple_inputs", "Asks for a name, a sampled greeting and the roots at once.", nil, nil, fx.mrtrMultiple),
		fixtureTool("test_input_required_result_multi_round", "Asks in two rounds.", nil, []string{"elicitation"}, fx.mrtrMultiRound),
		fixtureTool("test_input_required_result_tampered_state", "Rejects a requestState that fails its integrity check.", nil, []string{"elicitation"}, fx.mrtrRequestState("test_input_required_result_tampered_state")),
		fixtureTool("test_input_required_result_capabilities", "Asks only for what the client declared.", nil, nil, fx.mrtrCapabilities),
	}
}

// jsonSchema202012 is the json-schema-2020-12 scenario's schema, verbatim.
func jsonSchema202012() map[string]any {
	return map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type":    "object",
		"$defs": map[string]any{
			"address": map[string]any{
				"$anchor": "addressDef",
				"type":    "object",
				"properties": map[string]any{
					"street": map[string]any{"type": "string"},
					"city":   map[string]any{"type": "string"},
				},
			},
		},
		"properties": map[string]any{
			"name":          map[string]any{"type": "string"},
			"address":       map[string]any{"$ref": "#/$defs/address"},
			"contactMethod": map[string]any{"type": "string", "enum": []string{"phone", "email"}},
			"phone":         map[string]any{"type": "string"},
			"email":         map[string]any{"type": "string"},
		},
		"allOf": []any{map[string]any{"anyOf": []any{
			map[string]any{"required": []string{"phone"}},
			map[string]any{"required": []string{"email"}},
		}}},
		"if": map[string]any{
			"properties": map[string]any{"contactMethod": map[string]any{"const": "phone"}},
			"required":   []string{"contactMethod"},
		},
		"then":                 map[string]any{"required": []string{"phone"}},
		"else":                 map[string]any{"required": []string{"email"}},
		"additionalProperties": false,
	}
}

func (fx *fixtures) withLogging(ctx context.Context, c *call, _ json.RawMessage) (any, *jsonrpc.Error) {
	msgs := []string{"Tool execution started", "Tool processing data", "Tool execution completed"}
	for i, m := range msgs {
		if i > 0 && !pause(ctx, 50*time.Millisecond) {
			return nil, nil
		}
		c.logMessage("info", m)
	}
	return textResult("Logging test completed: sent 3 log messages."), nil
}

func (fx *fixtures) withProgress(ctx context.Context, c *call, _ json.RawMessage) (any, *jsonrpc.Error) {
	tok := c.meta.progressToken
	for i, p := range []int{0, 50, 100} {
		if i > 0 && !pause(ctx, 50*time.Millisecond) {
			return nil, nil
		}
		if len(tok) > 0 {
			_ = c.notify("notifications/progress", map[string]any{
				"progressToken": tok, "progress": p, "total": 100, "message": fmt.Sprintf("step %d of 3", i+1),
			})
		}
	}
	return textResult("Progress test completed."), nil
}

// Client input: sampling, elicitation and roots.
//
// The legacy era asks the client with a server request on the call's stream
// and waits. The modern era never sends requests (M-5): the handler answers
// input_required, and the client retries the call with inputResponses and
// the echoed requestState (MRTR, MT-5).

// input is one input a handler needs from the client.
type input struct {
	key    string
	method string // elicitation/create, sampling/createMessage, roots/list
	params any
}

// capability is the client capability an input method needs.
func (in input) capability() string {
	switch in.method {
	case "sampling/createMessage":
		return "sampling"
	case "roots/list":
		return "roots"
	}
	return "elicitation"
}

// retry is what a modern retry carries besides the arguments.
type retry struct {
	responses map[string]json.RawMessage
	state     map[string]json.RawMessage // verified; nil when none was sent
}

// readRetry reads inputResponses and requestState of a modern request and
// verifies the state's integrity. The legacy era carries neither.
func (fx *fixtures) readRetry(c *call, owner string) (retry, *jsonrpc.Error) {
	var r retry
	if c.era != EraModern {
		return r, nil
	}
	var p map[string]json.RawMessage
	_ = json.Unmarshal(c.params, &p)
	if raw, ok := p["inputResponses"]; ok {
		if !isObject(raw) {
			return r, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: inputResponses must be an object keyed by the inputRequests keys")
		}
		if err := json.Unmarshal(raw, &r.responses); err != nil {
			return r, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: inputResponses: %v", err)
		}
	}
	if raw, ok := p["requestState"]; ok {
		var st string
		if err := json.Unmarshal(raw, &st); err != nil {
			return r, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: requestState must be a string")
		}
		state, jerr := fx.openState(c, owner, st)
		if jerr != nil {
			return r, jerr
		}
		r.state = state
	}
	return r, nil
}

// statePayload is what requestState carries, under an HMAC.
type statePayload struct {
	Owner   string                     `json:"o"`
	Expires int64                      `json:"e"`
	Data    map[string]json.RawMessage `json:"d"`
}

// sealState encodes data for owner (a tool or prompt) as requestState:
// base64url(payload) "." base64url(HMAC-SHA256(principal, payload)).
func (fx *fixtures) sealState(c *call, owner string, data map[string]any) string {
	d := make(map[string]json.RawMessage, len(data))
	for k, v := range data {
		d[k], _ = json.Marshal(v)
	}
	b, _ := json.Marshal(statePayload{Owner: owner, Expires: time.Now().Add(requestStateTTL).Unix(), Data: d})
	body := base64.RawURLEncoding.EncodeToString(b)
	return body + "." + base64.RawURLEncoding.EncodeToString(fx.mac(c, body))
}

func (fx *fixtures) mac(c *call, body string) []byte {
	m := hmac.New(sha256.New, fx.key)
	m.Write([]byte(c.principal))
	m.Write([]byte{0})
	m.Write([]byte(body))
	return m.Sum(nil)
}

// openState verifies and decodes a requestState minted for owner.
func (fx *fixtures) openState(c *call, owner, st string) (map[string]json.RawMessage, *jsonrpc.Error) {
	bad := jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: requestState failed its integrity check")
	body, sig, ok := strings.Cut(st, ".")
	if !ok {
		return nil, bad
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, fx.mac(c, body)) {
		return nil, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return nil, bad
	}
	var p statePayload
	if json.Unmarshal(raw, &p) != nil || p.Owner != owner {
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

// gather obtains the responses to ins. Legacy: it asks the client now, one
// request after another. Modern: it takes them from the retry; when some
// are missing it returns an input_required result asking for them, with
// state (if any) sealed as requestState. A nil map with a nil result and a
// nil error means the client went away.
func (fx *fixtures) gather(ctx context.Context, c *call, owner string, r retry, ins []input, state map[string]any) (map[string]json.RawMessage, any, *jsonrpc.Error) {
	got := map[string]json.RawMessage{}
	var missing []input
	for _, in := range ins {
		if c.era == EraModern {
			if raw, ok := r.responses[in.key]; ok {
				if jerr := validateResponse(in, raw); jerr != nil {
					return nil, nil, jerr
				}
				got[in.key] = raw
				continue
			}
			missing = append(missing, in)
			continue
		}
		res, jerr := fx.s.askClient(ctx, c, in.method, in.params)
		if jerr != nil {
			return nil, nil, jerr
		}
		if res == nil {
			return nil, nil, nil
		}
		if jerr := validateResponse(in, res); jerr != nil {
			return nil, nil, jerr
		}
		got[in.key] = res
	}
	if len(missing) == 0 {
		return got, nil, nil
	}
	reqs := map[string]any{}
	for _, in := range missing {
		reqs[in.key] = map[string]any{"method": in.method, "params": in.params}
	}
	res := map[string]any{"resultType": "input_required", "inputRequests": reqs}
	if state != nil {
		res["requestState"] = fx.sealState(c, owner, state)
	}
	return nil, res, nil
}

// validateResponse checks that a response has the shape of the result of
// its request (ElicitResult, CreateMessageResult, ListRootsResult).
func validateResponse(in input, raw json.RawMessage) *jsonrpc.Error {
	bad := func(what string) *jsonrpc.Error {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: inputResponses.%s must be %s", in.key, what)
	}
	var m map[string]json.RawMessage
	if !isObject(raw) || json.Unmarshal(raw, &m) != nil {
		return bad("an object")
	}
	switch in.method {
	case "elicitation/create":
		var action string
		if json.Unmarshal(m["action"], &action) != nil || (action != "accept" && action != "decline" && action != "cancel") {
			return bad(`an ElicitResult with action "accept", "decline" or "cancel"`)
		}
		if c, ok := m["content"]; ok && !isObject(c) && string(c) != "null" {
			return bad("an ElicitResult whose content is an object")
		}
	case "sampling/createMessage":
		var role string
		if json.Unmarshal(m["role"], &role) != nil || len(m["content"]) == 0 {
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

// elicited decodes an ElicitResult.
type elicited struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content"`
}

func decodeElicit(raw json.RawMessage) elicited {
	var e elicited
	_ = json.Unmarshal(raw, &e)
	return e
}

func (e elicited) String() string {
	b, _ := json.Marshal(e.Content)
	if e.Content == nil {
		b = []byte("{}")
	}
	return fmt.Sprintf("action=%s, content=%s", e.Action, b)
}

func (e elicited) field(name string) (string, bool) {
	if e.Action != "accept" {
		return "", false
	}
	v, ok := e.Content[name].(string)
	return v, ok
}

// sampledText returns the text of a CreateMessageResult.
func sampledText(raw json.RawMessage) string {
	var m struct {
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(raw, &m)
	var blocks []map[string]any
	if len(m.Content) > 0 && m.Content[0] == '[' {
		_ = json.Unmarshal(m.Content, &blocks)
	} else {
		var one map[string]any
		_ = json.Unmarshal(m.Content, &one)
		blocks = append(blocks, one)
	}
	var parts []string
	for _, b := range blocks {
		if t, ok := b["text"].(string); ok {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, " ")
}

// rootURIs lists the URIs of a ListRootsResult.
func rootURIs(raw json.RawMessage) []string {
	var m struct {
		Roots []struct {
			URI string `json:"uri"`
		} `json:"roots"`
	}
	_ = json.Unmarshal(raw, &m)
	uris := make([]string, 0, len(m.Roots))
	for _, r := range m.Roots {
		uris = append(uris, r.URI)
	}
	return uris
}

func elicitName(key, message, field string) input {
	return input{key: key, method: "elicitation/create", params: map[string]any{
		"message": message,
		"requestedSchema": map[string]any{
			"type":       "object",
			"properties": map[string]any{field: map[string]any{"type": "string"}},
			"required":   []string{field},
		},
	}}
}

func sampleText(key, text string, maxTokens int) input {
	return input{key: key, method: "sampling/createMessage", params: map[string]any{
		"messages":  []any{map[string]any{"role": "user", "content": textContent(text)}},
		"maxTokens": maxTokens,
	}}
}

func listRoots(key string) input {
	return input{key: key, method: "roots/list", params: map[string]any{}}
}

// single gathers one input for a tool without state and hands its
// response to done.
func (fx *fixtures) single(ctx context.Context, c *call, owner string, in input, done func(json.RawMessage) any) (any, *jsonrpc.Error) {
	r, jerr := fx.readRetry(c, owner)
	if jerr != nil {
		return nil, jerr
	}
	got, pending, jerr := fx.gather(ctx, c, owner, r, []input{in}, nil)
	switch {
	case jerr != nil:
		return nil, jerr
	case pending != nil:
		return pending, nil
	case got == nil:
		return nil, nil
	}
	return done(got[in.key]), nil
}

// stringArg returns a string argument, or "" when it is absent or not a
// string.
func stringArg(args json.RawMessage, name string) string {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(args, &m)
	var v string
	_ = json.Unmarshal(m[name], &v)
	return v
}

func (fx *fixtures) sampling(ctx context.Context, c *call, args json.RawMessage) (any, *jsonrpc.Error) {
	prompt := stringArg(args, "prompt")
	if prompt == "" {
		return map[string]any{"isError": true, "content": []any{textContent("missing argument prompt")}}, nil
	}
	return fx.single(ctx, c, "test_sampling", sampleText("sampling", prompt, 100), func(raw json.RawMessage) any {
		return textResult("LLM response: " + sampledText(raw))
	})
}

func (fx *fixtures) elicitation(ctx context.Context, c *call, args json.RawMessage) (any, *jsonrpc.Error) {
	msg := stringArg(args, "message")
	if msg == "" {
		msg = "Please provide your information"
	}
	in := input{key: "user_info", method: "elicitation/create", params: map[string]any{
		"message": msg,
		"requestedSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"username": map[string]any{"type": "string", "description": "User's response"},
				"email":    map[string]any{"type": "string", "description": "User's email address"},
			},
			"required": []string{"username", "email"},
		},
	}}
	return fx.single(ctx, c, "test_elicitation", in, func(raw json.RawMessage) any {
		return textResult("User response: " + decodeElicit(raw).String())
	})
}

func (fx *fixtures) elicitDefaults(ctx context.Context, c *call, _ json.RawMessage) (any, *jsonrpc.Error) {
	in := input{key: "defaults", method: "elicitation/create", params: map[string]any{
		"message": "Please review and update the form fields with defaults",
		"requestedSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"name":     map[string]any{"type": "string", "description": "User name", "default": "John Doe"},
				"age":      map[string]any{"type": "integer", "description": "User age", "default": 30},
				"score":    map[string]any{"type": "number", "description": "User score", "default": 95.5},
				"status":   map[string]any{"type": "string", "description": "User status", "enum": []string{"active", "inactive", "pending"}, "default": "active"},
				"verified": map[string]any{"type": "boolean", "description": "Verification status", "default": true},
			},
		},
	}}
	return fx.single(ctx, c, "test_elicitation_sep1034_defaults", in, func(raw json.RawMessage) any {
		return textResult("Elicitation completed: " + decodeElicit(raw).String())
	})
}

func (fx *fixtures) elicitEnums(ctx context.Context, c *call, _ json.RawMessage) (any, *jsonrpc.Error) {
	titled := func(pairs ...string) []any {
		var out []any
		for i := 0; i+1 < len(pairs); i += 2 {
			out = append(out, map[string]any{"const": pairs[i], "title": pairs[i+1]})
		}
		return out
	}
	in := input{key: "enums", method: "elicitation/create", params: map[string]any{
		"message": "Please select options from the enum fields",
		"requestedSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"untitledSingle": map[string]any{"type": "string", "description": "Select one option", "enum": []string{"option1", "option2", "option3"}},
				"titledSingle": map[string]any{"type": "string", "description": "Select one option with titles",
					"oneOf": titled("value1", "First Option", "value2", "Second Option", "value3", "Third Option")},
				"legacyEnum": map[string]any{"type": "string", "description": "Select one option (legacy)",
					"enum": []string{"opt1", "opt2", "opt3"}, "enumNames": []string{"Option One", "Option Two", "Option Three"}},
				"untitledMulti": map[string]any{"type": "array", "description": "Select multiple options",
					"minItems": 1, "maxItems": 3, "items": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}}},
				"titledMulti": map[string]any{"type": "array", "description": "Select multiple options with titles",
					"minItems": 1, "maxItems": 3, "items": map[string]any{"anyOf": titled("value1", "First Choice", "value2", "Second Choice", "value3", "Third Choice")}},
			},
			"required": []string{},
		},
	}}
	return fx.single(ctx, c, "test_elicitation_sep1330_enums", in, func(raw json.RawMessage) any {
		return textResult("Elicitation completed: " + decodeElicit(raw).String())
	})
}

// greetByName is the handler of a tool that asks for the user's name by
// elicitation and greets them (two scenarios, two tool names).
func (fx *fixtures) greetByName(tool string) func(context.Context, *call, json.RawMessage) (any, *jsonrpc.Error) {
	return func(ctx context.Context, c *call, _ json.RawMessage) (any, *jsonrpc.Error) {
		return fx.single(ctx, c, tool, elicitName("user_name", "What is your name?", "name"), func(raw json.RawMessage) any {
			e := decodeElicit(raw)
			if name, ok := e.field("name"); ok {
				return textResult("Hello, " + name + "!")
			}
			return textResult("No name given (" + e.String() + ").")
		})
	}
}

func (fx *fixtures) mrtrSampling(ctx context.Context, c *call, _ json.RawMessage) (any, *jsonrpc.Error) {
	return fx.single(ctx, c, "test_input_required_result_sampling", sampleText("capital_question", "What is the capital of France?", 100), func(raw json.RawMessage) any {
		return textResult("Sampled answer: " + sampledText(raw))
	})
}

func (fx *fixtures) mrtrRoots(ctx context.Context, c *call, _ json.RawMessage) (any, *jsonrpc.Error) {
	return fx.single(ctx, c, "test_input_required_result_list_roots", listRoots("client_roots"), func(raw json.RawMessage) any {
		uris := rootURIs(raw)
		if len(uris) == 0 {
			return textResult("The client has no roots.")
		}
		return textResult("Client roots: " + strings.Join(uris, ", "))
	})
}

// mrtrRequestState serves the request-state and tampered-state fixtures: a
// confirmation whose retry must carry the requestState of round 1.
func (fx *fixtures) mrtrRequestState(owner string) func(context.Context, *call, json.RawMessage) (any, *jsonrpc.Error) {
	confirm := input{key: "confirm", method: "elicitation/create", params: map[string]any{
		"message": "Please confirm",
		"requestedSchema": map[string]any{
			"type":       "object",
			"properties": map[string]any{"ok": map[string]any{"type": "boolean"}},
			"required":   []string{"ok"},
		},
	}}
	return func(ctx context.Context, c *call, _ json.RawMessage) (any, *jsonrpc.Error) {
		r, jerr := fx.readRetry(c, owner)
		if jerr != nil {
			return nil, jerr
		}
		if c.era == EraModern && r.state == nil {
			// Round 1, or a retry without the state: (re)start.
			r.responses = nil
		}
		got, pending, jerr := fx.gather(ctx, c, owner, r, []input{confirm}, map[string]any{"round": 1})
		switch {
		case jerr != nil:
			return nil, jerr
		case pending != nil:
			return pending, nil
		case got == nil:
			return nil, nil
		}
		e := decodeElicit(got["confirm"])
		return textResult("state-ok: the requestState verified; confirmation " + e.String()), nil
	}
}

func (fx *fixtures) mrtrMultiple(ctx context.Context, c *call, _ json.RawMessage) (any, *jsonrpc.Error) {
	const owner = "test_input_required_result_multiple_inputs"
	all := []input{
		elicitName("user_name", "What is your name?", "name"),
		sampleText("greeting", "Generate a greeting", 50),
		listRoots("client_roots"),
	}
	return fx.declared(ctx, c, owner, all, func(got map[string]json.RawMessage) any {
		var parts []string
		if raw, ok := got["user_name"]; ok {
			if name, ok := decodeElicit(raw).field("name"); ok {
				parts = append(parts, "name: "+name)
			}
		}
		if raw, ok := got["greeting"]; ok {
			parts = append(parts, "greeting: "+sampledText(raw))
		}
		if raw, ok := got["client_roots"]; ok {
			parts = append(parts, "roots: "+strings.Join(rootURIs(raw), ", "))
		}
		return textResult("All inputs received (" + strings.Join(parts, "; ") + ").")
	})
}

func (fx *fixtures) mrtrCapabilities(ctx context.Context, c *call, _ json.RawMessage) (any, *jsonrpc.Error) {
	const owner = "test_input_required_result_capabilities"
	all := []input{
		elicitName("user_name", "What is your name?", "name"),
		sampleText("greeting", "Generate a greeting", 50),
		listRoots("client_roots"),
	}
	return fx.declared(ctx, c, owner, all, func(got map[string]json.RawMessage) any {
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return textResult("Received inputs: " + strings.Join(keys, ", "))
	})
}

// declared gathers those of ins whose capability the request declared
// (every one in the legacy era, which carries no per-request capabilities),
// in one round with a requestState that remembers what was asked.
func (fx *fixtures) declared(ctx context.Context, c *call, owner string, ins []input, done func(map[string]json.RawMessage) any) (any, *jsonrpc.Error) {
	var ask []input
	for _, in := range ins {
		if c.era != EraModern {
			ask = append(ask, in)
			continue
		}
		if _, ok := c.meta.capabilities[in.capability()]; ok {
			ask = append(ask, in)
		}
	}
	if len(ask) == 0 {
		return textResult("The client declared none of elicitation, sampling or roots: nothing to ask."), nil
	}
	r, jerr := fx.readRetry(c, owner)
	if jerr != nil {
		return nil, jerr
	}
	keys := make([]string, len(ask))
	for i, in := range ask {
		keys[i] = in.key
	}
	got, pending, jerr := fx.gather(ctx, c, owner, r, ask, map[string]any{"asked": keys})
	switch {
	case jerr != nil:
		return nil, jerr
	case pending != nil:
		return pending, nil
	case got == nil:
		return nil, nil
	}
	return done(got), nil
}

func (fx *fixtures) mrtrMultiRound(ctx context.Context, c *call, _ json.RawMessage) (any, *jsonrpc.Error) {
	const owner = "test_input_required_result_multi_round"
	r, jerr := fx.readRetry(c, owner)
	if jerr != nil {
		return nil, jerr
	}
	var round int
	var name string
	if r.state != nil {
		_ = json.Unmarshal(r.state["round"], &round)
		_ = json.Unmarshal(r.state["name"], &name)
	}
	if round < 2 {
		got, pending, jerr := fx.gather(ctx, c, owner, r, []input{elicitName("step1", "Step 1: What is your name?", "name")}, map[string]any{"round": 1})
		switch {
		case jerr != nil:
			return nil, jerr
		case pending != nil:
			return pending, nil
		case got == nil:
			return nil, nil
		}
		name, _ = decodeElicit(got["step1"]).field("name")
		// The second round's responses are not in this retry.
		r.responses = nil
	}
	got, pending, jerr := fx.gather(ctx, c, owner, r, []input{elicitName("step2", "Step 2: What is your favorite color?", "color")},
		map[string]any{"round": 2, "name": name})
	switch {
	case jerr != nil:
		return nil, jerr
	case pending != nil:
		return pending, nil
	case got == nil:
		return nil, nil
	}
	color, _ := decodeElicit(got["step2"]).field("color")
	return textResult(fmt.Sprintf("Hello, %s! Your favorite color is %s.", name, color)), nil
}

// Prompts.

func fixturePrompts() []map[string]any {
	arg := func(name, desc string) map[string]any {
		return map[string]any{"name": name, "description": desc, "required": true}
	}
	return []map[string]any{
		{"name": "test_simple_prompt", "description": "A simple prompt without arguments."},
		{"name": "test_prompt_with_arguments", "description": "A prompt with two required arguments.",
			"arguments": []any{arg("arg1", "First test argument"), arg("arg2", "Second test argument")}},
		{"name": "test_prompt_with_embedded_resource", "description": "A prompt that embeds a resource.",
			"arguments": []any{arg("resourceUri", "URI of the resource to embed")}},
		{"name": "test_prompt_with_image", "description": "A prompt with an image."},
		{"name": "test_input_required_result_prompt", "description": "A prompt that first asks the user for context."},
	}
}

func userMessage(content map[string]any) map[string]any {
	return map[string]any{"role": "user", "content": content}
}

func (fx *fixtures) getPrompt(ctx context.Context, c *call, name string, args map[string]string) (any, *jsonrpc.Error) {
	need := func(keys ...string) *jsonrpc.Error {
		for _, k := range keys {
			if _, ok := args[k]; !ok {
				return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: prompt %s needs argument %s", name, k)
			}
		}
		return nil
	}
	switch name {
	case "test_simple_prompt":
		return map[string]any{"messages": []any{userMessage(textContent("This is a simple prompt for testing."))}}, nil
	case "test_prompt_with_arguments":
		if jerr := need("arg1", "arg2"); jerr != nil {
			return nil, jerr
		}
		return map[string]any{"messages": []any{userMessage(textContent(
			fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", args["arg1"], args["arg2"])))}}, nil
	case "test_prompt_with_embedded_resource":
		if jerr := need("resourceUri"); jerr != nil {
			return nil, jerr
		}
		return map[string]any{"messages": []any{
			userMessage(map[string]any{"type": "resource", "resource": map[string]any{
				"uri": args["resourceUri"], "mimeType": "text/plain", "text": "Embedded resource content for testing.",
			}}),
			userMessage(textContent("Please process the embedded resource above.")),
		}}, nil
	case "test_prompt_with_image":
		return map[string]any{"messages": []any{
			userMessage(map[string]any{"type": "image", "data": fixturePNG, "mimeType": "image/png"}),
			userMessage(textContent("Please analyze the image above.")),
		}}, nil
	case "test_input_required_result_prompt":
		const owner = "prompt:test_input_required_result_prompt"
		if c.era == EraModern {
			if _, ok := c.meta.capabilities["elicitation"]; !ok {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMissingCapability, Message: "Missing required client capability",
					Data: map[string]any{"requiredCapabilities": map[string]any{"elicitation": map[string]any{}}}}
			}
		}
		in := elicitName("user_context", "What context should the prompt use?", "context")
		return fx.single(ctx, c, owner, in, func(raw json.RawMessage) any {
			ctxText, ok := decodeElicit(raw).field("context")
			if !ok {
				ctxText = "(none given)"
			}
			return map[string]any{
				"description": "A prompt built from the user's context",
				"messages":    []any{userMessage(textContent("Use this context: " + ctxText))},
			}
		})
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: unknown prompt %s", name)
}

// Resources.

func fixtureResources() []map[string]any {
	return []map[string]any{
		{"uri": "test://static-text", "name": "static-text", "description": "A static text resource.", "mimeType": "text/plain"},
		{"uri": "test://static-binary", "name": "static-binary", "description": "A static binary resource (PNG).", "mimeType": "image/png"},
		{"uri": "test://watched-resource", "name": "watched-resource", "description": "A resource clients may subscribe to.", "mimeType": "text/plain"},
	}
}

func fixtureTemplates() []map[string]any {
	return []map[string]any{
		{"uriTemplate": "test://template/{id}/data", "name": "template-data", "description": "Data for an id.", "mimeType": "application/json"},
	}
}

var templateURI = regexp.MustCompile(`^test://template/([^/]+)/data$`)

func (fx *fixtures) readResource(_ context.Context, _ *call, uri string) (any, *jsonrpc.Error) {
	contents := func(item map[string]any) any { return map[string]any{"contents": []any{item}} }
	switch uri {
	case "test://static-text":
		return contents(map[string]any{"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."}), nil
	case "test://static-binary":
		return contents(map[string]any{"uri": uri, "mimeType": "image/png", "blob": fixturePNG}), nil
	case "test://watched-resource":
		return contents(map[string]any{"uri": uri, "mimeType": "text/plain", "text": "Watched resource content."}), nil
	}
	if m := templateURI.FindStringSubmatch(uri); m != nil {
		b, _ := json.Marshal(map[string]any{"id": m[1], "templateTest": true, "data": "Data for ID: " + m[1]})
		return contents(map[string]any{"uri": uri, "mimeType": "application/json", "text": string(b)}), nil
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Resource not found: " + uri, Data: map[string]any{"uri": uri}}
}
