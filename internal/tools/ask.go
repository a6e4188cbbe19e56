package tools

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"execd/internal/frontend"
	"execd/internal/jsonrpc"
	"execd/internal/progress"
	"execd/internal/workspace"
)

// The code's input() (Python) and prompt() (JavaScript) ask the person
// through the client, with the engine's input plumbing
// (internal/frontend/input.go): Call.Gather asks a legacy client on the
// call's own stream and waits for its response (intercepted before
// routing); a modern call answers input_required, and its retry resumes
// the run. internal/frontend/RATIONALE.md, "How does the code's input()
// reach the person?", says why the modern run outlives its request.

// execOwner is the owner execute_code's requestState is sealed for.
const execOwner = "execute_code"

// elicitInput is the elicitation of one input(): a form of one string,
// value, titled by the prompt. With choices (a tool call's approval,
// workspace.Choices) value is one of them, titled (choiceSchema).
func elicitInput(c *frontend.Call, prompt string, choices []string) frontend.Input {
	msg := strings.TrimSpace(prompt)
	title := msg
	if msg == "" {
		msg, title = "The code asks for input.", "Input"
	}
	if len(title) > 200 {
		title = title[:200] + "…"
	}
	value := map[string]any{"type": "string", "title": title}
	latest := c.Era() == frontend.EraModern || c.Version() == frontend.VersionLatest
	if len(choices) > 0 {
		value = choiceSchema(choices, latest)
	}
	params := map[string]any{
		"message": msg,
		"requestedSchema": map[string]any{
			"type":       "object",
			"properties": map[string]any{"value": value},
			"required":   []string{"value"},
		},
	}
	if latest {
		params["mode"] = "form" // 2025-11-25 and later name the mode
	}
	return frontend.Input{Key: "input", Method: "elicitation/create", Params: params}
}

// choiceSchema is a single-select string of choices, each titled by
// itself capitalised, in the shape of the version's schema: from
// 2025-11-25 a titled single-select (oneOf of const and title, SEP-1330;
// no enum beside it, or a client such as the TypeScript SDK reads it as
// the untitled enum and drops the titles), before (2025-06-18, the first
// version with elicitation) an enum with enumNames.
func choiceSchema(choices []string, latest bool) map[string]any {
	titles := make([]string, len(choices))
	for i, ch := range choices {
		titles[i] = strings.ToUpper(ch[:1]) + ch[1:]
	}
	s := map[string]any{"type": "string", "title": "Answer"}
	if latest {
		one := make([]map[string]any, len(choices))
		for i, ch := range choices {
			one[i] = map[string]any{"const": ch, "title": titles[i]}
		}
		s["oneOf"] = one
	} else {
		s["enum"], s["enumNames"] = choices, titles
	}
	return s
}

// inputAnswer is what an ElicitResult gives the code: the accepted value,
// or EOF for a decline, a cancel or an answer without a string value.
func inputAnswer(raw json.RawMessage) workspace.InputAnswer {
	var r struct {
		Action  string         `json:"action"`
		Content map[string]any `json:"content"`
	}
	_ = json.Unmarshal(raw, &r)
	if v, ok := r.Content["value"].(string); ok && r.Action == "accept" {
		return workspace.InputAnswer{Status: workspace.InputOK, Text: v}
	}
	return workspace.InputAnswer{Status: workspace.InputEOF}
}

// streamInput asks a legacy client on the call's own stream.
type streamInput struct {
	t *tools
	c *frontend.Call
}

func (in streamInput) Input(ctx context.Context, prompt string) workspace.InputAnswer {
	c := in.c
	if !c.CanElicit() {
		return workspace.InputAnswer{Status: workspace.InputNoClient}
	}
	tctx, cancel := context.WithTimeout(ctx, in.t.srv.InputTimeout())
	defer cancel()
	got, ok, _, jerr := c.Gather(tctx, execOwner, frontend.Retry{}, []frontend.Input{elicitInput(c, prompt, workspace.Choices(ctx))}, nil)
	switch {
	case ok:
		return inputAnswer(got["input"])
	case ctx.Err() != nil:
		return workspace.InputAnswer{Status: workspace.InputEOF} // the run is being stopped
	case tctx.Err() != nil:
		return workspace.InputAnswer{Status: workspace.InputTimedOut}
	case jerr != nil && jerr.Code == jsonrpc.CodeInternalError:
		// The answer has no stream to ask on (a JSON answer, a batch).
		in.t.log.Debug("input cannot be asked", zap.String("id", c.ID()), zap.String("why", jerr.Message))
		return workspace.InputAnswer{Status: workspace.InputNoClient}
	}
	return workspace.InputAnswer{Status: workspace.InputEOF} // the client answered with an error or nonsense
}

