// Command execd-conformance serves execd's MCP front end with the fixtures
// of the official conformance suites (@modelcontextprotocol/conformance):
// the test_* tools, prompts and resources the scenarios call, registered
// on the engine through the same API as execd's own tools, which stay
// first in tools/list (the header scenarios call the first listed tool). It runs no
// code: execute_code answers every call that reaches the executor with an
// isError result, which is all the suites ask of it.
//
//	execd-conformance -listen 127.0.0.1:8766
//
// test/e2e/conformance.sh runs the suites against it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"execd/internal/frontend"
	"execd/internal/tasks"
	"execd/internal/tools"
	"execd/internal/workspace"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8766", "HTTP listen address")
	flag.Parse()
	log, err := zap.NewProduction()
	if err != nil {
		fmt.Fprintln(os.Stderr, "execd-conformance:", err)
		os.Exit(2)
	}
	os.Exit(run(*listen, log))
}

func run(listen string, log *zap.Logger) int {
	defer func() { _ = log.Sync() }()
	store, err := tasks.Open(tasks.Config{})
	if err != nil {
		log.Error("tasks", zap.Error(err))
		return 1
	}
	defer store.Close()
	srv, err := newServer(frontend.Options{Version: "conformance", Logger: log, Listen: listen, Tasks: store, TaskAfter: time.Second})
	if err != nil {
		log.Error("front end", zap.Error(err))
		return 1
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		log.Error("listen", zap.Error(err))
		return 1
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Info("listening", zap.String("url", "http://"+ln.Addr().String()+"/mcp"))

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	select {
	case err := <-errc:
		log.Error("serve", zap.Error(err))
		return 1
	case <-sigs:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	_ = hs.Shutdown(ctx)
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("serve", zap.Error(err))
	}
	return 0
}

// newServer is execd's front end with its tools over an executor that runs
// no code, and the fixtures (protocol scenarios and their expected answers
// are those of the conformance suites' server scenarios) after them.
func newServer(opts frontend.Options) (*frontend.Server, error) {
	srv, err := frontend.New(opts)
	if err != nil {
		return nil, err
	}
	if err := tools.Register(srv, tools.Options{Executor: noCode{}, Languages: []string{"javascript", "python"}, Logger: opts.Logger}); err != nil {
		return nil, err
	}
	for _, t := range append(fixtureTools(), taskFixtures()...) {
		if err := frontend.AddTool(srv, t); err != nil {
			return nil, err
		}
	}
	srv.SetPrompts(frontend.Prompts{List: fixturePrompts(), Get: getPrompt})
	srv.AddResources(frontend.Resources{List: func(context.Context, *frontend.Call) []map[string]any { return fixtureResources() },
		Templates: fixtureTemplates(), Read: readResource, URIs: "test://…", Subscribable: true})
	srv.EnableCompletions()
	return srv, nil
}

// noCode is the executor of a server that runs no code.
type noCode struct{}

var errNoCode = &workspace.Error{Code: workspace.StartFailed, Msg: "this conformance server runs no code; execd itself does"}

func (noCode) Run(_ context.Context, req workspace.Request) (workspace.Outcome, error) {
	return workspace.Outcome{Workspace: req.Workspace}, errNoCode
}
func (noCode) ListPage(string, *workspace.ListFrom, int) ([]workspace.Info, bool) {
	return nil, false
}
func (noCode) Reset(context.Context, string, string, bool) error { return errNoCode }
func (noCode) Delete(context.Context, string, string) error      { return errNoCode }
func (noCode) Checkpoint(context.Context, string, string, string) (string, error) {
	return "", errNoCode
}
func (noCode) RestoreCheckpoint(context.Context, string, string, string) error { return errNoCode }
func (noCode) Fork(context.Context, string, string, string) (string, error) {
	return "", errNoCode
}
func (noCode) ReadFile(context.Context, string, string, string, int64, int64) (workspace.FileData, error) {
	return workspace.FileData{}, errNoCode
}
func (noCode) WriteFile(context.Context, string, string, string, []byte) (workspace.FileInfo, error) {
	return workspace.FileInfo{}, errNoCode
}
func (noCode) RecentFiles(string) []workspace.FileInfo { return nil }
func (noCode) NewID() string                           { return uuid.NewString() }
