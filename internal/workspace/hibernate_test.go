package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// twoInterpreters is a Manager with the daemon's default HibernateAfter
// (5 minutes) and one workspace that ran "set x js" in JavaScript and "set x
// py" in Python. Call it inside the test's bubble.
func twoInterpreters(t *testing.T) (*fakeFactory, *Manager) {
	f := newFakeFactory("javascript", "python")
	m, err := NewManager(Config{DataDir: t.TempDir(), HibernateAfter: 5 * time.Minute}, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	runLang(t, m, "p", "w", "javascript", "set x js")
	runLang(t, m, "p", "w", "python", "set x py")
	return f, m
}

func TestHibernateAfterIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, m := twoInterpreters(t)
		time.Sleep(4 * time.Minute)
		synctest.Wait()
		if f.liveCount() != 2 {
			t.Fatalf("hibernated before hibernate_after: live %d", f.liveCount())
		}
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		if f.liveCount() != 0 {
			t.Fatalf("live after hibernate_after: %d", f.liveCount())
		}
		if len(m.wss) != 0 {
			t.Errorf("records kept after hibernation: %d", len(m.wss))
		}
		l := m.List("p")
		if len(l) != 1 || l[0].Live || !l[0].Hibernated || len(l[0].Interpreters) != 2 || l[0].Interpreters[0].ImageBytes == 0 {
			t.Errorf("List = %+v", l)
		}
		for lang, want := range map[string]string{"javascript": "js", "python": "py"} {
			out := runLang(t, m, "p", "w", lang, "get x")
			if value(out.Result) != want || out.Result.Status != StatusOK || out.Result.Reset || !out.Restored {
				t.Errorf("%s after hibernation: %+v", lang, out)
			}
		}
	})
}

func TestHibernationKeepsWhatCannotBeSaved(t *testing.T) {
	// A guest holding a file open cannot be imaged: it stays live (and
	// keeps its state) rather than lose it to idleness.
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFactory()
		m, _ := NewManager(Config{DataDir: t.TempDir(), HibernateAfter: time.Minute}, f, nil)
		defer m.Close(context.Background())
		run(t, m, "p", "w", "set x 1")
		run(t, m, "p", "w", "open log.txt")
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if f.liveCount() != 1 {
			t.Fatalf("live = %d: a workspace with an open file was closed", f.liveCount())
		}
		if out := run(t, m, "p", "w", "get x"); value(out.Result) != "1" || out.Result.Reset {
			t.Errorf("%+v", out)
		}
		run(t, m, "p", "w", "close")
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if f.liveCount() != 0 {
			t.Fatalf("live = %d after the file was closed", f.liveCount())
		}
		if out := run(t, m, "p", "w", "get x"); value(out.Result) != "1" || out.Result.Reset || !out.Restored {
			t.Errorf("%+v", out)
		}
	})
}

func TestIdleTTLDropsImages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFactory()
		dir := t.TempDir()
		m, _ := NewManager(Config{DataDir: dir, HibernateAfter: time.Minute, IdleTTL: 30 * time.Minute}, f, nil)
		defer m.Close(context.Background())
		run(t, m, "p", "w", "set x 1")
		run(t, m, "p", "w", "write keep.txt yes")
		img := filepath.Join(dir, "p", stateDirName, "w", "javascript.img")
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if _, err := os.Stat(img); err != nil {
			t.Fatalf("not hibernated: %v", err)
		}
		time.Sleep(40 * time.Minute)
		synctest.Wait()
		if _, err := os.Stat(img); !os.IsNotExist(err) {
			t.Fatalf("image after idle_ttl: %v", err)
		}
		out := run(t, m, "p", "w", "get x")
		if out.Result.Value != nil || out.ResetReason != ReasonIdleTTL || !out.Result.Reset {
			t.Errorf("%+v %q", out.Result, out.ResetReason)
		}
		if out := run(t, m, "p", "w", "read keep.txt"); value(out.Result) != "yes" {
			t.Errorf("files after idle_ttl: %s", value(out.Result))
		}
	})
}

