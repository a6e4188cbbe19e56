package workspace

import (
	"context"
	"time"

	"execd/internal/worker"
)

// The vocabulary of a run as the workspace's callers see it. The worker
// reports facts about its instance (worker.Result); the Manager decides
// what they mean for the workspace's state (settle) and hands its callers
// these types, so that nothing above the workspace needs the worker's.

// Status is how a run ended, as the user is told.
type Status string

const (
	// StatusOK: the code ran to completion.
	StatusOK Status = "ok"
	// StatusError: the code raised an uncaught exception, or the sandbox
	// failed it.
	StatusError Status = "error"
	// StatusTimeout: execd's own deadline stopped the code.
	StatusTimeout Status = "timeout"
	// StatusInterrupted: the caller's context ended for another reason (a
	// client's cancel, shutdown).
	StatusInterrupted Status = "interrupted"
	// StatusOOM: the code ran out of the memory its sandbox allows.
	StatusOOM Status = "oom"
	// StatusReset: the code ran to completion, but on a fresh interpreter:
	// the workspace's earlier state is gone (Outcome.ResetReason says why).
	StatusReset Status = "reset"
)

// GuestError is an uncaught exception of the code, or why the sandbox
// stopped it.
type GuestError struct {
	Type    string // e.g. "TypeError", "InterruptError"
	Message string
	Stack   string
}

// Picture is an image the code showed.
type Picture struct {
	MIME string // image/png, image/jpeg, image/gif or image/webp
	Data []byte
}

// ImageType names the media type of an image the code may show (PNG,
// JPEG, GIF, WebP, recognised by their first bytes), or "" for anything
// else: the same test the sandbox applies to show().
func ImageType(b []byte) string { return worker.ImageType(b) }

// ProgressSink receives the code's progress reports during a run, and the
// workspace's own ("queued: …"). It must not block for long.
type ProgressSink interface {
	Progress(done, total float64, message string)
}

// InputSource answers the code's input(): it asks the person and waits. A
// ctx that ends means the run is being stopped.
type InputSource interface {
	Input(ctx context.Context, prompt string) InputAnswer
}

// InputAnswer is the answer to one input().
type InputAnswer struct {
	Status InputStatus
	Text   string // the answer, when Status is InputOK
}

// InputStatus says whether an input() got an answer, and if not why.
type InputStatus int

const (
	// InputOK: the person answered.
	InputOK InputStatus = iota
	// InputEOF: the person declined or dismissed the question, or the run
	// is being stopped.
	InputEOF
	// InputNoClient: nobody can be asked (the client cannot answer).
	InputNoClient
	// InputTimedOut: nobody answered in time.
	InputTimedOut
)

// Choices is what the person is asked to pick from, for an InputSource
// given ctx by a run: nil for the code's input() (a free-text answer),
// AskPerson's choices for a question of a tool call.
func Choices(ctx context.Context) []string { return worker.Choices(ctx) }

// workerInput answers the worker's input() through the caller's source.
type workerInput struct{ in InputSource }

func (w workerInput) Input(ctx context.Context, prompt string) worker.InputAnswer {
	a := w.in.Input(ctx, prompt)
	var st worker.InputStatus
	switch a.Status {
	case InputOK:
		st = worker.InputOK
	case InputNoClient:
		st = worker.InputNoClient
	case InputTimedOut:
		st = worker.InputTimedOut
	default:
		st = worker.InputEOF
	}
	return worker.InputAnswer{Status: st, Text: a.Text}
}

// Result is what the code produced, with Status and Reset as the workspace
// decided them.
type Result struct {
	Status Status
	Stdout string
	Stderr string
	// Value is the printable form of the last expression's value; nil when
	// there is none.
	Value *string
	// Error is the exception, or why the run stopped; nil otherwise.
	Error *GuestError
	// Truncated reports that stdout or stderr exceeded the output cap (the
	// head and the tail are kept).
	Truncated bool
	// Reset reports that the interpreter's earlier state is gone
	// (Outcome.ResetReason says why); Status is then reset for code that
	// ran fine.
	Reset bool
	// Duration is the run's time in the sandbox, less its waits for input.
	Duration time.Duration
	// Images are what the code showed, in order.
	Images []Picture
	// ImagesRefused counts the images left out because the daemon's
	// memory budget could not hold them.
	ImagesRefused int
	// Network lists the hosts the code's requests reached, and how many
	// requests each.
	Network []HostUse
	// ToolCalls are the code's calls of upstream tools (code mode), one
	// entry per tool and outcome, in the order first made.
	ToolCalls []ToolCall
}

// ToolCall is how many calls a run made of one upstream tool with one
// outcome ("ok", "tool_error", or internal/upstream's code of why there
// was no result).
type ToolCall struct {
	Server, Tool, Outcome string
	Count                 int
}

// HostUse is a host a run's requests reached.
type HostUse struct {
	Host     string
	Requests int
}

// resultOf is the worker's result in the workspace's words, before the
// workspace has decided what the run means for its state.
func resultOf(r worker.Result) Result {
	out := Result{
		Status: Status(r.Status), Stdout: r.Stdout, Stderr: r.Stderr, Value: r.Value,
		Truncated: r.Truncated, Duration: r.Duration, ImagesRefused: r.ImagesRefused,
	}
	if e := r.Error; e != nil {
		out.Error = &GuestError{Type: e.Type, Message: e.Message, Stack: e.Stack}
	}
	for _, h := range r.Network {
		out.Network = append(out.Network, HostUse{Host: h.Host, Requests: h.Requests})
	}
	for _, c := range r.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, ToolCall{Server: c.Server, Tool: c.Tool, Outcome: c.Outcome, Count: c.Count})
	}
	if len(r.Images) > 0 {
		out.Images = make([]Picture, len(r.Images))
		for i, p := range r.Images {
			out.Images[i] = Picture{MIME: p.MIME, Data: p.Data}
		}
	}
	return out
}

// Tools is what a run's code calls the upstream MCP servers' tools
// through (code mode): internal/upstream's Run. A call in flight belongs
// to the run, which holds the workspace's turn, so a workspace is never
// hibernated while one is in flight.
type Tools = worker.Tools

// AskPerson asks the person a question on behalf of an upstream tool call
// of a run (code mode: an upstream.Approver's ctx), through the run's
// Request.Input, as the code's input() does: one question at a time, the
// run's timeout stopped meanwhile, its run slot given back. Without
// Input, InputNoClient.
func AskPerson(ctx context.Context, prompt string, choices ...string) InputAnswer {
	a := worker.AskPerson(ctx, prompt, choices...)
	var st InputStatus
	switch a.Status {
	case worker.InputOK:
		st = InputOK
	case worker.InputEOF:
		st = InputEOF
	case worker.InputTimedOut:
		st = InputTimedOut
	default:
		st = InputNoClient
	}
	return InputAnswer{Status: st, Text: a.Text}
}
