package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"execd/internal/mcptest"
)

// Code mode through the daemon: an [[upstream]] (the fake stdio server of
// internal/upstream's tests) named in execute_code's description, called
// from both guests, its calls in the result's toolCalls, in /metrics and
// in /status.
func TestCodeModeEndToEnd(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fakeupstream")
	if out, err := exec.Command("go", "build", "-o", bin, "../../internal/upstream/testdata/fakeupstream").CombinedOutput(); err != nil {
		t.Fatalf("building the fake upstream: %v\n%s", err, out)
	}
	toml := fmt.Sprintf(`[server]
listen = "127.0.0.1:0"
admin_listen = "127.0.0.1:0"
[workspace]
data_dir = %q
[[upstream]]
name = "fake"
command = [%q]
allow = ["echo", "add", "fail"]
max_calls_per_run = 3
`, t.TempDir(), bin)
	d, admin := launch(t, toml, true)
	c := newMCP(t, d.url, true)

	list := fmt.Sprint(c.RPC("tools/list", nil, nil))
	for _, want := range []string{"tools.fake.echo({text: string})", "tools.fake.add(a: float, b: float)", "from execd import tools"} {
		if !strings.Contains(list, want) {
			t.Errorf("execute_code's description lacks %q: %.3000s", want, list)
		}
	}
	if strings.Contains(list, "tools.fake.delete_repo") {
		t.Error("the description names a tool that allow refuses")
	}
	sc, isErr := c.run("cm", `const [a, b] = await Promise.all([tools.fake.add({a: 1, b: 2}), tools.fake.echo({text: "hi"})]);
let e; try { await tools.fake.delete_repo({name: "x"}) } catch (x) { e = x.code }
[a.sum, b, e]`)
	if isErr || sc["result"] != `[3, "hi", "refused"]` {
		t.Fatalf("JavaScript: %v", sc)
	}
	if got := fmt.Sprint(sc["toolCalls"]); !strings.Contains(got, "map[count:1 outcome:ok server:fake tool:add]") ||
		!strings.Contains(got, "map[count:1 outcome:ok server:fake tool:echo]") || !strings.Contains(got, "outcome:refused server:fake tool:delete_repo") {
		t.Errorf("toolCalls: %s", got)
	}
	sc, isErr = c.runLang("cm", "python", "from execd import tools, ToolError\nr = [tools.fake.echo(text='p') for _ in range(3)]\n"+
		"try:\n    tools.fake.echo(text='p')\nexcept ToolError as e:\n    r.append(e.code)\nr")
	if isErr || sc["result"] != `['p', 'p', 'p', 'limit']` {
		t.Fatalf("Python: %v", sc)
	}
	_, metrics := get(t, admin+"/metrics")
	for _, want := range []string{`execd_upstream_up{state="up",transport="stdio",upstream="fake"} 1`,
		`execd_upstream_calls_total{outcome="ok",upstream="fake"} 5`, `execd_upstream_calls_total{outcome="limit",upstream="fake"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	_, status := get(t, admin+"/status.json")
	var st struct {
		Upstreams []struct {
			Name, Transport, State string
			Tools                  int
			Calls                  map[string]int
		}
	}
	if err := json.Unmarshal([]byte(status), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Upstreams) != 1 || st.Upstreams[0].Name != "fake" || st.Upstreams[0].State != "up" || st.Upstreams[0].Tools == 0 ||
		st.Upstreams[0].Calls["ok"] != 5 || st.Upstreams[0].Calls["refused"] != 1 {
		t.Errorf("/status.json's upstreams: %+v", st.Upstreams)
	}
}

// A tool of ask is put to the person through the path of input():
// legacy elicitation on the call's stream, and input_required in
// 2026-07-28. The question offers the choices allow once, allow for the
// rest of this run and deny (titled as the version has it: enumNames in
// 2025-06-18, oneOf from 2025-11-25); a free-text yes / no still counts.
func TestCodeModeAsksThePerson(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fakeupstream")
	if out, err := exec.Command("go", "build", "-o", bin, "../../internal/upstream/testdata/fakeupstream").CombinedOutput(); err != nil {
		t.Fatalf("building the fake upstream: %v\n%s", err, out)
	}
	d := startDaemon(t, t.TempDir(), "", fmt.Sprintf("[[upstream]]\nname = \"fake\"\ncommand = [%q]\nallow = [\"*\"]\nask = [\"echo\"]\n", bin))
	code := `const r = [];
for (const t of ["a", "b"]) { try { r.push(await tools.fake.echo({text: t})) } catch (e) { r.push(e.code) } }
r`
	legacy := newMCP(t, d.url, false)
	legacy.InitializeWith(`{"elicitation":{}}`)
	older := newMCP(t, d.url, false) // 2025-06-18: titles as enumNames
	older.Offer = "2025-06-18"
	older.InitializeWith(`{"elicitation":{}}`)
	pyCode := "from execd import tools, ToolError\nr = []\nfor t in 'ab':\n    try:\n        r.append(tools.fake.echo(text=t))\n    except ToolError as e:\n        r.append(e.code)\nr"
	choices := "[allow once allow for the rest of this run deny]"
	oneOf := "[map[const:allow once title:Allow once] map[const:allow for the rest of this run title:Allow for the rest of this run] map[const:deny title:Deny]]"
	for _, tc := range []struct {
		c          *mcp
		lang, code string
		answers    []string
		want       string
	}{
		{legacy, "javascript", code, []string{"allow once", "deny"}, `["a", "denied"]`},
		{legacy, "javascript", code, []string{"allow for the rest of this run"}, `["a", "b"]`}, // asked once
		{legacy, "python", pyCode, []string{"deny", "allow once"}, `['denied', 'b']`},
		{older, "javascript", code, []string{"allow for the rest of this run"}, `["a", "b"]`},
		{legacy, "javascript", code, []string{"yes", "no"}, `["a", "denied"]`}, // free text
	} {
		ev := tc.c.Stream("tools/call", map[string]any{"name": "execute_code", "arguments": map[string]any{"code": tc.code, "language": tc.lang, "workspace": "ask"}})
		var sc map[string]any
		asked := 0
		for m := range ev {
			if m["method"] == "elicitation/create" {
				params := m["params"].(map[string]any)
				msg := fmt.Sprint(params["message"])
				if !strings.Contains(msg, "Code in workspace ask wants to call fake.echo") || !strings.Contains(msg, `"text"`) || !strings.HasSuffix(msg, ". Allow?") {
					t.Errorf("the question: %s", msg)
				}
				value := params["requestedSchema"].(map[string]any)["properties"].(map[string]any)["value"].(map[string]any)
				if tc.c == older && (fmt.Sprint(value["enum"]) != choices || fmt.Sprint(value["enumNames"]) != "[Allow once Allow for the rest of this run Deny]" || value["oneOf"] != nil) {
					t.Errorf("2025-06-18's choices: %v", value)
				}
				if tc.c == legacy && (fmt.Sprint(value["oneOf"]) != oneOf || value["enum"] != nil || value["enumNames"] != nil) {
					t.Errorf("2025-11-25's choices: %v", value)
				}
				if asked >= len(tc.answers) {
					t.Fatalf("asked %d times; answers %v", asked+1, tc.answers)
				}
				tc.c.Respond(m["id"], accept(tc.answers[asked]))
				asked++
				continue
			}
			if m["id"] != nil {
				var err error
				if sc, _, err = mcptest.Structured(m); err != nil {
					t.Fatal(err)
				}
			}
		}
		if sc["result"] != tc.want || asked != len(tc.answers) {
			t.Errorf("answers %v: asked %d times, %v", tc.answers, asked, sc)
		}
	}
	// Without a client that can be asked, the call is refused at once.
	plain := newMCP(t, d.url, false)
	plain.Initialize()
	if sc, _ := plain.run("ask2", code); sc["result"] != `["refused", "refused"]` {
		t.Errorf("without elicitation: %v", sc)
	}

	modern := newMCP(t, d.url, true)
	first := modern.modernCall(`await tools.fake.echo({text: "m"})`, "javascript", "ask-m", nil)
	res := first["result"].(map[string]any)
	state, _ := res["requestState"].(string)
	if res["resultType"] != "input_required" || state == "" || !strings.Contains(fmt.Sprint(res), "wants to call fake.echo") ||
		!strings.Contains(fmt.Sprint(res), "oneOf:"+oneOf) {
		t.Fatalf("modern: %v", first)
	}
	retry := modern.modernCall(`await tools.fake.echo({text: "m"})`, "javascript", "ask-m", map[string]any{"requestState": state,
		"inputResponses": map[string]any{"input": accept("allow once")}})
	if sc, isErr, err := mcptest.Structured(retry); err != nil || isErr || sc["result"] != `"m"` {
		t.Fatalf("modern retry: %v %v", retry, err)
	}
	d.stop()
}

// A workspace whose run waits for an upstream call does not hibernate:
// an idle workspace used after the call began is saved, the busy one is
// not.
func TestCodeModeCallInFlightDoesNotHibernate(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fakeupstream")
	if out, err := exec.Command("go", "build", "-o", bin, "../../internal/upstream/testdata/fakeupstream").CombinedOutput(); err != nil {
		t.Fatalf("building the fake upstream: %v\n%s", err, out)
	}
	data := t.TempDir()
	d := startDaemon(t, data, "", fmt.Sprintf("[[upstream]]\nname = \"fake\"\ncommand = [%q]\nallow = [\"*\"]\n", bin), `hibernate_after = "1s"`)
	busy := newMCP(t, d.url, false)
	busy.Initialize()
	ev := busy.Stream("tools/call", map[string]any{"name": "execute_code", "_meta": map[string]any{"progressToken": "p"},
		"arguments": map[string]any{"code": `globalThis.kept = 1; await tools.fake.hang()`, "language": "javascript", "workspace": "busy"}})
	for m := range ev { // the fake reports "started" once it has the call
		if m["method"] == "notifications/progress" && strings.Contains(fmt.Sprint(m["params"]), "started") {
			break
		}
		if m["id"] != nil {
			t.Fatalf("the run ended first: %v", m)
		}
	}
	c := newMCP(t, d.url, true)
	if sc, isErr := c.run("idle", "1"); isErr {
		t.Fatal(sc)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		imgs := strings.Join(images(t, data), " ")
		if strings.Contains(imgs, "/busy/") {
			t.Fatalf("the workspace with a call in flight was hibernated: %s", imgs)
		}
		if strings.Contains(imgs, "/idle/") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle workspace did not hibernate within 30 s\n%s", d.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.stop()
}

// A client's cancel of the run (legacy notifications/cancelled) reaches
// the upstream as notifications/cancelled of the call in flight, from
// either guest, and the upstream's progress reached the client first.
func TestCodeModeCancelReachesTheUpstream(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fakeupstream")
	if out, err := exec.Command("go", "build", "-o", bin, "../../internal/upstream/testdata/fakeupstream").CombinedOutput(); err != nil {
		t.Fatalf("building the fake upstream: %v\n%s", err, out)
	}
	d := startDaemon(t, t.TempDir(), "", fmt.Sprintf("[[upstream]]\nname = \"fake\"\ncommand = [%q]\nallow = [\"*\"]\n", bin))
	c := newMCP(t, d.url, false)
	c.Initialize()
	for i, tc := range []struct{ lang, code string }{
		{"javascript", `await tools.fake.hang()`},
		{"python", "from execd import tools\ntools.fake.hang()"},
	} {
		id := 900 + i
		body, hdr := c.Request(id, "tools/call", map[string]any{"name": "execute_code", "_meta": map[string]any{"progressToken": "p"},
			"arguments": map[string]any{"code": tc.code, "language": tc.lang, "workspace": "cancel-" + tc.lang}})
		ev := mcptest.Events(c.Post(context.Background(), string(body), hdr))
		started := false
		for m := range ev {
			if m["method"] == "notifications/progress" && strings.Contains(fmt.Sprint(m["params"]), "started") {
				started = true
				c.Post(context.Background(), fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, id), hdr).Body.Close()
			}
			if m["id"] != nil {
				t.Fatalf("%s: the cancelled call was answered: %v", tc.lang, m)
			}
		}
		if !started {
			t.Fatalf("%s: no progress from the upstream reached the client", tc.lang)
		}
		sc, isErr := c.run("check", `(await tools.fake.received({waitCancel: true})).cancels.length`)
		if isErr || sc["result"] != fmt.Sprint(i+1) {
			t.Errorf("%s: cancels the upstream received: %v", tc.lang, sc)
		}
	}
	d.stop()
}

// A principal not in an upstream's principals neither sees its tools
// (tools.list(), execute_code's description) nor can call them by
// guessing names: the call fails as for a name that does not exist. A
// principal in it finds them in execute_code's description.
func TestCodeModePrincipals(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fakeupstream")
	if out, err := exec.Command("go", "build", "-o", bin, "../../internal/upstream/testdata/fakeupstream").CombinedOutput(); err != nil {
		t.Fatalf("building the fake upstream: %v\n%s", err, out)
	}
	tokens := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tokens, []byte("alice alice-token-0123456789\nbob bob-token-0123456789ab\n"), 0o600)
	d := startDaemon(t, t.TempDir(), fmt.Sprintf("auth_tokens_file = %q", tokens),
		fmt.Sprintf("[[upstream]]\nname = \"fake\"\ncommand = [%q]\nallow = [\"*\"]\nprincipals = [\"alice\"]\n", bin))
	alice := newMCP(t, d.url, true).withToken("alice-token-0123456789")
	bob := newMCP(t, d.url, true).withToken("bob-token-0123456789ab")
	code := `let e = "none"; try { await tools.fake.echo({text: "x"}) } catch (x) { e = x.code + ": " + x.message }
[tools.list().length > 0, e]`
	if sc, isErr := alice.run("p", code); isErr || sc["result"] != `[true, "none"]` {
		t.Errorf("alice: %v", sc)
	}
	if sc, isErr := bob.run("p", code); isErr || sc["result"] != `[false, "unknown_tool: tools.fake.echo is not a tool this code may call (tools.list() lists them)"]` {
		t.Errorf("bob: %v", sc)
	}
	// execute_code's description names the tools of the caller's
	// principal, in a list cached for that principal only.
	aliceList, bobList := alice.RPC("tools/list", nil, nil), bob.RPC("tools/list", nil, nil)
	if list := fmt.Sprint(bobList); strings.Contains(list, "tools.fake.") {
		t.Errorf("bob's tools/list names alice's upstream: %.2000s", list)
	}
	if list := fmt.Sprint(aliceList); !strings.Contains(list, "tools.fake.echo({text: string})") || !strings.Contains(list, "fake.echo(text: str)") {
		t.Errorf("alice's tools/list does not name her upstream's tools: %.3000s", list)
	}
	for who, l := range map[string]map[string]any{"alice": aliceList, "bob": bobList} {
		if res, _ := l["result"].(map[string]any); res["cacheScope"] != "private" {
			t.Errorf("%s's tools/list: cacheScope %v, want private", who, res["cacheScope"])
		}
	}
	legacyAlice := newMCP(t, d.url, false).withToken("alice-token-0123456789")
	legacyAlice.Initialize()
	if list := fmt.Sprint(legacyAlice.RPC("tools/list", nil, nil)); !strings.Contains(list, "tools.fake.echo({text: string})") {
		t.Errorf("alice's legacy tools/list does not name her upstream's tools: %.3000s", list)
	}
	d.stop()
}

// When an upstream's tools change (notifications/tools/list_changed),
// execute_code's description names the new ones, and a legacy session
// with its GET stream open is sent notifications/tools/list_changed.
func TestCodeModeToolsChange(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fakeupstream")
	if out, err := exec.Command("go", "build", "-o", bin, "../../internal/upstream/testdata/fakeupstream").CombinedOutput(); err != nil {
		t.Fatalf("building the fake upstream: %v\n%s", err, out)
	}
	d := startDaemon(t, t.TempDir(), "", fmt.Sprintf("[[upstream]]\nname = \"fake\"\ncommand = [%q]\nallow = [\"*\"]\n", bin))
	c := newMCP(t, d.url, true)
	if list := fmt.Sprint(c.RPC("tools/list", nil, nil)); !strings.Contains(list, "tools.fake.echo(") || strings.Contains(list, "tools.fake.extra(") {
		t.Fatalf("before the change: %.3000s", list)
	}
	// A legacy session is told, on its GET stream, having been told at
	// initialize that it would be.
	legacy := newMCP(t, d.url, false)
	resp := legacy.Post(context.Background(), `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, nil)
	var init map[string]any
	if err := mcptest.Read(resp, func(m map[string]any) bool { init = m; return false }); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if b, _ := json.Marshal(init); !strings.Contains(string(b), `"tools":{"listChanged":true}`) {
		t.Errorf("initialize with upstreams: %s", b)
	}
	legacy.Legacy, legacy.Session, legacy.Version = true, resp.Header.Get("Mcp-Session-Id"), "2025-11-25"
	legacy.Post(context.Background(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil).Body.Close()
	gctx, stopGet := context.WithCancel(context.Background())
	defer stopGet()
	req, _ := http.NewRequestWithContext(gctx, http.MethodGet, d.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", legacy.Session)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	getResp, err := http.DefaultClient.Do(req)
	if err != nil || getResp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", getResp, err)
	}
	heard := make(chan string, 1)
	go func() {
		for m := range mcptest.Events(getResp) {
			if m["method"] != nil {
				heard <- fmt.Sprint(m["method"])
				return
			}
		}
		close(heard)
	}()
	if sc, isErr := c.run("ch", `await tools.fake.change()`); isErr || sc["result"] != `"changed"` {
		t.Fatal(sc)
	}
	select {
	case m := <-heard:
		if m != "notifications/tools/list_changed" {
			t.Errorf("the GET stream carried %q", m)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("no notifications/tools/list_changed on the GET stream within 20 s\n%s", d.logs())
	}
	stopGet()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(fmt.Sprint(c.RPC("tools/list", nil, nil)), "tools.fake.extra(") {
		if time.Now().After(deadline) {
			t.Fatalf("execute_code's description does not name the new tool after 20 s\n%s", d.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.stop()
}

// A call that is a task (the tasks extension) asks through the task:
// input_required with the question, tasks/update with the answer.
func TestCodeModeAsksThroughATask(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fakeupstream")
	if out, err := exec.Command("go", "build", "-o", bin, "../../internal/upstream/testdata/fakeupstream").CombinedOutput(); err != nil {
		t.Fatalf("building the fake upstream: %v\n%s", err, out)
	}
	d := startDaemon(t, t.TempDir(), "", taskConfig+fmt.Sprintf("[[upstream]]\nname = \"fake\"\ncommand = [%q]\nallow = [\"*\"]\nask = [\"echo\"]\n", bin))
	caps := mcptest.TasksCaps()
	caps["elicitation"] = map[string]any{"form": map[string]any{}}
	c := &mcptest.Client{T: t, URL: d.url, Caps: caps}
	msg := c.Answer("tools/call", map[string]any{"name": "execute_code",
		"arguments": map[string]any{"code": `await tools.fake.echo({text: "t"})`, "language": "javascript", "workspace": "task"}})
	res, _ := msg["result"].(map[string]any)
	id, _ := res["taskId"].(string)
	if res["resultType"] != "task" || id == "" {
		t.Fatalf("the call did not become a task: %v", msg)
	}
	st := taskState(t, c, id)
	reqs, _ := st["inputRequests"].(map[string]any)
	if st["status"] != "input_required" || len(reqs) != 1 || !strings.Contains(fmt.Sprint(reqs), "wants to call fake.echo") || !strings.Contains(fmt.Sprint(reqs), "map[const:allow once title:Allow once]") {
		t.Fatalf("the task: %v", st)
	}
	for key := range reqs {
		if ack := c.Answer("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{key: accept("allow once")}}); ack["error"] != nil {
			t.Fatalf("tasks/update: %v", ack)
		}
	}
	for deadline := time.Now().Add(time.Minute); st["status"] == "input_required" || st["status"] == "working"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the task: %v", st)
		}
		st = taskState(t, c, id)
	}
	if st["status"] != "completed" || !strings.Contains(fmt.Sprint(st), `result:"t"`) {
		t.Errorf("the task's end: %v", st)
	}
	d.stop()
}