func TestImagesThatCannotBeUsed(t *testing.T) {
	// Each damaged image gives a fresh interpreter that says why, the files
	// kept, and one warning; never a failed call.
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, f *fakeFactory, img string)
		reason ResetReason
	}{
		{"stale", func(t *testing.T, f *fakeFactory, img string) { f.build = "2" }, ReasonImageStale},
		{"truncated", func(t *testing.T, f *fakeFactory, img string) {
			b, _ := os.ReadFile(img)
			os.WriteFile(img, b[:len(b)/2], 0o600)
		}, ReasonImageCorrupt},
		{"flipped byte", func(t *testing.T, f *fakeFactory, img string) {
			b, _ := os.ReadFile(img)
			b[len(b)/2] ^= 0x40
			os.WriteFile(img, b, 0o600)
		}, ReasonImageCorrupt},
		{"damaged binding", func(t *testing.T, f *fakeFactory, img string) {
			b, _ := os.ReadFile(img)
			b[len(b)-len(imageFileMagic)-3] ^= 0x01 // the language's last byte
			os.WriteFile(img, b, 0o600)
		}, ReasonImageCorrupt},
		{"foreign header", func(t *testing.T, f *fakeFactory, img string) {
			os.WriteFile(img, []byte("\x7fELF\x02\x01\x01 not an image at all"), 0o600)
		}, ReasonImageCorrupt},
		{"empty", func(t *testing.T, f *fakeFactory, img string) { os.WriteFile(img, nil, 0o600) }, ReasonImageCorrupt},
		{"missing", func(t *testing.T, f *fakeFactory, img string) { os.Remove(img) }, ReasonImageCorrupt},
		{"damaged note", func(t *testing.T, f *fakeFactory, img string) {
			os.WriteFile(filepath.Join(filepath.Dir(img), "javascript.note"), []byte("\x00garbage"), 0o600)
		}, ReasonImageCorrupt},
		// A FIFO is read without waiting for a writer that never comes.
		{"a FIFO for an image", func(t *testing.T, f *fakeFactory, img string) { mkfifo(t, img) }, ReasonImageCorrupt},
		{"a FIFO for a note", func(t *testing.T, f *fakeFactory, img string) {
			mkfifo(t, filepath.Join(filepath.Dir(img), "javascript.note"))
		}, ReasonImageCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			f := newFakeFactory()
			m := newTestManager(t, Config{DataDir: dir}, f)
			run(t, m, "p", "w", "set x 1")
			run(t, m, "p", "w", "write keep.txt yes")
			m.Close(context.Background())
			tc.damage(t, f, filepath.Join(dir, "p", stateDirName, "w", "javascript.img"))

			core, logs := observer.New(zapcore.WarnLevel)
			m2, err := NewManager(Config{DataDir: dir}, f, zap.New(core))
			if err != nil {
				t.Fatal(err)
			}
			defer m2.Close(context.Background())
			out := run(t, m2, "p", "w", "get x")
			if out.Result.Value != nil || !out.Result.Reset || out.ResetReason != tc.reason || out.Result.Status != StatusError {
				t.Errorf("%+v reason %q, want reset %q", out.Result, out.ResetReason, tc.reason)
			}
			if out.ResetReason.Sentence() == "" {
				t.Error("no sentence for the reason")
			}
			if out := run(t, m2, "p", "w", "read keep.txt"); value(out.Result) != "yes" {
				t.Errorf("files: %s", value(out.Result))
			}
			if out := run(t, m2, "p", "w", "set y 1"); out.Result.Reset {
				t.Errorf("second run: %+v", out.Result)
			}
			if n := logs.Len(); !strings.Contains(tc.name, "note") && n != 1 { // a note is read without a logger
				t.Errorf("%d warning lines, want 1: %v", n, logs.All())
			}
		})
	}
}

