package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"execd/internal/frontend"
	"execd/internal/jsonrpc"
	"execd/internal/workspace"
)

// execute_code: the tool, its arguments, and the words of its result. The
// workspace decides what a run meant for the user's state (Outcome); the
// sentences the model reads are chosen here.

// execArgs are execute_code's arguments.
type execArgs struct {
	Code      string  `json:"code" desc:"The code to run. The value of the last expression is returned as result." missing:"the code to run"`
	Language  string  `json:"language" desc:"The language of the code."`
	Workspace *string `json:"workspace,omitempty" header:"Workspace" desc:"The workspace to run in: the id a previous result returned, or a name of your choice (1-64 characters of A-Z a-z 0-9 . _ -). Omit to create a new one."`
	TimeoutMs *int64  `json:"timeout_ms,omitempty" minimum:"1" desc:"Stop the code after this many milliseconds (the workspace keeps its state)."`
}

// The tool declares no outputSchema: a result that carries images has no
// structuredContent (RATIONALE.md, "Why do results with images carry no
// structuredContent?"), and clients refuse a result without one when the
// tool declares a schema. The text block is always the result's JSON.
func (t *tools) addExecuteCode() error {
	langs := t.opts.Languages
	desc := t.executeCodeDescription(everyPrincipal)
	err := frontend.AddTool(t.srv, frontend.Tool[execArgs]{
		Name:        "execute_code",
		Title:       "Execute code",
		Description: desc,
		Properties:  map[string]map[string]any{"language": {"enum": langs}},
		Annotations: annotationsRun,
		Tasks:       frontend.TaskOptional,
		Run:         t.executeCode,
		Invalid: func(in execArgs, msg string) any {
			return execFailure(deref(in.Workspace), "%s", msg)
		},
	})
	if err != nil {
		return err
	}
	return t.describeFor()
}

// executeCodeDescription is execute_code's description: the sandbox, the
// network and code mode's tools as the operator configured them, those
// principal may use.
func (t *tools) executeCodeDescription(principal string) string {
	langs := t.opts.Languages
	network := "No network access;"
	if t.opts.Network {
		network = "Network: HTTP and HTTPS to the hosts the operator allows, with fetch (JavaScript) or requests, urllib.request (Python); " +
			"a refused request raises an error that says why; credentials are placeholders in execd.env (JavaScript) or os.environ (Python), filled in by execd;"
	}
	desc := "Run code in an isolated sandbox (" + strings.Join(langs, ", ") + ") and return its printed output and the value of its last expression. " +
		"The sandbox is a workspace, like a notebook kernel: variables, functions and files under /workspace stay there between calls. " +
		"Every result names its workspace; pass that id back as `workspace` to continue in the same state (omit it to start a fresh one, or choose a name such as \"analysis\"). " +
		"The result is JSON: status (ok, error, timeout, interrupted, oom, or reset when earlier state was lost; reset_reason says why), stdout, stderr, result, error, notice. " +
		"Report long work with progress(done, total, message); attach an image (PNG, JPEG, GIF, WebP: a path or bytes) with show(x) (Python: from execd import show); " +
		"input(prompt) (JavaScript: prompt(message)) asks the user. " + network + " files live under /workspace." + t.codeModeDescription(principal)
	return desc
}

// execFailure is an execute_code result for a call that did not run.
func execFailure(ws, format string, a ...any) execResult {
	return execResult{out: execOutput{Status: string(workspace.StatusError), Error: fmt.Sprintf(format, a...), Workspace: ws}, isError: true}
}

// execCall is an execute_code call, its arguments checked.
type execCall struct {
	code, language, workspace string
	timeout                   time.Duration // the shorter of timeout_ms and RequestTimeout; 0 none
}

