package guestfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero/experimental/sys"
)

func TestQuotaWriteWithinLimit(t *testing.T) {
	q, dir := newTestFS(t, 4096)
	f := mustOpen(t, q, "a.txt", rw)
	if n, errno := f.Write([]byte("hello")); errno != 0 || n != 5 {
		t.Fatalf("Write = %d, %v", n, errno)
	}
	if got, want := q.Used(), int64(entryCost+5); got != want {
		t.Errorf("Used = %d, want %d", got, want)
	}
	b, err := os.ReadFile(filepath.Join(dir, "a.txt"))
	if err != nil || string(b) != "hello" {
		t.Errorf("on disk: %q, %v", b, err)
	}
}

func TestQuotaShortWriteThenRefuse(t *testing.T) {
	limit := int64(entryCost + 100)
	q, _ := newTestFS(t, limit)
	f := mustOpen(t, q, "big", rw)
	n, errno := f.Write(make([]byte, 150))
	if errno != 0 || n != 100 {
		t.Fatalf("first Write = %d, %v; want a short write of 100", n, errno)
	}
	n, errno = f.Write([]byte("x"))
	if errno != ErrnoQuota || n != 0 {
		t.Fatalf("second Write = %d, %v; want 0, %v", n, errno, ErrnoQuota)
	}
	if q.Refused() != 1 {
		t.Errorf("Refused = %d, want 1", q.Refused())
	}
	if q.Used() != limit {
		t.Errorf("Used = %d, want %d", q.Used(), limit)
	}
	// Overwriting in place does not grow the file and is allowed.
	if n, errno := f.Pwrite([]byte("abc"), 0); errno != 0 || n != 3 {
		t.Errorf("Pwrite in place = %d, %v", n, errno)
	}
	// Pwrite beyond the end is refused.
	if _, errno := f.Pwrite([]byte("abc"), 100); errno != ErrnoQuota {
		t.Errorf("Pwrite past end: %v, want %v", errno, ErrnoQuota)
	}
}

func TestQuotaAcrossFiles(t *testing.T) {
	q, _ := newTestFS(t, 2*entryCost+1000)
	a := mustOpen(t, q, "a", rw)
	if n, _ := a.Write(make([]byte, 900)); n != 900 {
		t.Fatalf("a: wrote %d", n)
	}
	b := mustOpen(t, q, "b", rw)
	if n, _ := b.Write(make([]byte, 900)); n != 100 {
		t.Fatalf("b: wrote %d, want 100 (the rest of the quota)", n)
	}
	// Removing a gives its bytes back.
	if errno := q.Unlink("a"); errno != 0 {
		t.Fatal(errno)
	}
	if n, errno := b.Write(make([]byte, 900)); errno != 0 || n != 900 {
		t.Fatalf("b after unlink: %d, %v", n, errno)
	}
}

func TestQuotaTruncate(t *testing.T) {
	q, _ := newTestFS(t, entryCost+1000)
	f := mustOpen(t, q, "t", rw)
	if errno := f.Truncate(1 << 30); errno != ErrnoQuota {
		t.Fatalf("Truncate(1GiB): %v, want %v", errno, ErrnoQuota)
	}
	if errno := f.Truncate(1000); errno != 0 {
		t.Fatalf("Truncate(1000): %v", errno)
	}
	if errno := f.Truncate(10); errno != 0 {
		t.Fatal(errno)
	}
	if got := q.Used(); got != entryCost+10 {
		t.Errorf("Used = %d, want %d", got, entryCost+10)
	}
	// O_TRUNC gives the size back.
	g := mustOpen(t, q, "t", sys.O_RDWR|sys.O_TRUNC)
	g.Close()
	if got := q.Used(); got != entryCost {
		t.Errorf("Used after O_TRUNC = %d, want %d", got, entryCost)
	}
}

