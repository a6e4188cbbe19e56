package worker

import (
	"time"

	"github.com/tetratelabs/wazero/api"
)

// heldAnswer is the answer to a guest's call (input, packages) that did not
// fit the buffer the guest passed: it is kept whole for the guest to fetch
// with a second call and a larger buffer (input_answer, packages_answer).
// Only the guest's goroutine uses it.
type heldAnswer struct{ b []byte }

// heldNone is what fetching answers when nothing is held (noAnswerHeld,
// packagesNone).
const heldNone = -1

// hand gives ans to the guest: written to buf when it fits, otherwise held.
// It returns ans's length, or heldNone when the guest's memory cannot be
// written. An answer held before is forgotten.
func (h *heldAnswer) hand(mod api.Module, ans []byte, bufPtr, bufCap uint32) int32 {
	h.b = nil
	if len(ans) > int(bufCap) {
		h.b = ans
		return int32(len(ans))
	}
	if !mod.Memory().Write(bufPtr, ans) {
		return heldNone
	}
	return int32(len(ans))
}

// take writes the held answer to buf when it fits and then forgets it; it
// returns the answer's length, or heldNone when none is held (or the
// guest's memory cannot be written).
func (h *heldAnswer) take(mod api.Module, bufPtr, bufCap uint32) int32 {
	if h.b == nil {
		return heldNone
	}
	if len(h.b) > int(bufCap) {
		return int32(len(h.b))
	}
	if !mod.Memory().Write(bufPtr, h.b) {
		return heldNone
	}
	n := int32(len(h.b))
	h.b = nil
	return n
}

// waitOutside runs f, a wait for something outside the code (the person,
// a package fetch), with the run's timer stopped, and counts its time as
// waited. Callers that may wait at once hold askMu (askPerson).
func (st *runState) waitOutside(f func()) {
	st.timer.pause()
	start := time.Now()
	f()
	st.waited += time.Since(start)
	st.timer.resume()
}
