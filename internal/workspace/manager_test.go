package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"execd/internal/guestfs"
)

func TestStateAcrossCalls(t *testing.T) {
	m := newTestManager(t, Config{}, newFakeFactory())
	first := run(t, m, "local", "", "set x 41")
	if _, err := uuid.Parse(first.Workspace); err != nil {
		t.Fatalf("generated id %q is not a UUID: %v", first.Workspace, err)
	}
	if first.Result.Status != StatusOK || first.Result.Reset {
		t.Errorf("new workspace: status %s reset %v, want ok, not reset", first.Result.Status, first.Result.Reset)
	}
	second := run(t, m, "local", first.Workspace, "get x")
	if value(second.Result) != "41" || second.Result.Status != StatusOK {
		t.Errorf("get x = %s (%s), want 41 ok", value(second.Result), second.Result.Status)
	}
	named := run(t, m, "local", "analysis", "get x")
	if named.Workspace != "analysis" || named.Result.Status != StatusError {
		t.Errorf("fresh named workspace: %+v", named)
	}
}

func TestValidateID(t *testing.T) {
	for _, id := range []string{"a", "analysis", "A.b_c-9", "...", ".hidden", strings.Repeat("x", 64)} {
		if err := ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q) = %v, want nil", id, err)
		}
	}
	for _, id := range []string{"", ".", "..", "a/b", "../x", "a b", "é", "a\x00", strings.Repeat("x", 65), "~x"} {
		err := ValidateID(id)
		if !errors.Is(err, ErrInvalidID) {
			t.Errorf("ValidateID(%q) = %v, want InvalidID", id, err)
			continue
		}
		if !strings.Contains(err.Error(), "1–64 characters") {
			t.Errorf("message %q does not state the rule", err)
		}
	}
	m := newTestManager(t, Config{}, newFakeFactory())
	_, err := m.Run(context.Background(), Request{Principal: "p", Workspace: "../etc", Language: "js"})
	var we *Error
	if !errors.As(err, &we) || we.Code != InvalidID {
		t.Errorf("Run with ../etc: %v", err)
	}
	if err := m.Reset(context.Background(), "p", "a/b", false); !errors.Is(err, ErrInvalidID) {
		t.Errorf("Reset a/b: %v", err)
	}
}

func TestLanguages(t *testing.T) {
	m := newTestManager(t, Config{}, newFakeFactory("javascript"))
	for _, l := range []string{"javascript", "JavaScript", " js ", "node"} {
		if _, err := m.Run(context.Background(), Request{Principal: "p", Workspace: "w", Language: l, Code: "set a 1"}); err != nil {
			t.Errorf("language %q: %v", l, err)
		}
	}
	for _, l := range []string{"cobol", "python", "py", ""} {
		_, err := m.Run(context.Background(), Request{Principal: "p", Workspace: "w", Language: l})
		if !errors.Is(err, ErrUnsupportedLanguage) || !strings.Contains(err.Error(), "use javascript") {
			t.Errorf("language %q: %v", l, err)
		}
	}
	_, err := m.Run(context.Background(), Request{Principal: "p", Language: "cobol"})
	if err.Error() != `language "cobol" is not supported; use javascript` {
		t.Errorf("message: %q", err)
	}

	both := newTestManager(t, Config{}, newFakeFactory("javascript", "python"))
	for _, l := range []string{"python", "py", "Python3", "js"} {
		if _, err := both.Run(context.Background(), Request{Principal: "p", Workspace: "w", Language: l}); err != nil {
			t.Errorf("language %q: %v", l, err)
		}
	}
}

func TestLanguagesSideBySide(t *testing.T) {
	f := newFakeFactory("javascript", "python")
	m := newTestManager(t, Config{}, f)
	ctx := context.Background()
	m.Run(ctx, Request{Principal: "p", Workspace: "w", Language: "js", Code: "set x js"})
	m.Run(ctx, Request{Principal: "p", Workspace: "w", Language: "py", Code: "set x py"})
	js, _ := m.Run(ctx, Request{Principal: "p", Workspace: "w", Language: "js", Code: "get x"})
	py, _ := m.Run(ctx, Request{Principal: "p", Workspace: "w", Language: "py", Code: "get x"})
	if value(js.Result) != "js" || value(py.Result) != "py" {
		t.Errorf("js=%s py=%s", value(js.Result), value(py.Result))
	}
	infos := m.List("p")
	if len(infos) != 1 || strings.Join(infos[0].Languages, ",") != "javascript,python" || !infos[0].Live {
		t.Errorf("List = %+v", infos)
	}
}