// taskInput asks through the task the call is, or becomes by asking: the
// task goes input_required and tasks/update brings the answer.
type taskInput struct {
	t *tools
	c *frontend.Call
}

func (in taskInput) Input(ctx context.Context, prompt string) workspace.InputAnswer {
	tctx, cancel := context.WithTimeout(ctx, in.t.srv.InputTimeout())
	defer cancel()
	got, err := in.c.TaskInput(tctx, []frontend.Input{elicitInput(in.c, prompt, workspace.Choices(ctx))})
	switch {
	case err == nil:
		return inputAnswer(got["input"])
	case ctx.Err() != nil:
		return workspace.InputAnswer{Status: workspace.InputEOF} // the run is being stopped
	case tctx.Err() != nil:
		return workspace.InputAnswer{Status: workspace.InputTimedOut}
	}
	return workspace.InputAnswer{Status: workspace.InputNoClient}
}

// noInput answers every input() with "nobody can answer".
type noInput struct{}

func (noInput) Input(context.Context, string) workspace.InputAnswer {
	return workspace.InputAnswer{Status: workspace.InputNoClient}
}

// A modern run whose code may ask for input runs apart from the request
// that started it: when the code asks, that request answers
// input_required and ends, the run waits parked (holding its workspace),
// and the client's retry, carrying the answer and the sealed requestState,
// resumes it and follows it to its result or its next question.

// liveRun is such a run.
type liveRun struct {
	id        string // random: names the run in its requestState, once parked
	principal string
	workspace string
	bind      string // binds the requestState to the call: its code and language
	args      execCall
	cancel    context.CancelCauseFunc
	events    chan runEvent // the run's questions, then its end
	sink      relaySink

	ask     *runAsk     // the question it waits on while parked
	timer   *time.Timer // ends the wait after Options.InputTimeout
	taken   bool        // a retry holds it (guarded by pausedRuns.mu)
	expired bool        // the timer fired while a retry held it
}

// runEvent is a question of the run (ask) or its end.
type runEvent struct {
	ask *runAsk
	out workspace.Outcome
	err error
}

type runAsk struct {
	prompt  string
	choices []string                   // workspace.Choices of the question, nil for input()
	answer  chan workspace.InputAnswer // buffered: the answer never waits
}

// Input hands the question to whoever follows the run and waits for the
// answer, or for the run to be stopped.
func (r *liveRun) Input(ctx context.Context, prompt string) workspace.InputAnswer {
	a := &runAsk{prompt: prompt, choices: workspace.Choices(ctx), answer: make(chan workspace.InputAnswer, 1)}
	select {
	case r.events <- runEvent{ask: a}:
	case <-ctx.Done():
		return workspace.InputAnswer{Status: workspace.InputEOF}
	}
	select {
	case ans := <-a.answer:
		return ans
	case <-ctx.Done():
		return workspace.InputAnswer{Status: workspace.InputEOF}
	}
}

// relaySink forwards progress to the request following the run, if any.
type relaySink struct {
	mu  sync.Mutex
	rep *progress.Reporter
}

func (s *relaySink) set(rep *progress.Reporter) {
	s.mu.Lock()
	s.rep = rep
	s.mu.Unlock()
}

func (s *relaySink) Progress(done, total float64, message string) {
	s.mu.Lock()
	rep := s.rep
	s.mu.Unlock()
	if rep != nil {
		rep.Progress(done, total, message)
	}
}

