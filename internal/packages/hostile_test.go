package packages

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"errors"
	"hash/crc32"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"execd/internal/config"
)

// TestHostileTarballs: each tarball is refused with an Error that says
// why, and the cache is left as it was, nothing outside it written.
func TestHostileTarballs(t *testing.T) {
	pj := tarEntry{name: "package/package.json", body: `{"name":"evil","version":"1.0.0"}`}
	zeros := strings.Repeat("\x00", 8<<20) // 8 MiB, over the 1 MiB limit
	for _, c := range []struct {
		name    string
		entries []tarEntry
		code    Code
		words   []string
	}{
		{"dot-dot", []tarEntry{pj, {name: "package/../../escaped", body: "x"}}, CodeUnsafe, []string{"goes up a directory"}},
		{"absolute", []tarEntry{pj, {name: "/tmp/escaped", body: "x"}}, CodeUnsafe, []string{"absolute"}},
		{"symlink out", []tarEntry{pj, {name: "package/link", typ: tar.TypeSymlink, link: "../../../etc/passwd"}}, CodeUnsafe, []string{"outside the package"}},
		{"symlink just out", []tarEntry{pj, {name: "package/link", typ: tar.TypeSymlink, link: "../sibling"}}, CodeUnsafe, []string{"outside the package"}},
		{"hardlink to another top", []tarEntry{pj, {name: "package/hard", typ: tar.TypeLink, link: "other"}}, CodeUnsafe, []string{"outside the package"}},
		{"absolute symlink", []tarEntry{pj, {name: "package/link", typ: tar.TypeSymlink, link: "/etc/passwd"}}, CodeUnsafe, []string{"outside the package"}},
		{"hardlink out", []tarEntry{pj, {name: "package/hard", typ: tar.TypeLink, link: "../etc/passwd"}}, CodeUnsafe, []string{"outside the package"}},
		{"gzip bomb", []tarEntry{pj, {name: "package/zeros", body: zeros}}, CodeTooLarge, []string{"packages.max_package_bytes"}},
		{"twice", []tarEntry{pj, {name: "package/a", body: "1"}, {name: "package/a", body: "2"}}, CodeUnsafe, []string{"twice"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := newFakeRegistry(t)
			tgz := buildTgz(t, c.entries...)
			if c.name == "gzip bomb" && len(tgz) > 1<<20 {
				t.Fatalf("the bomb is %d bytes compressed, not a bomb", len(tgz))
			}
			reg.add("evil", "1.0.0", fakeVersion{tarball: tgz})
			s, dir := newService(t, testConfig(reg.srv.URL, ""))
			_, _, err := s.AddNPM(context.Background(), nil, "evil")
			wantCode(t, err, c.code, c.words...)
			if e := cacheEntries(t, s); len(e) != 0 {
				t.Errorf("the cache holds %v", e)
			}
			filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && strings.Contains(d.Name(), "escaped") {
					t.Errorf("written outside: %s", p)
				}
				return nil
			})
			stillWorksNPM(t, s, reg, "evil")
		})
	}
}

