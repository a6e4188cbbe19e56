package guestfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
)

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

// TestDirFSEscapes pins what wazero's own DirFS does with escaping paths,
// so a wazero upgrade that changes it is noticed, and checks that an FS on
// the same directory refuses each escape DirFS allows. DirFS does not
// confine: ".." and symlinks reach the host. (WASI path resolution rejects
// ".." and absolute paths before DirFS sees them, but not symlinks.)
func TestDirFSEscapes(t *testing.T) {
	ws, _ := outsideSetup(t)
	d := sysfs.DirFS(ws)
	q, err := New(ws, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	readsSecret := func(fsys sys.FS, p string) (bool, sys.Errno) {
		f, errno := fsys.OpenFile(p, sys.O_RDONLY, 0)
		if errno != 0 {
			return false, errno
		}
		defer f.Close()
		buf := make([]byte, 16)
		n, _ := f.Read(buf)
		return string(buf[:n]) == "s3cr3t", 0
	}

	// ".." climbs out of DirFS's directory ...
	if ok, errno := readsSecret(d, "../secret"); !ok {
		t.Errorf("DirFS ../secret = %v: DirFS no longer follows ../ (see confine.go)", errno)
	}
	// ... and not out of an FS's.
	if ok, errno := readsSecret(q, "../secret"); ok || errno != sys.EPERM {
		t.Errorf("FS ../secret = read %v, %v; want EPERM", ok, errno)
	}
	// An absolute path is concatenated to the directory, so it stays inside.
	if _, errno := d.Stat("/secret"); errno != sys.ENOENT {
		t.Errorf("DirFS Stat(/secret) = %v, want ENOENT (joined under the dir)", errno)
	}
	// An absolute symlink target is refused by both ...
	if errno := d.Symlink("/etc", "abs"); errno != sys.EPERM {
		t.Errorf("DirFS Symlink(/etc) = %v, want EPERM", errno)
	}
	if errno := q.Symlink("/etc", "abs"); errno != sys.EPERM {
		t.Errorf("FS Symlink(/etc) = %v, want EPERM", errno)
	}
	// ... a relative one that climbs out is refused by an FS ...
	if errno := q.Symlink("..", "up"); errno != sys.EPERM {
		t.Errorf("FS Symlink(..) = %v, want EPERM", errno)
	}
	// ... but created and followed by DirFS, and not followed by an FS.
	if errno := d.Symlink("..", "up"); errno != 0 {
		t.Fatalf("DirFS Symlink(..): %v", errno)
	}
	if ok, errno := readsSecret(d, "up/secret"); !ok {
		t.Errorf("DirFS up/secret = %v: DirFS no longer follows an escaping symlink", errno)
	}
	if ok, errno := readsSecret(q, "up/secret"); ok || errno != sys.EPERM {
		t.Errorf("FS up/secret = read %v, %v; want EPERM", ok, errno)
	}
}

func TestConfinement(t *testing.T) {
	ws, parent := outsideSetup(t)
	os.Mkdir(filepath.Join(ws, "sub"), 0o700)
	// Links an operator or earlier code might have left behind.
	os.Symlink("..", filepath.Join(ws, "up"))
	os.Symlink(filepath.Join(parent, "secret"), filepath.Join(ws, "abs"))
	os.Symlink("../nowhere", filepath.Join(ws, "dangling"))
	os.Symlink("sub", filepath.Join(ws, "inside"))
	fsys, err := New(ws, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()

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

func TestClosed(t *testing.T) {
	q, _ := newTestFS(t, 0)
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
	fsys, err := New(ws, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
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

// What only the host can make (a FIFO, a device) is not opened for the
// guest, directly or through a link: opening a FIFO would wait forever.
func TestSpecialFilesAreNotOpened(t *testing.T) {
	q, dir := newTestFS(t, 0)
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Symlink("pipe", filepath.Join(dir, "link"))
	for _, c := range []struct {
		p    string
		flag sys.Oflag
	}{
		{"pipe", sys.O_RDONLY}, {"pipe", sys.O_WRONLY}, {"pipe", sys.O_RDWR | sys.O_APPEND}, {"link", sys.O_RDONLY}, {"pipe", rw},
	} {
		if f, errno := q.OpenFile(c.p, c.flag, 0o600); errno != sys.ENOTSUP {
			if errno == 0 {
				f.Close()
			}
			t.Errorf("OpenFile(%s, %v) = %v, want ENOTSUP", c.p, c.flag, errno)
		}
	}
	// The entries themselves can still be inspected and removed.
	if st, errno := q.Lstat("pipe"); errno != 0 || st.Mode&fs.ModeNamedPipe == 0 {
		t.Errorf("Lstat(pipe) = %v, %v", st.Mode, errno)
	}
	if errno := q.Unlink("link"); errno != 0 {
		t.Errorf("Unlink(link) = %v", errno)
	}
	if _, _, err := q.ReadFile("pipe", 0, 10); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("ReadFile(pipe) = %v, want fs.ErrInvalid", err)
	}
}
