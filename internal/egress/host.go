package egress

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// target is where one hop of a request goes, in canonical form: what the
// policy matches and what messages, logs and metrics name.
type target struct {
	scheme string     // "http" or "https"
	host   string     // a lower-case DNS name without its trailing dot, or an IP address's text
	ip     netip.Addr // the address when host is an IP literal (IPv4-mapped IPv6 unmapped)
	port   int
}

// defaultPort is the port of scheme when a URL names none.
func defaultPort(scheme string) int {
	if scheme == "http" {
		return 80
	}
	return 443
}

// hostPort is the target as messages name it: the host, with the port when
// it is not the scheme's default, IPv6 in brackets.
func (t target) hostPort() string {
	h := t.host
	if t.ip.Is6() {
		h = "[" + h + "]"
	}
	if t.port != defaultPort(t.scheme) {
		h += ":" + strconv.Itoa(t.port)
	}
	return h
}

// maxURLBytes bounds a request's URL.
const maxURLBytes = 16 << 10

// parseTarget parses a request's URL and canonicalises its host. The
// refusal never quotes the URL: its path and query may carry what the
// logs must not.
func parseTarget(raw string) (*url.URL, target, *Error) {
	var t target
	if len(raw) > maxURLBytes {
		return nil, t, refused(ReasonScheme, "fetch of a URL longer than %d bytes is not allowed", maxURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, t, refused(ReasonScheme, "fetch of an invalid URL is not allowed (%s)", urlErrorReason(err))
	}
	t.scheme = strings.ToLower(u.Scheme)
	if t.scheme != "http" && t.scheme != "https" {
		if t.scheme == "" {
			return nil, t, refused(ReasonScheme, "fetch of a relative URL is not allowed: give the whole URL (https://host/path)")
		}
		return nil, t, refused(ReasonScheme, "fetch of a %s: URL is not allowed: execd fetches http and https URLs only", clip(t.scheme, 24))
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, t, refused(ReasonScheme, "fetch of a %s: URL without a host is not allowed", t.scheme)
	}
	if u.User != nil {
		return nil, t, refused(ReasonScheme, "fetch of a URL with credentials (user:password@host) is not allowed: send them in a header, or have the operator configure a secret (network.secrets)")
	}
	host, why := canonicalHost(u.Hostname())
	if why != "" {
		return nil, t, refused(ReasonScheme, "fetch to %q is not allowed: %s", clip(u.Hostname(), 80), why)
	}
	t.host = host
	if a, err := netip.ParseAddr(host); err == nil {
		t.ip = a
	}
	t.port = defaultPort(t.scheme)
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, t, refused(ReasonScheme, "fetch to %s is not allowed: %q is not a port", host, clip(p, 12))
		}
		t.port = n
	}
	u.Scheme = t.scheme
	u.Fragment, u.RawFragment = "", ""
	return u, t, nil
}

// urlErrorReason is url.Parse's complaint without the URL it quotes.
func urlErrorReason(err error) string {
	if ue, ok := err.(*url.Error); ok {
		err = ue.Err
	}
	msg := err.Error()
	if i := strings.Index(msg, ":"); i >= 0 && strings.HasPrefix(msg, "invalid") {
		msg = msg[:i]
	}
	return clip(msg, 60)
}

// canonicalHost is h as the policy sees it, or why it cannot be fetched:
// an IPv6 literal (no zone) as netip prints it, IPv4-mapped ones as their
// IPv4 address; a name whose last label is a number read as the WHATWG URL
// Standard reads IPv4 (2130706433, 0x7f.1, 0177.0.0.1 are 127.0.0.1, as
// browsers and the guests' URL parser see them); any other name lower-cased,
// its trailing dot dropped, ASCII only.
func canonicalHost(h string) (string, string) {
	if h == "" {
		return "", "the URL has no host"
	}
	if strings.Contains(h, ":") {
		a, err := netip.ParseAddr(h)
		if err != nil {
			return "", "not a valid IPv6 address"
		}
		if a.Zone() != "" {
			return "", "an IPv6 address with a zone cannot be fetched"
		}
		return a.Unmap().String(), ""
	}
	name := strings.ToLower(h)
	name = strings.TrimSuffix(name, ".")
	if endsInNumber(name) {
		a, ok := parseIPv4(name)
		if !ok {
			return "", "not a valid IPv4 address"
		}
		return a.String(), ""
	}
	if why := checkName(name); why != "" {
		return "", why
	}
	return name, ""
}

// checkName says what is wrong with a DNS name, or "".
func checkName(name string) string {
	if name == "" || len(name) > 253 {
		return "not a valid host name"
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return "not a valid host name"
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			case c >= 0x80:
				return "host names beyond ASCII must be written in their Punycode form (xn--…)"
			default:
				return "not a valid host name"
			}
		}
	}
	return ""
}

// endsInNumber is the URL Standard's "ends in a number" of a host.
func endsInNumber(name string) bool {
	last := name
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		last = name[i+1:]
	}
	if last == "" {
		return false
	}
	if strings.Trim(last, "0123456789") == "" {
		return true
	}
	if len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		return strings.Trim(last[2:], "0123456789abcdefABCDEF") == ""
	}
	return false
}

