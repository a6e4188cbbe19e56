package tools

import (
	"context"
	"encoding/json"
	"execd/internal/mcptest"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const elicitingInit = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`

// initElicit opens a legacy session whose client declared elicitation.
func initElicit(c *client) {
	c.T.Helper()
	resp := c.Post(context.Background(), elicitingInit, nil)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		c.T.Fatalf("initialize: %d", resp.StatusCode)
	}
	c.Session = resp.Header.Get("Mcp-Session-Id")
}

// ask starts execute_code "ask prompt" and returns the id of the
// elicitation it sends and the rest of its stream.
func ask(c *client, id int, prompt string) (string, <-chan map[string]any) {
	c.T.Helper()
	ev := mcptest.Events(c.Post(context.Background(), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"ask %s","language":"javascript","workspace":"w%d"}}}`, id, prompt, id), nil))
	for m := range ev {
		if m["method"] == "elicitation/create" {
			return m["id"].(string), ev
		}
	}
	c.T.Fatal("no elicitation/create on the stream")
	return "", nil
}

func respond(c *client, id, value string) int {
	c.T.Helper()
	resp := c.Post(context.Background(), fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":{"action":"accept","content":{"value":%q}}}`, id, value), nil)
	resp.Body.Close()
	return resp.StatusCode
}

func resultOf(t *testing.T, ev <-chan map[string]any) map[string]any {
	t.Helper()
	for m := range ev {
		if r, ok := m["result"].(map[string]any); ok {
			return r["structuredContent"].(map[string]any)
		}
	}
	t.Fatal("the stream ended without a result")
	return nil
}

// A response from another session, or another principal on this session's
// id, is accepted (202), logged and ignored: the code still waits, and
// gets the answer of its own session.
func TestForeignResponsesAreIgnored(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte("alice aaaaaaaaaaaaaaaaaaaa\nbob bbbbbbbbbbbbbbbbbbbb\n"), 0o600)
	cfg := testOptions()
	cfg.AuthTokensFile = tokens
	logs := mcptest.NewLogs()
	cfg.Logger = logs.Log
	_, ts := newHTTP(t, cfg, &fakeExec{})
	alice := &client{T: t, URL: ts.URL + "/mcp", Token: "aaaaaaaaaaaaaaaaaaaa"}
	initElicit(alice)
	other := &client{T: t, URL: ts.URL + "/mcp", Token: "aaaaaaaaaaaaaaaaaaaa"}
	initElicit(other)
	bob := &client{T: t, URL: ts.URL + "/mcp", Token: "bbbbbbbbbbbbbbbbbbbb", Session: alice.Session}

	id, ev := ask(alice, 1, "Name?")
	if code := respond(other, id, "from alice's other session"); code != 202 {
		t.Fatalf("another session's response: %d", code)
	}
	if code := respond(bob, id, "from bob"); code != 202 {
		t.Fatalf("another principal's response on alice's session: %d", code)
	}
	if code := respond(alice, "execd-999", "unknown"); code != 202 {
		t.Fatalf("a response for an unknown id: %d", code)
	}
	if code := respond(alice, id, "Ada"); code != 202 {
		t.Fatalf("the answer: %d", code)
	}
	if code := respond(alice, id, "twice"); code != 202 {
		t.Fatalf("a second answer: %d", code)
	}
	if sc := resultOf(t, ev); sc["result"] != `"Ada"` {
		t.Fatalf("the code got %v", sc)
	}
	ignored := logs.FilterMessageSnippet("client response ignored").All()
	if len(ignored) != 4 {
		var msgs []string
		for _, e := range logs.All() {
			msgs = append(msgs, e.Message)
		}
		t.Fatalf("%d ignored responses logged; want 4 (another session, another principal, unknown id, a second answer): %q", len(ignored), msgs)
	}
}