func TestQuotaAppend(t *testing.T) {
	q, _ := newTestFS(t, entryCost+10)
	f := mustOpen(t, q, "log", rw|sys.O_APPEND)
	if n, _ := f.Write([]byte("123456")); n != 6 {
		t.Fatal(n)
	}
	if n, _ := f.Write([]byte("abcdef")); n != 4 {
		t.Fatalf("append wrote %d, want 4", n)
	}
}

func TestQuotaEntriesCost(t *testing.T) {
	q, _ := newTestFS(t, 3*entryCost)
	for _, d := range []string{"d1", "d2", "d3"} {
		if errno := q.Mkdir(d, 0o700); errno != 0 {
			t.Fatalf("Mkdir(%s): %v", d, errno)
		}
	}
	if errno := q.Mkdir("d4", 0o700); errno != ErrnoQuota {
		t.Fatalf("Mkdir beyond quota: %v", errno)
	}
	if _, errno := q.OpenFile("f", rw, 0o600); errno != ErrnoQuota {
		t.Fatalf("create beyond quota: %v", errno)
	}
	if errno := q.Rmdir("d1"); errno != 0 {
		t.Fatal(errno)
	}
	if errno := q.Mkdir("d4", 0o700); errno != 0 {
		t.Fatalf("Mkdir after Rmdir: %v", errno)
	}
}

func TestQuotaInitialUsageWalksTree(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sub", "deeper"), 0o700)
	os.WriteFile(filepath.Join(dir, "a"), make([]byte, 1000), 0o600)
	os.WriteFile(filepath.Join(dir, "sub", "deeper", "b"), make([]byte, 500), 0o600)
	fsys, err := New(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	// a, sub, deeper, b: four entries, 1500 bytes.
	if got, want := fsys.Used(), int64(4*entryCost+1500); got != want {
		t.Errorf("Used = %d, want %d", got, want)
	}
	if got, _ := Usage(dir); got != 4*entryCost+1500 {
		t.Errorf("Usage = %d", got)
	}
}

func TestQuotaRenameReplacesDestination(t *testing.T) {
	q, _ := newTestFS(t, 0)
	a := mustOpen(t, q, "a", rw)
	a.Write(make([]byte, 10))
	b := mustOpen(t, q, "b", rw)
	b.Write(make([]byte, 20))
	if errno := q.Rename("a", "b"); errno != 0 {
		t.Fatal(errno)
	}
	if got := q.Used(); got != entryCost+10 {
		t.Errorf("Used = %d, want %d", got, entryCost+10)
	}
}

func TestQuotaUnlimitedStillTracks(t *testing.T) {
	q, _ := newTestFS(t, 0)
	f := mustOpen(t, q, "x", rw)
	if n, errno := f.Write(make([]byte, 1<<20)); errno != 0 || n != 1<<20 {
		t.Fatal(n, errno)
	}
	if q.Used() != entryCost+1<<20 {
		t.Errorf("Used = %d", q.Used())
	}
}

func TestQuotaReadBack(t *testing.T) {
	q, _ := newTestFS(t, 1<<20)
	f := mustOpen(t, q, "r", rw)
	f.Write([]byte("round trip"))
	buf := make([]byte, 32)
	n, errno := f.Pread(buf, 0)
	if errno != 0 || !bytes.Equal(buf[:n], []byte("round trip")) {
		t.Errorf("Pread = %q, %v", buf[:n], errno)
	}
	if _, errno := q.Stat("r"); errno != 0 {
		t.Errorf("Stat: %v", errno)
	}
	root := mustOpen(t, q, ".", sys.O_RDONLY)
	if isDir, _ := root.IsDir(); !isDir {
		t.Error(`"." is not a directory`)
	}
}

func TestExcess(t *testing.T) {
	for _, c := range []struct{ limit, used, n, want int64 }{
		{0, 1 << 40, 1 << 40, 0}, // no quota
		{-1, 10, 10, 0},
		{100, 40, 60, 0}, // exactly full
		{100, 40, 61, 1},
		{100, 150, -20, 30}, // still above after freeing some
		{100, 150, -60, 0},
		{100, 0, 250, 150}, // a tree of 250 bytes in an empty quota
	} {
		if got := Excess(c.limit, c.used, c.n); got != c.want {
			t.Errorf("Excess(%d, %d, %d) = %d, want %d", c.limit, c.used, c.n, got, c.want)
		}
	}
}

// A tree already above its quota (files put there from outside) can still
// shrink, and a replacement that ends within the quota fits.
func TestQuotaAboveTheLimitShrinks(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "big"), make([]byte, 1000), 0o600)
	q, err := New(dir, entryCost+500)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, ok := q.Fits("big", 900); ok {
		t.Error("Fits(big, 900) above the quota")
	}
	if missing, ok := q.Fits("big", 400); !ok || missing != 0 {
		t.Errorf("Fits(big, 400) = %d, %v", missing, ok)
	}
	f := mustOpen(t, q, "big", sys.O_RDWR)
	if errno := f.Truncate(600); errno != 0 {
		t.Fatalf("shrinking above the quota: %v", errno)
	}
	if n, errno := f.Pwrite([]byte("x"), 700); errno != ErrnoQuota || n != 0 {
		t.Errorf("growing above the quota = %d, %v", n, errno)
	}
	if errno := f.Truncate(100); errno != 0 {
		t.Fatal(errno)
	}
	if n, errno := f.Pwrite(make([]byte, 500), 100); errno != 0 || n != 400 {
		t.Errorf("a write crossing the quota = %d, %v; want 400 written", n, errno)
	}
}

