package upstream

import "errors"

// Code says why a call got no result. It is also the outcome the metrics
// count (with OutcomeOK and OutcomeToolError), so its values are fixed
// words, never built from input.
type Code string

const (
	// CodeUnknownTool: no upstream the principal may use has that tool
	// (the same for an upstream the principal may not use, so that names
	// cannot be probed).
	CodeUnknownTool Code = "unknown_tool"
	// CodeRefused: the tool matches neither allow nor ask, or it needs
	// the person's approval and nobody can be asked.
	CodeRefused Code = "refused"
	// CodeDenied: the person said no.
	CodeDenied Code = "denied"
	// CodeLimit: the run has made max_calls_per_run calls to the upstream.
	CodeLimit Code = "limit"
	// CodeTimeout: call_timeout passed; the call was cancelled upstream.
	CodeTimeout Code = "timeout"
	// CodeTooLarge: the upstream's answer was larger than
	// Options.MaxResultBytes; it was dropped unread.
	CodeTooLarge Code = "too_large"
	// CodeUnavailable: the upstream could not be started or reached, or
	// it went away during the call (a stdio server that exited).
	CodeUnavailable Code = "unavailable"
	// CodeUpstream: the upstream answered the call with a JSON-RPC error
	// (a tool's own failure is a result with IsError instead).
	CodeUpstream Code = "upstream_error"
	// CodeCancelled: the caller's context ended first; the call was
	// cancelled upstream.
	CodeCancelled Code = "cancelled"
)

// Outcomes of calls that got a result.
const (
	OutcomeOK        Code = "ok"
	OutcomeToolError Code = "tool_error" // a result with isError: the tool's own failure
)

// Error is why a call (or a listing) got no result. Message is what the
// code sees: it names the upstream, the tool and, for a limit or a
// refusal, the config key that decides; it never holds arguments,
// headers or secrets.
type Error struct {
	Code     Code
	Upstream string // "" for CodeUnknownTool
	Tool     string
	Message  string
	// Err is the underlying failure, for logs; nil when there is none.
	Err error
}

func (e *Error) Error() string { return e.Message }

func (e *Error) Unwrap() error { return e.Err }

// CodeOf is err's Code, or "" when err is not an *Error.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
