package main

// Checkpoints and forks through the MCP tools, with the real binary and the
// real guests: both eras over HTTP, stdio, and principals kept apart.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"execd/internal/mcptest"
)

// answer waits for the response to id, skipping other lines.
func (p *stdioProc) answer(t *testing.T, id int) map[string]any {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case m, ok := <-p.lines:
			if !ok {
				t.Fatalf("stdout closed\n%s", p.logs())
			}
			if got, _ := m["id"].(float64); int(got) == id && m["method"] == nil {
				return m
			}
		case <-timeout:
			t.Fatalf("no answer to id %d\n%s", id, p.logs())
		}
	}
}

func TestCheckpointRestoreForkWithTheRealGuests(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	for _, modern := range []bool{false, true} {
		c := newMCP(t, d.url, modern)
		c.init()
		ws := fmt.Sprintf("cp-%v", modern)
		for _, step := range []struct{ lang, code string }{
			{"javascript", `var x = "before"; fs.writeFile("/workspace/f.txt", "file before")`},
			{"python", "y = 'py before'"},
		} {
			if sc, isErr := c.runLang(ws, step.lang, step.code); isErr {
				t.Fatalf("modern=%v %s: %v", modern, step.lang, sc)
			}
		}
		sc, isErr := c.Tool("checkpoint_workspace", map[string]any{"workspace": ws, "name": "good"})
		if isErr || sc["checkpoint"] != "good" {
			t.Fatalf("modern=%v checkpoint: %v", modern, sc)
		}
		c.runLang(ws, "javascript", `x = "after"; fs.writeFile("/workspace/f.txt", "file after"); fs.writeFile("/workspace/new.txt", "n")`)
		c.runLang(ws, "python", "y = 'py after'")
		if sc, isErr := c.Tool("restore_workspace", map[string]any{"workspace": ws, "checkpoint": "good"}); isErr {
			t.Fatalf("modern=%v restore: %v", modern, sc)
		}
		if sc, isErr := c.runLang(ws, "javascript", `x + "|" + fs.readFile("/workspace/f.txt") + "|" + fs.exists("/workspace/new.txt")`); isErr || sc["result"] != `"before|file before|false"` || sc["status"] != "ok" {
			t.Fatalf("modern=%v javascript after restore: %v", modern, sc)
		}
		if sc, isErr := c.runLang(ws, "python", "y"); isErr || sc["result"] != "'py before'" || sc["status"] != "ok" {
			t.Fatalf("modern=%v python after restore: %v", modern, sc)
		}

		sc, isErr = c.Tool("fork_workspace", map[string]any{"workspace": ws})
		fork, _ := sc["workspace"].(string)
		if isErr || fork == "" || fork == ws {
			t.Fatalf("modern=%v fork: %v", modern, sc)
		}
		c.runLang(fork, "javascript", `x = "forked"; fs.writeFile("/workspace/f.txt", "fork's")`)
		if sc, _ := c.runLang(ws, "javascript", `x + "|" + fs.readFile("/workspace/f.txt")`); sc["result"] != `"before|file before"` {
			t.Fatalf("modern=%v the fork changed its source: %v", modern, sc)
		}
		if sc, _ := c.runLang(fork, "python", "y"); sc["result"] != "'py before'" || sc["status"] != "ok" {
			t.Fatalf("modern=%v python in the fork: %v", modern, sc)
		}
		a, _ := c.runLang(ws, "javascript", "Math.random()")
		b, _ := c.runLang(fork, "javascript", "Math.random()")
		if a["result"] == b["result"] {
			t.Errorf("modern=%v the fork repeats its source's random numbers: %v", modern, a["result"])
		}

		list, _ := c.Tool("list_workspaces", map[string]any{})
		var entry map[string]any
		for _, e := range list["workspaces"].([]any) {
			if e.(map[string]any)["workspace"] == ws {
				entry = e.(map[string]any)
			}
		}
		if entry == nil || entry["state"] != "live" || fmt.Sprint(entry["languages"]) != "[javascript python]" ||
			len(entry["checkpoints"].([]any)) != 1 || entry["memoryBytes"].(float64) <= 0 || entry["stateBytes"].(float64) <= 0 {
			t.Fatalf("modern=%v list_workspaces: %v", modern, entry)
		}
	}
	d.stop()
}

