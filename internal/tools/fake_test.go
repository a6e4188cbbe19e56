package tools

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"execd/internal/frontend"
	"execd/internal/tasks"
	"execd/internal/upstream"
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
//	killed         → a timeout whose sandbox was killed: state lost
//	lost           → ran fine on a fresh interpreter (idle_ttl)
//	diskfull       → a write failed on the full disk quota
//	budget         → out of memory because the daemon-wide budget was full
//	write F S      → writes S to the file F and names it in Files
//	show N         → prints "drawn" and shows N 1x1 PNGs
//	ask P          → asks the run's Input with the prompt P: the answer as
//	                 result, or EOFError saying why there is none
//	slow MS        → reports "3/10 loading", then after MS milliseconds
//	                 result "done" (interrupted if cancelled first)
//	slowthrow MS   → the same, ending with a TypeError
//
// Workspaces are the ids runs used; a workspace named "missing" never
// exists. Checkpoints and forks are remembered.
type fakeExec struct {
	mu          sync.Mutex
	next        int
	started     chan string // receives the workspace of every run that starts (if non-nil)
	runs        []string
	checkpoints map[string][]string // by workspace
	files       []fakeFile          // newest last
}

type fakeFile struct {
	principal string
	workspace.FileInfo
	data []byte
}

// NewID mints ws-1, ws-2, … (the ids of runs without a workspace too).
func (f *fakeExec) NewID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mintLocked()
}

func (f *fakeExec) mintLocked() string {
	f.next++
	return fmt.Sprintf("ws-%d", f.next)
}

func (f *fakeExec) Run(ctx context.Context, req workspace.Request) (workspace.Outcome, error) {
	f0 := f
	ws := req.Workspace
	f.mu.Lock()
	if ws == "" {
		ws = f.mintLocked()
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
	r := workspace.Result{Status: workspace.StatusOK, Duration: 3 * time.Millisecond}
	str := func(s string) *string { return &s }
	code := strings.TrimSpace(req.Code)
	switch {
	case code == "6*7":
		r.Value = str("42")
	case strings.HasPrefix(code, "print "):
		r.Stdout = strings.TrimPrefix(code, "print ") + "\n"
	case code == "throw":
		r.Status = workspace.StatusError
		r.Error = &workspace.GuestError{Type: "TypeError", Message: "x is not a function", Stack: "    at <eval> (cell:1)"}
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
	case strings.HasPrefix(code, "slow"):
		var ms int
		fmt.Sscan(strings.TrimPrefix(strings.TrimPrefix(code, "slowthrow"), "slow"), &ms)
		if req.Sink != nil {
			req.Sink.Progress(3, 10, "loading")
		}
		select {
		case <-ctx.Done():
			r.Status = workspace.StatusInterrupted
		case <-time.After(time.Duration(ms) * time.Millisecond):
			r.Value = str(`"done"`)
			if strings.HasPrefix(code, "slowthrow") {
				r.Status, r.Value = workspace.StatusError, nil
				r.Error = &workspace.GuestError{Type: "TypeError", Message: "x is not a function", Stack: "    at <eval> (cell:1)"}
			}
		}
	case code == "block":
		<-ctx.Done()
		r.Status = workspace.StatusInterrupted
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			r.Status = workspace.StatusTimeout
		}
	case code == "oom":
		r.Status = workspace.StatusOOM
		r.Error = &workspace.GuestError{Type: "InternalError", Message: "out of memory"}
	case code == "killed":
		r.Status, r.Reset = workspace.StatusTimeout, true
		r.Error = &workspace.GuestError{Type: "InterruptError", Message: "execution timed out; the code did not stop within the interrupt grace and was killed"}
		return workspace.Outcome{Workspace: ws, Result: r, ResetReason: workspace.ReasonKilled}, nil
	case code == "lost":
		r.Status, r.Reset = workspace.StatusReset, true
		return workspace.Outcome{Workspace: ws, Result: r, ResetReason: workspace.ReasonIdleTTL}, nil
	case code == "diskfull":
		r.Stderr = "Error: I/O error\n"
		return workspace.Outcome{Workspace: ws, Result: r, DiskFull: true, DiskQuotaBytes: 1 << 20}, nil
	case strings.HasPrefix(code, "write "):
		f := strings.SplitN(code, " ", 3)
		info, err := f0.WriteFile(ctx, req.Principal, ws, f[1], []byte(f[2]))
		if err != nil {
			return workspace.Outcome{}, err
		}
		return workspace.Outcome{Workspace: ws, Result: r, Files: []workspace.FileInfo{info}}, nil
	case strings.HasPrefix(code, "show "):
		var n int
		fmt.Sscan(strings.TrimPrefix(code, "show "), &n)
		png, _ := base64.StdEncoding.DecodeString(fakePNG)
		for i := 0; i < n; i++ {
			r.Images = append(r.Images, workspace.Picture{MIME: "image/png", Data: png})
		}
		r.Stdout = "drawn\n"
	case strings.HasPrefix(code, "ask "):
		if req.Input == nil {
			r.Status, r.Error = workspace.StatusError, &workspace.GuestError{Type: "EOFError", Message: "no input source"}
			break
		}
		ans := req.Input.Input(ctx, strings.TrimPrefix(code, "ask "))
		switch {
		case ctx.Err() != nil:
			r.Status, r.Error = workspace.StatusInterrupted, &workspace.GuestError{Type: "KeyboardInterrupt", Message: "interrupted"}
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				r.Status = workspace.StatusTimeout
			}
		case ans.Status == workspace.InputOK:
			r.Value = str(fmt.Sprintf("%q", ans.Text))
		default:
			r.Status = workspace.StatusError
			r.Error = &workspace.GuestError{Type: "EOFError", Message: map[workspace.InputStatus]string{
				workspace.InputEOF: "the person gave no answer", workspace.InputNoClient: "the client cannot answer",
				workspace.InputTimedOut: "nobody answered in time"}[ans.Status]}
		}
	case code == "budget":
		r.Status = workspace.StatusOOM
		r.Error = &workspace.GuestError{Type: "InternalError", Message: "out of memory"}
		return workspace.Outcome{Workspace: ws, Result: r, BudgetExceeded: true}, nil
	}
	return workspace.Outcome{Workspace: ws, Result: r}, nil
}

