package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"execd/internal/frontend"
	"execd/internal/tasks"
)

const (
	metaVersion      = "io.modelcontextprotocol/protocolVersion"
	metaCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaLogLevel     = "io.modelcontextprotocol/logLevel"
)

// newFixtureServer is the fixture server's front end, as main builds it.
func newFixtureServer(t *testing.T) *frontend.Server {
	t.Helper()
	st, err := tasks.Open(tasks.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	s, err := newServer(frontend.Options{Listen: "127.0.0.1:0", Tasks: st, TaskAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s
}

// fixtureServer serves the fixtures over HTTP.
func fixtureServer(t *testing.T) (*frontend.Server, string) {
	t.Helper()
	s := newFixtureServer(t)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts.URL + "/mcp"
}

// modern posts one modern-era request with the headers a conforming client
// mirrors, and returns the HTTP status and every message of the answer
// (SSE events or the JSON body), the response last.
func modern(t *testing.T, url, method string, params map[string]any, caps map[string]any) (int, []map[string]any) {
	t.Helper()
	return modernWith(t, url, method, params, caps, nil)
}

func modernWith(t *testing.T, url, method string, params map[string]any, caps map[string]any, hdr map[string]string) (int, []map[string]any) {
	t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	meta, _ := params["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[metaVersion] = "2026-07-28"
	if caps == nil {
		caps = map[string]any{}
	}
	meta[metaCapabilities] = caps
	params["_meta"] = meta
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if n, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", n)
	}
	if u, ok := params["uri"].(string); ok {
		req.Header.Set("Mcp-Name", u)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var msgs []map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, l := range strings.Split(string(raw), "\n") {
			if d, ok := strings.CutPrefix(l, "data: "); ok {
				var m map[string]any
				if err := json.Unmarshal([]byte(d), &m); err != nil {
					t.Fatalf("bad SSE data %q: %v", d, err)
				}
				msgs = append(msgs, m)
			}
		}
	} else {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("bad body %q: %v", raw, err)
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		t.Fatalf("%s: empty answer (HTTP %d)", method, resp.StatusCode)
	}
	return resp.StatusCode, msgs
}

func last(msgs []map[string]any) map[string]any { return msgs[len(msgs)-1] }

func resultOf(t *testing.T, msg map[string]any) map[string]any {
	t.Helper()
	r, ok := msg["result"].(map[string]any)
	if !ok {
		t.Fatalf("want a result, got %v", msg)
	}
	return r
}

func errorCode(msg map[string]any) float64 {
	e, _ := msg["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

func firstText(t *testing.T, res map[string]any) string {
	t.Helper()
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		t.Fatalf("no content in %v", res)
	}
	txt, _ := content[0].(map[string]any)["text"].(string)
	return txt
}

var defaultCaps = map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}, "roots": map[string]any{"listChanged": true}}

func TestFixturesFollowTheProductTools(t *testing.T) {
	_, url := fixtureServer(t)
	_, msgs := modern(t, url, "tools/list", nil, nil)
	var names []string
	for _, tl := range resultOf(t, last(msgs))["tools"].([]any) {
		names = append(names, tl.(map[string]any)["name"].(string))
	}
	want := []string{"execute_code", "list_workspaces", "reset_workspace", "delete_workspace"}
	if len(names) <= len(want) || strings.Join(names[:len(want)], ",") != strings.Join(want, ",") {
		t.Fatalf("tools/list begins %v; want execd's tools first, then the fixtures", names)
	}
	if !strings.Contains(strings.Join(names, ","), "test_simple_text") {
		t.Fatal("the fixture server lists no fixtures")
	}
	_, msgs = modern(t, url, "server/discover", nil, nil)
	caps := resultOf(t, last(msgs))["capabilities"].(map[string]any)
	for _, k := range []string{"prompts", "resources", "completions", "tools", "logging"} {
		if _, ok := caps[k]; !ok {
			t.Errorf("capabilities lack %s: %v", k, caps)
		}
	}
}

// The suites' header scenarios call execute_code with arguments:{} or with
// "test-default" values: the answer is a result, never a JSON-RPC error.
func TestExecuteCodeAnswersWithAResult(t *testing.T) {
	_, url := fixtureServer(t)
	for _, args := range []map[string]any{{}, {"code": "test-default", "language": "test-default", "workspace": "Hello"}} {
		p := map[string]any{"name": "execute_code", "arguments": args}
		req := func() (int, []map[string]any) {
			if ws, ok := args["workspace"].(string); ok {
				return modernWith(t, url, "tools/call", p, nil, map[string]string{"Mcp-Param-Workspace": ws})
			}
			return modern(t, url, "tools/call", p, nil)
		}
		status, msgs := req()
		if r := resultOf(t, last(msgs)); status != 200 || r["isError"] != true {
			t.Fatalf("execute_code %v: HTTP %d %v", args, status, r)
		}
	}
}

func TestFixtureElicitationRoundTrip(t *testing.T) {
	_, url := fixtureServer(t)
	call := map[string]any{"name": "test_input_required_result_elicitation", "arguments": map[string]any{}}
	status, msgs := modern(t, url, "tools/call", call, defaultCaps)
	r1 := resultOf(t, last(msgs))
	if status != 200 || r1["resultType"] != "input_required" {
		t.Fatalf("round 1: HTTP %d %v", status, r1)
	}
	req := r1["inputRequests"].(map[string]any)["user_name"].(map[string]any)
	if req["method"] != "elicitation/create" {
		t.Fatalf("round 1 asks %v", req)
	}
	if _, ok := r1["ttlMs"]; ok {
		t.Error("input_required carries cache hints")
	}
	call = map[string]any{"name": "test_input_required_result_elicitation", "arguments": map[string]any{},
		"inputResponses": map[string]any{
			"user_name": map[string]any{"action": "accept", "content": map[string]any{"name": "Alice"}},
			"extra":     map[string]any{"action": "accept", "content": map[string]any{"x": 1}},
		}}
	_, msgs = modern(t, url, "tools/call", call, defaultCaps)
	r2 := resultOf(t, last(msgs))
	if r2["resultType"] != "complete" || firstText(t, r2) != "Hello, Alice!" {
		t.Fatalf("round 2: %v", r2)
	}
	// A retry with the wrong key asks again rather than failing.
	call["inputResponses"] = map[string]any{"wrong_key": map[string]any{"action": "accept", "content": map[string]any{}}}
	_, msgs = modern(t, url, "tools/call", call, defaultCaps)
	if r := resultOf(t, last(msgs)); r["resultType"] != "input_required" {
		t.Fatalf("wrong key: %v", r)
	}
}

func TestFixtureMalformedInputResponses(t *testing.T) {
	_, url := fixtureServer(t)
	for _, bad := range []any{nil, map[string]any{"user_name": 12345}, map[string]any{"user_name": map[string]any{"action": "maybe"}}} {
		call := map[string]any{"name": "test_input_required_result_elicitation", "arguments": map[string]any{}, "inputResponses": bad}
		_, msgs := modern(t, url, "tools/call", call, defaultCaps)
		if c := errorCode(last(msgs)); c != -32602 {
			t.Errorf("inputResponses %v: code %v, want -32602 (%v)", bad, c, last(msgs))
		}
	}
}

func TestFixtureMultiRound(t *testing.T) {
	_, url := fixtureServer(t)
	name := "test_input_required_result_multi_round"
	_, msgs := modern(t, url, "tools/call", map[string]any{"name": name, "arguments": map[string]any{}}, defaultCaps)
	r1 := resultOf(t, last(msgs))
	st1, _ := r1["requestState"].(string)
	if r1["resultType"] != "input_required" || st1 == "" {
		t.Fatalf("round 1: %v", r1)
	}
	_, msgs = modern(t, url, "tools/call", map[string]any{"name": name, "arguments": map[string]any{}, "requestState": st1,
		"inputResponses": map[string]any{"step1": map[string]any{"action": "accept", "content": map[string]any{"name": "Alice"}}}}, defaultCaps)
	r2 := resultOf(t, last(msgs))
	st2, _ := r2["requestState"].(string)
	if r2["resultType"] != "input_required" || st2 == "" || st2 == st1 {
		t.Fatalf("round 2: %v", r2)
	}
	if _, ok := r2["inputRequests"].(map[string]any)["step2"]; !ok {
		t.Fatalf("round 2 does not ask step2: %v", r2)
	}
	_, msgs = modern(t, url, "tools/call", map[string]any{"name": name, "arguments": map[string]any{}, "requestState": st2,
		"inputResponses": map[string]any{"step2": map[string]any{"action": "accept", "content": map[string]any{"color": "blue"}}}}, defaultCaps)
	r3 := resultOf(t, last(msgs))
	if r3["resultType"] != "complete" || !strings.Contains(firstText(t, r3), "Alice") || !strings.Contains(firstText(t, r3), "blue") {
		t.Fatalf("round 3: %v", r3)
	}
}

func TestFixtureRequestStateIntegrity(t *testing.T) {
	_, url := fixtureServer(t)
	name := "test_input_required_result_tampered_state"
	_, msgs := modern(t, url, "tools/call", map[string]any{"name": name, "arguments": map[string]any{}}, defaultCaps)
	st, _ := resultOf(t, last(msgs))["requestState"].(string)
	if st == "" {
		t.Fatal("no requestState")
	}
	ok := map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}
	_, msgs = modern(t, url, "tools/call", map[string]any{"name": name, "arguments": map[string]any{}, "requestState": st + "-TAMPERED", "inputResponses": ok}, defaultCaps)
	if c := errorCode(last(msgs)); c != -32602 {
		t.Fatalf("tampered state: %v", last(msgs))
	}
	// A state minted for another tool does not open this one.
	_, msgs = modern(t, url, "tools/call", map[string]any{"name": "test_input_required_result_request_state", "arguments": map[string]any{}, "requestState": st, "inputResponses": ok}, defaultCaps)
	if c := errorCode(last(msgs)); c != -32602 {
		t.Fatalf("state of another tool: %v", last(msgs))
	}
	_, msgs = modern(t, url, "tools/call", map[string]any{"name": name, "arguments": map[string]any{}, "requestState": st, "inputResponses": ok}, defaultCaps)
	if r := resultOf(t, last(msgs)); r["resultType"] != "complete" || !strings.Contains(firstText(t, r), "state-ok") {
		t.Fatalf("genuine state: %v", r)
	}
}

func TestFixtureAsksOnlyForDeclaredCapabilities(t *testing.T) {
	_, url := fixtureServer(t)
	_, msgs := modern(t, url, "tools/call", map[string]any{"name": "test_input_required_result_capabilities", "arguments": map[string]any{}},
		map[string]any{"sampling": map[string]any{}})
	r := resultOf(t, last(msgs))
	reqs, _ := r["inputRequests"].(map[string]any)
	if len(reqs) != 1 || reqs["greeting"] == nil {
		t.Fatalf("with sampling only: %v", r)
	}
	// A tool that needs a capability the request lacks is refused (-32021).
	status, msgs := modern(t, url, "tools/call", map[string]any{"name": "test_missing_capability", "arguments": map[string]any{}}, nil)
	e, _ := last(msgs)["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	need, _ := data["requiredCapabilities"].(map[string]any)
	if status != 400 || errorCode(last(msgs)) != -32021 || need["sampling"] == nil {
		t.Fatalf("missing capability: HTTP %d %v", status, last(msgs))
	}
}

func TestFixturePromptAsksForInput(t *testing.T) {
	_, url := fixtureServer(t)
	p := map[string]any{"name": "test_input_required_result_prompt"}
	_, msgs := modern(t, url, "prompts/get", p, defaultCaps)
	if r := resultOf(t, last(msgs)); r["resultType"] != "input_required" {
		t.Fatalf("round 1: %v", r)
	}
	p = map[string]any{"name": "test_input_required_result_prompt",
		"inputResponses": map[string]any{"user_context": map[string]any{"action": "accept", "content": map[string]any{"context": "tests"}}}}
	_, msgs = modern(t, url, "prompts/get", p, defaultCaps)
	r := resultOf(t, last(msgs))
	if r["resultType"] != "complete" || !strings.Contains(fmt.Sprint(r["messages"]), "tests") {
		t.Fatalf("round 2: %v", r)
	}
}

func TestFixtureResources(t *testing.T) {
	_, url := fixtureServer(t)
	_, msgs := modern(t, url, "resources/read", map[string]any{"uri": "test://template/42/data"}, nil)
	r := resultOf(t, last(msgs))
	if !strings.Contains(fmt.Sprint(r["contents"]), `"id":"42"`) || r["ttlMs"] == nil || r["cacheScope"] == nil {
		t.Fatalf("template read: %v", r)
	}
	uri := "test://nonexistent-resource-for-conformance-testing"
	_, msgs = modern(t, url, "resources/read", map[string]any{"uri": uri}, nil)
	e, _ := last(msgs)["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	if errorCode(last(msgs)) != -32602 || data["uri"] != uri {
		t.Fatalf("unknown resource: %v", last(msgs))
	}
}

func TestFixtureProgressEchoesTheToken(t *testing.T) {
	_, url := fixtureServer(t)
	_, msgs := modern(t, url, "tools/call", map[string]any{"name": "test_tool_with_progress", "arguments": map[string]any{},
		"_meta": map[string]any{"progressToken": 7}}, nil)
	var got []float64
	for _, m := range msgs[:len(msgs)-1] {
		p, _ := m["params"].(map[string]any)
		if m["method"] != "notifications/progress" || p["progressToken"] != float64(7) {
			t.Fatalf("unexpected notification %v", m)
		}
		got = append(got, p["progress"].(float64))
	}
	if fmt.Sprint(got) != "[0 50 100]" {
		t.Fatalf("progress %v", got)
	}
	if r := resultOf(t, last(msgs)); r["resultType"] != "complete" {
		t.Fatalf("result %v", r)
	}
}

func TestFixtureNoLogsWithoutLogLevel(t *testing.T) {
	_, url := fixtureServer(t)
	_, msgs := modern(t, url, "tools/call", map[string]any{"name": "test_logging_tool", "arguments": map[string]any{}}, nil)
	if len(msgs) != 1 {
		t.Fatalf("notifications without logLevel: %v", msgs)
	}
	_, msgs = modern(t, url, "tools/call", map[string]any{"name": "test_logging_tool", "arguments": map[string]any{},
		"_meta": map[string]any{metaLogLevel: "info"}}, nil)
	if len(msgs) != 2 || msgs[0]["method"] != "notifications/message" {
		t.Fatalf("with logLevel info: %v", msgs)
	}
}

// The legacy era asks with a server request on the call's stream.
func TestFixtureLegacySamplingAsksTheClient(t *testing.T) {
	s := newFixtureServer(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.ServeStdio(ctx, inR, outW); outW.Close() }()
	defer inW.Close()
	lines := bufio.NewScanner(outR)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	read := func() map[string]any {
		t.Helper()
		if !lines.Scan() {
			t.Fatal("stdio closed")
		}
		var m map[string]any
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("bad line %q", lines.Text())
		}
		return m
	}
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"t","version":"1"}}}`)
	read()
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_sampling","arguments":{"prompt":"Say hi"}}}`)
	req := read()
	if req["method"] != "sampling/createMessage" {
		t.Fatalf("want a sampling request, got %v", req)
	}
	id, _ := json.Marshal(req["id"])
	send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m","stopReason":"endTurn"}}`, id))
	res := read()
	if r := resultOf(t, res); firstText(t, r) != "LLM response: hi" {
		t.Fatalf("result %v", r)
	}
}

