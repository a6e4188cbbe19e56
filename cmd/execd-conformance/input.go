package main

// The fixtures that need input from the client: legacy elicitation and
// sampling (a server request on the call's stream) and the modern
// input_required rounds, built on the front end's Call.Retry and
// Call.Gather.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"execd/internal/frontend"
	"execd/internal/jsonrpc"
)

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

func elicitName(key, message, field string) frontend.Input {
	return frontend.Input{Key: key, Method: "elicitation/create", Params: map[string]any{
		"message": message,
		"requestedSchema": map[string]any{
			"type":       "object",
			"properties": map[string]any{field: map[string]any{"type": "string"}},
			"required":   []string{field},
		},
	}}
}

func sampleText(key, text string, maxTokens int) frontend.Input {
	return frontend.Input{Key: key, Method: "sampling/createMessage", Params: map[string]any{
		"messages":  []any{map[string]any{"role": "user", "content": textContent(text)}},
		"maxTokens": maxTokens,
	}}
}

func listRoots(key string) frontend.Input {
	return frontend.Input{Key: key, Method: "roots/list", Params: map[string]any{}}
}

// single gathers one input for a tool without state and hands its
// response to done.
func single(ctx context.Context, c *frontend.Call, owner string, in frontend.Input, done func(json.RawMessage) any) (any, *jsonrpc.Error) {
	r, jerr := c.Retry(owner)
	if jerr != nil {
		return nil, jerr
	}
	got, ok, res, jerr := c.Gather(ctx, owner, r, []frontend.Input{in}, nil)
	if !ok {
		return res, jerr
	}
	return done(got[in.Key]), nil
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

func sampling(ctx context.Context, c *frontend.Call, args json.RawMessage) (any, *jsonrpc.Error) {
	prompt := stringArg(args, "prompt")
	if prompt == "" {
		return map[string]any{"isError": true, "content": []any{textContent("missing argument prompt")}}, nil
	}
	return single(ctx, c, "test_sampling", sampleText("sampling", prompt, 100), func(raw json.RawMessage) any {
		return textResult("LLM response: " + sampledText(raw))
	})
}

func elicitation(ctx context.Context, c *frontend.Call, args json.RawMessage) (any, *jsonrpc.Error) {
	msg := stringArg(args, "message")
	if msg == "" {
		msg = "Please provide your information"
	}
	in := frontend.Input{Key: "user_info", Method: "elicitation/create", Params: map[string]any{
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
	return single(ctx, c, "test_elicitation", in, func(raw json.RawMessage) any {
		return textResult("User response: " + decodeElicit(raw).String())
	})
}

func elicitDefaults(ctx context.Context, c *frontend.Call, _ json.RawMessage) (any, *jsonrpc.Error) {
	in := frontend.Input{Key: "defaults", Method: "elicitation/create", Params: map[string]any{
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
	return single(ctx, c, "test_elicitation_sep1034_defaults", in, func(raw json.RawMessage) any {
		return textResult("Elicitation completed: " + decodeElicit(raw).String())
	})
}

func elicitEnums(ctx context.Context, c *frontend.Call, _ json.RawMessage) (any, *jsonrpc.Error) {
	titled := func(pairs ...string) []any {
		var out []any
		for i := 0; i+1 < len(pairs); i += 2 {
			out = append(out, map[string]any{"const": pairs[i], "title": pairs[i+1]})
		}
		return out
	}
	in := frontend.Input{Key: "enums", Method: "elicitation/create", Params: map[string]any{
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
	return single(ctx, c, "test_elicitation_sep1330_enums", in, func(raw json.RawMessage) any {
		return textResult("Elicitation completed: " + decodeElicit(raw).String())
	})
}

// greetByName is the handler of a tool that asks for the user's name by
// elicitation and greets them (two scenarios, two tool names).
func greetByName(tool string) func(context.Context, *frontend.Call, json.RawMessage) (any, *jsonrpc.Error) {
	return func(ctx context.Context, c *frontend.Call, _ json.RawMessage) (any, *jsonrpc.Error) {
		return single(ctx, c, tool, elicitName("user_name", "What is your name?", "name"), func(raw json.RawMessage) any {
			e := decodeElicit(raw)
			if name, ok := e.field("name"); ok {
				return textResult("Hello, " + name + "!")
			}
			return textResult("No name given (" + e.String() + ").")
		})
	}
}

func mrtrSampling(ctx context.Context, c *frontend.Call, _ json.RawMessage) (any, *jsonrpc.Error) {
	return single(ctx, c, "test_input_required_result_sampling", sampleText("capital_question", "What is the capital of France?", 100), func(raw json.RawMessage) any {
		return textResult("Sampled answer: " + sampledText(raw))
	})
}

func mrtrRoots(ctx context.Context, c *frontend.Call, _ json.RawMessage) (any, *jsonrpc.Error) {
	return single(ctx, c, "test_input_required_result_list_roots", listRoots("client_roots"), func(raw json.RawMessage) any {
		uris := rootURIs(raw)
		if len(uris) == 0 {
			return textResult("The client has no roots.")
		}
		return textResult("Client roots: " + strings.Join(uris, ", "))
	})
}

// mrtrRequestState serves the request-state and tampered-state fixtures: a
// confirmation whose retry must carry the requestState of round 1.
func mrtrRequestState(owner string) func(context.Context, *frontend.Call, json.RawMessage) (any, *jsonrpc.Error) {
	confirm := frontend.Input{Key: "confirm", Method: "elicitation/create", Params: map[string]any{
		"message": "Please confirm",
		"requestedSchema": map[string]any{
			"type":       "object",
			"properties": map[string]any{"ok": map[string]any{"type": "boolean"}},
			"required":   []string{"ok"},
		},
	}}
	return func(ctx context.Context, c *frontend.Call, _ json.RawMessage) (any, *jsonrpc.Error) {
		r, jerr := c.Retry(owner)
		if jerr != nil {
			return nil, jerr
		}
		if c.Era() == frontend.EraModern && r.State == nil {
			// Round 1, or a retry without the state: (re)start.
			r.Responses = nil
		}
		got, ok, res, jerr := c.Gather(ctx, owner, r, []frontend.Input{confirm}, map[string]any{"round": 1})
		if !ok {
			return res, jerr
		}
		e := decodeElicit(got["confirm"])
		return textResult("state-ok: the requestState verified; confirmation " + e.String()), nil
	}
}

// threeInputs are the inputs of the multiple-inputs and capabilities
// fixtures: one of each kind.
func threeInputs() []frontend.Input {
	return []frontend.Input{
		elicitName("user_name", "What is your name?", "name"),
		sampleText("greeting", "Generate a greeting", 50),
		listRoots("client_roots"),
	}
}

func mrtrMultiple(ctx context.Context, c *frontend.Call, _ json.RawMessage) (any, *jsonrpc.Error) {
	const owner = "test_input_required_result_multiple_inputs"
	return declared(ctx, c, owner, threeInputs(), func(got map[string]json.RawMessage) any {
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

func mrtrCapabilities(ctx context.Context, c *frontend.Call, _ json.RawMessage) (any, *jsonrpc.Error) {
	const owner = "test_input_required_result_capabilities"
	return declared(ctx, c, owner, threeInputs(), func(got map[string]json.RawMessage) any {
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
func declared(ctx context.Context, c *frontend.Call, owner string, ins []frontend.Input, done func(map[string]json.RawMessage) any) (any, *jsonrpc.Error) {
	var ask []frontend.Input
	for _, in := range ins {
		if c.Era() != frontend.EraModern {
			ask = append(ask, in)
			continue
		}
		if c.Declared(in.Capability()) {
			ask = append(ask, in)
		}
	}
	if len(ask) == 0 {
		return textResult("The client declared none of elicitation, sampling or roots: nothing to ask."), nil
	}
	r, jerr := c.Retry(owner)
	if jerr != nil {
		return nil, jerr
	}
	keys := make([]string, len(ask))
	for i, in := range ask {
		keys[i] = in.Key
	}
	got, ok, res, jerr := c.Gather(ctx, owner, r, ask, map[string]any{"asked": keys})
	if !ok {
		return res, jerr
	}
	return done(got), nil
}

func mrtrMultiRound(ctx context.Context, c *frontend.Call, _ json.RawMessage) (any, *jsonrpc.Error) {
	const owner = "test_input_required_result_multi_round"
	r, jerr := c.Retry(owner)
	if jerr != nil {
		return nil, jerr
	}
	var round int
	var name string
	if r.State != nil {
		_ = json.Unmarshal(r.State["round"], &round)
		_ = json.Unmarshal(r.State["name"], &name)
	}
	if round < 2 {
		got, ok, res, jerr := c.Gather(ctx, owner, r, []frontend.Input{elicitName("step1", "Step 1: What is your name?", "name")}, map[string]any{"round": 1})
		if !ok {
			return res, jerr
		}
		name, _ = decodeElicit(got["step1"]).field("name")
		// The second round's responses are not in this retry.
		r.Responses = nil
	}
	got, ok, res, jerr := c.Gather(ctx, owner, r, []frontend.Input{elicitName("step2", "Step 2: What is your favorite color?", "color")},
		map[string]any{"round": 2, "name": name})
	if !ok {
		return res, jerr
	}
	color, _ := decodeElicit(got["step2"]).field("color")
	return textResult(fmt.Sprintf("Hello, %s! Your favorite color is %s.", name, color)), nil
}
