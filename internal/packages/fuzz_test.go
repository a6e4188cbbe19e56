package packages

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func FuzzSemverRange(f *testing.F) {
	for _, s := range []string{"^1.2.3", "~1.2", "1.x || >=2.5.0", "1.2.3 - 2.3", ">=1.2.3, <2", "*", "", "||",
		"^1.2.3-beta.2", "<=>1", ">= 1.2.3 < 2", "1.*.3", "v1.2.3+build.1"} {
		f.Add(s, "1.2.3-beta.4")
	}
	f.Fuzz(func(t *testing.T, rng, ver string) {
		r, ok := parseRange(rng)
		v, vok := parseVersion(ver)
		if vok {
			back, ok := parseVersion(v.String())
			if !ok || compareVersions(back, v) != 0 || back.String() != v.String() {
				t.Fatalf("%q prints as %q, which reads back as %v", ver, v.String(), back)
			}
		}
		if ok && vok {
			r.satisfies(v)
		}
	})
}

func FuzzNPMSpec(f *testing.F) {
	for _, s := range []string{"dayjs", "npm:zod@^3/v4", "@scope/pkg@next/sub", "pkg@>=1 <2", "@/x", "a//b", "a/b/../../x", "a@1/..", "0/0.."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := ParseNPMSpec(s)
		if err != nil {
			return
		}
		if !validNPMName(spec.Name) {
			t.Fatalf("%q read as %+v", s, spec)
		}
		if spec.Subpath == "" {
			return
		}
		// A subpath names a file inside the package: it never climbs out
		// of it. "0.." is a file name like any other; ".." is not.
		if !strings.HasPrefix(spec.Subpath, "/") || strings.Contains(spec.Subpath, "//") {
			t.Fatalf("%q read with subpath %q", s, spec.Subpath)
		}
		for _, c := range strings.Split(spec.Subpath[1:], "/") {
			if c == ".." {
				t.Fatalf("%q read with subpath %q, which climbs out of the package", s, spec.Subpath)
			}
		}
	})
}

func FuzzPackument(f *testing.F) {
	f.Add([]byte(`{"name":"a","dist-tags":{"latest":"1.0.0"},"versions":{"1.0.0":{"name":"a","version":"1.0.0","dependencies":{"b":"^1"},"dist":{"tarball":"http://x/a.tgz","integrity":"sha512-AA=="}},"0.9.0":{"dependencies":[],"deprecated":"no"}}}`), "^1")
	f.Add([]byte(`{"versions":{"1.0.0":{"peerDependenciesMeta":{"x":{"optional":true}},"optionalDependencies":{"y":1}}}}`), "latest")
	f.Fuzz(func(t *testing.T, b []byte, want string) {
		p, err := parsePackument("a", b)
		if err != nil {
			return
		}
		m, err := p.pick("a", want)
		if err == nil && (m.Name != "a" || m.Version == "") {
			t.Fatalf("picked %+v", m)
		}
	})
}

func FuzzIndexPage(f *testing.F) {
	f.Add([]byte(`<html><a href="../files/a-1.0-py3-none-any.whl#sha256=`+strings.Repeat("0", 64)+`" data-requires-python="&gt;=3.8">a-1.0-py3-none-any.whl</a></html>`), false)
	f.Add([]byte(`{"meta":{"api-version":"1.1"},"files":[{"filename":"a-1.0-py3-none-any.whl","url":"https://x/a.whl","hashes":{"sha256":"00"},"yanked":"why"}]}`), true)
	f.Fuzz(func(t *testing.T, b []byte, asJSON bool) {
		mt := "text/html"
		if asJSON {
			mt = simpleJSON
		}
		files, err := parseIndexPage("a", "https://index.example/simple/a/", mt, b)
		if err != nil {
			return
		}
		for _, fl := range files {
			if !strings.HasPrefix(fl.url, "http://") && !strings.HasPrefix(fl.url, "https://") || strings.ContainsAny(fl.filename, "/\\") || fl.filename == "" {
				t.Fatalf("file %+v", fl)
			}
		}
	})
}

func FuzzMetadata(f *testing.F) {
	f.Add([]byte("Metadata-Version: 2.1\nName: a\nVersion: 1.0\nRequires-Dist: b>=1; extra == 'x'\nRequires-Dist: c\n  (>=2)\n\nbody\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, ok := parseMetadata(b)
		if ok && (m.name == "" || m.version == "") {
			t.Fatalf("%+v", m)
		}
		wheelVersionOK(b)
	})
}

