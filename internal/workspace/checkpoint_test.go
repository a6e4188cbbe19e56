package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCheckpointAndRestore(t *testing.T) {
	f := newFakeFactory("javascript", "python")
	m := newTestManager(t, Config{MaxWorkspaces: 1}, f)
	ctx := context.Background()
	runLang(t, m, "p", "w", "javascript", "set x js1")
	runLang(t, m, "p", "w", "python", "set x py1") // javascript is hibernated now (cap 1)
	run(t, m, "p", "w", "write f.txt first")
	name, err := m.Checkpoint(ctx, "p", "w", "before")
	if err != nil || name != "before" {
		t.Fatalf("Checkpoint = %q, %v", name, err)
	}
	// Changes after the checkpoint: variables, a file rewritten, a file
	// appended in place, a new file.
	run(t, m, "p", "w", "write g.txt g1")
	if _, err := m.Checkpoint(ctx, "p", "w", ""); err != nil {
		t.Fatal(err)
	}
	runLang(t, m, "p", "w", "javascript", "set x js2")
	runLang(t, m, "p", "w", "python", "set x py2")
	run(t, m, "p", "w", "write f.txt second")
	run(t, m, "p", "w", "append g.txt +more")
	run(t, m, "p", "w", "write new.txt n")

	if err := m.RestoreCheckpoint(ctx, "p", "w", "before"); err != nil {
		t.Fatal(err)
	}
	for lang, want := range map[string]string{"javascript": "js1", "python": "py1"} {
		out := runLang(t, m, "p", "w", lang, "get x")
		if value(out.Result) != want || out.Result.Status != StatusOK || out.Result.Reset || !out.Restored {
			t.Errorf("%s after restore: %+v", lang, out)
		}
	}
	if out := run(t, m, "p", "w", "read f.txt"); value(out.Result) != "first" {
		t.Errorf("f.txt = %s", value(out.Result))
	}
	for _, gone := range []string{"g.txt", "new.txt"} {
		if out := run(t, m, "p", "w", "read "+gone); out.Result.Status != StatusError {
			t.Errorf("%s after restore: %+v", gone, out.Result)
		}
	}
	// The second checkpoint kept g.txt as it was, despite the append.
	if err := m.RestoreCheckpoint(ctx, "p", "w", "cp-1"); err != nil {
		t.Fatal(err)
	}
	if out := run(t, m, "p", "w", "read g.txt"); value(out.Result) != "g1" {
		t.Errorf("g.txt in cp-1 = %s", value(out.Result))
	}
	// And a restored checkpoint stays restorable.
	if err := m.RestoreCheckpoint(ctx, "p", "w", "before"); err != nil {
		t.Fatal(err)
	}
	if out := runLang(t, m, "p", "w", "python", "get x"); value(out.Result) != "py1" {
		t.Errorf("second restore: %+v", out)
	}

	l := m.List("p")
	if len(l) != 1 || len(l[0].Checkpoints) != 2 || l[0].Checkpoints[0].Name != "before" || l[0].Checkpoints[1].Name != "cp-1" ||
		strings.Join(l[0].Checkpoints[0].Languages, ",") != "javascript,python" || l[0].StateBytes == 0 {
		t.Errorf("List = %+v", l)
	}
}

