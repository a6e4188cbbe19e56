package frontend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"execd/internal/jsonrpc"
	"execd/internal/mcptest"
	"execd/internal/tasks"
)

// taskRig is an engine with tasks and tools whose runs the test controls:
//
//	test_task {}         becomes a task at once, then waits for release
//	                     (its text) or its context's end (reported on ended)
//	test_wait {}         waits like test_task without asking to be a task
//	test_ask {}          asks two inputs through its task, answers both
//	test_required {}     TaskRequired; answers "ran"
//	test_fail {}         reports progress, becomes a task, ends in a tool error
type taskRig struct {
	s       *Server
	url     string
	store   *tasks.Store
	release chan string
	ended   chan error // the cause of each run's context when it ended early
}

func newTaskRig(t *testing.T, mod func(*Options)) *taskRig {
	t.Helper()
	st, err := tasks.Open(tasks.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	opts := testOptions()
	opts.Tasks, opts.TaskAfter = st, time.Hour
	if mod != nil {
		mod(&opts)
	}
	r := &taskRig{store: st, release: make(chan string, 10), ended: make(chan error, 10)}
	var ts *httptest.Server
	r.s, ts = newHTTP(t, opts)
	r.url = ts.URL + "/mcp"
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) }) // before the server's Shutdown, which waits for the runs
	wait := func(ctx context.Context, c *Call, become bool) (any, *jsonrpc.Error) {
		rep := c.Reporter()
		defer rep.Stop()
		rep.Start("started")
		rep.Say("3/10 loading")
		if become && !c.BecomeTask() {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "cannot become a task")
		}
		select {
		case text := <-r.release:
			return StructuredResult(map[string]any{"text": text}, false), nil
		case <-stop:
			return nil, nil
		case <-ctx.Done():
			r.ended <- context.Cause(ctx)
			return nil, nil
		}
	}
	add := func(tl Tool[struct{}]) {
		if err := AddTool(r.s, tl); err != nil {
			t.Fatal(err)
		}
	}
	add(Tool[struct{}]{Name: "test_task", Description: "Becomes a task.", Tasks: TaskOptional,
		Run: func(ctx context.Context, c *Call, _ struct{}) (any, *jsonrpc.Error) { return wait(ctx, c, true) }})
	add(Tool[struct{}]{Name: "test_wait", Description: "Waits.", Tasks: TaskOptional,
		Run: func(ctx context.Context, c *Call, _ struct{}) (any, *jsonrpc.Error) { return wait(ctx, c, false) }})
	add(Tool[struct{}]{Name: "test_required", Description: "Runs only as a task.", Tasks: TaskRequired,
		Run: func(context.Context, *Call, struct{}) (any, *jsonrpc.Error) {
			return StructuredResult(map[string]any{"text": "ran"}, false), nil
		}})
	add(Tool[struct{}]{Name: "test_fail", Description: "Fails.", Tasks: TaskOptional,
		Run: func(ctx context.Context, c *Call, _ struct{}) (any, *jsonrpc.Error) {
			rep := c.Reporter()
			defer rep.Stop()
			rep.Say("accepted python code")
			c.BecomeTask()
			return map[string]any{"isError": true, "content": []map[string]any{{"type": "text", "text": "NameError: name 'y' is not defined"}}}, nil
		}})
	add(Tool[struct{}]{Name: "test_ask", Description: "Asks twice at once.", Tasks: TaskOptional,
		Run: func(ctx context.Context, c *Call, _ struct{}) (any, *jsonrpc.Error) {
			form := func(msg string) Input {
				return Input{Key: "q", Method: "elicitation/create", Params: map[string]any{"message": msg, "requestedSchema": map[string]any{"type": "object"}}}
			}
			ins := []Input{form("first?"), form("second?")}
			ins[1].Key = "r"
			got, err := c.TaskInput(ctx, ins)
			if err != nil {
				return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%v", err)
			}
			return StructuredResult(map[string]any{"q": json.RawMessage(got["q"]), "r": json.RawMessage(got["r"])}, false), nil
		}})
	return r
}

func (r *taskRig) client(t *testing.T, token string) *client {
	return &client{T: t, URL: r.url, Token: token, Caps: mcptest.TasksCaps()}
}

