package workspace

import (
	"context"
	"errors"
	"io"

	"execd/internal/worker"
)

// Runner is one live interpreter of a workspace; cmd/execd adapts a
// *worker.Worker to it. The Manager calls Run, Snapshot and Close from the
// holder of the workspace's turn only, one at a time; MemoryBytes (and
// Trimmer.Trim) may be called at any time.
type Runner interface {
	// Run evaluates code as the next cell (worker.Worker.Run describes
	// opts). The result's facts say what became of the instance
	// (Discarded, FreshInstance, BudgetExceeded); the Manager decides from
	// them what the user is told.
	Run(ctx context.Context, code string, opts worker.RunOptions) worker.Result
	// Snapshot captures the interpreter between runs. An error wrapping
	// ErrNotSaveable means it cannot be saved now (it holds open files, or
	// the build cannot save interpreters); the runner is unchanged either
	// way.
	Snapshot(ctx context.Context) (Image, error)
	// MemoryBytes is the memory the interpreter holds now.
	MemoryBytes() int64
	Close() error
}

// Trimmer is a Runner that can give back what it holds only as a cache
// while idle; the janitor trims the runners that implement it (see
// TrimAfter).
type Trimmer interface {
	// Trim gives back what the idle interpreter holds only as a cache
	// (for a worker: the page-table entries of base image pages it read
	// but never wrote, worker.Worker.Trim) and returns the bytes its
	// process's resident set shrank by. The interpreter's state is
	// unchanged; its next Run may be a little slower. It never waits: a
	// runner in a Run, Snapshot or Close, or closed, returns 0 at once. It
	// is cheap when nothing ran since the last Trim.
	Trim() (freed int64)
}

// Image is a saved interpreter, as Runner.Snapshot makes it and
// Factory.ReadImage reads it back.
type Image interface {
	// Language is the canonical language of the interpreter.
	Language() string
	// WriteTo writes the image's encoding (compressed, checksummed).
	WriteTo(w io.Writer) (int64, error)
}

// Factory makes Runners, fresh or from an Image.
type Factory interface {
	// Languages lists the canonical names of the languages offered.
	Languages() []string
	// Compiling reports that lang's guest is still being compiled, so that
	// making a runner will wait for it (the Manager tells the caller).
	Compiling(lang string) bool
	// NewRunner makes a fresh interpreter for lang with disk mounted at
	// /workspace: the workspace's [Disk], shared by all its runners.
	NewRunner(ctx context.Context, lang string, disk Disk) (Runner, error)
	// ReadImage decodes what Image.WriteTo wrote. Errors wrap
	// ErrImageCorrupt (truncated, damaged, not an image) or ErrImageStale
	// (an encoding or a guest this build does not run).
	ReadImage(r io.Reader) (Image, error)
	// Restore makes a runner from img with disk mounted at /workspace.
	// With clone, the interpreter's random generators are reseeded (a
	// fork must not repeat its parent's numbers). Errors wrap
	// ErrImageStale when img belongs to another build of the guest.
	Restore(ctx context.Context, img Image, disk Disk, clone bool) (Runner, error)
}

// Errors a Factory or Runner wraps, so the Manager can tell an image it
// cannot use (the workspace then starts fresh and says why) from other
// failures.
var (
	ErrImageCorrupt = errors.New("the saved interpreter is damaged or not an image")
	ErrImageStale   = errors.New("the saved interpreter belongs to another build of execd or of its guest")
	ErrNotSaveable  = errors.New("the interpreter cannot be saved now")
	// ErrMemoryBudget: the daemon-wide memory budget cannot hold another
	// interpreter now; the Manager hibernates idle workspaces and retries.
	ErrMemoryBudget = errors.New("the memory budget cannot hold another interpreter now")
)

// ResetReason says why a workspace's earlier interpreter state is gone.
// The values are short codes for clients and logs; Sentence words them.
type ResetReason string

// The reasons. Files are kept in every case.
const (
	// ReasonImageStale: the saved interpreter was made by another build of
	// execd or of the guest (an upgrade) and cannot be restored.
	ReasonImageStale ResetReason = "image_stale"
	// ReasonImageCorrupt: the saved interpreter could not be read
	// (truncated, damaged, or not an image).
	ReasonImageCorrupt ResetReason = "image_corrupt"
	// ReasonEvicted: the interpreter was stopped to make room for others
	// and could not be saved (it held open files).
	ReasonEvicted ResetReason = "evicted"
	// ReasonKilled: the code did not stop when interrupted, and the
	// sandbox was killed.
	ReasonKilled ResetReason = "killed"
	// ReasonCrashed: the sandbox crashed.
	ReasonCrashed ResetReason = "crashed"
	// ReasonIdleTTL: the workspace was idle for longer than
	// Config.IdleTTL.
	ReasonIdleTTL ResetReason = "idle_ttl"
	// ReasonResetByUser: the workspace was reset (Manager.Reset).
	ReasonResetByUser ResetReason = "reset_by_user"
	// ReasonRestarted: execd stopped without saving the interpreter (it
	// was killed or crashed, could not save in time, or is an older
	// version that kept no images).
	ReasonRestarted ResetReason = "restarted"
)

var reasonSentences = map[ResetReason]string{
	ReasonImageStale:   "execd or its sandbox was upgraded, and the saved interpreter could not be restored.",
	ReasonImageCorrupt: "the saved interpreter could not be read (it is damaged).",
	ReasonEvicted:      "the interpreter was stopped to make room for other workspaces and could not be saved, because it had files open.",
	ReasonKilled:       "the code did not stop when interrupted, so the sandbox was restarted.",
	ReasonCrashed:      "the sandbox crashed and was restarted.",
	ReasonIdleTTL:      "the workspace was idle for longer than execd keeps interpreters.",
	ReasonResetByUser:  "the workspace was reset.",
	ReasonRestarted:    "execd was restarted without saving the interpreter.",
}

func (r ResetReason) known() bool { _, ok := reasonSentences[r]; return ok }

// Sentence explains the reason to a user, as one sentence a front end can
// show as is.
func (r ResetReason) Sentence() string {
	s, ok := reasonSentences[r]
	if !ok {
		s = "the interpreter was restarted."
	}
	return "Earlier variables are gone (files are kept): " + s
}
