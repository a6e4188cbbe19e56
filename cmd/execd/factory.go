package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/tetratelabs/wazero/experimental/sys"

	"execd/internal/worker"
	"execd/internal/workspace"
)

// engineFactory adapts the sandbox engine to the workspace registry's
// Factory: workers become Runners, the engine's images the registry's, and
// the engine's errors the registry's sentinels.
type engineFactory struct{ e *worker.Engine }

var _ workspace.Factory = engineFactory{}

func (f engineFactory) Languages() []string { return f.e.Languages() }

// Compiling reports that lang's guest is not ready yet (worker.Engine.Ready).
func (f engineFactory) Compiling(lang string) bool {
	select {
	case <-f.e.Ready(lang):
		return false
	default:
		return true
	}
}

func (f engineFactory) NewRunner(ctx context.Context, lang string, fsys sys.FS) (workspace.Runner, error) {
	w, err := f.e.NewWorker(ctx, lang, worker.WorkerOptions{FS: fsys})
	if err != nil {
		return nil, engineError(err)
	}
	return workerRunner{w}, nil
}

func (f engineFactory) ReadImage(r io.Reader) (workspace.Image, error) {
	img, err := worker.ReadImage(r)
	if err != nil {
		return nil, engineError(err)
	}
	return img, nil
}

func (f engineFactory) Restore(ctx context.Context, img workspace.Image, fsys sys.FS, clone bool) (workspace.Runner, error) {
	wi, ok := img.(*worker.Image)
	if !ok {
		return nil, fmt.Errorf("%w: not an image of this engine (%T)", workspace.ErrImageCorrupt, img)
	}
	w, err := f.e.Restore(ctx, wi, worker.WorkerOptions{FS: fsys}, clone)
	if err != nil {
		return nil, engineError(err)
	}
	return workerRunner{w}, nil
}

// workerRunner is a worker as the registry sees it: Run returns the
// worker's facts about its instance, Snapshot the registry's Image.
type workerRunner struct{ *worker.Worker }

// Idle workers are trimmed (workspace.TrimAfter): the adapter must keep
// Worker's Trim.
var _ workspace.Trimmer = workerRunner{}

func (r workerRunner) Run(ctx context.Context, code string, opts worker.RunOptions) (worker.Result, workspace.Facts) {
	res := r.Worker.Run(ctx, code, opts)
	facts := workspace.Facts{Fresh: res.FreshInstance, BudgetExceeded: res.BudgetExceeded}
	switch res.Discarded {
	case worker.DiscardKilled:
		facts.Discarded = workspace.ReasonKilled
	case worker.DiscardCrashed:
		facts.Discarded = workspace.ReasonCrashed
	case "":
	default:
		facts.Discarded = workspace.ReasonCrashed
	}
	return res, facts
}

func (r workerRunner) Snapshot(ctx context.Context) (workspace.Image, error) {
	img, err := r.Worker.Snapshot(ctx)
	if err != nil {
		return nil, engineError(err)
	}
	return img, nil
}

// engineError wraps the engine's error in the registry's sentinel for it:
// an image of another guest build or format is stale, a damaged one
// corrupt; a worker that cannot be imaged is not saveable; a full budget
// asks the registry to make room.
func engineError(err error) error {
	var kind error
	switch {
	case errors.Is(err, worker.ErrImageStale), errors.Is(err, worker.ErrImageVersion):
		kind = workspace.ErrImageStale
	case errors.Is(err, worker.ErrImageCorrupt):
		kind = workspace.ErrImageCorrupt
	case errors.Is(err, worker.ErrNotSnapshottable):
		kind = workspace.ErrNotSaveable
	case errors.Is(err, worker.ErrMemoryBudget):
		kind = workspace.ErrMemoryBudget
	default:
		return err
	}
	return fmt.Errorf("%w: %w", kind, err)
}
