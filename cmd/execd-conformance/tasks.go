package main

// The fixtures of the tasks-* scenarios (the io.modelcontextprotocol/tasks
// extension): a tool that never runs as a task, and tools that become
// tasks at once (Call.BecomeTask) or by asking for input
// (Call.TaskInput), ending with a result, a tool error or a protocol
// error.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"execd/internal/frontend"
	"execd/internal/jsonrpc"
)

func objectSchema(props map[string]any, required ...string) map[string]any {
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func taskFixture(name, desc string, ts frontend.TaskSupport, schema map[string]any, run runFunc) frontend.Tool[json.RawMessage] {
	t := fixtureTool(name, desc, schema, nil, run)
	t.Tasks = ts
	return t
}

// toolError is a CallToolResult with isError.
func toolError(text string) map[string]any {
	return map[string]any{"isError": true, "content": []any{textContent(text)}}
}

func taskFixtures() []frontend.Tool[json.RawMessage] {
	return []frontend.Tool[json.RawMessage]{
		fixtureTool("greet", "Greets by name; never a task.",
			objectSchema(map[string]any{"name": map[string]any{"type": "string"}}, "name"), nil,
			func(_ context.Context, _ *frontend.Call, args json.RawMessage) (any, *jsonrpc.Error) {
				return textResult("Hello, " + stringArg(args, "name") + "!"), nil
			}),
		taskFixture("slow_compute", "Sleeps for seconds, as a task unless seconds is 0, then answers.", frontend.TaskOptional,
			objectSchema(map[string]any{"seconds": map[string]any{"type": "number"}, "label": map[string]any{"type": "string"}}, "seconds"),
			slowCompute),
		taskFixture("failing_job", "Runs only as a task and ends with a tool error.", frontend.TaskRequired, nil,
			func(ctx context.Context, c *frontend.Call, _ json.RawMessage) (any, *jsonrpc.Error) {
				c.BecomeTask()
				if !pause(ctx, 300*time.Millisecond) {
					return nil, nil
				}
				return toolError("The job failed: the input could not be processed."), nil
			}),
		taskFixture("protocol_error_job", "Runs as a task and ends with a JSON-RPC error.", frontend.TaskOptional, nil,
			func(ctx context.Context, c *frontend.Call, _ json.RawMessage) (any, *jsonrpc.Error) {
				c.BecomeTask()
				if !pause(ctx, 200*time.Millisecond) {
					return nil, nil
				}
				return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "Internal error: the job crashed")
			}),
		taskFixture("confirm_delete", "Asks, through its task, whether to delete filename.", frontend.TaskOptional,
			objectSchema(map[string]any{"filename": map[string]any{"type": "string"}}, "filename"), confirmDelete),
		taskFixture("multi_input", "Asks two questions at once through its task.", frontend.TaskOptional, nil, multiInput),
		taskFixture("test_tool_with_task", "Asks for a name (input_required), then greets as a task.", frontend.TaskRequired, nil, greetAsTask),
	}
}

func slowCompute(ctx context.Context, c *frontend.Call, args json.RawMessage) (any, *jsonrpc.Error) {
	var p struct {
		Seconds float64 `json:"seconds"`
		Label   string  `json:"label"`
	}
	_ = json.Unmarshal(args, &p)
	if p.Seconds > 0 {
		c.BecomeTask()
	}
	rep := c.Reporter()
	defer rep.Stop()
	rep.Start("computing " + p.Label)
	if !pause(ctx, time.Duration(p.Seconds*float64(time.Second))) {
		return nil, nil
	}
	return textResult(fmt.Sprintf("Computed %s in %g s.", p.Label, p.Seconds)), nil
}

func confirmDelete(ctx context.Context, c *frontend.Call, args json.RawMessage) (any, *jsonrpc.Error) {
	name := stringArg(args, "filename")
	got, err := c.TaskInput(ctx, []frontend.Input{{Key: "confirm", Method: "elicitation/create", Params: map[string]any{
		"mode":            "form",
		"message":         "Delete " + name + "?",
		"requestedSchema": objectSchema(map[string]any{"confirm": map[string]any{"type": "boolean"}}, "confirm"),
	}}})
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "Internal error: %v", err)
	}
	e := decodeElicit(got["confirm"])
	if yes, _ := e.Content["confirm"].(bool); e.Action == "accept" && yes {
		return textResult("Deleted " + name + "."), nil
	}
	return textResult("Kept " + name + " (" + e.String() + ")."), nil
}

func multiInput(ctx context.Context, c *frontend.Call, _ json.RawMessage) (any, *jsonrpc.Error) {
	got, err := c.TaskInput(ctx, []frontend.Input{elicitName("name", "What is your name?", "name"), {Key: "confirm", Method: "elicitation/create", Params: map[string]any{
		"message":         "Proceed?",
		"requestedSchema": objectSchema(map[string]any{"confirm": map[string]any{"type": "boolean"}}, "confirm"),
	}}})
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "Internal error: %v", err)
	}
	return textResult("Answers: " + decodeElicit(got["name"]).String() + "; " + decodeElicit(got["confirm"]).String()), nil
}

// greetAsTask gathers the name with an input_required round, as an MRTR
// tool does before it makes a task, then becomes one.
func greetAsTask(ctx context.Context, c *frontend.Call, _ json.RawMessage) (any, *jsonrpc.Error) {
	const owner = "test_tool_with_task"
	in := elicitName("user_name", "What is your name?", "name")
	r, jerr := c.Retry(owner)
	if jerr != nil {
		return nil, jerr
	}
	got, ok, res, jerr := c.Gather(ctx, owner, r, []frontend.Input{in}, nil)
	if !ok {
		return res, jerr
	}
	c.BecomeTask()
	if !pause(ctx, 200*time.Millisecond) {
		return nil, nil
	}
	name, _ := decodeElicit(got[in.Key]).field("name")
	return textResult("Hello, " + name + "!"), nil
}