func TestCheckpointsBelongToTheirPrincipal(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tokens, []byte("alice alice-token-0123456789\nbob bob-token-0123456789ab\n"), 0o600)
	d := startDaemon(t, t.TempDir(), fmt.Sprintf("auth_tokens_file = %q", tokens))
	for _, modern := range []bool{false, true} {
		alice := newMCP(t, d.url, modern).withToken("alice-token-0123456789")
		bob := newMCP(t, d.url, modern).withToken("bob-token-0123456789ab")
		alice.init()
		bob.init()
		ws := fmt.Sprintf("secret-%v", modern)
		alice.run(ws, `var secret = "alice's"`)
		if sc, isErr := alice.Tool("checkpoint_workspace", map[string]any{"workspace": ws, "name": "c"}); isErr {
			t.Fatalf("alice's checkpoint: %v", sc)
		}
		if sc, isErr := bob.Tool("restore_workspace", map[string]any{"workspace": ws, "checkpoint": "c"}); !isErr {
			t.Errorf("modern=%v bob restored alice's checkpoint: %v", modern, sc)
		}
		if sc, isErr := bob.Tool("fork_workspace", map[string]any{"workspace": ws, "new_workspace": "mine"}); !isErr {
			t.Errorf("modern=%v bob forked alice's workspace: %v", modern, sc)
		}
		list, _ := bob.Tool("list_workspaces", map[string]any{})
		if b, _ := json.Marshal(list); strings.Contains(string(b), ws) {
			t.Errorf("modern=%v bob's list shows alice's workspace: %s", modern, b)
		}
		if sc, _ := alice.run(ws, "secret"); sc["result"] != `"alice's"` {
			t.Errorf("modern=%v alice's workspace after bob's attempts: %v", modern, sc)
		}
	}
	d.stop()
}

func TestCheckpointOverStdio(t *testing.T) {
	toml := fmt.Sprintf("[workspace]\ndata_dir = %q\n", t.TempDir())
	p := startStdio(t, toml)
	answer := func(id int) map[string]any { return p.answer(t, id) }
	call := func(id int, name string, args map[string]any) map[string]any {
		t.Helper()
		p.send(t, map[string]any{"id": id, "method": "tools/call", "params": map[string]any{"name": name, "arguments": args}})
		sc, isErr, err := mcptest.Structured(answer(id))
		if err != nil || isErr {
			t.Fatalf("%s: %v %v", name, sc, err)
		}
		return sc
	}
	p.send(t, map[string]any{"id": 1, "method": "initialize", "params": map[string]any{"protocolVersion": "2025-11-25",
		"capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "stdio-test", "version": "1"}}})
	answer(1)
	p.send(t, map[string]any{"method": "notifications/initialized"})
	call(2, "execute_code", map[string]any{"workspace": "s", "language": "python", "code": "n = 1"})
	call(3, "checkpoint_workspace", map[string]any{"workspace": "s"})
	call(4, "execute_code", map[string]any{"workspace": "s", "language": "python", "code": "n = 2"})
	call(5, "restore_workspace", map[string]any{"workspace": "s", "checkpoint": "cp-1"})
	if sc := call(6, "execute_code", map[string]any{"workspace": "s", "language": "python", "code": "n"}); sc["result"] != "1" {
		t.Fatalf("after restore over stdio: %v", sc)
	}
	if sc := call(7, "fork_workspace", map[string]any{"workspace": "s", "new_workspace": "s2"}); sc["workspace"] != "s2" {
		t.Fatalf("fork over stdio: %v", sc)
	}
	if sc := call(8, "execute_code", map[string]any{"workspace": "s2", "language": "python", "code": "n"}); sc["result"] != "1" {
		t.Fatalf("the fork over stdio: %v", sc)
	}
}
