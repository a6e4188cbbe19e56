package upstream

import (
	"context"
	"errors"
	"strings"
	"testing"

	"execd/internal/config"
)

func TestAccessPatterns(t *testing.T) {
	for _, tc := range []struct {
		allow, ask []string
		tool       string
		want       Access
	}{
		{[]string{"*"}, nil, "anything", AccessAllow},
		{[]string{"get_*"}, nil, "get_issue", AccessAllow},
		{[]string{"get_*"}, nil, "list_issues", AccessRefuse},
		{nil, []string{"*"}, "x", AccessAsk},
		// The more specific pattern decides, ask on a tie.
		{[]string{"*"}, []string{"delete_*"}, "delete_repo", AccessAsk},
		{[]string{"*"}, []string{"delete_*"}, "get_repo", AccessAllow},
		{[]string{"get_*"}, []string{"*"}, "get_repo", AccessAllow},
		{[]string{"get_*"}, []string{"*"}, "put_repo", AccessAsk},
		{[]string{"x"}, []string{"x"}, "x", AccessAsk},
		{[]string{"a*b*c"}, nil, "abxbxc", AccessAllow},
		{[]string{"a*b*c"}, nil, "abxbxd", AccessRefuse},
		{[]string{"*_issue"}, nil, "get_issue", AccessAllow},
		{[]string{"get"}, nil, "get_issue", AccessRefuse},
		{[]string{"**"}, nil, "", AccessAllow},
	} {
		if got := (rules{allow: tc.allow, ask: tc.ask}).access(tc.tool); got != tc.want {
			t.Errorf("allow %q ask %q, %q: %s, want %s", tc.allow, tc.ask, tc.tool, got, tc.want)
		}
	}
}

