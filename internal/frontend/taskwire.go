package frontend

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"execd/internal/jsonrpc"
	"execd/internal/tasks"
)

// The tasks methods and the shapes of a task on the wire, per era: the
// 2026-07-28 extension's Task (ttlMs, pollIntervalMs; the result, error or
// inputRequests inlined in tasks/get) and 2025-11-25's (ttl, pollInterval;
// the result fetched with tasks/result).

// stoppedMessage is what a task that execd stopped before it finished
// says, whether execd was stopped gracefully (after server.shutdown_grace)
// or killed (found so at the next start).
const stoppedMessage = "execd stopped before the task finished, so its run did not complete (the workspace keeps what was saved before the stop); run it again"

// taskTime is a timestamp as tasks write it (RFC 3339, UTC, milliseconds).
func taskTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// taskFields is the Task object of rec in era: its status, its message
// (the run's latest progress while it runs here) and its times.
func (s *Server) taskFields(era Era, rec tasks.Record, lt *liveTask) map[string]any {
	m := map[string]any{
		"taskId":        rec.ID,
		"status":        string(rec.Status),
		"createdAt":     taskTime(rec.Created),
		"lastUpdatedAt": taskTime(rec.Updated),
	}
	msg := rec.Message
	if lt != nil && !rec.Status.Terminal() {
		if p := lt.c.progressMessage(); p != "" {
			msg = p
		}
	}
	switch {
	case rec.Stopped:
		msg = stoppedMessage
	case rec.Status == tasks.Cancelled:
		msg = "cancelled by the client"
	}
	if msg != "" {
		m["statusMessage"] = msg
	}
	// The record is kept TTL after the task ends, so at least TTL after it
	// began: what ttlMs (from creation) promises.
	ttl := rec.TTL
	if era == EraModern {
		m["ttlMs"] = ttl.Milliseconds()
		m["pollIntervalMs"] = taskPollInterval.Milliseconds()
	} else {
		m["ttl"] = ttl.Milliseconds()
		m["pollInterval"] = taskPollInterval.Milliseconds()
	}
	return m
}