func TestCheckpointRefusals(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{}, f)
	ctx := context.Background()
	run(t, m, "p", "w", "set x 1")
	if _, err := m.Checkpoint(ctx, "p", "w", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Checkpoint(ctx, "p", "w", "a"); !errors.Is(err, ErrExists) {
		t.Errorf("same name again: %v", err)
	}
	for _, bad := range []string{"../x", "a/b", ".", strings.Repeat("n", 65)} {
		if _, err := m.Checkpoint(ctx, "p", "w", bad); !errors.Is(err, ErrInvalidID) || !strings.Contains(err.Error(), "checkpoint name") {
			t.Errorf("name %q: %v", bad, err)
		}
		if err := m.RestoreCheckpoint(ctx, "p", "w", bad); !errors.Is(err, ErrInvalidID) {
			t.Errorf("restore %q: %v", bad, err)
		}
	}
	if err := m.RestoreCheckpoint(ctx, "p", "w", "nope"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `no checkpoint "nope"`) {
		t.Errorf("unknown checkpoint: %v", err)
	}
	if _, err := m.Checkpoint(ctx, "p", "ghost", ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown workspace: %v", err)
	}
	// A guest holding a file open cannot be saved: nothing is made.
	run(t, m, "p", "w", "open held")
	_, err := m.Checkpoint(ctx, "p", "w", "b")
	if !errors.Is(err, ErrNotSaveable) || !strings.Contains(err.Error(), "javascript") {
		t.Errorf("with an open file: %v", err)
	}
	var we *Error
	if !errors.As(err, &we) || we.Code != NotSaveable {
		t.Errorf("code: %v", err)
	}
	if l := m.List("p"); len(l[0].Checkpoints) != 1 {
		t.Errorf("checkpoints after a refusal: %+v", l[0].Checkpoints)
	}
	ents, _ := os.ReadDir(filepath.Join(m.cfg.DataDir, "p", stateDirName, "w", checkpointDirName))
	if len(ents) != 1 {
		t.Errorf("left behind: %v", ents)
	}
	run(t, m, "p", "w", "close")
	for i := 1; i < MaxCheckpoints; i++ {
		if _, err := m.Checkpoint(ctx, "p", "w", ""); err != nil {
			t.Fatalf("checkpoint %d: %v", i+1, err)
		}
	}
	if _, err := m.Checkpoint(ctx, "p", "w", ""); !errors.Is(err, ErrLimitReached) {
		t.Errorf("beyond MaxCheckpoints: %v", err)
	}
}

func TestForkIsACopy(t *testing.T) {
	f := newFakeFactory("javascript", "python")
	m := newTestManager(t, Config{}, f)
	ctx := context.Background()
	runLang(t, m, "p", "src", "javascript", "set x js")
	runLang(t, m, "p", "src", "python", "set x py")
	run(t, m, "p", "src", "write shared.txt parent")
	run(t, m, "p", "src", "write log.txt start")
	id, err := m.Fork(ctx, "p", "src", "copy")
	if err != nil || id != "copy" {
		t.Fatalf("Fork = %q, %v", id, err)
	}
	for lang, want := range map[string]string{"javascript": "js", "python": "py"} {
		out := runLang(t, m, "p", "copy", lang, "get x")
		if value(out.Result) != want || out.Result.Status != StatusOK || out.Result.Reset || !out.Restored {
			t.Errorf("%s in the fork: %+v", lang, out)
		}
	}
	if f.clones != 2 {
		t.Errorf("clones = %d, want 2 (one per language)", f.clones)
	}
	// Random generators were reseeded: the fork does not repeat the parent.
	a, b := run(t, m, "p", "src", "rand"), run(t, m, "p", "copy", "rand")
	if value(a.Result) == value(b.Result) {
		t.Errorf("parent and fork draw the same number %s", value(a.Result))
	}
	// Writes on either side stay on that side, in place or not.
	run(t, m, "p", "copy", "write shared.txt fork")
	run(t, m, "p", "src", "append log.txt +parent")
	run(t, m, "p", "copy", "append log.txt +fork")
	for _, c := range []struct{ ws, file, want string }{
		{"src", "shared.txt", "parent"}, {"copy", "shared.txt", "fork"},
		{"src", "log.txt", "start+parent"}, {"copy", "log.txt", "start+fork"},
	} {
		if out := run(t, m, "p", c.ws, "read "+c.file); value(out.Result) != c.want {
			t.Errorf("%s/%s = %s, want %s", c.ws, c.file, value(out.Result), c.want)
		}
	}
	runLang(t, m, "p", "copy", "python", "set x changed")
	if out := runLang(t, m, "p", "src", "python", "get x"); value(out.Result) != "py" {
		t.Errorf("parent after the fork changed: %s", value(out.Result))
	}

	// A generated id; a taken one is refused; the source must exist.
	gen, err := m.Fork(ctx, "p", "src", "")
	if err != nil || ValidateID(gen) != nil || len(gen) != 36 {
		t.Errorf("generated fork id %q: %v", gen, err)
	}
	for _, taken := range []string{"copy", "src"} {
		if _, err := m.Fork(ctx, "p", "src", taken); !errors.Is(err, ErrExists) {
			t.Errorf("fork onto %s: %v", taken, err)
		}
	}
	if _, err := m.Fork(ctx, "p", "ghost", "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("fork of nothing: %v", err)
	}
	if _, err := m.Fork(ctx, "p", "src", "../x"); !errors.Is(err, ErrInvalidID) {
		t.Errorf("bad id: %v", err)
	}
	l := m.List("p")
	if len(l) != 3 {
		t.Errorf("List = %+v", l)
	}
}