var tasksCaps = map[string]any{"elicitation": map[string]any{}, "extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}

// The tasks scenarios' fixtures: slow_compute is in-line for 0 seconds and
// a task otherwise, which tasks/cancel ends as cancelled; failing_job
// needs the extension and completes with isError; protocol_error_job
// fails with its error; confirm_delete asks through its task.
func TestTaskFixtures(t *testing.T) {
	_, url := fixtureServer(t)
	call := func(name string, args map[string]any, caps map[string]any) map[string]any {
		_, msgs := modern(t, url, "tools/call", map[string]any{"name": name, "arguments": args}, caps)
		return last(msgs)
	}
	get := func(id string) map[string]any {
		_, msgs := modernWith(t, url, "tasks/get", map[string]any{"taskId": id}, tasksCaps, map[string]string{"Mcp-Name": id})
		return resultOf(t, last(msgs))
	}
	until := func(id, status string) map[string]any {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if r := get(id); r["status"] == status {
				return r
			}
		}
		t.Fatalf("task %s never became %s: %v", id, status, get(id))
		return nil
	}
	if r := resultOf(t, call("slow_compute", map[string]any{"seconds": 0}, tasksCaps)); r["resultType"] != "complete" {
		t.Errorf("slow_compute 0: %v", r)
	}
	r := resultOf(t, call("slow_compute", map[string]any{"seconds": 30, "label": "x"}, tasksCaps))
	id, _ := r["taskId"].(string)
	if r["resultType"] != "task" || id == "" {
		t.Fatalf("slow_compute 30: %v", r)
	}
	modernWith(t, url, "tasks/cancel", map[string]any{"taskId": id}, tasksCaps, map[string]string{"Mcp-Name": id})
	until(id, "cancelled")

	if code := errorCode(call("failing_job", map[string]any{}, nil)); code != -32021 {
		t.Errorf("failing_job without the extension: %v", code)
	}
	r = resultOf(t, call("failing_job", map[string]any{}, tasksCaps))
	if done := until(r["taskId"].(string), "completed"); done["result"].(map[string]any)["isError"] != true {
		t.Errorf("failing_job: %v", done)
	}
	r = resultOf(t, call("protocol_error_job", map[string]any{}, tasksCaps))
	if failed := until(r["taskId"].(string), "failed"); failed["error"] == nil {
		t.Errorf("protocol_error_job: %v", failed)
	}
	r = resultOf(t, call("confirm_delete", map[string]any{"filename": "a.txt"}, tasksCaps))
	id = r["taskId"].(string)
	asked := until(id, "input_required")
	var key string
	for k := range asked["inputRequests"].(map[string]any) {
		key = k
	}
	modernWith(t, url, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}},
		tasksCaps, map[string]string{"Mcp-Name": id})
	if done := until(id, "completed"); firstText(t, done["result"].(map[string]any)) != "Deleted a.txt." {
		t.Errorf("confirm_delete: %v", done)
	}
}