var errFakeMissing = &workspace.Error{Code: workspace.NotFound, Msg: `workspace "missing" does not exist`}

// ListPage shows every workspace that has checkpoints, live, with fixed
// figures, in one page.
func (f *fakeExec) ListPage(string, *workspace.ListFrom, int) ([]workspace.Info, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id := range f.checkpoints {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var out []workspace.Info
	at := fakeTime
	for _, id := range ids {
		in := workspace.Info{ID: id, Languages: []string{"javascript"}, Live: true, LastUsed: at,
			Interpreters: []workspace.Interpreter{{Language: "javascript", Live: true, MemoryBytes: 3 << 20}},
			DiskBytes:    4096, MemoryBytes: 3 << 20, StateBytes: 60000}
		for _, cp := range f.checkpoints[id] {
			in.Checkpoints = append(in.Checkpoints, workspace.CheckpointInfo{Name: cp, Created: at, Languages: []string{"javascript"}, Bytes: 30000})
		}
		out = append(out, in)
	}
	return out, false
}
func (f *fakeExec) Reset(_ context.Context, _, id string, _ bool) error {
	if id == "missing" {
		return errFakeMissing
	}
	return nil
}
func (f *fakeExec) Delete(_ context.Context, _, id string) error {
	if id == "missing" {
		return errFakeMissing
	}
	return nil
}

func (f *fakeExec) Checkpoint(_ context.Context, _, id, name string) (string, error) {
	if id == "missing" {
		return "", errFakeMissing
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.checkpoints == nil {
		f.checkpoints = map[string][]string{}
	}
	if name == "" {
		name = fmt.Sprintf("cp-%d", len(f.checkpoints[id])+1)
	}
	f.checkpoints[id] = append(f.checkpoints[id], name)
	return name, nil
}

func (f *fakeExec) RestoreCheckpoint(_ context.Context, _, id, cp string) error {
	if id == "missing" {
		return errFakeMissing
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.checkpoints[id] {
		if c == cp {
			return nil
		}
	}
	return &workspace.Error{Code: workspace.NotFound, Msg: fmt.Sprintf("workspace %q has no checkpoint %q", id, cp)}
}

func (f *fakeExec) Fork(_ context.Context, _, id, newID string) (string, error) {
	if id == "missing" {
		return "", errFakeMissing
	}
	if newID == "" {
		f.mu.Lock()
		f.next++
		newID = fmt.Sprintf("ws-%d", f.next)
		f.mu.Unlock()
	}
	return newID, nil
}

var fakeTime = time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)

// fakePNG is a 1x1 PNG.
const fakePNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"

func (f *fakeExec) WriteFile(_ context.Context, principal, id, p string, data []byte) (workspace.FileInfo, error) {
	rel, err := workspace.CleanPath(p)
	if err != nil {
		return workspace.FileInfo{}, err
	}
	if id == "missing" {
		return workspace.FileInfo{}, errFakeMissing
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	info := workspace.FileInfo{Workspace: id, Path: rel, Size: int64(len(data)), Modified: fakeTime}
	kept := f.files[:0]
	for _, ff := range f.files {
		if ff.principal != principal || ff.Workspace != id || ff.Path != rel {
			kept = append(kept, ff)
		}
	}
	f.files = append(kept, fakeFile{principal: principal, FileInfo: info, data: data})
	return info, nil
}

func (f *fakeExec) ReadFile(_ context.Context, principal, id, p string, offset, length int64) (workspace.FileData, error) {
	rel, err := workspace.CleanPath(p)
	if err != nil {
		return workspace.FileData{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ff := range f.files {
		if ff.principal == principal && ff.Workspace == id && ff.Path == rel {
			d := workspace.FileData{FileInfo: ff.FileInfo, Offset: offset}
			if offset < int64(len(ff.data)) {
				d.Data = ff.data[offset:min(int64(len(ff.data)), offset+length)]
			}
			return d, nil
		}
	}
	if id == "missing" {
		return workspace.FileData{}, errFakeMissing
	}
	return workspace.FileData{}, &workspace.Error{Code: workspace.FileNotFound, Msg: "no file " + rel + " in the workspace"}
}

func (f *fakeExec) RecentFiles(principal string) []workspace.FileInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []workspace.FileInfo
	for i := len(f.files) - 1; i >= 0; i-- {
		if f.files[i].principal == principal {
			out = append(out, f.files[i].FileInfo)
		}
	}
	return out
}

// noWorkspaces answers every Executor method but Run as a registry that
// holds no workspace: for executors that only run.
type noWorkspaces struct{}

func (noWorkspaces) ListPage(string, *workspace.ListFrom, int) ([]workspace.Info, bool) {
	return nil, false
}
func (noWorkspaces) Reset(context.Context, string, string, bool) error {
	return errFakeMissing
}
func (noWorkspaces) Delete(context.Context, string, string) error { return errFakeMissing }
func (noWorkspaces) Checkpoint(context.Context, string, string, string) (string, error) {
	return "", errFakeMissing
}
func (noWorkspaces) RestoreCheckpoint(context.Context, string, string, string) error {
	return errFakeMissing
}
func (noWorkspaces) Fork(context.Context, string, string, string) (string, error) {
	return "", errFakeMissing
}
func (noWorkspaces) ReadFile(context.Context, string, string, string, int64, int64) (workspace.FileData, error) {
	return workspace.FileData{}, errFakeMissing
}
func (noWorkspaces) WriteFile(context.Context, string, string, string, []byte) (workspace.FileInfo, error) {
	return workspace.FileInfo{}, errFakeMissing
}
func (noWorkspaces) RecentFiles(string) []workspace.FileInfo { return nil }
func (noWorkspaces) NewID() string                           { return "new" }

// testOptions are the options of the front-end tests: a loopback
// listener, a heartbeat longer than any test, the default limits.
// testConfig is what a test server is made of: the engine's options and
// the tools' own.
type testConfig struct {
	frontend.Options
	Languages        []string
	RequestTimeout   time.Duration
	MaxOutputBytes   int
	MaxWaitingInputs int
	Upstreams        *upstream.Hub
}

func testOptions() testConfig {
	return testConfig{
		Options: frontend.Options{
			Version:                "0.1.0",
			Listen:                 "127.0.0.1:0",
			MaxStreamsPerPrincipal: 64,
			ProgressHeartbeat:      30 * time.Second,
			SessionIdleTTL:         time.Hour,
			TaskAfter:              100 * time.Millisecond,
		},
		Languages:      []string{"javascript"},
		MaxOutputBytes: 64 << 10,
	}
}

// newTestServer is the engine with execd's tools over ex, as cmd/execd
// builds it.
func newTestServer(cfg testConfig, ex workspace.Executor) *frontend.Server {
	if cfg.Options.Tasks == nil {
		st, err := tasks.Open(tasks.Config{})
		if err != nil {
			panic(err)
		}
		cfg.Options.Tasks = st
	}
	s, err := frontend.New(cfg.Options)
	if err != nil {
		panic(err)
	}
	// The store's sweeper ends with the server, as cmd/execd closes it.
	context.AfterFunc(s.Detached(), cfg.Options.Tasks.Close)
	if err := Register(s, Options{Executor: ex, Languages: cfg.Languages, RequestTimeout: cfg.RequestTimeout,
		MaxOutputBytes: cfg.MaxOutputBytes, MaxWaitingInputs: cfg.MaxWaitingInputs, Logger: cfg.Logger, Upstreams: cfg.Upstreams}); err != nil {
		panic(err)
	}
	return s
}