func TestPrincipalIsolation(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{}, f)
	ctx := context.Background()
	run(t, m, "alice", "shared", "set secret 42")
	run(t, m, "alice", "shared", "write f.txt alice")

	if got := run(t, m, "bob", "shared", "get secret"); got.Result.Value != nil {
		t.Errorf("bob read alice's variable: %s", value(got.Result))
	}
	for _, in := range m.List("bob") {
		if in.DiskBytes > 0 {
			t.Errorf("bob sees files: %+v", in)
		}
	}
	if err := m.Delete(ctx, "bob", "shared"); err != nil {
		t.Fatalf("bob deletes his own: %v", err)
	}
	if err := m.Reset(ctx, "bob", "shared", true); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob resets a workspace only alice has: %v", err)
	}
	if err := m.Delete(ctx, "bob", "shared"); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob deletes a workspace only alice has: %v", err)
	}
	if got := run(t, m, "alice", "shared", "get secret"); value(got.Result) != "42" {
		t.Errorf("alice's state after bob's attempts: %s", value(got.Result))
	}
	if l := m.List("alice"); len(l) != 1 || l[0].ID != "shared" || !l[0].Live {
		t.Errorf("alice's list: %+v", l)
	}
	if l := m.List("bob"); len(l) != 0 {
		t.Errorf("bob's list: %+v", l)
	}
	if l := m.List("carol"); len(l) != 0 {
		t.Errorf("carol's list: %+v", l)
	}
}

func TestPrincipalDir(t *testing.T) {
	seen := map[string]string{}
	for _, p := range []string{"local", "alice", "a.b", ".hidden", "..", ".", "a/b", "../../etc", "~x", strings.Repeat("z", 200), "tok:abc"} {
		d, err := principalDir(p)
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		if d == "." || d == ".." || strings.ContainsAny(d, "/\\") || strings.HasPrefix(d, ".") || len(d) > 65 {
			t.Errorf("principalDir(%q) = %q is unsafe", p, d)
		}
		if other, dup := seen[d]; dup {
			t.Errorf("%q and %q share %q", p, other, d)
		}
		seen[d] = p
	}
	if d, _ := principalDir("local"); d != "local" {
		t.Errorf("local maps to %q", d)
	}
	if _, err := principalDir(""); !errors.Is(err, ErrInvalidPrincipal) {
		t.Errorf("empty principal: %v", err)
	}
	m := newTestManager(t, Config{}, newFakeFactory())
	if _, err := m.Run(context.Background(), Request{Language: "js"}); !errors.Is(err, ErrInvalidPrincipal) {
		t.Errorf("Run without principal: %v", err)
	}
	// The directory of a hostile principal stays under the data dir.
	out := run(t, m, "../../escape", "w", "write f x")
	_ = out
	matches, _ := filepath.Glob(filepath.Join(m.cfg.DataDir, "*", "w", "f"))
	if len(matches) != 1 {
		t.Errorf("files for ../../escape: %v", matches)
	}
}

// startWait starts a "wait" run in a goroutine and waits until it runs.
func startWait(t *testing.T, m *Manager, f *fakeFactory, principal, id, tag string) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := m.Run(context.Background(), Request{Principal: principal, Workspace: id, Language: "js", Code: "wait " + tag})
		done <- err
	}()
	if got := <-f.started; got != "wait "+tag {
		t.Fatalf("started %q, want %q", got, "wait "+tag)
	}
	return done
}

func TestQueueFIFO(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{}, f)
	first := startWait(t, m, f, "p", "w", "0")

	var wg sync.WaitGroup
	for i := 1; i <= 5; i++ {
		s := newSink()
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Run(context.Background(), Request{Principal: "p", Workspace: "w", Language: "js", Code: fmt.Sprintf("set k %d", i), Sink: s})
		}()
		// Enqueue one at a time: wait until this call reports it is queued.
		if msg := <-s.ch; !strings.HasPrefix(msg, "queued: workspace w is busy") {
			t.Fatalf("progress %q", msg)
		}
	}
	f.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	want := "wait 0|set k 1|set k 2|set k 3|set k 4|set k 5"
	if got := strings.Join(f.order, "|"); got != want {
		t.Errorf("order %s, want %s", got, want)
	}
}