func (t *tools) readExecArgs(in execArgs) (execCall, *execResult) {
	ws := deref(in.Workspace)
	if strings.TrimSpace(in.Language) == "" {
		r := execFailure(ws, "missing argument language: one of %s", strings.Join(t.opts.Languages, ", "))
		return execCall{}, &r
	}
	timeout := t.opts.RequestTimeout
	if in.TimeoutMs != nil {
		d := time.Duration(min(*in.TimeoutMs, int64(365*24*time.Hour/time.Millisecond))) * time.Millisecond
		if timeout == 0 || d < timeout {
			timeout = d
		}
	}
	return execCall{code: in.Code, language: strings.ToLower(strings.TrimSpace(in.Language)), workspace: ws, timeout: timeout}, nil
}

func (t *tools) executeCode(ctx context.Context, c *frontend.Call, in execArgs) (any, *jsonrpc.Error) {
	a, bad := t.readExecArgs(in)
	if bad != nil {
		return *bad, nil
	}
	c.Tag("language", a.language)
	if a.workspace != "" {
		c.Tag("workspace", a.workspace)
	}
	if c.Era() == frontend.EraModern {
		rt, jerr := c.Retry(execOwner)
		if jerr != nil {
			return nil, jerr
		}
		if rt.State != nil {
			return t.resume(ctx, c, a, rt) // the answer to the code's input()
		}
	}
	rep := c.Reporter()
	defer rep.Stop()
	rep.Start("accepted " + a.language + " code")
	var src workspace.InputSource = noInput{}
	switch {
	case c.CanBecomeTask():
		// The engine runs the call apart from its request and makes it a
		// task if it runs long or asks for input; the task carries the
		// question (ask.go, taskInput). A new workspace is named now, so
		// that the task names it from the start.
		if a.workspace == "" {
			a.workspace = t.exec.NewID()
		}
		c.Tag("workspace", a.workspace)
		if c.CanElicit() {
			src = taskInput{t, c}
		}
	case c.Era() == frontend.EraModern && c.CanElicit():
		// The code may ask for input: the run must outlive this request
		// (ask.go).
		r, a := t.startRun(c, a)
		return t.follow(ctx, c, a, r, rep)
	case c.Era() == frontend.EraLegacy:
		src = streamInput{t, c}
	}
	// The timeout bounds the run, not the wait for a busy workspace or a
	// run slot: a queued call can still be cancelled by its client.
	out, err := t.exec.Run(ctx, workspace.Request{
		Principal: c.Principal(), Workspace: a.workspace, Language: a.language, Code: a.code, Sink: rep, Input: src, Timeout: a.timeout,
		Tools: t.runTools(c.Principal(), a.workspace),
	})
	rep.Flush()
	rep.Stop()
	return t.execAnswer(ctx, c, a, out, err)
}

// execAnswer turns what Run returned into execute_code's result, or
// into nothing when the client went away while the call waited.
func (t *tools) execAnswer(ctx context.Context, c *frontend.Call, a execCall, out workspace.Outcome, err error) (any, *jsonrpc.Error) {
	if err != nil {
		var we *workspace.Error
		switch {
		case errors.As(err, &we):
			return execFailure(a.workspace, "%s", we.Msg), nil
		case errors.Is(context.Cause(ctx), frontend.ErrShutdown):
			return execFailure(a.workspace, "execd is shutting down; the code did not run"), nil
		case ctx.Err() != nil:
			return nil, nil // the client went away while the call waited
		}
		t.log.Error("execute_code", zap.String("workspace", a.workspace), zap.Error(err))
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "Internal error: %v", err)
	}
	c.Tag("workspace", out.Workspace)
	r := t.describeRun(ctx, a, out)
	if out.Result.Reset {
		c.Log("warning", fmt.Sprintf("workspace %s: %s", out.Workspace, out.ResetReason.Sentence()))
	}
	return r, nil
}

