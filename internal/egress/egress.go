// Package egress is the network of sandboxed code: the operator's policy
// ([network] in the configuration) and the HTTP client that applies it.
// Every request a guest makes comes here through the worker's host import
// (sandbox/ABI.md, execd.net_start) as a Request; the Service checks it
// against the allow list of its principal, substitutes the secrets the
// code holds only as placeholders, dials through an address check that
// DNS rebinding cannot pass, follows redirects checking each hop again,
// bounds sizes, times and a per-principal byte budget, and reports each
// request to the log, the observers (metrics, traces) and the status
// page. RATIONALE.md says why it is built this way.
//
// Concurrency contract: a Service and its Sessions are safe for concurrent
// use; a Session's Do may run many requests at once.
package egress

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"execd/internal/config"
)

// Options are what a Service uses besides the configuration. The zero
// value is the daemon's: the system resolver, the process's environment,
// no observer, no log.
type Options struct {
	Log *zap.Logger
	// Observer watches every request (metrics, traces); nil: none.
	Observer Observer
	// Resolver resolves host names; nil: net.DefaultResolver.
	Resolver Resolver
	// LookupEnv reads the environment for secrets' env; nil: os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// DialTimeout bounds each connection attempt; zero: 10s.
	DialTimeout time.Duration
	// RecentPerWorkspace is how many requests the status page keeps per
	// workspace (of the last 256 workspaces that used the network); zero:
	// 20.
	RecentPerWorkspace int
}

// Service is the policy and the HTTP clients of the process.
type Service struct {
	cfg     config.Network
	log     *zap.Logger
	obs     Observer
	def     *policy
	by      map[string]*policy // principals with a policy of their own
	budgets *budgets
	recent  *recentLog
}

// policy is one allow list and its secrets, with the HTTP client that
// dials through its address check. Each has its own connection pool, so
// no connection is shared between policies.
type policy struct {
	allowKey, secretsKey string // config keys, for messages
	allow                patterns
	secrets              secretSet
	client               *http.Client
}

// New builds the Service of the configuration. Its errors name the key at
// fault: an allow entry that is not a pattern, a secret that cannot be
// read, a CA file without certificates.
func New(cfg config.Network, opts Options) (*Service, error) {
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 10 * time.Second
	}
	if opts.RecentPerWorkspace == 0 {
		opts.RecentPerWorkspace = 20
	}
	roots, err := rootPool(cfg.CAFile)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, log: opts.Log, obs: opts.Observer, by: map[string]*policy{},
		recent: newRecentLog(256, opts.RecentPerWorkspace)}
	if cfg.BytesPerMinute > 0 {
		s.budgets = &budgets{perMin: cfg.BytesPerMinute, m: map[string]*budget{}}
	}
	mk := func(allowKey string, allow []string, secretsKey string, secrets []config.Secret) (*policy, error) {
		ps, err := parsePatterns(allow)
		if err != nil {
			return nil, fmt.Errorf("config: %s: %w", allowKey, err)
		}
		ss, err := loadSecrets(secretsKey, secrets, opts.LookupEnv)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		d := &dialer{resolver: opts.Resolver, listed: ps.literals(), timeout: opts.DialTimeout}
		tr := &http.Transport{
			Proxy:                  nil, // never the environment's proxies: the dialer is the only way out
			DialContext:            d.DialContext,
			TLSClientConfig:        &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2:      true,
			MaxIdleConns:           64,
			MaxIdleConnsPerHost:    8,
			IdleConnTimeout:        60 * time.Second,
			TLSHandshakeTimeout:    opts.DialTimeout,
			MaxResponseHeaderBytes: maxResponseHeaderBytes,
		}
		return &policy{allowKey: allowKey, secretsKey: secretsKey, allow: ps, secrets: ss, client: &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}}, nil
	}
	if s.def, err = mk("network.allow", cfg.Allow, "network.secrets", cfg.Secrets); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(cfg.Principals))
	for name := range cfg.Principals {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		pc := cfg.Principals[name]
		key := "network.principals." + name
		if s.by[name], err = mk(key+".allow", pc.Allow, key+".secrets", pc.Secrets); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// maxResponseHeaderBytes bounds a response's headers.
const maxResponseHeaderBytes = 256 << 10

// rootPool is the system's roots plus those of caFile.
func rootPool(caFile string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if caFile == "" {
		return pool, nil
	}
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("config: network.ca_file: %w", err)
	}
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("config: network.ca_file: %s holds no PEM certificate", caFile)
	}
	return pool, nil
}

// Enabled reports whether any principal can reach anything.
func (s *Service) Enabled() bool {
	if len(s.def.allow) > 0 {
		return true
	}
	for _, p := range s.by {
		if len(p.allow) > 0 {
			return true
		}
	}
	return false
}

// MaxConcurrentRequests is network.max_concurrent_requests: how many
// requests one run may have open at once (the worker holds them).
func (s *Service) MaxConcurrentRequests() int { return s.cfg.MaxConcurrentRequests }

// Close closes the idle connections.
func (s *Service) Close() {
	for _, p := range append([]*policy{s.def}, s.policies()...) {
		p.client.CloseIdleConnections()
	}
}

func (s *Service) policies() []*policy {
	out := make([]*policy, 0, len(s.by))
	for _, p := range s.by {
		out = append(out, p)
	}
	return out
}

// Session is the network of one run of one workspace: it counts the run's
// requests against network.max_requests_per_run and tallies the hosts that
// answered. Make one per run.
func (s *Service) Session(principal, workspace string) *Session {
	p := s.by[principal]
	if p == nil {
		p = s.def
	}
	return &Session{s: s, p: p, principal: principal, workspace: workspace}
}

// Session: see Service.Session.
type Session struct {
	s                    *Service
	p                    *policy
	principal, workspace string

	mu        sync.Mutex
	requests  int
	capLogged bool // the refusal for max_requests_per_run was logged once
	reached   map[string]int
	order     []string
}

// HostCount is a host a run's requests reached and how many did.
type HostCount struct {
	Host     string
	Requests int
}

// Reached lists the hosts that answered the session's requests (each hop
// of a redirect counts), in the order first reached.
func (x *Session) Reached() []HostCount {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.order) == 0 {
		return nil
	}
	out := make([]HostCount, 0, len(x.order))
	for _, h := range x.order {
		out = append(out, HostCount{Host: h, Requests: x.reached[h]})
	}
	return out
}

func (x *Session) reach(host string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.reached == nil { // made by the first answer: most runs send no request
		x.reached = map[string]int{}
	}
	if _, ok := x.reached[host]; !ok {
		x.order = append(x.order, host)
	}
	x.reached[host]++
}

// Env is the session's secrets as the code sees them: name and
// placeholder, sorted by name.
func (x *Session) Env() [][2]string { return x.p.secrets.env() }

// MaxRequestBytes is network.max_request_bytes: a body larger than it is
// refused (the worker need not copy it out of the guest).
func (x *Session) MaxRequestBytes() int64 { return x.s.cfg.MaxRequestBytes }

// MaxConcurrentRequests: see Service.MaxConcurrentRequests.
func (x *Session) MaxConcurrentRequests() int { return x.s.cfg.MaxConcurrentRequests }

// Recent lists the workspaces that used the network lately, most recent
// first, each with its last requests, newest first.
func (s *Service) Recent() []WorkspaceRequests { return s.recent.list() }

// errAddress picks the address refusal out of a transport error.
func errAddress(err error) (*addressError, bool) {
	var ae *addressError
	ok := errors.As(err, &ae)
	return ae, ok
}