func TestCancelWhileQueued(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{}, f)
	first := startWait(t, m, f, "p", "w", "0")

	ctx, cancel := context.WithCancel(context.Background())
	s := newSink()
	done := make(chan error, 1)
	go func() {
		out, err := m.Run(ctx, Request{Principal: "p", Workspace: "w", Language: "js", Code: "set never 1", Sink: s})
		if out.Workspace != "w" {
			err = fmt.Errorf("outcome workspace %q", out.Workspace)
		}
		done <- err
	}()
	<-s.ch // queued
	cancel()
	// It returns while the first call still holds the workspace.
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled queued call: %v", err)
	}
	f.release <- struct{}{}
	<-first
	if got := run(t, m, "p", "w", "get never"); got.Result.Value != nil {
		t.Error("the cancelled call ran")
	}
	if len(s.messages()) != 1 {
		t.Errorf("progress: %q, want one queued message", s.messages())
	}
}

func TestCancelRaceHandsTurnOn(t *testing.T) {
	// A queued call cancelled in the instant the turn is handed to it must
	// pass the turn on. The test holds the Manager's lock while it cancels
	// and hands the turn over, as releaseTurn does: in even rounds the
	// cancel comes first, so the waiter wakes for its cancel and then finds
	// the turn handed to it; in odd rounds the hand-over usually wins
	// (a waiter not yet parked sees both and select picks). A lost turn
	// leaves the workspace busy, which the check after each round reports
	// (it never hangs).
	m := newTestManager(t, Config{}, newFakeFactory())
	w, err := m.ref("p", "w", true)
	if err != nil {
		t.Fatal(err)
	}
	defer m.unref(w)
	for i := range 300 {
		if err := m.acquireTurn(context.Background(), w, &queued{}, true); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan error, 1)
		go func() { got <- m.acquireTurn(ctx, w, &queued{}, true) }()
		for {
			m.mu.Lock()
			n := w.waiters.Len()
			m.mu.Unlock()
			if n == 1 {
				break
			}
			time.Sleep(10 * time.Microsecond)
		}
		m.mu.Lock()
		if i%2 == 0 {
			cancel()
		}
		wt := w.waiters.Remove(w.waiters.Front()).(*waiter)
		wt.handed = true
		close(wt.ready)
		cancel()
		m.mu.Unlock()
		if err := <-got; err == nil {
			m.releaseTurn(w) // it took the turn: give it back
		}
		m.mu.Lock()
		busy, active := w.busy, m.active
		m.mu.Unlock()
		if busy || active != 0 {
			t.Fatalf("round %d: after the race the workspace is busy=%v with %d turns held; the turn was lost", i, busy, active)
		}
	}

	// The same through Run, under a synctest bubble: a stalled queue leaves
	// every goroutine blocked, synctest.Wait returns, and the check fails.
	synctest.Test(t, func(t *testing.T) {
		m, err := NewManager(Config{DataDir: t.TempDir()}, newFakeFactory(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(context.Background())
		for i := range 200 {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{}, 2)
			go func() {
				m.Run(context.Background(), Request{Principal: "p", Workspace: "w", Language: "js", Code: "set a 1"})
				done <- struct{}{}
			}()
			go func() {
				m.Run(ctx, Request{Principal: "p", Workspace: "w", Language: "js", Code: "set b 1"})
				done <- struct{}{}
			}()
			if i%2 == 0 {
				cancel()
			}
			synctest.Wait()
			if len(done) != 2 {
				t.Fatalf("iteration %d: %d of 2 calls returned; the turn was lost", i, len(done))
			}
			cancel()
		}
	})
}
func TestHammerOneWorkspace(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{MaxConcurrentRuns: 4}, f)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				out, err := m.Run(context.Background(), Request{Principal: "p", Workspace: "w", Language: "js", Code: fmt.Sprintf("set g%d %d", g, i)})
				if err != nil || out.Result.Status != StatusOK {
					t.Errorf("run: %v %+v", err, out.Result)
				}
			}
		}()
	}
	wg.Wait()
	if got := f.maxRunning.Load(); got != 1 {
		t.Errorf("max concurrent runs in one workspace = %d, want 1", got)
	}
	if f.made != 1 {
		t.Errorf("runners made = %d, want 1", f.made)
	}
}

