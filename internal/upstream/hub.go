// Package upstream is execd as an MCP client of the operator's own MCP
// servers ([[upstream]] in the configuration), for "code mode": code in
// the sandbox calls their tools. A Hub holds one connection per upstream,
// made when first needed and kept (a stdio server that exits is started
// again at the next need, with a growing pause after repeated failures);
// it lists the tools a principal may use, decides each call by the
// upstream's allow and ask patterns and principals, bounds calls by
// max_calls_per_run, call_timeout and the size of their answers, relays
// progress, cancels upstream what the caller gives up, and reports each
// call to the log, the counters and an Observer. The client is the
// official Go SDK (github.com/modelcontextprotocol/go-sdk), wrapped at its
// transport seams (RATIONALE.md, "Why the official Go SDK as the
// client?"). RATIONALE.md says why it is built this way.
//
// Concurrency contract: a Hub and its Runs are safe for concurrent use;
// one Run may make many calls at once.
package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"execd/internal/config"
)

// Options are what a Hub uses besides the configuration. The zero value
// is the daemon's: no log, no observer, answers up to 16 MiB.
type Options struct {
	Log *zap.Logger
	// Observer is told of every call (traces); nil: none.
	Observer Observer
	// MaxResultBytes bounds every message an upstream sends, and so a
	// call's answer: a larger one is dropped unread and the call fails
	// with CodeTooLarge. Zero: 16 MiB.
	MaxResultBytes int
	// MaxResultKey is the configuration key MaxResultBytes comes from,
	// named in that error; "": the error names none.
	MaxResultKey string
	// OnToolsChanged is called when an upstream says its tools changed
	// (notifications/tools/list_changed), once per upstream however many
	// such notifications arrive before it returns, on a goroutine of the
	// Hub's, never two at once. The next Tools or Signatures sees the new
	// list. Nil: nobody is told.
	OnToolsChanged func(upstream string)
	// LookupEnv reads execd's environment for bearer.env and pass_env;
	// nil: os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// Hub is the connections to every upstream of the configuration.
type Hub struct {
	opts    Options
	log     *zap.Logger
	servers []*server // in the configuration's order
	byName  map[string]*server
	budget  int

	progress  sync.Map // progress token → *progressSink
	nextToken atomic.Uint64

	changedMu sync.Mutex
	changed   map[string]bool
	changedC  chan struct{}

	ctx    context.Context // ends at Close: connections are made under it
	cancel context.CancelFunc
	wg     sync.WaitGroup // the Hub's goroutines
	closed atomic.Bool
}

// New builds the Hub of the configuration; nothing is started or
// connected until it is needed. Its errors name the key at fault (a bearer
// that cannot be read).
func New(ups []config.Upstream, mode config.CodeMode, opts Options) (*Hub, error) {
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if opts.MaxResultBytes <= 0 {
		opts.MaxResultBytes = 16 << 20
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hub{opts: opts, log: opts.Log, byName: map[string]*server{}, budget: mode.DescriptionBudget,
		changed: map[string]bool{}, changedC: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
	if h.budget <= 0 {
		h.budget = 4096
	}
	for i, u := range ups {
		s, err := newServer(h, i, u)
		if err != nil {
			cancel()
			return nil, err
		}
		h.servers = append(h.servers, s)
		h.byName[u.Name] = s
	}
	if opts.OnToolsChanged != nil {
		h.wg.Add(1)
		go h.notify()
	}
	return h, nil
}

// Close ends every connection (a stdio server gets EOF on its stdin, then
// SIGTERM, then SIGKILL) and waits for the Hub's goroutines. Calls under
// way fail with CodeUnavailable. Close is idempotent.
func (h *Hub) Close() error {
	if h.closed.Swap(true) {
		return nil
	}
	h.cancel()
	var wg sync.WaitGroup
	for _, s := range h.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.close()
		}()
	}
	wg.Wait()
	h.wg.Wait()
	return nil
}

// Names are the upstreams' names, in the configuration's order.
func (h *Hub) Names() []string {
	out := make([]string, len(h.servers))
	for i, s := range h.servers {
		out[i] = s.cfg.Name
	}
	return out
}

// Restricted reports whether some upstream is open to some principals
// only (its principals key): what a principal may use then depends on
// who it is.
func (h *Hub) Restricted() bool {
	for _, s := range h.servers {
		if s.principals != nil {
			return true
		}
	}
	return false
}

// visible is the server called name if principal may use it.
func (h *Hub) visible(principal, name string) *server {
	s := h.byName[name]
	if s == nil || !s.usableBy(principal) {
		return nil
	}
	return s
}

// ToolInfo is one tool a principal may call.
type ToolInfo struct {
	Server string
	// Name is the tool's name upstream; Ident is how code names it
	// (Name with what is not a letter, digit or _ made _, unique within
	// its upstream). Call takes either.
	Name, Ident  string
	Title        string
	Description  string
	InputSchema  json.RawMessage // a JSON Schema object
	OutputSchema json.RawMessage // nil when the tool declares none
	Access       Access          // AccessAllow or AccessAsk
}

// Tools lists the tools principal may call, upstream by upstream in the
// configuration's order, connecting to each upstream as needed. An
// upstream that cannot be reached is left out, and named in the error
// (one *Error per such upstream, joined); the others' tools are there
// whatever the error.
func (h *Hub) Tools(ctx context.Context, principal string) ([]ToolInfo, error) {
	var mine []*server
	for _, s := range h.servers {
		if s.usableBy(principal) {
			mine = append(mine, s)
		}
	}
	lists := make([][]ToolInfo, len(mine))
	errs := make([]error, len(mine))
	var wg sync.WaitGroup
	for i, s := range mine {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts, err := s.tools(ctx)
			lists[i], errs[i] = ts.infos(s), err
		}()
	}
	wg.Wait()
	var out []ToolInfo
	for _, l := range lists {
		out = append(out, l...)
	}
	return out, errors.Join(errs...)
}

