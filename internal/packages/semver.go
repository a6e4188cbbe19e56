package packages

import (
	"strconv"
	"strings"
)

// version is a semantic version as npm reads one (semver.org 2.0.0, with
// npm's loose reading: a leading "v" or "=", surrounding blanks, leading
// zeros). Build metadata is kept for printing and ignored when comparing.
type version struct {
	major, minor, patch uint64
	pre                 []string // prerelease identifiers, "" when none
	build               string
}

// maxSafeInt is JavaScript's Number.MAX_SAFE_INTEGER: npm refuses version
// numbers above it.
const maxSafeInt = 1<<53 - 1

// maxRangeLen bounds the text of a range (and a version) this package
// reads: real ones are a few dozen characters.
const maxRangeLen = 1024

func (v version) String() string {
	s := strconv.FormatUint(v.major, 10) + "." + strconv.FormatUint(v.minor, 10) + "." + strconv.FormatUint(v.patch, 10)
	if len(v.pre) > 0 {
		s += "-" + strings.Join(v.pre, ".")
	}
	if v.build != "" {
		s += "+" + v.build
	}
	return s
}

// parseVersion reads a full version ("1.2.3", "v1.2.3-beta.1+build").
func parseVersion(s string) (version, bool) {
	s = strings.TrimSpace(s)
	s = strings.TrimLeft(s, "=v")
	p, rest, ok := parsePartial(s)
	if !ok || rest != "" || p.n < 3 {
		return version{}, false
	}
	return p.v, true
}