// bindOf is what a requestState of execute_code is bound to besides the
// principal: the call's code and language (the retry repeats them).
func bindOf(a execCall) string {
	h := sha256.New()
	h.Write([]byte(a.language))
	h.Write([]byte{0})
	h.Write([]byte(a.code))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// startRun starts a modern run apart from its request. A call that named
// no workspace is given its id now, so that the requestState can name it.
func (t *tools) startRun(c *frontend.Call, a execCall) (*liveRun, execCall) {
	if a.workspace == "" {
		a.workspace = t.exec.NewID()
	}
	ctx, cancel := context.WithCancelCause(t.srv.Detached())
	r := &liveRun{principal: c.Principal(), workspace: a.workspace, args: a, cancel: cancel, events: make(chan runEvent, 1)}
	go func() {
		defer cancel(nil)
		out, err := t.exec.Run(ctx, workspace.Request{Principal: r.principal, Workspace: a.workspace, Language: a.language,
			Code: a.code, Sink: &r.sink, Input: r, Timeout: a.timeout, Tools: t.runTools(r.principal, a.workspace)})
		r.events <- runEvent{out: out, err: err}
	}()
	return r, a
}

// follow serves a request attached to run r until the run ends (its
// result) or asks (input_required, the run parked). The request's end
// cancels the run while it follows it.
func (t *tools) follow(ctx context.Context, c *frontend.Call, a execCall, r *liveRun, rep *progress.Reporter) (any, *jsonrpc.Error) {
	r.sink.set(rep)
	defer r.sink.set(nil)
	stop := context.AfterFunc(ctx, func() { r.cancel(context.Cause(ctx)) })
	refused := false // a question refused for MaxWaitingInputs
	for {
		ev := <-r.events
		if ev.ask == nil {
			stop()
			rep.Flush()
			rep.Stop()
			res, jerr := t.execAnswer(ctx, c, a, ev.out, ev.err)
			if er, ok := res.(execResult); ok && refused {
				er.out.Notice = joinSentences(er.out.Notice, fmt.Sprintf("The code's input() got end of file without asking: "+
					"this token has %d runs waiting for input already, the most protocol.max_waiting_inputs_per_principal allows. "+
					"Answer one of them, or reset its workspace, then run the code again.", t.opts.MaxWaitingInputs))
				res = er
			}
			return res, jerr
		}
		if n := t.opts.MaxWaitingInputs; n > 0 && t.paused.count(r.principal) >= n {
			ev.ask.answer <- workspace.InputAnswer{Status: workspace.InputEOF}
			refused = true
			continue
		}
		if !stop() {
			// The request ended and the run is being stopped: no one to ask.
			ev.ask.answer <- workspace.InputAnswer{Status: workspace.InputEOF}
			continue
		}
		rep.Stop()
		return t.park(ctx, c, r, ev.ask)
	}
}

// park keeps r waiting for the answer to ask and answers the request with
// input_required. The run is named and bound now: most runs never ask.
func (t *tools) park(ctx context.Context, c *frontend.Call, r *liveRun, ask *runAsk) (any, *jsonrpc.Error) {
	if r.id == "" {
		var id [16]byte
		_, _ = rand.Read(id[:])
		r.id, r.bind = hex.EncodeToString(id[:]), bindOf(r.args)
	}
	r.ask = ask
	t.paused.put(r, t.srv.InputTimeout(), t.expire)
	c.Tag("workspace", r.workspace)
	_, _, res, jerr := c.Gather(ctx, execOwner, frontend.Retry{}, []frontend.Input{elicitInput(c, ask.prompt, ask.choices)}, r.state())
	return res, jerr
}

func (r *liveRun) state() map[string]any {
	return map[string]any{"run": r.id, "workspace": r.workspace, "bind": r.bind}
}

// resume serves the retry of an input_required round: it checks that the
// state belongs to this call, takes the parked run, and gives it the
// answer; a retry without the answer is asked again.
func (t *tools) resume(ctx context.Context, c *frontend.Call, a execCall, rt frontend.Retry) (any, *jsonrpc.Error) {
	var id, ws, bind string
	_ = json.Unmarshal(rt.State["run"], &id)
	_ = json.Unmarshal(rt.State["workspace"], &ws)
	_ = json.Unmarshal(rt.State["bind"], &bind)
	if id == "" || bind != bindOf(a) || (a.workspace != "" && a.workspace != ws) {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: requestState belongs to another call (its code, language and workspace must be those of the call that asked)")
	}
	r := t.paused.take(id, c.Principal())
	if r == nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: the run this requestState belongs to no longer waits for input (it was answered already, nobody answered within protocol.input_timeout, or execd restarted); call again without requestState")
	}
	got, ok, res, jerr := c.Gather(ctx, execOwner, rt, []frontend.Input{elicitInput(c, r.ask.prompt, r.ask.choices)}, r.state())
	if !ok {
		t.paused.putBack(r, t.expire)
		return res, jerr
	}
	t.paused.answered(r)
	c.Tag("workspace", r.workspace)
	r.ask.answer <- inputAnswer(got["input"])
	r.ask = nil
	rep := c.Reporter()
	defer rep.Stop()
	rep.Start("resumed with the answer")
	a.workspace = r.workspace
	return t.follow(ctx, c, a, r, rep)
}

