package upstream

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"execd/internal/config"
)

// A stdio server that exits during a call: the call says so with its exit
// status, and the next call starts it again.
func TestCrashMidCall(t *testing.T) {
	h := newHub(t, Options{}, fakeUpstream(t, "fake", nil))
	run := h.NewRun("local", nil)
	mustCall(t, run, "fake", "echo", map[string]any{"text": "before"})
	_, err := run.Call(context.Background(), "fake", "crash", nil, nil)
	wantCode(t, err, CodeUnavailable, `upstream "fake" went away during the call to tools.fake.crash`, "exited with status 3", "starts it again")
	if res := mustCall(t, run, "fake", "echo", map[string]any{"text": "after"}); res.Text != "after" {
		t.Errorf("after the crash: %+v", res)
	}
	if st := h.Status()[0]; st.State != StateUp || st.Connects != 2 || st.Failures != 0 || !strings.Contains(st.LastError, "status 3") {
		t.Errorf("status: %+v", st)
	}
}

// A server that never answers: call_timeout ends the call, names the key,
// and the cancel reaches the server as notifications/cancelled for the
// call's request id.
func TestHangTimesOutAndIsCancelledUpstream(t *testing.T) {
	h := newHub(t, Options{}, fakeUpstream(t, "fake", func(u *config.Upstream) {
		u.CallTimeout = config.Duration{Duration: 300 * time.Millisecond}
	}))
	run := h.NewRun("local", nil)
	_, err := run.Call(context.Background(), "fake", "hang", nil, nil)
	wantCode(t, err, CodeTimeout, "tools.fake.hang did not answer within 300ms", `call_timeout of [[upstream]] "fake"`, "cancelled upstream")
	got := fakeReceived(t, run, "fake", true)
	if len(got.Calls) < 1 || got.Calls[0].Name != "hang" || len(got.Cancels) != 1 || string(got.Cancels[0].RequestID) != string(got.Calls[0].ID) {
		t.Errorf("the upstream received %+v; want a notifications/cancelled for the hang's id", got)
	}
}

