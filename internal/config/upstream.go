package config

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Upstream is one [[upstream]] entry: an MCP server of the operator's that
// sandboxed code may call (internal/upstream). Exactly one of Command (a
// server execd starts and speaks to over stdio) and URL (streamable HTTP)
// is set.
type Upstream struct {
	// Name is how code names it: tools.<name>.<tool>(...).
	Name string `toml:"name"`

	// Command is the argv of a stdio server; Env is added to its
	// environment, PassEnv names variables copied from execd's own.
	Command []string          `toml:"command"`
	Env     map[string]string `toml:"env"`
	PassEnv []string          `toml:"pass_env"`

	// URL is a streamable HTTP endpoint; Headers go on every request, and
	// Bearer, when set, is sent as Authorization: Bearer <value>.
	URL     string            `toml:"url"`
	Headers map[string]string `toml:"headers"`
	Bearer  *UpstreamSecret   `toml:"bearer"`

	// Allow and Ask are tool-name patterns (* matches any run of
	// characters): Allow's are called at once, Ask's only once the person
	// agrees; every other tool is refused.
	Allow []string `toml:"allow"`
	Ask   []string `toml:"ask"`
	// Principals may use it; empty: every principal.
	Principals []string `toml:"principals"`

	MaxCallsPerRun int      `toml:"max_calls_per_run"`
	CallTimeout    Duration `toml:"call_timeout"`
	ConnectTimeout Duration `toml:"connect_timeout"`
}

// UpstreamSecret is a value read at start, from a file or from execd's
// environment, as a [[network.secrets]] value is.
type UpstreamSecret struct {
	ValueFile string `toml:"value_file"`
	Env       string `toml:"env"`
}

// CodeMode is [code_mode]: what is common to every upstream.
type CodeMode struct {
	// DescriptionBudget bounds, in bytes, the tools' signatures that
	// execute_code's description carries.
	DescriptionBudget int `toml:"description_budget"`
}

// The defaults of an [[upstream]] entry's keys, filled in for those it
// leaves out (or sets to zero).
const (
	DefaultUpstreamMaxCallsPerRun = 100
	DefaultUpstreamCallTimeout    = 60 * time.Second
	DefaultUpstreamConnectTimeout = 30 * time.Second
)

// fillUpstreamDefaults gives each [[upstream]] the defaults of the keys it
// leaves out: a table in an array has no defaults of its own in TOML.
func (c *Config) fillUpstreamDefaults() {
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		if u.MaxCallsPerRun == 0 {
			u.MaxCallsPerRun = DefaultUpstreamMaxCallsPerRun
		}
		if u.CallTimeout.Duration == 0 {
			u.CallTimeout.Duration = DefaultUpstreamCallTimeout
		}
		if u.ConnectTimeout.Duration == 0 {
			u.ConnectTimeout.Duration = DefaultUpstreamConnectTimeout
		}
	}
}

// upstreamName is an identifier in JavaScript and Python.
var upstreamName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// envName is a POSIX environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedUpstreamNames cannot name an upstream: Python keywords (code
// could not write tools.<name>), and the names the tools object itself
// uses.
var reservedUpstreamNames = map[string]bool{
	"list": true, "False": true, "None": true, "True": true, "and": true, "as": true,
	"assert": true, "async": true, "await": true, "break": true, "class": true,
	"continue": true, "def": true, "del": true, "elif": true, "else": true, "except": true,
	"finally": true, "for": true, "from": true, "global": true, "if": true, "import": true,
	"in": true, "is": true, "lambda": true, "nonlocal": true, "not": true, "or": true,
	"pass": true, "raise": true, "return": true, "try": true, "while": true, "with": true,
	"yield": true,
}

// headersOfTheTransport are set by the MCP transport itself.
var headersOfTheTransport = map[string]bool{
	"accept": true, "content-type": true, "content-length": true, "host": true,
	"mcp-session-id": true, "mcp-protocol-version": true, "last-event-id": true,
	"connection": true, "transfer-encoding": true,
}

