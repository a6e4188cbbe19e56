package workspace

import (
	"context"
	"errors"
)

// Observer watches a Manager's calls and workspaces, for metrics and traces
// (cmd/execd wires internal/admin and internal/telemetry). Its methods are
// called on the goroutine of the call or of the Manager's own work and must
// not block.
type Observer interface {
	// Phase is called when a call enters one phase of its turn; the
	// returned function is called exactly once, when the call leaves it,
	// with how it went (the outcomes are listed with the phases). ctx is
	// the call's context.
	Phase(ctx context.Context, p Phase, language string) (end func(outcome string))
	// StateLost: language's interpreter state in a workspace is gone, for
	// reason. It is reported once, where the loss happens (a kill, an
	// eviction without saving, a reset, idle_ttl, an image that cannot be
	// restored, a stop without saving found at the next start), not each
	// time a call says so.
	StateLost(language string, reason ResetReason)
	// Hibernated: an interpreter was saved to disk and closed.
	Hibernated(language string)
}

// Phase is a stage of a call's turn in its workspace.
type Phase string

const (
	// PhaseQueue: waiting for the workspace's earlier calls. Outcomes:
	// OutcomeOK, OutcomeCancelled, OutcomeClosed.
	PhaseQueue Phase = "queue"
	// PhaseSlot: waiting for a run slot (Config.MaxConcurrentRuns). Same
	// outcomes.
	PhaseSlot Phase = "slot"
	// PhaseStart: making the interpreter the run needs when none is live:
	// OutcomeRestored (from its image), OutcomeNew (a fresh one), or
	// OutcomeFailed.
	PhaseStart Phase = "start"
	// PhaseRun: the code running. The outcome is the run's worker.Status
	// as the Manager settled it.
	PhaseRun Phase = "run"
)

// Phase outcomes.
const (
	OutcomeOK        = "ok"
	OutcomeCancelled = "cancelled"
	OutcomeClosed    = "closed"
	OutcomeRestored  = "restored"
	OutcomeNew       = "new"
	OutcomeFailed    = "failed"
)

// waitOutcome is the outcome of a queue or slot wait that returned err.
func waitOutcome(err error) string {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, ErrClosed), errors.Is(err, &Error{Code: Closed}):
		return OutcomeClosed
	}
	return OutcomeCancelled
}

type nopObserver struct{}

func (nopObserver) Phase(context.Context, Phase, string) func(string) { return func(string) {} }
func (nopObserver) StateLost(string, ResetReason)                     {}
func (nopObserver) Hibernated(string)                                 {}