func TestForkCountsAgainstQuota(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{MaxDiskMiB: 1}, f)
	ctx := context.Background()
	big := strings.Repeat("x", 700<<10)
	run(t, m, "p", "src", "write a "+big)
	if _, err := m.Fork(ctx, "p", "src", "copy"); err != nil {
		t.Fatal(err)
	}
	// The fork starts with the parent's usage: 700 KiB more do not fit
	// (the first write is shortened to fit, the next is refused).
	run(t, m, "p", "copy", "write b "+big)
	out := run(t, m, "p", "copy", "write c "+big)
	if !out.DiskFull || out.DiskQuotaBytes != 1<<20 {
		t.Errorf("write beyond the fork's quota: %+v", out)
	}
	if l := m.List("p"); l[0].DiskBytes < 700<<10 || l[1].DiskBytes < 700<<10 {
		t.Errorf("usage: %+v", l)
	}
}

func TestCheckpointsAndForksArePrincipalScoped(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{}, f)
	ctx := context.Background()
	run(t, m, "alice", "w", "set secret 42")
	run(t, m, "alice", "w", "write s.txt alice")
	if _, err := m.Checkpoint(ctx, "alice", "w", "c"); err != nil {
		t.Fatal(err)
	}
	if err := m.RestoreCheckpoint(ctx, "bob", "w", "c"); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob restores alice's checkpoint: %v", err)
	}
	if _, err := m.Fork(ctx, "bob", "w", "mine"); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob forks alice's workspace: %v", err)
	}
	if _, err := m.Checkpoint(ctx, "bob", "w", "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob checkpoints alice's workspace: %v", err)
	}
	if l := m.List("bob"); len(l) != 0 {
		t.Errorf("bob's list: %+v", l)
	}
	// Bob's own workspace of the same name has none of alice's checkpoints.
	run(t, m, "bob", "w", "set x 1")
	if err := m.RestoreCheckpoint(ctx, "bob", "w", "c"); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob's w restores alice's checkpoint: %v", err)
	}
	if l := m.List("bob"); len(l) != 1 || len(l[0].Checkpoints) != 0 {
		t.Errorf("bob's list: %+v", l)
	}
	if out := run(t, m, "alice", "w", "get secret"); value(out.Result) != "42" {
		t.Errorf("alice's state: %+v", out)
	}
}

func TestResetKeepsCheckpointsDeleteRemovesAll(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{MaxWorkspaces: 1}, f)
	ctx := context.Background()
	run(t, m, "p", "w", "set x 1")
	m.Checkpoint(ctx, "p", "w", "c")
	run(t, m, "p", "other", "set y 1") // w hibernates
	if err := m.Reset(ctx, "p", "w", true); err != nil {
		t.Fatal(err)
	}
	out := run(t, m, "p", "w", "get x")
	if out.Result.Value != nil || out.ResetReason != ReasonResetByUser {
		t.Errorf("after Reset of a hibernated workspace: %+v %q", out.Result, out.ResetReason)
	}
	if err := m.RestoreCheckpoint(ctx, "p", "w", "c"); err != nil {
		t.Fatalf("checkpoint after Reset: %v", err)
	}
	if out := run(t, m, "p", "w", "get x"); value(out.Result) != "1" {
		t.Errorf("restored: %+v", out)
	}
	if err := m.Delete(ctx, "p", "w"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(m.cfg.DataDir, "p", "w"), filepath.Join(m.cfg.DataDir, "p", stateDirName, "w")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s after Delete: %v", p, err)
		}
	}
	if out := run(t, m, "p", "w", "get x"); out.Result.Reset || out.Result.Value != nil {
		t.Errorf("a new workspace after Delete: %+v", out)
	}
}

