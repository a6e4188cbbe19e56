package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"execd/internal/config"
)

// server is one [[upstream]]: its settings, its connection, the tools it
// listed on it, and its counters.
type server struct {
	h          *Hub
	cfg        config.Upstream
	rules      rules
	principals map[string]bool // nil: every principal
	bearer     string          // the value, "" without
	redact     *strings.Replacer
	env        []string // a stdio server's environment
	client     *mcp.Client
	log        *zap.Logger
	calls      map[Code]*atomic.Uint64

	mu       sync.Mutex
	cur      *conn    // nil when not connected
	dialing  *dialing // non-nil while a connection is being made
	state    State
	since    time.Time
	lastErr  string
	connects int
	failures int
	retryAt  time.Time
	list     *toolList // cur's tools; nil until listed (again)
	listGen  uint64    // bumped by each tools/list_changed
}

// conn is one connection to an upstream.
type conn struct {
	cs   *mcp.ClientSession
	proc *process      // nil over HTTP
	done chan struct{} // closed once it has ended
	why  string        // why it ended, set before done is closed
	byUs atomic.Bool   // the Hub ended it
}

// dialing is a connection being made; done is closed when c or err is set.
type dialing struct {
	done chan struct{}
	c    *conn
	err  error
}

var allOutcomes = []Code{OutcomeOK, OutcomeToolError, CodeUnknownTool, CodeRefused, CodeDenied, CodeLimit,
	CodeTimeout, CodeTooLarge, CodeUnavailable, CodeUpstream, CodeCancelled, CodeBadArguments}

func newServer(h *Hub, index int, u config.Upstream) (*server, error) {
	at := fmt.Sprintf("upstream[%d] (%s)", index, u.Name)
	s := &server{h: h, cfg: u, rules: rules{allow: u.Allow, ask: u.Ask}, state: StateIdle,
		log: h.log.With(zap.String("upstream", u.Name)), calls: map[Code]*atomic.Uint64{}}
	for _, c := range allOutcomes {
		s.calls[c] = new(atomic.Uint64)
	}
	if len(u.Principals) > 0 {
		s.principals = map[string]bool{}
		for _, p := range u.Principals {
			s.principals[p] = true
		}
	}
	if b := u.Bearer; b != nil {
		v, err := readSecret(at+".bearer", *b, h.opts.LookupEnv)
		if err != nil {
			return nil, err
		}
		s.bearer = v
		s.redact = strings.NewReplacer(v, "[secret]")
	}
	if len(u.Command) > 0 {
		env, err := stdioEnv(at, u, h.opts.LookupEnv)
		if err != nil {
			return nil, err
		}
		s.env = env
	}
	s.client = mcp.NewClient(&mcp.Implementation{Name: "execd", Version: "code-mode"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{}, // no roots, sampling or elicitation: upstreams ask execd nothing
		ToolListChangedHandler: func(_ context.Context, req *mcp.ToolListChangedRequest) {
			s.listChanged(req.Session)
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			h.deliverProgress(req.Params)
		},
	})
	return s, nil
}

// readSecret reads a bearer's value as egress reads a secret's: from a
// file (without its final newline) or from execd's environment.
func readSecret(key string, sec config.UpstreamSecret, lookupEnv func(string) (string, bool)) (string, error) {
	var v string
	if sec.ValueFile != "" {
		b, err := os.ReadFile(sec.ValueFile)
		if err != nil {
			return "", fmt.Errorf("config: %s.value_file: %w", key, err)
		}
		v = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	} else {
		var ok bool
		if v, ok = lookupEnv(sec.Env); !ok {
			return "", fmt.Errorf("config: %s.env: the environment variable %s is not set", key, sec.Env)
		}
	}
	if len(v) < 8 {
		return "", fmt.Errorf("config: %s: the value has %d bytes; a bearer token needs at least 8", key, len(v))
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] == 0x7f {
			return "", fmt.Errorf("config: %s: the value holds a space, a control character or a line break (it must fit in a header)", key)
		}
	}
	return v, nil
}

func (s *server) usableBy(principal string) bool {
	return s.principals == nil || s.principals[principal]
}

func (s *server) transportName() string {
	if len(s.cfg.Command) > 0 {
		return "stdio"
	}
	return "http"
}

// backoff is the pause before the next attempt after n consecutive
// failures: none after the first (the next need tries again at once),
// then 1s, 2s, 4s … up to 30s.
func backoff(n int) time.Duration {
	if n <= 1 {
		return 0
	}
	d := time.Second << min(n-2, 5)
	return min(d, 30*time.Second)
}

