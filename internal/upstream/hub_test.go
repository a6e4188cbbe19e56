package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"execd/internal/config"
)

func TestCallAndList(t *testing.T) {
	h := newHub(t, Options{}, fakeUpstream(t, "fake", func(u *config.Upstream) {
		u.Allow = []string{"echo", "add", "image", "fail", "create-issue"}
	}))
	if st := h.Status()[0]; st.State != StateIdle || st.Connects != 0 {
		t.Errorf("before any need: %+v", st)
	}
	tools, err := h.Tools(context.Background(), "local")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]ToolInfo{}
	for _, ti := range tools {
		got[ti.Name] = ti
	}
	if len(got) != 5 || got["echo"].Access != AccessAllow || got["create-issue"].Access != AccessAsk ||
		got["create-issue"].Ident != "create_issue" || got["delete_repo"].Name != "" {
		t.Errorf("tools: %+v", tools)
	}
	if !strings.Contains(string(got["add"].OutputSchema), `"sum"`) || !strings.Contains(string(got["echo"].InputSchema), `"text"`) {
		t.Errorf("schemas: %s %s", got["add"].OutputSchema, got["echo"].InputSchema)
	}
	run := h.NewRun("local", nil)
	if res := mustCall(t, run, "fake", "echo", map[string]any{"text": "hi"}); res.Text != "hi" || res.IsError {
		t.Errorf("echo: %+v", res)
	}
	if res := mustCall(t, run, "fake", "add", map[string]any{"a": 2, "b": 3}); string(res.StructuredContent) != `{"sum":5}` {
		t.Errorf("add: %+v", res)
	}
	if res := mustCall(t, run, "fake", "image", nil); len(res.Images) != 1 || res.Images[0].MIMEType != "image/png" || len(res.Images[0].Data) != 8 {
		t.Errorf("image: %+v", res)
	}
	if res := mustCall(t, run, "fake", "fail", map[string]any{}); !res.IsError || res.Text != "it failed" {
		t.Errorf("fail: %+v", res)
	}
	st := h.Status()[0]
	if st.State != StateUp || st.Connects != 1 || st.Tools != 14 || st.Calls[OutcomeOK] != 3 || st.Calls[OutcomeToolError] != 1 {
		t.Errorf("status: %+v", st)
	}
	if n := run.Calls()["fake"]; n != 4 {
		t.Errorf("run.Calls: %d", n)
	}
}

func TestArgumentsMustBeAnObject(t *testing.T) {
	h := newHub(t, Options{}, fakeUpstream(t, "fake", nil))
	_, err := h.NewRun("local", nil).Call(context.Background(), "fake", "echo", json.RawMessage(`[1]`), nil)
	wantCode(t, err, CodeBadArguments, "tools.fake.echo", "one object")
}

// Many callers at once: the first need starts one process for all of
// them, calls run side by side on it, and one Run counts them all.
func TestConcurrentCalls(t *testing.T) {
	h := newHub(t, Options{}, fakeUpstream(t, "fake", func(u *config.Upstream) { u.MaxCallsPerRun = 1000 }))
	run := h.NewRun("local", nil)
	const workers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				text := fmt.Sprintf("%d-%d", w, i)
				res, err := run.Call(context.Background(), "fake", "echo", args(t, map[string]any{"text": text}), func(float64, float64, string) {})
				if err != nil {
					errs <- err
				} else if res.Text != text {
					errs <- fmt.Errorf("asked %q, got %q", text, res.Text)
				}
				_ = h.Status()
				if i%10 == 0 {
					_, _ = h.Tools(context.Background(), "local")
					_ = h.Signatures("local", "python", 0)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := h.Status()[0]; st.Connects != 1 || st.Calls[OutcomeOK] != workers*each {
		t.Errorf("status: %+v", st)
	}
	if n := run.Calls()["fake"]; n != workers*each {
		t.Errorf("run.Calls: %d", n)
	}
	h.Close()
	h.Close() // idempotent
	_, err := run.Call(context.Background(), "fake", "echo", args(t, map[string]any{"text": "x"}), nil)
	wantCode(t, err, CodeUnavailable, "shutting down")
}
