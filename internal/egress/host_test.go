package egress

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		url, host string
		port      int
		refused   string // part of the refusal; "" when it parses
	}{
		{"https://API.Example.COM./v1?q=1", "api.example.com", 443, ""},
		{"http://example.com:8080/", "example.com", 8080, ""},
		{"HTTP://example.com", "example.com", 80, ""},
		{"http://127.0.0.1:9/", "127.0.0.1", 9, ""},
		// The URL Standard's IPv4 spellings are the same address.
		{"http://2130706433/", "127.0.0.1", 80, ""},
		{"http://0x7f.1/", "127.0.0.1", 80, ""},
		{"http://0177.0.0.1/", "127.0.0.1", 80, ""},
		{"http://127.1/", "127.0.0.1", 80, ""},
		{"http://0x7F000001/", "127.0.0.1", 80, ""},
		{"http://%31%32%37.0.0.1/", "", 0, "invalid URL"},
		{"http://[::1]:8080/", "::1", 8080, ""},
		{"http://[::ffff:127.0.0.1]/", "127.0.0.1", 80, ""},
		{"http://[::ffff:7f00:1]/", "127.0.0.1", 80, ""},
		{"http://[0:0:0:0:0:0:0:1]/", "::1", 80, ""},
		{"https://xn--bcher-kva.example/", "xn--bcher-kva.example", 443, ""},
		{"http://256.0.0.1/", "", 0, "not a valid IPv4 address"},
		{"http://1.2.3.4.5/", "", 0, "not a valid IPv4 address"},
		{"http://0x100000000/", "", 0, "not a valid IPv4 address"},
		{"http://08.0.0.1/", "", 0, "not a valid IPv4 address"},
		{"http://[fe80::1%25eth0]/", "", 0, "zone"},
		{"https://bücher.example/", "", 0, "Punycode"},
		{"file:///etc/passwd", "", 0, "http and https URLs only"},
		{"data:text/plain,hello", "", 0, "http and https URLs only"},
		{"javascript:alert(1)", "", 0, "http and https URLs only"},
		{"ftp://example.com/", "", 0, "http and https URLs only"},
		{"gopher://127.0.0.1:25/", "", 0, "http and https URLs only"},
		{"/relative", "", 0, "relative URL"},
		{"https://user:pass@example.com/", "", 0, "credentials"},
		{"https://user@example.com/", "", 0, "credentials"},
		{"http://example.com:0/", "", 0, "not a port"},
		{"http://example.com:99999/", "", 0, "not a port"},
		{"http://exa mple.com/", "", 0, "invalid URL"},
		{"http://example.com\r\nHost: evil/", "", 0, "invalid URL"},
		{"http:///path", "", 0, "without a host"},
		{"http://a..b/", "", 0, "not a valid host name"},
		{"http://" + strings.Repeat("a", 64) + ".com/", "", 0, "not a valid host name"},
		{"https://example.com/" + strings.Repeat("x", maxURLBytes), "", 0, "longer than"},
	} {
		_, tg, err := parseTarget(tc.url)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%.60q: refused: %s", tc.url, err.Message)
		case tc.refused == "" && (tg.host != tc.host || tg.port != tc.port):
			t.Errorf("%.60q: host %q port %d, want %q %d", tc.url, tg.host, tg.port, tc.host, tc.port)
		case tc.refused != "" && err == nil:
			t.Errorf("%.60q: parsed as %q; want a refusal", tc.url, tg.host)
		case tc.refused != "" && !strings.Contains(err.Message, tc.refused):
			t.Errorf("%.60q: refusal %q does not say %q", tc.url, err.Message, tc.refused)
		case err != nil && (err.Kind != KindRefused || strings.Contains(err.Message, "passwd") || strings.Contains(err.Message, "pass@")):
			t.Errorf("%.60q: refusal %+v", tc.url, err)
		}
	}
}

