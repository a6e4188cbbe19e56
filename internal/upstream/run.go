package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// CodeBadArguments: the arguments are not a JSON object.
const CodeBadArguments Code = "bad_arguments"

// Decision is the person's answer to an Approval.
type Decision int

const (
	Deny        Decision = iota // the call is refused (CodeDenied)
	AllowOnce                   // this call goes ahead; the next call of the tool asks again
	AllowForRun                 // this call and the run's later calls of the tool go ahead
)

// Approval is what the person is asked about, as facts: the caller puts
// them in words.
type Approval struct {
	Upstream, Tool     string // Tool is its name upstream
	Title, Description string // the tool's own
	// Arguments are the code's, as it passed them: the person decides on
	// what would be sent.
	Arguments json.RawMessage
}

// Approver asks the person about a call to a tool of ask, and blocks
// until they answer or ctx ends. Time spent here does not count against
// call_timeout. An error refuses the call (CodeRefused, or CodeCancelled
// when ctx ended).
type Approver func(ctx context.Context, a Approval) (Decision, error)

// ProgressFunc receives an upstream's progress on a call. It runs on a
// goroutine of the call's, never two at once; while it runs, later
// progress replaces what has not been delivered (only the latest is
// kept), so a slow receiver never holds up the connection. Nothing comes
// after Call has returned.
type ProgressFunc func(done, total float64, message string)

// Run is one run's use of the upstreams: its principal, the person to ask,
// its calls counted against each upstream's max_calls_per_run, and the
// tools the person allowed for the rest of it. Make one per run.
type Run struct {
	h         *Hub
	principal string
	approve   Approver

	mu      sync.Mutex
	calls   map[*server]int
	allowed map[*server]map[string]bool
	logged  map[Code]bool // refusals and limits are logged once per run
}

// NewRun starts a run of principal's code; approve asks the person (nil:
// nobody can be asked, and tools of ask are refused).
func (h *Hub) NewRun(principal string, approve Approver) *Run {
	return &Run{h: h, principal: principal, approve: approve, calls: map[*server]int{},
		allowed: map[*server]map[string]bool{}, logged: map[Code]bool{}}
}

// Tools lists the tools the run's principal may call (Hub.Tools).
func (r *Run) Tools(ctx context.Context) ([]ToolInfo, error) {
	return r.h.Tools(ctx, r.principal)
}

// Calls is how many calls the run made to each upstream it called.
func (r *Run) Calls() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.calls))
	for s, n := range r.calls {
		out[s.cfg.Name] = n
	}
	return out
}

// Call calls tool (its name upstream, or its Ident) of the upstream named
// server with args (a JSON object; empty means {}). A tool's own failure
// is a Result with IsError; everything else that keeps a call from a
// result is an *Error with its Code. When ctx ends first, the call is
// cancelled upstream (notifications/cancelled) and Call returns at once.
func (r *Run) Call(ctx context.Context, server, tool string, args json.RawMessage, progress ProgressFunc) (*Result, error) {
	s := r.h.visible(r.principal, server)
	if s == nil {
		r.h.log.Debug("upstream call", zap.String("principal", r.principal), zap.String("outcome", string(CodeUnknownTool)))
		return nil, unknownTool(server, tool)
	}
	start := time.Now()
	ctx, end := ctx, func(CallEnd) {}
	if o := r.h.opts.Observer; o != nil {
		ctx, end = o.UpstreamCall(ctx, CallInfo{Principal: r.principal, Upstream: s.cfg.Name, Tool: tool})
	}
	res, name, err := r.call(ctx, s, tool, args, progress)
	outcome := OutcomeOK
	switch {
	case err != nil:
		outcome = CodeOf(err)
	case res.IsError:
		outcome = OutcomeToolError
	}
	d := time.Since(start)
	n := s.calls[outcome]
	if n == nil { // not an *Error: never expected, still counted
		outcome, n = CodeUnavailable, s.calls[CodeUnavailable]
	}
	n.Add(1)
	end(CallEnd{Outcome: outcome, Duration: d})
	r.logCall(s, name, outcome, d)
	return res, err
}