func TestHammerManyWorkspacesBounded(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{MaxConcurrentRuns: 3, MaxWorkspaces: 5}, f)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				id := fmt.Sprintf("w%d", (g+i)%10)
				if _, err := m.Run(context.Background(), Request{Principal: "p", Workspace: id, Language: "js", Code: "set a 1"}); err != nil {
					t.Error(err)
				}
				if i%7 == 0 {
					m.List("p")
				}
				if i%13 == 0 {
					m.Reset(context.Background(), "p", id, false)
				}
			}
		}()
	}
	wg.Wait()
	if got := f.maxRunning.Load(); got > 3 {
		t.Errorf("max concurrent runs = %d, want <= 3", got)
	}
	if got := f.liveCount(); got > 5 {
		t.Errorf("live runners = %d, want <= 5", got)
	}
}

func TestConcurrencyCapQueues(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{MaxConcurrentRuns: 1}, f)
	first := startWait(t, m, f, "p", "a", "a")

	s := newSink()
	done := make(chan Outcome, 1)
	go func() {
		out, _ := m.Run(context.Background(), Request{Principal: "p", Workspace: "b", Language: "js", Code: "set x 1", Sink: s})
		done <- out
	}()
	if msg := <-s.ch; msg != "queued: all 1 run slots are busy; waiting for one" {
		t.Fatalf("progress %q", msg)
	}
	select {
	case <-done:
		t.Fatal("second workspace ran past the cap")
	default:
	}
	f.release <- struct{}{}
	<-first
	if out := <-done; out.Result.Status != StatusOK {
		t.Errorf("queued run: %+v", out.Result)
	}
}

func TestIdleEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFactory()
		m, err := NewManager(Config{DataDir: t.TempDir(), IdleTTL: 10 * time.Minute}, f, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(context.Background())
		run(t, m, "p", "w", "set x 1")
		run(t, m, "p", "w", "write keep.txt yes")

		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if f.liveCount() != 1 {
			t.Fatal("evicted before the TTL")
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if f.liveCount() != 0 {
			t.Fatalf("live runners after TTL = %d", f.liveCount())
		}
		if len(m.wss) != 0 {
			t.Errorf("records kept after eviction: %d", len(m.wss))
		}
		l := m.List("p")
		if len(l) != 1 || l[0].Live || l[0].Hibernated || l[0].DiskBytes == 0 {
			t.Errorf("List after eviction = %+v", l)
		}
		out := run(t, m, "p", "w", "get x")
		if out.Result.Value != nil || !out.Result.Reset || out.Result.Status != StatusError || out.ResetReason != ReasonIdleTTL {
			t.Errorf("after eviction: %+v (%s)", out.Result, out.ResetReason)
		}
		out = run(t, m, "p", "w", "set y 1")
		if out.Result.Reset || out.Result.Status != StatusOK || out.ResetReason != "" {
			t.Errorf("second call after eviction: %+v", out.Result)
		}
		if b, err := os.ReadFile(filepath.Join(m.cfg.DataDir, "p", "w", "keep.txt")); string(b) != "yes" {
			t.Errorf("file lost on eviction: %q %v", b, err)
		}
	})
}

func TestEvictionMarksOKAsReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFactory()
		m, _ := NewManager(Config{DataDir: t.TempDir(), IdleTTL: time.Minute}, f, nil)
		defer m.Close(context.Background())
		run(t, m, "p", "w", "set x 1")
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		out := run(t, m, "p", "w", "set x 2")
		if out.Result.Status != StatusReset || !out.Result.Reset || out.ResetReason != ReasonIdleTTL {
			t.Errorf("ok on a fresh runner: %+v, want status reset", out.Result)
		}
	})
}

func TestNoIdleEvictionWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFactory()
		m, _ := NewManager(Config{DataDir: t.TempDir(), IdleTTL: time.Minute}, f, nil)
		defer m.Close(context.Background())
		done := startWait(t, m, f, "p", "w", "long")
		time.Sleep(time.Hour)
		synctest.Wait()
		if f.liveCount() != 1 {
			t.Fatal("a running workspace was evicted")
		}
		f.release <- struct{}{}
		<-done
	})
}

