package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"execd/internal/workspace"
)

// fakeRegistry records what Shared asks of it; a Run blocks until release
// is closed when one is set.
type fakeRegistry struct {
	mu         sync.Mutex
	running    int
	maxRunning int
	hibernated []string
	saveErr    error
	release    chan struct{}
}

func (f *fakeRegistry) Run(ctx context.Context, req workspace.Request) (workspace.Outcome, error) {
	if err := workspace.ValidateID(req.Workspace); req.Workspace != "" && err != nil {
		return workspace.Outcome{}, err
	}
	f.mu.Lock()
	f.running++
	f.maxRunning = max(f.maxRunning, f.running)
	rel := f.release
	f.mu.Unlock()
	if rel != nil {
		<-rel
	}
	f.mu.Lock()
	f.running--
	f.mu.Unlock()
	ws := req.Workspace
	if ws == "" {
		ws = "minted"
	}
	return workspace.Outcome{Workspace: ws}, nil
}
func (f *fakeRegistry) NewID() string { return "new" }
func (f *fakeRegistry) ListPage(string, *workspace.ListFrom, int) ([]workspace.Info, bool) {
	return nil, false
}
func (f *fakeRegistry) Reset(context.Context, string, string, bool) error { return nil }
func (f *fakeRegistry) Delete(context.Context, string, string) error      { return nil }
func (f *fakeRegistry) Checkpoint(context.Context, string, string, string) (string, error) {
	return "cp-1", nil
}
func (f *fakeRegistry) RestoreCheckpoint(context.Context, string, string, string) error { return nil }
func (f *fakeRegistry) Fork(context.Context, string, string, string) (string, error) {
	return "fork", nil
}
func (f *fakeRegistry) ReadFile(context.Context, string, string, string, int64, int64) (workspace.FileData, error) {
	return workspace.FileData{Data: []byte("x")}, nil
}
func (f *fakeRegistry) WriteFile(context.Context, string, string, string, []byte) (workspace.FileInfo, error) {
	return workspace.FileInfo{}, nil
}
func (f *fakeRegistry) RecentFiles(string) []workspace.FileInfo { return nil }
func (f *fakeRegistry) Hibernate(_ context.Context, _, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hibernated = append(f.hibernated, id)
	return f.saveErr
}

type sinkFunc func(float64, float64, string)

func (s sinkFunc) Progress(d, t float64, m string) { s(d, t, m) }

