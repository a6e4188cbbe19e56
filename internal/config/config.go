// Package config loads execd's TOML configuration. It is parsed once at
// start, validated, and read-only afterwards. Every key, with its default,
// is documented in config.toml.example at the repository root.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Duration is a time.Duration written as a Go duration string ("30s", "10m").
type Duration struct{ time.Duration }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("not a duration (use e.g. \"30s\", \"10m\"): %q", b)
	}
	d.Duration = v
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Config is the whole configuration. Zero values never appear after Load:
// defaults are filled in first and the file overrides them.
type Config struct {
	Server    Server    `toml:"server"`
	Protocol  Protocol  `toml:"protocol"`
	Limits    Limits    `toml:"limits"`
	Workspace Workspace `toml:"workspace"`
	Sandbox   Sandbox   `toml:"sandbox"`
	Log       Log       `toml:"log"`
	Cluster   Cluster   `toml:"cluster"`
	Network   Network   `toml:"network"`
	Packages  Packages  `toml:"packages"`
	// Upstreams are the MCP servers sandboxed code may call ("code mode").
	Upstreams []Upstream `toml:"upstream"`
	CodeMode  CodeMode   `toml:"code_mode"`
}

// Server is the HTTP listener.
type Server struct {
	Listen            string   `toml:"listen"`
	Path              string   `toml:"path"`
	AllowedOrigins    []string `toml:"allowed_origins"`
	AuthTokensFile    string   `toml:"auth_tokens_file"`
	MaxBodyBytes      int64    `toml:"max_body_bytes"`
	MaxStreams        int      `toml:"max_streams_per_principal"`
	ReadHeaderTimeout Duration `toml:"read_header_timeout"`
	ReadTimeout       Duration `toml:"read_timeout"`
	ShutdownGrace     Duration `toml:"shutdown_grace"`
	AdminListen       string   `toml:"admin_listen"`
}

// Protocol holds MCP behaviour choices.
type Protocol struct {
	CancelOnDisconnect bool     `toml:"cancel_on_disconnect"`
	ProgressHeartbeat  Duration `toml:"progress_heartbeat"`
	SessionIdleTTL     Duration `toml:"session_idle_ttl"`
	InputTimeout       Duration `toml:"input_timeout"`
	// TaskAfter: a call that has run this long becomes a task, for a client
	// that declared the tasks extension; 0 means never.
	TaskAfter Duration `toml:"task_after"`
	// TaskTTL is how long a task's record is kept after it finished.
	TaskTTL Duration `toml:"task_ttl"`
	// MaxTasksPerPrincipal caps the task records one principal has.
	MaxTasksPerPrincipal int `toml:"max_tasks_per_principal"`
	// MaxWaitingInputsPerPrincipal caps one principal's 2026-07-28 runs
	// parked waiting for input; 0 means unlimited.
	MaxWaitingInputsPerPrincipal int `toml:"max_waiting_inputs_per_principal"`
}

// Limits bound what one run may use.
type Limits struct {
	RequestTimeout    Duration `toml:"request_timeout"`
	MaxOutputBytes    int      `toml:"max_output_bytes"`
	MaxMemoryMiB      int      `toml:"max_memory_mib"`
	MaxTotalMemoryMiB int      `toml:"max_total_memory_mib"`
	// MaxMemoryPerPrincipalMiB: 0 means derived (see config.toml.example).
	MaxMemoryPerPrincipalMiB int `toml:"max_memory_per_principal_mib"`
	MaxConcurrentRuns        int `toml:"max_concurrent_runs"`
	// MaxRunsPerPrincipal: 0 means max_concurrent_runs.
	MaxRunsPerPrincipal int `toml:"max_runs_per_principal"`
	MaxImageBytes       int `toml:"max_image_bytes"`
	MaxImages           int `toml:"max_images"`
	MaxInputAnswerBytes int `toml:"max_input_answer_bytes"`
}

// Workspace configures the workspace registry.
type Workspace struct {
	DataDir        string   `toml:"data_dir"`
	HibernateAfter Duration `toml:"hibernate_after"`
	IdleTTL        Duration `toml:"idle_ttl"`
	MaxWorkspaces  int      `toml:"max_workspaces"`
	MaxDiskMiB     int      `toml:"max_disk_mib"`
	// MaxPrincipalDiskMiB and MaxWorkspacesPerPrincipal: 0 means derived,
	// -1 unlimited (see config.toml.example).
	MaxPrincipalDiskMiB       int `toml:"max_principal_disk_mib"`
	MaxWorkspacesPerPrincipal int `toml:"max_workspaces_per_principal"`
}