func (r *Run) call(ctx context.Context, s *server, tool string, args json.RawMessage, progress ProgressFunc) (*Result, string, error) {
	if len(bytes.TrimSpace(args)) == 0 || bytes.Equal(bytes.TrimSpace(args), []byte("null")) {
		args = json.RawMessage("{}")
	} else if firstByte(args) != '{' || !json.Valid(args) {
		return nil, tool, &Error{Code: CodeBadArguments, Upstream: s.cfg.Name, Tool: tool,
			Message: fmt.Sprintf("tools.%s.%s takes its arguments as one object", s.cfg.Name, tool)}
	}
	l, err := s.tools(ctx)
	if err != nil {
		return nil, tool, err
	}
	t := l.find(tool)
	if t == nil {
		return nil, tool, unknownTool(s.cfg.Name, tool)
	}
	if err := r.admit(ctx, s, t, args); err != nil {
		return nil, t.Name, err
	}
	r.mu.Lock()
	n := r.calls[s]
	if n < s.cfg.MaxCallsPerRun {
		r.calls[s] = n + 1
	}
	r.mu.Unlock()
	if n >= s.cfg.MaxCallsPerRun {
		return nil, t.Name, &Error{Code: CodeLimit, Upstream: s.cfg.Name, Tool: t.Name,
			Message: fmt.Sprintf("this run has made %d calls to upstream %q, as many as it may (%s)", n, s.cfg.Name, limitKey(s.cfg.Name, "max_calls_per_run"))}
	}
	res, err := s.call(ctx, t.Name, args, progress)
	return res, t.Name, err
}

// admit decides the call by the upstream's rules, asking the person for a
// tool of ask unless they allowed it for the run.
func (r *Run) admit(ctx context.Context, s *server, t *mcp.Tool, args json.RawMessage) error {
	refused := func(format string, a ...any) error {
		return &Error{Code: CodeRefused, Upstream: s.cfg.Name, Tool: t.Name, Message: fmt.Sprintf(format, a...)}
	}
	switch s.rules.access(t.Name) {
	case AccessAllow:
		return nil
	case AccessRefuse:
		return refused("tools.%s.%s is refused: it matches neither allow nor ask of [[upstream]] %q", s.cfg.Name, t.Name, s.cfg.Name)
	}
	r.mu.Lock()
	ok := r.allowed[s][t.Name]
	r.mu.Unlock()
	if ok {
		return nil
	}
	if r.approve == nil {
		return refused("tools.%s.%s needs the person's approval (%s), and this call cannot ask", s.cfg.Name, t.Name, limitKey(s.cfg.Name, "ask"))
	}
	d, err := r.approve(ctx, Approval{Upstream: s.cfg.Name, Tool: t.Name, Title: t.Title, Description: t.Description, Arguments: args})
	switch {
	case err != nil && ctx.Err() != nil:
		return &Error{Code: CodeCancelled, Upstream: s.cfg.Name, Tool: t.Name, Message: "the call was cancelled while waiting for the person's approval", Err: err}
	case err != nil:
		return refused("tools.%s.%s needs the person's approval (%s), which could not be had: %s", s.cfg.Name, t.Name, limitKey(s.cfg.Name, "ask"), clip(err.Error(), 200))
	case d == AllowForRun:
		r.mu.Lock()
		if r.allowed[s] == nil {
			r.allowed[s] = map[string]bool{}
		}
		r.allowed[s][t.Name] = true
		r.mu.Unlock()
	case d != AllowOnce:
		return &Error{Code: CodeDenied, Upstream: s.cfg.Name, Tool: t.Name,
			Message: fmt.Sprintf("the person declined the call to tools.%s.%s", s.cfg.Name, t.Name)}
	}
	return nil
}

func unknownTool(server, tool string) *Error {
	return &Error{Code: CodeUnknownTool, Message: fmt.Sprintf("tools.%s.%s is not a tool this code may call (tools.list() lists them)", server, tool)}
}

