package sandbox

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"strings"
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
	if at != "/usr" {
		t.Errorf("mount point %q", at)
	}
	for _, name := range []string{"os.py", "json/__init__.py", "json/__pycache__/__init__.cpython-311.pyc", "encodings/utf_8.py",
		"sqlite3/__init__.py"} {
		name = "local/lib/python3.11/" + name
		st, err := fs.Stat(fsys, name)
		if err != nil || st.IsDir() || st.Mode().Perm()&0o222 != 0 {
			t.Errorf("%s: %v %v", name, st, err)
		}
	}
	for _, name := range []string{"dateutil/parser/__init__.py", "tabulate.py", "pytz/__init__.py", "openpyxl/__init__.py",
		"et_xmlfile/__init__.py", "png.py", "networkx/__init__.py", "yaml/__init__.py", "jinja2/__init__.py",
		"markupsafe/_native.py", "sympy/__init__.py", "mpmath/__init__.py", "six.py",
		"sympy/__pycache__/__init__.cpython-311.pyc"} {
		if st, err := fs.Stat(fsys, "lib/python3/dist-packages/"+name); err != nil || st.IsDir() {
			t.Errorf("kit %s: %v %v", name, st, err)
		}
	}
	// Only what the guest can run: no C extensions, no tests.
	err = fs.WalkDir(fsys, "lib", func(path string, d fs.DirEntry, err error) error {
		if err == nil && (strings.HasSuffix(path, ".so") || d.IsDir() && d.Name() == "tests") {
			t.Errorf("packaged: %s", path)
		}
		return err
	})
	if err != nil {
		t.Error(err)
	}
	for _, name := range []string{"Europe/Paris", "America/New_York", "UTC", "tzdata.zi", "zone1970.tab"} {
		if st, err := fs.Stat(fsys, "share/zoneinfo/"+name); err != nil || st.IsDir() || st.Size() == 0 {
			t.Errorf("zoneinfo %s: %v %v", name, st, err)
		}
	}
	matches, err := fs.Glob(fsys, "local/lib/python3.11/_sysconfigdata_*.py")
	if err != nil || len(matches) != 1 {
		t.Errorf("_sysconfigdata: %v %v", matches, err)
	}
	for _, gone := range []string{"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "sqlite3/test"} {
		if _, err := fs.Stat(fsys, "local/lib/python3.11/"+gone); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is packaged: %v", gone, err)
		}
	}
	// Regular files seek and read at offsets (buffered I/O in the guest).
	f, err := fsys.Open("local/lib/python3.11/os.py")
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
	filesCache = map[string]tree{}
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
