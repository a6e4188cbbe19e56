package frontend

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
)

// LocalPrincipal is the one principal of a daemon without auth.
const LocalPrincipal = "local"

var principalRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// authenticator maps bearer tokens to principals. Without a tokens file
// every request is the local principal.
type authenticator struct {
	path string

	mu     sync.RWMutex
	tokens []tokenEntry
}

type tokenEntry struct {
	principal string
	sum       [32]byte // sha256 of the token; compared in constant time
}

func newAuthenticator(path string) (*authenticator, error) {
	a := &authenticator{path: path}
	if path == "" {
		return a, nil
	}
	return a, a.reload()
}

func (a *authenticator) enabled() bool { return a.path != "" }

// reload re-reads the tokens file: one "principal token" pair per line,
// blank lines and # comments ignored. On error the old tokens stay.
func (a *authenticator) reload() error {
	if a.path == "" {
		return nil
	}
	b, err := os.ReadFile(a.path)
	if err != nil {
		return fmt.Errorf("server.auth_tokens_file: %w", err)
	}
	var entries []tokenEntry
	seen := map[[32]byte]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return fmt.Errorf("server.auth_tokens_file: line %d: want \"principal token\"", n)
		}
		if !principalRE.MatchString(f[0]) {
			return fmt.Errorf("server.auth_tokens_file: line %d: principal must be 1-64 characters of A-Z a-z 0-9 . _ -", n)
		}
		if len(f[1]) < 16 {
			return fmt.Errorf("server.auth_tokens_file: line %d: token shorter than 16 characters", n)
		}
		sum := sha256.Sum256([]byte(f[1]))
		if seen[sum] {
			return fmt.Errorf("server.auth_tokens_file: line %d: token used twice", n)
		}
		seen[sum] = true
		entries = append(entries, tokenEntry{principal: f[0], sum: sum})
	}
	if len(entries) == 0 {
		return fmt.Errorf("server.auth_tokens_file: no tokens in %s", a.path)
	}
	a.mu.Lock()
	a.tokens = entries
	a.mu.Unlock()
	return nil
}

// principal returns the principal of an Authorization header value, or ""
// when auth is on and the header does not carry a known token. Every entry
// is compared, so the time taken does not depend on which one matches.
func (a *authenticator) principal(header string) string {
	if !a.enabled() {
		return LocalPrincipal
	}
	const prefix = "bearer "
	if len(header) < len(prefix) || !strings.EqualFold(header[:len(prefix)], prefix) {
		return ""
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(header[len(prefix):])))
	a.mu.RLock()
	defer a.mu.RUnlock()
	found := ""
	for _, e := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1 {
			found = e.principal
		}
	}
	return found
}
