package packages

import "strings"

// PythonLock is the Python part of a lock.
type PythonLock struct {
	// Requires are the workspace's own requirements, as asked
	// ("attrs>=23", "rich[jupyter]").
	Requires []string `json:"requires"`
	// Packages: normalized project name (PEP 503) → entry.
	Packages map[string]PythonLocked `json:"packages"`
}

// PythonLocked is one installed wheel.
type PythonLocked struct {
	Version string `json:"version"`
	Wheel   string `json:"wheel"`
	// SHA256 is the wheel's sha256, hex.
	SHA256 string `json:"sha256"`
	// Dependencies are the normalized names of the projects it requires,
	// its markers evaluated for the sandbox.
	Dependencies []string `json:"dependencies,omitempty"`
}

// validate checks the Python part of a lock read from the workspace.
func (py *PythonLock) validate(invalid func(format string, args ...any) error) error {
	if len(py.Packages) > maxLockEntries || len(py.Requires) > maxLockEntries {
		return invalid("more than %d Python packages", maxLockEntries)
	}
	for _, r := range py.Requires {
		if _, err := parseRequirement(r); err != nil {
			return invalid("%v", err)
		}
	}
	for name, e := range py.Packages {
		if normalizePyName(name) != name || !validPyName(name) {
			return invalid("%q is not a normalized Python project name", name)
		}
		v, ok := parsePyVersion(e.Version)
		if !ok {
			return invalid("%s: %q is not a version", name, e.Version)
		}
		w, ok := parseWheelName(e.Wheel)
		if !ok || w.name != name || !w.pure() || comparePy(w.version, v) != 0 {
			return invalid("%s: %q is not a pure wheel of its version %s", name, e.Wheel, e.Version)
		}
		if _, ok := parseHexDigest("sha256", e.SHA256); !ok || strings.ToLower(e.SHA256) != e.SHA256 {
			return invalid("%s: %q is not a sha256", name, e.SHA256)
		}
		for _, d := range e.Dependencies {
			if normalizePyName(d) != d || !validPyName(d) {
				return invalid("%s: dependency %q is not a normalized project name", name, d)
			}
		}
	}
	return nil
}
