// Package frontend is execd's MCP front end: the streamable-HTTP endpoint
// and stdio, both protocol eras, sessions (legacy only), JSON-RPC, the
// interception of cancellations and client responses before routing, the
// method table and the tool handlers.
//
// One Server serves any number of transports. Every request becomes a call
// with its own context; cancellation, timeouts and shutdown all end that
// context, and the call's stream decides what (if anything) is written.
package frontend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"execd/internal/config"
	"execd/internal/jsonrpc"
	"execd/internal/progress"
	"execd/internal/workspace"
)

// ServerName and ServerVersion identify execd on the wire.
const ServerName = "execd"

// ServerVersion is set at build time (-ldflags "-X …ServerVersion=…").
var ServerVersion = "0.1.0"

// instructions tells the model what execd is for, in discover and
// initialize results.
func (s *Server) instructions() string {
	langs := "code"
	if len(s.langs) > 0 {
		langs = strings.Join(s.langs, " and ") + " code"
	}
	return "Runs " + langs + " in sandboxes with execute_code. Each result names a workspace: pass it back as `workspace` to keep variables and files from earlier calls."
}

// Executor runs code in workspaces. *workspace.Manager implements it.
type Executor interface {
	Run(ctx context.Context, req workspace.Request) (workspace.Outcome, error)
	List(principal string) []workspace.Info
	Reset(ctx context.Context, principal, id string, files bool) error
	Delete(ctx context.Context, principal, id string) error
}

// Options configure a Server.
type Options struct {
	Config    config.Config
	Executor  Executor
	Languages []string // the guests the executor can run, for the tool description
	Logger    *zap.Logger
}

// Causes that end a call's context. A client's cancel means "write
// nothing"; the others are answered with an isError result.
var (
	errClientCancel = errors.New("cancelled by the client")
	errClientGone   = errors.New("the client closed the stream")
	errShutdown     = errors.New("execd is shutting down")
	errSessionEnded = errors.New("the session ended")
)

// clientEnded reports whether a context ended because the client no longer
// wants the answer, so that nothing may be written for it.
func clientEnded(ctx context.Context) bool {
	c := context.Cause(ctx)
	return errors.Is(c, errClientCancel) || errors.Is(c, errClientGone) || errors.Is(c, errSessionEnded)
}

// Server is the transport-independent core.
type Server struct {
	cfg   config.Config
	log   *zap.Logger
	exec  Executor
	langs []string
	tools *toolSet
	feat  features

	sessions *sessionStore
	inflight *inflight
	pending  *pendingRequests
	auth     *authenticator

	// runCtx parents every call; it is cancelled with errShutdown once the
	// shutdown grace is over. stopping is closed when shutdown begins, to
	// end long-lived streams (GET, listen).
	runCtx    context.Context
	cancelRun context.CancelCauseFunc
	stopping  chan struct{}
	stopOnce  sync.Once
	calls     sync.WaitGroup
	draining  atomic.Bool

	tableOnce sync.Once
	table     map[string]method

	streamsMu sync.Mutex
	streams   map[string]int // open HTTP requests per principal
}

// features are the optional method families a build declares. Production
// declares tools and logging only; the conformance build adds its fixtures.
type features struct {
	prompts   *promptSet
	resources *resourceSet
	completes bool
}

