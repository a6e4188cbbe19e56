package packages

import (
	"regexp"
	"strconv"
	"strings"
)

// pyVersion is a PEP 440 version, normalized.
type pyVersion struct {
	epoch   int
	release []int
	preKind int // 0 none, 1 a, 2 b, 3 rc
	pre     int
	hasPost bool
	post    int
	hasDev  bool
	dev     int
	local   []string
}

// pep440 reads every spelling PEP 440 accepts ("v1.0", "1.0-alpha.1",
// "1.0.post-2", "1.0-1", "1.0+ubuntu.1") into its parts.
var pep440 = regexp.MustCompile(`^v?(?:(\d{1,9})!)?(\d{1,9}(?:\.\d{1,9}){0,31})` +
	`(?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?(\d{1,9})?)?` +
	`(?:-(\d{1,9})|[-_.]?(post|rev|r)[-_.]?(\d{1,9})?)?` +
	`(?:[-_.]?(dev)[-_.]?(\d{1,9})?)?` +
	`(?:\+([a-z0-9]+(?:[-_.][a-z0-9]+)*))?$`)

func parsePyVersion(s string) (pyVersion, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if len(s) > 256 {
		return pyVersion{}, false
	}
	m := pep440.FindStringSubmatch(s)
	if m == nil {
		return pyVersion{}, false
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	var v pyVersion
	v.epoch = atoi(m[1])
	for _, p := range strings.Split(m[2], ".") {
		v.release = append(v.release, atoi(p))
	}
	switch m[3] {
	case "a", "alpha":
		v.preKind = 1
	case "b", "beta":
		v.preKind = 2
	case "c", "rc", "pre", "preview":
		v.preKind = 3
	}
	v.pre = atoi(m[4])
	if m[5] != "" {
		v.hasPost, v.post = true, atoi(m[5])
	} else if m[6] != "" {
		v.hasPost, v.post = true, atoi(m[7])
	}
	if m[8] != "" {
		v.hasDev, v.dev = true, atoi(m[9])
	}
	if m[10] != "" {
		v.local = strings.FieldsFunc(m[10], func(r rune) bool { return r == '-' || r == '_' || r == '.' })
	}
	return v, true
}

func (v pyVersion) String() string {
	var b strings.Builder
	if v.epoch != 0 {
		b.WriteString(strconv.Itoa(v.epoch) + "!")
	}
	for i, r := range v.release {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strconv.Itoa(r))
	}
	if v.preKind != 0 {
		b.WriteString([]string{"", "a", "b", "rc"}[v.preKind] + strconv.Itoa(v.pre))
	}
	if v.hasPost {
		b.WriteString(".post" + strconv.Itoa(v.post))
	}
	if v.hasDev {
		b.WriteString(".dev" + strconv.Itoa(v.dev))
	}
	if len(v.local) > 0 {
		b.WriteString("+" + strings.Join(v.local, "."))
	}
	return b.String()
}

func (v pyVersion) isPre() bool { return v.preKind != 0 || v.hasDev }

func (v pyVersion) public() pyVersion { v.local = nil; return v }

// comparePy orders versions as PEP 440 does: epoch, release (trailing
// zeros ignored), then dev < pre < final < post, then local.
func comparePy(a, b pyVersion) int {
	if c := cmpInt(a.epoch, b.epoch); c != 0 {
		return c
	}
	for i := 0; i < len(a.release) || i < len(b.release); i++ {
		if c := cmpInt(at(a.release, i), at(b.release, i)); c != 0 {
			return c
		}
	}
	// pre: a dev release of the final sorts before every prerelease.
	preKey := func(v pyVersion) [2]int {
		switch {
		case v.preKind == 0 && !v.hasPost && v.hasDev:
			return [2]int{-1, 0}
		case v.preKind == 0:
			return [2]int{4, 0}
		}
		return [2]int{v.preKind, v.pre}
	}
	pa, pb := preKey(a), preKey(b)
	if c := cmpInt(pa[0], pb[0]); c != 0 {
		return c
	}
	if c := cmpInt(pa[1], pb[1]); c != 0 {
		return c
	}
	if c := cmpOpt(a.hasPost, a.post, b.hasPost, b.post, -1); c != 0 {
		return c
	}
	if c := cmpOpt(a.hasDev, a.dev, b.hasDev, b.dev, 1); c != 0 {
		return c
	}
	return compareLocal(a.local, b.local)
}

