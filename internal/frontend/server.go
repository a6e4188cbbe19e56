// Package frontend is execd's MCP engine: the streamable-HTTP endpoint and
// stdio, both protocol eras, sessions (legacy only), JSON-RPC, the
// interception of cancellations and client responses before routing, the
// input plumbing (elicitation, input_required) and a typed registry of
// tools, resources and prompts. It knows MCP, not sandboxes: execd's own
// tools live in internal/tools and register here through AddTool, as the
// conformance fixtures do (cmd/execd-conformance).
//
// Every message, whatever carried it, goes through one pipeline
// (pipeline.go): decode, intercept cancels and client responses
// (intercept.go), admit by the era's rules (admit.go), run, then answer or
// stay silent, decided once, and one log line. The transports (http.go,
// stdio.go) only read and write bytes.
package frontend

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"execd/internal/tasks"
)

// ServerName identifies execd on the wire.
const ServerName = "execd"

// Options configure a Server. Each field says what its zero value means.
type Options struct {
	// Version is execd's version in serverInfo. Empty means "dev".
	Version string
	// Logger gets one line per request (at most requestLinesPerSecond a
	// second, then one in requestLinesPerSecond) and the front end's
	// errors. Nil means no logs.
	Logger *zap.Logger

	// Path is the MCP endpoint of Handler. Empty means "/mcp".
	Path string
	// Listen is the address the HTTP listener is bound to. On a loopback
	// address a request whose Host is not loopback is refused (DNS
	// rebinding); an address without a host ("":8765) listens everywhere
	// and does not check. Empty means a loopback listener.
	Listen string
	// AllowedOrigins are the browser origins allowed besides loopback ones
	// ("*" allows all). Nil means loopback origins only.
	AllowedOrigins []string
	// AuthTokensFile names a file of "principal token" lines; with it
	// every HTTP request needs a bearer token. Empty means no auth: every
	// request is LocalPrincipal.
	AuthTokensFile string
	// MaxBodyBytes caps a POST body and a stdio line. Zero means 8 MiB.
	MaxBodyBytes int64
	// MaxStreamsPerPrincipal caps the HTTP requests (each request of a
	// batch too) and GET streams one principal may have open; one more is
	// answered "Too Many Requests". Zero means no cap.
	MaxStreamsPerPrincipal int
	// ToolsListChanged: the tool list may change while serving (code
	// mode's upstreams renew execute_code's description). Legacy
	// initialize then declares tools.listChanged, and NotifyToolsChanged
	// tells the legacy clients that have a stream of their own.
	ToolsListChanged bool
	// ReadTimeout bounds reading a POST body. Zero means no bound.
	ReadTimeout time.Duration

	// CancelOnDisconnect makes the close of a legacy HTTP response stream
	// cancel its call; the modern era always does. False means a legacy
	// call runs on and its answer is dropped.
	CancelOnDisconnect bool
	// ProgressHeartbeat is the longest silence on a running call's
	// progress stream. Zero means no heartbeat.
	ProgressHeartbeat time.Duration
	// SessionIdleTTL ends a legacy session idle this long (no call in
	// flight). Zero means sessions never expire.
	SessionIdleTTL time.Duration
	// InputTimeout is how long a handler waits for the person's answer
	// (Server.InputTimeout), and how long an input_required round's
	// requestState stays valid. Zero means 5 minutes.
	InputTimeout time.Duration
	// SessionKey is a secret shared by every instance behind one balancer
	// (cluster.session_key_file): session ids are signed with it, and a
	// request bearing a signed id another instance minted is served in
	// that session here, so that a legacy session works on every
	// instance. Nil means random ids that only this Server knows.
	SessionKey []byte

	// Observer watches every request (observe.go). Nil means nothing is
	// observed.
	Observer Observer

	// Tasks keeps the records of calls that became tasks (tasks.go). Nil
	// means no tasks: neither the 2026-07-28 extension nor the 2025-11-25
	// capability is declared.
	Tasks *tasks.Store
	// TaskAfter is how long a call of a tool that supports tasks, from a
	// 2026-07-28 request that declared the tasks extension, runs before it
	// becomes a task. Zero means calls never become tasks in that era (the
	// extension is not declared); a 2025-11-25 client that asks for a task
	// still gets one.
	TaskAfter time.Duration
}

