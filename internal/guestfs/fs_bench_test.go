package guestfs

import (
	"testing"

	"github.com/tetratelabs/wazero/experimental/sys"
)

// BenchmarkQuotaWrite measures a small write through an FS.
func BenchmarkQuotaWrite(b *testing.B) {
	fsys, err := New(b.TempDir(), 1<<40)
	if err != nil {
		b.Fatal(err)
	}
	defer fsys.Close()
	f, errno := fsys.OpenFile("f", sys.O_RDWR|sys.O_CREAT, 0o600)
	if errno != 0 {
		b.Fatal(errno)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for b.Loop() {
		if _, errno := f.Pwrite(buf, 0); errno != 0 {
			b.Fatal(errno)
		}
	}
}