// Sandbox configures the WebAssembly runtime.
type Sandbox struct {
	StrictTermination bool     `toml:"strict_termination"`
	CacheDir          string   `toml:"cache_dir"`
	InterruptGrace    Duration `toml:"interrupt_grace"`
	PythonPreload     []string `toml:"python_preload"`
	SpareInstances    int      `toml:"spare_instances"`
}

// Cluster configures an instance among several behind one load balancer
// (deploy/nginx). All zero: a single instance.
type Cluster struct {
	// Peers are every instance's address exactly as the balancer's
	// upstream lists them; Self is this one's. Ids of new workspaces are
	// then minted so that the balancer's hash sends them back here.
	Peers []string `toml:"peers"`
	Self  string   `toml:"self"`
	// SessionKeyFile holds a secret shared by every instance: legacy
	// session ids are signed with it, so that any instance serves any
	// session.
	SessionKeyFile string `toml:"session_key_file"`
	// SharedStorage: workspace.data_dir is shared by every instance; each
	// call locks its workspace and saves it to disk before unlocking.
	SharedStorage bool `toml:"shared_storage"`
}

// Network is what sandboxed code may reach (internal/egress). With an empty
// Allow, and no principal of its own listing any, there is no network.
type Network struct {
	// Allow lists the destinations: [http://]host[:port] with host *,
	// *.domain, a name or an IP literal.
	Allow   []string `toml:"allow"`
	Secrets []Secret `toml:"secrets"`
	// Principals replace Allow and Secrets for a principal's workspaces.
	Principals            map[string]NetworkPrincipal `toml:"principals"`
	MaxRequestsPerRun     int                         `toml:"max_requests_per_run"`
	MaxConcurrentRequests int                         `toml:"max_concurrent_requests"`
	MaxRequestBytes       int64                       `toml:"max_request_bytes"`
	MaxResponseBytes      int64                       `toml:"max_response_bytes"`
	RequestTimeout        Duration                    `toml:"request_timeout"`
	// BytesPerMinute is each principal's budget, in and out; 0: none.
	BytesPerMinute int64    `toml:"bytes_per_minute"`
	MaxRedirects   int      `toml:"max_redirects"`
	CAFile         string   `toml:"ca_file"`
	MetricsHosts   []string `toml:"metrics_hosts"`
}

// Secret is one [[network.secrets]] entry: a value the code holds only as
// a placeholder, sent only to Hosts.
type Secret struct {
	Name      string   `toml:"name"`
	ValueFile string   `toml:"value_file"`
	Env       string   `toml:"env"`
	Hosts     []string `toml:"hosts"`
	Header    string   `toml:"header"`
}

// NetworkPrincipal is [network.principals.<name>].
type NetworkPrincipal struct {
	Allow   []string `toml:"allow"`
	Secrets []Secret `toml:"secrets"`
}

// Packages is packages on demand (internal/packages): npm packages and
// pure-Python wheels the host fetches with its own HTTP client, never
// through [network], verifies and unpacks into a cache under
// sandbox.cache_dir that every workspace reads.
type Packages struct {
	NPM         bool   `toml:"npm"`
	Python      bool   `toml:"python"`
	NPMRegistry string `toml:"npm_registry"`
	PythonIndex string `toml:"python_index"`
	// Allow and Deny are name patterns ("*", "@scope/*", "npm:left-pad",
	// "pypi:requests"); a package must match an Allow entry and no Deny
	// entry, dependencies included.
	Allow           []string `toml:"allow"`
	Deny            []string `toml:"deny"`
	MaxPackageBytes int64    `toml:"max_package_bytes"`
	MaxTotalBytes   int64    `toml:"max_total_bytes"`
	// MaxCacheBytes bounds the cache: past it, entries no workspace's lock
	// (nor a checkpoint's) uses are removed, least recently used first.
	// 0: no limit.
	MaxCacheBytes int64    `toml:"max_cache_bytes"`
	FetchTimeout  Duration `toml:"fetch_timeout"`
}

