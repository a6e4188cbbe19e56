package main

import (
	"context"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"execd/internal/config"
	"execd/internal/upstream"
)

// prepareUpstreams bounds the wait at start for the upstreams' tool lists,
// which execute_code's description names: an upstream that is slower is
// named as not connected yet, and connected at the first call.
const prepareUpstreams = 10 * time.Second

// newHub is code mode's connections to the [[upstream]] servers, their
// tools listed (within prepareUpstreams) so that execute_code's
// description can name them. Without upstreams it is nil.
//
// When an upstream says its tools changed, the Hub lists them again and
// calls changed (once it is set: the tools are registered after the Hub
// is made), which renews execute_code's description.
func newHub(ctx context.Context, cfg config.Config, obs observers, log *zap.Logger, changed *atomic.Pointer[func()]) (*upstream.Hub, error) {
	if len(cfg.Upstreams) == 0 {
		return nil, nil
	}
	var h *upstream.Hub
	opts := upstream.Options{Log: log, MaxResultBytes: cfg.Limits.MaxOutputBytes, MaxResultKey: "limits.max_output_bytes",
		OnToolsChanged: func(name string) {
			pctx, cancel := context.WithTimeout(ctx, prepareUpstreams)
			defer cancel()
			if err := h.Prepare(pctx); err != nil {
				log.Warn("upstreams not listed again", zap.Error(err))
			}
			if f := changed.Load(); f != nil {
				(*f)()
			}
			log.Info("upstream tools changed", zap.String("upstream", name))
		}}
	if obs.tracer != nil {
		opts.Observer = obs.tracer
	}
	var err error
	h, err = upstream.New(cfg.Upstreams, cfg.CodeMode, opts)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, prepareUpstreams)
	defer cancel()
	if err := h.Prepare(pctx); err != nil {
		log.Warn("upstreams not listed at start", zap.Error(err))
	}
	return h, nil
}