func at(s []int, i int) int {
	if i < len(s) {
		return s[i]
	}
	return 0
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpOpt compares optional numbers; absent sorts as missing (-1: before
// any, +1: after any).
func cmpOpt(ha bool, a int, hb bool, b int, missing int) int {
	switch {
	case ha && hb:
		return cmpInt(a, b)
	case ha:
		return -missing
	case hb:
		return missing
	}
	return 0
}

// compareLocal: no local sorts first; numeric segments sort after
// alphanumeric ones and compare as numbers.
func compareLocal(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		an, aErr := strconv.Atoi(a[i])
		bn, bErr := strconv.Atoi(b[i])
		switch {
		case aErr == nil && bErr == nil:
			if c := cmpInt(an, bn); c != 0 {
				return c
			}
		case aErr == nil:
			return 1
		case bErr == nil:
			return -1
		default:
			if c := strings.Compare(a[i], b[i]); c != 0 {
				return c
			}
		}
	}
	return cmpInt(len(a), len(b))
}

// pySpec is one version specifier ("~=1.4", "==2.*", "!=1.5.1").
type pySpec struct {
	op       string
	v        pyVersion
	raw      string // the version as written, for ===
	wildcard bool
}

// pySpecSet is the intersection of comma-separated specifiers.
type pySpecSet []pySpec

// parseSpecSet reads ">=1,<2", "==1.4.*", "" (any).
func parseSpecSet(s string) (pySpecSet, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, true
	}
	var set pySpecSet
	for _, part := range strings.Split(s, ",") {
		sp, ok := parseSpec(strings.TrimSpace(part))
		if !ok {
			return nil, false
		}
		set = append(set, sp)
	}
	return set, true
}

func parseSpec(s string) (pySpec, bool) {
	var sp pySpec
	for _, op := range []string{"===", "~=", "==", "!=", "<=", ">=", "<", ">"} {
		if strings.HasPrefix(s, op) {
			sp.op = op
			break
		}
	}
	if sp.op == "" {
		return sp, false
	}
	rest := strings.TrimSpace(s[len(sp.op):])
	sp.raw = rest
	if sp.op == "===" {
		return sp, rest != "" && !strings.ContainsAny(rest, " ,;")
	}
	if strings.HasSuffix(rest, ".*") {
		if sp.op != "==" && sp.op != "!=" {
			return sp, false
		}
		sp.wildcard = true
		rest = strings.TrimSuffix(rest, ".*")
	}
	v, ok := parsePyVersion(rest)
	if !ok {
		return sp, false
	}
	if sp.wildcard && (v.preKind != 0 || v.hasPost || v.hasDev || len(v.local) > 0) {
		return sp, false
	}
	if len(v.local) > 0 && sp.op != "==" && sp.op != "!=" {
		return sp, false
	}
	if sp.op == "~=" && len(v.release) < 2 {
		return sp, false
	}
	sp.v = v
	return sp, true
}

func (sp pySpec) String() string { return sp.op + sp.raw }

// contains says whether v satisfies the specifier, PEP 440's rules for
// each operator; prereleases are the set's business (allows).
func (sp pySpec) contains(v pyVersion) bool {
	switch sp.op {
	case "===":
		return strings.EqualFold(v.String(), sp.raw)
	case "==":
		if sp.wildcard {
			return prefixMatch(v, sp.v)
		}
		if len(sp.v.local) == 0 {
			v = v.public()
		}
		return comparePy(v, sp.v) == 0
	case "!=":
		return !pySpec{op: "==", v: sp.v, wildcard: sp.wildcard}.contains(v)
	case "~=":
		prefix := sp.v
		prefix.release = prefix.release[:len(prefix.release)-1]
		prefix.preKind, prefix.hasPost, prefix.hasDev = 0, false, false
		return comparePy(v.public(), sp.v) >= 0 && prefixMatch(v, prefix)
	case "<=":
		return comparePy(v.public(), sp.v) <= 0
	case ">=":
		return comparePy(v.public(), sp.v) >= 0
	case "<":
		pv := v.public()
		if comparePy(pv, sp.v) >= 0 {
			return false
		}
		// <3.0 does not take 3.0's prereleases, unless it names one.
		return sp.v.isPre() || !pv.isPre() || !sameRelease(pv, sp.v)
	case ">":
		pv := v.public()
		if comparePy(pv, sp.v) <= 0 || len(v.local) > 0 && sameRelease(pv, sp.v) {
			return false
		}
		// >1.7 does not take 1.7.post1, unless it names a post-release.
		return sp.v.hasPost || !pv.hasPost || !sameRelease(pv, sp.v)
	}
	return false
}

func sameRelease(a, b pyVersion) bool {
	if a.epoch != b.epoch {
		return false
	}
	for i := 0; i < len(a.release) || i < len(b.release); i++ {
		if at(a.release, i) != at(b.release, i) {
			return false
		}
	}
	return true
}

// prefixMatch: v's release, padded with zeros, begins with p's.
func prefixMatch(v, p pyVersion) bool {
	if v.epoch != p.epoch {
		return false
	}
	for i, r := range p.release {
		if at(v.release, i) != r {
			return false
		}
	}
	return true
}

// contains says whether v satisfies every specifier of the set.
func (set pySpecSet) contains(v pyVersion) bool {
	for _, sp := range set {
		if !sp.contains(v) {
			return false
		}
	}
	return true
}

// allowsPre says whether the set names a prerelease itself (">=2.0b1"),
// which lets prereleases satisfy it.
func (set pySpecSet) allowsPre() bool {
	for _, sp := range set {
		if sp.op != "!=" && sp.op != "===" && sp.v.isPre() {
			return true
		}
	}
	return false
}

func (set pySpecSet) String() string {
	parts := make([]string, len(set))
	for i, sp := range set {
		parts[i] = sp.String()
	}
	return strings.Join(parts, ",")
}
