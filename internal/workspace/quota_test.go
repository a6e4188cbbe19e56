package workspace

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
)

const rw = sys.O_RDWR | sys.O_CREAT

func newTestQuotaFS(t *testing.T, limit int64) (*QuotaFS, string) {
	t.Helper()
	dir := t.TempDir()
	fsys, err := NewQuotaFS(dir, limit)
	if err != nil {
		t.Fatal(err)
	}
	q := fsys.(*QuotaFS)
	t.Cleanup(func() { q.Close() })
	return q, dir
}

func mustOpen(t *testing.T, fsys sys.FS, p string, flag sys.Oflag) sys.File {
	t.Helper()
	f, errno := fsys.OpenFile(p, flag, 0o600)
	if errno != 0 {
		t.Fatalf("OpenFile(%q): %v", p, errno)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestQuotaWriteWithinLimit(t *testing.T) {
	q, dir := newTestQuotaFS(t, 4096)
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
	q, _ := newTestQuotaFS(t, limit)
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
	q, _ := newTestQuotaFS(t, 2*entryCost+1000)
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
	q, _ := newTestQuotaFS(t, entryCost+1000)
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
	q, _ := newTestQuotaFS(t, entryCost+10)
	f := mustOpen(t, q, "log", rw|sys.O_APPEND)
	if n, _ := f.Write([]byte("123456")); n != 6 {
		t.Fatal(n)
	}
	if n, _ := f.Write([]byte("abcdef")); n != 4 {
		t.Fatalf("append wrote %d, want 4", n)
	}
}

func TestQuotaEntriesCost(t *testing.T) {
	q, _ := newTestQuotaFS(t, 3*entryCost)
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
	fsys, err := NewQuotaFS(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.(*QuotaFS).Close()
	// a, sub, deeper, b: four entries, 1500 bytes.
	if got, want := fsys.(*QuotaFS).Used(), int64(4*entryCost+1500); got != want {
		t.Errorf("Used = %d, want %d", got, want)
	}
	if got, _ := diskUsage(dir); got != 4*entryCost+1500 {
		t.Errorf("diskUsage = %d", got)
	}
}

func TestQuotaRenameReplacesDestination(t *testing.T) {
	q, _ := newTestQuotaFS(t, 0)
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
	q, _ := newTestQuotaFS(t, 0)
	f := mustOpen(t, q, "x", rw)
	if n, errno := f.Write(make([]byte, 1<<20)); errno != 0 || n != 1<<20 {
		t.Fatal(n, errno)
	}
	if q.Used() != entryCost+1<<20 {
		t.Errorf("Used = %d", q.Used())
	}
}

func TestQuotaReadBack(t *testing.T) {
	q, _ := newTestQuotaFS(t, 1<<20)
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

// outsideSetup makes parent/{ws,secret} and returns the workspace dir.
func outsideSetup(t *testing.T) (ws, parent string) {
	t.Helper()
	parent = t.TempDir()
	ws = filepath.Join(parent, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parent, "secret"), []byte("s3cr3t"), 0o600); err != nil {
		t.Fatal(err)
	}
	return ws, parent
}

// TestDirFSEscapes pins what wazero's own DirFS does with escaping paths, so
// a wazero upgrade that changes it is noticed. DirFS does not confine: ".."
// and symlinks reach the host. (WASI path resolution rejects ".." and
// absolute paths before DirFS sees them, but not symlinks.)
func TestDirFSEscapes(t *testing.T) {
	ws, _ := outsideSetup(t)
	d := sysfs.DirFS(ws)

	if f, errno := d.OpenFile("../secret", sys.O_RDONLY, 0); errno == 0 {
		f.Close()
		t.Log("DirFS follows ../ out of its directory (QuotaFS refuses it)")
	} else {
		t.Logf("DirFS refuses ../: %v", errno)
	}
	// An absolute path is concatenated to the directory, so it stays inside.
	if _, errno := d.Stat("/secret"); errno != sys.ENOENT {
		t.Errorf("DirFS Stat(/secret) = %v, want ENOENT (joined under the dir)", errno)
	}
	// An absolute symlink target is refused ...
	if errno := d.Symlink("/etc", "abs"); errno != sys.EPERM {
		t.Errorf("DirFS Symlink(/etc) = %v, want EPERM", errno)
	}
	// ... but a relative one that climbs out is created and followed.
	if errno := d.Symlink("..", "up"); errno != 0 {
		t.Fatalf("DirFS Symlink(..): %v", errno)
	}
	f, errno := d.OpenFile("up/secret", sys.O_RDONLY, 0)
	if errno != 0 {
		t.Fatalf("expected DirFS to follow the escaping symlink; got %v", errno)
	}
	f.Close()
}

func TestQuotaFSConfinement(t *testing.T) {
	ws, parent := outsideSetup(t)
	os.Mkdir(filepath.Join(ws, "sub"), 0o700)
	// Links an operator or earlier code might have left behind.
	os.Symlink("..", filepath.Join(ws, "up"))
	os.Symlink(filepath.Join(parent, "secret"), filepath.Join(ws, "abs"))
	os.Symlink("../nowhere", filepath.Join(ws, "dangling"))
	os.Symlink("sub", filepath.Join(ws, "inside"))
	fsys, err := NewQuotaFS(ws, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.(*QuotaFS).Close()

	escapes := []string{
		"../secret", "sub/../../secret", "up/secret", "up", "abs", "up/ws/sub",
		"dangling", "inside/../up/secret",
	}
	for _, p := range escapes {
		if f, errno := fsys.OpenFile(p, sys.O_RDONLY, 0); errno == 0 {
			f.Close()
			t.Errorf("OpenFile(%q) escaped", p)
		} else if errno != sys.EPERM {
			t.Errorf("OpenFile(%q) = %v, want EPERM", p, errno)
		}
		if _, errno := fsys.Stat(p); errno != sys.EPERM {
			t.Errorf("Stat(%q) = %v, want EPERM", p, errno)
		}
	}
	// Creating through a dangling link that points outside must not create
	// the target.
	if _, errno := fsys.OpenFile("dangling", rw, 0o600); errno != sys.EPERM {
		t.Errorf("create via dangling link = %v, want EPERM", errno)
	}
	if _, err := os.Stat(filepath.Join(parent, "nowhere")); !os.IsNotExist(err) {
		t.Error("dangling link created a file outside the workspace")
	}
	// Writing into a directory reached through an escaping link.
	if _, errno := fsys.OpenFile("up/new", rw, 0o600); errno != sys.EPERM {
		t.Errorf("create up/new = %v, want EPERM", errno)
	}
	for name, errno := range map[string]sys.Errno{
		"Mkdir up/d":        fsys.Mkdir("up/d", 0o700),
		"Unlink up/secret":  fsys.Unlink("up/secret"),
		"Rename to outside": fsys.Rename("sub", "up/stolen"),
		"Link from outside": fsys.Link("up/secret", "mine"),
		"Chmod abs":         fsys.Chmod("abs", 0o777),
		"Utimens abs":       fsys.Utimens("abs", 0, 0),
		"Symlink in up/":    fsys.Symlink("x", "up/l"),
	} {
		if errno != sys.EPERM {
			t.Errorf("%s = %v, want EPERM", name, errno)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(parent, "secret")); string(b) != "s3cr3t" {
		t.Error("secret changed")
	}

	// Links themselves may be inspected and removed; links that stay inside
	// work.
	if _, errno := fsys.Lstat("up"); errno != 0 {
		t.Errorf("Lstat(up) = %v", errno)
	}
	if target, errno := fsys.Readlink("up"); errno != 0 || target != ".." {
		t.Errorf("Readlink(up) = %q, %v", target, errno)
	}
	if f, errno := fsys.OpenFile("inside", sys.O_RDONLY|sys.O_DIRECTORY, 0); errno != 0 {
		t.Errorf("OpenFile(inside) = %v", errno)
	} else {
		f.Close()
	}
	// Following the links that were already there stays confined (above);
	// the guest cannot make one that climbs out (TestSymlinkTargets).
	if errno := fsys.Unlink("up"); errno != 0 {
		t.Errorf("Unlink(up) = %v", errno)
	}
	// Absolute paths are refused.
	if _, errno := fsys.OpenFile("/etc/passwd", sys.O_RDONLY, 0); errno == 0 {
		t.Error("absolute path opened")
	}
}

func TestQuotaFSClosed(t *testing.T) {
	q, _ := newTestQuotaFS(t, 0)
	q.Close()
	if err := q.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, errno := q.OpenFile("x", rw, 0o600); errno != sys.EBADF {
		t.Errorf("OpenFile after Close = %v, want EBADF", errno)
	}
}

func TestSymlinkTargets(t *testing.T) {
	ws, parent := outsideSetup(t)
	fsys, err := NewQuotaFS(ws, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.(*QuotaFS).Close()
	os.MkdirAll(filepath.Join(ws, "sub", "deeper"), 0o700)
	os.WriteFile(filepath.Join(ws, "sub", "deeper", "data.csv"), []byte("1,2"), 0o600)
	for i, target := range []string{
		"../../../../../../etc", "..", "../secret", "sub/../..", "sub/..", "/etc", "/workspace/sub", "a/../b", "",
	} {
		if errno := fsys.Symlink(target, fmt.Sprintf("bad%d", i)); errno != sys.EPERM {
			t.Errorf("Symlink(%q) = %v, want EPERM", target, errno)
		}
		if _, err := os.Lstat(filepath.Join(ws, fmt.Sprintf("bad%d", i))); !os.IsNotExist(err) {
			t.Errorf("Symlink(%q) left a link on the host", target)
		}
	}
	// A link into a subdirectory, one through another link, and one to a
	// file that does not exist yet are fine, and work.
	for name, target := range map[string]string{"latest": "sub/deeper/data.csv", "d": "sub", "sub/dl": "deeper/data.csv", "later": "./sub/new.txt"} {
		if errno := fsys.Symlink(target, name); errno != 0 {
			t.Errorf("Symlink(%q, %q) = %v", target, name, errno)
		}
	}
	for _, p := range []string{"latest", "d/deeper/data.csv", "sub/dl", "d/dl"} {
		f, errno := fsys.OpenFile(p, sys.O_RDONLY, 0)
		if errno != 0 {
			t.Errorf("open %s: %v", p, errno)
			continue
		}
		buf := make([]byte, 8)
		n, _ := f.Read(buf)
		f.Close()
		if string(buf[:n]) != "1,2" {
			t.Errorf("%s reads %q", p, buf[:n])
		}
	}
	if b, _ := os.ReadFile(filepath.Join(parent, "secret")); string(b) != "s3cr3t" {
		t.Error("secret changed")
	}
}

// TestSharedFilesAreUnshared: a file whose data is shared with a checkpoint
// or a fork by a hard link gets its own copy before any change.
func TestSharedFilesAreUnshared(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	for name, content := range map[string]string{"w": "original", "a": "original", "t": "original", "m": "original", "keep": "original"} {
		os.WriteFile(filepath.Join(dir, name), []byte(content), 0o640)
		if err := os.Link(filepath.Join(dir, name), filepath.Join(other, name)); err != nil {
			t.Fatal(err)
		}
	}
	q, err := newQuotaFS(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	before := q.Used()
	f := mustOpen(t, q, "w", sys.O_WRONLY)
	f.Pwrite([]byte("CHANGED"), 0)
	g := mustOpen(t, q, "a", sys.O_WRONLY|sys.O_APPEND)
	g.Write([]byte("+more"))
	h := mustOpen(t, q, "t", sys.O_WRONLY|sys.O_TRUNC)
	h.Write([]byte("new"))
	if errno := q.Chmod("m", 0o600); errno != 0 {
		t.Fatal(errno)
	}
	r := mustOpen(t, q, "keep", sys.O_RDONLY)
	r.Close()
	for name, want := range map[string]string{"w": "CHANGEDl", "a": "original+more", "t": "new", "m": "original"} {
		if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != want {
			t.Errorf("%s in the workspace = %q, want %q", name, b, want)
		}
		if b, _ := os.ReadFile(filepath.Join(other, name)); string(b) != "original" {
			t.Errorf("%s in the other copy = %q: the change leaked", name, b)
		}
	}
	if st, _ := os.Stat(filepath.Join(other, "m")); st.Mode().Perm() != 0o640 {
		t.Errorf("chmod leaked: %v", st.Mode())
	}
	if st, _ := os.Stat(filepath.Join(dir, "t")); st.Mode().Perm() != 0o640 {
		t.Errorf("truncated copy lost its mode: %v", st.Mode())
	}
	// Opening for reading shares on.
	var sta, stb syscall.Stat_t
	syscall.Stat(filepath.Join(dir, "keep"), &sta)
	syscall.Stat(filepath.Join(other, "keep"), &stb)
	if sta.Ino != stb.Ino {
		t.Error("a read unshared the file")
	}
	if got, want := q.Used(), before+int64(len("+more"))+int64(len("new")-len("original")); got != want {
		t.Errorf("Used = %d, want %d", got, want)
	}
}

// TestIdleFSHoldsNoDescriptors: between turns a QuotaFS holds no file
// descriptor, and the preopen's handle opens none to say it is a directory.
func TestIdleFSHoldsNoDescriptors(t *testing.T) {
	base := openFDs(t)
	var all []*QuotaFS
	for i := range 20 {
		dir := filepath.Join(t.TempDir(), strconv.Itoa(i))
		os.Mkdir(dir, 0o700)
		q, err := newQuotaFS(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, q)
		pre, errno := q.OpenFile(".", sys.O_RDONLY, 0) // what wazero does for the preopen
		if errno != 0 {
			t.Fatal(errno)
		}
		if isDir, _ := pre.IsDir(); !isDir {
			t.Fatal("preopen is not a directory")
		}
		if _, errno := pre.Stat(); errno != 0 {
			t.Fatal(errno)
		}
		f := mustOpen(t, q, "x", rw)
		f.Close()
		// Measured across the Release, so that a descriptor another part
		// of the process closes meanwhile cannot hide the root.
		inTurn := openFDs(t)
		q.Release()
		if got := inTurn - openFDs(t); got < 1 {
			t.Fatalf("the release closed %d descriptors; the root should have been open in the turn", got)
		}
	}
	// Other descriptors of the process may close meanwhile; none may be
	// left open by these.
	if got := openFDs(t) - base; got > 0 {
		t.Errorf("20 idle file systems hold %d descriptors, want 0", got)
	}
	for _, q := range all {
		q.Close()
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
