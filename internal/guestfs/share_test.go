package guestfs

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/tetratelabs/wazero/experimental/sys"
)

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
	q, err := New(dir, 1<<20)
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

// Times set through a handle (futimens; Python's os.utime(fd, …)) belong
// to the data too: a file shared with a checkpoint or a fork is unshared
// first, and the handle goes on with the private copy.
func TestTimesThroughAHandleAreUnshared(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	for _, name := range []string{"big.bin", "moved"} {
		os.WriteFile(filepath.Join(dir, name), []byte("shared data"), 0o640)
		if err := os.Link(filepath.Join(dir, name), filepath.Join(other, name)); err != nil {
			t.Fatal(err)
		}
	}
	st0, _ := os.Stat(filepath.Join(other, "big.bin"))
	q, err := New(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	f := mustOpen(t, q, "big.bin", sys.O_RDONLY)
	buf := make([]byte, 6)
	f.Read(buf)
	const when = int64(1e9) * 1e9 // 2001-09-09
	if errno := f.Utimens(when, when); errno != 0 {
		t.Fatalf("Utimens: %v", errno)
	}
	if st, _ := os.Stat(filepath.Join(other, "big.bin")); !st.ModTime().Equal(st0.ModTime()) {
		t.Errorf("the other copy's mtime changed to %v", st.ModTime())
	}
	if st, _ := os.Stat(filepath.Join(dir, "big.bin")); st.ModTime().UnixNano() != when {
		t.Errorf("the workspace's mtime is %v", st.ModTime())
	}
	if st, errno := f.Stat(); errno != 0 || st.Mtim != when || st.Nlink != 1 {
		t.Errorf("the handle sees mtime %d, %d links (%v)", st.Mtim, st.Nlink, errno)
	}
	if n, _ := f.Read(buf); string(buf[:n]) != " data" {
		t.Errorf("the handle reads on %q", buf[:n])
	}
	// A handle whose name was renamed since cannot be unshared by name:
	// refused, never written through.
	g := mustOpen(t, q, "moved", sys.O_RDONLY)
	if errno := q.Rename("moved", "elsewhere"); errno != 0 {
		t.Fatal(errno)
	}
	if errno := g.Utimens(when, when); errno != sys.EACCES {
		t.Errorf("Utimens after a rename = %v, want EACCES", errno)
	}
	if st, _ := os.Stat(filepath.Join(other, "moved")); st.ModTime().UnixNano() == when {
		t.Error("the other copy's mtime changed through a renamed handle")
	}
}
