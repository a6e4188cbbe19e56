// Package tools holds execd's MCP tools — execute_code, the workspace
// tools, the workspace files as resources and through read_file and
// write_file, images and the code's input() — and registers them on the
// MCP engine (internal/frontend) through the same API any tool uses. It
// knows the workspace registry (internal/workspace) and MCP's shapes of
// results, and chooses the words the model reads; the engine below it
// knows nothing of sandboxes.
package tools

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.uber.org/zap"

	"execd/internal/frontend"
	"execd/internal/upstream"
	"execd/internal/workspace"
)

// Options configure execd's tools. Each field says what its zero value
// means; only Executor is required.
type Options struct {
	// Executor runs execute_code and the workspace tools. Required.
	Executor workspace.Executor
	// Languages are the guests the Executor runs, named in execute_code's
	// description and schema. Nil means javascript alone.
	Languages []string
	// RequestTimeout bounds an execute_code run; a shorter timeout_ms
	// wins. Zero means no bound.
	RequestTimeout time.Duration
	// MaxOutputBytes is the Executor's cap on stdout and stderr, named in
	// the error of a truncated result. Zero leaves the figure out.
	MaxOutputBytes int
	// Network says the operator allows the code a network: execute_code's
	// description tells the model what it can reach and how. False means
	// it says there is none.
	Network bool
	// MaxWaitingInputs caps the runs of one principal parked waiting for
	// input in 2026-07-28 (ask.go), which hold no request and no run slot:
	// beyond it the code's input() gets end of file at once, and the
	// result says which limit. Zero means unlimited.
	MaxWaitingInputs int
	// Upstreams are code mode's upstream MCP servers: the code may call
	// their tools, and execute_code's description names them. Nil: none.
	Upstreams *upstream.Hub
	// DescriptionBudget bounds the bytes of the upstream tools' signatures
	// in execute_code's description ([code_mode] description_budget),
	// shared by the languages. Zero: the Hub's own.
	DescriptionBudget int
	// Packages installs packages into workspaces: install_packages is
	// listed when it is set. Nil means no such tool.
	Packages workspace.Installer
	// Logger gets the tools' errors. Nil means none.
	Logger *zap.Logger
}

// withDefaults fills in what the zero values of o mean.
func (o Options) withDefaults() Options {
	if len(o.Languages) == 0 {
		o.Languages = []string{"javascript"}
	}
	return o
}

// tools are execd's tools registered on one engine.
type tools struct {
	opts   Options
	srv    *frontend.Server
	exec   workspace.Executor
	log    *zap.Logger
	paused *pausedRuns
	// writeMax is the largest content write_file takes (writeLimit).
	writeMax int
}

// Register adds execd's tools to srv, execute_code first (clients, and
// the conformance header scenarios, call the first listed tool), then the
// workspace and file tools, and the workspace files as resources; and sets
// the instructions srv gives the model.
func Register(srv *frontend.Server, opts Options) error {
	if opts.Executor == nil {
		return errors.New("tools: Options.Executor is required")
	}
	opts = opts.withDefaults()
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	t := &tools{opts: opts, srv: srv, exec: opts.Executor, log: log, paused: newPausedRuns()}
	for _, add := range []func() error{
		t.addExecuteCode, t.addListWorkspaces, t.addResetWorkspace, t.addDeleteWorkspace,
		t.addCheckpointWorkspace, t.addRestoreWorkspace, t.addForkWorkspace, t.addReadFile, t.addWriteFile,
		t.addInstallPackages,
	} {
		if err := add(); err != nil {
			return err
		}
	}
	srv.AddResources(t.fileResources())
	langs := strings.Join(opts.Languages, " and ") + " code"
	srv.SetInstructions("Runs " + langs + " in sandboxes with execute_code. Each result names a workspace: pass it back as `workspace` to keep variables and files from earlier calls.")
	// Runs parked waiting for input end with the server (ask.go).
	context.AfterFunc(srv.Detached(), t.paused.closeAll)
	return nil
}