// Log configures the zap logger (always stderr).
type Log struct {
	Level  string `toml:"level"`
	Format string `toml:"format"`
}

// Default returns the built-in configuration: what execd runs with when no
// file is given.
func Default() Config {
	return Config{
		Server: Server{
			Listen:            "127.0.0.1:8765",
			Path:              "/mcp",
			AllowedOrigins:    []string{},
			MaxBodyBytes:      8 << 20,
			MaxStreams:        64,
			ReadHeaderTimeout: Duration{10 * time.Second},
			ReadTimeout:       Duration{30 * time.Second},
			ShutdownGrace:     Duration{10 * time.Second},
		},
		Protocol: Protocol{
			ProgressHeartbeat:            Duration{10 * time.Second},
			SessionIdleTTL:               Duration{time.Hour},
			InputTimeout:                 Duration{5 * time.Minute},
			TaskAfter:                    Duration{5 * time.Second},
			TaskTTL:                      Duration{time.Hour},
			MaxTasksPerPrincipal:         64,
			MaxWaitingInputsPerPrincipal: 16,
		},
		Limits: Limits{
			MaxOutputBytes:      64 << 10,
			MaxMemoryMiB:        256,
			MaxConcurrentRuns:   runtime.NumCPU(),
			MaxImageBytes:       2 << 20,
			MaxImages:           8,
			MaxInputAnswerBytes: 4 << 20,
		},
		Workspace: Workspace{
			DataDir:        defaultStateDir(),
			HibernateAfter: Duration{5 * time.Minute},
			MaxWorkspaces:  256,
			MaxDiskMiB:     1024,
		},
		Sandbox: Sandbox{
			StrictTermination: true,
			CacheDir:          defaultCacheDir(),
			InterruptGrace:    Duration{2 * time.Second},
			PythonPreload: []string{
				"json", "re", "datetime", "collections", "decimal", "statistics", "csv",
				"dataclasses", "uuid", "random", "math", "itertools", "functools", "typing",
				"traceback",
			},
			SpareInstances: 2,
		},
		Log:     Log{Level: "info", Format: "console"},
		Cluster: Cluster{Peers: []string{}},
		Network: Network{
			Allow:                 []string{},
			MaxRequestsPerRun:     500,
			MaxConcurrentRequests: 16,
			MaxRequestBytes:       8 << 20,
			MaxResponseBytes:      16 << 20,
			RequestTimeout:        Duration{30 * time.Second},
			BytesPerMinute:        256 << 20,
			MaxRedirects:          5,
			MetricsHosts:          []string{},
		},
		Packages: Packages{
			NPM:             true,
			Python:          true,
			NPMRegistry:     "https://registry.npmjs.org",
			PythonIndex:     "https://pypi.org/simple",
			Allow:           []string{"*"},
			Deny:            []string{},
			MaxPackageBytes: 64 << 20,
			MaxTotalBytes:   512 << 20,
			MaxCacheBytes:   4 << 30,
			FetchTimeout:    Duration{60 * time.Second},
		},
		CodeMode: CodeMode{DescriptionBudget: 4096},
	}
}

func defaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "execd")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "execd")
	}
	return filepath.Join(os.TempDir(), "execd-state")
}

func defaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "execd", "wazero")
	}
	return filepath.Join(os.TempDir(), "execd-cache")
}

// Load reads the TOML file at path over the defaults and validates the
// result. An empty path means defaults only. Unknown keys are an error that
// names them.
func Load(path string) (Config, error) {
	cfg := Default()
	if path == "" {
		return cfg, cfg.Validate()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return Parse(string(b))
}

// Parse decodes TOML text over the defaults and validates the result.
func Parse(text string) (Config, error) {
	cfg := Default()
	md, err := toml.Decode(text, &cfg)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return Config{}, fmt.Errorf("config: %s", describeParseError(pe, text))
		}
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return Config{}, fmt.Errorf("config: unknown key %s", strings.Join(keys, ", "))
	}
	cfg.fillUpstreamDefaults()
	return cfg, cfg.Validate()
}

