package workspace

import (
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
)

// spareDir is the Manager's pool directory.
func spareDir(t *testing.T, m *Manager) string {
	t.Helper()
	if m.spares.dir == "" {
		t.Fatal("the Manager has no spare directories")
	}
	return m.spares.dir
}

// waitSpares waits (10 s at most) until the pool holds n directories, and
// returns them.
func waitSpares(t *testing.T, m *Manager, n int) []os.FileInfo {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ents, err := os.ReadDir(spareDir(t, m))
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) == n {
			infos := make([]os.FileInfo, len(ents))
			for i, e := range ents {
				if infos[i], err = e.Info(); err != nil {
					t.Fatal(err)
				}
			}
			return infos
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool holds %d directories after 10 s; want %d", len(ents), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Workspaces get the spare directories as their files directories at
// their first write (the same inodes, 0700, holding only what was
// written), the principal's first included; the pool is made full again,
// and nothing of it shows as a workspace.
func TestSpareDirsBecomeFilesDirectories(t *testing.T) {
	dir := t.TempDir()
	m := newTestManager(t, Config{DataDir: dir}, newFakeFactory("javascript"))
	for i := range SpareDirs {
		spares := waitSpares(t, m, SpareDirs)
		id := "w" + string(rune('0'+i))
		run(t, m, "p", id, "set x 1")
		if exists(filepath.Join(dir, "p", id)) {
			t.Fatalf("%s has a files directory before it wrote anything", id)
		}
		if out := run(t, m, "p", id, "write a.txt x"); out.Result.Reset || out.Result.Status != StatusOK {
			t.Fatalf("%s: %+v", id, out.Result)
		}
		st, err := os.Lstat(filepath.Join(dir, "p", id))
		if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
			t.Fatalf("%s's files directory: %v %v; want a 0700 directory", id, st, err)
		}
		found := false
		for _, s := range spares {
			found = found || os.SameFile(s, st)
		}
		if !found {
			t.Errorf("%s's files directory is not one of the spares made before", id)
		}
		if ents, _ := os.ReadDir(filepath.Join(dir, "p", id)); len(ents) != 1 || ents[0].Name() != "a.txt" {
			t.Errorf("%s's files directory holds %v; want a.txt only", id, ents)
		}
	}
	waitSpares(t, m, SpareDirs)
	var ids []string
	for _, in := range m.List("p") {
		ids = append(ids, in.ID)
	}
	sort.Strings(ids)
	if len(ids) != SpareDirs || ids[0] != "w0" {
		t.Errorf("List = %v; want the %d workspaces and nothing else", ids, SpareDirs)
	}
	if all := m.ListAll(); len(all) != SpareDirs {
		t.Errorf("ListAll has %d workspaces; want %d (no spares)", len(all), SpareDirs)
	}
}

