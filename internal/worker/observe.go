package worker

// Observer watches the sandboxes of an Engine, for metrics (cmd/execd wires
// internal/admin). Its methods are called on the goroutine that stops the
// guest and must not block.
type Observer interface {
	// Interrupted: a run's context ended and the guest was asked to stop
	// (the soft interrupt, which keeps its state).
	Interrupted(language string)
	// Killed: the guest did not stop within the interrupt grace and its
	// instance was killed (its state is lost).
	Killed(language string)
}

type nopObserver struct{}

func (nopObserver) Interrupted(string) {}
func (nopObserver) Killed(string)      {}

// observer is Config.Observer, or one that observes nothing.
func (e *Engine) observer() Observer {
	if e.cfg.Observer == nil {
		return nopObserver{}
	}
	return e.cfg.Observer
}
