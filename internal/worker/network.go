package worker

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"

	"execd/internal/egress"
)

// The guest's network: execd.net_start, net_wait, net_head, net_body,
// net_close and net_env (sandbox/ABI.md). Every byte that leaves the
// guest leaves through net_start, to the run's Network (internal/egress),
// which applies the operator's policy. A request runs on a goroutine of
// its own, so that several are in flight at once while the guest goes on
// (JavaScript's fetch) or waits in net_wait; everything of it lives on the
// host, and nothing outlives the run: a stop aborts every request at once,
// the end of the run forgets them (RATIONALE.md, "How does the network
// keep the guest a reactor?").

// Network is the network of one run: internal/egress's Session.
type Network interface {
	// Do sends the request and returns its response, or an error whose
	// text the code sees (an *egress.Error says how it ended). It must
	// return soon after ctx ends.
	Do(ctx context.Context, r *egress.Request) (*egress.Response, error)
	// Env is the run's secrets as the code sees them: name, placeholder.
	Env() [][2]string
	// Reached is the hosts that answered, for Result.Network.
	Reached() []egress.HostCount
	// MaxRequestBytes: bodies over it are refused by Do, so not copied.
	MaxRequestBytes() int64
	// MaxConcurrentRequests: the requests a run may hold open at once.
	MaxConcurrentRequests() int
}

// The codes of the net_* imports (sandbox/ABI.md).
const (
	netUnknown = -1 // no such request (or not finished: net_head, net_body); nothing open (net_wait)
	netTooMany = -2 // net_start: MaxConcurrentRequests are open
	netStopped = -4 // the host stops the cell
)

// maxNetHead bounds a request's head (method, URL, headers) as the guest
// hands it over.
const maxNetHead = 1 << 20

// netState is one run's requests.
type netState struct {
	nw     Network            // nil: the run has no network
	ctx    context.Context    // the run's stopCtx (runState.begin): every request's parent
	cancel context.CancelFunc // aborts every request: at the stop, at the end
	wg     sync.WaitGroup

	mu    sync.Mutex
	next  int32
	calls map[int32]*netCall // nil until the first request
	ready []int32            // finished, not yet reported by net_wait, in order
	done  chan struct{}      // a token after each completion; made with calls

	toolCalls []ToolCall // code mode's calls (tools.go)
}

// netCall is one request, from net_start to net_close.
type netCall struct {
	tool     bool // a tool call (tools.go), not a request
	cancel   context.CancelFunc
	finished bool
	reported bool
	head     []byte // the JSON net_head gives, once finished
	body     []byte
	off      int
}

// end aborts what is left and waits for the requests' goroutines (they
// return soon after their context ends), at most wait.
func (n *netState) end(wait time.Duration) bool {
	n.cancel()
	n.mu.Lock()
	none := n.next == 0
	n.mu.Unlock()
	if none { // the common run: no request, no goroutine to wait for
		return true
	}
	ch := make(chan struct{})
	go func() { n.wg.Wait(); close(ch) }()
	select {
	case <-ch:
		return true
	case <-time.After(wait):
		return false
	}
}

// netRequestHead is the head net_start reads.
type netRequestHead struct {
	Method    string      `json:"method"`
	URL       string      `json:"url"`
	Headers   [][2]string `json:"headers"`
	TimeoutMs float64     `json:"timeout"`
	Redirect  string      `json:"redirect"`
}

// netResponseHead is what net_head gives for a response.
type netResponseHead struct {
	Status     int         `json:"status"`
	StatusText string      `json:"statusText"`
	URL        string      `json:"url"`
	Redirected bool        `json:"redirected"`
	Headers    [][2]string `json:"headers"`
	Length     int         `json:"length"`
}

// netErrorHead is what net_head gives for a request without a response.
type netErrorHead struct {
	Error  string `json:"error"`
	Kind   string `json:"kind"`
	Reason string `json:"reason,omitempty"`
}

// hostNetStart: (head_ptr, head_len, body_ptr, body_len) -> i32, the id of
// the request, or netTooMany, netStopped.
func hostNetStart(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	stack[0] = api.EncodeI32(st.netStart(mod, uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])))
}

