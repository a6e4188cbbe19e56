package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tetratelabs/wazero/experimental/sys"
	"go.uber.org/zap"

	"execd/internal/worker"
)

// fakeFactory makes fakeRunners, which understand a tiny language:
//
//	set K V    remember K=V          get K      value of K
//	write F S  write S to file F     wait       block until released
//	reset      report Reset itself
type fakeFactory struct {
	langs []string

	mu      sync.Mutex
	live    int
	maxLive int
	made    int
	order   []string // codes in the order runs started
	newErr  error

	running    atomic.Int32 // runs in flight across all runners
	maxRunning atomic.Int32

	started chan string   // receives "wait" runs as they start
	release chan struct{} // one token lets one "wait" run finish
}

func newFakeFactory(langs ...string) *fakeFactory {
	if len(langs) == 0 {
		langs = []string{"javascript"}
	}
	return &fakeFactory{langs: langs, started: make(chan string, 100), release: make(chan struct{}, 100)}
}

func (f *fakeFactory) Languages() []string { return f.langs }

func (f *fakeFactory) NewRunner(ctx context.Context, lang, dir string) (Runner, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.newErr != nil {
		return nil, f.newErr
	}
	f.made++
	f.live++
	f.maxLive = max(f.maxLive, f.live)
	return &fakeRunner{f: f, lang: lang, dir: dir, vars: map[string]string{}}, nil
}

func (f *fakeFactory) liveCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live
}

type fakeRunner struct {
	f      *fakeFactory
	lang   string
	dir    string
	fsys   sys.FS
	vars   map[string]string
	inRun  atomic.Int32
	closed atomic.Bool
}

func (r *fakeRunner) Run(ctx context.Context, code string, sink worker.ProgressSink) worker.Result {
	if r.closed.Load() {
		return worker.Result{Status: worker.StatusError, Stderr: "run on a closed runner"}
	}
	if r.inRun.Add(1) != 1 {
		panic("concurrent Run on one runner")
	}
	defer r.inRun.Add(-1)
	n := r.f.running.Add(1)
	defer r.f.running.Add(-1)
	for {
		m := r.f.maxRunning.Load()
		if n <= m || r.f.maxRunning.CompareAndSwap(m, n) {
			break
		}
	}
	r.f.mu.Lock()
	r.f.order = append(r.f.order, code)
	r.f.mu.Unlock()

	res := worker.Result{Status: worker.StatusOK}
	f := strings.Fields(code)
	switch {
	case len(f) == 3 && f[0] == "set":
		r.vars[f[1]] = f[2]
	case len(f) == 2 && f[0] == "get":
		if v, ok := r.vars[f[1]]; ok {
			res.Value = &v
		} else {
			res.Status = worker.StatusError
			res.Error = &worker.GuestError{Type: "ReferenceError", Message: f[1] + " is not defined"}
		}
	case len(f) == 3 && f[0] == "write":
		if r.fsys != nil {
			file, errno := r.fsys.OpenFile(f[1], sys.O_RDWR|sys.O_CREAT|sys.O_TRUNC, 0o600)
			if errno == 0 {
				_, errno = file.Write([]byte(f[2]))
				file.Close()
			}
			if errno != 0 {
				res.Status = worker.StatusError
				res.Stderr = errno.Error()
			}
		} else if err := os.WriteFile(filepath.Join(r.dir, f[1]), []byte(f[2]), 0o600); err != nil {
			res.Status = worker.StatusError
		}
	case len(f) >= 1 && f[0] == "wait":
		r.f.started <- code
		select {
		case <-r.f.release:
		case <-ctx.Done():
			res.Status = worker.StatusInterrupted
		}
	case code == "reset":
		res.Reset = true
		res.Status = worker.StatusReset
	}
	return res
}

func (r *fakeRunner) Close() error {
	if r.closed.Swap(true) {
		return errors.New("closed twice")
	}
	r.f.mu.Lock()
	r.f.live--
	r.f.mu.Unlock()
	return nil
}

// fakeFSFactory mounts the Manager's QuotaFS.
type fakeFSFactory struct{ *fakeFactory }

func (f fakeFSFactory) NewRunnerFS(ctx context.Context, lang string, fsys sys.FS) (Runner, error) {
	r, err := f.NewRunner(ctx, lang, "")
	if err != nil {
		return nil, err
	}
	r.(*fakeRunner).fsys = fsys
	return r, nil
}

// sink records progress messages and signals each one.
type sink struct {
	mu   sync.Mutex
	msgs []string
	ch   chan string
}

func newSink() *sink { return &sink{ch: make(chan string, 10)} }

func (s *sink) Progress(_, _ float64, msg string) {
	s.mu.Lock()
	s.msgs = append(s.msgs, msg)
	s.mu.Unlock()
	select {
	case s.ch <- msg:
	default:
	}
}

func (s *sink) messages() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.msgs...)
}

func newTestManager(t *testing.T, cfg Config, f Factory) *Manager {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	m, err := NewManager(cfg, f, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

func run(t *testing.T, m *Manager, principal, id, code string) Outcome {
	t.Helper()
	out, err := m.Run(context.Background(), Request{Principal: principal, Workspace: id, Language: "javascript", Code: code})
	if err != nil {
		t.Fatalf("Run(%q, %q): %v", id, code, err)
	}
	return out
}

func value(r worker.Result) string {
	if r.Value == nil {
		return "<nil>"
	}
	return *r.Value
}
