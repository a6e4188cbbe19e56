// Package worker runs guest code in one WebAssembly sandbox instance.
//
// An Engine owns the wazero runtime and the compiled guest modules of the
// process (compiled once in the background, cached on disk), each guest's
// base image (its interpreter right after start-up), and the memory budget
// of all instances. A Worker is one instance of one guest: it keeps the
// interpreter's state from Run to Run, like a notebook kernel; a new one is
// a copy-on-write clone of the base image. An Image is a Worker's state
// between runs (Snapshot), from which Engine.Restore makes a Worker again,
// in this process or another. A Worker runs one call at a time; callers
// serialise Run. RATIONALE.md says why it is built this way.
package worker

import (
	"time"

	"execd/internal/egress"
)

// Status is the outcome of one Run, as the caller reports it to the client.
type Status string

const (
	// StatusOK: the code ran to completion.
	StatusOK Status = "ok"
	// StatusError: the code threw an uncaught exception (or the guest trapped).
	StatusError Status = "error"
	// StatusTimeout: execd's own deadline stopped the code.
	StatusTimeout Status = "timeout"
	// StatusInterrupted: the caller's context was cancelled for another reason
	// (client cancel, shutdown).
	StatusInterrupted Status = "interrupted"
	// StatusOOM: the code ran out of the memory the sandbox allows.
	StatusOOM Status = "oom"
)

// GuestError is an uncaught exception raised by guest code.
type GuestError struct {
	Type    string `json:"type"`    // e.g. "TypeError", "InternalError"
	Message string `json:"message"` // the exception's message
	Stack   string `json:"stack,omitempty"`
}

// Result is what one Run produced.
type Result struct {
	Status Status
	Stdout string
	Stderr string
	// Value is the printable form of the last expression's value, or nil when
	// there is none (JavaScript undefined, Python None, a statement).
	Value *string
	// Error is set when the code raised; nil otherwise.
	Error *GuestError
	// Truncated reports that stdout or stderr exceeded the output cap; the
	// kept text has its head and tail with a marker in between.
	Truncated bool
	// Duration is the wall time of the run inside the worker, less the
	// time the guest waited for input.
	Duration time.Duration
	// Images are what the code showed with show(), in order: at most
	// Config.MaxImages, each a recognised image of at most
	// Config.MaxImageBytes (the guest was refused the others).
	Images []Picture
	// ImagesRefused counts the images show() left out because the memory
	// budget (Config.TotalMemoryMiB) could not hold their bytes: an
	// image's copy counts against it until the run ends.
	ImagesRefused int
	// Network lists the hosts the code's requests reached (each hop of a
	// redirect counts), in the order first reached; nil when it reached
	// none.
	Network []egress.HostCount
	// ToolCalls are the code's calls of upstream tools (code mode), one
	// entry per tool and outcome in the order first made, with how many;
	// nil when it made none.
	ToolCalls []ToolCall

	// Facts about the instance, for the caller to interpret (what they
	// mean for the user's state is the workspace's to decide).

	// Discarded says why the instance this run used was thrown away after
	// it ("" when it was not); the next Run starts on a new instance.
	Discarded Discard
	// FreshInstance: the run started on a new instance because the one
	// before was discarded (a kill or crash in an earlier run): the state
	// of the runs before is gone. The instance is a clone of the base image
	// (or, without one, initialised from scratch), like a new worker's.
	FreshInstance bool
	// Restored: the first run of a worker made by Engine.Restore.
	Restored bool
	// BudgetExceeded: during the run the engine-wide memory budget
	// (Config.TotalMemoryMiB) refused to grow the guest's memory, so an
	// out of memory may be the daemon's, not the worker's own limit.
	BudgetExceeded bool
}

// Discontinuous reports the fact that the instance this run used, or ended
// with, is not the one earlier runs used: Discarded != "" || FreshInstance.
func (r Result) Discontinuous() bool { return r.Discarded != "" || r.FreshInstance }

// Picture is an image the code showed (execd.show in sandbox/ABI.md).
type Picture struct {
	MIME string // image/png, image/jpeg, image/gif or image/webp
	Data []byte
}

// Discard is why an instance was thrown away after a run.
type Discard string

const (
	// DiscardKilled: the code did not honour the soft interrupt within the
	// interrupt grace and was killed.
	DiscardKilled Discard = "killed"
	// DiscardCrashed: the guest trapped (a wasm trap, a broken result).
	DiscardCrashed Discard = "crashed"
)

// ProgressSink receives the guest's progress() calls during one Run. Calls
// come from the goroutine running the guest; implementations must not block
// for long. total <= 0 means unknown.
type ProgressSink interface {
	Progress(done, total float64, message string)
}