// Validate checks every key's range and names the key on failure.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...)))
	}
	if _, _, err := net.SplitHostPort(c.Server.Listen); err != nil {
		bad("server.listen", "want host:port, got %q", c.Server.Listen)
	}
	if !strings.HasPrefix(c.Server.Path, "/") {
		bad("server.path", "must start with /, got %q", c.Server.Path)
	}
	if c.Server.AdminListen != "" {
		if _, port, err := net.SplitHostPort(c.Server.AdminListen); err != nil {
			bad("server.admin_listen", "want host:port or empty, got %q", c.Server.AdminListen)
		} else if c.Server.AdminListen == c.Server.Listen && port != "0" {
			bad("server.admin_listen", "must differ from server.listen (%q): the admin endpoints are never served on the MCP listener", c.Server.Listen)
		}
	}
	for _, o := range c.Server.AllowedOrigins {
		if o != "*" && !strings.Contains(o, "://") {
			bad("server.allowed_origins", "%q is not an origin (scheme://host[:port]) or *", o)
		}
	}
	if c.Server.MaxBodyBytes < 1024 {
		bad("server.max_body_bytes", "must be at least 1024, got %d", c.Server.MaxBodyBytes)
	}
	if c.Server.MaxStreams < 0 {
		bad("server.max_streams_per_principal", "must not be negative (0 = unlimited), got %d", c.Server.MaxStreams)
	}
	nonNeg := func(key string, d Duration) {
		if d.Duration < 0 {
			bad(key, "must not be negative")
		}
	}
	nonNeg("server.read_header_timeout", c.Server.ReadHeaderTimeout)
	nonNeg("server.read_timeout", c.Server.ReadTimeout)
	nonNeg("server.shutdown_grace", c.Server.ShutdownGrace)
	nonNeg("protocol.session_idle_ttl", c.Protocol.SessionIdleTTL)
	nonNeg("limits.request_timeout", c.Limits.RequestTimeout)
	nonNeg("workspace.idle_ttl", c.Workspace.IdleTTL)
	nonNeg("workspace.hibernate_after", c.Workspace.HibernateAfter)
	nonNeg("sandbox.interrupt_grace", c.Sandbox.InterruptGrace)
	if c.Protocol.ProgressHeartbeat.Duration < 100*time.Millisecond || c.Protocol.ProgressHeartbeat.Duration > 30*time.Second {
		bad("protocol.progress_heartbeat", "must be between 100ms and 30s, got %s", c.Protocol.ProgressHeartbeat)
	}
	if d := c.Protocol.InputTimeout.Duration; d < time.Second || d > 24*time.Hour {
		bad("protocol.input_timeout", "must be between 1s and 24h, got %s", c.Protocol.InputTimeout)
	}
	if d := c.Protocol.TaskAfter.Duration; d != 0 && (d < 10*time.Millisecond || d > time.Hour) {
		bad("protocol.task_after", "must be 0s (calls never become tasks) or between 10ms and 1h, got %s", c.Protocol.TaskAfter)
	}
	if d := c.Protocol.TaskTTL.Duration; d < time.Second || d > 30*24*time.Hour {
		bad("protocol.task_ttl", "must be between 1s and 720h (30 days), got %s", c.Protocol.TaskTTL)
	}
	if n := c.Protocol.MaxWaitingInputsPerPrincipal; n < 0 {
		bad("protocol.max_waiting_inputs_per_principal", "must not be negative (0 = unlimited), got %d", n)
	}
	if n := c.Protocol.MaxTasksPerPrincipal; n < 1 || n > 100000 {
		bad("protocol.max_tasks_per_principal", "must be between 1 and 100000, got %d", n)
	}
	if n := c.Limits.MaxImageBytes; n < 1024 || n > 64<<20 {
		bad("limits.max_image_bytes", "must be between 1024 and 67108864 (64 MiB), got %d", n)
	}
	if n := c.Limits.MaxImages; n < 1 || n > 100 {
		bad("limits.max_images", "must be between 1 and 100, got %d", n)
	}
	if n := c.Limits.MaxInputAnswerBytes; n < 1024 || n > 64<<20 {
		bad("limits.max_input_answer_bytes", "must be between 1024 and 67108864 (64 MiB), got %d", n)
	}
	if c.Limits.MaxOutputBytes < 1024 {
		bad("limits.max_output_bytes", "must be at least 1024, got %d", c.Limits.MaxOutputBytes)
	}
	if c.Limits.MaxMemoryMiB < 32 || c.Limits.MaxMemoryMiB > 4095 {
		bad("limits.max_memory_mib", "must be between 32 and 4095, got %d", c.Limits.MaxMemoryMiB)
	}
	if n := c.Limits.MaxMemoryPerPrincipalMiB; n != 0 && n < 16 {
		bad("limits.max_memory_per_principal_mib", "must be 0 (derived from the memory budget) or at least 16, got %d", n)
	}
	if c.Limits.MaxTotalMemoryMiB != 0 && c.Limits.MaxTotalMemoryMiB < 64 {
		bad("limits.max_total_memory_mib", "must be 0 (derived from the machine) or at least 64, got %d", c.Limits.MaxTotalMemoryMiB)
	}
	if c.Limits.MaxConcurrentRuns < 1 {
		bad("limits.max_concurrent_runs", "must be at least 1, got %d", c.Limits.MaxConcurrentRuns)
	}
	if n := c.Sandbox.SpareInstances; n < 0 || n > 64 {
		bad("sandbox.spare_instances", "must be between 0 (none) and 64, got %d", n)
	}
	for _, m := range c.Sandbox.PythonPreload {
		if !pythonModule.MatchString(m) {
			bad("sandbox.python_preload", "%q is not a Python module name (e.g. \"json\", \"os.path\")", m)
		}
	}
	if n := c.Limits.MaxRunsPerPrincipal; n < 0 || n > c.Limits.MaxConcurrentRuns {
		bad("limits.max_runs_per_principal", "must be between 0 (= max_concurrent_runs) and max_concurrent_runs (%d), got %d", c.Limits.MaxConcurrentRuns, n)
	}
	if c.Workspace.DataDir == "" {
		bad("workspace.data_dir", "must not be empty")
	}
	if c.Workspace.MaxWorkspaces < 1 {
		bad("workspace.max_workspaces", "must be at least 1, got %d", c.Workspace.MaxWorkspaces)
	}
	if c.Workspace.MaxDiskMiB < 0 {
		bad("workspace.max_disk_mib", "must not be negative (0 = unlimited), got %d", c.Workspace.MaxDiskMiB)
	}
	if c.Workspace.MaxPrincipalDiskMiB < -1 {
		bad("workspace.max_principal_disk_mib", "must be -1 (unlimited), 0 (derived) or positive, got %d", c.Workspace.MaxPrincipalDiskMiB)
	}
	if c.Workspace.MaxWorkspacesPerPrincipal < -1 {
		bad("workspace.max_workspaces_per_principal", "must be -1 (unlimited), 0 (derived) or positive, got %d", c.Workspace.MaxWorkspacesPerPrincipal)
	}
	if len(c.Cluster.Peers) > 0 {
		seen := map[string]bool{}
		for _, p := range c.Cluster.Peers {
			if p == "" || seen[p] {
				bad("cluster.peers", "%q is empty or listed twice", p)
			}
			seen[p] = true
		}
		if !seen[c.Cluster.Self] {
			bad("cluster.self", "must be one of cluster.peers %q, got %q", c.Cluster.Peers, c.Cluster.Self)
		}
		if c.Cluster.SessionKeyFile == "" {
			bad("cluster.session_key_file", "must be set with cluster.peers: legacy sessions must work on every instance")
		}
	} else if c.Cluster.Self != "" {
		bad("cluster.self", "is set without cluster.peers")
	}
	c.validateNetwork(bad)
	c.validatePackages(bad)
	c.validateUpstreams(bad)
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "want debug, info, warn or error, got %q", c.Log.Level)
	}
	switch c.Log.Format {
	case "json", "console":
	default:
		bad("log.format", "want json or console, got %q", c.Log.Format)
	}
	return errors.Join(errs...)
}