// A parked modern run that nobody answers within the input timeout gets
// EOF and ends; its state is then refused.
func TestParkedRunExpires(t *testing.T) {
	cfg := testOptions()
	cfg.InputTimeout = 100 * time.Millisecond
	ex := &notifyingExec{fakeExec: &fakeExec{}, done: make(chan struct{})}
	_, ts := newHTTP(t, cfg, ex)
	c := &client{T: t, URL: ts.URL + "/mcp"}
	call := func(id int, extra string) map[string]any {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"ask Name?","language":"javascript","workspace":"w"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}%s}}`, id, extra)
		var last map[string]any
		for m := range mcptest.Events(c.Post(context.Background(), body, map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "execute_code", "Mcp-Param-Workspace": "w"})) {
			last = m
		}
		return last
	}
	first := call(1, "")
	state, _ := first["result"].(map[string]any)["requestState"].(string)
	if state == "" {
		t.Fatalf("no input_required: %v", first)
	}
	select {
	case <-ex.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the parked run did not end after the input timeout")
	}
	if ex.status != "error" {
		t.Fatalf("the expired run ended %s", ex.status)
	}
	st, _ := json.Marshal(state)
	retry := call(2, fmt.Sprintf(`,"requestState":%s,"inputResponses":{"input":{"action":"accept","content":{"value":"late"}}}`, st))
	// Refused as expired (the state's own clock, in seconds) or as a run
	// that no longer waits.
	if e, _ := retry["error"].(map[string]any); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "no longer waits") && !strings.Contains(fmt.Sprint(e["message"]), "expired") {
		t.Fatalf("a retry after the timeout: %v", retry)
	}
}

// askModern posts a 2026-07-28 execute_code "ask Name?" in workspace ws
// and returns its last message: input_required, or the result.
func askModern(c *client, id int, ws string) map[string]any {
	c.T.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"ask Name?","language":"javascript","workspace":%q},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}}}`, id, ws)
	var last map[string]any
	for m := range mcptest.Events(c.Post(context.Background(), body, map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "execute_code", "Mcp-Param-Workspace": ws})) {
		last = m
	}
	return last
}

// In 2026-07-28 a run waiting for input holds no request and no run slot,
// so 1,000 calls of prompt('x') parked 1,000 interpreters. A principal may
// have at most MaxWaitingInputs waiting: beyond it the code's input() gets
// end of file at once, the result names the limit, and another principal
// still gets its question asked.
func TestWaitingInputsPerPrincipal(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte("alice aaaaaaaaaaaaaaaaaaaa\nbob bbbbbbbbbbbbbbbbbbbb\n"), 0o600)
	cfg := testOptions()
	cfg.AuthTokensFile = tokens
	cfg.MaxWaitingInputs = 2
	_, ts := newHTTP(t, cfg, &fakeExec{})
	alice := &client{T: t, URL: ts.URL + "/mcp", Token: "aaaaaaaaaaaaaaaaaaaa"}
	bob := &client{T: t, URL: ts.URL + "/mcp", Token: "bbbbbbbbbbbbbbbbbbbb"}
	parked := func(m map[string]any) bool {
		r, _ := m["result"].(map[string]any)
		return r["resultType"] == "input_required"
	}
	for i, ws := range []string{"a", "b"} {
		if m := askModern(alice, i+1, ws); !parked(m) {
			t.Fatalf("alice's question %d: %v", i+1, m)
		}
	}
	m := askModern(alice, 3, "c")
	if parked(m) {
		t.Fatalf("a third waiting input with a cap of 2: %v", m)
	}
	sc, _ := m["result"].(map[string]any)["structuredContent"].(map[string]any)
	if sc["status"] != "error" || !strings.Contains(fmt.Sprint(sc["notice"]), "protocol.max_waiting_inputs_per_principal") {
		t.Fatalf("the refused question's result: %v", sc)
	}
	if m := askModern(bob, 4, "a"); !parked(m) {
		t.Fatalf("bob's question while alice is at her cap: %v", m)
	}
}
