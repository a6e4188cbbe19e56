package packages

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// wheelName is a wheel's file name read (PEP 427):
// {name}-{version}(-{build})?-{python}-{abi}-{platform}.whl.
type wheelName struct {
	name     string // normalized
	version  pyVersion
	build    int
	python   []string
	abi      []string
	platform []string
}

func parseWheelName(fn string) (wheelName, bool) {
	base, ok := strings.CutSuffix(fn, ".whl")
	if !ok || len(fn) > 512 || strings.ContainsAny(fn, "/\\") {
		return wheelName{}, false
	}
	parts := strings.Split(base, "-")
	if len(parts) != 5 && len(parts) != 6 {
		return wheelName{}, false
	}
	var w wheelName
	if !validPyName(parts[0]) {
		return wheelName{}, false
	}
	w.name = normalizePyName(parts[0])
	v, ok := parsePyVersion(parts[1])
	if !ok {
		return wheelName{}, false
	}
	w.version = v
	if len(parts) == 6 {
		digits := 0
		for digits < len(parts[2]) && parts[2][digits] >= '0' && parts[2][digits] <= '9' {
			digits++
		}
		n, err := strconv.Atoi(parts[2][:digits])
		if err != nil {
			return wheelName{}, false
		}
		w.build = n
		parts = append(parts[:2], parts[3:]...)
	}
	w.python = strings.Split(strings.ToLower(parts[2]), ".")
	w.abi = strings.Split(strings.ToLower(parts[3]), ".")
	w.platform = strings.Split(strings.ToLower(parts[4]), ".")
	return w, true
}

// sandboxPythonTags are the interpreter tags CPython 3.11 accepts with
// abi "none" and platform "any" (packaging's sys_tags, in that order).
var sandboxPythonTags = func() map[string]int {
	m := map[string]int{"cp311": 0, "py311": 1}
	for i := 10; i >= 0; i-- {
		m["py3"+strconv.Itoa(i)] = 12 - i
	}
	m["py3"] = 13
	return m
}()

// pure says whether the wheel runs in the sandbox: pure Python, for
// Python 3 (py3-none-any, py2.py3-none-any, py311-none-any…).
func (w wheelName) pure() bool {
	return w.rank() >= 0
}

// rank is how well the wheel's tags fit the sandbox, lower is better; -1
// when they do not.
func (w wheelName) rank() int {
	if !contains(w.abi, "none") || !contains(w.platform, "any") {
		return -1
	}
	best := -1
	for _, t := range w.python {
		if r, ok := sandboxPythonTags[t]; ok && (best < 0 || r < best) {
			best = r
		}
	}
	return best
}

func contains(s []string, x string) bool {
	for _, e := range s {
		if e == x {
			return true
		}
	}
	return false
}

// metadata is what a wheel's METADATA says that resolving needs.
type metadata struct {
	name           string
	version        string
	requiresDist   []string
	requiresPython string
}

// maxMetadataBytes bounds the METADATA read (its headers; the long
// description after them is never read).
const maxMetadataBytes = 1 << 20

// parseMetadata reads the headers of a METADATA file (core metadata, an
// email-style header block; continuation lines begin with blanks).
func parseMetadata(b []byte) (metadata, bool) {
	var m metadata
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), maxMetadataBytes)
	var key, val string
	flush := func() {
		switch strings.ToLower(key) {
		case "name":
			m.name = strings.TrimSpace(val)
		case "version":
			m.version = strings.TrimSpace(val)
		case "requires-dist":
			m.requiresDist = append(m.requiresDist, strings.TrimSpace(val))
		case "requires-python":
			m.requiresPython = strings.TrimSpace(val)
		}
		key, val = "", ""
	}
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" {
			break // the body: the description
		}
		if line[0] == ' ' || line[0] == '\t' {
			if key != "" {
				val += " " + strings.TrimSpace(line)
			}
			continue
		}
		flush()
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return metadata{}, false
		}
		key, val = k, v
		if len(m.requiresDist) > 10_000 {
			return metadata{}, false
		}
	}
	flush()
	if sc.Err() != nil || m.name == "" || m.version == "" {
		return metadata{}, false
	}
	return m, true
}

// wheelVersionOK reads a WHEEL file: only format 1.x is understood.
func wheelVersionOK(b []byte) bool {
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(k), "Wheel-Version") {
			return strings.HasPrefix(strings.TrimSpace(v), "1.")
		}
	}
	return false
}
