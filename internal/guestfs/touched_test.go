package guestfs

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tetratelabs/wazero/experimental/sys"
)

func TestTrackRecordsWhatChanged(t *testing.T) {
	q, dir := newTestFS(t, 0)
	os.WriteFile(filepath.Join(dir, "old.txt"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(dir, "read-only.txt"), []byte("x"), 0o600)
	mustOpen(t, q, "before", rw).Write([]byte("not tracked"))
	q.Track()
	f := mustOpen(t, q, "new.txt", rw)
	f.Write([]byte("a"))
	f.Write([]byte("b")) // once
	mustOpen(t, q, "read-only.txt", sys.O_RDONLY)
	q.Mkdir("d", 0o700)
	mustOpen(t, q, "d/tmp", rw).Write([]byte("c"))
	q.Rename("d/tmp", "d/final")
	q.Link("old.txt", "hard")
	mustOpen(t, q, "old.txt", sys.O_RDWR).Truncate(0)
	paths, more := q.Touched()
	want := []string{"new.txt", "d/tmp", "d/final", "hard", "old.txt"}
	if !reflect.DeepEqual(paths, want) || more {
		t.Fatalf("Touched = %q, %v; want %q", paths, more, want)
	}
	mustOpen(t, q, "after", rw).Write([]byte("not tracked"))
	if paths, _ := q.Touched(); paths != nil {
		t.Fatalf("after Touched, still recording: %q", paths)
	}

	q.Track()
	for i := 0; i < MaxTouched+5; i++ {
		f, _ := q.OpenFile(fmt.Sprintf("f%d", i), rw, 0o600)
		f.Close()
	}
	if paths, more := q.Touched(); len(paths) != MaxTouched || !more {
		t.Fatalf("%d creations: %d paths, more %v", MaxTouched+5, len(paths), more)
	}
}
