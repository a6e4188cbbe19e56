package main

// The fixture tools of the conformance scenarios that need no client
// input: content of every kind, progress, logging, errors, schemas.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"execd/internal/frontend"
	"execd/internal/jsonrpc"
)

// Minimal media for the content fixtures: a 1x1 red PNG and a mono 8-bit
// WAV of eight silent samples.
const (
	fixturePNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
	fixtureWAV = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA=="
)

// Content helpers.

func textContent(text string) map[string]any { return map[string]any{"type": "text", "text": text} }

func textResult(text string) map[string]any {
	return map[string]any{"content": []any{textContent(text)}}
}

func noArgs() map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{}}
}

func fixtureTool(name, desc string, schema map[string]any, needs []string, run runFunc) frontend.Tool[json.RawMessage] {
	if schema == nil {
		schema = noArgs()
	}
	return frontend.Tool[json.RawMessage]{Name: name, Description: desc, InputSchema: schema, Needs: needs, Run: run}
}

// runFunc is a fixture tool's handler.
type runFunc = func(ctx context.Context, c *frontend.Call, args json.RawMessage) (any, *jsonrpc.Error)

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

func fixtureTools() []frontend.Tool[json.RawMessage] {
	return []frontend.Tool[json.RawMessage]{
		fixtureTool("test_simple_text", "Returns a simple text response.", nil, nil,
			func(context.Context, *frontend.Call, json.RawMessage) (any, *jsonrpc.Error) {
				return textResult("This is a simple text response for testing."), nil
			}),
		fixtureTool("test_image_content", "Returns an image.", nil, nil,
			func(context.Context, *frontend.Call, json.RawMessage) (any, *jsonrpc.Error) {
				return map[string]any{"content": []any{map[string]any{"type": "image", "data": fixturePNG, "mimeType": "image/png"}}}, nil
			}),
		fixtureTool("test_audio_content", "Returns audio.", nil, nil,
			func(context.Context, *frontend.Call, json.RawMessage) (any, *jsonrpc.Error) {
				return map[string]any{"content": []any{map[string]any{"type": "audio", "data": fixtureWAV, "mimeType": "audio/wav"}}}, nil
			}),
		fixtureTool("test_embedded_resource", "Returns an embedded resource.", nil, nil,
			func(context.Context, *frontend.Call, json.RawMessage) (any, *jsonrpc.Error) {
				return map[string]any{"content": []any{map[string]any{"type": "resource", "resource": map[string]any{
					"uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content.",
				}}}}, nil
			}),
		fixtureTool("test_multiple_content_types", "Returns text, an image and a resource.", nil, nil,
			func(context.Context, *frontend.Call, json.RawMessage) (any, *jsonrpc.Error) {
				return map[string]any{"content": []any{
					textContent("Multiple content types test:"),
					map[string]any{"type": "image", "data": fixturePNG, "mimeType": "image/png"},
					map[string]any{"type": "resource", "resource": map[string]any{
						"uri": "test://mixed-content-resource", "mimeType": "application/json", "text": `{"test":"data","value":123}`,
					}},
				}}, nil
			}),
		fixtureTool("test_tool_with_logging", "Sends three log messages while it runs.", nil, nil, withLogging),
		fixtureTool("test_error_handling", "Always returns a tool error.", nil, nil,
			func(context.Context, *frontend.Call, json.RawMessage) (any, *jsonrpc.Error) {
				return map[string]any{"isError": true, "content": []any{textContent("This tool intentionally returns an error for testing")}}, nil
			}),
		fixtureTool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100.", nil, nil, withProgress),
		fixtureTool("test_sampling", "Asks the client to sample a message.", map[string]any{
			"type":       "object",
			"properties": map[string]any{"prompt": map[string]any{"type": "string", "description": "The prompt to send to the LLM"}},
			"required":   []string{"prompt"},
		}, []string{"sampling"}, sampling),
		fixtureTool("test_elicitation", "Asks the user for information.", map[string]any{
			"type":       "object",
			"properties": map[string]any{"message": map[string]any{"type": "string", "description": "The message to show the user"}},
			"required":   []string{"message"},
		}, []string{"elicitation"}, elicitation),
		fixtureTool("test_elicitation_sep1034_defaults", "Elicits with defaults for every primitive type.", nil, []string{"elicitation"}, elicitDefaults),
		fixtureTool("test_elicitation_sep1330_enums", "Elicits with every enum variant.", nil, []string{"elicitation"}, elicitEnums),
		{
			Name:        "json_schema_2020_12_tool",
			Description: "Tool with JSON Schema 2020-12 features",
			InputSchema: jsonSchema202012(),
			Run: func(context.Context, *frontend.Call, json.RawMessage) (any, *jsonrpc.Error) {
				return textResult("ok"), nil
			},
		},
		fixtureTool("test_reconnection", "Answers after a short delay (SSE polling scenario).", nil, nil,
			func(ctx context.Context, _ *frontend.Call, _ json.RawMessage) (any, *jsonrpc.Error) {
				if !pause(ctx, 100*time.Millisecond) {
					return nil, nil
				}
				return textResult("Reconnection test completed"), nil
			}),
		// Modern-era diagnostics of server-stateless.
		fixtureTool("test_missing_capability", "Needs the sampling client capability.", nil, []string{"sampling"},
			func(context.Context, *frontend.Call, json.RawMessage) (any, *jsonrpc.Error) {
				return textResult("The client declared sampling."), nil
			}),
		fixtureTool("test_logging_tool", "Logs at info level; sends nothing unless the request asked for logs.", nil, nil,
			func(_ context.Context, c *frontend.Call, _ json.RawMessage) (any, *jsonrpc.Error) {
				c.Log("info", "test_logging_tool ran")
				return textResult("Logged, if the request set a log level."), nil
			}),
		fixtureTool("test_streaming_elicitation", "Needs user input: asks with an input_required result, never a server request.", nil, []string{"elicitation"}, greetByName("test_streaming_elicitation")),
		// MRTR (input_required) fixtures.
		fixtureTool("test_input_required_result_elicitation", "Asks for the user's name.", nil, []string{"elicitation"}, greetByName("test_input_required_result_elicitation")),
		fixtureTool("test_input_required_result_sampling", "Asks the client to sample an answer.", nil, []string{"sampling"}, mrtrSampling),
		fixtureTool("test_input_required_result_list_roots", "Asks for the client's roots.", nil, []string{"roots"}, mrtrRoots),
		fixtureTool("test_input_required_result_request_state", "Asks for a confirmation and round-trips requestState.", nil, []string{"elicitation"}, mrtrRequestState("test_input_required_result_request_state")),
		fixtureTool("test_input_required_result_multiple_inputs", "Asks for a name, a sampled greeting and the roots at once.", nil, nil, mrtrMultiple),
		fixtureTool("test_input_required_result_multi_round", "Asks in two rounds.", nil, []string{"elicitation"}, mrtrMultiRound),
		fixtureTool("test_input_required_result_tampered_state", "Rejects a requestState that fails its integrity check.", nil, []string{"elicitation"}, mrtrRequestState("test_input_required_result_tampered_state")),
		fixtureTool("test_input_required_result_capabilities", "Asks only for what the client declared.", nil, nil, mrtrCapabilities),
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

func withLogging(ctx context.Context, c *frontend.Call, _ json.RawMessage) (any, *jsonrpc.Error) {
	msgs := []string{"Tool execution started", "Tool processing data", "Tool execution completed"}
	for i, m := range msgs {
		if i > 0 && !pause(ctx, 50*time.Millisecond) {
			return nil, nil
		}
		c.Log("info", m)
	}
	return textResult("Logging test completed: sent 3 log messages."), nil
}

func withProgress(ctx context.Context, c *frontend.Call, _ json.RawMessage) (any, *jsonrpc.Error) {
	tok := c.ProgressToken()
	for i, p := range []int{0, 50, 100} {
		if i > 0 && !pause(ctx, 50*time.Millisecond) {
			return nil, nil
		}
		if len(tok) > 0 {
			_ = c.Notify("notifications/progress", map[string]any{
				"progressToken": tok, "progress": p, "total": 100, "message": fmt.Sprintf("step %d of 3", i+1),
			})
		}
	}
	return textResult("Progress test completed."), nil
}