// compareVersions orders versions as semver.org's precedence rules do.
func compareVersions(a, b version) int {
	for _, d := range [3][2]uint64{{a.major, b.major}, {a.minor, b.minor}, {a.patch, b.patch}} {
		if d[0] != d[1] {
			if d[0] < d[1] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(a.pre) == 0 && len(b.pre) == 0:
		return 0
	case len(a.pre) == 0:
		return 1
	case len(b.pre) == 0:
		return -1
	}
	for i := 0; i < len(a.pre) && i < len(b.pre); i++ {
		if c := comparePreIdent(a.pre[i], b.pre[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(a.pre) < len(b.pre):
		return -1
	case len(a.pre) > len(b.pre):
		return 1
	}
	return 0
}

// comparePreIdent: numeric identifiers compare as numbers and sort before
// alphanumeric ones, which compare as ASCII.
func comparePreIdent(a, b string) int {
	an, aNum := numericIdent(a)
	bn, bNum := numericIdent(b)
	switch {
	case aNum && bNum:
		if an != bn {
			if an < bn {
				return -1
			}
			return 1
		}
		return 0
	case aNum:
		return -1
	case bNum:
		return 1
	}
	return strings.Compare(a, b)
}

func numericIdent(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// partial is a version with possibly missing or wildcard parts, as ranges
// write them ("1", "1.2.x", "*"). n counts the numeric parts (0..3).
type partial struct {
	v version
	n int
}

// parsePartial reads a partial version at the start of s and returns what
// follows it. A wildcard (x, X, *) or a missing part ends the numbers:
// "1.*.3" is not a partial.
func parsePartial(s string) (partial, string, bool) {
	var p partial
	parts := [3]*uint64{&p.v.major, &p.v.minor, &p.v.patch}
	i := 0
	wild := false
	for k := 0; k < 3; k++ {
		if k > 0 {
			if i >= len(s) || s[i] != '.' {
				break
			}
			i++
		}
		if i < len(s) && (s[i] == 'x' || s[i] == 'X' || s[i] == '*') {
			wild = true
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i || wild {
			return partial{}, "", false
		}
		n, err := strconv.ParseUint(s[i:j], 10, 64)
		if err != nil || n > maxSafeInt {
			return partial{}, "", false
		}
		*parts[k] = n
		p.n++
		i = j
	}
	if p.n == 3 && i < len(s) && s[i] == '-' {
		j := i + 1
		for j < len(s) && identChar(s[j], true) {
			j++
		}
		pre := s[i+1 : j]
		if pre == "" {
			return partial{}, "", false
		}
		for _, id := range strings.Split(pre, ".") {
			if id == "" {
				return partial{}, "", false
			}
			p.v.pre = append(p.v.pre, id)
		}
		i = j
	}
	if p.n == 3 && i < len(s) && s[i] == '+' {
		j := i + 1
		for j < len(s) && identChar(s[j], true) {
			j++
		}
		b := s[i+1 : j]
		if b == "" || strings.Contains(b, "..") || b[0] == '.' || b[len(b)-1] == '.' {
			return partial{}, "", false
		}
		p.v.build = b
		i = j
	}
	return p, s[i:], true
}

func identChar(c byte, dot bool) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || dot && c == '.'
}

// comparator is one "op version" test; op is one of < <= > >= =, or ""
// for one that every version passes.
type comparator struct {
	op string
	v  version
}

func (c comparator) test(v version) bool {
	if c.op == "" {
		return true
	}
	d := compareVersions(v, c.v)
	switch c.op {
	case "<":
		return d < 0
	case "<=":
		return d <= 0
	case ">":
		return d > 0
	case ">=":
		return d >= 0
	}
	return d == 0
}

// semverRange is a union of comparator sets (the "||" alternatives), each
// an intersection.
type semverRange [][]comparator

// parseRange reads a range as npm does with {loose: true}: "^1.2.3",
// "~1.2", "1.x || >=2.5.0", "1.2.3 - 2.3", ">=1 <2". Like npm, a word of a
// set that is not a comparator is dropped (so ">=1.2.3, <2" means "<2"),
// a set whose every word was dropped is dropped, and a range with no set
// left is invalid; an empty range, or an empty alternative, is "*".
func parseRange(s string) (semverRange, bool) {
	if len(s) > maxRangeLen {
		return nil, false
	}
	var r semverRange
	for _, alt := range strings.Split(s, "||") {
		set, ok := parseSet(strings.TrimSpace(alt))
		if ok {
			r = append(r, set)
		}
	}
	return r, len(r) > 0
}

func parseSet(s string) ([]comparator, bool) {
	if s == "" {
		return []comparator{{}}, true
	}
	if a, b, ok := strings.Cut(s, " - "); ok {
		if set, ok := hyphenRange(strings.TrimSpace(a), strings.TrimSpace(b)); ok {
			return set, true
		}
	}
	var set []comparator
	for _, w := range joinOperators(strings.Fields(s)) {
		if cs, ok := parseSimple(w); ok {
			set = append(set, cs...)
		}
	}
	return set, len(set) > 0
}

// joinOperators glues an operator standing alone to the version after it
// ("> 1.2.3" is ">1.2.3", "~ 1.2" is "~1.2").
func joinOperators(words []string) []string {
	var out []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch w {
		case "<", "<=", ">", ">=", "=", "~", "~>", "^":
			if i+1 < len(words) {
				w += words[i+1]
				i++
			}
		}
		out = append(out, w)
	}
	return out
}

func hyphenRange(a, b string) ([]comparator, bool) {
	from, rest, ok := parsePartial(strings.TrimLeft(a, "=v"))
	if !ok || rest != "" {
		return nil, false
	}
	to, rest, ok := parsePartial(strings.TrimLeft(b, "=v"))
	if !ok || rest != "" {
		return nil, false
	}
	var set []comparator
	if from.n == 0 {
		set = append(set, comparator{})
	} else {
		set = append(set, comparator{">=", from.v})
	}
	switch to.n {
	case 0:
		set = append(set, comparator{"<", zeroPre(version{})})
	case 3:
		set = append(set, comparator{"<=", to.v})
	default:
		set = append(set, comparator{"<", bump(to)})
	}
	return set, true
}

// bump is the first version past a partial's range: "1" → 2.0.0-0,
// "1.2" → 1.3.0-0.
func bump(p partial) version {
	switch p.n {
	case 1:
		return zeroPre(version{major: p.v.major + 1})
	case 2:
		return zeroPre(version{major: p.v.major, minor: p.v.minor + 1})
	}
	return zeroPre(version{})
}

// zeroPre is v with the lowest prerelease, "-0", so that "<v" also
// excludes v's prereleases.
func zeroPre(v version) version {
	v.pre = []string{"0"}
	return v
}

func floor(p partial) version {
	v := p.v
	v.build = ""
	return v
}

// parseSimple reads one comparator word: an x-range, a primitive with an
// operator, a tilde or a caret range.
func parseSimple(w string) ([]comparator, bool) {
	op := ""
	for _, o := range []string{"<=", ">=", "~>", "<", ">", "=", "~", "^"} {
		if strings.HasPrefix(w, o) {
			op, w = o, w[len(o):]
			break
		}
	}
	if op == "~>" {
		op = "~"
	}
	w = strings.TrimLeft(w, "=v")
	p, rest, ok := parsePartial(w)
	if !ok || rest != "" {
		return nil, false
	}
	any := []comparator{{}}
	none := []comparator{{"<", zeroPre(version{})}}
	switch op {
	case "", "=":
		if p.n == 0 {
			return any, true
		}
		if p.n == 3 {
			return []comparator{{"=", p.v}}, true
		}
		return []comparator{{">=", floor(p)}, {"<", bump(p)}}, true
	case ">":
		switch p.n {
		case 0:
			return none, true
		case 3:
			return []comparator{{">", p.v}}, true
		}
		b := bump(p)
		b.pre = nil
		return []comparator{{">=", b}}, true
	case ">=":
		if p.n == 0 {
			return any, true
		}
		return []comparator{{">=", floor(p)}}, true
	case "<":
		if p.n == 0 {
			return none, true
		}
		if p.n == 3 {
			return []comparator{{"<", p.v}}, true
		}
		return []comparator{{"<", zeroPre(floor(p))}}, true
	case "<=":
		switch p.n {
		case 0:
			return any, true
		case 3:
			return []comparator{{"<=", p.v}}, true
		}
		return []comparator{{"<", bump(p)}}, true
	case "~":
		switch p.n {
		case 0:
			return any, true
		case 1:
			return []comparator{{">=", floor(p)}, {"<", bump(p)}}, true
		}
		return []comparator{{">=", floor(p)}, {"<", bump(partial{v: p.v, n: 2})}}, true
	}
	// "^": the first non-zero part of the version may not change.
	switch {
	case p.n == 0:
		return any, true
	case p.n == 1 || p.v.major > 0:
		return []comparator{{">=", floor(p)}, {"<", bump(partial{v: p.v, n: 1})}}, true
	case p.n == 2 || p.v.minor > 0:
		return []comparator{{">=", floor(p)}, {"<", bump(partial{v: p.v, n: 2})}}, true
	}
	return []comparator{{">=", floor(p)}, {"<", zeroPre(version{patch: p.v.patch + 1})}}, true
}

// satisfies says whether v is in the range. As npm rules, a prerelease is
// in a set only if some comparator of the set names a prerelease of the
// same major.minor.patch: "^1.2.3-beta.2" takes 1.2.3-beta.4, never
// 1.3.0-alpha.
func (r semverRange) satisfies(v version) bool {
	for _, set := range r {
		if setSatisfies(set, v) {
			return true
		}
	}
	return false
}

func setSatisfies(set []comparator, v version) bool {
	for _, c := range set {
		if !c.test(v) {
			return false
		}
	}
	if len(v.pre) == 0 {
		return true
	}
	for _, c := range set {
		if c.op != "" && len(c.v.pre) > 0 && c.v.major == v.major && c.v.minor == v.minor && c.v.patch == v.patch {
			return true
		}
	}
	return false
}
