package tools

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"execd/internal/config"
	"execd/internal/upstream"
	"execd/internal/workspace"
)

// fakeUpstreamHub is a Hub with the fake stdio upstream of
// internal/upstream's tests as "fake", its tools listed.
func fakeUpstreamHub(t *testing.T, edit func(*config.Upstream)) *upstream.Hub {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fakeupstream")
	if out, err := exec.Command("go", "build", "-o", bin, "../upstream/testdata/fakeupstream").CombinedOutput(); err != nil {
		t.Fatalf("building the fake upstream: %v\n%s", err, out)
	}
	u := config.Upstream{Name: "fake", Command: []string{bin}, Allow: []string{"*"}, Ask: []string{"create-issue"},
		MaxCallsPerRun: config.DefaultUpstreamMaxCallsPerRun,
		CallTimeout:    config.Duration{Duration: 20 * time.Second}, ConnectTimeout: config.Duration{Duration: 20 * time.Second}}
	if edit != nil {
		edit(&u)
	}
	h, err := upstream.New([]config.Upstream{u}, config.CodeMode{DescriptionBudget: 4096}, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	if err := h.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h
}

func executeCodeDescription(t *testing.T, cfg testConfig) string {
	t.Helper()
	_, ts := newHTTP(t, cfg, &fakeExec{})
	c := &client{T: t, URL: ts.URL + "/mcp"}
	for _, tool := range c.RPC("tools/list", map[string]any{}, nil)["result"].(map[string]any)["tools"].([]any) {
		if tool := tool.(map[string]any); tool["name"] == "execute_code" {
			return tool["description"].(string)
		}
	}
	t.Fatal("no execute_code in tools/list")
	return ""
}

// The model's view of code mode: execute_code's description names the
// upstream tools as typed signatures, in both languages' words
// (testdata/codemode_description.golden; -update rewrites it).
func TestGoldenCodeModeDescription(t *testing.T) {
	cfg := testOptions()
	cfg.Languages = []string{"javascript", "python"}
	cfg.Upstreams = fakeUpstreamHub(t, nil)
	got := executeCodeDescription(t, cfg)
	file := filepath.Join("testdata", "codemode_description.golden")
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("execute_code's description:\n%s\nwant (%s):\n%s", got, file, want)
	}
	// Without upstreams it says nothing of them.
	if d := executeCodeDescription(t, testOptions()); strings.Contains(d, "tools.") {
		t.Errorf("without upstreams the description names tools: %s", d)
	}
}

// toolsExec is an Executor that checks each run has its own use of the
// upstreams and reports the calls it says the code made.
type toolsExec struct {
	*fakeExec
	runs  chan workspace.Tools
	calls []workspace.ToolCall
}

func (e *toolsExec) Run(ctx context.Context, req workspace.Request) (workspace.Outcome, error) {
	e.runs <- req.Tools
	return workspace.Outcome{Workspace: "w", Result: workspace.Result{Status: workspace.StatusOK, ToolCalls: e.calls}}, nil
}

// The result lists the run's calls (toolCalls), and every run gets a
// use of the upstreams of its own (its own count of calls).
func TestCodeModeResult(t *testing.T) {
	cfg := testOptions()
	cfg.Upstreams = fakeUpstreamHub(t, nil)
	ex := &toolsExec{fakeExec: &fakeExec{}, runs: make(chan workspace.Tools, 2),
		calls: []workspace.ToolCall{{Server: "fake", Tool: "echo", Outcome: "ok", Count: 3}, {Server: "fake", Tool: "hang", Outcome: "timeout", Count: 1}}}
	_, ts := newHTTP(t, cfg, ex)
	c := &client{T: t, URL: ts.URL + "/mcp"}
	sc, isErr := c.Tool("execute_code", map[string]any{"language": "javascript", "code": "1", "workspace": "w"})
	if isErr {
		t.Fatalf("isError: %v", sc)
	}
	calls, _ := sc["toolCalls"].([]any)
	if len(calls) != 2 || calls[0].(map[string]any)["tool"] != "echo" || calls[0].(map[string]any)["count"] != float64(3) ||
		calls[1].(map[string]any)["outcome"] != "timeout" {
		t.Errorf("toolCalls = %v", sc["toolCalls"])
	}
	c.Tool("execute_code", map[string]any{"language": "javascript", "code": "1", "workspace": "w"})
	a, b := <-ex.runs, <-ex.runs
	if a == nil || b == nil || a == b {
		t.Errorf("the runs' uses of the upstreams: %p, %p; want two of their own", a, b)
	}
}
