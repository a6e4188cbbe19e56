package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestWriteReplacesWhole(t *testing.T) {
	for _, d := range []Durability{Atomic, Durable} {
		dir := t.TempDir()
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, []byte("old content"), 0o600); err != nil {
			t.Fatal(err)
		}
		err := Write(p, 0o640, d, func(f *os.File) error {
			_, err := f.WriteString("new")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(p); string(b) != "new" {
			t.Errorf("durability %d: content %q", d, b)
		}
		if st, _ := os.Stat(p); st.Mode().Perm() != 0o640 {
			t.Errorf("durability %d: mode %v", d, st.Mode())
		}
		assertOnly(t, dir, "f")
	}
}

func TestWriteFailureKeepsTheOldFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, []byte("old"), 0o600)
	boom := errors.New("boom")
	err := Write(p, 0o600, Durable, func(f *os.File) error {
		f.WriteString("half of the new")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want the write's error", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Errorf("content after a failed write: %q", b)
	}
	assertOnly(t, dir, "f")

	// A rename that cannot replace the target (a directory) fails too and
	// leaves nothing behind.
	os.Mkdir(filepath.Join(dir, "d"), 0o700)
	if err := Write(filepath.Join(dir, "d"), 0o600, Atomic, func(*os.File) error { return nil }); err == nil {
		t.Error("Write over a directory succeeded")
	}
	assertOnly(t, dir, "d", "f")
}

// assertOnly fails unless dir holds exactly names (no temporary file).
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Errorf("%s holds %q, want %q", dir, got, names)
	}
}

func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Symlink("fifo", filepath.Join(dir, "link"))
	for _, p := range []string{fifo, filepath.Join(dir, "link"), dir, "/dev/null"} {
		if _, err := ReadFile(p); !errors.Is(err, ErrNotRegular) {
			t.Errorf("ReadFile(%s) = %v, want ErrNotRegular", p, err)
		}
	}
	p := filepath.Join(dir, "f")
	os.WriteFile(p, []byte("data"), 0o600)
	if b, err := ReadFile(p); err != nil || string(b) != "data" {
		t.Errorf("ReadFile of a regular file = %q, %v", b, err)
	}
	if _, err := Open(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open of a missing file = %v", err)
	}
}