func TestKilledAndCrashedSayReset(t *testing.T) {
	// The run whose instance was discarded says reset (its status stays),
	// and so does the next one, for a client that never saw that answer.
	for _, tc := range []struct {
		code   string
		status Status
		reason ResetReason
	}{
		{"kill", StatusTimeout, ReasonKilled},
		{"crash", StatusError, ReasonCrashed},
	} {
		f := newFakeFactory()
		m := newTestManager(t, Config{}, f)
		run(t, m, "p", "w", "set x 1")
		out := run(t, m, "p", "w", tc.code)
		if !out.Result.Reset || out.Result.Status != tc.status || out.ResetReason != tc.reason {
			t.Errorf("%s: %+v, reason %q", tc.code, out.Result, out.ResetReason)
		}
		if f.liveCount() != 0 {
			t.Errorf("%s: the discarded runner is still live", tc.code)
		}
		out = run(t, m, "p", "w", "set y 1")
		if !out.Result.Reset || out.Result.Status != StatusReset || out.ResetReason != tc.reason {
			t.Errorf("%s, next run: %+v, reason %q", tc.code, out.Result, out.ResetReason)
		}
		if out := run(t, m, "p", "w", "get x"); out.Result.Value != nil || out.Result.Reset {
			t.Errorf("%s, third run: %+v", tc.code, out.Result)
		}
	}
	// A runner that replaced its instance by itself is believed too.
	m := newTestManager(t, Config{}, newFakeFactory())
	if out := run(t, m, "p", "w", "fresh"); !out.Result.Reset || out.ResetReason != ReasonCrashed || out.Result.Status != StatusReset {
		t.Errorf("fresh: %+v %q", out.Result, out.ResetReason)
	}
	// A worker's reset status is not the workspace's when nothing was lost.
	if out := run(t, m, "p", "v", "set a 1"); out.Result.Status != StatusOK || out.Result.Reset {
		t.Errorf("plain run: %+v", out.Result)
	}
}

func TestLRUHibernates(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{MaxWorkspaces: 2}, f)
	run(t, m, "p", "a", "set x a")
	run(t, m, "p", "b", "set x b")
	run(t, m, "p", "a", "get x") // a is now more recent than b
	run(t, m, "p", "c", "set x c")
	if f.liveCount() != 2 {
		t.Fatalf("live = %d", f.liveCount())
	}
	if out := run(t, m, "p", "a", "get x"); value(out.Result) != "a" || out.Result.Reset || out.Restored {
		t.Errorf("a was hibernated: %+v", out)
	}
	if _, err := os.Stat(filepath.Join(m.cfg.DataDir, "p", stateDirName, "b", "javascript.img")); err != nil {
		t.Errorf("b's image: %v", err)
	}
	out := run(t, m, "p", "b", "get x")
	if value(out.Result) != "b" || out.Result.Reset || out.Result.Status != StatusOK || !out.Restored {
		t.Errorf("b after hibernation: %+v", out)
	}
	if f.restored != 1 || f.clones != 0 {
		t.Errorf("restored %d, clones %d", f.restored, f.clones)
	}
	if _, err := os.Stat(filepath.Join(m.cfg.DataDir, "p", stateDirName, "b", "javascript.img")); !os.IsNotExist(err) {
		t.Errorf("b's image after its restore: %v", err)
	}
}

func TestLRUDropsWhatCannotBeSaved(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{MaxWorkspaces: 1}, f)
	run(t, m, "p", "a", "set x a")
	run(t, m, "p", "a", "open held.txt")
	run(t, m, "p", "b", "set x b") // a must go, and cannot be saved
	if f.liveCount() != 1 {
		t.Fatalf("live = %d, want 1: the cap holds", f.liveCount())
	}
	out := run(t, m, "p", "a", "get x")
	if out.Result.Value != nil || !out.Result.Reset || out.ResetReason != ReasonEvicted {
		t.Errorf("a: %+v, reason %q", out.Result, out.ResetReason)
	}
}

func TestLRUNeverEvictsRunning(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{MaxWorkspaces: 1}, f)
	done := startWait(t, m, f, "p", "busy", "x")
	run(t, m, "p", "other", "set x 1") // exceeds the cap rather than evict or refuse
	if f.liveCount() != 2 {
		t.Errorf("live = %d, want 2 (cap exceeded while the only other is busy)", f.liveCount())
	}
	f.release <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	run(t, m, "p", "third", "set x 1")
	if f.liveCount() != 1 {
		t.Errorf("live = %d, want 1 once idle ones can go", f.liveCount())
	}
}

func TestCreationLoopBoundsMemory(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{MaxWorkspaces: 4}, f)
	for range 500 {
		run(t, m, "p", "", "set x 1")
	}
	if f.maxLive > 4 {
		t.Errorf("max live runners = %d, want <= 4", f.maxLive)
	}
	m.mu.Lock()
	records := len(m.wss)
	m.mu.Unlock()
	if records > 4 {
		t.Errorf("records in memory = %d, want <= 4", records)
	}
	l := m.List("p")
	live := 0
	for _, in := range l {
		if in.Live {
			live++
		}
	}
	if len(l) != 500 || live != 4 {
		t.Errorf("List: %d workspaces, %d live; want 500, 4", len(l), live)
	}
}

