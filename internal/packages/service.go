package packages

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"execd/internal/config"
)

// Options are what a Service uses besides the configuration. The zero
// value is the daemon's.
type Options struct {
	Log *zap.Logger
	// TLS is the client's TLS configuration (RootCAs for a mirror with a
	// private CA); nil: the system's roots. Certificates are always
	// verified.
	TLS *tls.Config
	// Client replaces the HTTP client altogether (tests); nil: execd's
	// own, built from TLS.
	Client *http.Client
	// EvictGrace is how long an entry is kept after its last use whatever
	// else (Evict); 0: a minute.
	EvictGrace time.Duration
}

// Service resolves, fetches, verifies and caches packages. It is safe for
// concurrent use; a workspace's calls are expected one at a time, as the
// workspace runs them (its lock is the caller's to store).
type Service struct {
	cfg   config.Packages
	log   *zap.Logger
	fetch *fetcher
	store *store
	allow []namePattern
	deny  []namePattern
	// evictGrace: Options.EvictGrace.
	evictGrace time.Duration
}

// New builds the Service of the configuration, with its cache under
// cacheDir/packages (sandbox.cache_dir).
func New(cfg config.Packages, cacheDir string, opts Options) (*Service, error) {
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	client := opts.Client
	if client == nil {
		client = newClient(opts.TLS)
	}
	st, err := newStore(filepath.Join(cacheDir, "packages"))
	if err != nil {
		return nil, fmt.Errorf("packages: the cache: %w", err)
	}
	s := &Service{
		cfg:        cfg,
		log:        opts.Log,
		fetch:      &fetcher{client: client, timeout: cfg.FetchTimeout.Duration, maxBytes: cfg.MaxPackageBytes},
		store:      st,
		evictGrace: opts.EvictGrace,
	}
	if s.evictGrace <= 0 {
		s.evictGrace = time.Minute
	}
	for _, p := range cfg.Allow {
		s.allow = append(s.allow, parseNamePattern(p))
	}
	for _, p := range cfg.Deny {
		s.deny = append(s.deny, parseNamePattern(p))
	}
	return s, nil
}

// CacheDir is the directory every Dir of a result is relative to
// (<cache_dir>/packages): what a sandbox mounts, read-only.
func (s *Service) CacheDir() string { return s.store.root }

// namePattern is one packages.allow or packages.deny entry.
type namePattern struct {
	ecosystem string // "npm", "pypi" or "" for both
	glob      string
}

func parseNamePattern(p string) namePattern {
	for _, e := range []string{"npm", "pypi"} {
		if rest, ok := strings.CutPrefix(p, e+":"); ok {
			if e == "pypi" {
				rest = normalizePyName(rest)
			}
			return namePattern{e, rest}
		}
	}
	return namePattern{"", p}
}

func (p namePattern) match(ecosystem, name string) bool {
	if p.ecosystem != "" && p.ecosystem != ecosystem {
		return false
	}
	g := p.glob
	if ecosystem == "pypi" && p.ecosystem == "" {
		g = normalizePyName(g)
	}
	return globMatch(g, name)
}

// globMatch matches name against a pattern in which * is any run of
// characters (slashes included) and everything else is itself.
func globMatch(pattern, name string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == name
	}
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	name = name[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(name, mid)
		if i < 0 {
			return false
		}
		name = name[i+len(mid):]
	}
	return len(name) >= len(last) && strings.HasSuffix(name, last)
}

// permit applies packages.allow and packages.deny to one package.
func (s *Service) permit(ecosystem, name, from string) error {
	by := ""
	if from != "" {
		by = " (needed by " + from + ")"
	}
	for _, p := range s.deny {
		if p.match(ecosystem, name) {
			return errorf(CodeDenied, name, "%s%s is refused by packages.deny", name, by)
		}
	}
	for _, p := range s.allow {
		if p.match(ecosystem, name) {
			return nil
		}
	}
	return errorf(CodeDenied, name, "%s%s is not in packages.allow", name, by)
}

// checkTotal refuses a workspace whose packages add up to more than
// packages.max_total_bytes; each cache entry counts once.
func (s *Service) checkTotal(bytes map[string]int64) error {
	var total int64
	for _, n := range bytes {
		total += n
	}
	if total > s.cfg.MaxTotalBytes {
		return errorf(CodeTooLarge, "", "the workspace's packages would take %d bytes, over the %d of packages.max_total_bytes", total, s.cfg.MaxTotalBytes)
	}
	return nil
}
