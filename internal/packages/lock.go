package packages

import (
	"bytes"
	"encoding/json"
	"strings"
)

// LockfileVersion is the version of the lock format this package writes
// and reads.
const LockfileVersion = 1

// maxLockBytes and maxLockEntries bound a lock: it lives in the
// workspace, where the code can write anything into it.
const (
	maxLockBytes   = 16 << 20
	maxLockEntries = 10_000
)

// Lock is a workspace's packages: what it asked for and what that
// resolved to, each package pinned by the hash of the file it came from.
// The package documentation describes the JSON. A lock is a value: the
// methods that change one return a new one.
type Lock struct {
	LockfileVersion int         `json:"lockfileVersion"`
	NPM             *NPMLock    `json:"npm,omitempty"`
	Python          *PythonLock `json:"python,omitempty"`
}

// NPMLock is the npm part of a lock, shaped like package-lock.json's
// "packages": each key is a package's place in the tree.
type NPMLock struct {
	// Requires are the workspace's own dependencies: name → range.
	Requires map[string]string `json:"requires"`
	// Packages: "node_modules/a" and "node_modules/a/node_modules/b" → entry.
	Packages map[string]NPMLocked `json:"packages"`
}

// NPMLocked is one placed package.
type NPMLocked struct {
	Version string `json:"version"`
	// Resolved is where the tarball came from, for people: execd fetches
	// again from packages.npm_registry only, never from here.
	Resolved string `json:"resolved,omitempty"`
	// Integrity is the tarball's sha512, as SRI ("sha512-<base64>").
	Integrity            string            `json:"integrity"`
	Dependencies         map[string]string `json:"dependencies,omitempty"`
	OptionalDependencies map[string]string `json:"optionalDependencies,omitempty"`
}

// ParseLock reads a lock as Marshal wrote it. Everything is checked: the
// lock is in the workspace, where the code can write it.
func ParseLock(b []byte) (*Lock, error) {
	invalid := func(format string, args ...any) error {
		return errorf(CodeInvalid, "", "the packages lock is not valid: "+format, args...)
	}
	bad := func(format string, args ...any) (*Lock, error) { return nil, invalid(format, args...) }
	if len(b) > maxLockBytes {
		return bad("larger than %d bytes", maxLockBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var l Lock
	if err := dec.Decode(&l); err != nil {
		return bad("%v", err)
	}
	if l.LockfileVersion != LockfileVersion {
		return bad("lockfileVersion %d, want %d", l.LockfileVersion, LockfileVersion)
	}
	if n := l.NPM; n != nil {
		if len(n.Packages) > maxLockEntries || len(n.Requires) > maxLockEntries {
			return bad("more than %d npm packages", maxLockEntries)
		}
		for name, want := range n.Requires {
			if !validNPMName(name) {
				return bad("%q is not an npm package name", name)
			}
			if err := registryWant(name, want, "the lock"); err != nil {
				return bad("%s", err)
			}
		}
		for p, e := range n.Packages {
			if !validTreePath(p) {
				return bad("%q is not a place in a node_modules tree", p)
			}
			if _, ok := parseVersion(e.Version); !ok {
				return bad("%s: %q is not a version", p, e.Version)
			}
			if d, ok := parseIntegrity(e.Integrity); !ok || d.algo != "sha512" {
				return bad("%s: %q is not a sha512 integrity", p, e.Integrity)
			}
			for _, deps := range []map[string]string{e.Dependencies, e.OptionalDependencies} {
				for name, want := range deps {
					if !validNPMName(name) || registryWant(name, want, p) != nil {
						return bad("%s: dependency %q@%q is not a registry package", p, name, want)
					}
				}
			}
		}
	}
	if l.Python != nil {
		if err := l.Python.validate(invalid); err != nil {
			return nil, err
		}
	}
	return &l, nil
}

// Marshal writes the lock as indented JSON with sorted keys, so that the
// same packages always make the same bytes.
func (l *Lock) Marshal() ([]byte, error) {
	c := *l
	c.LockfileVersion = LockfileVersion
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// validTreePath is "node_modules/<name>" repeated: a package's place.
func validTreePath(p string) bool {
	if len(p) > 4096 {
		return false
	}
	for p != "" {
		rest, ok := strings.CutPrefix(p, "node_modules/")
		if !ok {
			return false
		}
		name := rest
		if i := strings.Index(rest, "/node_modules/"); i >= 0 {
			name, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		if !validNPMName(name) {
			return false
		}
		p = rest
	}
	return true
}
