package main

// The fixture prompts and resources.

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"

	"execd/internal/frontend"
	"execd/internal/jsonrpc"
)

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

func getPrompt(ctx context.Context, c *frontend.Call, name string, args map[string]string) (any, *jsonrpc.Error) {
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
		if c.Era() == frontend.EraModern {
			if !c.Declared("elicitation") {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMissingCapability, Message: "Missing required client capability",
					Data: map[string]any{"requiredCapabilities": map[string]any{"elicitation": map[string]any{}}}}
			}
		}
		in := elicitName("user_context", "What context should the prompt use?", "context")
		return single(ctx, c, owner, in, func(raw json.RawMessage) any {
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

func readResource(_ context.Context, _ *frontend.Call, uri string) (any, *jsonrpc.Error) {
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
	return nil, nil // not a fixture: the front end answers the era's not-found error
}