func TestTarballLinkInsideIsSkipped(t *testing.T) {
	reg := newFakeRegistry(t)
	reg.add("linky", "1.0.0", fakeVersion{tarball: buildTgz(t,
		tarEntry{name: "package/package.json", body: `{"name":"linky","version":"1.0.0"}`},
		tarEntry{name: "package/lib/a.js", body: "a"},
		tarEntry{name: "package/b.js", typ: tar.TypeSymlink, link: "lib/a.js"})})
	s, _ := newService(t, testConfig(reg.srv.URL, ""))
	_, tree, err := s.AddNPM(context.Background(), nil, "linky")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(s.CacheDir(), tree.Packages[0].Dir)
	if _, err := os.Lstat(filepath.Join(dir, "b.js")); !os.IsNotExist(err) {
		t.Errorf("the link was made: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "lib", "a.js")); err != nil {
		t.Error(err)
	}
}

func TestNPMIntegrityMismatch(t *testing.T) {
	reg := newFakeRegistry(t)
	reg.add("swapped", "1.0.0", fakeVersion{integrity: sri512([]byte("another tarball"))})
	s, _ := newService(t, testConfig(reg.srv.URL, ""))
	_, _, err := s.AddNPM(context.Background(), nil, "swapped")
	wantCode(t, err, CodeIntegrity, "swapped@1.0.0", "integrity")
	if e := cacheEntries(t, s); len(e) != 0 {
		t.Errorf("the cache holds %v", e)
	}
	stillWorksNPM(t, s, reg, "swapped")
}

// TestHugePackages: a 1 GiB package is refused by the size its registry
// declares, by its Content-Length, and, with neither, by the bytes that
// stream in.
func TestHugePackages(t *testing.T) {
	const gib = 1 << 30
	t.Run("declared", func(t *testing.T) {
		reg := newFakeRegistry(t)
		reg.add("huge", "1.0.0", fakeVersion{unpacked: gib})
		s, _ := newService(t, testConfig(reg.srv.URL, ""))
		_, _, err := s.AddNPM(context.Background(), nil, "huge")
		wantCode(t, err, CodeTooLarge, "huge")
		for _, p := range reg.requests {
			if strings.HasSuffix(p, ".tgz") {
				t.Errorf("the tarball was fetched")
			}
		}
		stillWorksNPM(t, s, reg, "huge")
	})
	for _, mode := range []string{"content-length", "streamed"} {
		t.Run(mode, func(t *testing.T) {
			reg := newFakeRegistry(t)
			reg.add("huge", "1.0.0", fakeVersion{})
			var sent atomic.Int64
			done := make(chan struct{})
			reg.handle = func(w http.ResponseWriter, r *http.Request) bool {
				if !strings.HasSuffix(r.URL.Path, ".tgz") {
					return false
				}
				defer close(done)
				if mode == "content-length" {
					w.Header().Set("Content-Length", strconv.Itoa(gib))
				}
				chunk := make([]byte, 64<<10)
				for sent.Load() < gib {
					if _, err := w.Write(chunk); err != nil {
						return true // the client hung up
					}
					sent.Add(int64(len(chunk)))
				}
				return true
			}
			s, _ := newService(t, testConfig(reg.srv.URL, ""))
			_, _, err := s.AddNPM(context.Background(), nil, "huge")
			wantCode(t, err, CodeTooLarge, "packages.max_package_bytes")
			if e := cacheEntries(t, s); len(e) != 0 {
				t.Errorf("the cache holds %v", e)
			}
			// The client stops reading soon after max_package_bytes (1
			// MiB here): what the server got out is that and the
			// connection's buffers, not the gigabyte.
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("the server is still sending a minute after the refusal")
			}
			t.Logf("the server sent %d KiB before the client stopped", sent.Load()>>10)
			if n := sent.Load(); n > 32<<20 {
				t.Errorf("the server sent %d MiB of the 1 GiB before the client stopped", n>>20)
			}
			stillWorksNPM(t, s, reg, "huge")
		})
	}
	t.Run("workspace total", func(t *testing.T) {
		reg := newFakeRegistry(t)
		reg.add("a", "1.0.0", fakeVersion{unpacked: 900 << 10})
		reg.add("b", "1.0.0", fakeVersion{unpacked: 900 << 10})
		cfg := testConfig(reg.srv.URL, "")
		cfg.MaxTotalBytes = 1 << 20
		s, _ := newService(t, cfg)
		_, _, err := s.AddNPM(context.Background(), nil, "a", "b")
		wantCode(t, err, CodeTooLarge, "packages.max_total_bytes")
	})
}

