package upstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"execd/internal/config"
	"execd/internal/upstream/upstreamtest"
)

// fakeUpstream is an [[upstream]] running the fake, with the defaults
// filled in as config.Parse fills them.
func fakeUpstream(t testing.TB, name string, edit func(*config.Upstream)) config.Upstream {
	u := config.Upstream{Name: name, Command: []string{upstreamtest.FakeBin(t)}, Allow: []string{"*"}, Ask: []string{"create-issue"},
		MaxCallsPerRun: config.DefaultUpstreamMaxCallsPerRun,
		CallTimeout:    config.Duration{Duration: 10 * time.Second}, ConnectTimeout: config.Duration{Duration: 10 * time.Second}}
	if edit != nil {
		edit(&u)
	}
	return u
}

func newHub(t testing.TB, opts Options, ups ...config.Upstream) *Hub {
	t.Helper()
	if opts.Log == nil {
		if tt, ok := t.(*testing.T); ok {
			opts.Log = zaptest.NewLogger(tt, zaptest.Level(zap.WarnLevel))
		}
	}
	h, err := New(ups, config.CodeMode{DescriptionBudget: 4096}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func args(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeReceived is what the fake says it got (upstreamtest.Received).
func fakeReceived(t *testing.T, run *Run, server string, waitCancel bool) upstreamtest.Received {
	t.Helper()
	res, err := run.Call(context.Background(), server, "received", args(t, map[string]any{"waitCancel": waitCancel}), nil)
	if err != nil {
		t.Fatal(err)
	}
	var r upstreamtest.Received
	if err := json.Unmarshal(res.StructuredContent, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func mustCall(t *testing.T, run *Run, server, tool string, a any) *Result {
	t.Helper()
	res, err := run.Call(context.Background(), server, tool, args(t, a), nil)
	if err != nil {
		t.Fatalf("%s.%s: %v", server, tool, err)
	}
	return res
}

// wantCode checks that err is an *Error with code whose message holds
// each of parts.
func wantCode(t *testing.T, err error, code Code, parts ...string) {
	t.Helper()
	if CodeOf(err) != code {
		t.Fatalf("error %v (code %q), want code %q", err, CodeOf(err), code)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not say %q", err, p)
		}
	}
}