func (st *runState) netStart(mod api.Module, headPtr, headLen, bodyPtr, bodyLen uint32) int32 {
	// No net: not a run (the interpreter's start-up, the preload of a base image).
	if st == nil || st.net == nil || st.finished.Load() || st.interrupt.Load() {
		return netStopped
	}
	n := st.net
	n.mu.Lock()
	open := 0
	for _, c := range n.calls {
		if !c.tool {
			open++
		}
	}
	n.mu.Unlock()
	limit := 16
	if n.nw != nil {
		limit = n.nw.MaxConcurrentRequests()
	}
	if open >= limit {
		return netTooMany
	}
	c := &netCall{}
	var req egress.Request
	fail := func(msg string) int32 {
		c.finished = true
		c.head, _ = json.Marshal(netErrorHead{Error: msg, Kind: string(egress.KindRefused)})
		return n.add(c, true)
	}
	if n.nw == nil {
		return fail("fetch is not available: this sandbox has no network access")
	}
	if headLen > maxNetHead {
		return fail("fetch is not allowed: the request's URL and headers are larger than 1 MiB")
	}
	b, ok := mod.Memory().Read(headPtr, headLen)
	if !ok {
		return fail("fetch: the request is outside the sandbox's memory")
	}
	var h netRequestHead
	if err := json.Unmarshal(b, &h); err != nil {
		return fail("fetch: the request is malformed")
	}
	req = egress.Request{Method: h.Method, URL: h.URL, Header: h.Headers, BodySize: int64(bodyLen), Redirect: h.Redirect}
	if h.TimeoutMs > 0 && !math.IsInf(h.TimeoutMs, 0) {
		req.Timeout = time.Duration(min(h.TimeoutMs, float64(24*time.Hour/time.Millisecond)) * float64(time.Millisecond))
	}
	if bodyLen > 0 && int64(bodyLen) <= n.nw.MaxRequestBytes() {
		body, ok := mod.Memory().Read(bodyPtr, bodyLen)
		if !ok {
			return fail("fetch: the request's body is outside the sandbox's memory")
		}
		req.Body = append([]byte(nil), body...)
	}
	ctx, cancel := context.WithCancel(n.ctx)
	c.cancel = cancel
	id := n.add(c, false)
	n.wg.Add(1)
	go n.run(id, c, ctx, &req)
	return id
}

// add registers c and returns its id; a finished c is ready at once.
func (n *netState) add(c *netCall, finished bool) int32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.next++
	id := n.next
	if n.calls == nil { // made by the run's first request: most runs make none
		n.calls = map[int32]*netCall{}
		n.done = make(chan struct{}, 1)
	}
	n.calls[id] = c
	if finished {
		n.ready = append(n.ready, id)
		n.notify()
	}
	return id
}

func (n *netState) notify() {
	select {
	case n.done <- struct{}{}:
	default:
	}
}

// run is a request's goroutine.
func (n *netState) run(id int32, c *netCall, ctx context.Context, req *egress.Request) {
	defer n.wg.Done()
	defer c.cancel()
	resp, err := n.nw.Do(ctx, req)
	var head []byte
	var body []byte
	if err != nil {
		e := netErrorHead{Error: err.Error(), Kind: string(egress.KindFailed)}
		var ee *egress.Error
		if errors.As(err, &ee) {
			e.Kind, e.Reason = string(ee.Kind), string(ee.Reason)
		}
		head, _ = json.Marshal(e)
	} else {
		head, _ = json.Marshal(netResponseHead{Status: resp.Status, StatusText: resp.StatusText, URL: resp.URL,
			Redirected: resp.Redirected, Headers: resp.Header, Length: len(resp.Body)})
		body = resp.Body
	}
	n.finish(id, c, head, body)
}

// finish makes c's answer readable and reports it to net_wait, unless c
// was closed meanwhile.
func (n *netState) finish(id int32, c *netCall, head, body []byte) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.calls[id] != c { // closed meanwhile
		return
	}
	c.finished, c.head, c.body = true, head, body
	n.ready = append(n.ready, id)
	n.notify()
}

// hostNetWait: (id, timeout_ms: f64) -> i32. Waits until request id (0:
// any) has finished, at most timeout_ms (negative: without limit), and
// returns its id; 0 when the time passed first; netUnknown when there is
// no such request (for 0: none open and none finished unreported);
// netStopped when the host stops the cell.
func hostNetWait(ctx context.Context, _ api.Module, stack []uint64) {
	st := stateOf(ctx)
	stack[0] = api.EncodeI32(st.netWait(int32(stack[0]), api.DecodeF64(stack[1])))
}

