package main

import (
	"fmt"
	"testing"

	"execd/internal/mcptest"
)

// pythonHostileCases are the Python counterparts of hostileCases.
var pythonHostileCases = []hostileCase{
	{"infinite loop", "while True: pass", 500, []string{"timeout"}},
	{"deep recursion", "def f(n): return f(n + 1) + 1\nf(0)", 0, []string{"error"}},
	{"memory bomb", "a = []\nwhile True: a.append(bytearray(1 << 20))", 0, []string{"oom", "error"}},
	{"output flood", "l = 'x' * (1 << 20)\nfor _ in range(100): print(l)", 0, []string{"ok"}},
	{"catastrophic regex", "import re\nre.match(r'(a+)+$', 'a' * 40 + 'b')", 1000, []string{"timeout"}},
	{"C loop", "sum(range(10**15))", 1000, []string{"timeout"}},
	{"subprocess", "import subprocess\nsubprocess.run(['ls'])", 0, []string{"error"}},
	{"socket", "import socket\nsocket.create_connection(('127.0.0.1', 1))", 0, []string{"error"}},
	{"host files", "open('/etc/passwd').read()", 0, []string{"error"}},
}

// TestPythonHostileCodeLeavesNothingBehind: each hostile Python snippet ends
// in the expected status, its workspace answers afterwards, and once the
// workspace is deleted the daemon's goroutines and RSS are back at baseline.
func TestPythonHostileCodeLeavesNothingBehind(t *testing.T) {
	d, p := startProbedDaemon(t, t.TempDir(), "",
		"[limits]\nmax_memory_mib = 128\n[sandbox]\ninterrupt_grace = \"500ms\"")
	c := newMCP(t, d.url, true)
	py := func(ws, code string, timeoutMS int) (map[string]any, bool) {
		args := map[string]any{"code": code, "language": "python", "workspace": ws}
		if timeoutMS > 0 {
			args["timeout_ms"] = timeoutMS
		}
		sc, isErr, err := mcptest.Structured(c.RPC("tools/call", map[string]any{"name": "execute_code", "arguments": args}, nil))
		if err != nil {
			t.Fatal(err)
		}
		return sc, isErr
	}
	py("warm", "1", 0)
	c.RPC("tools/call", map[string]any{"name": "delete_workspace", "arguments": map[string]any{"workspace": "warm"}}, nil)
	baseG, baseRSS := p.baseline()
	for i, hc := range pythonHostileCases {
		ws := fmt.Sprintf("py-hostile-%d", i)
		sc, isErr := py(ws, hc.code, hc.timeoutMS)
		status, _ := sc["status"].(string)
		ok := false
		for _, s := range hc.status {
			ok = ok || status == s
		}
		if !ok || isErr != (status != "ok" || sc["truncated"] == true) {
			t.Errorf("%s: status %q isError %v; want one of %v: %.300v", hc.name, status, isErr, hc.status, sc)
		}
		if sc, isErr := py(ws, "6*7", 0); isErr || sc["result"] != "42" {
			t.Errorf("%s: the workspace after it: %v", hc.name, sc)
		}
		c.RPC("tools/call", map[string]any{"name": "delete_workspace", "arguments": map[string]any{"workspace": ws}}, nil)
		p.settleGoroutines(hc.name, baseG)
		rss := p.settleRSS(hc.name, baseRSS)
		t.Logf("python %-20s status %-8s reset=%-5v; then RSS %d MiB", hc.name, status, sc["reset"] == true, rss>>10)
	}
	d.stop()
}