// The caller's own cancel (the run stopped) reaches the upstream the same
// way, and Call returns at once.
func TestCancelReachesUpstream(t *testing.T) {
	h := newHub(t, Options{}, fakeUpstream(t, "fake", nil))
	run := h.NewRun("local", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The fake sends progress once it has the call: cancel then.
	_, err := run.Call(ctx, "fake", "hang", nil, func(float64, float64, string) { cancel() })
	wantCode(t, err, CodeCancelled, "tools.fake.hang")
	got := fakeReceived(t, run, "fake", true)
	if len(got.Cancels) != 1 || string(got.Cancels[0].RequestID) != string(got.Calls[0].ID) {
		t.Errorf("the upstream received %+v; want a notifications/cancelled for the hang's id", got)
	}
}

// An answer that is not JSON ends the connection with a clear error; the
// next call starts the server again.
func TestGarbage(t *testing.T) {
	h := newHub(t, Options{}, fakeUpstream(t, "fake", nil))
	run := h.NewRun("local", nil)
	_, err := run.Call(context.Background(), "fake", "garbage", nil, nil)
	wantCode(t, err, CodeUnavailable, `upstream "fake" went away during the call to tools.fake.garbage`, "it sent what is not JSON-RPC: invalid character")
	if res := mustCall(t, run, "fake", "echo", map[string]any{"text": "again"}); res.Text != "again" {
		t.Errorf("after garbage: %+v", res)
	}
	if st := h.Status()[0]; st.Connects != 2 {
		t.Errorf("status: %+v", st)
	}
}

// A line on stdout that is not JSON-RPC (a banner) is ignored.
func TestBannerOnStdout(t *testing.T) {
	h := newHub(t, Options{}, fakeUpstream(t, "fake", func(u *config.Upstream) { u.Env = map[string]string{"FAKE_BANNER": "1"} }))
	if res := mustCall(t, h.NewRun("local", nil), "fake", "echo", map[string]any{"text": "hi"}); res.Text != "hi" {
		t.Errorf("echo: %+v", res)
	}
}

// 5,000 progress notifications to a slow receiver: it gets the latest
// ones, fewer (one each would be 5 s of its sleeps), the call's answer is
// not held up behind them, and nothing arrives after Call returns. The
// call timeout is a failure detector, not a speed limit: a loaded machine
// with the race detector takes seconds to send and read the flood.
func TestProgressFlood(t *testing.T) {
	const flood = 5000
	h := newHub(t, Options{}, fakeUpstream(t, "fake", func(u *config.Upstream) { u.CallTimeout.Duration = time.Minute }))
	run := h.NewRun("local", nil)
	var n, after atomic.Int64
	var returned atomic.Bool
	var last atomic.Value
	res, err := run.Call(context.Background(), "fake", "flood", args(t, map[string]any{"n": flood}), func(done, total float64, msg string) {
		if returned.Load() {
			after.Add(1)
		}
		n.Add(1)
		last.Store(done)
		time.Sleep(time.Millisecond) // a receiver slower than the flood
	})
	returned.Store(true)
	if err != nil || res.Text != "flooded" {
		t.Fatalf("flood: %+v, %v", res, err)
	}
	if got := n.Load(); got == 0 || got >= flood {
		t.Errorf("the receiver was called %d times for %d notifications", got, flood)
	}
	if after.Load() != 0 {
		t.Errorf("%d progress calls after Call returned", after.Load())
	}
	mustCall(t, run, "fake", "echo", map[string]any{"text": "still up"})
}

// An 8 MiB answer over a 1 MiB limit is refused with the key's name, and
// the connection lives on. (Larger answers take the same path; 50 MB took
// longer than the call's timeout to read under the race detector on a
// loaded machine.)
func TestAnswerTooLarge(t *testing.T) {
	h := newHub(t, Options{MaxResultBytes: 1 << 20, MaxResultKey: "limits.max_output_bytes"}, fakeUpstream(t, "fake", nil))
	run := h.NewRun("local", nil)
	_, err := run.Call(context.Background(), "fake", "big", args(t, map[string]any{"bytes": 8 << 20}), nil)
	wantCode(t, err, CodeTooLarge, "tools.fake.big", "more than the 1048576", "(limits.max_output_bytes)", "dropped")
	res := mustCall(t, run, "fake", "big", map[string]any{"bytes": 1000})
	if len(res.Text) != 1000 {
		t.Errorf("a small answer after the large one: %d bytes", len(res.Text))
	}
	if st := h.Status()[0]; st.Connects != 1 || st.Calls[CodeTooLarge] != 1 {
		t.Errorf("status: %+v", st)
	}
}

// tools/list_changed from the upstream reaches OnToolsChanged, and the
// next listing has the new tool.
func TestToolsListChanged(t *testing.T) {
	changed := make(chan string, 4)
	h := newHub(t, Options{OnToolsChanged: func(name string) { changed <- name }}, fakeUpstream(t, "fake", nil))
	ctx := context.Background()
	has := func(name string) bool {
		tools, err := h.Tools(ctx, "local")
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range tools {
			if ti.Name == name {
				return true
			}
		}
		return false
	}
	if has("extra") {
		t.Fatal("extra listed before the change")
	}
	mustCall(t, h.NewRun("local", nil), "fake", "change", nil)
	if got := <-changed; got != "fake" {
		t.Errorf("OnToolsChanged(%q)", got)
	}
	if !has("extra") {
		t.Error("extra not listed after the change")
	}
}

// A stdio server gets env and pass_env, and of execd's own environment
// only the base variables.
func TestStdioEnvironment(t *testing.T) {
	env := map[string]string{"PATH": "/usr/bin:/bin", "TOKEN": "tok-123456", "EXECD_OTHER_SECRET": "nope"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	h := newHub(t, Options{LookupEnv: lookup}, fakeUpstream(t, "fake", func(u *config.Upstream) {
		u.Env = map[string]string{"MODE": "test"}
		u.PassEnv = []string{"TOKEN"}
	}))
	run := h.NewRun("local", nil)
	for name, want := range map[string]string{"MODE": "test", "TOKEN": "tok-123456", "PATH": "/usr/bin:/bin", "EXECD_OTHER_SECRET": ""} {
		res := mustCall(t, run, "fake", "env", map[string]any{"name": name})
		var got struct {
			Value string `json:"value"`
			Set   bool   `json:"set"`
		}
		json.Unmarshal(res.StructuredContent, &got)
		if got.Value != want || got.Set != (want != "") {
			t.Errorf("%s: %+v, want %q", name, got, want)
		}
	}
	_, err := New([]config.Upstream{fakeUpstream(t, "fake", func(u *config.Upstream) { u.PassEnv = []string{"MISSING"} })},
		config.CodeMode{}, Options{LookupEnv: lookup})
	if err == nil || !strings.Contains(err.Error(), "upstream[0] (fake).pass_env") {
		t.Errorf("a pass_env variable that is not set: %v", err)
	}
}

// A command that cannot start fails the call with the reason, and each
// later need tries again after a growing pause.
func TestCannotStart(t *testing.T) {
	h := newHub(t, Options{}, fakeUpstream(t, "fake", func(u *config.Upstream) { u.Command = []string{"/nonexistent/server"} }))
	_, err := h.NewRun("local", nil).Call(context.Background(), "fake", "echo", nil, nil)
	wantCode(t, err, CodeUnavailable, `upstream "fake" did not start`, "/nonexistent/server")
	_, err = h.Tools(context.Background(), "local")
	wantCode(t, err, CodeUnavailable, `upstream "fake" did not start`) // the first failure: tried again at once
	_, err = h.Tools(context.Background(), "local")
	wantCode(t, err, CodeUnavailable, `upstream "fake" is down`, "tries it again in")
	if st := h.Status()[0]; st.State != StateDown || st.Failures != 2 {
		t.Errorf("status: %+v", st)
	}
}

func TestBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{0: 0, 1: 0, 2: time.Second, 3: 2 * time.Second, 6: 16 * time.Second, 7: 30 * time.Second, 100: 30 * time.Second} {
		if got := backoff(n); got != want {
			t.Errorf("backoff(%d) = %s, want %s", n, got, want)
		}
	}
}
