package worker

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/tetratelabs/wazero/api"

	"execd/internal/upstream"
)

// Code mode: execd.tool_call (sandbox/ABI.md) hands a call of an upstream
// MCP server's tool, or the listing of those tools, to the run's Tools
// (internal/upstream's Run). A call is one more entry of the run's network
// table (network.go): it runs on a goroutine of its own, the guest waits
// for it in net_wait, reads its answer with net_head and forgets it with
// net_close, and a stop or the end of the run cancels it, which cancels it
// upstream (notifications/cancelled). So the JavaScript guest's event loop
// waits for fetches and tool calls alike, and several calls are in flight
// at once (Promise.all).

// Tools is the upstream servers' tools one run may use: internal/upstream's
// Run (its principal, its approvals, its counts of calls).
type Tools interface {
	Call(ctx context.Context, server, tool string, args json.RawMessage, progress upstream.ProgressFunc) (*upstream.Result, error)
	Tools(ctx context.Context) ([]upstream.ToolInfo, error)
}

// ToolCall is the calls a run made of one tool with one outcome
// (Result.ToolCalls).
type ToolCall struct {
	Server, Tool string
	// Outcome is "ok", "tool_error" (the tool's own failure) or the code of
	// why there was no result (internal/upstream's Code: "limit",
	// "timeout", "refused", …).
	Outcome string
	Count   int
}

// maxToolCallKinds bounds Result.ToolCalls: calls of further tools and
// outcomes are left out of it (the upstream's metrics still count them).
const maxToolCallKinds = 100