func TestRestartRestoresState(t *testing.T) {
	dir := t.TempDir()
	f := newFakeFactory("javascript", "python")
	m := newTestManager(t, Config{DataDir: dir}, f)
	runLang(t, m, "p", "w", "javascript", "set x js")
	runLang(t, m, "p", "w", "python", "set x py")
	run(t, m, "p", "w", "write data.txt hello")
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.liveCount() != 0 {
		t.Errorf("Close left %d runners", f.liveCount())
	}

	m2 := newTestManager(t, Config{DataDir: dir}, f)
	l := m2.List("p")
	disk, err := guestfs.Usage(filepath.Join(dir, "p", "w")) // the quota's charge of data.txt
	if err != nil || disk <= 5 {
		t.Fatalf("Usage = %d, %v", disk, err)
	}
	if len(l) != 1 || l[0].ID != "w" || l[0].Live || !l[0].Hibernated || strings.Join(l[0].Languages, ",") != "javascript,python" ||
		l[0].DiskBytes != disk || l[0].StateBytes == 0 {
		t.Fatalf("List after restart = %+v", l)
	}
	for lang, want := range map[string]string{"javascript": "js", "python": "py"} {
		out := runLang(t, m2, "p", "w", lang, "get x")
		if value(out.Result) != want || out.Result.Status != StatusOK || out.Result.Reset || !out.Restored {
			t.Errorf("%s after restart: %+v", lang, out)
		}
	}
	if out := run(t, m2, "p", "w", "read data.txt"); value(out.Result) != "hello" {
		t.Errorf("file after restart: %s", value(out.Result))
	}

	// An execd that stops without saving (killed): its successor says so.
	m3 := newTestManager(t, Config{DataDir: dir}, f) // m2 still runs w's interpreters
	out := run(t, m3, "p", "w", "get x")
	if out.Result.Value != nil || out.Result.Status != StatusError || !out.Result.Reset || out.ResetReason != ReasonRestarted {
		t.Errorf("after a stop without saving: %+v %q", out.Result, out.ResetReason)
	}
}

func TestWorkspaceOfAnOlderExecdSaysRestarted(t *testing.T) {
	// A files directory without state is a workspace of an execd that kept
	// no images: each language's first run says its state is gone.
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "p", "old"), 0o700)
	os.WriteFile(filepath.Join(dir, "p", "old", "f"), []byte("x"), 0o600)
	m := newTestManager(t, Config{DataDir: dir}, newFakeFactory("javascript", "python"))
	for _, lang := range []string{"javascript", "python"} {
		if out := runLang(t, m, "p", "old", lang, "set a 1"); out.Result.Status != StatusReset || out.ResetReason != ReasonRestarted {
			t.Errorf("%s: %+v %q", lang, out.Result, out.ResetReason)
		}
		if out := runLang(t, m, "p", "old", lang, "set a 2"); out.Result.Reset {
			t.Errorf("%s, second run: %+v", lang, out.Result)
		}
	}
	// A new workspace, and a new language in a known one, are not resets.
	if out := runLang(t, m, "p", "new", "javascript", "set a 1"); out.Result.Reset {
		t.Errorf("new workspace: %+v", out.Result)
	}
	if out := runLang(t, m, "p", "new", "python", "set a 1"); out.Result.Reset {
		t.Errorf("new language: %+v", out.Result)
	}
}