// startTask calls tool and returns the task it became.
func startTask(t *testing.T, c *client, tool string) string {
	t.Helper()
	msg := c.Answer("tools/call", map[string]any{"name": tool, "arguments": map[string]any{}})
	res, _ := msg["result"].(map[string]any)
	id, _ := res["taskId"].(string)
	if res["resultType"] != "task" || id == "" || res["status"] != "working" {
		t.Fatalf("%s did not become a task: %v", tool, msg)
	}
	return id
}

func taskGet(t *testing.T, c *client, id string) map[string]any {
	t.Helper()
	return c.Answer("tasks/get", map[string]any{"taskId": id})
}

func errorCode(msg map[string]any) float64 {
	e, _ := msg["error"].(map[string]any)
	code, _ := e["code"].(float64)
	return code
}

// pollStatus polls until the task's status is not working (at most 10 s).
func pollStatus(t *testing.T, c *client, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, _ := taskGet(t, c, id)["result"].(map[string]any)
		if res["status"] != "working" || time.Now().After(deadline) {
			return res
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Another principal's tasks/get, tasks/update and tasks/cancel of a task
// are answered exactly as for an id that was never minted; the run goes on.
func TestTasksBelongToTheirPrincipal(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice tok-alice-0123456789\nbob tok-bob-0123456789ab\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newTaskRig(t, func(o *Options) { o.AuthTokensFile = tokens })
	alice, bob := r.client(t, "tok-alice-0123456789"), r.client(t, "tok-bob-0123456789ab")
	id := startTask(t, alice, "test_task")
	madeUp := strings.Repeat("ab", 16)
	for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
		params := func(id string) map[string]any {
			p := map[string]any{"taskId": id}
			if m == "tasks/update" {
				p["inputResponses"] = map[string]any{}
			}
			return p
		}
		other, unknown := bob.Answer(m, params(id)), bob.Answer(m, params(madeUp))
		if errorCode(other) != jsonrpc.CodeInvalidParams || fmt.Sprint(other["error"]) != fmt.Sprint(unknown["error"]) {
			t.Errorf("%s of alice's task by bob: %v; want exactly the answer to a made-up id: %v", m, other, unknown)
		}
	}
	if res, _ := taskGet(t, alice, id)["result"].(map[string]any); res["status"] != "working" {
		t.Errorf("alice's task after bob's attempts: %v", res)
	}
	r.release <- "done"
	if res := pollStatus(t, alice, id); res["status"] != "completed" {
		t.Errorf("alice's task: %v", res)
	}
}

// Once the call is a task its request is over: closing that connection
// no longer stops the run, whose result tasks/get then inlines.
func TestTaskOutlivesItsRequest(t *testing.T) {
	r := newTaskRig(t, nil)
	c := r.client(t, "")
	id := startTask(t, c, "test_task") // Request has read the whole answer and closed it
	res, _ := taskGet(t, c, id)["result"].(map[string]any)
	if res["status"] != "working" || res["statusMessage"] != "3/10 loading" {
		t.Errorf("tasks/get of a running task: %v; want working with the latest progress", res)
	}
	if ts := r.s.Tasks(10); len(ts) != 1 || ts[0].ID != id[:8] || !ts[0].Running || ts[0].Status != "working" || ts[0].Message != "3/10 loading" {
		t.Errorf("the operator's view of the running task: %+v", ts)
	}
	r.release <- "outlived"
	res = pollStatus(t, c, id)
	inner, _ := res["result"].(map[string]any)
	sc, _ := inner["structuredContent"].(map[string]any)
	if res["status"] != "completed" || sc["text"] != "outlived" {
		t.Errorf("completed task: %v", res)
	}
	select {
	case cause := <-r.ended:
		t.Errorf("the run was stopped (%v)", cause)
	default:
	}
}

// Before the call becomes a task, its request's end stops the run as
// always, and no task is made.
func TestRequestEndBeforeTheTaskStopsTheRun(t *testing.T) {
	r := newTaskRig(t, nil)
	c := r.client(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_wait","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`
	resp := c.Post(ctx, body, map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "test_wait"})
	cancel()
	resp.Body.Close()
	if cause := <-r.ended; !errors.Is(cause, errClientGone) {
		t.Errorf("the run ended with %v, want the client's close", cause)
	}
	if n := r.store.Counts()[tasks.Working]; n != 0 {
		t.Errorf("%d tasks made for a call whose client left", n)
	}
}

// tasks/cancel is served like notifications/cancelled: at once, even when
// the client's open requests are at their cap (where tasks/get is refused),
// and the run is stopped as a cancelled call.
func TestTaskCancelNeverWaits(t *testing.T) {
	r := newTaskRig(t, func(o *Options) { o.MaxStreamsPerPrincipal = 1 })
	c := r.client(t, "")
	id := startTask(t, c, "test_task")
	// Hold the one stream this client may have open.
	held := c.Post(context.Background(), `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"test_block","arguments":{},`+modernMeta+`}}`,
		map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "test_block"})
	defer held.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for r.s.OpenStreams() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if code := errorCode(taskGet(t, c, id)); code != jsonrpc.CodeServerPolicy {
		t.Fatalf("tasks/get at the stream cap: code %v, want the cap's refusal", code)
	}
	ack := c.Answer("tasks/cancel", map[string]any{"taskId": id})
	if res, _ := ack["result"].(map[string]any); res == nil || res["resultType"] != "complete" || res["status"] != nil {
		t.Fatalf("tasks/cancel at the stream cap: %v; want the empty acknowledgement", ack)
	}
	if cause := <-r.ended; !errors.Is(cause, errClientCancel) {
		t.Errorf("the run ended with %v, want the client's cancel", cause)
	}
	rec, _ := r.store.Get(LocalPrincipal, id)
	if rec.Status != tasks.Cancelled {
		t.Errorf("record after tasks/cancel: %s", rec.Status)
	}
}

// Beyond protocol.max_tasks_per_principal running tasks, a call that would
// become one is stopped and refused with an error that says why.
func TestTaskCapRefusesWhenAllRun(t *testing.T) {
	st, _ := tasks.Open(tasks.Config{MaxPerPrincipal: 1})
	t.Cleanup(st.Close)
	r := newTaskRig(t, func(o *Options) { o.Tasks = st })
	r.store = st
	c := r.client(t, "")
	startTask(t, c, "test_task")
	msg := c.Answer("tools/call", map[string]any{"name": "test_task", "arguments": map[string]any{}})
	e, _ := msg["error"].(map[string]any)
	if errorCode(msg) != jsonrpc.CodeServerPolicy || !strings.Contains(fmt.Sprint(e["message"]), "protocol.max_tasks_per_principal") {
		t.Errorf("a task beyond the cap: %v", msg)
	}
	if cause := <-r.ended; !errors.Is(cause, errTaskRefused) {
		t.Errorf("the refused call's run ended with %v", cause)
	}
}

// A TaskRequired tool: a modern request without the extension is -32021
// naming it; a 2025-11-25 call without params.task is -32601.
func TestRequiredTasks(t *testing.T) {
	r := newTaskRig(t, nil)
	plain := &client{T: t, URL: r.url}
	msg := plain.Answer("tools/call", map[string]any{"name": "test_required", "arguments": map[string]any{}})
	b, _ := json.Marshal(msg["error"])
	if errorCode(msg) != jsonrpc.CodeMissingCapability || !strings.Contains(string(b), `"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}`) {
		t.Errorf("required tool without the extension: %s", b)
	}
	legacy := &client{T: t, URL: r.url}
	legacy.Initialize()
	if msg := legacy.Answer("tools/call", map[string]any{"name": "test_required", "arguments": map[string]any{}}); errorCode(msg) != jsonrpc.CodeMethodNotFound {
		t.Errorf("legacy call of a required tool without task: %v", msg)
	}
	msg = legacy.Answer("tools/call", map[string]any{"name": "test_required", "arguments": map[string]any{}, "task": map[string]any{}})
	res, _ := msg["result"].(map[string]any)
	if _, ok := res["task"].(map[string]any); !ok {
		t.Errorf("legacy call of a required tool with task: %v", msg)
	}
}

