package main

import (
	"net/http"
	"testing"
)

// A guest that grows beyond the daemon-wide memory budget gets out of
// memory inside its sandbox: the call says oom, the workspace keeps its
// variables and the daemon goes on. wasm memory never shrinks, so the
// budget stays full until that workspace's interpreter goes: once it is
// deleted, a new workspace fits again.
func TestMemoryBudgetIsTheGuestsOOM(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "", "[limits]\nmax_total_memory_mib = 64\n")
	c := newMCP(t, d.url, true)
	if sc, isErr := c.run("hog", "let kept = 'still here'; kept"); isErr {
		t.Fatalf("setup: %v", sc)
	}
	sc, isErr := c.run("hog", "const hog = []; for (;;) hog.push(new Uint8Array(1 << 20).fill(1))")
	if !isErr || sc["status"] != "oom" {
		t.Fatalf("growth beyond the budget: %v (isError %v); want status oom", sc, isErr)
	}
	if sc, _ := c.run("hog", "kept"); sc["status"] != "ok" || sc["result"] != `"still here"` {
		t.Errorf("the workspace after its oom: %v", sc)
	}
	if m := c.RPC("tools/call", map[string]any{"name": "delete_workspace", "arguments": map[string]any{"workspace": "hog"}}, nil); m["result"] == nil {
		t.Fatalf("delete_workspace: %v", m)
	}
	if sc, _ := c.run("other", "1+1"); sc["status"] != "ok" {
		t.Errorf("a new workspace once the memory is back: %v", sc)
	}
	resp, err := http.Get(d.url[:len(d.url)-len("/mcp")] + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	d.stop()
}
