package worker

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"execd/sandbox"
)

// NewEngine returns before the guests are compiled; NewWorker waits for
// its guest as long as its context allows; Ready tells.
func TestEngineCompilesInTheBackground(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	source := func(lang string) ([]byte, error) {
		<-release
		return sandbox.Module(lang)
	}
	cfg := testConfig(true)
	e, err := newEngine(context.Background(), cfg, nil, source)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	if len(e.Languages()) == 0 {
		t.Fatal("no languages before compilation")
	}
	select {
	case <-e.Ready("javascript"):
		t.Fatal("ready before the module was even read")
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	_, err = e.NewWorker(ctx, "javascript", WorkerOptions{})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("NewWorker while compiling, with a short deadline: %v", err)
	}
	if err := e.Wait(context.Background(), "cobol"); !errors.Is(err, ErrUnknownLanguage) {
		t.Errorf("Wait for an unknown language: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		w, err := e.NewWorker(context.Background(), "javascript", WorkerOptions{})
		if err == nil {
			w.Close()
		}
		done <- err
	}()
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("NewWorker once compiled: %v", err)
	}
	<-e.Ready("javascript")
}

func TestWorkerLifecycle(t *testing.T) {
	t.Parallel()
	e := testEngine(t, true)
	if got := e.Languages(); len(got) == 0 || got[0] != "javascript" {
		t.Fatalf("Languages() = %v", got)
	}
	if _, err := e.NewWorker(context.Background(), "cobol", WorkerOptions{}); !errors.Is(err, ErrUnknownLanguage) {
		t.Errorf("unknown language: %v", err)
	}
	w := newWorker(t, e, WorkerOptions{})
	if w.Language() != "javascript" {
		t.Errorf("Language() = %q", w.Language())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if r := w.Run(context.Background(), "1", RunOptions{}); r.Status != StatusError {
		t.Errorf("Run after Close: %s", describe(r))
	}
}

func TestParallelWorkers(t *testing.T) {
	t.Parallel()
	e := testEngine(t, true)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := e.NewWorker(context.Background(), "javascript", WorkerOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			defer w.Close()
			for j := 0; j < 20; j++ {
				r := w.Run(context.Background(), "globalThis.c = (globalThis.c || 0) + 1; console.log(c); c", RunOptions{})
				if r.Status != StatusOK || value(r) != ftoa(float64(j+1)) {
					t.Errorf("worker run %d: %s", j, describe(r))
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestEngineClose(t *testing.T) {
	t.Parallel()
	e := startEngine(t, testConfig(false))
	w := newWorker(t, e, WorkerOptions{})
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := w.Run(context.Background(), "1", RunOptions{}); r.Status != StatusError {
		t.Errorf("Run after engine Close: %s", describe(r))
	}
	if _, err := e.NewWorker(context.Background(), "javascript", WorkerOptions{}); !errors.Is(err, ErrClosed) {
		t.Errorf("NewWorker after Close: %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []Config{{MemoryLimitMiB: 8}, {MaxOutputBytes: -1}, {InterruptGrace: -time.Second},
		{TotalMemoryMiB: 10}, {TotalMemoryMiB: -1}, {PythonPreload: []string{"json", "os; import sys"}}} {
		if _, err := NewEngine(context.Background(), c, nil); err == nil {
			t.Errorf("NewEngine(%+v) accepted", c)
		}
	}
}
