package guestfs

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tetratelabs/wazero/experimental/sys"
)

// TestIdleFSHoldsNoDescriptors: between turns an FS holds no file
// descriptor, and the preopen's handle opens none to say it is a directory.
func TestIdleFSHoldsNoDescriptors(t *testing.T) {
	base := openFDs(t)
	var all []*FS
	for i := range 20 {
		dir := filepath.Join(t.TempDir(), strconv.Itoa(i))
		os.Mkdir(dir, 0o700)
		q, err := New(dir, 0)
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
