package frontend

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"execd/internal/jsonrpc"
	"execd/internal/tasks"
)

// The runs of tasks in this process, and the input a task asks for: its
// inputRequests, answered by tasks/update, which hands each answer to the
// run that waits for it without waiting for anything itself.

// liveTask is the run of a task in this process.
type liveTask struct {
	id, principal string
	c             *Call
	cancel        context.CancelCauseFunc
	start         time.Time

	mu      sync.Mutex
	keys    int                  // input keys minted so far
	waiting map[string]*question // outstanding inputRequests by key
}

// question is one outstanding input of a task.
type question struct {
	in     Input // with the task's key
	answer chan json.RawMessage
}

// liveTasks are the tasks running in this process.
type liveTasks struct {
	mu sync.Mutex
	m  map[taskKey]*liveTask
}

type taskKey struct{ principal, id string }

func (l *liveTasks) add(lt *liveTask) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[taskKey]*liveTask{}
	}
	l.m[taskKey{lt.principal, lt.id}] = lt
	l.mu.Unlock()
}

func (l *liveTasks) remove(lt *liveTask) {
	l.mu.Lock()
	delete(l.m, taskKey{lt.principal, lt.id})
	l.mu.Unlock()
}

func (l *liveTasks) get(principal, id string) *liveTask {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[taskKey{principal, id}]
}

// TaskInput asks the person for ins through the task the call is, making
// the call a task first if it is not one yet: the task goes input_required
// with ins as its inputRequests (under keys of the task's own, unique for
// its lifetime) and TaskInput returns once tasks/update has answered every
// one of them, by the keys of ins. It fails with ErrNoTask when the call
// cannot be a 2026-07-28 task, and with ctx's error when ctx ends first.
func (c *Call) TaskInput(ctx context.Context, ins []Input) (map[string]json.RawMessage, error) {
	if !c.CanBecomeTask() || c.task.ready == nil {
		return nil, ErrNoTask
	}
	c.BecomeTask()
	select {
	case <-c.task.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c.task.mu.Lock()
	lt := c.task.live
	c.task.mu.Unlock()
	if lt == nil {
		return nil, ErrNoTask // refused, or the request ended first
	}
	s := c.srv
	qs := make([]*question, len(ins))
	lt.mu.Lock()
	if lt.waiting == nil {
		lt.waiting = map[string]*question{}
	}
	for i, in := range ins {
		lt.keys++
		in.Key = fmt.Sprintf("%s-%d", in.Key, lt.keys)
		qs[i] = &question{in: in, answer: make(chan json.RawMessage, 1)}
		lt.waiting[in.Key] = qs[i]
	}
	lt.mu.Unlock()
	defer func() {
		lt.mu.Lock()
		for _, q := range qs {
			delete(lt.waiting, q.in.Key)
		}
		lt.mu.Unlock()
	}()
	s.taskInputsChanged(lt)
	got := make(map[string]json.RawMessage, len(ins))
	for i, q := range qs {
		select {
		case a := <-q.answer:
			got[ins[i].Key] = a
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return got, nil
}

// taskInputsChanged records a live task's outstanding inputs: input_required
// with them, or working again when none is left.
func (s *Server) taskInputsChanged(lt *liveTask) {
	lt.mu.Lock()
	reqs := map[string]any{}
	for k, q := range lt.waiting {
		reqs[k] = map[string]any{"method": q.in.Method, "params": q.in.Params}
	}
	lt.mu.Unlock()
	var inputs json.RawMessage
	if len(reqs) > 0 {
		inputs, _ = json.Marshal(reqs)
	}
	msg := lt.c.progressMessage()
	rec, err := s.opts.Tasks.Update(lt.principal, lt.id, func(r *tasks.Record) {
		r.Inputs, r.Message = inputs, msg
		r.Status = tasks.Working
		if inputs != nil {
			r.Status = tasks.InputRequired
		}
	})
	if err == nil {
		s.notifyStatus(lt, rec)
	}
}

// answerInputs hands tasks/update's inputResponses to the questions they
// answer. Keys that are not outstanding are ignored; an answer of the
// wrong shape is refused (-32602) and nothing is delivered.
func (s *Server) answerInputs(lt *liveTask, responses map[string]json.RawMessage) *jsonrpc.Error {
	lt.mu.Lock()
	var hit []*question
	for k, raw := range responses {
		q := lt.waiting[k]
		if q == nil {
			continue
		}
		if jerr := validateResponse(q.in, raw); jerr != nil {
			lt.mu.Unlock()
			return jerr
		}
		hit = append(hit, q)
	}
	for _, q := range hit {
		delete(lt.waiting, q.in.Key)
		q.answer <- responses[q.in.Key]
	}
	lt.mu.Unlock()
	if len(hit) > 0 {
		s.taskInputsChanged(lt)
	}
	return nil
}

// liveTask is the task the call has become, or nil.
func (c *Call) liveTask() *liveTask {
	c.task.mu.Lock()
	defer c.task.mu.Unlock()
	if c.task.state != isTask {
		return nil
	}
	return c.task.live
}

// legacyTaskWaits records that a 2025-11-25 task waits for the client's
// answer to a request it sent (input_required), or no longer does
// (working).
func (s *Server) legacyTaskWaits(lt *liveTask, waiting bool) {
	msg := lt.c.progressMessage()
	rec, err := s.opts.Tasks.Update(lt.principal, lt.id, func(r *tasks.Record) {
		r.Message, r.Status = msg, tasks.Working
		if waiting {
			r.Status = tasks.InputRequired
		}
	})
	if err == nil {
		s.notifyStatus(lt, rec)
	}
}

// withRelatedTaskMeta adds _meta io.modelcontextprotocol/related-task to
// the params of a request a task sends.
func withRelatedTaskMeta(params any, id string) any {
	m, ok := params.(map[string]any)
	if !ok {
		return params
	}
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	meta, _ := m["_meta"].(map[string]any)
	mm := make(map[string]any, len(meta)+1)
	for k, v := range meta {
		mm[k] = v
	}
	mm["io.modelcontextprotocol/related-task"] = map[string]string{"taskId": id}
	out["_meta"] = mm
	return out
}
