package egress

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/textproto"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"

	"execd/internal/config"
)

// Secrets the code never sees ([[network.secrets]], config.Secret;
// RATIONALE.md, "How do secrets reach a request and not the code?"). Inside the sandbox a secret is its
// placeholder, __EXECD_SECRET_<NAME>__; the host puts the value in its
// place in the headers and the URL's path and query of requests to the
// secret's hosts, refuses a request that would carry the placeholder (or
// the value) anywhere else, and puts the placeholder back wherever a
// response (headers, body, final URL) contains the value.

const placeholderPrefix = "__EXECD_SECRET_"

// Placeholder is what the code holds in place of the secret called name.
func Placeholder(name string) string { return placeholderPrefix + name + "__" }

// minSecretBytes: shorter values would be found, and redacted, all over
// the responses.
const minSecretBytes = 8

var secretName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

type secret struct {
	name, value, placeholder string
	hosts                    patterns
	header                   string // canonical name of the header to set, or ""
	format                   string // its value, "{value}" standing for the secret
	forms                    []string
}

// secretSet is one policy's secrets.
type secretSet struct {
	list   []*secret         // longest placeholder first: the longest name wins at a position
	redact *strings.Replacer // each form of each value → its placeholder; nil without secrets
}

// loadSecrets reads the values of cfgs; key is the config key of the list
// ("network.secrets") for messages.
func loadSecrets(key string, cfgs []config.Secret, lookupEnv func(string) (string, bool)) (secretSet, error) {
	var ss secretSet
	seen := map[string]bool{}
	var pairs []string
	for i, c := range cfgs {
		at := fmt.Sprintf("%s[%d]", key, i)
		if !secretName.MatchString(c.Name) {
			return ss, fmt.Errorf("%s.name: %q must be letters, digits and _, not starting with a digit (at most 64)", at, c.Name)
		}
		at = fmt.Sprintf("%s (%s)", at, c.Name)
		if seen[c.Name] {
			return ss, fmt.Errorf("%s: the name is used twice", at)
		}
		seen[c.Name] = true
		var value string
		switch {
		case (c.ValueFile == "") == (c.Env == ""):
			return ss, fmt.Errorf("%s: set exactly one of value_file and env", at)
		case c.ValueFile != "":
			b, err := os.ReadFile(c.ValueFile)
			if err != nil {
				return ss, fmt.Errorf("%s.value_file: %w", at, err)
			}
			value = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		default:
			v, ok := lookupEnv(c.Env)
			if !ok {
				return ss, fmt.Errorf("%s.env: the environment variable %s is not set", at, c.Env)
			}
			value = v
		}
		if len(value) < minSecretBytes {
			return ss, fmt.Errorf("%s: the value has %d bytes; a secret needs at least %d (a short value would be redacted all over the responses)", at, len(value), minSecretBytes)
		}
		for j := 0; j < len(value); j++ {
			if value[j] < 0x20 || value[j] == 0x7f {
				return ss, fmt.Errorf("%s: the value holds a control character or a line break (it must fit in a header)", at)
			}
		}
		if strings.Contains(value, placeholderPrefix) {
			return ss, fmt.Errorf("%s: the value contains %s", at, placeholderPrefix)
		}
		hosts, err := parsePatterns(c.Hosts)
		if err != nil {
			return ss, fmt.Errorf("%s.hosts: %w", at, err)
		}
		if len(hosts) == 0 {
			return ss, fmt.Errorf("%s.hosts: list the hosts the secret may be sent to", at)
		}
		s := &secret{name: c.Name, value: value, placeholder: Placeholder(c.Name), hosts: hosts}
		if c.Header != "" {
			name, format, found := strings.Cut(c.Header, ":")
			name, format = strings.TrimSpace(name), strings.TrimSpace(format)
			if !found {
				format = "{value}"
			}
			if !validHeaderName(name) {
				return ss, fmt.Errorf("%s.header: %q is not a header name (want \"X-Api-Key\" or \"Authorization: Bearer {value}\")", at, name)
			}
			if !strings.Contains(format, "{value}") || !validHeaderValue(format) {
				return ss, fmt.Errorf("%s.header: the value must contain {value} and no control character, got %q", at, format)
			}
			s.header, s.format = textproto.CanonicalMIMEHeaderKey(name), format
		}
		s.forms = []string{value}
		for _, f := range []string{url.QueryEscape(value), url.PathEscape(value)} {
			if f != s.forms[len(s.forms)-1] && f != value {
				s.forms = append(s.forms, f)
			}
		}
		for _, f := range s.forms {
			pairs = append(pairs, f, s.placeholder)
		}
		ss.list = append(ss.list, s)
	}
	sort.SliceStable(ss.list, func(i, j int) bool { return len(ss.list[i].placeholder) > len(ss.list[j].placeholder) })
	if len(pairs) > 0 {
		ss.redact = strings.NewReplacer(pairs...)
	}
	return ss, nil
}