// Causes that end a call's context. A client's cancel means "write
// nothing"; the others are answered with an isError result.
var (
	errClientCancel = errors.New("cancelled by the client")
	errClientGone   = errors.New("the client closed the stream")
	// ErrShutdown is the cause of the end of every call's context, and of
	// Server.Detached, once the shutdown grace is over.
	ErrShutdown     = errors.New("execd is shutting down")
	errSessionEnded = errors.New("the session ended")
)

// clientEnded reports whether a context ended because the client no longer
// wants the answer, so that nothing may be written for it.
func clientEnded(ctx context.Context) bool {
	c := context.Cause(ctx)
	return errors.Is(c, errClientCancel) || errors.Is(c, errClientGone) || errors.Is(c, errSessionEnded)
}

// requestLinesPerSecond bounds the request lines: a daemon answering
// thousands of calls a second would spend a tenth of its time writing them.
// Beyond it one in requestLinesPerSecond is written; /metrics counts every
// request.
const requestLinesPerSecond = 100

// sampled is log for the request lines: per second, the first
// requestLinesPerSecond of each level and message, then one in
// requestLinesPerSecond.
func sampled(log *zap.Logger) *zap.Logger {
	return log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, requestLinesPerSecond, requestLinesPerSecond)
	}))
}

// Server is the transport-independent core.
type Server struct {
	opts   Options
	log    *zap.Logger
	reqLog *zap.Logger // log, sampled: the one line per request
	tools  *toolSet
	feat   features
	// listening are the legacy peers with a stream of their own open
	// (NotifyToolsChanged).
	listening listeners
	table     map[string]method
	// resultMeta is the modern _meta member every result carries
	// (ResultEnvelope), encoded once.
	resultMeta []byte

	instrMu      sync.RWMutex
	instructions string

	sessions *sessionStore
	inflight *inflight
	pending  *pendingRequests
	auth     *authenticator
	streams  *streamGauge
	obs      Observer
	running  running   // requests in flight, for Running
	live     liveTasks // tasks whose run is in this process

	// stateKey protects the requestState of input_required rounds
	// (input.go); fresh for every process, which stateFrom names.
	stateKey  []byte
	stateFrom string
	// loopback: the listener is on a loopback address, so a foreign Host
	// is refused.
	loopback bool

	// runCtx parents every call; it is cancelled with ErrShutdown once the
	// shutdown grace is over. stopping is closed when shutdown begins, to
	// end long-lived streams (GET, listen) and refuse new requests.
	runCtx    context.Context
	cancelRun context.CancelCauseFunc
	stopping  chan struct{}
	stopOnce  sync.Once
	calls     sync.WaitGroup
	draining  atomic.Bool
	procs     atomic.Int64 // numbers stdio processes, for their scopes
}

// New returns a Server. Call Shutdown when done with it: it ends the
// session sweeper's goroutine and every stream and call still open.
func New(opts Options) (*Server, error) {
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Path == "" {
		opts.Path = "/mcp"
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.InputTimeout <= 0 {
		opts.InputTimeout = 5 * time.Minute
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	auth, err := newAuthenticator(opts.AuthTokensFile)
	if err != nil {
		return nil, err
	}
	key := make([]byte, 40)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &Server{
		opts:      opts,
		log:       log,
		reqLog:    sampled(log),
		tools:     &toolSet{byName: map[string]*tool{}},
		sessions:  newSessionStore(opts.SessionIdleTTL, opts.SessionKey),
		inflight:  newInflight(),
		pending:   newPendingRequests(),
		auth:      auth,
		streams:   newStreamGauge(opts.MaxStreamsPerPrincipal),
		obs:       opts.Observer,
		stateKey:  key[:32],
		stateFrom: base64.RawURLEncoding.EncodeToString(key[32:]),
		loopback:  listenerIsLoopback(opts.Listen),
		runCtx:    ctx,
		cancelRun: cancel,
		stopping:  make(chan struct{}),
	}
	s.sessions.parent = ctx
	if s.obs == nil {
		s.obs = nopObserver{}
	}
	s.table = s.methods()
	si, err := json.Marshal(s.serverInfo())
	if err != nil {
		return nil, err
	}
	s.resultMeta = append(append([]byte(`"_meta":{"`+metaServerInfo+`":`), si...), "},"...)
	if ttl := opts.SessionIdleTTL; ttl > 0 {
		go s.sweepSessions(min(max(ttl/4, time.Second), time.Minute))
	} else if opts.SessionKey != nil {
		go s.sweepSessions(time.Minute) // the ended ids
	}
	return s, nil
}

// sweepSessions drops expired sessions every period until shutdown, so that
// sessions that clients abandon (most never DELETE) do not pile up.
func (s *Server) sweepSessions(period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-s.stopping:
			return
		case <-t.C:
			s.sessions.sweep()
		}
	}
}

