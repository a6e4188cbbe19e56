package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"execd/internal/guestfs"
)

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

func TestNewPrincipalIsNeverTakenForAnOlderExecd(t *testing.T) {
	// A principal's first workspaces, side by side: one marks its
	// interpreter live (its state directory is made then), another makes
	// its files directory (the state root first). The principal directory
	// the first makes must never be seen without its state root, which
	// reads as an older execd's.
	dir := t.TempDir()
	langs := []string{"javascript"}
	const principals = 300
	var wg sync.WaitGroup
	errs := make(chan error, 2*principals)
	for i := range principals {
		pdir := filepath.Join(dir, fmt.Sprintf("p%d", i))
		state := filepath.Join(pdir, stateDirName)
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs <- writeNote(filepath.Join(state, "a"), "javascript", noteLive)
		}()
		go func() {
			defer wg.Done()
			errs <- makeFilesDir(&spareDirs{}, filepath.Join(pdir, "b"), filepath.Join(state, "b"), langs)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range principals {
		state := filepath.Join(dir, fmt.Sprintf("p%d", i), stateDirName)
		if n := readNote(filepath.Join(state, "a"), "javascript"); n != noteLive {
			t.Errorf("p%d/a: note %q, want live", i, n)
		}
		if n := readNote(filepath.Join(state, "b"), "javascript"); n != noteNone {
			t.Errorf("p%d/b: note %q, want none", i, n)
		}
	}
}
