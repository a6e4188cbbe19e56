package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// journals lists the live journals in dir.
func journals(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, journalPrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A Manager that ends without Close (its journal closed as a SIGKILL closes
// it, nothing saved) leaves a journal; the next Manager's first run of each
// interpreter it marked says restarted, of a workspace deleted meanwhile
// and of a language never started, not.
func TestJournalOfAnEarlierProcess(t *testing.T) {
	dir := t.TempDir()
	f := newFakeFactory("javascript", "python")
	m1 := newTestManager(t, Config{DataDir: dir}, f)
	run(t, m1, "p", "a", "set x 1")
	runLang(t, m1, "p", "b", "python", "set x 1")
	run(t, m1, "p", "gone", "set x 1")
	if err := m1.Delete(t.Context(), "p", "gone"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(dir, "p", stateDirName, "a"), filepath.Join(dir, "p", "a")} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s of a new workspace: %v; want none until something is saved or written", d, err)
		}
	}
	m1.journal.f.Close() // the process is gone: its flock with it
	j := journals(t, dir)
	if len(j) != 1 {
		t.Fatalf("journals = %v; want the first process's", j)
	}

	m2 := newTestManager(t, Config{DataDir: dir}, f)
	for _, c := range []struct{ id, lang string }{{"a", "javascript"}, {"b", "python"}} {
		out := runLang(t, m2, "p", c.id, c.lang, "get x")
		if !out.Result.Reset || out.ResetReason != ReasonRestarted || out.Result.Value != nil {
			t.Errorf("%s/%s after the first process died: %+v %q; want reset, restarted", c.id, c.lang, out.Result, out.ResetReason)
		}
		if out := runLang(t, m2, "p", c.id, c.lang, "get x"); out.Result.Reset {
			t.Errorf("%s/%s, second run: %+v", c.id, c.lang, out.Result)
		}
	}
	if out := runLang(t, m2, "p", "a", "python", "set y 1"); out.Result.Reset {
		t.Errorf("a language the first process never started: %+v", out.Result)
	}
	if out := run(t, m2, "p", "gone", "get x"); out.Result.Reset {
		t.Errorf("a workspace deleted before the first process died: %+v", out.Result)
	}
	if left := journals(t, dir); len(left) != 1 || left[0] == j[0] {
		t.Errorf("journals = %v; want only the second process's (the first compacted)", left)
	}
}

// A journal's lines are read up to its last newline: a torn last line (its
// execd died while writing it, before the run it marks) and lines that are
// not records mark nothing; a later "-" unmarks a workspace.
func TestJournalTornAndDamagedLines(t *testing.T) {
	dir := t.TempDir()
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		if err := os.MkdirAll(filepath.Join(dir, "p", id), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "p", stateDirName), 0o700); err != nil {
		t.Fatal(err)
	}
	body := "+ p a javascript\n" +
		"+ p b javascript\n- p b\n" +
		"+ p ../x javascript\n" + // not an id
		"garbage line\n" +
		"+ p e javascript\n- p e\n+ p e javascript\n" + // deleted, then new again: live
		"+ p d javascript\n" +
		"+ p c javas" // torn
	if err := os.WriteFile(filepath.Join(dir, journalPrefix+"1.1"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	m := newTestManager(t, Config{DataDir: dir}, newFakeFactory("javascript"))
	for id, want := range map[string]bool{"a": true, "b": false, "c": false, "d": true, "e": true} {
		out := run(t, m, "p", id, "set x 1")
		if out.Result.Reset != want || (want && out.ResetReason != ReasonRestarted) {
			t.Errorf("%s: reset %v (%q); want %v", id, out.Result.Reset, out.ResetReason, want)
		}
	}
	for _, p := range journals(t, dir) {
		if strings.HasSuffix(p, journalPrefix+"1.1") {
			t.Error("the compacted journal is still there")
		}
	}
}

// The journal of a running execd (another instance on the same data
// directory holds its flock) is neither read nor removed.
func TestJournalOfARunningExecdIsLeftAlone(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"a", stateDirName} {
		if err := os.MkdirAll(filepath.Join(dir, "p", d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, journalPrefix+"1.2")
	if err := os.WriteFile(path, []byte("+ p a javascript\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	m := newTestManager(t, Config{DataDir: dir}, newFakeFactory("javascript"))
	if out := run(t, m, "p", "a", "set x 1"); out.Result.Reset {
		t.Errorf("a workspace of a running execd: %+v %q", out.Result, out.ResetReason)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("a running execd's journal: %v", err)
	}
}

// A Manager that saved everything at Close leaves no journal behind.
func TestJournalRemovedAfterACleanClose(t *testing.T) {
	dir := t.TempDir()
	m, err := NewManager(Config{DataDir: dir}, newFakeFactory("javascript"), nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, m, "p", "a", "set x 1")
	if err := m.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if j := journals(t, dir); len(j) != 0 {
		t.Errorf("journals after a clean Close: %v", j)
	}
	m2 := newTestManager(t, Config{DataDir: dir}, newFakeFactory("javascript"))
	if out := run(t, m2, "p", "a", "get x"); out.Result.Reset || value(out.Result) != "1" {
		t.Errorf("after a clean Close: %+v", out)
	}
}