func TestHammerHibernationKeepsEveryCount(t *testing.T) {
	// Many calls over more workspaces than may be live: LRU hibernation
	// churns, and no state is ever lost or reported reset.
	f := newFakeFactory()
	m := newTestManager(t, Config{MaxConcurrentRuns: 3, MaxWorkspaces: 3}, f)
	const workspaces, goroutines, rounds = 8, 12, 30
	var mu sync.Mutex
	want := map[string]int{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				id := fmt.Sprintf("w%d", (g*7+i)%workspaces)
				key := fmt.Sprintf("g%d", g)
				out, err := m.Run(context.Background(), Request{Principal: "p", Workspace: id, Language: "js", Code: "get " + key})
				if err != nil {
					t.Errorf("%v: %v", err, errors.Unwrap(err))
					return
				}
				if out.Result.Reset {
					t.Errorf("%s: reset %q", id, out.ResetReason)
				}
				n := 0
				if out.Result.Value != nil {
					n, _ = strconv.Atoi(*out.Result.Value)
				}
				if _, err := m.Run(context.Background(), Request{Principal: "p", Workspace: id, Language: "js", Code: fmt.Sprintf("set %s %d", key, n+1)}); err != nil {
					t.Error(err)
				}
				mu.Lock()
				want[id+"/"+key]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if f.restored == 0 {
		t.Error("nothing was ever hibernated and restored")
	}
	for k, n := range want {
		id, key := k[:len("w0")], k[len("w0/"):]
		out := run(t, m, "p", id, "get "+key)
		if value(out.Result) != strconv.Itoa(n) {
			t.Errorf("%s = %s, want %d", k, value(out.Result), n)
		}
	}
	// Workspaces whose turn is held keep their runners, so the cap can be
	// exceeded while calls queue; once they are idle the shedder brings it
	// back (in the background, after the call that ended above the cap).
	for deadline := time.Now().Add(10 * time.Second); f.liveCount() > 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if f.liveCount() > 3 {
		t.Errorf("live = %d after the calls, cap 3", f.liveCount())
	}
}

func TestCloseHibernatesEveryLiveWorkspace(t *testing.T) {
	dir := t.TempDir()
	f := newFakeFactory()
	m := newTestManager(t, Config{DataDir: dir}, f)
	for i := range 10 {
		run(t, m, "p", fmt.Sprintf("w%d", i), fmt.Sprintf("set x %d", i))
	}
	busy := startWait(t, m, f, "p", "busy", "b")
	closed := make(chan error, 1)
	go func() { closed <- m.Close(context.Background()) }()
	// The idle ones are saved while the busy one runs on.
	deadline := time.Now().Add(10 * time.Second)
	var unsaved []string
	for i := range 10 {
		img := filepath.Join(dir, "p", stateDirName, fmt.Sprintf("w%d", i), "javascript.img")
		for {
			if _, err := os.Stat(img); err == nil {
				break
			}
			if time.Now().After(deadline) {
				unsaved = append(unsaved, fmt.Sprintf("w%d", i))
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	f.release <- struct{}{}
	if unsaved != nil {
		t.Fatalf("no image 10 s after Close began, while a call ran on, for %v", unsaved)
	}
	if err := <-busy; err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if f.liveCount() != 0 {
		t.Errorf("live after Close = %d", f.liveCount())
	}
	m2 := newTestManager(t, Config{DataDir: dir}, f)
	for i := range 10 {
		if out := run(t, m2, "p", fmt.Sprintf("w%d", i), "get x"); value(out.Result) != strconv.Itoa(i) || out.Result.Reset {
			t.Errorf("w%d: %+v", i, out)
		}
	}
	if out := run(t, m2, "p", "busy", "get x"); out.Result.Reset {
		t.Errorf("the workspace busy at Close: %+v %q", out.Result, out.ResetReason)
	}
}

func TestMemoryBudgetHibernatesIdle(t *testing.T) {
	f := newFakeFactory() // each runner holds 1 MiB
	m := newTestManager(t, Config{MemoryBudget: 3 << 20}, f)
	for i := range 6 {
		run(t, m, "p", fmt.Sprintf("w%d", i), "set x 1")
		if h := m.Health(); h.MemoryBytes > 3<<20 {
			t.Fatalf("after %d workspaces: %d bytes live, budget 3 MiB", i+1, h.MemoryBytes)
		}
	}
	if f.liveCount() != 3 {
		t.Errorf("live = %d, want 3", f.liveCount())
	}
	// Reclaim frees on demand, least recently used first.
	if freed := m.Reclaim(2 << 20); freed != 2<<20 {
		t.Errorf("Reclaim freed %d", freed)
	}
	if f.liveCount() != 1 {
		t.Errorf("live after Reclaim = %d", f.liveCount())
	}
	if out := run(t, m, "p", "w5", "get x"); !out.Result.Reset && out.Restored {
		t.Errorf("the most recent workspace was the one kept, yet it was restored: %+v", out)
	}
	if out := run(t, m, "p", "w0", "get x"); value(out.Result) != "1" || out.Result.Reset {
		t.Errorf("w0: %+v", out)
	}
	l := m.List("p")
	var mem int64
	for _, in := range l {
		mem += in.MemoryBytes
	}
	if mem == 0 || mem > 3<<20 {
		t.Errorf("List reports %d bytes in memory", mem)
	}
	// The daemon's figure is the sum of its workspaces', through
	// hibernation, restores, resets and deletes.
	if err := m.Reset(context.Background(), "p", "w0", false); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(context.Background(), "p", "w5"); err != nil {
		t.Fatal(err)
	}
	run(t, m, "p", "w1", "get x")
	mem = 0
	for _, in := range m.List("p") {
		mem += in.MemoryBytes
	}
	if h := m.Health(); h.MemoryBytes != mem || mem != int64(f.liveCount())<<20 {
		t.Errorf("Health says %d bytes, List %d, %d runners live", h.MemoryBytes, mem, f.liveCount())
	}
}

func TestCompilingGuestIsReported(t *testing.T) {
	f := newFakeFactory("javascript", "python")
	f.compiling = map[string]bool{"python": true}
	m := newTestManager(t, Config{}, f)
	s := newSink()
	if _, err := m.Run(context.Background(), Request{Principal: "p", Workspace: "w", Language: "python", Code: "set a 1", Sink: s}); err != nil {
		t.Fatal(err)
	}
	if msgs := s.messages(); len(msgs) != 1 || msgs[0] != "waiting for the python guest to compile" {
		t.Errorf("progress: %q", msgs)
	}
	s2 := newSink()
	m.Run(context.Background(), Request{Principal: "p", Workspace: "w", Language: "javascript", Code: "set a 1", Sink: s2})
	if msgs := s2.messages(); len(msgs) != 0 {
		t.Errorf("progress for a compiled guest: %q", msgs)
	}
}

func TestFullMemoryBudgetHibernatesToMakeRoom(t *testing.T) {
	// The sandbox refuses a new interpreter for want of budget: idle
	// workspaces are hibernated until it fits, and the call runs.
	f := newFakeFactory()
	f.maxMem = 2
	m := newTestManager(t, Config{MaxConcurrentRuns: 4}, f)
	for i := range 5 {
		if out := run(t, m, "p", fmt.Sprintf("w%d", i), fmt.Sprintf("set x %d", i)); out.Result.Status != StatusOK {
			t.Fatalf("w%d: %+v", i, out)
		}
	}
	for i := range 5 {
		if out := run(t, m, "p", fmt.Sprintf("w%d", i), "get x"); value(out.Result) != strconv.Itoa(i) || out.Result.Reset {
			t.Errorf("w%d: %+v", i, out)
		}
	}
	// When nothing idle is left, the refusal is the caller's.
	busy := startWait(t, m, f, "p", "w0", "b")
	busy2 := startWait(t, m, f, "p", "w1", "b")
	_, err := m.Run(context.Background(), Request{Principal: "p", Workspace: "w9", Language: "js", Code: "set x 1"})
	if !errors.Is(err, ErrStartFailed) || !errors.Is(err, ErrMemoryBudget) {
		t.Errorf("with every live workspace busy: %v", err)
	}
	f.release <- struct{}{}
	f.release <- struct{}{}
	<-busy
	<-busy2
}

func TestHibernateNow(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{}, f)
	ctx := context.Background()
	run(t, m, "p", "w", "set x 1")
	if err := m.Hibernate(ctx, "p", "w"); err != nil {
		t.Fatal(err)
	}
	if f.liveCount() != 0 {
		t.Errorf("live = %d", f.liveCount())
	}
	if out := run(t, m, "p", "w", "get x"); value(out.Result) != "1" || !out.Restored {
		t.Errorf("%+v", out)
	}
	run(t, m, "p", "w", "open f")
	if err := m.Hibernate(ctx, "p", "w"); !errors.Is(err, ErrNotSaveable) {
		t.Errorf("with an open file: %v", err)
	}
	if out := run(t, m, "p", "w", "get x"); value(out.Result) != "1" || out.Restored {
		t.Errorf("kept live: %+v", out)
	}
	if err := m.Hibernate(ctx, "q", "w"); !errors.Is(err, ErrNotFound) {
		t.Errorf("another principal: %v", err)
	}
}

func TestCapHoldsAgainOnceBusyWorkspacesAreIdle(t *testing.T) {
	// Two calls run at once under max_workspaces = 1: the second interpreter
	// cannot make room (the first workspace is busy), so the cap is exceeded
	// while both run. Once they end, the idle one is hibernated without
	// waiting for a third interpreter, and its state comes back.
	f := newFakeFactory()
	m := newTestManager(t, Config{MaxConcurrentRuns: 2, MaxWorkspaces: 1}, f)
	run(t, m, "p", "a", "set k a")
	done := make(chan error, 2)
	for _, id := range []string{"a", "b"} {
		go func() {
			_, err := m.Run(context.Background(), Request{Principal: "p", Workspace: id, Language: "js", Code: "wait"})
			done <- err
		}()
	}
	<-f.started
	<-f.started
	if n := f.liveCount(); n != 2 {
		t.Fatalf("live = %d while both run, want 2 (the cap is exceeded while every live workspace is busy)", n)
	}
	f.release <- struct{}{}
	f.release <- struct{}{}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); f.liveCount() > 1 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := f.liveCount(); n > 1 {
		t.Fatalf("live = %d after both calls ended, cap 1", n)
	}
	if out := run(t, m, "p", "a", "get k"); value(out.Result) != "a" || out.Result.Reset {
		t.Fatalf("workspace a after hibernation: %q reset=%v", value(out.Result), out.Result.Reset)
	}
}

func (f *fakeFactory) trimCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.trims
}

// TestTrimAfterIdle: with the daemon's defaults (hibernation after five
// minutes), a workspace's live interpreters are trimmed once they have
// been idle for TrimAfter, once per idle spell, and keep their state.
func TestTrimAfterIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, m := twoInterpreters(t)
		time.Sleep(TrimAfter * 2 / 3)
		synctest.Wait()
		if n := f.trimCount(); n != 0 {
			t.Fatalf("%d trims before TrimAfter", n)
		}
		time.Sleep(TrimAfter)
		synctest.Wait()
		if n := f.trimCount(); n != 2 {
			t.Fatalf("%d trims after TrimAfter, want one per interpreter", n)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if n, live := f.trimCount(), f.liveCount(); n != 2 || live != 2 {
			t.Fatalf("idle on: %d trims (want 2: nothing ran), %d live", n, live)
		}
		if out := runLang(t, m, "p", "w", "javascript", "get x"); value(out.Result) != "js" || out.Result.Reset || out.Restored {
			t.Fatalf("after the trim: %+v", out)
		}
		time.Sleep(TrimAfter * 3 / 2)
		synctest.Wait()
		if n := f.trimCount(); n != 3 {
			t.Fatalf("%d trims, want 3: the interpreter that ran again is trimmed again", n)
		}
	})
}

