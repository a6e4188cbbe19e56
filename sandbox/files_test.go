package sandbox

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"testing"
)

// The Python guest must be built too: this fails, never skips, when it is
// not.
func TestPythonGuestBuilt(t *testing.T) {
	b, err := Module("python")
	if err != nil {
		t.Fatalf("%v", err)
	}
	if !bytes.HasPrefix(b, []byte("\x00asm\x01\x00\x00\x00")) {
		t.Fatalf("python.wasm is not a WebAssembly module")
	}
	fsys, at, err := Files("python")
	if err != nil {
		t.Fatalf("Files(python): %v", err)
	}
	if at != "/usr/local/lib/python3.11" {
		t.Errorf("mount point %q", at)
	}
	for _, name := range []string{"os.py", "json/__init__.py", "json/__pycache__/__init__.cpython-311.pyc", "encodings/utf_8.py"} {
		st, err := fs.Stat(fsys, name)
		if err != nil || st.IsDir() || st.Mode().Perm()&0o222 != 0 {
			t.Errorf("%s: %v %v", name, st, err)
		}
	}
	matches, err := fs.Glob(fsys, "_sysconfigdata_*.py")
	if err != nil || len(matches) != 1 {
		t.Errorf("_sysconfigdata: %v %v", matches, err)
	}
	for _, gone := range []string{"test", "idlelib", "tkinter", "turtledemo", "ensurepip"} {
		if _, err := fs.Stat(fsys, gone); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is packaged: %v", gone, err)
		}
	}
	// Regular files seek and read at offsets (buffered I/O in the guest).
	f, err := fsys.Open("os.py")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, ok := f.(io.ReadSeeker)
	if !ok {
		t.Fatalf("%T does not seek", f)
	}
	if _, err := s.Seek(3, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(io.ReaderAt); !ok {
		t.Fatalf("%T has no ReadAt", f)
	}
}

func TestFilesNone(t *testing.T) {
	fsys, at, err := Files("javascript")
	if fsys != nil || at != "" || err != nil {
		t.Errorf("Files(javascript) = %v %q %v", fsys, at, err)
	}
}

func TestFilesMissing(t *testing.T) {
	t.Setenv("EXECD_GUEST_DIR", t.TempDir())
	filesMu.Lock()
	saved := filesCache
	filesCache = map[string]fs.FS{}
	filesMu.Unlock()
	t.Cleanup(func() {
		filesMu.Lock()
		filesCache = saved
		filesMu.Unlock()
	})
	if _, _, err := Files("python"); !errors.Is(err, ErrNotBuilt) {
		t.Errorf("missing stdlib: %v", err)
	}
}