// expire ends the wait of a parked run nobody answered: its input() gets
// EOF, later ones too, and its result is dropped.
func (t *tools) expire(r *liveRun) {
	t.log.Info("input not answered in time; the run goes on without it", zap.String("workspace", r.workspace),
		zap.Duration("input_timeout", t.srv.InputTimeout()))
	r.ask.answer <- workspace.InputAnswer{Status: workspace.InputTimedOut}
	r.answerRest(workspace.InputTimedOut)
}

// answerRest answers every later question of r with status, and drops its
// result, in the background: nobody follows r any more.
func (r *liveRun) answerRest(status workspace.InputStatus) {
	go func() {
		for ev := range r.events {
			if ev.ask == nil {
				return
			}
			ev.ask.answer <- workspace.InputAnswer{Status: status}
		}
	}()
}

// endParked stops the runs of principal's workspace ws that wait for
// input, before a reset or delete of it (what, for the log): its owner
// asks, so the run's question is moot, and the operation need not wait
// for protocol.input_timeout. The runs end interrupted; their results are
// dropped, and their requestState is refused from now on.
func (t *tools) endParked(principal, ws, what string) {
	for _, r := range t.paused.takeIn(principal, ws) {
		t.log.Info("a run waiting for input ended: its workspace is being "+what, zap.String("workspace", ws))
		r.cancel(fmt.Errorf("the workspace was %s while its code waited for input", what))
		r.answerRest(workspace.InputEOF)
	}
}

// pausedRuns are the parked runs, by id.
type pausedRuns struct {
	mu sync.Mutex
	m  map[string]*liveRun
}

func newPausedRuns() *pausedRuns { return &pausedRuns{m: map[string]*liveRun{}} }

// put parks r; expire is called if no retry takes it within ttl.
func (p *pausedRuns) put(r *liveRun, ttl time.Duration, expire func(*liveRun)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[r.id] = r
	r.timer = time.AfterFunc(ttl, func() {
		p.mu.Lock()
		if r.taken {
			r.expired = true // the retry that holds it decides
			p.mu.Unlock()
			return
		}
		_, parked := p.m[r.id]
		delete(p.m, r.id)
		p.mu.Unlock()
		if parked {
			expire(r)
		}
	})
}

// take hands the parked run id of principal to a retry, or nil.
func (p *pausedRuns) take(id, principal string) *liveRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.m[id]
	if r == nil || r.principal != principal || r.taken {
		return nil
	}
	r.taken = true
	return r
}

// putBack parks a run a retry took without answering it; if its time ran
// out meanwhile, it expires now. Otherwise the taken run is released (its
// timer goes on).
func (p *pausedRuns) putBack(r *liveRun, expire func(*liveRun)) {
	p.mu.Lock()
	r.taken = false
	gone := r.expired
	if gone {
		delete(p.m, r.id)
	}
	p.mu.Unlock()
	if gone {
		expire(r)
	}
}

// answered forgets a run a retry answered.
func (p *pausedRuns) answered(r *liveRun) {
	p.mu.Lock()
	delete(p.m, r.id)
	r.timer.Stop()
	p.mu.Unlock()
}

// takeIn takes every parked run of principal in workspace ws that no
// retry holds (a held one is running again, and ends as runs do).
func (p *pausedRuns) takeIn(principal, ws string) []*liveRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*liveRun
	for id, r := range p.m {
		if r.principal == principal && r.workspace == ws && !r.taken {
			r.timer.Stop()
			delete(p.m, id)
			out = append(out, r)
		}
	}
	return out
}

// count is how many runs of principal are parked (held by a retry or not).
func (p *pausedRuns) count(principal string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.m {
		if r.principal == principal {
			n++
		}
	}
	return n
}

// joinSentences joins two notices (either may be empty).
func joinSentences(a, b string) string {
	if a == "" {
		return b
	}
	return a + " " + b
}

// closeAll forgets every parked run (at shutdown, which cancels them).
func (p *pausedRuns) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, r := range p.m {
		r.timer.Stop()
		delete(p.m, id)
	}
}
