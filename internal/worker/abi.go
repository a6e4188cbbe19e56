package worker

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"execd/internal/jsonscan"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// The guest ABI of sandbox/ABI.md, host side.
const (
	hostModule  = "execd"
	exportInit  = "execd_init"
	exportAlloc = "execd_alloc"
	exportFree  = "execd_free"
	exportEval  = "execd_eval"
	// reseedExport, optional: reseeds the guest's random generators in an
	// instance cloned from an image (sandbox/ABI.md).
	reseedExport = "execd_reseed"
)

// freshEvalAfter: after an eval call longer than this, the instance takes a
// fresh api.Function for the next one (see evalCall).
const freshEvalAfter = 2 * time.Millisecond

// runKey is the context key under which a call's runState travels to the
// host functions.
type runKey struct{}

// runState is what the host functions of one call see.
type runState struct {
	interrupt atomic.Bool
	kill      atomic.Bool // the hard kill: the next execd.interrupted traps
	finished  atomic.Bool // Run returned: an abandoned call reports nothing more
	sink      ProgressSink
	yielded   time.Duration // when the call last yielded, since yieldClock (its own goroutine only)

	// input() (interact.go): the source, a context that ends when the
	// run is asked to stop, the run's timer, the time spent waiting, the
	// longest answer taken and the answer held for execd.input_answer
	// (the last two: the guest's goroutine only; waited: under askMu).
	input          InputSource
	stopCtx        context.Context
	timer          *runTimer
	waited         time.Duration
	maxInputAnswer int
	answer         heldAnswer

	// show() (interact.go): the images kept, within the engine's limits,
	// their bytes held in the memory budget until the run ends
	// (imageBytes), and those the budget could not hold (imagesRefused).
	maxImageBytes, maxImages int
	budget                   *budget
	mu                       sync.Mutex
	images                   []Picture
	imageBytes               int64
	imagesRefused            int

	// The network (network.go): the run's requests, and code mode's tool
	// calls among them (tools.go).
	net      *netState
	netStore netState // what net points to in a run (begin)
	tools    Tools

	// Packages (packages.go): the source and the answer held for
	// execd.packages_answer (the guest's goroutine only).
	pkgs      PackageSource
	pkgAnswer heldAnswer

	sinkMu sync.Mutex // the guest's progress and its tool calls' come from several goroutines
	askMu  sync.Mutex // one question to the person at a time; guards waited (interact.go)

	// The run's contexts and its stop (begin): kept here, so that a run
	// allocates none of its own beyond stopCtx.
	ctx     runCtx
	stopper stopper
}

// begin readies st for a run called with ctx: the guest calls' context
// (Context), stopCtx, which ends at the run's stop and at its end (stop
// does both), and the network, whose requests are children of stopCtx.
func (st *runState) begin(ctx context.Context, nw Network) (stop context.CancelFunc) {
	st.ctx = runCtx{values: ctx, st: st}
	st.stopCtx, stop = context.WithCancel(&st.ctx)
	st.netStore = netState{nw: nw, ctx: st.stopCtx, cancel: stop}
	st.net = &st.netStore
	return stop
}

// Context is the context of the run's guest calls: begin's ctx's values
// without its end (the run's own stopper ends a run), st under runKey.
func (st *runState) Context() context.Context { return &st.ctx }

// runCtx is a runState's Context.
type runCtx struct {
	values context.Context
	st     *runState
}

func (c *runCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *runCtx) Done() <-chan struct{}       { return nil }
func (c *runCtx) Err() error                  { return nil }
func (c *runCtx) Value(k any) any {
	if _, ok := k.(runKey); ok {
		return c.st
	}
	return c.values.Value(k)
}

// progress hands a report to the run's sink, one at a time.
func (st *runState) progress(done, total float64, msg string) {
	st.sinkMu.Lock()
	defer st.sinkMu.Unlock()
	if st.sink != nil && !st.finished.Load() {
		st.sink.Progress(done, total, msg)
	}
}

// yieldClock is the origin of runState.yielded.
var yieldClock = time.Now()

// yieldEvery is how long a guest call runs before its poll yields the
// processor.
const yieldEvery = 500 * time.Microsecond