// describeRun words an Outcome: the error says why the run stopped, the
// notice what else the model must know (state lost, disk full, the
// daemon short of memory).
func (t *tools) describeRun(ctx context.Context, a execCall, out workspace.Outcome) execResult {
	r := out.Result
	o := execOutput{
		Status:     string(r.Status),
		Stdout:     r.Stdout,
		Stderr:     r.Stderr,
		Result:     r.Value,
		Workspace:  out.Workspace,
		Language:   a.language,
		DurationMs: r.Duration.Milliseconds(),
		Truncated:  r.Truncated,
		Reset:      r.Reset,
	}
	var guest string
	if r.Error != nil {
		guest = formatGuestError(r.Error)
	}
	o.Error = guest
	switch r.Status {
	case workspace.StatusTimeout:
		head := fmt.Sprintf("timed out after %s", a.timeout)
		if !r.Reset {
			head += "; the workspace keeps its state"
		}
		o.Error = joinLines(head, guest)
	case workspace.StatusInterrupted:
		if errors.Is(context.Cause(ctx), frontend.ErrShutdown) {
			o.Error = joinLines("execd is shutting down; the run was stopped", guest)
		} else {
			o.Error = joinLines("the run was interrupted", guest)
		}
	case workspace.StatusOOM:
		if o.Error == "" {
			o.Error = "out of memory"
		}
	}
	var notes []string
	if r.Reset {
		o.ResetReason = string(out.ResetReason)
		notes = append(notes, out.ResetReason.Sentence())
	}
	if out.BudgetExceeded {
		notes = append(notes, "execd as a whole was short of memory during this run (the memory of all sandboxes together is capped), so an allocation failed that this workspace's own limit would have allowed; idle workspaces were saved to disk to make room: run the code again.")
	}
	if out.DiskFull {
		notes = append(notes, fmt.Sprintf("The workspace's disk quota (%s, workspace.max_disk_mib) is full: writes to /workspace failed with an I/O error. Its files count, and the installed packages no other workspace uses. Delete files or packages you no longer need, or reset the workspace with files: true.", mib(out.DiskQuotaBytes)))
	}
	if n := r.ImagesRefused; n > 0 {
		notes = append(notes, fmt.Sprintf("%d image(s) the code showed were left out: execd's memory budget (limits.max_total_memory_mib), which holds a result's images until the run ends, was full. Show fewer or smaller images, or run the code again.", n))
	}
	if out.PrincipalDiskFull {
		notes = append(notes, fmt.Sprintf("This token's disk budget (%s, workspace.max_principal_disk_mib, counting every workspace's files, saved interpreters, checkpoints and forks) is full: writes to /workspace failed with an I/O error. Delete workspaces or files you no longer need.", mib(out.PrincipalDiskBytes)))
	}
	o.Notice = strings.Join(notes, " ")
	for i, f := range out.Files {
		if i == maxResultFiles {
			o.MoreFiles = true
			break
		}
		o.Files = append(o.Files, fileRef{Path: "/workspace/" + f.Path, Size: f.Size, URI: fileURI(out.Workspace, f.Path)})
	}
	o.MoreFiles = o.MoreFiles || out.FilesTruncated
	o.Images = len(r.Images)
	for _, h := range r.Network {
		o.Network = append(o.Network, hostUse{Host: h.Host, Requests: h.Requests})
	}
	o.ToolCalls = toolCallsOf(r.ToolCalls)
	isErr := r.Status != workspace.StatusOK && r.Status != workspace.StatusReset
	if r.Truncated {
		// Lost output is a failure the model must notice: the run itself
		// may have succeeded, which status still says.
		isErr = true
		if o.Error == "" {
			limit := "the output limit"
			if t.opts.MaxOutputBytes > 0 {
				limit = fmt.Sprintf("%d bytes", t.opts.MaxOutputBytes)
			}
			o.Error = fmt.Sprintf("output truncated: stdout or stderr exceeded %s; the head and the tail are kept. Print less, or write large output to a file under /workspace", limit)
		}
	}
	return execResult{out: o, isError: isErr, images: r.Images}
}

// mib writes a byte count of whole MiB as "N MiB".
func mib(n int64) string {
	if n > 0 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

func joinLines(head, more string) string {
	if more == "" {
		return head
	}
	return head + "\n" + more
}

func formatGuestError(e *workspace.GuestError) string {
	s := e.Message
	if e.Type != "" {
		s = e.Type + ": " + e.Message
	}
	if st := strings.TrimRight(e.Stack, "\n"); st != "" && !strings.Contains(s, st) {
		s += "\n" + st
	}
	return s
}