func FuzzMarker(f *testing.F) {
	for _, s := range []string{`sys_platform == "wasi"`, `python_version < "3.8" or (extra == 'x' and os_name != "nt")`,
		`"win" not in sys_platform`, `platform.machine == 'wasm32'`, `((((os_name == "posix"))))`} {
		f.Add(s, "x")
	}
	f.Fuzz(func(t *testing.T, s, extra string) {
		m, err := parseMarker(s)
		if err == nil {
			m.eval(extra)
		}
	})
}

func FuzzRequirement(f *testing.F) {
	for _, s := range []string{"attrs", "attrs>=23,<25", `rich[jupyter] (==13.7.*) ; python_version >= "3.8"`, "a~=1.4.5", "a===weird", "a!=1.0+local"} {
		f.Add(s, "1.4.9")
	}
	f.Fuzz(func(t *testing.T, s, ver string) {
		r, err := parseRequirement(s)
		v, vok := parsePyVersion(ver)
		if vok {
			back, ok := parsePyVersion(v.String())
			if !ok || comparePy(back, v) != 0 {
				t.Fatalf("%q prints as %q, which reads back differently", ver, v.String())
			}
		}
		if err == nil {
			if !validPyName(r.name) {
				t.Fatalf("%q read with name %q", s, r.name)
			}
			if vok {
				r.spec.contains(v)
			}
			r.applies([]string{"x"})
		}
	})
}

func FuzzWheelName(f *testing.F) {
	for _, s := range []string{"a-1.0-py3-none-any.whl", "a_b-1.0-1-py2.py3-none-any.whl", "numpy-2.1.0-cp311-cp311-manylinux_2_17_x86_64.whl"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, ok := parseWheelName(s)
		if ok && !validPyName(w.name) {
			t.Fatalf("%q read as %+v", s, w)
		}
	})
}

func FuzzEntryPath(f *testing.F) {
	for _, s := range []string{"package/index.js", "../x", "/abs", "a/./b/../c", `a\b`, "a//b/", "."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, ok, err := entryPath(s)
		if err != nil || !ok {
			return
		}
		if strings.HasPrefix(p, "/") || strings.Contains(p, "\\") || strings.Contains(p, "\x00") {
			t.Fatalf("%q made safe as %q", s, p)
		}
		for _, c := range strings.Split(p, "/") {
			if c == ".." || c == "." || c == "" {
				t.Fatalf("%q made safe as %q", s, p)
			}
		}
	})
}

// FuzzUnpack unpacks whatever the fuzzer makes, as a tarball and as a
// wheel, and checks that nothing was written beside the directory given.
func FuzzUnpack(f *testing.F) {
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	tw.WriteHeader(&tar.Header{Name: "package/a.js", Mode: 0o644, Size: 1})
	tw.Write([]byte("x"))
	tw.WriteHeader(&tar.Header{Name: "package/l", Typeflag: tar.TypeSymlink, Linkname: "../x"})
	tw.Close()
	f.Add(gzipped(tb.String()))
	f.Add(testWheel{name: "a", version: "1.0"}.build(&testing.T{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		base := t.TempDir()
		for _, kind := range []string{"tgz", "zip"} {
			root := filepath.Join(base, kind)
			if err := os.Mkdir(root, 0o755); err != nil {
				t.Fatal(err)
			}
			if kind == "tgz" {
				untarGz(bytes.NewReader(b), root, "a", 1<<20)
			} else {
				unzip(bytes.NewReader(b), int64(len(b)), root, "a", 1<<20, func(s string) string { return s })
			}
		}
		ents, _ := os.ReadDir(base)
		if len(ents) != 2 {
			t.Fatalf("written beside the roots: %v", ents)
		}
		removeAll(base)
	})
}

func FuzzLock(f *testing.F) {
	f.Add([]byte(`{"lockfileVersion":1,"npm":{"requires":{"a":"^1.0.0"},"packages":{"node_modules/a":{"version":"1.0.0","integrity":"` + sri512(nil) + `","dependencies":{"b":"1"}},"node_modules/a/node_modules/b":{"version":"1.0.0","integrity":"` + sri512([]byte("b")) + `"}}},"python":{"requires":["c>=1"],"packages":{"c":{"version":"1.0","wheel":"c-1.0-py3-none-any.whl","sha256":"` + sha256hex(nil) + `"}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLock(b)
		if err != nil {
			return
		}
		out, err := l.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseLock(out); err != nil {
			t.Fatalf("a lock that was read does not read back: %v\n%s", err, out)
		}
		if l.NPM != nil {
			fromLock(l.NPM)
		}
	})
}
