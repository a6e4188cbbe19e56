package guestfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/tetratelabs/wazero/experimental/sys"
	wsys "github.com/tetratelabs/wazero/sys"
)

// newLazyFS is a lazy FS of a directory that does not exist, whose mkdir
// makes it and counts its calls (failing with fail while that is set).
func newLazyFS(t *testing.T, limit int64) (q *FS, dir string, calls *int, fail *error) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "ws")
	calls, fail = new(int), new(error)
	q, err := NewLazy(dir, limit, nil, func() error {
		*calls++
		if *fail != nil {
			return *fail
		}
		return os.MkdirAll(dir, 0o700) // it may be made already
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q, dir, calls, fail
}

func TestLazyFSReadsAsEmptyUntilAChange(t *testing.T) {
	q, dir, calls, _ := newLazyFS(t, 0)
	if err := q.Acquire(); err != nil {
		t.Fatalf("Acquire of a directory not made yet: %v", err)
	}
	for _, stat := range []func(string) (wsys.Stat_t, sys.Errno){q.Stat, q.Lstat} {
		st, errno := stat(".")
		if errno != 0 || !st.Mode.IsDir() {
			t.Fatalf("the root of a directory not made: mode %v, errno %v", st.Mode, errno)
		}
	}
	if _, errno := q.Stat("a.txt"); errno != sys.ENOENT {
		t.Fatalf("Stat below a directory not made: %v, want ENOENT", errno)
	}
	if _, errno := q.OpenFile("a.txt", sys.O_RDONLY, 0); errno != sys.ENOENT {
		t.Fatalf("open below a directory not made: %v, want ENOENT", errno)
	}
	if errno := q.Unlink("a.txt"); errno != sys.ENOENT {
		t.Fatalf("unlink below a directory not made: %v, want ENOENT", errno)
	}
	if errno := q.Rename("a", "b"); errno != sys.ENOENT {
		t.Fatalf("rename below a directory not made: %v, want ENOENT", errno)
	}
	if _, errno := q.OpenFile(".", sys.O_WRONLY, 0); errno != sys.EISDIR {
		t.Fatalf("opening the root for writing: %v, want EISDIR", errno)
	}
	for _, flag := range []sys.Oflag{sys.O_RDONLY, sys.O_RDONLY | sys.O_DIRECTORY} {
		d := mustOpen(t, q, ".", flag)
		ents, errno := d.Readdir(-1)
		if errno != 0 || len(ents) != 0 {
			t.Fatalf("listing a directory not made (flag %v): %v, %v", flag, ents, errno)
		}
	}
	if _, _, err := q.ReadFile("a.txt", 0, 10); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("ReadFile below a directory not made: %v", err)
	}
	if _, err := q.Info("."); err != nil {
		t.Fatalf("Info of the root not made: %v", err)
	}
	if *calls != 0 || exists(dir) || q.Used() != 0 {
		t.Fatalf("reads made the directory: %d mkdir calls, exists %v, used %d", *calls, exists(dir), q.Used())
	}

	// A listing of the root rewinds, and finds the directory once made.
	root := mustOpen(t, q, ".", sys.O_RDONLY)
	if ents, errno := root.Readdir(-1); errno != 0 || len(ents) != 0 {
		t.Fatalf("listing: %v, %v", ents, errno)
	}
	if _, errno := root.Seek(0, io.SeekStart); errno != 0 {
		t.Fatalf("rewinding a listing of a directory not made: %v", errno)
	}

	// The first change makes it, once.
	f := mustOpen(t, q, "a.txt", rw)
	if _, errno := f.Write([]byte("hi")); errno != 0 {
		t.Fatal(errno)
	}
	if errno := q.Mkdir("sub", 0o755); errno != 0 {
		t.Fatal(errno)
	}
	if *calls != 1 {
		t.Fatalf("mkdir called %d times, want 1", *calls)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "hi" {
		t.Fatalf("the file on the host: %q, %v", b, err)
	}
	if got, want := q.Used(), int64(2*entryCost+2); got != want {
		t.Fatalf("used %d, want %d", got, want)
	}
	if ents, errno := root.Readdir(-1); errno != 0 || len(ents) != 2 {
		t.Fatalf("the listing opened before, once made: %v, %v", ents, errno)
	}
	d := mustOpen(t, q, ".", sys.O_RDONLY)
	if ents, errno := d.Readdir(-1); errno != 0 || len(ents) != 2 {
		t.Fatalf("listing once made: %v, %v", ents, errno)
	}
}

// Every kind of change that adds an entry makes the directory; the host's
// WriteFile too.
func TestLazyFSEachCreateMakesTheDirectory(t *testing.T) {
	ops := map[string]func(q *FS) error{
		"create":    func(q *FS) error { f, errno := q.OpenFile("f", rw, 0o600); return closeErr(f, errno) },
		"mkdir":     func(q *FS) error { return errOf(q.Mkdir("d", 0o755)) },
		"symlink":   func(q *FS) error { return errOf(q.Symlink("f", "l")) },
		"chmod":     func(q *FS) error { return errOf(q.Chmod(".", 0o755)) },
		"utimens":   func(q *FS) error { return errOf(q.Utimens(".", 0, 0)) },
		"WriteFile": func(q *FS) error { _, err := q.WriteFile("a/b/c.txt", []byte("x")); return err },
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			q, dir, calls, _ := newLazyFS(t, 0)
			if err := op(q); err != nil {
				t.Fatal(err)
			}
			if *calls != 1 || !exists(dir) {
				t.Fatalf("%d mkdir calls, exists %v", *calls, exists(dir))
			}
		})
	}
}