func TestRefusedAndUnknownTools(t *testing.T) {
	h := newHub(t, Options{},
		fakeUpstream(t, "fake", func(u *config.Upstream) { u.Allow, u.Ask = []string{"echo"}, nil }),
		fakeUpstream(t, "private", func(u *config.Upstream) { u.Principals = []string{"team-a"} }))
	ctx := context.Background()
	run := h.NewRun("local", nil)
	_, err := run.Call(ctx, "fake", "delete_repo", nil, nil)
	wantCode(t, err, CodeRefused, "tools.fake.delete_repo", "neither allow nor ask", `[[upstream]] "fake"`)

	// A made-up tool, a made-up upstream and an upstream the principal may
	// not use answer alike, and the last is not started for it.
	_, e1 := run.Call(ctx, "fake", "nope", nil, nil)
	_, e2 := run.Call(ctx, "nope", "echo", nil, nil)
	_, e3 := run.Call(ctx, "private", "echo", nil, nil)
	for _, err := range []error{e1, e2, e3} {
		wantCode(t, err, CodeUnknownTool, "is not a tool this code may call")
	}
	if e2.Error() != "tools.nope.echo is not a tool this code may call (tools.list() lists them)" ||
		e3.Error() != "tools.private.echo is not a tool this code may call (tools.list() lists them)" {
		t.Errorf("messages differ: %q, %q", e2, e3)
	}
	if st := h.Status()[1]; st.State != StateIdle {
		t.Errorf("the private upstream was started for a principal not in its principals: %+v", st)
	}
	tools, err := h.Tools(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range tools {
		if ti.Server != "fake" || ti.Name != "echo" {
			t.Errorf("local sees %s.%s", ti.Server, ti.Name)
		}
	}
	if sig := h.Signatures("local", "javascript", 0); strings.Contains(sig, "private") {
		t.Errorf("signatures name the private upstream:\n%s", sig)
	}
	// team-a sees and calls it.
	if _, err := h.NewRun("team-a", nil).Call(ctx, "private", "echo", args(t, map[string]any{"text": "a"}), nil); err != nil {
		t.Errorf("team-a: %v", err)
	}
}

func TestApprovals(t *testing.T) {
	h := newHub(t, Options{}, fakeUpstream(t, "fake", func(u *config.Upstream) { u.Allow, u.Ask = []string{"echo"}, []string{"add", "create-issue"} }))
	ctx := context.Background()
	a := args(t, map[string]any{"a": 1, "b": 2})

	_, err := h.NewRun("local", nil).Call(ctx, "fake", "add", a, nil)
	wantCode(t, err, CodeRefused, "needs the person's approval", `ask of [[upstream]] "fake"`, "cannot ask")

	var asked []Approval
	answer := Deny
	approve := func(_ context.Context, ap Approval) (Decision, error) {
		asked = append(asked, ap)
		return answer, nil
	}
	run := h.NewRun("local", approve)
	_, err = run.Call(ctx, "fake", "add", a, nil)
	wantCode(t, err, CodeDenied, "declined", "tools.fake.add")
	if len(asked) != 1 || asked[0].Tool != "add" || asked[0].Upstream != "fake" || string(asked[0].Arguments) != `{"a":1,"b":2}` ||
		asked[0].Description != "Adds two numbers" {
		t.Errorf("asked: %+v", asked)
	}
	if run.Calls()["fake"] != 0 {
		t.Error("a declined call was counted against max_calls_per_run")
	}

	answer = AllowOnce
	mustCall(t, run, "fake", "add", map[string]any{"a": 1, "b": 2})
	mustCall(t, run, "fake", "add", map[string]any{"a": 1, "b": 2})
	if len(asked) != 3 {
		t.Errorf("allow once: asked %d times, want 3", len(asked))
	}
	answer = AllowForRun
	mustCall(t, run, "fake", "add", map[string]any{"a": 1, "b": 2})
	mustCall(t, run, "fake", "add", map[string]any{"a": 1, "b": 2})
	mustCall(t, run, "fake", "echo", map[string]any{"text": "allowed: never asked"})
	if len(asked) != 4 {
		t.Errorf("allow for the run: asked %d times, want 4", len(asked))
	}
	// By its ident too, and another tool of ask is asked about anew.
	answer = Deny
	_, err = run.Call(ctx, "fake", "create_issue", args(t, map[string]any{"title": "t"}), nil)
	wantCode(t, err, CodeDenied)
	if asked[len(asked)-1].Tool != "create-issue" {
		t.Errorf("asked about %q", asked[len(asked)-1].Tool)
	}
	// The next run asks again.
	answer = AllowOnce
	mustCall(t, h.NewRun("local", approve), "fake", "add", map[string]any{"a": 1, "b": 2})
	if len(asked) != 6 {
		t.Errorf("a new run: asked %d times in all, want 6", len(asked))
	}

	// An approver that fails refuses; one cancelled cancels.
	fails := h.NewRun("local", func(context.Context, Approval) (Decision, error) { return Deny, errors.New("the client cannot ask") })
	_, err = fails.Call(ctx, "fake", "add", a, nil)
	wantCode(t, err, CodeRefused, "the client cannot ask")
	cctx, cancel := context.WithCancel(ctx)
	waits := h.NewRun("local", func(ctx context.Context, _ Approval) (Decision, error) {
		cancel()
		<-ctx.Done()
		return Deny, ctx.Err()
	})
	_, err = waits.Call(cctx, "fake", "add", a, nil)
	wantCode(t, err, CodeCancelled, "approval")
}

func TestMaxCallsPerRun(t *testing.T) {
	h := newHub(t, Options{}, fakeUpstream(t, "fake", func(u *config.Upstream) { u.MaxCallsPerRun = 2 }))
	run := h.NewRun("local", nil)
	mustCall(t, run, "fake", "echo", map[string]any{"text": "1"})
	mustCall(t, run, "fake", "echo", map[string]any{"text": "2"})
	_, err := run.Call(context.Background(), "fake", "echo", args(t, map[string]any{"text": "3"}), nil)
	wantCode(t, err, CodeLimit, `max_calls_per_run of [[upstream]] "fake"`, "2 calls")
	// Another run has its own count.
	mustCall(t, h.NewRun("local", nil), "fake", "echo", map[string]any{"text": "4"})
	if n := h.Status()[0].Calls[CodeLimit]; n != 1 {
		t.Errorf("limit counted %d times", n)
	}
}