// TestTrimWithoutHibernation: trimming needs neither HibernateAfter nor
// IdleTTL, and a call that runs longer than TrimAfter is not trimmed under
// its feet; it is trimmed once idle after it.
func TestTrimWithoutHibernation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeFactory()
		m, err := NewManager(Config{DataDir: t.TempDir()}, f, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(context.Background())
		run(t, m, "p", "w", "set x 1")
		done := startWait(t, m, f, "p", "w", "long")
		time.Sleep(3 * TrimAfter)
		synctest.Wait()
		if n := f.trimCount(); n != 0 {
			t.Fatalf("%d trims during the call", n)
		}
		f.release <- struct{}{}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		time.Sleep(TrimAfter * 3 / 2)
		synctest.Wait()
		if n := f.trimCount(); n != 1 {
			t.Fatalf("%d trims after the call, want 1", n)
		}
	})
}

// mkfifo replaces p by a named pipe that nothing writes to.
func mkfifo(t *testing.T, p string) {
	t.Helper()
	os.Remove(p)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A principal's live interpreters hold at most its share of the memory
// budget: its own idle workspaces are hibernated to make room, and when
// all of them are busy its next interpreter is refused, naming the key,
// while another principal's calls go on.
func TestPrincipalShareOfMemory(t *testing.T) {
	f := newFakeFactory() // each runner holds 1 MiB
	m := newTestManager(t, Config{MemoryBudget: 64 << 20, MaxMemoryPerPrincipal: 2 << 20, MaxConcurrentRuns: 8}, f)
	run(t, m, "alice", "w0", "set x 1")
	done := make(chan Outcome, 2)
	for _, id := range []string{"w1", "w2"} {
		go func() {
			out, _ := m.Run(context.Background(), Request{Principal: "alice", Workspace: id, Language: "javascript", Code: "wait"})
			done <- out
		}()
		<-f.started
	}
	_, err := m.Run(context.Background(), Request{Principal: "alice", Workspace: "w3", Language: "javascript", Code: "set y 1"})
	var we *Error
	if !errors.As(err, &we) || we.Code != LimitReached || !strings.Contains(we.Msg, "limits.max_memory_per_principal_mib") {
		t.Fatalf("alice's third interpreter beyond her share: %v", err)
	}
	for _, id := range []string{"b0", "b1", "b2"} {
		if out := run(t, m, "bob", id, "set x 1"); out.Result.Status != StatusOK {
			t.Fatalf("bob's %s while alice's share is busy: %+v", id, out.Result)
		}
	}
	f.release <- struct{}{}
	f.release <- struct{}{}
	<-done
	<-done
	if out := run(t, m, "alice", "w3", "set y 1"); out.Result.Status != StatusOK {
		t.Fatalf("alice's w3 once her runs ended: %+v", out.Result)
	}
	// w0 was hibernated to make room within her share, not lost.
	if out := run(t, m, "alice", "w0", "get x"); value(out.Result) != "1" || out.Result.Reset {
		t.Fatalf("alice's w0: %+v", out)
	}
}