// State is how an upstream's connection is.
type State string

const (
	StateIdle     State = "idle"     // never needed yet
	StateStarting State = "starting" // being started or connected
	StateUp       State = "up"
	StateDown     State = "down" // it ended or could not be made; the next need tries again
	StateClosed   State = "closed"
)

// Status is one upstream as the status page and the metrics see it.
type Status struct {
	Name      string    `json:"name"`
	Transport string    `json:"transport"` // "stdio" or "http"
	State     State     `json:"state"`
	Since     time.Time `json:"since"` // when State began; zero while idle
	Tools     int       `json:"tools"` // listed on this connection; 0 before the first listing
	// Connects counts the connections made; Failures the consecutive
	// ends and failed attempts since the last success.
	Connects  int    `json:"connects"`
	Failures  int    `json:"failures"`
	LastError string `json:"lastError,omitempty"`
	// Calls counts the calls made, by outcome (OutcomeOK,
	// OutcomeToolError or an error's Code).
	Calls map[Code]uint64 `json:"calls"`
}

// Status reports every upstream, in the configuration's order.
func (h *Hub) Status() []Status {
	out := make([]Status, 0, len(h.servers))
	for _, s := range h.servers {
		out = append(out, s.status())
	}
	return out
}

// toolsChanged queues upstream for OnToolsChanged.
func (h *Hub) toolsChanged(upstream string) {
	if h.opts.OnToolsChanged == nil {
		return
	}
	h.changedMu.Lock()
	h.changed[upstream] = true
	h.changedMu.Unlock()
	select {
	case h.changedC <- struct{}{}:
	default:
	}
}

func (h *Hub) notify() {
	defer h.wg.Done()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-h.changedC:
		}
		h.changedMu.Lock()
		names := make([]string, 0, len(h.changed))
		for n := range h.changed {
			names = append(names, n)
		}
		clear(h.changed)
		h.changedMu.Unlock()
		sort.Strings(names)
		for _, n := range names {
			h.opts.OnToolsChanged(n)
		}
	}
}

// limitKey names an [[upstream]] key in messages.
func limitKey(upstream, key string) string {
	return fmt.Sprintf("%s of [[upstream]] %q", key, upstream)
}

// clip shortens s to n bytes at most, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && s[i]&0xc0 == 0x80 {
		i--
	}
	return strings.TrimSpace(s[:i]) + "…"
}