func stateOf(ctx context.Context) *runState {
	st, _ := ctx.Value(runKey{}).(*runState)
	return st
}

// instantiateHost defines module "execd": progress, interrupted, show,
// input, input_answer, the network's net_* (network.go), code mode's
// tool_call (tools.go) and packages, packages_answer (packages.go).
func instantiateHost(ctx context.Context, rt wazero.Runtime) error {
	f64, i32 := api.ValueTypeF64, api.ValueTypeI32
	_, err := rt.NewHostModuleBuilder(hostModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostProgress), []api.ValueType{f64, f64, i32, i32}, nil).
		WithParameterNames("done", "total", "msg_ptr", "msg_len").
		Export("progress").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostInterrupted), nil, []api.ValueType{i32}).
		Export("interrupted").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostShow), []api.ValueType{i32, i32}, []api.ValueType{i32}).
		WithParameterNames("ptr", "len").
		Export("show").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostInput), []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}).
		WithParameterNames("prompt_ptr", "prompt_len", "buf_ptr", "buf_cap").
		Export("input").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostInputAnswer), []api.ValueType{i32, i32}, []api.ValueType{i32}).
		WithParameterNames("buf_ptr", "buf_cap").
		Export("input_answer").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostNetStart), []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}).
		WithParameterNames("head_ptr", "head_len", "body_ptr", "body_len").
		Export("net_start").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostNetWait), []api.ValueType{i32, f64}, []api.ValueType{i32}).
		WithParameterNames("id", "timeout_ms").
		Export("net_wait").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostNetHead), []api.ValueType{i32, i32, i32}, []api.ValueType{i32}).
		WithParameterNames("id", "buf_ptr", "buf_cap").
		Export("net_head").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostNetBody), []api.ValueType{i32, i32, i32}, []api.ValueType{i32}).
		WithParameterNames("id", "buf_ptr", "buf_cap").
		Export("net_body").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostNetClose), []api.ValueType{i32}, []api.ValueType{i32}).
		WithParameterNames("id").
		Export("net_close").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostNetEnv), []api.ValueType{i32, i32}, []api.ValueType{i32}).
		WithParameterNames("buf_ptr", "buf_cap").
		Export("net_env").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostToolCall), []api.ValueType{i32, i32}, []api.ValueType{i32}).
		WithParameterNames("req_ptr", "req_len").
		Export("tool_call").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostPackages), []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}).
		WithParameterNames("req_ptr", "req_len", "buf_ptr", "buf_cap").
		Export("packages").
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostPackagesAnswer), []api.ValueType{i32, i32}, []api.ValueType{i32}).
		WithParameterNames("buf_ptr", "buf_cap").
		Export("packages_answer").
		Instantiate(ctx)
	return err
}

func hostProgress(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	if st == nil || st.sink == nil || st.finished.Load() {
		return
	}
	done := api.DecodeF64(stack[0])
	total := api.DecodeF64(stack[1])
	if math.IsNaN(done) || math.IsInf(done, 0) {
		return
	}
	if math.IsNaN(total) || math.IsInf(total, 0) {
		total = 0
	}
	ptr, n := uint32(stack[2]), uint32(stack[3])
	var msg string
	if n > 0 {
		if b, ok := mod.Memory().Read(ptr, min(n, 4096)); ok {
			msg = string(b)
		}
	}
	st.progress(done, total, msg)
}

// hostInterrupted answers the guest's poll, from its interpreter loop and
// from the kill switch's countdown (killswitch.go). After the hard kill it
// does not return: the panic ends the guest call with the exit code.
// Otherwise, once the call has run yieldEvery since it started or last
// yielded, it yields the processor (see RATIONALE.md, "Why does the guest
// yield at its polls?").
func hostInterrupted(ctx context.Context, _ api.Module, stack []uint64) {
	var v uint64
	if st := stateOf(ctx); st != nil {
		if st.kill.Load() {
			panic(sys.NewExitError(killExitCode))
		}
		if st.interrupt.Load() {
			v = 1
		}
	}
	stack[0] = v
	if st := stateOf(ctx); st != nil && yieldAtPolls.Load() {
		if now := time.Since(yieldClock); now-st.yielded >= yieldEvery {
			st.yielded = now
			runtime.Gosched()
		}
	}
}

