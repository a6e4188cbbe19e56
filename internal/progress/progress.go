// Package progress turns a run's progress reports into MCP
// notifications/progress frames on the stream of the request that asked for
// them.
//
// The `progress` value execd sends is its own counter: 1 for the first
// frame, then one more for every frame. It therefore increases strictly
// whatever the guest reports, and heartbeats fit in without inventing
// fractions. The guest's own figures travel in the message ("3/10 rows").
// No total is sent: the number of frames is never known in advance.
package progress

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Emitter writes one notification on the request's own stream. It is called
// with the Reporter's lock held, so frames leave in order.
type Emitter interface {
	Notify(method string, params any) error
}

// MaxMessage is the longest message sent, in characters.
const MaxMessage = 200

// Options tune a Reporter. Zero values are documented per field.
type Options struct {
	// Heartbeat is the longest silence while the run lasts; a frame that
	// says how long the run has been going is sent after it. Zero means no
	// heartbeat.
	Heartbeat time.Duration
	// MinInterval is the shortest gap between two frames; faster reports are
	// coalesced and the newest is sent when the gap has passed. Zero means
	// 250ms.
	MinInterval time.Duration
	// Seen, when set, is called with every message Start and Say are given,
	// sent or not, and also when the client asked for no progress (an
	// operator's view of the run, internal/admin). Nil means none.
	Seen func(message string)
}

// Params is the notifications/progress payload.
type Params struct {
	ProgressToken json.RawMessage `json:"progressToken"`
	Progress      float64         `json:"progress"`
	Total         *float64        `json:"total,omitempty"`
	Message       string          `json:"message,omitempty"`
}

// Reporter is bound to one request: its token and its stream. It is safe
// for concurrent use. After Stop it sends nothing, ever.
type Reporter struct {
	em    Emitter
	token json.RawMessage
	opts  Options
	start time.Time

	mu       sync.Mutex
	stopped  bool
	count    int
	lastSent time.Time // gates coalescing
	lastAny  time.Time // gates the heartbeat
	pending  string    // coalesced message waiting for the interval
	hasPend  bool
	timer    *time.Timer // flushes pending, or beats the heart
}

// New returns a Reporter for token on em. A nil or empty token yields a
// Reporter that sends nothing (the client did not ask for progress).
func New(em Emitter, token json.RawMessage, opts Options) *Reporter {
	if opts.MinInterval <= 0 {
		opts.MinInterval = 250 * time.Millisecond
	}
	r := &Reporter{em: em, token: token, opts: opts, start: time.Now()}
	if len(token) == 0 || string(token) == "null" || em == nil {
		r.stopped = true
	}
	return r
}

// Start sends the first frame at once and arms the heartbeat.
func (r *Reporter) Start(message string) {
	r.seen(message)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	r.sendLocked(message)
	// The start frame does not hold back the guest's first report: code
	// that reports at once is shown at once.
	r.lastSent = time.Time{}
	r.armLocked()
}

// Say sends message as a frame, subject to coalescing.
func (r *Reporter) Say(message string) {
	r.seen(message)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	if time.Since(r.lastSent) >= r.opts.MinInterval {
		r.sendLocked(message)
		r.hasPend = false
	} else {
		r.pending, r.hasPend = message, true
	}
	r.armLocked()
}

// Progress implements the worker's ProgressSink: done and total are the
// guest's own figures (total <= 0: unknown).
func (r *Reporter) Progress(done, total float64, message string) {
	r.Say(Describe(done, total, message))
}

// Describe renders a guest's report as one message: "3/10 rows", "42 rows",
// or just the message when both figures are zero.
func Describe(done, total float64, message string) string {
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	var figs string
	switch {
	case total > 0:
		figs = num(done) + "/" + num(total)
	case done != 0:
		figs = num(done)
	}
	message = strings.TrimSpace(message)
	switch {
	case figs == "":
		return message
	case message == "":
		return figs
	}
	return figs + " " + message
}

func (r *Reporter) seen(message string) {
	if r.opts.Seen != nil {
		r.opts.Seen(clip(message))
	}
}

// Stop ends the reporter: pending frames are dropped and nothing is sent
// afterwards. Call it before writing the response. Idempotent.
func (r *Reporter) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	r.hasPend = false
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
}

// Flush sends a coalesced frame that is still waiting, if any; a run calls
// it when it ends so that the guest's last report is not lost.
func (r *Reporter) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || !r.hasPend {
		return
	}
	r.sendLocked(r.pending)
	r.hasPend = false
}

func (r *Reporter) sendLocked(message string) {
	r.count++
	r.lastSent = time.Now()
	r.lastAny = r.lastSent
	p := Params{ProgressToken: r.token, Progress: float64(r.count), Message: clip(message)}
	if err := r.em.Notify("notifications/progress", p); err != nil {
		// The stream is gone; nobody can read further frames.
		r.stopped = true
	}
}

// armLocked schedules the next wake-up: the end of the coalescing interval
// when a frame is pending, else the heartbeat.
func (r *Reporter) armLocked() {
	var wait time.Duration
	switch {
	case r.hasPend:
		wait = r.opts.MinInterval - time.Since(r.lastSent)
	case r.opts.Heartbeat > 0:
		wait = r.opts.Heartbeat - time.Since(r.lastAny)
	default:
		return
	}
	wait = max(wait, time.Millisecond)
	if r.timer == nil {
		r.timer = time.AfterFunc(wait, r.wake)
	} else {
		r.timer.Reset(wait)
	}
}

func (r *Reporter) wake() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	switch {
	case r.hasPend && time.Since(r.lastSent) >= r.opts.MinInterval:
		r.sendLocked(r.pending)
		r.hasPend = false
	case !r.hasPend && r.opts.Heartbeat > 0 && time.Since(r.lastAny) >= r.opts.Heartbeat:
		r.sendLocked(fmt.Sprintf("running %.1f s", time.Since(r.start).Seconds()))
	}
	r.armLocked()
}

func clip(s string) string {
	if utf8.RuneCountInString(s) <= MaxMessage {
		return s
	}
	rs := []rune(s)
	return string(rs[:MaxMessage-1]) + "…"
}