// names are the secrets' names and placeholders, sorted by name.
func (ss *secretSet) env() [][2]string {
	out := make([][2]string, 0, len(ss.list))
	for _, s := range ss.list {
		out = append(out, [2]string{s.name, s.placeholder})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// substitute puts in s, in one pass, the value of each secret whose
// placeholder it holds, through escape (nil: as it is). It returns the
// first secret whose placeholder is there while t is not among its hosts
// (then the text is of no use).
func (ss *secretSet) substitute(s string, t target, escape func(string) string) (string, *secret) {
	if len(ss.list) == 0 || !strings.Contains(s, placeholderPrefix) {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, placeholderPrefix)
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		s = s[i:]
		var hit *secret
		for _, sec := range ss.list {
			if strings.HasPrefix(s, sec.placeholder) {
				hit = sec
				break
			}
		}
		if hit == nil { // not a placeholder here; one may begin inside it ("__EXECD_SECRET__EXECD_…")
			b.WriteByte(s[0])
			s = s[1:]
			continue
		}
		if !hit.hosts.allows(t) {
			return "", hit
		}
		v := hit.value
		if escape != nil {
			v = escape(v)
		}
		b.WriteString(v)
		s = s[len(hit.placeholder):]
	}
}

// substituteHeader is substitute for a header value; in a Basic
// Authorization it also looks inside the base64 ("user:placeholder").
func (ss *secretSet) substituteHeader(name, value string, t target) (string, *secret) {
	if len(ss.list) == 0 {
		return value, nil
	}
	if (name == "Authorization" || name == "Proxy-Authorization") && len(value) > 6 && strings.EqualFold(value[:6], "basic ") {
		if raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(value[6:])); err == nil && bytes.Contains(raw, []byte(placeholderPrefix)) {
			sub, bad := ss.substitute(string(raw), t, nil)
			if bad != nil {
				return "", bad
			}
			return value[:6] + base64.StdEncoding.EncodeToString([]byte(sub)), nil
		}
	}
	return ss.substitute(value, t, nil)
}

// leakIn is the first secret whose value (in any of its forms) s holds
// while t is not among its hosts: the code learnt it somehow (an allowed
// host sent it back encoded) or a server's redirect carries it elsewhere.
func (ss *secretSet) leakIn(s string, t target) *secret {
	for _, sec := range ss.list {
		if sec.hosts.allows(t) {
			continue
		}
		for _, f := range sec.forms {
			if strings.Contains(s, f) {
				return sec
			}
		}
	}
	return nil
}

func (ss *secretSet) leakInBytes(b []byte, t target) *secret {
	for _, sec := range ss.list {
		if sec.hosts.allows(t) {
			continue
		}
		for _, f := range sec.forms {
			if bytes.Contains(b, []byte(f)) {
				return sec
			}
		}
	}
	return nil
}

// redactString puts the placeholders back in place of the values.
func (ss *secretSet) redactString(s string) string {
	if ss.redact == nil {
		return s
	}
	return ss.redact.Replace(s)
}

// redactBytes is redactString for a body; it returns b itself when no
// value is in it.
func (ss *secretSet) redactBytes(b []byte) []byte {
	if ss.redact == nil {
		return b
	}
	found := false
	for _, sec := range ss.list {
		for _, f := range sec.forms {
			if bytes.Contains(b, []byte(f)) {
				found = true
			}
		}
	}
	if !found {
		return b
	}
	return []byte(ss.redact.Replace(string(b)))
}

// validHeaderName: a token (RFC 9110 section 5.6.2).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// validHeaderValue: no control character but horizontal tab (RFC 9110
// section 5.5): no CR, LF or NUL, so no header can be injected.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