// TestHostileRegistries: a registry or index that hangs, or answers
// something that is not what it should be.
func TestHostileRegistries(t *testing.T) {
	hang := func(w http.ResponseWriter, r *http.Request) bool {
		<-r.Context().Done()
		return true
	}
	answer := func(ctype, body string) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Content-Type", ctype)
			w.Write([]byte(body))
			return true
		}
	}
	for _, c := range []struct {
		name   string
		handle func(w http.ResponseWriter, r *http.Request) bool
		code   Code
		words  []string
	}{
		{"hangs", hang, CodeTimeout, []string{"packages.fetch_timeout"}},
		{"bad JSON", answer("application/json", `{"name": "pkg", "versions": {`), CodeRegistry, []string{"not a packument"}},
		{"no versions", answer("application/json", `{"name": "pkg"}`), CodeRegistry, []string{"no versions"}},
		{"not an object", answer("application/json", `[1, 2, 3]`), CodeRegistry, []string{"not a packument"}},
		{"wrong content type", answer("text/html", `<html>hello</html>`), CodeRegistry, []string{"content type"}},
		{"another package", answer("application/json", `{"name": "other", "versions": {}}`), CodeRegistry, []string{"other"}},
		{"error status", func(w http.ResponseWriter, r *http.Request) bool {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return true
		}, CodeRegistry, []string{"503"}},
	} {
		t.Run("npm "+c.name, func(t *testing.T) {
			reg := newFakeRegistry(t)
			reg.handle = c.handle
			cfg := testConfig(reg.srv.URL, "")
			cfg.FetchTimeout = config.Duration{Duration: 200 * time.Millisecond}
			s, _ := newService(t, cfg)
			_, _, err := s.AddNPM(context.Background(), nil, "pkg")
			wantCode(t, err, c.code, c.words...)
			stillWorksNPM(t, s, reg, "pkg")
		})
	}
	for _, c := range []struct {
		name   string
		handle func(w http.ResponseWriter, r *http.Request) bool
		code   Code
		words  []string
	}{
		{"hangs", hang, CodeTimeout, []string{"packages.fetch_timeout"}},
		{"bad JSON", answer(simpleJSON, `{"meta": {"api-version": "1.0"}, "files": [`), CodeRegistry, []string{"not valid JSON"}},
		{"JSON of another kind", answer(simpleJSON, `{"hello": "world"}`), CodeRegistry, []string{"PEP 691"}},
		{"binary as HTML", answer("text/html", "\x00\x01\x02PK\x03\x04"), CodeRegistry, []string{"not HTML"}},
		{"HTML without links", answer("text/html", "<html><body>nothing here</body></html>"), CodeNotFound, []string{"no files"}},
		{"bad hash", answer("text/html", `<a href="/files/pkg-1.0-py3-none-any.whl#sha256=zz">pkg-1.0-py3-none-any.whl</a>`), CodeRegistry, []string{"sha256"}},
		{"wrong content type", answer("application/octet-stream", "whatever"), CodeRegistry, []string{"content type"}},
	} {
		t.Run("python "+c.name, func(t *testing.T) {
			idx := newFakeIndex(t)
			idx.handle = c.handle
			cfg := testConfig("", idx.url())
			cfg.FetchTimeout = config.Duration{Duration: 200 * time.Millisecond}
			s, _ := newService(t, cfg)
			_, _, err := s.AddPython(context.Background(), nil, "pkg")
			wantCode(t, err, c.code, c.words...)
			stillWorksPython(t, s, idx, "pkg")
		})
	}
}

// rawZip builds a zip whose entries are given as they should appear,
// sizes and modes included, whatever they claim.
type rawEntry struct {
	name     string
	body     string
	mode     fs.FileMode
	declared uint64 // the uncompressed size the header claims; 0 = the true one
}

