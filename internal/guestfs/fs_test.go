package guestfs

import (
	"testing"

	"github.com/tetratelabs/wazero/experimental/sys"
)

const rw = sys.O_RDWR | sys.O_CREAT

func newTestFS(t *testing.T, limit int64) (*FS, string) {
	t.Helper()
	dir := t.TempDir()
	q, err := New(dir, limit)
	if err != nil {
		t.Fatal(err)
	}
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