// taskError is the JSON-RPC error a failed task carries.
func taskError(rec tasks.Record) json.RawMessage {
	if rec.Stopped {
		return encodeError(jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", stoppedMessage))
	}
	return rec.Error
}

// detailedTask is tasks/get's answer in the modern era: the Task with its
// result (completed), error (failed) or inputRequests (input_required).
func (s *Server) detailedTask(rec tasks.Record, lt *liveTask) map[string]any {
	m := s.taskFields(EraModern, rec, lt)
	switch rec.Status {
	case tasks.Completed:
		m["result"] = rec.Result
	case tasks.Failed:
		m["error"] = taskError(rec)
	case tasks.InputRequired:
		if rec.Inputs != nil {
			m["inputRequests"] = rec.Inputs
		}
	}
	return m
}

// createTaskResult answers the call that became a task, as the record
// says when it was made.
func (s *Server) createTaskResult(era Era, rec tasks.Record) map[string]any {
	m := s.taskFields(era, rec, nil)
	if era == EraModern {
		m["resultType"] = "task"
		return m
	}
	return map[string]any{"task": m}
}

// notifyStatus sends a legacy task's notifications/tasks/status on its
// peer's stream, when it has one (spec: 2025-11-25 tasks.mdx, Task Status
// Notification; optional, and clients poll anyway).
func (s *Server) notifyStatus(lt *liveTask, rec tasks.Record) {
	if lt.c.era != EraLegacy {
		return
	}
	if b, err := jsonrpc.EncodeNotification("notifications/tasks/status", s.taskFields(EraLegacy, rec, lt)); err == nil {
		_ = lt.c.peerSend(b)
	}
}

// taskParams reads params.taskId (and, for tasks/update, inputResponses).
func taskParams(c *Call) (id string, responses map[string]json.RawMessage, jerr *jsonrpc.Error) {
	id, ok := jsonrpc.String(c.meta.head.taskID)
	if !ok || id == "" {
		return "", nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %s needs a taskId string", c.method)
	}
	if c.method == "tasks/update" {
		var p struct {
			InputResponses json.RawMessage `json:"inputResponses"`
		}
		_ = json.Unmarshal(c.params, &p)
		if !jsonrpc.IsObject(p.InputResponses) || json.Unmarshal(p.InputResponses, &responses) != nil {
			return "", nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: tasks/update needs inputResponses, an object keyed by the task's inputRequests keys")
		}
	}
	return id, responses, nil
}

// unknownTask is the answer for an id that names no task of the caller:
// never minted, another principal's, or expired; the three are one answer.
func unknownTask() *jsonrpc.Error {
	return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Failed to retrieve task: task not found (unknown id, or expired: records are kept protocol.task_ttl after the task ends)")
}

// lookupTask finds the caller's task named by the request.
func (s *Server) lookupTask(c *Call) (tasks.Record, *liveTask, map[string]json.RawMessage, *jsonrpc.Error) {
	id, responses, jerr := taskParams(c)
	if jerr != nil {
		return tasks.Record{}, nil, nil, jerr
	}
	rec, ok := s.opts.Tasks.Get(c.principal, id)
	if !ok {
		return rec, nil, nil, unknownTask()
	}
	return rec, s.live.get(c.principal, id), responses, nil
}

func (s *Server) taskGet(_ context.Context, c *Call) (any, *jsonrpc.Error) {
	rec, lt, _, jerr := s.lookupTask(c)
	if jerr != nil {
		return nil, jerr
	}
	if c.era == EraModern {
		return s.detailedTask(rec, lt), nil
	}
	return s.taskFields(EraLegacy, rec, lt), nil
}

// taskUpdate serves tasks/update: the answers to a task's inputRequests.
// It is intercepted (handle): it never waits behind the run it resumes.
func (s *Server) taskUpdate(_ context.Context, c *Call) (any, *jsonrpc.Error) {
	_, lt, responses, jerr := s.lookupTask(c)
	if jerr != nil {
		return nil, jerr
	}
	if lt != nil {
		if jerr := s.answerInputs(lt, responses); jerr != nil {
			return nil, jerr
		}
	}
	return map[string]any{}, nil
}

// taskCancel serves tasks/cancel. It is intercepted like
// notifications/cancelled (handle): the task is cancelled at once, and its
// run stopped as a cancelled call is (a soft interrupt; the workspace
// keeps its state). Modern: an empty acknowledgement, also for a task that
// has finished; legacy: the cancelled Task, and -32602 for a finished one.
func (s *Server) taskCancel(_ context.Context, c *Call) (any, *jsonrpc.Error) {
	rec, lt, _, jerr := s.lookupTask(c)
	if jerr != nil {
		return nil, jerr
	}
	rec, err := s.opts.Tasks.Update(c.principal, rec.ID, func(r *tasks.Record) {
		r.Status, r.Inputs = tasks.Cancelled, nil
	})
	if lt != nil && err == nil {
		lt.cancel(errTaskCancelled)
		s.notifyStatus(lt, rec)
	}
	if c.era == EraModern {
		return map[string]any{}, nil
	}
	if errors.Is(err, tasks.ErrFinished) {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: task %s has already finished (%s)", rec.ID, rec.Status)
	}
	if err != nil {
		return nil, unknownTask()
	}
	return s.taskFields(EraLegacy, rec, lt), nil
}

// taskResult serves 2025-11-25's tasks/result: once the task has finished,
// what the call would have answered, with the related-task _meta.
func (s *Server) taskResult(ctx context.Context, c *Call) (any, *jsonrpc.Error) {
	rec, _, _, jerr := s.lookupTask(c)
	if jerr != nil {
		return nil, jerr
	}
	if !rec.Status.Terminal() {
		var err error
		if rec, err = s.opts.Tasks.Wait(ctx, c.principal, rec.ID); err != nil {
			if ctx.Err() != nil {
				return nil, nil
			}
			return nil, unknownTask()
		}
	}
	if rec.Result != nil {
		return withRelatedTask(rec.Result, rec.ID), nil
	}
	if rec.Status == tasks.Cancelled {
		return nil, jsonrpc.Errorf(jsonrpc.CodeServerPolicy, "Task cancelled: task %s was cancelled and has no result", rec.ID)
	}
	var e jsonrpc.Error
	if json.Unmarshal(taskError(rec), &e) != nil || e.Code == 0 {
		e = *jsonrpc.Errorf(jsonrpc.CodeInternalError, "Internal error: task %s has no result", rec.ID)
	}
	return nil, &e
}

// withRelatedTask adds _meta io.modelcontextprotocol/related-task to a
// result.
func withRelatedTask(res json.RawMessage, id string) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(res, &m) != nil || m == nil {
		m = map[string]json.RawMessage{}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := m["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	meta["io.modelcontextprotocol/related-task"], _ = json.Marshal(map[string]string{"taskId": id})
	m["_meta"], _ = json.Marshal(meta)
	return m
}

// taskListPage is how many tasks one tasks/list page holds.
const taskListPage = 50

// taskList serves 2025-11-25's tasks/list: the principal's tasks, oldest
// first, in pages.
func (s *Server) taskList(_ context.Context, c *Call) (any, *jsonrpc.Error) {
	cursor := ""
	if !jsonrpc.IsNull(c.meta.head.cursor) {
		var ok bool
		if cursor, ok = jsonrpc.String(c.meta.head.cursor); !ok || cursor == "" {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: cursor must be a string from an earlier tasks/list")
		}
	}
	recs, next, err := s.opts.Tasks.List(c.principal, cursor, taskListPage)
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: unknown cursor")
	}
	list := make([]map[string]any, len(recs))
	for i, rec := range recs {
		list[i] = s.taskFields(EraLegacy, rec, s.live.get(c.principal, rec.ID))
	}
	res := map[string]any{"tasks": list}
	if next != "" {
		res["nextCursor"] = next
	}
	return res, nil
}
