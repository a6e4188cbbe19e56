package packages

import "testing"

func TestPEP440Order(t *testing.T) {
	// PEP 440's own example of ordering, lowest first, with spellings
	// that normalize to the same versions.
	order := []string{"1.0.dev456", "1.0a1", "1.0a2.dev456", "1.0a12.dev456", "1.0a12", "1.0b1.dev456",
		"1.0b2", "1.0b2.post345.dev456", "1.0b2.post345", "1.0rc1.dev456", "1.0rc1", "1.0", "1.0+abc.5",
		"1.0+abc.7", "1.0+5", "1.0.post456.dev34", "1.0.post456", "1.0.15", "1.1.dev1", "2!0.1"}
	for i := 1; i < len(order); i++ {
		a, ok1 := parsePyVersion(order[i-1])
		b, ok2 := parsePyVersion(order[i])
		if !ok1 || !ok2 {
			t.Fatalf("%q or %q does not parse", order[i-1], order[i])
		}
		if comparePy(a, b) >= 0 {
			t.Errorf("%s is not before %s", order[i-1], order[i])
		}
	}
	for _, eq := range [][2]string{{"1.0", "1.0.0"}, {"1.0-alpha.1", "1.0a1"}, {"v1.0", "1.0"}, {"1.0-1", "1.0.post1"},
		{"1.0.RC1", "1.0rc1"}, {"1.0c1", "1.0rc1"}, {"1.0-dev", "1.0.dev0"}} {
		a, _ := parsePyVersion(eq[0])
		b, _ := parsePyVersion(eq[1])
		if comparePy(a, b) != 0 {
			t.Errorf("%s and %s differ", eq[0], eq[1])
		}
	}
	for _, bad := range []string{"", "1.0-", "a.b", "1..0", "1.0+", "1.0+-a"} {
		if _, ok := parsePyVersion(bad); ok {
			t.Errorf("%q parses as a version", bad)
		}
	}
}

func TestPEP440Specifiers(t *testing.T) {
	for _, c := range []struct {
		spec string
		in   []string
		out  []string
	}{
		{">=1,<2", []string{"1.0", "1.5", "1.9.9"}, []string{"0.9", "2.0"}},
		{"==1.4.*", []string{"1.4", "1.4.0", "1.4.9"}, []string{"1.5", "1.40"}},
		{"!=1.5.1", []string{"1.5", "1.5.2"}, []string{"1.5.1"}},
		{"~=2.2", []string{"2.2", "2.3", "2.9"}, []string{"3.0", "2.1"}},
		{"~=1.4.5", []string{"1.4.5", "1.4.9"}, []string{"1.5.0", "1.4.4"}},
		{"==1.0", []string{"1.0", "1.0.0", "1.0+local"}, []string{"1.0.1"}},
		{"<3.0", []string{"2.9"}, []string{"3.0rc1", "3.0"}},
		{">1.7", []string{"1.7.1", "1.8"}, []string{"1.7", "1.7.post1"}},
		{"===1.0", []string{"1.0"}, []string{"1.0.0"}},
		{"", []string{"0.1", "100"}, nil},
	} {
		set, ok := parseSpecSet(c.spec)
		if !ok {
			t.Fatalf("%q does not parse", c.spec)
		}
		for _, s := range c.in {
			if v, _ := parsePyVersion(s); !set.contains(v) {
				t.Errorf("%s does not take %s", c.spec, s)
			}
		}
		for _, s := range c.out {
			if v, _ := parsePyVersion(s); set.contains(v) {
				t.Errorf("%s takes %s", c.spec, s)
			}
		}
	}
	for _, bad := range []string{">=1.*", "~=1", "=>1", "==", ">=1,", "<1.0+local"} {
		if _, ok := parseSpecSet(bad); ok {
			t.Errorf("%q parses as a specifier", bad)
		}
	}
}

func TestMarkersForTheSandbox(t *testing.T) {
	for _, c := range []struct {
		marker string
		extra  string
		want   bool
	}{
		{`sys_platform == "wasi"`, "", true},
		{`sys_platform == "win32"`, "", false},
		{`os_name == "nt"`, "", false},
		{`os_name == "posix" and platform_machine == "wasm32"`, "", true},
		{`python_version < "3.12"`, "", true},
		{`python_version >= "3.12"`, "", false},
		{`python_full_version >= "3.11.1"`, "", true},
		{`python_version > "3.8" and (sys_platform == "linux" or sys_platform == "darwin")`, "", false},
		{`implementation_name == "cpython"`, "", true},
		{`platform_python_implementation != "PyPy"`, "", true},
		{`"wasi" in sys_platform`, "", true},
		{`"win" not in sys_platform`, "", true},
		{`extra == "fast"`, "", false},
		{`extra == "Fast_Path"`, "fast-path", true},
		{`python_version < "3.8" or extra == "test"`, "test", true},
		{`sys.platform == 'wasi'`, "", true},
	} {
		m, err := parseMarker(c.marker)
		if err != nil {
			t.Fatalf("%s: %v", c.marker, err)
		}
		if got := m.eval(c.extra); got != c.want {
			t.Errorf("%s with extra %q = %v, want %v", c.marker, c.extra, got, c.want)
		}
	}
	for _, bad := range []string{``, `sys_platform`, `sys_platform ==`, `os_nme == "posix"`, `(os_name == "posix"`, `os_name == "posix`, `os_name not "x"`, `a == b`} {
		if _, err := parseMarker(bad); err == nil {
			t.Errorf("%q parses as a marker", bad)
		}
	}
}

func TestRequirements(t *testing.T) {
	r, err := parseRequirement(`Rich_Text[Jupyter, fast] (>=13.0,<14) ; python_version >= "3.8"`)
	if err != nil {
		t.Fatal(err)
	}
	if r.name != "rich-text" || len(r.extras) != 2 || r.extras[0] != "fast" || r.spec.String() != ">=13.0,<14" || r.marker == nil {
		t.Errorf("read as %+v", r)
	}
	for _, bad := range []string{"", "pkg @ https://example.com/pkg.whl", "pkg[", "pkg >= ", "-pkg", "pkg ; os_name"} {
		if _, err := parseRequirement(bad); err == nil {
			t.Errorf("%q parses as a requirement", bad)
		}
	}
}
