package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// MaxIDLen is the longest workspace id a client may choose.
const MaxIDLen = 64

const idRule = "workspace id must be 1–64 characters of A-Z a-z 0-9 . _ - (and not \".\" or \"..\")"

// ValidateID reports whether id may name a workspace. Ids become directory
// names, so the rule keeps them portable and unable to climb out.
func ValidateID(id string) error {
	if id == "" || len(id) > MaxIDLen || id == "." || id == ".." {
		return &Error{Code: InvalidID, Msg: fmt.Sprintf("%s; got %q", idRule, clip(id))}
	}
	for i := 0; i < len(id); i++ {
		if !idByte(id[i]) {
			return &Error{Code: InvalidID, Msg: fmt.Sprintf("%s; got %q", idRule, clip(id))}
		}
	}
	return nil
}

func idByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// principalDir maps a principal to the name of its directory under the data
// directory. A principal that is already a safe, visible name (id characters,
// not starting with '.') is used as is; anything else becomes "~" and the hex
// of its bytes (of their SHA-256 when long). No plain name contains '~', so
// the two forms never collide, and no principal maps to a hidden name.
func principalDir(principal string) (string, error) {
	if principal == "" {
		return "", &Error{Code: InvalidPrincipal, Msg: "the request has no principal"}
	}
	if len(principal) <= MaxIDLen && principal[0] != '.' && ValidateID(principal) == nil {
		return principal, nil
	}
	if len(principal) > 32 {
		sum := sha256.Sum256([]byte(principal))
		return "~" + hex.EncodeToString(sum[:]), nil
	}
	return "~" + hex.EncodeToString([]byte(principal)), nil
}

// aliases maps extra names to a canonical language name. Only aliases of
// languages the Factory offers are accepted.
var aliases = map[string]string{
	"js":         "javascript",
	"node":       "javascript",
	"nodejs":     "javascript",
	"ecmascript": "javascript",
	"py":         "python",
	"python3":    "python",
}

// languages resolves client language names against what the Factory offers.
type languages struct {
	canon []string          // as the Factory lists them
	names map[string]string // lower-cased name or alias -> canonical
}

func newLanguages(offered []string) languages {
	l := languages{names: map[string]string{}}
	for _, c := range offered {
		l.canon = append(l.canon, c)
		l.names[strings.ToLower(c)] = c
	}
	for alias, c := range aliases {
		if canon, ok := l.names[c]; ok {
			if _, taken := l.names[alias]; !taken {
				l.names[alias] = canon
			}
		}
	}
	return l
}

func (l languages) resolve(name string) (string, error) {
	if c, ok := l.names[strings.ToLower(strings.TrimSpace(name))]; ok {
		return c, nil
	}
	use := "use " + strings.Join(l.canon, " or ")
	if len(l.canon) == 0 {
		use = "no language is available"
	}
	if name == "" {
		return "", &Error{Code: UnsupportedLanguage, Msg: "language is required; " + use}
	}
	return "", &Error{Code: UnsupportedLanguage, Msg: fmt.Sprintf("language %q is not supported; %s", clip(name), use)}
}

func (l languages) offered() []string { return slices.Clone(l.canon) }

// safeLanguage reports whether a language name can be part of a file name
// in a state directory (store.go).
func safeLanguage(l string) bool {
	if l == "" || len(l) > 32 {
		return false
	}
	for i := 0; i < len(l); i++ {
		if c := l[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