func TestResetAndDelete(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{}, f)
	ctx := context.Background()
	wdir := filepath.Join(m.cfg.DataDir, "p", "w")
	run(t, m, "p", "w", "set x 1")
	run(t, m, "p", "w", "write f.txt 1")

	if err := m.Reset(ctx, "p", "w", false); err != nil {
		t.Fatal(err)
	}
	if f.liveCount() != 0 {
		t.Error("Reset kept the runner")
	}
	if _, err := os.Stat(filepath.Join(wdir, "f.txt")); err != nil {
		t.Error("Reset without files removed files")
	}
	if out := run(t, m, "p", "w", "get x"); out.Result.Value != nil {
		t.Error("state survived Reset")
	}
	if err := m.Reset(ctx, "p", "w", true); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(wdir); err != nil || len(ents) != 0 {
		t.Errorf("after Reset files: %v %v", ents, err)
	}
	run(t, m, "p", "w", "set x 1")
	if err := m.Delete(ctx, "p", "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(wdir); !os.IsNotExist(err) {
		t.Errorf("directory after Delete: %v", err)
	}
	if l := m.List("p"); len(l) != 0 {
		t.Errorf("List after Delete: %+v", l)
	}
	if err := m.Delete(ctx, "p", "w"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Delete: %v", err)
	}
	// A workspace made again after Delete is new, not reset.
	if out := run(t, m, "p", "w", "set x 1"); out.Result.Reset {
		t.Error("recreated workspace reported reset")
	}
	if err := m.Reset(ctx, "p", "nope", false); !errors.Is(err, ErrNotFound) {
		t.Errorf("Reset unknown: %v", err)
	}
	var we *Error
	if err := m.Delete(ctx, "p", "nope"); !errors.As(err, &we) || we.Msg != `workspace "nope" does not exist` {
		t.Errorf("Delete unknown: %v", err)
	}
}

func TestResetWaitsForRunningCall(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{}, f)
	first := startWait(t, m, f, "p", "w", "0")
	done := make(chan error, 1)
	go func() { done <- m.Reset(context.Background(), "p", "w", false) }()
	// Reset queues behind the running call; a cancelled Reset gives up.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Delete(ctx, "p", "w"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Delete: %v", err)
	}
	f.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if f.liveCount() != 0 {
		t.Error("runner alive after Reset")
	}
}

func TestStartFailure(t *testing.T) {
	f := newFakeFactory()
	f.newErr = errors.New("out of memory")
	m := newTestManager(t, Config{}, f)
	_, err := m.Run(context.Background(), Request{Principal: "p", Workspace: "w", Language: "js"})
	if !errors.Is(err, ErrStartFailed) || !strings.Contains(err.Error(), "out of memory") {
		t.Errorf("%v", err)
	}
	if len(m.wss) != 0 {
		t.Error("record kept after a failed start")
	}
}

func TestCloseIdempotent(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{IdleTTL: time.Hour}, f)
	run(t, m, "p", "a", "set x 1")
	run(t, m, "p", "b", "set x 1")
	for range 2 {
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if f.liveCount() != 0 {
		t.Errorf("live after Close = %d", f.liveCount())
	}
	if _, err := m.Run(context.Background(), Request{Principal: "p", Workspace: "a", Language: "js"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v", err)
	}
}

func TestCloseWaitsForRunning(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{}, f)
	first := startWait(t, m, f, "p", "w", "0")
	closed := make(chan error, 1)
	go func() { closed <- m.Close(context.Background()) }()
	f.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if f.liveCount() != 0 {
		t.Errorf("live after Close = %d", f.liveCount())
	}

	// With a deadline, Close gives up waiting and closes under the run.
	f2 := newFakeFactory()
	m2 := newTestManager(t, Config{}, f2)
	second := startWait(t, m2, f2, "p", "w", "1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m2.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close with an ended ctx: %v", err)
	}
	if f2.liveCount() != 0 {
		t.Errorf("live after forced Close = %d", f2.liveCount())
	}
	f2.release <- struct{}{}
	<-second
}

func TestQuotaThroughFSFactory(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{MaxDiskMiB: 1}, f)
	big := strings.Repeat("x", 600<<10)
	if out := run(t, m, "p", "w", "write a "+big); out.Result.Status != StatusOK {
		t.Fatalf("first write: %+v", out.Result.Stderr)
	}
	// A write past the quota is shortened to fit (a guest's libc then
	// retries the rest, which fails); a write with no room fails.
	run(t, m, "p", "w", "write b "+big+big)
	out := run(t, m, "p", "w", "write c "+big)
	if !out.DiskFull || out.DiskQuotaBytes != 1<<20 {
		t.Errorf("a write on the full quota: DiskFull %v, DiskQuotaBytes %d", out.DiskFull, out.DiskQuotaBytes)
	}
	if strings.Contains(out.Result.Stderr, "quota") {
		t.Errorf("the registry wrote words into stderr: %q", out.Result.Stderr)
	}
	if l := m.List("p"); len(l) != 1 || l[0].DiskBytes > 1<<20 {
		t.Errorf("List = %+v", l)
	}
	// Files: true gives the space back.
	if err := m.Reset(context.Background(), "p", "w", true); err != nil {
		t.Fatal(err)
	}
	if out := run(t, m, "p", "w", "write a "+big); out.Result.Status != StatusReset || out.Result.Stderr != "" {
		t.Errorf("write after reset files: %s %q", out.Result.Status, out.Result.Stderr)
	}
}