func buildZip(t *testing.T, entries ...rawEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		if e.mode != 0 {
			h.SetMode(e.mode)
		}
		var comp bytes.Buffer
		fw, _ := flate.NewWriter(&comp, flate.BestCompression)
		fw.Write([]byte(e.body))
		fw.Close()
		h.CRC32 = crc32.ChecksumIEEE([]byte(e.body))
		h.CompressedSize64 = uint64(comp.Len())
		h.UncompressedSize64 = uint64(len(e.body))
		if e.declared != 0 {
			h.UncompressedSize64 = e.declared
		}
		w, err := zw.CreateRaw(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(comp.Bytes())
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestHostileWheels(t *testing.T) {
	const fn = "evil-1.0-py3-none-any.whl"
	info := []rawEntry{
		{name: "evil-1.0.dist-info/METADATA", body: "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n"},
		{name: "evil-1.0.dist-info/WHEEL", body: "Wheel-Version: 1.0\n"},
	}
	zeros := strings.Repeat("\x00", 8<<20)
	for _, c := range []struct {
		name  string
		entry rawEntry
		code  Code
		words []string
	}{
		{"dot-dot", rawEntry{name: "../../escaped.py", body: "x"}, CodeUnsafe, []string{"goes up a directory"}},
		{"absolute", rawEntry{name: "/tmp/escaped.py", body: "x"}, CodeUnsafe, []string{"absolute"}},
		{"backslash", rawEntry{name: `..\..\escaped.py`, body: "x"}, CodeUnsafe, []string{"backslash"}},
		{"symlink out", rawEntry{name: "evil/link", body: "../../../etc/passwd", mode: fs.ModeSymlink | 0o777}, CodeUnsafe, []string{"outside the package"}},
		{"zip bomb, declared", rawEntry{name: "evil/zeros", body: zeros}, CodeTooLarge, []string{"declares"}},
		{"zip bomb, lying", rawEntry{name: "evil/zeros", body: zeros, declared: 100}, CodeTooLarge, []string{"packages.max_package_bytes"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			idx := newFakeIndex(t)
			idx.addFile("evil", indexFileEntry{filename: fn, data: buildZip(t, append(append([]rawEntry{}, info...), c.entry)...)})
			s, dir := newService(t, testConfig("", idx.url()))
			_, _, err := s.AddPython(context.Background(), nil, "evil")
			if c.name == "zip bomb, lying" {
				// archive/zip may notice the lie before the limit does;
				// either way the wheel is refused.
				var e *Error
				if ok := asError(err, &e); !ok || (e.Code != CodeTooLarge && e.Code != CodeUnsafe) {
					t.Fatalf("error %v, want too_large or unsafe", err)
				}
			} else {
				wantCode(t, err, c.code, c.words...)
			}
			if e := cacheEntries(t, s); len(e) != 0 {
				t.Errorf("the cache holds %v", e)
			}
			filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && strings.Contains(d.Name(), "escaped") {
					t.Errorf("written outside: %s", p)
				}
				return nil
			})
			stillWorksPython(t, s, idx, "evil")
		})
	}
	t.Run("not a wheel", func(t *testing.T) {
		idx := newFakeIndex(t)
		idx.addFile("evil", indexFileEntry{filename: fn, data: buildZip(t, rawEntry{name: "evil/__init__.py", body: ""})})
		s, _ := newService(t, testConfig("", idx.url()))
		_, _, err := s.AddPython(context.Background(), nil, "evil")
		wantCode(t, err, CodeRegistry, "dist-info")
		if e := cacheEntries(t, s); len(e) != 0 {
			t.Errorf("the cache holds %v", e)
		}
	})
	t.Run("not a zip", func(t *testing.T) {
		idx := newFakeIndex(t)
		idx.addFile("evil", indexFileEntry{filename: fn, data: gzipped("not a zip")})
		s, _ := newService(t, testConfig("", idx.url()))
		_, _, err := s.AddPython(context.Background(), nil, "evil")
		wantCode(t, err, CodeUnsafe, "not a zip")
		stillWorksPython(t, s, idx, "evil")
	})
}

