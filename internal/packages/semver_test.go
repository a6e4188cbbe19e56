package packages

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestRangesAsNPMReadsThem checks every range of testdata/semver.json
// (written by npm's own semver, see semver-gen.js) against every version
// of the table: the same ranges are valid, and the same versions satisfy
// them.
func TestRangesAsNPMReadsThem(t *testing.T) {
	b, err := os.ReadFile("testdata/semver.json")
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Versions []string
		Cases    []struct {
			Range     string
			Valid     bool
			Satisfied []string
		}
	}
	if err := json.Unmarshal(b, &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Cases) < 50 {
		t.Fatalf("only %d cases in the table", len(table.Cases))
	}
	for _, c := range table.Cases {
		r, ok := parseRange(c.Range)
		if ok != c.Valid {
			t.Errorf("range %q: valid = %v, npm says %v", c.Range, ok, c.Valid)
			continue
		}
		if !ok {
			continue
		}
		var got []string
		for _, s := range table.Versions {
			v, ok := parseVersion(s)
			if !ok {
				t.Fatalf("version %q of the table does not parse", s)
			}
			if r.satisfies(v) {
				got = append(got, s)
			}
		}
		if g, w := strings.Join(got, " "), strings.Join(c.Satisfied, " "); g != w {
			t.Errorf("range %q:\n got %s\nnpm %s", c.Range, g, w)
		}
	}
}

func TestVersionOrder(t *testing.T) {
	// semver.org's example of precedence, lowest first.
	order := []string{"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
		"1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0", "10.0.0"}
	for i := 1; i < len(order); i++ {
		a, _ := parseVersion(order[i-1])
		b, ok := parseVersion(order[i])
		if !ok {
			t.Fatalf("%q does not parse", order[i])
		}
		if compareVersions(a, b) >= 0 || compareVersions(b, a) <= 0 {
			t.Errorf("%s is not before %s", order[i-1], order[i])
		}
	}
	a, _ := parseVersion("1.2.3+one")
	b, _ := parseVersion("1.2.3+two")
	if compareVersions(a, b) != 0 {
		t.Errorf("build metadata changes the order")
	}
	for _, bad := range []string{"", "1", "1.2", "1.2.3.4", "1.2.3-", "1.2.3-a..b", "9007199254740992.0.0", "a.b.c"} {
		if _, ok := parseVersion(bad); ok {
			t.Errorf("version %q parses", bad)
		}
	}
}
