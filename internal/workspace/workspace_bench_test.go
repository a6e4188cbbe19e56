package workspace

import (
	"context"
	"testing"

	"github.com/tetratelabs/wazero/experimental/sys"
)

// BenchmarkRun measures the Manager's overhead around one run of a warm
// workspace.
func BenchmarkRun(b *testing.B) {
	m, err := NewManager(Config{DataDir: b.TempDir()}, newFakeFactory(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(context.Background())
	req := Request{Principal: "p", Workspace: "w", Language: "js", Code: "set x 1"}
	for b.Loop() {
		if _, err := m.Run(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQuotaWrite measures a small write through QuotaFS.
func BenchmarkQuotaWrite(b *testing.B) {
	fsys, err := NewQuotaFS(b.TempDir(), 1<<40)
	if err != nil {
		b.Fatal(err)
	}
	defer fsys.(*QuotaFS).Close()
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
