package workspace

import (
	"context"
	"strings"
	"sync"
	"testing"
)

// events is an Observer that writes down what it is told, in order.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	e.log = append(e.log, s)
	e.mu.Unlock()
}

func (e *events) Phase(_ context.Context, p Phase, lang string) func(string) {
	return func(outcome string) { e.add(string(p) + " " + lang + " " + outcome) }
}
func (e *events) StateLost(lang string, r ResetReason) { e.add("lost " + lang + " " + string(r)) }
func (e *events) Hibernated(lang string)               { e.add("hibernated " + lang) }

func (e *events) take() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := strings.Join(e.log, "; ")
	e.log = nil
	return s
}

func TestObserverSeesPhasesAndStateChanges(t *testing.T) {
	ev := &events{}
	m := newTestManager(t, Config{Observer: ev}, newFakeFactory("javascript"))
	run(t, m, "p", "w", "set x 1")
	if got, want := ev.take(), "queue javascript ok; slot javascript ok; start javascript new; run javascript ok"; got != want {
		t.Errorf("first call:\n got %s\nwant %s", got, want)
	}
	run(t, m, "p", "w", "get x")
	if got, want := ev.take(), "queue javascript ok; slot javascript ok; run javascript ok"; got != want {
		t.Errorf("a call on the live interpreter:\n got %s\nwant %s", got, want)
	}
	if err := m.Hibernate(context.Background(), "p", "w"); err != nil {
		t.Fatal(err)
	}
	if got := ev.take(); got != "hibernated javascript" {
		t.Errorf("hibernate: %s", got)
	}
	run(t, m, "p", "w", "get x")
	if got := ev.take(); !strings.Contains(got, "start javascript restored") {
		t.Errorf("after hibernation: %s", got)
	}
	// A hard kill loses the state: reported once, where it happens.
	run(t, m, "p", "w", "kill")
	if got := ev.take(); !strings.Contains(got, "lost javascript killed") || strings.Count(got, "lost") != 1 {
		t.Errorf("kill: %s", got)
	}
	run(t, m, "p", "w", "get x") // says reset, but the loss was already counted
	if got := ev.take(); strings.Contains(got, "lost") {
		t.Errorf("the next call counted the loss again: %s", got)
	}
	if err := m.Reset(context.Background(), "p", "w", false); err != nil {
		t.Fatal(err)
	}
	if got := ev.take(); got != "lost javascript reset_by_user" {
		t.Errorf("reset: %s", got)
	}
}

func TestNewIDMintsTheIDsOfNewWorkspaces(t *testing.T) {
	n := 0
	m := newTestManager(t, Config{NewID: func() string { n++; return "minted-" + string(rune('0'+n)) }}, newFakeFactory("javascript"))
	if out := run(t, m, "p", "", "set x 1"); out.Workspace != "minted-1" {
		t.Errorf("new workspace id %q", out.Workspace)
	}
	if out := run(t, m, "p", "named", "get x"); out.Workspace != "named" || n != 1 {
		t.Errorf("a named call minted an id: %q, %d", out.Workspace, n)
	}
}

func TestListAllListsEveryPrincipal(t *testing.T) {
	m := newTestManager(t, Config{}, newFakeFactory("javascript"))
	run(t, m, "alice", "a1", "set x 1")
	run(t, m, "bob", "b1", "set x 1")
	run(t, m, "bob", "b2", "set x 1")
	if err := m.Hibernate(context.Background(), "bob", "b2"); err != nil {
		t.Fatal(err)
	}
	got := map[string]Info{}
	for _, in := range m.ListAll() {
		got[in.Principal+"/"+in.ID] = in
	}
	if len(got) != 3 || !got["alice/a1"].Live || !got["bob/b1"].Live || !got["bob/b2"].Hibernated || got["bob/b2"].Live {
		t.Errorf("ListAll: %+v", got)
	}
	if l := m.List("alice"); len(l) != 1 || l[0].Principal != "" {
		t.Errorf("List(alice): %+v", l)
	}
	if h := m.Health(); h.RunSlots < 1 || h.RunsInFlight != 0 {
		t.Errorf("health %+v", h)
	}
}
