package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"execd/internal/frontend"
	"execd/internal/upstream"
	"execd/internal/workspace"
)

// Code mode: the code calls the tools of the operator's upstream MCP
// servers (internal/upstream). execute_code's description names them as
// typed signatures; each run gets its own upstream.Run (its principal, its
// count of calls against max_calls_per_run); the result lists the calls.

// everyPrincipal asks Hub.Signatures for the upstreams open to every
// principal (no principals key): execute_code's own description, which
// tools/list gives each caller in place of the one for its principal
// (describeFor) only when no upstream names principals. No principal is
// called "".
const everyPrincipal = ""

// codeModeDescription is what execute_code's description says of the
// upstream tools principal may use; "" without upstreams.
func (t *tools) codeModeDescription(principal string) string {
	h := t.opts.Upstreams
	if h == nil || len(h.Names()) == 0 {
		return ""
	}
	var parts []string
	langs := t.opts.Languages
	budget := t.opts.DescriptionBudget / max(1, len(langs))
	for _, l := range langs {
		switch l {
		case "javascript":
			parts = append(parts, "JavaScript: `await tools.<server>.<tool>({...})` returns the tool's structured content, else its text (parsed when JSON); "+
				"a failure throws ToolError (e.code says why); `tools.list()` lists every tool you may call with its inputSchema and access (\"ask\" tools need the user's approval). Signatures:\n"+
				h.Signatures(principal, "javascript", budget))
		case "python":
			parts = append(parts, "Python: `from execd import tools`; `tools.<server>.<tool>(**args)`, failures raise execd.ToolError; `tools.list()`; `help(tools.<server>.<tool>)` describes one. Signatures:\n"+
				h.Signatures(principal, "python", budget))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " Tools of other MCP servers (code mode): call them from the code and return only what matters; every call counts against a per-run limit. " +
		strings.Join(parts, "\n")
}

// describeFor makes execute_code's description on srv name the upstream
// tools of the caller's principal, when some upstream is open to some
// principals only; otherwise the one description serves all.
func (t *tools) describeFor() error {
	h := t.opts.Upstreams
	if h == nil || !h.Restricted() {
		return nil
	}
	return t.srv.SetDescriber("execute_code", t.executeCodeDescription)
}

// UpstreamToolsChanged renews execute_code's description on srv, for
// upstream.Options.OnToolsChanged: the tools/list answers that follow
// name the upstreams' tools as they are now, legacy clients with a
// stream of their own are sent notifications/tools/list_changed (with
// frontend.Options.ToolsListChanged), and a modern client re-lists
// within the list's ttlMs. opts are Register's.
func UpstreamToolsChanged(srv *frontend.Server, opts Options) error {
	t := &tools{opts: opts.withDefaults(), srv: srv}
	if err := srv.SetDescription("execute_code", t.executeCodeDescription(everyPrincipal)); err != nil {
		return err
	}
	if err := t.describeFor(); err != nil {
		return err
	}
	srv.NotifyToolsChanged()
	return nil
}

// runTools is the run's use of the upstreams, nil without any. A call of
// a tool of ask is put to the person through the run's input path
// (approve).
func (t *tools) runTools(principal, ws string) workspace.Tools {
	if t.opts.Upstreams == nil {
		return nil
	}
	return t.opts.Upstreams.NewRun(principal, func(ctx context.Context, a upstream.Approval) (upstream.Decision, error) {
		return approve(ctx, ws, a)
	})
}

// maxApprovalArgs bounds the arguments an approval's question shows.
const maxApprovalArgs = 2000

// The choices of an approval's question, the values of its enum.
const (
	choiceOnce = "allow once"
	choiceRun  = "allow for the rest of this run"
	choiceDeny = "deny"
)

// approve asks the person whether the code may call a tool of ask, in
// the words of input() with the choices allow once (this call), allow
// for the rest of this run (the run's later calls of the tool too) and
// deny. A free-text answer (a client that shows no choices) is read as
// yes / always / anything else declines.
func approve(ctx context.Context, ws string, a upstream.Approval) (upstream.Decision, error) {
	args := cut(string(a.Arguments), maxApprovalArgs)
	where := "this workspace"
	if ws != "" {
		where = "workspace " + ws
	}
	what := ""
	if a.Description != "" {
		what = " (" + firstDescLine(a.Description, 200) + ")"
	}
	prompt := fmt.Sprintf("Code in %s wants to call %s.%s%s with %s. Allow?", where, a.Upstream, a.Tool, what, args)
	ans := workspace.AskPerson(ctx, prompt, choiceOnce, choiceRun, choiceDeny)
	switch ans.Status {
	case workspace.InputOK:
		switch strings.ToLower(strings.TrimSpace(ans.Text)) {
		case choiceOnce, "yes", "y", "once", "allow":
			return upstream.AllowOnce, nil
		case choiceRun, "always", "a", "run":
			return upstream.AllowForRun, nil
		}
		return upstream.Deny, nil
	case workspace.InputEOF:
		return upstream.Deny, nil
	case workspace.InputTimedOut:
		return upstream.Deny, errors.New("nobody answered in time (protocol.input_timeout)")
	}
	return upstream.Deny, errors.New("the client cannot be asked (it supports neither elicitation nor input_required)")
}

func firstDescLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	return cut(s, n)
}

// cut shortens s to at most n bytes on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// toolCallsOf is the result's toolCalls.
func toolCallsOf(calls []workspace.ToolCall) []toolCallUse {
	var out []toolCallUse
	for _, c := range calls {
		out = append(out, toolCallUse{Server: c.Server, Tool: c.Tool, Outcome: c.Outcome, Count: c.Count})
	}
	return out
}

var _ workspace.Tools = (*upstream.Run)(nil)
