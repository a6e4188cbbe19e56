package frontend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"execd/internal/jsonrpc"
	"execd/internal/tasks"
)

// Tasks: a tools/call that goes on running after its request has been
// answered with a task handle, which the client polls (tasks/get), answers
// (tasks/update) and cancels (tasks/cancel). One mechanism serves both
// eras:
//
//   - 2026-07-28, the io.modelcontextprotocol/tasks extension
//     (experimental-ext-tasks, docs/specification/draft/tasks.mdx): the
//     server decides. A call of a tool that supports tasks, from a request
//     that declared the extension, becomes a task when it has run for
//     Options.TaskAfter, when its handler asks the person for input
//     (Call.TaskInput), or when its handler says so (Call.BecomeTask);
//     a call that ends sooner is answered as usual.
//   - 2025-11-25 (docs/specification/2025-11-25/basic/utilities/tasks.mdx):
//     the client asks with params.task, and the call becomes a task at once.
//
// Until then the handler runs on a goroutine of its own, its context ended
// by the request's end as usual; once the call is a task the request is
// answered and its end no longer reaches the handler, which only shutdown
// and tasks/cancel stop. Records are kept by internal/tasks; the handles of
// the runs (their cancel, their questions) are kept here, in liveTasks.

// TaskSupport says whether calls of a tool may become tasks.
type TaskSupport int

const (
	// TaskNever: calls are always answered in-line (2025-11-25:
	// "forbidden").
	TaskNever TaskSupport = iota
	// TaskOptional: a call may become a task.
	TaskOptional
	// TaskRequired: a call must be able to become one: a modern request
	// must declare the extension (-32021), a legacy one must ask with
	// params.task (-32601).
	TaskRequired
)

func (ts TaskSupport) String() string {
	switch ts {
	case TaskOptional:
		return "optional"
	case TaskRequired:
		return "required"
	}
	return "forbidden"
}

// extTasks names the tasks extension in capabilities.extensions.
const extTasks = "io.modelcontextprotocol/tasks"

// taskPollInterval is the pollIntervalMs execd suggests: a person who
// waits for a cell sees its end within a second.
const taskPollInterval = time.Second

// taskMode is how a call may become a task.
type taskMode int

const (
	taskNo    taskMode = iota
	taskMay            // modern, extension declared: the server decides
	taskAsked          // legacy params.task: at once
)

// Causes of a task's end besides the request's.
var (
	// errTaskCancelled is a client's cancel, so nothing more is written
	// for the call.
	errTaskCancelled = fmt.Errorf("%w (tasks/cancel)", errClientCancel)
	errTaskRefused   = errors.New("the call could not become a task")
	// ErrNoTask is what TaskInput answers when the call cannot be a
	// modern task.
	ErrNoTask = errors.New("the call cannot become a task")
)

// modernTasks reports whether calls become tasks in the 2026-07-28 era:
// the extension is then declared.
func (s *Server) modernTasks() bool { return s.opts.Tasks != nil && s.opts.TaskAfter > 0 }

func (s *Server) hasTasks() bool { return s.opts.Tasks != nil }

// hasExtension reports whether a modern request's clientCapabilities
// declare the extension name.
func (m *requestMeta) hasExtension(name string) bool {
	return capability(capability(m.capabilities, "extensions"), name) != nil
}

// missingTasksExtension is the -32021 refusal of a request that needs the
// tasks extension and did not declare it.
func missingTasksExtension(id jsonrpc.ID) *reply {
	return refuse(http.StatusBadRequest, id, &jsonrpc.Error{Code: jsonrpc.CodeMissingCapability,
		Message: "Missing required client capability",
		Data:    map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{extTasks: map[string]any{}}}}})
}