// logCall writes the call's log line: never its arguments or its answer.
// Refusals and limits are logged once per run, so that a loop of them
// does not flood the log.
func (r *Run) logCall(s *server, tool string, outcome Code, d time.Duration) {
	switch outcome {
	case CodeRefused, CodeLimit, CodeDenied, CodeUnknownTool, CodeBadArguments:
		r.mu.Lock()
		seen := r.logged[outcome]
		r.logged[outcome] = true
		r.mu.Unlock()
		if seen {
			return
		}
	}
	r.h.log.Info("upstream call", zap.String("principal", r.principal), zap.String("upstream", s.cfg.Name),
		zap.String("tool", clip(tool, 128)), zap.String("outcome", string(outcome)), zap.Duration("duration", d))
}

// call sends tools/call on the upstream's connection, bounded by
// call_timeout.
func (s *server) call(ctx context.Context, tool string, args json.RawMessage, progress ProgressFunc) (*Result, error) {
	c, err := s.session(ctx)
	if err != nil {
		return nil, s.asError(ctx, tool, nil, err)
	}
	cctx, cancel := context.WithTimeoutCause(ctx, s.cfg.CallTimeout.Duration, errCallTimeout)
	defer cancel()
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if progress != nil {
		token := fmt.Sprintf("execd-%d", s.h.nextToken.Add(1))
		sink := s.h.openProgress(token, progress)
		defer s.h.closeProgress(token, sink)
		params.SetProgressToken(token)
	}
	res, err := c.cs.CallTool(cctx, params)
	if err != nil {
		return nil, s.asError(cctx, tool, c, err)
	}
	s.succeeded()
	return s.result(res), nil
}

// goneGrace bounds the wait, after a call failed with its connection, for
// the connection's end to be recorded (a stdio server's exit status).
const goneGrace = 2 * time.Second

// asError turns what the SDK said into an *Error; tool is "" for a
// listing, c the connection it was on (nil when there was none).
func (s *server) asError(ctx context.Context, tool string, c *conn, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	what := fmt.Sprintf("tools.%s.%s", s.cfg.Name, tool)
	if tool == "" {
		what = fmt.Sprintf("the tools of upstream %q", s.cfg.Name)
	}
	mk := func(code Code, format string, a ...any) *Error {
		return &Error{Code: code, Upstream: s.cfg.Name, Tool: tool, Message: fmt.Sprintf(format, a...), Err: err}
	}
	if ctx.Err() != nil {
		if context.Cause(ctx) == errCallTimeout {
			return mk(CodeTimeout, "%s did not answer within %s (%s); the call was cancelled upstream", what, s.cfg.CallTimeout, limitKey(s.cfg.Name, "call_timeout"))
		}
		return mk(CodeCancelled, "the call to %s was cancelled", what)
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		var data map[string]int64
		if json.Unmarshal(we.Data, &data) == nil && data[tooLargeKey] > 0 {
			key := ""
			if s.h.opts.MaxResultKey != "" {
				key = " (" + s.h.opts.MaxResultKey + ")"
			}
			return mk(CodeTooLarge, "the answer of %s has %d bytes, more than the %d execd takes%s; it was dropped", what, data[tooLargeKey], s.h.opts.MaxResultBytes, key)
		}
		return mk(CodeUpstream, "upstream %q answered %s with an error: %s", s.cfg.Name, what, clip(s.redacted(we.Message), 300))
	}
	if c != nil {
		t := time.NewTimer(goneGrace)
		defer t.Stop()
		select {
		case <-c.done:
			return mk(CodeUnavailable, "upstream %q went away during the call to %s (%s); execd starts it again at the next call", s.cfg.Name, what, c.why)
		case <-t.C:
		}
		// The connection lives on but the SDK gave up on it (something it
		// could not read): end it, so that the next call starts afresh.
		s.drop(c)
	}
	return mk(CodeUnavailable, "the call to %s failed: %s; execd connects again at the next call", what, clip(s.redacted(err.Error()), 200))
}
