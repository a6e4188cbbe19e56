package worker

import (
	"context"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// What a running cell exchanges with its caller beyond progress: the
// images it shows (execd.show) and the input it asks for (execd.input),
// both host imports of sandbox/ABI.md; and the run's timer, which stops
// while the guest waits for input.

// RunOptions are what one Run uses besides its code. The zero value runs
// without a progress sink, without anyone to answer input() and without a
// timeout (ctx alone ends the run).
type RunOptions struct {
	// Sink receives the guest's progress() calls. Nil: they are dropped.
	Sink ProgressSink
	// Input answers the guest's input(). Nil: input() is told at once that
	// nobody can answer (InputNoClient).
	Input InputSource
	// Timeout stops the code once it has run this long, like a deadline on
	// ctx (status timeout), except that the time the guest waits for Input
	// is not counted. Zero: no timeout.
	Timeout time.Duration
	// Network is the run's network (network.go): the policy the code's
	// requests go through. Nil: the code has none.
	Network Network
	// Tools is code mode's upstream MCP servers as this run may use them
	// (tools.go). Nil: the code's calls are refused, saying there are none.
	Tools Tools
	// Packages answers the guest's package requests (packages.go). Nil:
	// the guest is told there are none.
	Packages PackageSource
}

// InputSource answers input() for one Run. Input is called on the
// goroutine running the guest, which waits for it; it must return soon
// after ctx ends (the run is being stopped: its answer is then ignored).
type InputSource interface {
	Input(ctx context.Context, prompt string) InputAnswer
}

// InputAnswer is what Input gives the guest.
type InputAnswer struct {
	Status InputStatus
	Text   string // the line, when Status is InputOK
}

// InputStatus says how an input() ended.
type InputStatus int

const (
	// InputOK: the person answered Text.
	InputOK InputStatus = iota
	// InputEOF: the person declined or dismissed the question (Python
	// EOFError, JavaScript null).
	InputEOF
	// InputNoClient: nobody can answer (the client cannot be asked).
	InputNoClient
	// InputTimedOut: nobody answered in time.
	InputTimedOut
)

// The return codes of execd.input and execd.show (sandbox/ABI.md).
const (
	inputEOF      = -1
	inputNoClient = -2
	inputTimedOut = -3
	inputStopped  = -4
	inputTooLong  = -5
	noAnswerHeld  = heldNone // execd.input_answer

	showNotImage   = -1
	showTooLarge   = -2
	showTooMany    = -3
	showUnreadable = -4 // a signature, but no width and height behind it
)

// maxPrompt is the most of a prompt the host reads.
const maxPrompt = 16 << 10

// ImageType recognises PNG, JPEG, GIF and WebP by their magic numbers and
// returns the media type, or "" for anything else. show() also requires
// the image's header to decode (imageSize).
func ImageType(b []byte) string {
	switch {
	case len(b) >= 8 && string(b[:8]) == "\x89PNG\r\n\x1a\n":
		return "image/png"
	case len(b) >= 3 && string(b[:3]) == "\xff\xd8\xff":
		return "image/jpeg"
	case len(b) >= 6 && (string(b[:6]) == "GIF87a" || string(b[:6]) == "GIF89a"):
		return "image/gif"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

// hostShow keeps an image for the run's result: (ptr, len) -> i32.
func hostShow(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	ptr, n := uint32(stack[0]), uint32(stack[1])
	stack[0] = api.EncodeI32(st.show(mod, ptr, n))
}

func (st *runState) show(mod api.Module, ptr, n uint32) int32 {
	if st == nil || st.finished.Load() {
		return showTooMany // nothing is kept outside a run
	}
	if int64(n) > int64(st.maxImageBytes) {
		return showTooLarge
	}
	b, ok := mod.Memory().Read(ptr, n)
	if !ok {
		return showNotImage
	}
	mime := ImageType(b)
	if mime == "" {
		return showNotImage
	}
	if _, _, err := imageSize(mime, b); err != nil {
		return showUnreadable
	}
	st.mu.Lock()
	full := len(st.images) >= st.maxImages
	st.mu.Unlock()
	if full {
		return showTooMany
	}
	// The copy is memory the guest caused: the budget holds it until the
	// run ends (worker.go), as it holds the guest's own. One it cannot
	// hold, even after idle workspaces are hibernated, is left out, and
	// the result counts it (Result.ImagesRefused): the guest is not told,
	// its show() having no code for that.
	if st.budget != nil && !st.budget.grow(int64(n)) {
		st.mu.Lock()
		st.imagesRefused++
		st.mu.Unlock()
		return 0
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.images) >= st.maxImages || st.finished.Load() {
		st.budget.give(int64(n))
		return showTooMany
	}
	st.imageBytes += int64(n)
	st.images = append(st.images, Picture{MIME: mime, Data: append([]byte(nil), b...)})
	return 0
}

// hostInput asks the run's InputSource for a line:
// (prompt_ptr, prompt_len, buf_ptr, buf_cap) -> i32, the length of the
// answer, written to buf when it fits and otherwise held for
// hostInputAnswer, or a negative code. An answer is never cut: one longer
// than Config.MaxInputAnswerBytes is refused (inputTooLong), and the guest
// raises an error that names limits.max_input_answer_bytes. The run's
// timer stops while it waits.
func hostInput(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	stack[0] = api.EncodeI32(st.ask(mod, uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])))
}

func (st *runState) ask(mod api.Module, promptPtr, promptLen, bufPtr, bufCap uint32) int32 {
	if st == nil || st.finished.Load() || st.interrupt.Load() {
		return inputStopped
	}
	st.answer.b = nil
	if st.input == nil {
		return inputNoClient
	}
	var prompt string
	if b, ok := mod.Memory().Read(promptPtr, min(promptLen, maxPrompt)); ok {
		prompt = string(b)
	}
	ans := st.askPerson(prompt, nil)
	if st.stopCtx.Err() != nil || st.interrupt.Load() {
		return inputStopped
	}
	switch ans.Status {
	case InputOK:
	case InputEOF:
		return inputEOF
	case InputTimedOut:
		return inputTimedOut
	default:
		return inputNoClient
	}
	text := ans.Text
	if len(text) > st.maxInputAnswer {
		return inputTooLong
	}
	if n := st.answer.hand(mod, []byte(text), bufPtr, bufCap); n != heldNone {
		return n
	}
	return inputEOF
}

// askPerson asks the person through the run's Input, one question at a time
// (the code's input() and its tool calls' approvals may ask at once); the
// run's timer stops meanwhile. choices, when not nil, are what the person
// picks from (Choices).
func (st *runState) askPerson(prompt string, choices []string) InputAnswer {
	st.askMu.Lock()
	defer st.askMu.Unlock()
	ctx := st.stopCtx
	if len(choices) > 0 {
		ctx = context.WithValue(ctx, choicesKey{}, choices)
	}
	var ans InputAnswer
	st.waitOutside(func() { ans = st.input.Input(ctx, prompt) })
	return ans
}

// hostInputAnswer hands over the answer the last input held because it did
// not fit the guest's buffer: (buf_ptr, buf_cap) -> i32, its length,
// written to buf when it fits (and then forgotten), or noAnswerHeld.
func hostInputAnswer(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	stack[0] = api.EncodeI32(st.takeAnswer(mod, uint32(stack[0]), uint32(stack[1])))
}

func (st *runState) takeAnswer(mod api.Module, bufPtr, bufCap uint32) int32 {
	if st == nil || st.finished.Load() {
		return noAnswerHeld
	}
	return st.answer.take(mod, bufPtr, bufCap)
}

// runTimer is a run's timeout that can be paused: it calls fire, once,
// after the run has been unpaused for its whole duration. A nil *runTimer
// never fires.
type runTimer struct {
	mu      sync.Mutex
	left    time.Duration
	since   time.Time   // when it last resumed
	t       *time.Timer // nil while paused
	fire    func()
	stopped bool
}

func newRunTimer(d time.Duration, fire func()) *runTimer {
	if d <= 0 {
		return nil
	}
	rt := &runTimer{left: d, fire: fire}
	rt.resumeLocked()
	return rt
}

func (rt *runTimer) resumeLocked() {
	rt.since = time.Now()
	rt.t = time.AfterFunc(rt.left, rt.fire)
}

// pause stops the clock; a timer that already fired stays fired.
func (rt *runTimer) pause() {
	if rt == nil {
		return
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.t == nil || rt.stopped {
		return
	}
	if rt.t.Stop() {
		rt.left -= time.Since(rt.since)
		rt.t = nil
	}
}

// resume restarts the clock after pause.
func (rt *runTimer) resume() {
	if rt == nil {
		return
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.t != nil || rt.stopped {
		return
	}
	rt.resumeLocked()
}

// stop releases the timer at the end of the run.
func (rt *runTimer) stop() {
	if rt == nil {
		return
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.stopped = true
	if rt.t != nil {
		rt.t.Stop()
	}
}