// ReloadAuth re-reads the auth tokens file (SIGHUP).
func (s *Server) ReloadAuth() error { return s.auth.reload() }

// Shutdown stops the server: new requests are refused, long-lived streams
// end at once, running calls get until ctx ends to finish, then are
// cancelled and answered with a "shutting down" result. It returns when
// every call has answered. Cancels and client responses still get through
// while it waits.
func (s *Server) Shutdown(ctx context.Context) {
	s.draining.Store(true)
	s.stopOnce.Do(func() { close(s.stopping) })
	done := make(chan struct{})
	go func() { s.calls.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.cancelRun(ErrShutdown)
		<-done
	}
	s.cancelRun(ErrShutdown)
	s.sessions.closeAll()
}

// Era is the protocol era a message is served in.
type Era int

const (
	EraLegacy Era = iota
	EraModern
)

func (e Era) String() string {
	if e == EraModern {
		return "modern"
	}
	return "legacy"
}

// SetInstructions sets what server/discover and initialize tell the model
// the server is for. Empty, the default, means none.
func (s *Server) SetInstructions(text string) {
	s.instrMu.Lock()
	s.instructions = text
	s.instrMu.Unlock()
}

func (s *Server) getInstructions() string {
	s.instrMu.RLock()
	defer s.instrMu.RUnlock()
	return s.instructions
}

// InputTimeout is how long a request waits for the person's answer, and
// how long an input_required round's requestState stays valid
// (Options.InputTimeout).
func (s *Server) InputTimeout() time.Duration { return s.opts.InputTimeout }

// DefaultMaxBodyBytes is Options.MaxBodyBytes when none is given: room for
// a tool argument of 4 MiB of bytes in base64 (5.6 MB) and its envelope.
const DefaultMaxBodyBytes = 8 << 20

// MaxBodyBytes is the largest request the server reads (a POST body or a
// stdio line): a tool that takes large arguments says in its own words
// what fits below it, rather than leaving a larger one to the transport's
// refusal.
func (s *Server) MaxBodyBytes() int64 { return s.opts.MaxBodyBytes }

// Detached is a context for work that outlives the request that started
// it (a run that waits for the person's answer across requests): it ends,
// with the cause ErrShutdown, when the shutdown grace is over.
func (s *Server) Detached() context.Context { return s.runCtx }

func (s *Server) serverInfo() map[string]string {
	return map[string]string{"name": ServerName, "version": s.opts.Version}
}

// capabilities are what discover (era modern) and initialize (version
// negotiated) declare.
func (s *Server) capabilities(era Era, version string) map[string]any {
	caps := map[string]any{"tools": map[string]any{"listChanged": era == EraLegacy && s.opts.ToolsListChanged}, "logging": map[string]any{}}
	switch {
	case era == EraModern && s.modernTasks():
		caps["extensions"] = map[string]any{extTasks: map[string]any{}}
	case era == EraLegacy && version == VersionLatest && s.hasTasks():
		caps["tasks"] = map[string]any{"list": map[string]any{}, "cancel": map[string]any{},
			"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
	}
	if s.feat.hasResources() {
		caps["resources"] = map[string]any{"listChanged": false, "subscribe": false}
	}
	if s.feat.hasPrompts() {
		caps["prompts"] = map[string]any{"listChanged": false}
	}
	if s.feat.hasCompletions() {
		caps["completions"] = map[string]any{}
	}
	return caps
}

// streamGauge counts the open HTTP requests and streams per principal
// against Options.MaxStreamsPerPrincipal.
type streamGauge struct {
	limit int
	mu    sync.Mutex
	open  map[string]int
}

func newStreamGauge(limit int) *streamGauge {
	return &streamGauge{limit: limit, open: make(map[string]int)}
}

// take counts one more for principal; it fails at the limit. release gives
// it back.
func (g *streamGauge) take(principal string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.limit > 0 && g.open[principal] >= g.limit {
		return false
	}
	g.open[principal]++
	return true
}

func (g *streamGauge) release(principal string) {
	g.mu.Lock()
	if g.open[principal]--; g.open[principal] <= 0 {
		delete(g.open, principal)
	}
	g.mu.Unlock()
}