// session is the upstream's connection, made (or waited for) when there
// is none. A connection is made under the Hub's context, not ctx: a
// caller that gives up does not break it for the others.
func (s *server) session(ctx context.Context) (*conn, error) {
	s.mu.Lock()
	if c := s.cur; c != nil {
		s.mu.Unlock()
		return c, nil
	}
	d := s.dialing
	if d == nil {
		if s.state == StateClosed {
			s.mu.Unlock()
			return nil, s.unavailable(fmt.Sprintf("upstream %q is closed: execd is shutting down", s.cfg.Name), nil)
		}
		if wait := time.Until(s.retryAt); wait > 0 {
			msg := fmt.Sprintf("upstream %q is down (%s); execd tries it again in %s", s.cfg.Name, s.lastErr, wait.Round(100*time.Millisecond))
			s.mu.Unlock()
			return nil, s.unavailable(msg, nil)
		}
		d = &dialing{done: make(chan struct{})}
		s.dialing = d
		s.state, s.since = StateStarting, time.Now()
		s.h.wg.Add(1)
		go s.dial(d)
	}
	s.mu.Unlock()
	select {
	case <-d.done:
		return d.c, d.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *server) dial(d *dialing) {
	defer s.h.wg.Done()
	ctx, cancel := context.WithTimeout(s.h.ctx, s.cfg.ConnectTimeout.Duration)
	c, err := s.connect(ctx)
	cancel()
	s.mu.Lock()
	s.dialing = nil
	closed := s.state == StateClosed
	switch {
	case err != nil:
		s.failures++
		s.retryAt = time.Now().Add(backoff(s.failures))
		s.lastErr = err.Error()
		if !closed {
			s.state, s.since = StateDown, time.Now()
		}
		d.err = err
	case closed:
		d.err = s.unavailable(fmt.Sprintf("upstream %q is closed: execd is shutting down", s.cfg.Name), nil)
	default:
		s.cur, s.list = c, nil
		s.connects++
		s.state, s.since = StateUp, time.Now()
		d.c = c
		s.h.wg.Add(1)
		go s.watch(c)
	}
	s.mu.Unlock()
	if err != nil {
		s.log.Warn("upstream did not start", zap.String("transport", s.transportName()), zap.Error(err))
	} else if closed {
		c.byUs.Store(true)
		_ = c.cs.Close()
		c.proc.stop()
	}
	close(d.done)
}

// connect makes a connection: starts the stdio server, or reaches the
// HTTP endpoint, and initializes the session.
func (s *server) connect(ctx context.Context) (*conn, error) {
	c := &conn{done: make(chan struct{})}
	var t mcp.Transport
	if len(s.cfg.Command) > 0 {
		p, tr, err := s.startProcess()
		if err != nil {
			return nil, s.unavailable(fmt.Sprintf("upstream %q did not start: %s", s.cfg.Name, clip(err.Error(), 200)), err)
		}
		c.proc, t = p, tr
	} else {
		t = s.httpTransport()
	}
	cs, err := s.client.Connect(ctx, t, nil)
	if err != nil {
		why := clip(s.redacted(err.Error()), 200)
		if c.proc != nil {
			c.proc.stop()
			if st := c.proc.exitStatus(); st != "" {
				why = st
			}
		}
		if ctx.Err() != nil && s.h.ctx.Err() == nil {
			why = fmt.Sprintf("no answer to initialize within %s (connect_timeout)", s.cfg.ConnectTimeout)
		}
		return nil, s.unavailable(fmt.Sprintf("upstream %q did not start: %s", s.cfg.Name, why), err)
	}
	c.cs = cs
	return c, nil
}

// watch waits for c to end and records why.
func (s *server) watch(c *conn) {
	defer s.h.wg.Done()
	err := c.cs.Wait()
	why := "the connection closed"
	if c.proc != nil {
		c.proc.stop()
		if st := c.proc.exitStatus(); st != "" {
			why = st
		}
	}
	if err != nil && !c.byUs.Load() {
		// The SDK ended the connection: over stdio, on what it could not
		// read (the server then exits on EOF, which says nothing).
		why = "the connection broke: " + clip(s.redacted(err.Error()), 200)
		if c.proc != nil {
			why = "it sent what is not JSON-RPC: " + clip(err.Error(), 200)
		}
	}
	c.why = why
	// c stops being the current connection before c.done tells anyone it
	// ended: a call that failed with it returns at c.done, and the next
	// call must find no connection, not this one again.
	s.mu.Lock()
	if s.cur == c {
		s.cur, s.list = nil, nil
		if s.state != StateClosed {
			s.state, s.since = StateDown, time.Now()
		}
		if !c.byUs.Load() {
			s.failures++
			s.retryAt = time.Now().Add(backoff(s.failures))
			s.lastErr = why
		}
	}
	s.mu.Unlock()
	close(c.done)
	if !c.byUs.Load() {
		s.log.Warn("upstream connection ended", zap.String("why", why))
	}
}

// drop ends c, which misbehaved; the next need makes a new connection.
func (s *server) drop(c *conn) {
	_ = c.cs.Close()
}

// succeeded: a call or a listing on the connection went through.
func (s *server) succeeded() {
	s.mu.Lock()
	s.failures = 0
	s.mu.Unlock()
}

func (s *server) close() {
	s.mu.Lock()
	s.state, s.since = StateClosed, time.Now()
	c := s.cur
	s.cur = nil
	s.mu.Unlock()
	if c != nil {
		c.byUs.Store(true)
		_ = c.cs.Close()
		<-c.done
	}
}

func (s *server) listChanged(sess *mcp.ClientSession) {
	s.mu.Lock()
	current := s.cur != nil && s.cur.cs == sess
	if current {
		s.listGen++
		s.list = nil
	}
	s.mu.Unlock()
	if current {
		s.h.toolsChanged(s.cfg.Name)
	}
}

// maxTools bounds one upstream's list: more are left out, and logged.
const maxTools = 1000

// tools is the upstream's tool list, listed on the current connection
// when it has not been yet (or has changed since).
func (s *server) tools(ctx context.Context) (*toolList, error) {
	c, err := s.session(ctx)
	if err != nil {
		return nil, s.asError(ctx, "", nil, err)
	}
	s.mu.Lock()
	l, gen := s.list, s.listGen
	if s.cur != c {
		l = nil
	}
	s.mu.Unlock()
	if l != nil {
		return l, nil
	}
	lctx, cancel := context.WithTimeoutCause(ctx, s.cfg.CallTimeout.Duration, errCallTimeout)
	defer cancel()
	var tools []*mcp.Tool
	for t, err := range c.cs.Tools(lctx, nil) {
		if err != nil {
			return nil, s.asError(lctx, "", c, err)
		}
		if len(tools) == maxTools {
			s.log.Warn("upstream lists more tools than execd keeps", zap.Int("kept", maxTools))
			break
		}
		tools = append(tools, t)
	}
	l = newToolList(tools)
	s.mu.Lock()
	if s.cur == c && s.listGen == gen {
		s.list = l
	}
	s.mu.Unlock()
	s.succeeded()
	return l, nil
}

// cached is the tool list of the current connection, nil when there is
// none yet.
func (s *server) cached() *toolList {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.list
}

func (s *server) status() Status {
	s.mu.Lock()
	st := Status{Name: s.cfg.Name, Transport: s.transportName(), State: s.state, Since: s.since,
		Connects: s.connects, Failures: s.failures, LastError: s.lastErr, Calls: map[Code]uint64{}}
	if s.list != nil {
		st.Tools = len(s.list.tools)
	}
	s.mu.Unlock()
	for c, n := range s.calls {
		if v := n.Load(); v > 0 {
			st.Calls[c] = v
		}
	}
	return st
}

func (s *server) redacted(text string) string {
	if s.redact == nil {
		return text
	}
	return s.redact.Replace(text)
}

func (s *server) unavailable(msg string, err error) *Error {
	return &Error{Code: CodeUnavailable, Upstream: s.cfg.Name, Message: msg, Err: err}
}

// toolList is one listing of an upstream's tools.
type toolList struct {
	tools   []*mcp.Tool
	byName  map[string]*mcp.Tool
	byIdent map[string]*mcp.Tool
	ident   map[string]string // name → ident
}

func newToolList(tools []*mcp.Tool) *toolList {
	l := &toolList{tools: tools, byName: map[string]*mcp.Tool{}, byIdent: map[string]*mcp.Tool{}, ident: map[string]string{}}
	for _, t := range tools {
		l.byName[t.Name] = t
	}
	for _, t := range tools {
		id := identOf(t.Name)
		for n := 2; l.byIdent[id] != nil || (id != t.Name && l.byName[id] != nil); n++ {
			id = fmt.Sprintf("%s_%d", identOf(t.Name), n)
		}
		l.byIdent[id] = t
		l.ident[t.Name] = id
	}
	return l
}

// find is the tool called name (its name upstream or its ident).
func (l *toolList) find(name string) *mcp.Tool {
	if t := l.byName[name]; t != nil {
		return t
	}
	return l.byIdent[name]
}

// infos are the tools of l that s's rules do not refuse.
func (l *toolList) infos(s *server) []ToolInfo {
	if l == nil {
		return nil
	}
	var out []ToolInfo
	for _, t := range l.tools {
		a := s.rules.access(t.Name)
		if a == AccessRefuse {
			continue
		}
		ti := ToolInfo{Server: s.cfg.Name, Name: t.Name, Ident: l.ident[t.Name], Title: t.Title,
			Description: t.Description, Access: a}
		ti.InputSchema, _ = json.Marshal(t.InputSchema)
		if t.OutputSchema != nil {
			ti.OutputSchema, _ = json.Marshal(t.OutputSchema)
		}
		out = append(out, ti)
	}
	return out
}

// identOf is name with every byte that is not a letter, digit or _ made
// _, and a leading _ when it starts with a digit or is a Python keyword:
// what code can write after "tools.<upstream>.".
func identOf(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	id := string(b)
	if id == "" || id[0] >= '0' && id[0] <= '9' || pythonKeywords[id] {
		id = "_" + id
	}
	return id
}

var pythonKeywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true, "async": true,
	"await": true, "break": true, "class": true, "continue": true, "def": true, "del": true, "elif": true,
	"else": true, "except": true, "finally": true, "for": true, "from": true, "global": true, "if": true,
	"import": true, "in": true, "is": true, "lambda": true, "nonlocal": true, "not": true, "or": true,
	"pass": true, "raise": true, "return": true, "try": true, "while": true, "with": true, "yield": true,
}