func TestPatterns(t *testing.T) {
	tg := func(s string) target {
		t.Helper()
		_, tg, err := parseTarget(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		return tg
	}
	for _, tc := range []struct {
		pattern string
		allows  []string
		refuses []string
	}{
		{"api.example.com", []string{"https://api.example.com/x", "https://API.example.com./"},
			[]string{"http://api.example.com/", "https://api.example.com:8443/", "https://example.com/", "https://x.api.example.com/", "https://api.example.com.evil/"}},
		{"*.example.com", []string{"https://a.example.com/", "https://a.b.example.com/"},
			[]string{"https://example.com/", "https://aexample.com/", "http://a.example.com/"}},
		{"http://example.com", []string{"http://example.com/", "https://example.com/"}, []string{"http://example.com:8080/"}},
		{"example.com:8443", []string{"https://example.com:8443/"}, []string{"https://example.com/"}},
		{"example.com:*", []string{"https://example.com:1/", "https://example.com/"}, []string{"http://example.com/"}},
		{"*", []string{"https://anything.example/", "https://localhost/"}, []string{"https://127.0.0.1/", "https://[::1]/", "http://x.example/"}},
		// An IP literal is allowed only as itself, whatever its spelling in the URL.
		{"http://127.0.0.1:8080", []string{"http://127.0.0.1:8080/", "http://2130706433:8080/", "http://[::ffff:127.0.0.1]:8080/"},
			[]string{"http://localhost:8080/", "http://127.0.0.2:8080/", "http://127.0.0.1/"}},
		{"[::1]:8443", []string{"https://[::1]:8443/"}, []string{"https://[::2]:8443/", "https://localhost:8443/", "https://127.0.0.1:8443/"}},
	} {
		p, err := parsePattern(tc.pattern)
		if err != nil {
			t.Fatalf("%q: %v", tc.pattern, err)
		}
		for _, u := range tc.allows {
			if !p.matches(tg(u)) {
				t.Errorf("%q does not allow %s", tc.pattern, u)
			}
		}
		for _, u := range tc.refuses {
			if p.matches(tg(u)) {
				t.Errorf("%q allows %s", tc.pattern, u)
			}
		}
	}
	for _, bad := range []string{"", "ftp://example.com", "example.com/path", "example.com?x", "user@example.com", "::1", "[::1",
		"[fe80::1%eth0]", "1.2.3", "010.0.0.1", "0x7f.0.0.1", "*.1.2", "example.com:0", "example.com:x", "ex ample.com", "*.",
		"bücher.example", "[::1]x"} {
		if _, err := parsePattern(bad); err == nil {
			t.Errorf("%q: accepted as a pattern", bad)
		}
	}
}

func TestLiterals(t *testing.T) {
	ps, err := parsePatterns([]string{"api.example.com", "http://127.0.0.1:8080", "[::1]:9", "[::ffff:10.0.0.1]"})
	if err != nil {
		t.Fatal(err)
	}
	got := ps.literals()
	for _, a := range []string{"127.0.0.1", "::1", "10.0.0.1"} {
		if !got[netip.MustParseAddr(a)] {
			t.Errorf("%s is not among the literals %v", a, got)
		}
	}
	if len(got) != 3 {
		t.Errorf("literals %v", got)
	}
}

// FuzzTarget: any URL either parses to a canonical host that parses to
// itself again, or is refused with a message that quotes no path or query.
func FuzzTarget(f *testing.F) {
	for _, s := range []string{"https://api.example.com/v1?q=1", "http://2130706433/", "http://[::ffff:127.0.0.1]:80/", "file:///x",
		"http://0x7f.1/", "https://a:b@c/", "http://[fe80::1%25x]/", "http://%31.2.3.4/", "https://xn--bcher-kva.example"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, tg, err := parseTarget(s)
		if err != nil {
			if err.Kind != KindRefused || err.Message == "" {
				t.Fatalf("%q: %+v", s, err)
			}
			return
		}
		if u == nil || (tg.scheme != "http" && tg.scheme != "https") || tg.port < 1 || tg.port > 65535 {
			t.Fatalf("%q: %+v", s, tg)
		}
		again, why := canonicalHost(tg.host)
		if why != "" || again != tg.host {
			t.Fatalf("%q: canonical host %q is not canonical again (%q, %s)", s, tg.host, again, why)
		}
		if a, err := netip.ParseAddr(tg.host); err == nil && (a != tg.ip || a.Is4In6()) {
			t.Fatalf("%q: ip %v for host %q", s, tg.ip, tg.host)
		}
		if tg.ip.IsValid() && tg.ip.String() != tg.host {
			t.Fatalf("%q: ip %v host %q", s, tg.ip, tg.host)
		}
	})
}

// FuzzPattern: an accepted pattern matches its own host, on its port.
func FuzzPattern(f *testing.F) {
	for _, s := range []string{"api.example.com", "*.example.com:8443", "http://127.0.0.1:8080", "[::1]:*", "*", "https://x.y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parsePattern(s)
		if err != nil {
			return
		}
		if p.any || p.suffix != "" {
			return
		}
		tg := target{scheme: "https", host: p.host, ip: p.ip, port: 443}
		if p.port > 0 {
			tg.port = p.port
		}
		if !p.matches(tg) {
			t.Fatalf("%q does not match its own host %+v", s, tg)
		}
		if p.ip.IsValid() && p.ip.Is4In6() {
			t.Fatalf("%q: a mapped address kept", s)
		}
	})
}
