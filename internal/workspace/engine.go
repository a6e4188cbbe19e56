package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"

	"execd/internal/guestfs"
	"execd/internal/worker"
)

// EngineFactory is the Factory of the sandbox engine: its workers are the
// Runners, its images the Images, and its errors wrap the sentinels the
// Manager acts on.
func EngineFactory(e *worker.Engine) Factory { return engineFactory{e} }

type engineFactory struct{ e *worker.Engine }

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

func (f engineFactory) NewRunner(ctx context.Context, lang string, disk Disk) (Runner, error) {
	opts, err := mount(disk)
	if err != nil {
		return nil, err
	}
	w, err := f.e.NewWorker(ctx, lang, opts)
	if err != nil {
		return nil, engineError(err)
	}
	return workerRunner{w}, nil
}

func (f engineFactory) ReadImage(r io.Reader) (Image, error) {
	img, err := f.e.ReadImage(r)
	if err != nil {
		return nil, engineError(err)
	}
	return img, nil
}

func (f engineFactory) Restore(ctx context.Context, img Image, disk Disk, clone bool) (Runner, error) {
	wi, ok := img.(*worker.Image)
	if !ok {
		return nil, fmt.Errorf("%w: not an image of this engine (%T)", ErrImageCorrupt, img)
	}
	opts, err := mount(disk)
	if err != nil {
		return nil, err
	}
	w, err := f.e.Restore(ctx, wi, opts, clone)
	if err != nil {
		return nil, engineError(err)
	}
	return workerRunner{w}, nil
}

// mount is how a worker mounts disk at /workspace: the engine mounts the
// file systems of package guestfs (openDisk's).
func mount(disk Disk) (worker.WorkerOptions, error) {
	fsys, ok := disk.(*guestfs.FS)
	if !ok {
		return worker.WorkerOptions{}, fmt.Errorf("workspace: the engine cannot mount a %T", disk)
	}
	return worker.WorkerOptions{FS: fsys}, nil
}

// workerRunner is a worker as the registry sees it: Snapshot returns the
// registry's Image.
type workerRunner struct{ *worker.Worker }

// Idle workers are trimmed (TrimAfter): the adapter must keep Worker's Trim.
var _ Trimmer = workerRunner{}

func (r workerRunner) Snapshot(ctx context.Context) (Image, error) {
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
		kind = ErrImageStale
	case errors.Is(err, worker.ErrImageCorrupt):
		kind = ErrImageCorrupt
	case errors.Is(err, worker.ErrNotSnapshottable):
		kind = ErrNotSaveable
	case errors.Is(err, worker.ErrMemoryBudget):
		kind = ErrMemoryBudget
	default:
		return err
	}
	return fmt.Errorf("%w: %w", kind, err)
}
