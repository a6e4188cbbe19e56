package frontend

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"execd/internal/worker"
	"execd/internal/workspace"
)

// fakeExec is an Executor whose "code" is a tiny command language, so that
// front-end tests are fast and deterministic:
//
//	6*7            → result "42"
//	print X        → stdout "X\n"
//	throw          → a TypeError
//	progress N     → N progress reports, then result "done"
//	block          → waits until cancelled (reports the interruption)
//	oom            → status oom
type fakeExec struct {
	mu      sync.Mutex
	next    int
	started chan string // receives the workspace of every run that starts (if non-nil)
	runs    []string
}

func (f *fakeExec) Run(ctx context.Context, req workspace.Request) (workspace.Outcome, error) {
	ws := req.Workspace
	f.mu.Lock()
	if ws == "" {
		f.next++
		ws = fmt.Sprintf("ws-%d", f.next)
	}
	f.runs = append(f.runs, req.Code)
	f.mu.Unlock()
	if strings.ContainsAny(ws, "/ ") {
		return workspace.Outcome{}, &workspace.Error{Code: workspace.InvalidID, Msg: "workspace id must be 1–64 characters of A-Z a-z 0-9 . _ -"}
	}
	if req.Language != "javascript" {
		return workspace.Outcome{}, &workspace.Error{Code: workspace.UnsupportedLanguage, Msg: fmt.Sprintf("language '%s' is not supported; use javascript", req.Language)}
	}
	if f.started != nil {
		f.started <- ws
	}
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	r := worker.Result{Status: worker.StatusOK, Duration: 3 * time.Millisecond}
	str := func(s string) *string { return &s }
	code := strings.TrimSpace(req.Code)
	switch {
	case code == "6*7":
		r.Value = str("42")
	case strings.HasPrefix(code, "print "):
		r.Stdout = strings.TrimPrefix(code, "print ") + "\n"
	case code == "throw":
		r.Status = worker.StatusError
		r.Error = &worker.GuestError{Type: "TypeError", Message: "x is not a function", Stack: "    at <eval> (cell:1)"}
	case strings.HasPrefix(code, "progress "):
		var n int
		fmt.Sscan(strings.TrimPrefix(code, "progress "), &n)
		for i := 1; i <= n; i++ {
			if req.Sink != nil {
				req.Sink.Progress(float64(i), float64(n), "step")
			}
			time.Sleep(300 * time.Millisecond)
		}
		r.Value = str(`"done"`)
	case code == "block":
		<-ctx.Done()
		r.Status = worker.StatusInterrupted
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			r.Status = worker.StatusTimeout
		}
	case code == "oom":
		r.Status = worker.StatusOOM
		r.Error = &worker.GuestError{Type: "InternalError", Message: "out of memory"}
	}
	return workspace.Outcome{Workspace: ws, Result: r}, nil
}

func (f *fakeExec) List(string) []workspace.Info { return nil }
func (f *fakeExec) Reset(context.Context, string, string, bool) error {
	return nil
}
func (f *fakeExec) Delete(context.Context, string, string) error { return nil }

// testOptions are the options of the front-end tests: a loopback
// listener, a heartbeat longer than any test, the default limits.
func testOptions() Options {
	return Options{
		Languages:              []string{"javascript"},
		Version:                "0.1.0",
		Listen:                 "127.0.0.1:0",
		MaxStreamsPerPrincipal: 64,
		ProgressHeartbeat:      30 * time.Second,
		SessionIdleTTL:         time.Hour,
		MaxOutputBytes:         64 << 10,
	}
}

func newTestServer(opts Options, ex Executor) *Server {
	opts.Executor = ex
	s, err := New(opts)
	if err != nil {
		panic(err)
	}
	return s
}