// pythonModule is a dotted Python module name.
var pythonModule = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// describeParseError is the TOML syntax error with its line and a caret
// under the fault when the position is usable. toml's ErrorWithPosition
// indexes the input by line and panics on the line 0 it reports for some
// inputs (FuzzParse found `"` followed by CRLF); then, or on any other
// panic in it, the plain message is used.
func describeParseError(pe toml.ParseError, text string) (msg string) {
	if pe.Position.Line < 1 || pe.Position.Line > strings.Count(text, "\n")+1 {
		return pe.Error()
	}
	defer func() {
		if recover() != nil {
			msg = pe.Error()
		}
	}()
	return pe.ErrorWithPosition()
}

// validateNetwork checks [network]'s ranges and shapes; the allow lists'
// patterns and the secrets' values are checked where they are read, at
// start (internal/egress), with the key's name too.
func (c *Config) validateNetwork(bad func(key, format string, args ...any)) {
	n := &c.Network
	if v := n.MaxRequestsPerRun; v < 1 || v > 1_000_000 {
		bad("network.max_requests_per_run", "must be between 1 and 1000000, got %d", v)
	}
	if v := n.MaxConcurrentRequests; v < 1 || v > 256 {
		bad("network.max_concurrent_requests", "must be between 1 and 256, got %d", v)
	}
	if v := n.MaxRequestBytes; v < 1024 || v > 1<<30 {
		bad("network.max_request_bytes", "must be between 1024 and 1073741824 (1 GiB), got %d", v)
	}
	if v := n.MaxResponseBytes; v < 1024 || v > 1<<30 {
		bad("network.max_response_bytes", "must be between 1024 and 1073741824 (1 GiB), got %d", v)
	}
	if d := n.RequestTimeout.Duration; d < 100*time.Millisecond || d > time.Hour {
		bad("network.request_timeout", "must be between 100ms and 1h, got %s", n.RequestTimeout)
	}
	if v := n.BytesPerMinute; v < 0 {
		bad("network.bytes_per_minute", "must not be negative (0 = no budget), got %d", v)
	}
	if v := n.MaxRedirects; v < 0 || v > 5 {
		bad("network.max_redirects", "must be between 0 and 5, got %d", v)
	}
	for name := range n.Principals {
		if name == "" {
			bad("network.principals", "a principal's name must not be empty")
		}
	}
}