// New returns a Server.
func New(opts Options) (*Server, error) {
	if opts.Executor == nil {
		return nil, errors.New("frontend: nil Executor")
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	auth, err := newAuthenticator(opts.Config.Server.AuthTokensFile)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &Server{
		cfg:       opts.Config,
		log:       log,
		exec:      opts.Executor,
		langs:     opts.Languages,
		sessions:  newSessionStore(opts.Config.Protocol.SessionIdleTTL.Duration),
		inflight:  newInflight(),
		pending:   newPendingRequests(),
		auth:      auth,
		runCtx:    ctx,
		cancelRun: cancel,
		stopping:  make(chan struct{}),
		streams:   make(map[string]int),
	}
	s.tools = newToolSet(s)
	registerFixtures(s)
	if ttl := opts.Config.Protocol.SessionIdleTTL.Duration; ttl > 0 {
		go s.sweepSessions(min(max(ttl/4, time.Second), time.Minute))
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

// Shutdown stops the server: long-lived streams end at once, running calls
// get until ctx ends to finish, then are cancelled and answered with a
// "shutting down" result. It returns when every call has answered.
func (s *Server) Shutdown(ctx context.Context) {
	s.draining.Store(true)
	s.stopOnce.Do(func() { close(s.stopping) })
	done := make(chan struct{})
	go func() { s.calls.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.cancelRun(errShutdown)
		<-done
	}
	s.cancelRun(errShutdown)
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

// outbound is the way back to the client for one call: notifications and
// server-to-client requests travel on the request's own stream.
type outbound interface {
	// Notify writes a notification; it fails when the stream cannot carry
	// notifications (JSON-only HTTP) or is gone.
	Notify(method string, params any) error
	// Request writes a server-to-client request on the stream; the
	// response arrives through the pending table.
	Request(id jsonrpc.ID, method string, params any) error
}

// call is one request being served.
type call struct {
	era       Era
	version   string
	principal string
	transport string // "http" or "stdio"
	id        jsonrpc.ID
	method    string
	params    json.RawMessage
	meta      requestMeta
	out       outbound
	session   *session // legacy HTTP
	proc      *stdioProc
	logMin    int // least severe level sent as notifications/message; -1 none

	mu        sync.Mutex
	responded bool   // after the response, nothing more is sent
	workspace string // for the request log line, once known
}

// notify sends a notification on the call's stream unless it has answered.
func (c *call) notify(method string, params any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.responded || c.out == nil {
		return errors.New("stream closed")
	}
	return c.out.Notify(method, params)
}

// logMessage sends notifications/message at level when the client asked
// for that level.
func (c *call) logMessage(level string, data any) {
	if c.logMin < 0 || levelRank(level) < c.logMin {
		return
	}
	_ = c.notify("notifications/message", map[string]any{"level": level, "logger": ServerName, "data": data})
}

// finish marks the call answered: from now on nothing more is written.
func (c *call) finish() {
	c.mu.Lock()
	c.responded = true
	c.mu.Unlock()
}

// emitter adapts a call to progress.Emitter.
type emitter struct{ c *call }

func (e emitter) Notify(method string, params any) error { return e.c.notify(method, params) }

func (c *call) reporter(heartbeat time.Duration) *progress.Reporter {
	return progress.New(emitter{c}, c.meta.progressToken, progress.Options{Heartbeat: heartbeat})
}

// handler serves one method.
type handler func(ctx context.Context, c *call) (any, *jsonrpc.Error)

// method describes one entry of the method table.
type method struct {
	h      handler
	legacy bool // served in the legacy era
	modern bool // served in the modern era
}

func (s *Server) methods() map[string]method {
	m := map[string]method{
		"ping":                 {h: s.ping, legacy: true},
		"logging/setLevel":     {h: s.setLevel, legacy: true},
		"server/discover":      {h: s.discover, modern: true},
		"subscriptions/listen": {h: s.listen, modern: true},
		"tools/list":           {h: s.listTools, legacy: true, modern: true},
		"tools/call":           {h: s.callTool, legacy: true, modern: true},
	}
	s.addFeatureMethods(m)
	return m
}

// removedInModern are legacy methods that the modern era dropped.
var removedInModern = map[string]bool{
	"initialize": true, "notifications/initialized": true, "ping": true, "logging/setLevel": true,
	"resources/subscribe": true, "resources/unsubscribe": true, "notifications/roots/list_changed": true,
}

// lookup returns the handler for method in era, or a -32601 error.
func (s *Server) lookup(era Era, name string) (method, *jsonrpc.Error) {
	m, ok := s.methodTable()[name]
	if !ok || (era == EraModern && !m.modern) || (era == EraLegacy && !m.legacy) {
		return method{}, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: %s", name)
	}
	return m, nil
}

func (s *Server) methodTable() map[string]method {
	// The table depends only on the build's features; one per Server.
	s.tableOnce.Do(func() { s.table = s.methods() })
	return s.table
}

// serve runs a validated request and shapes its result for the era. A nil
// result with a nil error means "write nothing" (the client cancelled).
func (s *Server) serve(ctx context.Context, c *call, m method) (json.RawMessage, *jsonrpc.Error) {
	res, jerr := m.h(ctx, c)
	if jerr != nil {
		return nil, jerr
	}
	if res == nil {
		return nil, nil
	}
	b, err := s.shapeResult(c.era, res)
	if err != nil {
		s.log.Error("encode result", zap.String("method", c.method), zap.Error(err))
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "Internal error: cannot encode the result")
	}
	return b, nil
}

// shapeResult marshals a result; in the modern era it adds resultType
// (when the handler did not) and serverInfo in _meta.
func (s *Server) shapeResult(era Era, res any) (json.RawMessage, error) {
	if era == EraModern {
		if m, ok := res.(map[string]any); ok {
			// Handlers build fresh maps: add the era's fields in place and
			// marshal once.
			if _, ok := m["resultType"]; !ok {
				m["resultType"] = "complete"
			}
			meta, _ := m["_meta"].(map[string]any)
			if meta == nil {
				meta = map[string]any{}
			}
			meta[metaServerInfo] = serverInfo()
			m["_meta"] = meta
			return json.Marshal(m)
		}
	}
	b, err := json.Marshal(res)
	if err != nil || era != EraModern {
		return b, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("result is not an object: %w", err)
	}
	if obj == nil {
		obj = map[string]json.RawMessage{}
	}
	if _, ok := obj["resultType"]; !ok {
		obj["resultType"] = json.RawMessage(`"complete"`)
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := obj["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	si, _ := json.Marshal(serverInfo())
	meta[metaServerInfo] = si
	obj["_meta"], _ = json.Marshal(meta)
	return json.Marshal(obj)
}

func serverInfo() map[string]string {
	return map[string]string{"name": ServerName, "version": ServerVersion}
}

func (s *Server) capabilities() map[string]any {
	caps := map[string]any{"tools": map[string]any{"listChanged": false}, "logging": map[string]any{}}
	if s.feat.prompts != nil {
		caps["prompts"] = map[string]any{"listChanged": false}
	}
	if s.feat.resources != nil {
		caps["resources"] = map[string]any{"listChanged": false, "subscribe": false}
	}
	if s.feat.completes {
		caps["completions"] = map[string]any{}
	}
	return caps
}

// requiredCapabilities returns the client capabilities a call needs that
// the request did not declare (MM-2), as an object for -32021's data.
func missingCapabilities(need []string, have map[string]json.RawMessage) map[string]any {
	var miss map[string]any
	for _, n := range need {
		if _, ok := have[n]; !ok {
			if miss == nil {
				miss = map[string]any{}
			}
			miss[n] = map[string]any{}
		}
	}
	return miss
}

func (s *Server) ping(context.Context, *call) (any, *jsonrpc.Error) { return struct{}{}, nil }

func (s *Server) setLevel(_ context.Context, c *call) (any, *jsonrpc.Error) {
	var p struct {
		Level string `json:"level"`
	}
	if err := json.Unmarshal(c.params, &p); err != nil || levelRank(p.Level) < 0 {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: level must be one of debug, info, notice, warning, error, critical, alert, emergency")
	}
	switch {
	case c.session != nil:
		c.session.setLogLevel(levelRank(p.Level))
	case c.proc != nil:
		c.proc.logMin.Store(int32(levelRank(p.Level)))
	}
	return struct{}{}, nil
}

func (s *Server) discover(context.Context, *call) (any, *jsonrpc.Error) {
	return map[string]any{
		"supportedVersions": allVersions,
		"capabilities":      s.capabilities(),
		"instructions":      s.instructions(),
		"ttlMs":             300000,
		"cacheScope":        "public",
	}, nil
}

// initializeResult answers a legacy initialize, negotiating the version.
func (s *Server) initializeResult(requested string) (map[string]any, string) {
	v := requested
	if !isLegacyVersion(v) {
		v = VersionLatest
	}
	return map[string]any{
		"protocolVersion": v,
		"capabilities":    s.capabilities(),
		"serverInfo":      serverInfo(),
		"instructions":    s.instructions(),
	}, v
}

// listen serves subscriptions/listen: execd has nothing to push, so it
// acknowledges an empty set, keeps the stream open, and ends it with a
// result when the server stops. A client ends it by closing the stream
// (HTTP) or cancelling (stdio).
func (s *Server) listen(ctx context.Context, c *call) (any, *jsonrpc.Error) {
	var p struct {
		Notifications map[string]json.RawMessage `json:"notifications"`
	}
	if len(c.params) > 0 {
		if err := json.Unmarshal(c.params, &p); err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err)
		}
	}
	subMeta := map[string]any{metaSubscription: c.id}
	if err := c.notify("notifications/subscriptions/acknowledged", map[string]any{
		"_meta": subMeta, "notifications": map[string]any{},
	}); err != nil {
		return nil, nil
	}
	select {
	case <-ctx.Done():
		if clientEnded(ctx) {
			return nil, nil
		}
	case <-s.stopping:
	}
	return map[string]any{"_meta": subMeta}, nil
}

// askClient sends a server-to-client request (elicitation, sampling, roots)
// on the call's own stream and waits for the client's response, which the
// front end intercepts before routing. Legacy era only (M-5): the modern era
// asks with an input_required result instead.
func (s *Server) askClient(ctx context.Context, c *call, method string, params any) (json.RawMessage, *jsonrpc.Error) {
	if c.era != EraLegacy {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "Internal error: no server requests in the %s era", c.era)
	}
	scope := stdioScope
	if c.session != nil {
		scope = "s:" + c.session.id
	}
	id, ch, done := s.pending.open(scope)
	defer done()
	c.mu.Lock()
	var err error
	if c.responded || c.out == nil {
		err = errors.New("stream closed")
	} else {
		err = c.out.Request(id, method, params)
	}
	c.mu.Unlock()
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "Internal error: cannot send %s: %v (the request needs an SSE stream)", method, err)
	}
	select {
	case <-ctx.Done():
		return nil, nil
	case m := <-ch:
		if m.Error != nil {
			return nil, &jsonrpc.Error{Code: m.Error.Code, Message: "the client answered " + method + " with an error: " + m.Error.Message}
		}
		return m.Result, nil
	}
}

// openStream counts one more open HTTP request for principal; it fails
// when the principal is at server.max_streams_per_principal.
func (s *Server) openStream(principal string) (release func(), ok bool) {
	limit := s.cfg.Server.MaxStreams
	s.streamsMu.Lock()
	defer s.streamsMu.Unlock()
	if limit > 0 && s.streams[principal] >= limit {
		return nil, false
	}
	s.streams[principal]++
	return func() {
		s.streamsMu.Lock()
		if s.streams[principal]--; s.streams[principal] <= 0 {
			delete(s.streams, principal)
		}
		s.streamsMu.Unlock()
	}, true
}
