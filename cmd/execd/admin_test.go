package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The admin listener serves metrics, the status document and profiles of
// the real daemon, and none of it is on the MCP listener.
func TestAdminListenerServesMetricsAndStatusOnly(t *testing.T) {
	dir := t.TempDir()
	d, admin := launch(t, fmt.Sprintf("[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\n[workspace]\ndata_dir = %q\n", dir), true)
	c := newMCP(t, d.url, true)
	if sc, isErr := c.run("seen", "var x = 1; x"); isErr {
		t.Fatalf("call: %v", sc)
	}
	c = newMCP(t, d.url, false)
	c.init()
	if sc, isErr := c.runLang("seen", "python", "y = 2"); isErr {
		t.Fatalf("python call: %v", sc)
	}
	code, body := get(t, admin+"/metrics")
	for _, want := range []string{
		`execd_requests_total{era="modern",method="tools/call",outcome="ok",transport="http"} 1`,
		`execd_requests_total{era="legacy",method="initialize",outcome="ok",transport="http"} 1`,
		`execd_execute_code_duration_seconds_count{language="python",status="ok"} 1`,
		`execd_interpreter_start_seconds_count{language="javascript",outcome="new"} 1`,
		`execd_workspaces{state="live"} 1`, `execd_live_interpreters 2`, `execd_build_info{version="0.1.0"} 1`,
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics (HTTP %d) lacks %s", code, want)
		}
	}
	if strings.Contains(body, "seen") || strings.Contains(body, `"local"`) {
		t.Error("a workspace id or a principal is in /metrics")
	}
	code, body = get(t, admin+"/status.json")
	var st struct {
		Workspaces []struct {
			Principal, ID, State string
			Languages            []string
		}
		Limits []struct{ Key, Value string }
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != 200 {
		t.Fatalf("status.json: %d %v %s", code, err, body)
	}
	if len(st.Workspaces) != 1 || st.Workspaces[0].ID != "seen" || st.Workspaces[0].Principal != "local" ||
		st.Workspaces[0].State != "live" || len(st.Workspaces[0].Languages) != 2 || len(st.Limits) == 0 {
		t.Errorf("status.json: %s", body)
	}
	if code, _ := get(t, admin+"/debug/pprof/goroutine?debug=1"); code != 200 {
		t.Errorf("pprof: %d", code)
	}
	base := strings.TrimSuffix(d.url, "/mcp")
	for _, p := range []string{"/metrics", "/status", "/status.json", "/debug/pprof/"} {
		if code, _ := get(t, base+p); code != http.StatusNotFound {
			t.Errorf("%s on the MCP listener: %d", p, code)
		}
	}
	d.stop()
}

// server.debug_listen is gone: a config that still names it stops execd
// at start, naming the key.
func TestDebugListenIsRefused(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "execd.toml")
	if err := os.WriteFile(cfg, []byte("[server]\ndebug_listen = \"127.0.0.1:0\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binPath, "-config", cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "server.debug_listen") {
		t.Fatalf("exit %v: %s", err, out)
	}
}
