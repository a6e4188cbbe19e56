package upstream

import "strings"

// Access is what a principal may do with a tool.
type Access string

const (
	AccessAllow  Access = "allow"  // called at once
	AccessAsk    Access = "ask"    // called once the person agrees
	AccessRefuse Access = "refuse" // never called, and not listed
)

// rules are an upstream's allow and ask patterns.
type rules struct {
	allow, ask []string
}

// access decides a tool name: the most specific matching pattern wins (the
// one with the most characters besides *), ask on a tie, refuse when none
// matches (RATIONALE.md, "Which pattern decides?").
func (r rules) access(tool string) Access {
	best, got := -1, AccessRefuse
	for _, p := range r.allow {
		if s := specificity(p); s > best && match(p, tool) {
			best, got = s, AccessAllow
		}
	}
	for _, p := range r.ask {
		if s := specificity(p); s >= best && match(p, tool) {
			best, got = s, AccessAsk
		}
	}
	return got
}

func specificity(p string) int { return len(p) - strings.Count(p, "*") }

// match reports whether name matches pattern, in which * stands for any
// run of characters (none included) and every other byte for itself.
func match(pattern, name string) bool {
	// The classic two-pointer glob: on a mismatch after a *, let that *
	// swallow one more byte and try again. Linear in practice, quadratic
	// at worst, over names of at most a few hundred bytes.
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case p < len(pattern) && pattern[p] == name[n]:
			p++
			n++
		case star >= 0:
			p, mark = star+1, mark+1
			n = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