// A directory that cannot be made fails the change with mkdir's error,
// charges nothing, and is tried again by the next change.
func TestLazyFSMkdirFails(t *testing.T) {
	q, dir, calls, fail := newLazyFS(t, 1<<20)
	*fail = &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.EACCES}
	if _, errno := q.OpenFile("f", rw, 0o600); errno != sys.EACCES {
		t.Fatalf("create when the directory cannot be made: %v, want EACCES", errno)
	}
	if _, err := q.WriteFile("f", []byte("x")); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("WriteFile when the directory cannot be made: %v", err)
	}
	if q.Used() != 0 || exists(dir) {
		t.Fatalf("a refused change left used %d, exists %v", q.Used(), exists(dir))
	}
	*fail = nil
	f := mustOpen(t, q, "f", rw)
	f.Close()
	if *calls != 3 || !exists(filepath.Join(dir, "f")) {
		t.Fatalf("%d mkdir calls; file made %v", *calls, exists(filepath.Join(dir, "f")))
	}
}

// A change the quota refuses makes no directory.
func TestLazyFSQuotaRefusalMakesNothing(t *testing.T) {
	q, dir, calls, _ := newLazyFS(t, entryCost-1)
	if _, errno := q.OpenFile("f", rw, 0o600); errno != ErrnoQuota {
		t.Fatalf("a create past the quota: %v, want %v", errno, ErrnoQuota)
	}
	if *calls != 0 || exists(dir) {
		t.Fatalf("a refused create made the directory: %d calls", *calls)
	}
}

// A lazy FS of a directory made from outside (a copy put in place) finds
// it: the real listing, the real confinement.
func TestLazyFSFindsItsDirectoryMadeFromOutside(t *testing.T) {
	q, dir, calls, _ := newLazyFS(t, 0)
	if err := os.MkdirAll(filepath.Join(dir, "in"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..", filepath.Join(dir, "esc")); err != nil {
		t.Fatal(err)
	}
	if _, errno := q.Stat("esc/ws"); errno != sys.EPERM {
		t.Fatalf("a link out of a directory made from outside: %v, want EPERM", errno)
	}
	d := mustOpen(t, q, ".", sys.O_RDONLY)
	if ents, errno := d.Readdir(-1); errno != 0 || len(ents) != 2 {
		t.Fatalf("listing: %v, %v", ents, errno)
	}
	if errno := q.Mkdir("in/x", 0o700); errno != 0 {
		t.Fatal(errno)
	}
	if *calls != 1 {
		t.Fatalf("mkdir of a directory that exists: %d calls, want 1 (it finds it made)", *calls)
	}
}

// A directory made from outside, used, then removed from outside: the
// directory the FS makes next is the one confinement resolves through.
func TestLazyFSDirectoryRemovedFromOutside(t *testing.T) {
	q, dir, _, _ := newLazyFS(t, 0)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, errno := q.Stat("x"); errno != sys.ENOENT { // opens the root
		t.Fatalf("stat in a directory made from outside: %v", errno)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if errno := q.Mkdir("d", 0o700); errno != 0 {
		t.Fatalf("mkdir once the directory is gone: %v", errno)
	}
	if err := os.Symlink("..", filepath.Join(dir, "esc")); err != nil {
		t.Fatal(err)
	}
	if _, errno := q.Stat("esc/ws"); errno != sys.EPERM {
		t.Fatalf("a link out of the directory made again: %v, want EPERM", errno)
	}
}

// NewLazy of a directory that exists is NewInBudget's FS: its usage is
// measured and nothing is made.
func TestLazyFSOfADirectoryThatExists(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	calls := 0
	q, err := NewLazy(dir, 0, nil, func() error { calls++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if got := q.Used(); got != entryCost+3 {
		t.Fatalf("used %d, want %d", got, entryCost+3)
	}
	mustOpen(t, q, "b", rw)
	if calls != 0 {
		t.Fatalf("mkdir called %d times for a directory that exists", calls)
	}
	if _, err := NewLazy(filepath.Join(dir, "a"), 0, nil, nil); err == nil {
		t.Fatal("NewLazy of a file: no error")
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func errOf(errno sys.Errno) error {
	if errno != 0 {
		return errno
	}
	return nil
}

func closeErr(f sys.File, errno sys.Errno) error {
	if errno != 0 {
		return errno
	}
	return errOf(f.Close())
}

// TestLazyFSAcquireWithNoDescriptorLeft: Acquire of a directory not made
// reports a process out of descriptors, as opening a root would, and like a
// root held, a descriptor found once stands until Release.
func TestLazyFSAcquireWithNoDescriptorLeft(t *testing.T) {
	held, _, _, _ := newLazyFS(t, 0)
	released, _, _, _ := newLazyFS(t, 0)
	for _, q := range []*FS{held, released} {
		if err := q.Acquire(); err != nil {
			t.Fatal(err)
		}
	}
	released.Release()

	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = uint64(len(ents) + 20)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var hog []*os.File
	defer func() { // the tests after this one need their descriptors back
		for _, f := range hog {
			f.Close()
		}
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}()
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		hog = append(hog, f)
	}
	if err := held.Acquire(); err != nil {
		t.Errorf("Acquire of a lazy FS acquired before and not released: %v", err)
	}
	if err := released.Acquire(); !errors.Is(err, syscall.EMFILE) {
		t.Errorf("Acquire after Release with no descriptor left: %v, want EMFILE", err)
	}
	fresh, err := NewLazy(filepath.Join(t.TempDir(), "ws"), 0, nil, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := fresh.Acquire(); !errors.Is(err, syscall.EMFILE) {
		t.Errorf("Acquire of a new lazy FS with no descriptor left: %v, want EMFILE", err)
	}
}