// yieldAtPolls: hostInterrupted yields; off only to measure what that
// costs (BenchmarkFairness).
var yieldAtPolls = func() *atomic.Bool { var b atomic.Bool; b.Store(true); return &b }()

// killExitCode is the exit code of a guest call ended by the hard kill.
const killExitCode = 137

// envelope is the JSON result of execd_eval.
type envelope struct {
	Status string      `json:"status"`
	Value  *string     `json:"value"`
	Error  *GuestError `json:"error"`
}

// evalCall hands code to the guest and decodes the envelope. An error means
// the instance can no longer be trusted (trap, kill, broken envelope).
func (i *instance) evalCall(ctx context.Context, code string) (*envelope, error) {
	if !i.enter() {
		return nil, errors.New("the instance is closed")
	}
	defer i.leave()
	n := uint32(len(code))
	if len(code) > math.MaxInt32 {
		return nil, fmt.Errorf("code too large")
	}
	stack := i.callStack[:]
	stack[0] = uint64(n)
	if err := i.alloc.CallWithStack(ctx, stack); err != nil {
		return nil, err
	}
	ptr := uint32(stack[0])
	if ptr == 0 {
		return &envelope{Status: "oom", Error: &GuestError{Type: "InternalError", Message: "out of memory (no room for the code)"}}, nil
	}
	mem := i.mod.Memory()
	if !mem.WriteString(ptr, code) {
		return nil, fmt.Errorf("%s returned a bad pointer", exportAlloc)
	}
	start := time.Now()
	stack[0], stack[1] = uint64(ptr), uint64(n)
	err := i.eval.CallWithStack(ctx, stack)
	if time.Since(start) > freshEvalAfter {
		// wazero keeps the native stack a call grew (deep recursion: tens
		// of MB) with the function value; a long call may have grown it.
		i.eval = i.mod.ExportedFunction(exportEval)
	}
	if err != nil {
		return nil, err
	}
	res := uint32(stack[0])
	if res == 0 {
		return &envelope{Status: "oom", Error: &GuestError{Type: "InternalError", Message: "out of memory"}}, nil
	}
	hdr, ok := mem.Read(res, 4)
	if !ok {
		return nil, fmt.Errorf("%s returned a bad pointer", exportEval)
	}
	body, ok := mem.Read(res+4, binary.LittleEndian.Uint32(hdr))
	if !ok {
		return nil, fmt.Errorf("%s returned a bad length", exportEval)
	}
	env, err := decodeEnvelope(body)
	if err != nil {
		return nil, fmt.Errorf("bad result envelope: %w", err)
	}
	return env, nil
}

// envelopeStatus decodes an envelope's status; the guests' four are the
// constants themselves, not copies.
func envelopeStatus(v []byte) (string, bool) {
	switch string(v) {
	case `"ok"`:
		return "ok", true
	case `"error"`:
		return "error", true
	case `"oom"`:
		return "oom", true
	case `"interrupted"`:
		return "interrupted", true
	}
	return jsonscan.String(v)
}

// decodeEnvelope reads the guest's result envelope as encoding/json would,
// in one pass without reflection for the common shape (a status, a string
// or null value, a null error); any other shape (an error object, a key
// spelt otherwise) is left to encoding/json.
func decodeEnvelope(body []byte) (*envelope, error) {
	env := &envelope{}
	other := false
	err := jsonscan.Object(body, func(k, v []byte) error {
		switch string(k) {
		case "status":
			s, ok := envelopeStatus(v)
			env.Status, other = s, other || !ok
		case "value":
			if jsonscan.IsNull(v) {
				env.Value = nil
				break
			}
			s, ok := jsonscan.String(v)
			env.Value, other = &s, other || !ok
		default:
			other = other || string(k) != "error" || !jsonscan.IsNull(v)
		}
		return nil
	})
	if err != nil || other {
		env = &envelope{}
		if err := json.Unmarshal(body, env); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// cryptoRand feeds WASI random_get from the OS.
type cryptoRand struct{}

func (cryptoRand) Read(p []byte) (int, error) { return rand.Read(p) }