// prepareTask decides, at admission, whether a call of t may become a task
// (c.task), and refuses what the tool's TaskSupport forbids.
func (s *Server) prepareTask(c *Call, t *tool) *reply {
	switch {
	case c.era == EraModern:
		if !s.modernTasks() || t.tasks == TaskNever {
			return nil
		}
		if !c.meta.hasExtension(extTasks) {
			if t.tasks == TaskRequired {
				return missingTasksExtension(c.id)
			}
			return nil
		}
		c.task.mode = taskMay
	case s.hasTasks() && c.version == VersionLatest:
		if jsonrpc.IsNull(c.toolCall.Task) {
			if t.tasks == TaskRequired {
				return refuse(http.StatusOK, c.id, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: tool %s runs only as a task: call it with params.task", t.name))
			}
			return nil
		}
		if t.tasks == TaskNever {
			return nil // callTool refuses it
		}
		var p struct {
			TTL *float64 `json:"ttl"`
		}
		if !jsonrpc.IsObject(c.toolCall.Task) || json.Unmarshal(c.toolCall.Task, &p) != nil || p.TTL != nil && *p.TTL < 0 {
			return refuse(http.StatusOK, c.id, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: task must be an object whose ttl, if given, is a number of milliseconds"))
		}
		c.task.mode = taskAsked
		if p.TTL != nil {
			c.task.ttl = time.Duration(min(*p.TTL, float64(365*24*time.Hour/time.Millisecond))) * time.Millisecond
		}
	}
	return nil
}

// callTask is what a Call knows of becoming a task.
type callTask struct {
	mode    taskMode
	ttl     time.Duration // the legacy client's wish
	promote chan struct{} // closed once to ask for the task now
	once    sync.Once
	ready   chan struct{} // closed when the call is a task, or never will be
	mu      sync.Mutex
	state   int // following, isTask or handlerDone
	live    *liveTask
}

const (
	following   = iota // the request still waits for the handler
	isTask             // the call is a task: its end settles the task
	handlerDone        // the handler ended before the call became a task
)

// CanBecomeTask reports whether the call may still become a 2026-07-28
// task: its client declared the extension and its tool supports tasks.
func (c *Call) CanBecomeTask() bool { return c.task.mode == taskMay }

// BecomeTask asks that the call become a task now, without waiting for
// Options.TaskAfter (a handler that knows its work is long). It reports
// whether the call can.
func (c *Call) BecomeTask() bool {
	if c.task.mode == taskNo || c.task.promote == nil {
		return false
	}
	c.task.once.Do(func() { close(c.task.promote) })
	return true
}

// served is what a handler returned.
type served struct {
	res  json.RawMessage
	jerr *jsonrpc.Error
}

// runMaybeTask runs a call that may become a task (task.run).
func (t *task) runMaybeTask() {
	s, c := t.s, t.c
	// The handler keeps the request's values (a span) but not its end:
	// the request's end stops it only while the request waits for it.
	hctx, hcancel := context.WithCancelCause(context.WithoutCancel(t.ctx))
	stopShutdown := context.AfterFunc(s.runCtx, func() { hcancel(context.Cause(s.runCtx)) })
	ct := &c.task
	ct.promote, ct.ready = make(chan struct{}), make(chan struct{})
	c.ctx = hctx
	if ct.mode == taskAsked {
		// The client asked for a task: it is made before the code runs.
		lt, rec, jerr := s.makeTask(c, t.start, hcancel)
		if jerr != nil {
			stopShutdown()
			hcancel(nil)
			close(ct.ready)
			t.finish(nil, jerr)
			return
		}
		// Answered before the code runs: all it sends goes to the task's
		// way back.
		t.answerTask(rec, lt)
		s.startHandler(t, hctx, hcancel, stopShutdown, nil)
		close(ct.ready)
		return
	}
	stopRequest := context.AfterFunc(t.ctx, func() { hcancel(context.Cause(t.ctx)) })
	done := make(chan served, 1)
	s.startHandler(t, hctx, hcancel, stopShutdown, done)
	tm := time.NewTimer(s.opts.TaskAfter)
	defer tm.Stop()
	inline := func() {
		close(ct.ready)
		r := <-done
		t.finish(r.res, r.jerr)
	}
	select {
	case r := <-done:
		stopRequest()
		close(ct.ready)
		t.finish(r.res, r.jerr)
		return
	case <-tm.C:
	case <-ct.promote:
	}
	if !stopRequest() {
		inline() // the request ended first: the handler is being stopped for it
		return
	}
	ct.mu.Lock()
	if ct.state == handlerDone {
		ct.mu.Unlock()
		inline()
		return
	}
	lt, rec, jerr := s.makeTask(c, t.start, hcancel)
	ct.mu.Unlock()
	if jerr != nil {
		hcancel(errTaskRefused)
		close(ct.ready)
		<-done
		t.finish(nil, jerr)
		return
	}
	t.answerTask(rec, lt)
	close(ct.ready)
}

// makeTask creates the task a call becomes and registers its run; the
// caller holds c.task.mu or runs no handler yet.
func (s *Server) makeTask(c *Call, start time.Time, cancel context.CancelCauseFunc) (*liveTask, tasks.Record, *jsonrpc.Error) {
	rec, err := s.opts.Tasks.Create(c.principal, tasks.New{Version: c.version, Tool: c.tool.name, Tags: c.tagMap(),
		Message: c.progressMessage(), TTL: c.task.ttl})
	if err != nil {
		return nil, rec, s.taskRefusal(err)
	}
	lt := &liveTask{id: rec.ID, principal: c.principal, c: c, cancel: cancel, start: start}
	c.task.state, c.task.live = isTask, lt
	s.live.add(lt)
	return lt, rec, nil
}

// startHandler runs the call's handler on a goroutine the server owns (it
// may outlive the request). Its end goes to done while the request waits
// for it, or settles the task the call has become.
func (s *Server) startHandler(t *task, hctx context.Context, hcancel context.CancelCauseFunc, stopShutdown func() bool, done chan<- served) {
	c, ct := t.c, &t.c.task
	s.calls.Add(1)
	go func() {
		defer s.calls.Done()
		defer stopShutdown()
		defer hcancel(nil)
		res, jerr := s.serve(hctx, c, t.m)
		ct.mu.Lock()
		lt := ct.live
		if ct.state == following {
			ct.state = handlerDone
		}
		ct.mu.Unlock()
		if lt != nil {
			s.settle(lt, hctx, served{res, jerr})
			return
		}
		done <- served{res, jerr}
	}()
}

// taskRefusal is the error of a call that could not become a task.
func (s *Server) taskRefusal(err error) *jsonrpc.Error {
	if errors.Is(err, tasks.ErrFull) {
		return jsonrpc.Errorf(jsonrpc.CodeServerPolicy,
			"Too many tasks: this client has protocol.max_tasks_per_principal (%v) tasks and none has finished; the call was stopped. Wait for a task to finish or cancel one (tasks/cancel), then call again", err)
	}
	s.log.Error("task not created", zap.Error(err))
	return jsonrpc.Errorf(jsonrpc.CodeInternalError, "Internal error: the call could not become a task: %v", err)
}

// answerTask answers the request with the new task and hands the call's
// notifications over to the task's way back: none in the modern era (the
// client polls; statusMessage carries the latest progress), the session's
// or process's own stream in the legacy era (the progress token lives as
// long as the task).
func (t *task) answerTask(rec tasks.Record, lt *liveTask) {
	s, c := t.s, t.c
	res, err := s.shapeResult(c.era, s.createTaskResult(c.era, rec))
	status := "task"
	c.mu.Lock()
	if err != nil || c.out.answer(jsonrpc.EncodeRawResult(c.id, res)) != nil {
		status = "undelivered"
	}
	c.out = taskSink{c}
	c.mu.Unlock()
	s.logCall(c, t.start, status, 0)
	t.observe(status, 0)
	if ce := s.log.Check(zap.InfoLevel, "call became a task"); ce != nil {
		tags := c.tagged()
		fields := []zap.Field{zap.String("task", rec.ID), zap.String("id", c.id.String()), zap.String("tool", c.tool.name),
			zap.String("era", c.era.String()), zap.String("principal", c.principal), zap.Duration("after", time.Since(t.start))}
		for i := 0; i+1 < len(tags); i += 2 {
			fields = append(fields, zap.String(tags[i], tags[i+1]))
		}
		ce.Write(fields...)
	}
}

// taskSink is the way back of a call that is a task.
type taskSink struct{ c *Call }

func (taskSink) reply(*reply)          {}
func (taskSink) open(string)           {}
func (taskSink) answer([]byte) error   { return errStreamClosed }
func (taskSink) silent()               {}
func (taskSink) accepted()             {}
func (k taskSink) send(b []byte) error { return k.c.peerSend(b) }

// peerSend writes a notification of a legacy task on its peer's stream.
func (c *Call) peerSend(b []byte) error {
	if c.era != EraLegacy || c.peer == nil {
		return errNoStream
	}
	return c.peer.send(b)
}

// settle records how a task's handler ended: a result (2025-11-25: failed
// when isError), a JSON-RPC error (failed), or shutdown (failed: execd
// stopped). A task cancelled meanwhile stays cancelled.
func (s *Server) settle(lt *liveTask, ctx context.Context, r served) {
	c := lt.c
	c.mu.Lock()
	c.responded = true
	c.mu.Unlock()
	defer s.live.remove(lt)
	msg := c.progressMessage()
	rec, err := s.opts.Tasks.Update(lt.principal, lt.id, func(rec *tasks.Record) {
		rec.Inputs, rec.Message, rec.Tags = nil, msg, c.tagMap()
		switch {
		case errors.Is(context.Cause(ctx), ErrShutdown):
			rec.Status, rec.Stopped = tasks.Failed, true
		case r.jerr != nil:
			rec.Status, rec.Error, rec.Message = tasks.Failed, encodeError(r.jerr), r.jerr.Message
		case r.res == nil:
			e := jsonrpc.Errorf(jsonrpc.CodeInternalError, "Internal error: the task ended without a result")
			rec.Status, rec.Error, rec.Message = tasks.Failed, encodeError(e), e.Message
		default:
			rec.Status, rec.Result = tasks.Completed, r.res
			if c.era == EraLegacy {
				if failed, why := toolError(r.res); failed {
					// 2025-11-25: a tool error fails the task, and the status
					// says why rather than the last progress message.
					rec.Status, rec.Message = tasks.Failed, why
				}
			}
		}
	})
	if err != nil {
		return // cancelled, or gone
	}
	s.notifyStatus(lt, rec)
	if ce := s.log.Check(zap.InfoLevel, "task ended"); ce != nil {
		ce.Write(zap.String("task", rec.ID), zap.String("status", string(rec.Status)), zap.Bool("stopped", rec.Stopped),
			zap.String("tool", rec.Tool), zap.String("principal", rec.Principal), zap.Duration("duration", time.Since(lt.start)))
	}
}

func encodeError(e *jsonrpc.Error) json.RawMessage {
	b, _ := json.Marshal(e)
	return b
}

// maxFailureMessage bounds the statusMessage taken from a tool error's text.
const maxFailureMessage = 512

// toolError reports whether a CallToolResult says isError: true, and why:
// its structuredContent's "error" string when it has one (execute_code's
// shape), else its first text content, cut at maxFailureMessage bytes.
func toolError(res json.RawMessage) (bool, string) {
	var r struct {
		IsError    bool `json:"isError"`
		Structured struct {
			Error any `json:"error"`
		} `json:"structuredContent"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(res, &r) != nil || !r.IsError {
		return false, ""
	}
	why, _ := r.Structured.Error.(string)
	for _, c := range r.Content {
		if why != "" {
			break
		}
		if c.Type == "text" {
			why = c.Text
		}
	}
	why = strings.TrimSpace(why)
	if why == "" {
		return true, "the tool reported an error"
	}
	if len(why) > maxFailureMessage {
		// Cut on a byte count; a rune split at the end is dropped.
		why = strings.ToValidUTF8(why[:maxFailureMessage], "") + "…"
	}
	return true, why
}

// progressMessage is the call's latest progress message, or "".
func (c *Call) progressMessage() string {
	if p := c.progress.Load(); p != nil {
		return *p
	}
	return ""
}

// tagMap is the call's tags as a map (nil when none).
func (c *Call) tagMap() map[string]string {
	tags := c.tagged()
	if len(tags) == 0 {
		return nil
	}
	m := make(map[string]string, len(tags)/2)
	for i := 0; i+1 < len(tags); i += 2 {
		m[tags[i]] = tags[i+1]
	}
	return m
}