func gzipped(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

// TestEditedLock: a lock the workspace's code rewrote cannot point the
// host anywhere else, nor at another package's files.
func TestEditedLock(t *testing.T) {
	reg := newFakeRegistry(t)
	reg.add("a", "1.0.0", fakeVersion{})
	reg.add("b", "1.0.0", fakeVersion{})
	s, _ := newService(t, testConfig(reg.srv.URL, ""))
	lock, _, err := s.AddNPM(context.Background(), nil, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	// b's integrity given to a: refused by name.
	ea, eb := lock.NPM.Packages["node_modules/a"], lock.NPM.Packages["node_modules/b"]
	ea.Integrity = eb.Integrity
	lock.NPM.Packages["node_modules/a"] = ea
	_, err = s.NPM(context.Background(), lock)
	wantCode(t, err, CodeIntegrity, "a@1.0.0")

	// A resolved URL elsewhere is never fetched: a new cache asks the
	// registry, whose integrity is not the lock's.
	ea.Integrity = sri512([]byte("something else"))
	ea.Resolved = "http://169.254.169.254/latest/meta-data"
	lock.NPM.Packages["node_modules/a"] = ea
	s2, _ := newService(t, testConfig(reg.srv.URL, ""))
	_, err = s2.NPM(context.Background(), lock)
	wantCode(t, err, CodeIntegrity, "registry now gives")

	for _, bad := range []string{
		`{"lockfileVersion": 2}`,
		`{"lockfileVersion": 1, "npm": {"requires": {}, "packages": {"node_modules/../x": {"version": "1.0.0", "integrity": "sha512-AA=="}}}}`,
		`{"lockfileVersion": 1, "npm": {"requires": {"a": "git+https://example.com/a.git"}, "packages": {}}}`,
		`{"lockfileVersion": 1, "npm": {"requires": {}, "packages": {"node_modules/a": {"version": "1.0.0", "integrity": "sha1-AAAAAAAAAAAAAAAAAAAAAAAAAAA="}}}}`,
		`{"lockfileVersion": 1, "python": {"requires": [], "packages": {"numpy": {"version": "2.0", "wheel": "numpy-2.0-cp311-cp311-linux_x86_64.whl", "sha256": "` + strings.Repeat("0", 64) + `"}}}}`,
		`{"lockfileVersion": 1, "python": {"requires": [], "packages": {"attrs": {"version": "99.0", "wheel": "attrs-23.2.0-py3-none-any.whl", "sha256": "` + strings.Repeat("0", 64) + `"}}}}`,
		`{"lockfileVersion": 1, "surprise": true}`,
	} {
		if _, err := ParseLock([]byte(bad)); err == nil {
			t.Errorf("ParseLock(%s) accepted it", bad)
		}
	}
}

func asError(err error, e **Error) bool {
	var x *Error
	ok := errors.As(err, &x)
	*e = x
	return ok
}

// stillWorksNPM: after a refusal, the same Service installs name@1.0.0
// once the registry serves a good one: the refusal left nothing in the
// cache, and nothing that stops a later install.
func stillWorksNPM(t *testing.T, s *Service, reg *fakeRegistry, name string) {
	t.Helper()
	reg.mu.Lock()
	reg.handle = nil
	reg.mu.Unlock()
	reg.add(name, "1.0.0", fakeVersion{})
	before := len(cacheEntries(t, s))
	_, tree, err := s.AddNPM(context.Background(), nil, name)
	if err != nil {
		t.Fatalf("a good %s after the refusal: %v", name, err)
	}
	if n := len(cacheEntries(t, s)); n != before+1 {
		t.Errorf("the good package made the cache %d entries, was %d", n, before)
	}
	if b, err := os.ReadFile(filepath.Join(s.CacheDir(), tree.Packages[0].Dir, "index.js")); err != nil || !strings.Contains(string(b), name+"@1.0.0") {
		t.Errorf("the good package's files: %q %v", b, err)
	}
}

// stillWorksPython is stillWorksNPM for a wheel of project name.
func stillWorksPython(t *testing.T, s *Service, idx *fakeIndex, name string) {
	t.Helper()
	idx.mu.Lock()
	idx.handle = nil
	idx.projects = map[string][]indexFileEntry{}
	idx.mu.Unlock()
	idx.addWheel(testWheel{name: name, version: "1.0"})
	before := len(cacheEntries(t, s))
	_, env, err := s.AddPython(context.Background(), nil, name)
	if err != nil {
		t.Fatalf("a good %s after the refusal: %v", name, err)
	}
	if n := len(cacheEntries(t, s)); n != before+1 {
		t.Errorf("the good wheel made the cache %d entries, was %d", n, before)
	}
	if b, err := os.ReadFile(filepath.Join(s.CacheDir(), env.Packages[0].Dir, name, "__init__.py")); err != nil || !strings.Contains(string(b), `"1.0"`) {
		t.Errorf("the good wheel's files: %q %v", b, err)
	}
}
