package packages

import (
	"regexp"
	"strings"
)

// pyName is a valid Python project name (PEP 508): letters and digits,
// with . _ - inside.
var pyName = regexp.MustCompile(`^(?i:[a-z0-9]|[a-z0-9][a-z0-9._-]*[a-z0-9])$`)

func validPyName(s string) bool { return len(s) <= 200 && pyName.MatchString(s) }

// normalizePyName is PEP 503's normal form: lower case, every run of
// - _ . one "-".
func normalizePyName(s string) string {
	var b strings.Builder
	dash := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '-' || c == '_' || c == '.' {
			if !dash {
				b.WriteByte('-')
			}
			dash = true
			continue
		}
		dash = false
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// RequirementName is the normalized project name of a PEP 508
// requirement ("Foo_Bar>=1" is "foo-bar"), or "" when it does not parse.
func RequirementName(req string) string {
	r, err := parseRequirement(req)
	if err != nil {
		return ""
	}
	return r.name
}
