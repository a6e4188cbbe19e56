package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestResetAndDelete(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{}, f)
	ctx := context.Background()
	wdir := filepath.Join(m.cfg.DataDir, "p", "w")
	run(t, m, "p", "w", "set x 1")
	run(t, m, "p", "w", "write f.txt 1")

	if err := m.Reset(ctx, "p", "w", false); err != nil {
		t.Fatal(err)
	}
	if f.liveCount() != 0 {
		t.Error("Reset kept the runner")
	}
	if _, err := os.Stat(filepath.Join(wdir, "f.txt")); err != nil {
		t.Error("Reset without files removed files")
	}
	if out := run(t, m, "p", "w", "get x"); out.Result.Value != nil {
		t.Error("state survived Reset")
	}
	if err := m.Reset(ctx, "p", "w", true); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(wdir); err != nil || len(ents) != 0 {
		t.Errorf("after Reset files: %v %v", ents, err)
	}
	// A workspace with files only (written by write_file, never run) is
	// still there after its files are reset.
	if _, err := m.WriteFile(ctx, "p", "filesonly", "a.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := m.Reset(ctx, "p", "filesonly", true); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ReadFile(ctx, "p", "filesonly", "a.txt", 0, 1); !errors.Is(err, ErrFileNotFound) {
		t.Errorf("reading a reset file of a files-only workspace: %v; want no such file", err)
	}
	if err := m.Delete(ctx, "p", "filesonly"); err != nil {
		t.Fatal(err)
	}
	run(t, m, "p", "w", "set x 1")
	if err := m.Delete(ctx, "p", "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(wdir); !os.IsNotExist(err) {
		t.Errorf("directory after Delete: %v", err)
	}
	if l := m.List("p"); len(l) != 0 {
		t.Errorf("List after Delete: %+v", l)
	}
	if err := m.Delete(ctx, "p", "w"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Delete: %v", err)
	}
	// A workspace made again after Delete is new, not reset.
	if out := run(t, m, "p", "w", "set x 1"); out.Result.Reset {
		t.Error("recreated workspace reported reset")
	}
	if err := m.Reset(ctx, "p", "nope", false); !errors.Is(err, ErrNotFound) {
		t.Errorf("Reset unknown: %v", err)
	}
	var we *Error
	if err := m.Delete(ctx, "p", "nope"); !errors.As(err, &we) || we.Msg != `workspace "nope" does not exist` {
		t.Errorf("Delete unknown: %v", err)
	}
}

func TestResetWaitsForRunningCall(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{}, f)
	first := startWait(t, m, f, "p", "w", "0")
	done := make(chan error, 1)
	go func() { done <- m.Reset(context.Background(), "p", "w", false) }()
	// Reset queues behind the running call; a cancelled Reset gives up.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Delete(ctx, "p", "w"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Delete: %v", err)
	}
	f.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if f.liveCount() != 0 {
		t.Error("runner alive after Reset")
	}
}

func TestStartFailure(t *testing.T) {
	f := newFakeFactory()
	f.newErr = errors.New("out of memory")
	m := newTestManager(t, Config{}, f)
	_, err := m.Run(context.Background(), Request{Principal: "p", Workspace: "w", Language: "js"})
	if !errors.Is(err, ErrStartFailed) || !strings.Contains(err.Error(), "out of memory") {
		t.Errorf("%v", err)
	}
	if len(m.wss) != 0 {
		t.Error("record kept after a failed start")
	}
}

func TestCloseIdempotent(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{IdleTTL: time.Hour}, f)
	run(t, m, "p", "a", "set x 1")
	run(t, m, "p", "b", "set x 1")
	for range 2 {
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if f.liveCount() != 0 {
		t.Errorf("live after Close = %d", f.liveCount())
	}
	if _, err := m.Run(context.Background(), Request{Principal: "p", Workspace: "a", Language: "js"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v", err)
	}
}

func TestCloseWaitsForRunning(t *testing.T) {
	f := newFakeFactory()
	m := newTestManager(t, Config{}, f)
	first := startWait(t, m, f, "p", "w", "0")
	closed := make(chan error, 1)
	go func() { closed <- m.Close(context.Background()) }()
	f.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if f.liveCount() != 0 {
		t.Errorf("live after Close = %d", f.liveCount())
	}

	// With a deadline, Close gives up waiting and closes under the run.
	f2 := newFakeFactory()
	m2 := newTestManager(t, Config{}, f2)
	second := startWait(t, m2, f2, "p", "w", "1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m2.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close with an ended ctx: %v", err)
	}
	if f2.liveCount() != 0 {
		t.Errorf("live after forced Close = %d", f2.liveCount())
	}
	f2.release <- struct{}{}
	<-second
}