func TestSharedOneInstanceAtATime(t *testing.T) {
	dir := t.TempDir()
	reg1, reg2 := &fakeRegistry{release: make(chan struct{})}, &fakeRegistry{}
	a, _ := NewShared(reg1, dir, nil)
	b, _ := NewShared(reg2, dir, nil) // another instance on the same storage
	first := make(chan error, 1)
	go func() {
		_, err := a.Run(context.Background(), workspace.Request{Principal: "p", Workspace: "w"})
		first <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		reg1.mu.Lock()
		n := reg1.running
		reg1.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first run is not running after 10 s (%d running)", n)
		}
	}
	told := make(chan string, 1)
	second := make(chan error, 1)
	go func() {
		_, err := b.Run(context.Background(), workspace.Request{Principal: "p", Workspace: "w",
			Sink: sinkFunc(func(_, _ float64, m string) { told <- m })})
		second <- err
	}()
	select {
	case m := <-told:
		if m == "" {
			t.Error("empty queued message")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second instance did not report waiting")
	}
	select {
	case <-second:
		t.Fatal("the second instance ran while the first held the workspace")
	default:
	}
	close(reg1.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if len(reg1.hibernated) != 1 || len(reg2.hibernated) != 1 {
		t.Errorf("saves: first %v, second %v; want one each", reg1.hibernated, reg2.hibernated)
	}
	// Another workspace is not held up by this one.
	if _, err := b.Run(context.Background(), workspace.Request{Principal: "p", Workspace: "other"}); err != nil {
		t.Fatal(err)
	}
}

func TestSharedKeepsAnUnsaveableWorkspaceLocked(t *testing.T) {
	dir := t.TempDir()
	reg := &fakeRegistry{saveErr: &workspace.Error{Code: workspace.NotSaveable, Msg: "open files"}}
	a, _ := NewShared(reg, dir, nil)
	b, _ := NewShared(&fakeRegistry{}, dir, nil)
	if _, err := a.Run(context.Background(), workspace.Request{Principal: "p", Workspace: "w"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := b.Run(ctx, workspace.Request{Principal: "p", Workspace: "w"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("another instance got a workspace still live here: %v", err)
	}
	// A later call here that saves lets it go.
	reg.saveErr = nil
	if _, err := a.Run(context.Background(), workspace.Request{Principal: "p", Workspace: "w"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Run(context.Background(), workspace.Request{Principal: "p", Workspace: "w"}); err != nil {
		t.Fatalf("after the save: %v", err)
	}
}

func TestSharedPassesBadIDsThroughWithoutLocking(t *testing.T) {
	reg := &fakeRegistry{}
	a, _ := NewShared(reg, t.TempDir(), nil)
	if _, err := a.Run(context.Background(), workspace.Request{Principal: "p", Workspace: "../x"}); !errors.Is(err, workspace.ErrInvalidID) {
		t.Fatalf("want the registry's invalid id error, got %v", err)
	}
	if len(reg.hibernated) != 0 || len(a.held) != 0 {
		t.Errorf("a bad id was saved or locked: %v %v", reg.hibernated, a.held)
	}
}

func TestSharedSavesANewWorkspace(t *testing.T) {
	reg := &fakeRegistry{}
	a, _ := NewShared(reg, t.TempDir(), nil)
	out, err := a.Run(context.Background(), workspace.Request{Principal: "p"})
	if err != nil || out.Workspace != "minted" {
		t.Fatal(out, err)
	}
	if len(reg.hibernated) != 1 || reg.hibernated[0] != "minted" || len(a.held) != 0 {
		t.Errorf("saved %v, held %v", reg.hibernated, a.held)
	}
}

// Checkpoints, restores, forks and file access take the workspace's lock,
// like a run: while another instance holds the workspace, they wait.
func TestSharedWorkspaceOperationsTakeTheLock(t *testing.T) {
	dir := t.TempDir()
	reg := &fakeRegistry{saveErr: &workspace.Error{Code: workspace.NotSaveable, Msg: "open files"}}
	a, _ := NewShared(reg, dir, nil)
	b, _ := NewShared(&fakeRegistry{}, dir, nil)
	if _, err := a.Run(context.Background(), workspace.Request{Principal: "p", Workspace: "w"}); err != nil {
		t.Fatal(err) // w stays live, and locked, on a
	}
	for name, op := range map[string]func(context.Context) error{
		"checkpoint": func(ctx context.Context) error { _, err := b.Checkpoint(ctx, "p", "w", ""); return err },
		"restore":    func(ctx context.Context) error { return b.RestoreCheckpoint(ctx, "p", "w", "cp-1") },
		"fork":       func(ctx context.Context) error { _, err := b.Fork(ctx, "p", "w", ""); return err },
		"read":       func(ctx context.Context) error { _, err := b.ReadFile(ctx, "p", "w", "f", 0, 1); return err },
		"write":      func(ctx context.Context) error { _, err := b.WriteFile(ctx, "p", "w", "f", nil); return err },
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		if err := op(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s on another instance while the workspace is held here: %v", name, err)
		}
		cancel()
	}
	// Once the workspace is saved there, the lock is free.
	reg.saveErr = nil
	if _, err := a.Run(context.Background(), workspace.Request{Principal: "p", Workspace: "w"}); err != nil {
		t.Fatal(err)
	}
	if cp, err := b.Checkpoint(context.Background(), "p", "w", ""); err != nil || cp != "cp-1" {
		t.Fatalf("checkpoint once the lock is free: %q %v", cp, err)
	}
}