// parseIPv4 is the URL Standard's IPv4 parser: one to four parts, each
// decimal, octal (a leading 0) or hexadecimal (0x); the last part fills
// the bytes the others leave.
func parseIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var nums [4]uint64
	for i, p := range parts {
		n, ok := parseIPv4Number(p)
		if !ok {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	k := len(parts)
	for i := 0; i < k-1; i++ {
		if nums[i] > 255 {
			return netip.Addr{}, false
		}
	}
	if nums[k-1] >= 1<<(8*(5-k)) {
		return netip.Addr{}, false
	}
	v := nums[k-1]
	for i := 0; i < k-1; i++ {
		v += nums[i] << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func parseIPv4Number(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := uint64(10)
	switch {
	case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
		base, p = 16, p[2:]
	case len(p) >= 2 && p[0] == '0':
		base, p = 8, p[1:]
	}
	var v uint64
	for i := 0; i < len(p); i++ {
		var d uint64
		c := p[i]
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		v = v*base + d
		if v > 1<<32 {
			return 0, false
		}
	}
	return v, true
}

// pattern is one entry of an allow list (or of a secret's hosts):
// [http://|https://]host[:port], where host is *, *.domain, a name or an
// IP literal (IPv6 in brackets).
type pattern struct {
	text   string
	any    bool       // "*": every name (not IP literals)
	suffix string     // "*.example.com": ".example.com"
	host   string     // an exact name or IP
	ip     netip.Addr // when host is an IP literal
	http   bool       // written with http://: plain http is allowed too
	port   int        // 0: the scheme's default port; -1: any port
}

// parsePattern reads one allow entry, or says what is wrong with it.
func parsePattern(s string) (pattern, error) {
	p := pattern{text: s}
	rest := strings.ToLower(strings.TrimSpace(s))
	switch {
	case strings.HasPrefix(rest, "http://"):
		p.http, rest = true, rest[len("http://"):]
	case strings.HasPrefix(rest, "https://"):
		rest = rest[len("https://"):]
	case strings.Contains(rest, "://"):
		return p, fmt.Errorf("%q: the scheme must be http:// or https:// (or none, meaning https)", s)
	}
	if rest == "" || strings.ContainsAny(rest, "/?#@ \t") {
		return p, fmt.Errorf("%q: want [http://]host[:port] (no path, query or user), e.g. \"api.example.com\", \"*.example.com:8443\"", s)
	}
	host, port := rest, ""
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return p, fmt.Errorf("%q: an IPv6 address needs its closing ]", s)
		}
		host, port = rest[1:end], rest[end+1:]
		if port != "" && !strings.HasPrefix(port, ":") {
			return p, fmt.Errorf("%q: want [IPv6]:port", s)
		}
		port = strings.TrimPrefix(port, ":")
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return p, fmt.Errorf("%q: not an IPv6 address", s)
		}
		p.ip = a.Unmap()
		p.host = p.ip.String()
	} else {
		if i := strings.LastIndexByte(rest, ':'); i >= 0 {
			host, port = rest[:i], rest[i+1:]
		}
		if strings.Contains(host, ":") {
			return p, fmt.Errorf("%q: write an IPv6 address in brackets ([::1]:8080)", s)
		}
		if host == "*." {
			return p, fmt.Errorf("%q: *. must be followed by a domain name", s)
		}
		host = strings.TrimSuffix(host, ".")
		switch {
		case host == "*":
			p.any = true
		case strings.HasPrefix(host, "*."):
			if why := checkName(host[2:]); why != "" || endsInNumber(host[2:]) {
				return p, fmt.Errorf("%q: *. must be followed by a domain name", s)
			}
			p.suffix = host[1:]
		case endsInNumber(host):
			a, err := netip.ParseAddr(host)
			if err != nil || !a.Is4() {
				return p, fmt.Errorf("%q: not an IPv4 address in dotted decimal (a.b.c.d)", s)
			}
			p.ip, p.host = a, a.String()
		default:
			if why := checkName(host); why != "" {
				return p, fmt.Errorf("%q: %s", s, why)
			}
			p.host = host
		}
	}
	switch port {
	case "":
	case "*":
		p.port = -1
	default:
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return p, fmt.Errorf("%q: the port must be a number from 1 to 65535, or *", s)
		}
		p.port = n
	}
	return p, nil
}

// matchesHost: the pattern names t's host (whatever its scheme and port).
func (p pattern) matchesHost(t target) bool {
	if t.ip.IsValid() {
		return p.ip.IsValid() && p.ip == t.ip
	}
	if p.ip.IsValid() {
		return false
	}
	return p.any || p.host == t.host || (p.suffix != "" && strings.HasSuffix(t.host, p.suffix))
}

// matches: the pattern allows t, scheme and port included.
func (p pattern) matches(t target) bool {
	if !p.matchesHost(t) || (t.scheme == "http" && !p.http) {
		return false
	}
	switch p.port {
	case -1:
		return true
	case 0:
		return t.port == defaultPort(t.scheme)
	}
	return t.port == p.port
}

// patterns is a parsed list.
type patterns []pattern

func parsePatterns(list []string) (patterns, error) {
	out := make(patterns, 0, len(list))
	for _, s := range list {
		p, err := parsePattern(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func (ps patterns) allows(t target) bool {
	for _, p := range ps {
		if p.matches(t) {
			return true
		}
	}
	return false
}

// why says why ps refuses t, for the message: the host is not listed, or
// it is listed for other ports or for https only.
func (ps patterns) why(t target) string {
	hostListed, httpListed := false, false
	for _, p := range ps {
		if p.matchesHost(t) {
			hostListed = true
			httpListed = httpListed || p.http
		}
	}
	switch {
	case !hostListed:
		return ""
	case t.scheme == "http" && !httpListed:
		return "plain http is allowed only where an entry says http://"
	default:
		return "not on this port"
	}
}

// literals are the IP addresses ps names as IP literals: the only special
// addresses (loopback, private…) execd reaches, and only through a URL
// that names them so.
func (ps patterns) literals() map[netip.Addr]bool {
	m := map[netip.Addr]bool{}
	for _, p := range ps {
		if p.ip.IsValid() {
			m[p.ip] = true
		}
	}
	return m
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