// toolRequest is what tool_call reads: a call, or {"list": true}.
type toolRequest struct {
	List      bool            `json:"list"`
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// toolAnswer is what net_head gives for a finished call.
type toolAnswer struct {
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	Text              *string         `json:"text,omitempty"`
	Images            []toolImage     `json:"images,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
	// Error and Code: the call got no result (internal/upstream's Error).
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
	// Tools: the answer of a listing.
	Tools *[]toolEntry `json:"tools,omitempty"`
}

// toolImage is an image of the answer: its bytes are the answer's body
// (net_body), one image after the other.
type toolImage struct {
	MIMEType string `json:"mimeType"`
	Length   int    `json:"length"`
}

// toolEntry is one tool of tools.list().
type toolEntry struct {
	Server      string          `json:"server"`
	Name        string          `json:"name"`
	Ident       string          `json:"ident"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Access      string          `json:"access"`
}

// maxToolRequest bounds the request tool_call reads (its arguments).
const maxToolRequest = 4 << 20

// hostToolCall: (req_ptr, req_len) -> i32, the id of the call in the
// run's network table, or netStopped.
func hostToolCall(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	stack[0] = api.EncodeI32(st.toolCall(mod, uint32(stack[0]), uint32(stack[1])))
}

func (st *runState) toolCall(mod api.Module, ptr, n uint32) int32 {
	if st == nil || st.net == nil || st.finished.Load() || st.interrupt.Load() {
		return netStopped
	}
	ns := st.net
	fail := func(code, msg string) int32 {
		head, _ := json.Marshal(toolAnswer{Error: msg, Code: code})
		return ns.add(&netCall{tool: true, finished: true, head: head}, true)
	}
	if st.tools == nil {
		return fail(string(upstream.CodeUnknownTool), "tools: this execd has no upstream MCP servers ([[upstream]] in its configuration)")
	}
	if n > maxToolRequest {
		return fail(string(upstream.CodeBadArguments), "tools: the call's arguments are larger than 4 MiB")
	}
	b, ok := mod.Memory().Read(ptr, n)
	if !ok {
		return fail(string(upstream.CodeBadArguments), "tools: the call is outside the sandbox's memory")
	}
	var req toolRequest
	if err := json.Unmarshal(b, &req); err != nil {
		return fail(string(upstream.CodeBadArguments), "tools: the call is malformed")
	}
	ctx, cancel := context.WithCancel(context.WithValue(ns.ctx, askKey{}, st))
	c := &netCall{tool: true, cancel: cancel}
	id := ns.add(c, false)
	ns.wg.Add(1)
	go st.runTool(id, c, ctx, &req)
	return id
}

// runTool is a call's goroutine.
func (st *runState) runTool(id int32, c *netCall, ctx context.Context, req *toolRequest) {
	n := st.net
	defer n.wg.Done()
	defer c.cancel()
	var ans toolAnswer
	var body []byte
	if req.List {
		ans = listAnswer(st.tools.Tools(ctx))
	} else {
		res, err := st.tools.Call(ctx, req.Server, req.Tool, req.Arguments, st.toolProgress)
		ans, body = callAnswer(res, err)
		outcome := string(upstream.OutcomeOK)
		switch {
		case err != nil:
			outcome = ans.Code
		case res.IsError:
			outcome = string(upstream.OutcomeToolError)
		}
		n.record(req.Server, req.Tool, outcome)
	}
	head, err := json.Marshal(ans)
	if err != nil {
		head, _ = json.Marshal(toolAnswer{Error: "tools: the answer could not be encoded: " + err.Error(), Code: string(upstream.CodeUpstream)})
	}
	n.finish(id, c, head, body)
}

// callAnswer is the head and the body of a call's answer.
func callAnswer(res *upstream.Result, err error) (toolAnswer, []byte) {
	if err != nil {
		code := string(upstream.CodeOf(err))
		if code == "" {
			code = string(upstream.CodeUnavailable)
		}
		return toolAnswer{Error: err.Error(), Code: code}, nil
	}
	text := res.Text
	a := toolAnswer{StructuredContent: res.StructuredContent, Text: &text, IsError: res.IsError}
	var body []byte
	for _, im := range res.Images {
		a.Images = append(a.Images, toolImage{MIMEType: im.MIMEType, Length: len(im.Data)})
		body = append(body, im.Data...)
	}
	return a, body
}

func listAnswer(infos []upstream.ToolInfo, err error) toolAnswer {
	list := make([]toolEntry, 0, len(infos))
	for _, ti := range infos {
		schema := ti.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		list = append(list, toolEntry{Server: ti.Server, Name: ti.Name, Ident: ti.Ident, Title: ti.Title,
			Description: ti.Description, InputSchema: schema, Access: string(ti.Access)})
	}
	a := toolAnswer{Tools: &list}
	if err != nil && len(infos) == 0 {
		var e *upstream.Error
		if errors.As(err, &e) {
			a.Code = string(e.Code)
		}
		a.Error = err.Error()
	}
	return a
}

// toolProgress relays an upstream's progress on a call as the run's.
func (st *runState) toolProgress(done, total float64, msg string) {
	if st.finished.Load() {
		return
	}
	st.progress(done, total, msg)
}

// record counts a finished call for Result.ToolCalls.
func (n *netState) record(server, tool, outcome string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i := range n.toolCalls {
		if c := &n.toolCalls[i]; c.Server == server && c.Tool == tool && c.Outcome == outcome {
			c.Count++
			return
		}
	}
	if len(n.toolCalls) < maxToolCallKinds {
		n.toolCalls = append(n.toolCalls, ToolCall{Server: server, Tool: tool, Outcome: outcome, Count: 1})
	}
}

// madeCalls is the run's ToolCalls, nil when it made none.
func (n *netState) madeCalls() []ToolCall {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.toolCalls) == 0 {
		return nil
	}
	return append([]ToolCall(nil), n.toolCalls...)
}

// askKey carries a tool call's runState to AskPerson.
type askKey struct{}

// AskPerson asks the person a question on behalf of a tool call, through
// the same path as the code's input() (the run's RunOptions.Input), one
// question at a time, the run's timer stopped meanwhile. ctx is the one
// Tools.Call was given (an upstream.Approver's); outside a tool call, or
// in a run without Input, nobody can be asked (InputNoClient). A stop of
// the run ends the wait. choices, if any, are the answers the person
// picks from (the Input sees them through Choices of its ctx); the answer
// is one of them unless the client answers something else.
func AskPerson(ctx context.Context, prompt string, choices ...string) InputAnswer {
	st, _ := ctx.Value(askKey{}).(*runState)
	if st == nil || st.input == nil || st.finished.Load() {
		return InputAnswer{Status: InputNoClient}
	}
	if len(prompt) > maxPrompt {
		prompt = prompt[:maxPrompt]
	}
	return st.askPerson(prompt, choices)
}

// choicesKey carries AskPerson's choices to the run's Input.
type choicesKey struct{}

// Choices is what the person is asked to pick from, for an InputSource
// given ctx: nil for the code's input() (a free-text answer).
func Choices(ctx context.Context) []string {
	c, _ := ctx.Value(choicesKey{}).([]string)
	return c
}
