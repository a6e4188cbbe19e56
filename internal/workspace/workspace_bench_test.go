package workspace

import (
	"context"
	"strconv"
	"testing"
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

// BenchmarkNewWorkspace measures the Manager's own cost of a new
// workspace's first run (its directories, its note; the interpreter is a
// fake): run it with TMPDIR on the file system data_dir will be on.
func BenchmarkNewWorkspace(b *testing.B) {
	m, err := NewManager(Config{DataDir: b.TempDir(), MaxWorkspaces: 1 << 20}, newFakeFactory(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(context.Background())
	i := 0
	for b.Loop() {
		i++
		req := Request{Principal: "p", Workspace: "w" + strconv.Itoa(i), Language: "js", Code: "set x 1"}
		if _, err := m.Run(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