// Two inputs asked at once: answering one leaves the task input_required
// with only the other; answering it resumes the run with both.
func TestTaskInputPartially(t *testing.T) {
	r := newTaskRig(t, nil)
	c := r.client(t, "")
	id := startTask(t, c, "test_ask")
	res := pollStatus(t, c, id)
	reqs, _ := res["inputRequests"].(map[string]any)
	if res["status"] != "input_required" || len(reqs) != 2 || reqs["q-1"] == nil || reqs["r-2"] == nil {
		t.Fatalf("task asking twice: %v; want input_required with q-1 and r-2", res)
	}
	answer := func(key, value string) {
		ack := c.Answer("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
			key: map[string]any{"action": "accept", "content": map[string]any{"value": value}}}})
		if ack["result"] == nil {
			t.Fatalf("tasks/update: %v", ack)
		}
	}
	answer("q-1", "one")
	res, _ = taskGet(t, c, id)["result"].(map[string]any)
	reqs, _ = res["inputRequests"].(map[string]any)
	if res["status"] != "input_required" || len(reqs) != 1 || reqs["r-2"] == nil {
		t.Fatalf("after one answer: %v; want input_required with r-2 alone", res)
	}
	answer("r-2", "two")
	res = pollStatus(t, c, id)
	inner, _ := res["result"].(map[string]any)
	b, _ := json.Marshal(inner["structuredContent"])
	if res["status"] != "completed" || !strings.Contains(string(b), `"one"`) || !strings.Contains(string(b), `"two"`) {
		t.Errorf("after both answers: %v", res)
	}
}