func TestIdleWorkspacesHoldFewDescriptors(t *testing.T) {
	m := newTestManager(t, Config{}, newFakeFactory("javascript", "python"))
	run(t, m, "p", "warm", "set x 1") // the data directory and log files settle
	base := openFDs(t)
	n := 2*IdleRootsKept + 50
	for i := range n {
		id := fmt.Sprintf("w%d", i)
		runLang(t, m, "p", id, "javascript", "write f.txt x")
		runLang(t, m, "p", id, "python", "set x 1")
	}
	// Other descriptors of the process may close meanwhile (an earlier
	// test's Manager finishing); at most the IdleRootsKept most recently
	// used idle workspaces hold one each.
	if got := openFDs(t) - base; got > IdleRootsKept {
		t.Errorf("%d idle live workspaces hold %d descriptors, want at most %d", n, got, IdleRootsKept)
	}
	if l := m.List("p"); len(l) != n+1 {
		t.Errorf("List: %d", len(l))
	}
	// The recently used ones are those: using them again opens nothing.
	before := openFDs(t)
	for i := n - IdleRootsKept/2; i < n; i++ {
		runLang(t, m, "p", fmt.Sprintf("w%d", i), "javascript", "write f.txt y")
	}
	if got := openFDs(t) - before; got > 0 {
		t.Errorf("using recently used workspaces again opened %d descriptors", got)
	}
}

func TestOutOfDescriptorsIsSaidClearly(t *testing.T) {
	core, logs := observer.New(zapcore.ErrorLevel)
	m, err := NewManager(Config{DataDir: t.TempDir()}, newFakeFactory(), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	<-m.sweepDone // its directory reads hold descriptors for a moment
	run(t, m, "p", "warm", "set x 1")
	// Use up the process's descriptors (under a lowered limit).
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = uint64(openFDs(t) + 50)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var hog []*os.File
	// fill opens descriptors until none is left. It runs before each try:
	// another part of the process (a file an earlier test dropped, closed
	// by its finalizer) may free one meanwhile.
	fill := func() {
		for {
			f, err := os.Open(os.DevNull)
			if err != nil {
				return
			}
			hog = append(hog, f)
		}
	}
	// A workspace idle for long has no root open (the recent ones keep
	// theirs), so each try uses a new one. A try that runs found a
	// descriptor freed after fill; it does not count, but twenty such in a
	// row mean that a new workspace no longer needs one.
	var refused []string
	ran := 0
	var errs []error
	for try := 0; len(errs) < 2; try++ {
		if try == 20 {
			t.Fatalf("20 new workspaces ran with no descriptor left; %d refused", len(errs))
		}
		fill()
		id := fmt.Sprintf("cold%d", try)
		_, err := m.Run(context.Background(), Request{Principal: "p", Workspace: id, Language: "js", Code: "set y 1"})
		if err == nil {
			ran++
			continue
		}
		errs = append(errs, err)
		refused = append(refused, id)
	}
	for _, f := range hog {
		f.Close()
	}
	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	for _, err := range errs {
		var we *Error
		if !errors.As(err, &we) || we.Code != Exhausted || !strings.Contains(we.Msg, "run out of file descriptors") || !strings.Contains(we.Msg, "did not run") {
			t.Fatalf("out of descriptors: %v", err)
		}
	}
	if h := m.Health(); h.FDExhaustions != 2 || h.LastFDExhaustion.IsZero() {
		t.Errorf("Health = %+v", h)
	}
	if n := logs.FilterMessageSnippet("out of file descriptors").Len(); n != 1 {
		t.Errorf("%d log lines (one, then quiet for a while): %v", n, logs.All())
	}
	// With descriptors back, the workspace works again, state intact.
	if out := run(t, m, "p", "warm", "get x"); value(out.Result) != "1" || out.Result.Reset {
		t.Errorf("after descriptors came back: %+v", out)
	}
	for _, id := range refused {
		if out := run(t, m, "p", id, "set y 1"); out.Result.Status != StatusOK {
			t.Errorf("the refused workspace %s after descriptors came back: %+v", id, out)
		}
	}
	if ran > 0 {
		t.Logf("%d tries ran on a descriptor freed meanwhile", ran)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("counting descriptors: %v", err)
	}
	return len(ents)
}