// packagePattern is an allow or deny entry of [packages]: an optional
// ecosystem, then a name in which * stands for any run of characters.
var packagePattern = regexp.MustCompile(`^(npm:|pypi:)?[A-Za-z0-9@/._~*-]+$`)

// validatePackages checks [packages]: the index URLs, the name patterns,
// the sizes and the timeout.
func (c *Config) validatePackages(bad func(key, format string, args ...any)) {
	p := &c.Packages
	for _, u := range []struct{ key, url string }{
		{"packages.npm_registry", p.NPMRegistry}, {"packages.python_index", p.PythonIndex},
	} {
		if msg := checkIndexURL(u.url); msg != "" {
			bad(u.key, "%s, got %q", msg, u.url)
		}
	}
	for _, l := range []struct {
		key      string
		patterns []string
	}{{"packages.allow", p.Allow}, {"packages.deny", p.Deny}} {
		for _, pat := range l.patterns {
			if !packagePattern.MatchString(pat) {
				bad(l.key, "%q is not a package name pattern (e.g. \"*\", \"@scope/*\", \"npm:left-pad\", \"pypi:requests\")", pat)
			}
		}
	}
	if v := p.MaxPackageBytes; v < 1024 || v > 4<<30 {
		bad("packages.max_package_bytes", "must be between 1024 and 4294967296 (4 GiB), got %d", v)
	}
	if v := p.MaxTotalBytes; v < p.MaxPackageBytes || v > 1<<40 {
		bad("packages.max_total_bytes", "must be between packages.max_package_bytes (%d) and 1099511627776 (1 TiB), got %d", p.MaxPackageBytes, v)
	}
	if v := p.MaxCacheBytes; v != 0 && (v < p.MaxTotalBytes || v > 1<<50) {
		bad("packages.max_cache_bytes", "must be 0 (no limit) or between packages.max_total_bytes (%d) and 1125899906842624 (1 PiB), got %d", p.MaxTotalBytes, v)
	}
	if d := p.FetchTimeout.Duration; d < time.Second || d > time.Hour {
		bad("packages.fetch_timeout", "must be between 1s and 1h, got %s", p.FetchTimeout)
	}
}

// checkIndexURL says what is wrong with a registry or index URL, or "".
func checkIndexURL(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
		return "want an http:// or https:// URL"
	case u.User != nil:
		return "must not hold credentials"
	case u.RawQuery != "" || u.Fragment != "":
		return "must not have a query or fragment"
	}
	return ""
}