// A task still running when the shutdown grace ends fails, saying that
// execd stopped; its run was stopped by the shutdown.
func TestShutdownFailsRunningTasks(t *testing.T) {
	r := newTaskRig(t, nil)
	c := r.client(t, "")
	id := startTask(t, c, "test_task")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace
	r.s.Shutdown(ctx)
	if cause := <-r.ended; !errors.Is(cause, ErrShutdown) {
		t.Errorf("the run ended with %v", cause)
	}
	rec, ok := r.store.Get(LocalPrincipal, id)
	if !ok || rec.Status != tasks.Failed || !rec.Stopped {
		t.Fatalf("record after shutdown: %+v", rec)
	}
	d := r.s.detailedTask(rec, nil)
	if !strings.Contains(string(d["error"].(json.RawMessage)), "execd stopped before the task finished") {
		t.Errorf("tasks/get's error of a stopped task: %s", d["error"])
	}
}

// Mcp-Name of tasks/get, tasks/update and tasks/cancel must be the taskId.
func TestTaskMcpNameMustBeTheTaskID(t *testing.T) {
	r := newTaskRig(t, nil)
	c := r.client(t, "")
	id := startTask(t, c, "test_task")
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		resp := c.Post(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"`+m+`","params":{"taskId":"`+id+`","inputResponses":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`,
			map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": m, "Mcp-Name": "not-" + id})
		var msg map[string]any
		json.NewDecoder(resp.Body).Decode(&msg)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || errorCode(msg) != jsonrpc.CodeHeaderMismatch {
			t.Errorf("%s with a wrong Mcp-Name: %d %v", m, resp.StatusCode, msg)
		}
	}
	r.release <- "x"
}

// A 2025-11-25 task's status changes are notified on its session's GET
// stream while one is open.
func TestLegacyTaskStatusOnTheSessionStream(t *testing.T) {
	r := newTaskRig(t, nil)
	c := &client{T: t, URL: r.url}
	c.Initialize()
	req, _ := http.NewRequest(http.MethodGet, r.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.Session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	events := mcptest.Events(resp)
	msg := c.Answer("tools/call", map[string]any{"name": "test_task", "arguments": map[string]any{}, "task": map[string]any{"ttl": 60000}})
	res, _ := msg["result"].(map[string]any)
	task, _ := res["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	if id == "" || task["ttl"] != float64(60000) {
		t.Fatalf("CreateTaskResult: %v", msg)
	}
	r.release <- "done"
	for m := range events {
		p, _ := m["params"].(map[string]any)
		if m["method"] == "notifications/tasks/status" && p["taskId"] == id && p["status"] == "completed" {
			resp.Body.Close()
			return
		}
	}
	t.Fatal("the GET stream ended without the completed status")
}

// A 2025-11-25 task whose tool reports an error is failed, and its status
// message is the error's text, not the last progress message (a client
// such as the Inspector shows statusMessage as the failure).
func TestLegacyFailedTaskSaysWhy(t *testing.T) {
	r := newTaskRig(t, nil)
	c := &client{T: t, URL: r.url}
	c.Initialize()
	msg := c.Answer("tools/call", map[string]any{"name": "test_fail", "arguments": map[string]any{}, "task": map[string]any{"ttl": 60000}})
	res, _ := msg["result"].(map[string]any)
	task, _ := res["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	if id == "" {
		t.Fatalf("CreateTaskResult: %v", msg)
	}
	got := pollStatus(t, c, id)
	if got["status"] != "failed" || got["statusMessage"] != "NameError: name 'y' is not defined" {
		t.Errorf("tasks/get of a task whose tool failed: %v; want failed with the error's text", got)
	}
}