// validateUpstreams checks [[upstream]] and [code_mode]; a bearer's value
// is read, and checked, where it is used, at start (internal/upstream).
func (c *Config) validateUpstreams(bad func(key, format string, args ...any)) {
	if v := c.CodeMode.DescriptionBudget; v < 256 || v > 65536 {
		bad("code_mode.description_budget", "must be between 256 and 65536, got %d", v)
	}
	seen := map[string]bool{}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		at := fmt.Sprintf("upstream[%d]", i)
		if !upstreamName.MatchString(u.Name) || reservedUpstreamNames[u.Name] {
			bad(at+".name", "%q must be letters, digits and _, not starting with a digit (at most 64), and not list or a Python keyword: code calls tools.<name>.<tool>()", u.Name)
		} else {
			if seen[u.Name] {
				bad(at+".name", "%q is used twice", u.Name)
			}
			seen[u.Name] = true
			at = fmt.Sprintf("%s (%s)", at, u.Name)
		}
		switch {
		case (len(u.Command) == 0) == (u.URL == ""):
			bad(at, "set exactly one of command (a stdio server) and url (streamable HTTP)")
		case len(u.Command) > 0:
			if u.Command[0] == "" {
				bad(at+".command", "the program (its first element) must not be empty")
			}
			for _, a := range u.Command {
				if strings.ContainsRune(a, 0) {
					bad(at+".command", "an argument holds a NUL byte")
				}
			}
			if len(u.Headers) > 0 || u.Bearer != nil {
				bad(at, "headers and bearer go with url, not with command (give a stdio server its secrets in env or pass_env)")
			}
		default:
			p, err := url.Parse(u.URL)
			if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
				bad(at+".url", "want an http:// or https:// URL, got %q", u.URL)
			} else if p.User != nil {
				bad(at+".url", "must not hold credentials; use bearer or headers")
			}
			if len(u.Env) > 0 || len(u.PassEnv) > 0 {
				bad(at, "env and pass_env go with command, not with url")
			}
		}
		for k, v := range u.Env {
			if !envName.MatchString(k) || strings.ContainsRune(v, 0) {
				bad(at+".env", "%q must be a variable name (letters, digits, _) with a value without NUL", k)
			}
		}
		for _, k := range u.PassEnv {
			if !envName.MatchString(k) {
				bad(at+".pass_env", "%q is not a variable name (letters, digits, _)", k)
			}
		}
		for k, v := range u.Headers {
			switch {
			case !headerName(k):
				bad(at+".headers", "%q is not a header name", k)
			case headersOfTheTransport[strings.ToLower(k)]:
				bad(at+".headers", "%s is set by the MCP transport itself", k)
			case strings.EqualFold(k, "authorization") && u.Bearer != nil:
				bad(at+".headers", "Authorization is set by bearer")
			case !headerValue(v):
				bad(at+".headers", "the value of %s holds a control character", k)
			}
		}
		if b := u.Bearer; b != nil && (b.ValueFile == "") == (b.Env == "") {
			bad(at+".bearer", "set exactly one of value_file and env")
		}
		if len(u.Allow) == 0 && len(u.Ask) == 0 {
			bad(at, "lists no tool in allow or ask, so none could be called (allow = [\"*\"] allows every tool)")
		}
		for _, key := range []string{"allow", "ask"} {
			list := u.Allow
			if key == "ask" {
				list = u.Ask
			}
			for _, p := range list {
				if !toolPattern(p) {
					bad(at+"."+key, "%q is not a tool-name pattern (printable characters without spaces, * for any run of them)", p)
				}
			}
		}
		pseen := map[string]bool{}
		for _, p := range u.Principals {
			if p == "" || pseen[p] {
				bad(at+".principals", "%q is empty or listed twice", p)
			}
			pseen[p] = true
		}
		if v := u.MaxCallsPerRun; v < 1 || v > 100_000 {
			bad(at+".max_calls_per_run", "must be between 1 and 100000, got %d", v)
		}
		if d := u.CallTimeout.Duration; d < 100*time.Millisecond || d > time.Hour {
			bad(at+".call_timeout", "must be between 100ms and 1h, got %s", u.CallTimeout)
		}
		if d := u.ConnectTimeout.Duration; d < 100*time.Millisecond || d > 10*time.Minute {
			bad(at+".connect_timeout", "must be between 100ms and 10m, got %s", u.ConnectTimeout)
		}
	}
}

// toolPattern: 1..128 printable ASCII characters without spaces or quotes.
func toolPattern(p string) bool {
	if p == "" || len(p) > 128 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\'' || c == '\\' {
			return false
		}
	}
	return true
}

// headerName: a token (RFC 9110 section 5.6.2).
func headerName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// headerValue: no control character but horizontal tab.
func headerValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