// A workspace whose directory is there already keeps it, and the spare
// that was tried stays in the pool; a spare removed from under the pool,
// or replaced by a file or a link, costs a new workspace nothing but the
// mkdir it makes instead.
func TestSpareDirsThatCannotServe(t *testing.T) {
	dir := t.TempDir()
	f := newFakeFactory("javascript")
	m1 := newTestManager(t, Config{DataDir: dir}, f)
	run(t, m1, "p", "old", "write a.txt hello")
	if err := m1.Close(t.Context()); err != nil {
		t.Fatal(err)
	}

	m := newTestManager(t, Config{DataDir: dir}, f)
	before := waitSpares(t, m, SpareDirs)
	if out := run(t, m, "p", "old", "set y 1"); out.Result.Status != StatusOK {
		t.Errorf("a workspace of an earlier Manager: %+v", out.Result)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "p", "old", "a.txt")); err != nil || string(b) != "hello" {
		t.Errorf("its file: %q %v; want it kept", b, err)
	}
	after := waitSpares(t, m, SpareDirs)
	for i := range before {
		if !os.SameFile(before[i], after[i]) {
			t.Errorf("spare %s changed: an existing workspace took it", before[i].Name())
		}
	}

	// Replace every spare: one removed, one a file, one a link out.
	outside := t.TempDir()
	pool := spareDir(t, m)
	m.spares.mu.Lock()
	names := append([]string(nil), m.spares.ready...)
	m.spares.mu.Unlock()
	for i, name := range names {
		p := filepath.Join(pool, name)
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		switch i % 3 {
		case 1:
			if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		case 2:
			if err := os.Symlink(outside, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range names {
		id := "n" + string(rune('a'+i))
		if out := run(t, m, "p", id, "write b.txt x"); out.Result.Status != StatusOK {
			t.Fatalf("%s: %+v", id, out.Result)
		}
		st, err := os.Lstat(filepath.Join(dir, "p", id))
		if err != nil || !st.IsDir() {
			t.Fatalf("%s's files directory: %v %v; want a directory", id, st, err)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("a link planted as a spare led a workspace's files outside: %d entries there", len(ents))
	}
	for _, st := range waitSpares(t, m, SpareDirs) {
		if !st.IsDir() {
			t.Errorf("the pool, made full again, holds %s (%v); want directories only", st.Name(), st.Mode())
		}
	}
}

// Close removes the pool. A Manager that died (its journal's flock gone
// with it) leaves its pool, which the next Manager removes when it
// compacts that journal; a pool with no journal at all is removed too; a
// running Manager's pool is left alone.
func TestSpareDirsOfAManagerThatIsGone(t *testing.T) {
	dir := t.TempDir()
	f := newFakeFactory("javascript")
	m1 := newTestManager(t, Config{DataDir: dir}, f)
	waitSpares(t, m1, SpareDirs)
	pool1 := spareDir(t, m1)
	if err := m1.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pool1); !os.IsNotExist(err) {
		t.Errorf("after Close the pool is there: %v", err)
	}

	m2 := newTestManager(t, Config{DataDir: dir}, f)
	waitSpares(t, m2, SpareDirs)
	pool2 := spareDir(t, m2)
	m2.journal.f.Close() // m2 dies: its flock goes, its pool and journal stay
	orphan := filepath.Join(dir, sparePrefix+"1.2")
	if err := os.MkdirAll(filepath.Join(orphan, "0"), 0o700); err != nil {
		t.Fatal(err)
	}
	m3 := newTestManager(t, Config{DataDir: dir}, f)
	waitSpares(t, m3, SpareDirs)
	for _, p := range []string{pool2, orphan} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s after the next start: %v; want it removed", filepath.Base(p), err)
		}
	}

	// A fourth Manager on the same data directory, m3 running.
	m4 := newTestManager(t, Config{DataDir: dir}, f)
	waitSpares(t, m4, SpareDirs)
	if _, err := os.Stat(spareDir(t, m3)); err != nil {
		t.Errorf("a running Manager's pool after another's start: %v", err)
	}
	run(t, m3, "p", "a", "set x 1")
	run(t, m4, "p", "b", "set x 1")
}

// A pool on another file system than the workspaces turns itself off at
// its first rename (EXDEV): the workspace is made with mkdir, and no later
// one tries a spare again.
func TestSpareDirsOnAnotherFileSystem(t *testing.T) {
	data := t.TempDir()
	other, err := os.MkdirTemp("/dev/shm", "execd-spares-")
	if err != nil {
		t.Skipf("no /dev/shm to put the pool on another file system: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(other) })
	var a, b syscall.Stat_t
	if syscall.Stat(data, &a) != nil || syscall.Stat(other, &b) != nil || a.Dev == b.Dev {
		t.Skip("/dev/shm and the test's temporary directory are one file system here")
	}
	s := newSpareDirs(other, "1.2", zap.NewNop())
	defer s.close()
	for {
		s.mu.Lock()
		n := len(s.ready)
		s.mu.Unlock()
		if n == SpareDirs {
			break
		}
		time.Sleep(time.Millisecond)
	}
	for _, id := range []string{"a", "b"} {
		if err := s.mkdir(filepath.Join(data, id)); err != nil {
			t.Fatalf("mkdir %s: %v", id, err)
		}
		if st, err := os.Lstat(filepath.Join(data, id)); err != nil || !st.IsDir() {
			t.Fatalf("%s: %v %v", id, st, err)
		}
	}
	if s.take() != "" || !s.disabled {
		t.Error("the pool still hands out spares after EXDEV")
	}
	if ents, _ := os.ReadDir(s.dir); len(ents) != SpareDirs {
		t.Errorf("the pool holds %d directories; want its %d left where they were", len(ents), SpareDirs)
	}
}