func TestStateDirectoryCannotBeAWorkspace(t *testing.T) {
	// No id can reach the state directory, and List never shows it.
	m := newTestManager(t, Config{}, newFakeFactory())
	if err := ValidateID(stateDirName); err == nil {
		t.Fatalf("%q is a valid id", stateDirName)
	}
	run(t, m, "p", "w", "set x 1")
	m.Checkpoint(context.Background(), "p", "w", "c")
	for _, in := range m.List("p") {
		if in.ID != "w" {
			t.Errorf("List shows %q", in.ID)
		}
	}
	if _, err := m.Run(context.Background(), Request{Principal: "p", Workspace: stateDirName, Language: "js"}); !errors.Is(err, ErrInvalidID) {
		t.Errorf("Run in %s: %v", stateDirName, err)
	}
	// Images are 0600, state directories 0700.
	filepath.Walk(filepath.Join(m.cfg.DataDir, "p", stateDirName), func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if info.IsDir() {
			want = 0o700
		}
		if info.Mode().Perm()&^want != 0 && !strings.Contains(p, fmt.Sprint(filepath.Separator, filesDirName)) {
			t.Errorf("%s has mode %v", p, info.Mode().Perm())
		}
		return nil
	})
}

// Times set through a handle in a fork or after a checkpoint change neither
// the parent's file nor the checkpoint's copy, which share its data.
func TestTimesSetThroughAHandleStayInTheirWorkspace(t *testing.T) {
	m := newTestManager(t, Config{}, newFakeFactory())
	ctx := context.Background()
	run(t, m, "p", "w", "write big.bin data")
	root := filepath.Join(m.cfg.DataDir, "p")
	mtime := func(p string) time.Time {
		st, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return st.ModTime()
	}
	before := mtime("w/big.bin")
	if _, err := m.Fork(ctx, "p", "w", "w2"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Checkpoint(ctx, "p", "w", "c"); err != nil {
		t.Fatal(err)
	}
	if out := run(t, m, "p", "w2", "utimefd big.bin"); out.Result.Status != StatusOK {
		t.Fatalf("utimefd in the fork: %+v", out.Result)
	}
	if got := mtime("w2/big.bin"); got.Unix() != 1e9 {
		t.Errorf("the fork's mtime is %v", got)
	}
	if got := mtime("w/big.bin"); !got.Equal(before) {
		t.Errorf("the fork changed the parent's mtime to %v", got)
	}
	if out := run(t, m, "p", "w", "utimefd big.bin"); out.Result.Status != StatusOK {
		t.Fatalf("utimefd in the parent: %+v", out.Result)
	}
	if got := mtime(filepath.Join(stateDirName, "w", checkpointDirName, "c", filesDirName, "big.bin")); !got.Equal(before) {
		t.Errorf("the checkpoint's copy has mtime %v", got)
	}
}

// A fork of a hibernated workspace takes over its images bound to itself:
// they restore in the fork, and the parent's stay the parent's.
func TestForkOfAHibernatedWorkspace(t *testing.T) {
	m := newTestManager(t, Config{}, newFakeFactory())
	ctx := context.Background()
	run(t, m, "p", "src", "set x js")
	if err := m.Hibernate(ctx, "p", "src"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Fork(ctx, "p", "src", "copy"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"copy", "src"} {
		if out := run(t, m, "p", id, "get x"); value(out.Result) != "js" || out.Result.Reset || !out.Restored {
			t.Errorf("%s: %+v", id, out)
		}
	}
}