func (st *runState) netWait(id int32, timeoutMs float64) int32 {
	if st == nil || st.net == nil || st.finished.Load() || st.interrupt.Load() {
		return netStopped
	}
	n := st.net
	var timer <-chan time.Time
	if timeoutMs >= 0 && !math.IsNaN(timeoutMs) {
		if timeoutMs > float64(24*time.Hour/time.Millisecond) {
			timeoutMs = float64(24 * time.Hour / time.Millisecond)
		}
		t := time.NewTimer(time.Duration(timeoutMs * float64(time.Millisecond)))
		defer t.Stop()
		timer = t.C
	}
	for {
		if r, ok := n.poll(id); ok {
			return r
		}
		select {
		case <-n.done:
		case <-timer:
			if r, ok := n.poll(id); ok {
				return r
			}
			return 0
		case <-st.stopCtx.Done():
			return netStopped
		}
		if st.interrupt.Load() {
			return netStopped
		}
	}
}

// poll answers net_wait when it can without waiting.
func (n *netState) poll(id int32) (int32, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if id != 0 {
		c := n.calls[id]
		switch {
		case c == nil:
			return netUnknown, true
		case c.finished:
			c.reported = true
			return id, true
		}
		return 0, false
	}
	for len(n.ready) > 0 {
		r := n.ready[0]
		n.ready = n.ready[1:]
		if c := n.calls[r]; c != nil && !c.reported {
			c.reported = true
			return r, true
		}
	}
	for _, c := range n.calls {
		if !c.finished {
			return 0, false
		}
	}
	return netUnknown, true
}

// hostNetHead: (id, buf_ptr, buf_cap) -> i32, the length of the request's
// head (JSON), written to buf when it fits; netUnknown when there is no
// such finished request.
func hostNetHead(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	stack[0] = api.EncodeI32(st.netCopy(mod, int32(stack[0]), uint32(stack[1]), uint32(stack[2]), true))
}

// hostNetBody: (id, buf_ptr, buf_cap) -> i32, the bytes of the body copied
// to buf (the next part; 0 at its end); netUnknown as net_head.
func hostNetBody(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	stack[0] = api.EncodeI32(st.netCopy(mod, int32(stack[0]), uint32(stack[1]), uint32(stack[2]), false))
}

func (st *runState) netCopy(mod api.Module, id int32, ptr, capacity uint32, head bool) int32 {
	if st == nil || st.net == nil || st.finished.Load() {
		return netUnknown
	}
	n := st.net
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.calls[id]
	if c == nil || !c.finished {
		return netUnknown
	}
	if head {
		if len(c.head) <= int(capacity) && !mod.Memory().Write(ptr, c.head) {
			return netUnknown
		}
		return int32(len(c.head))
	}
	part := c.body[c.off:]
	if len(part) > int(capacity) {
		part = part[:capacity]
	}
	if len(part) > math.MaxInt32 {
		part = part[:math.MaxInt32]
	}
	if !mod.Memory().Write(ptr, part) {
		return netUnknown
	}
	c.off += len(part)
	return int32(len(part))
}

// hostNetClose: (id) -> i32. Aborts the request if it is still in flight
// and forgets it; 0, or netUnknown.
func hostNetClose(ctx context.Context, _ api.Module, stack []uint64) {
	st := stateOf(ctx)
	var r int32 = netUnknown
	if st != nil && st.net != nil {
		n := st.net
		n.mu.Lock()
		if c := n.calls[int32(stack[0])]; c != nil {
			if c.cancel != nil {
				c.cancel()
			}
			delete(n.calls, int32(stack[0]))
			r = 0
		}
		n.mu.Unlock()
	}
	stack[0] = api.EncodeI32(r)
}

// hostNetEnv: (buf_ptr, buf_cap) -> i32, the length of the run's secrets
// as a JSON object of name to placeholder, written to buf when it fits; 0
// when there are none.
func hostNetEnv(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	stack[0] = api.EncodeI32(st.netEnv(mod, uint32(stack[0]), uint32(stack[1])))
}

func (st *runState) netEnv(mod api.Module, ptr, capacity uint32) int32 {
	if st == nil || st.net == nil || st.finished.Load() || st.net.nw == nil {
		return 0
	}
	env := st.net.nw.Env()
	if len(env) == 0 {
		return 0
	}
	m := make(map[string]string, len(env))
	for _, kv := range env {
		m[kv[0]] = kv[1]
	}
	b, _ := json.Marshal(m)
	if len(b) <= int(capacity) && !mod.Memory().Write(ptr, b) {
		return 0
	}
	return int32(len(b))
}
