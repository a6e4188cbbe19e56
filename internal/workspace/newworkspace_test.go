package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// A new workspace makes no directory until something is written in it:
// its code runs, it is listed, read (no such file, not no such
// workspace), checkpointed, hibernated and restored, forked (the fork
// makes none either) and restored from its checkpoint. The first write
// makes it, 0700, with the principal's state root; a checkpoint taken
// with no files restores as none.
func TestANewWorkspaceMakesNoDirectory(t *testing.T) {
	m := newTestManager(t, Config{}, newFakeFactory("javascript"))
	ctx := context.Background()
	pdir := filepath.Join(m.cfg.DataDir, "p")
	dir := filepath.Join(pdir, "w")
	run(t, m, "p", "w", "set x 1")
	if _, err := os.Stat(pdir); !os.IsNotExist(err) {
		t.Fatalf("a new workspace that wrote nothing made its principal's directory: %v", err)
	}
	if l := m.List("p"); len(l) != 1 || l[0].ID != "w" || !l[0].Live || l[0].DiskBytes != 0 {
		t.Errorf("List: %+v", l)
	}
	if _, err := m.ReadFile(ctx, "p", "w", "f.txt", 0, 10); !errors.Is(err, ErrFileNotFound) {
		t.Errorf("reading a file of a workspace with no directory: %v; want no such file", err)
	}
	if _, err := m.Checkpoint(ctx, "p", "w", "one"); err != nil {
		t.Fatal(err)
	}
	if err := m.Hibernate(ctx, "p", "w"); err != nil {
		t.Fatal(err)
	}
	if l := m.List("p"); len(l) != 1 || !l[0].Hibernated || l[0].LastUsed.IsZero() {
		t.Errorf("List of the hibernated workspace: %+v", l)
	}
	if out := run(t, m, "p", "w", "get x"); value(out.Result) != "1" || out.Result.Reset {
		t.Errorf("restored from its image: %+v", out.Result)
	}
	if _, err := m.Fork(ctx, "p", "w", "f"); err != nil {
		t.Fatal(err)
	}
	if out := run(t, m, "p", "f", "get x"); value(out.Result) != "1" {
		t.Errorf("the fork: %+v", out.Result)
	}
	if exists(dir) || exists(filepath.Join(pdir, "f")) {
		t.Fatalf("a checkpoint, a hibernation or a fork made a files directory")
	}
	// A fork onto a workspace that has written nothing finds it.
	run(t, m, "p", "other", "set y 2")
	if _, err := m.Fork(ctx, "p", "w", "other"); !errors.Is(err, ErrExists) {
		t.Errorf("a fork onto a live workspace with no directory: %v; want exists", err)
	}
	if out := run(t, m, "p", "other", "get y"); value(out.Result) != "2" {
		t.Errorf("the workspace forked onto: %+v", out.Result)
	}
	if err := m.RestoreCheckpoint(ctx, "p", "w", "one"); err != nil {
		t.Fatal(err)
	}
	if out := run(t, m, "p", "w", "get x"); value(out.Result) != "1" {
		t.Errorf("after restoring the checkpoint: %+v", out.Result)
	}

	run(t, m, "p", "w", "write a.txt hello")
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Fatalf("after the first write: %v, %v; want a 0700 directory", st, err)
	}
	if !isDir(filepath.Join(pdir, stateDirName)) {
		t.Error("the principal's state root was not made with the files directory")
	}
	if err := m.RestoreCheckpoint(ctx, "p", "w", "one"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ReadFile(ctx, "p", "w", "a.txt", 0, 10); !errors.Is(err, ErrFileNotFound) {
		t.Errorf("after restoring a checkpoint taken with no files: %v; want no such file", err)
	}
	for _, id := range []string{"w", "f", "other"} {
		if err := m.Delete(ctx, "p", id); err != nil {
			t.Fatal(err)
		}
	}
	if l := m.List("p"); len(l) != 0 {
		t.Errorf("List after Delete: %+v", l)
	}
}

// Workspaces with nothing on disk count against
// MaxWorkspacesPerPrincipal: new workspaces at once never pass it.
func TestWorkspacesPerPrincipalAtOnce(t *testing.T) {
	const limit, n = 3, 12
	m := newTestManager(t, Config{MaxWorkspacesPerPrincipal: limit}, newFakeFactory("javascript"))
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := m.Run(context.Background(), Request{Principal: "p", Workspace: fmt.Sprintf("w%d", i), Language: "javascript", Code: "set x 1"})
			errs <- err
		}()
	}
	ok := 0
	for range n {
		err := <-errs
		if err == nil {
			ok++
			continue
		}
		limitNamed(t, "a workspace past the limit", err, "workspace.max_workspaces_per_principal")
	}
	if ok != limit {
		t.Errorf("%d new workspaces at once made %d; want %d", n, ok, limit)
	}
	if l := m.List("p"); len(l) != limit {
		t.Errorf("List: %d workspaces; want %d", len(l), limit)
	}
}