// A charge held outside the tree takes room from the quota whatever the
// limit, and gives it back when it shrinks.
func TestQuotaExtraCharge(t *testing.T) {
	limit := int64(entryCost + 1000)
	q, _ := newTestFS(t, limit)
	f := mustOpen(t, q, "a", rw)
	if n, errno := f.Write(make([]byte, 400)); errno != 0 || n != 400 {
		t.Fatalf("Write = %d, %v", n, errno)
	}
	q.SetExtra(2000) // more than the quota: charged, not refused
	if got, want := q.Used(), int64(entryCost+400+2000); got != want {
		t.Fatalf("Used with extra = %d, want %d", got, want)
	}
	if n, errno := f.Write([]byte("x")); errno != ErrnoQuota || n != 0 {
		t.Fatalf("Write over the quota = %d, %v; want 0, %v", n, errno, ErrnoQuota)
	}
	if _, ok := q.Fits("b", 1); ok {
		t.Error("Fits says a new file fits above the quota")
	}
	q.SetExtra(500) // replaces, not adds
	if got, want := q.Used(), int64(entryCost+400+500); got != want {
		t.Fatalf("Used after a smaller extra = %d, want %d", got, want)
	}
	if n, errno := f.Write(make([]byte, 200)); errno != 0 || n != 100 {
		t.Fatalf("Write = %d, %v; want a short write of the 100 bytes left", n, errno)
	}
	q.SetExtra(0)
	if got, want := q.Used(), int64(entryCost+500); got != want {
		t.Errorf("Used without extra = %d, want %d", got, want)
	}
}

// Changes moves with every change made through the FS, and only then.
func TestChangesCountsChanges(t *testing.T) {
	q, _ := newTestFS(t, 0)
	c0 := q.Changes()
	f := mustOpen(t, q, "a", rw)
	if _, errno := f.Write([]byte("hi")); errno != 0 {
		t.Fatal(errno)
	}
	f.Close()
	c1 := q.Changes()
	if c1 == c0 {
		t.Fatal("creating and writing a file left Changes unchanged")
	}
	r := mustOpen(t, q, "a", sys.O_RDONLY)
	buf := make([]byte, 2)
	r.Read(buf)
	r.Close()
	if _, errno := q.Stat("a"); errno != 0 {
		t.Fatal(errno)
	}
	if q.Changes() != c1 {
		t.Error("reading a file moved Changes")
	}
	if errno := q.Unlink("a"); errno != 0 {
		t.Fatal(errno)
	}
	if q.Changes() == c1 {
		t.Error("removing a file left Changes unchanged")
	}
}
