package packages

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"execd/internal/config"
	"execd/internal/packages/packagestest"
)

// testConfig is the default [packages] with small limits, pointing at
// servers the test runs.
func testConfig(npmURL, pyURL string) config.Packages {
	c := config.Default().Packages
	if npmURL != "" {
		c.NPMRegistry = npmURL
	}
	if pyURL != "" {
		c.PythonIndex = pyURL
	}
	c.MaxPackageBytes = 1 << 20
	c.MaxTotalBytes = 4 << 20
	c.FetchTimeout = config.Duration{Duration: 10 * time.Second}
	return c
}

func newService(t *testing.T, cfg config.Packages) (*Service, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := New(cfg, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

// cacheEntries lists the cache's entries, and fails the test if anything
// is left in its temporary directory: a refused package leaves nothing.
func cacheEntries(t *testing.T, s *Service) []string {
	t.Helper()
	ents, err := os.ReadDir(s.CacheDir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.Name() != ".tmp" {
			out = append(out, e.Name())
		}
	}
	tmp, _ := os.ReadDir(filepath.Join(s.CacheDir(), ".tmp"))
	for _, e := range tmp {
		t.Errorf("left in the cache's .tmp: %s", e.Name())
	}
	return out
}

// wantCode fails unless err is an *Error with that code whose message
// holds every one of words.
func wantCode(t *testing.T, err error, code Code, words ...string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want a %s Error", err, err, code)
	}
	t.Logf("%s: %s", e.Code, e.Message)
	if e.Code != code {
		t.Fatalf("error code %s (%s), want %s", e.Code, e.Message, code)
	}
	for _, w := range words {
		if !strings.Contains(e.Message, w) {
			t.Errorf("message %q does not say %q", e.Message, w)
		}
	}
}

// tarEntry is one entry of a tarball a test builds.
type tarEntry struct {
	name, body, link string
	typ              byte
}

// buildTgz is packagestest.Tarball of entries.
func buildTgz(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	es := make([]packagestest.Entry, len(entries))
	for i, e := range entries {
		es[i] = packagestest.Entry{Name: e.name, Body: e.body, Link: e.link, Type: e.typ}
	}
	return packagestest.Tarball(t, es...)
}

func sri512(b []byte) string {
	s := sha512.Sum512(b)
	return "sha512-" + base64.StdEncoding.EncodeToString(s[:])
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// fakeVersion is one version a fake registry serves.
type fakeVersion struct {
	deps      map[string]string
	peer      map[string]string
	optional  map[string]string
	tarball   []byte
	integrity string // "" = the tarball's own
	unpacked  int64
}

// fakeRegistry serves packuments and tarballs for the packages it is given;
// handle, when set, answers instead (hostile registries).
type fakeRegistry struct {
	t        *testing.T
	srv      *httptest.Server
	mu       sync.Mutex
	pkgs     map[string]map[string]fakeVersion
	requests []string
	handle   func(w http.ResponseWriter, r *http.Request) bool
}

func newFakeRegistry(t *testing.T) *fakeRegistry {
	f := &fakeRegistry{t: t, pkgs: map[string]map[string]fakeVersion{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeRegistry) add(name, version string, v fakeVersion) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pkgs[name] == nil {
		f.pkgs[name] = map[string]fakeVersion{}
	}
	if v.tarball == nil {
		v.tarball = buildTgz(f.t, tarEntry{name: "package/package.json", body: fmt.Sprintf(`{"name":%q,"version":%q,"main":"index.js"}`, name, version)},
			tarEntry{name: "package/index.js", body: "module.exports = " + fmt.Sprintf("%q", name+"@"+version)})
	}
	f.pkgs[name][version] = v
}

func (f *fakeRegistry) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, r.URL.Path)
	handle := f.handle
	f.mu.Unlock()
	if handle != nil && handle(w, r) {
		return
	}
	path := strings.TrimPrefix(r.URL.EscapedPath(), "/")
	if name, file, ok := strings.Cut(path, "/-/"); ok {
		name = strings.Replace(name, "%2F", "/", 1)
		f.mu.Lock()
		vs := f.pkgs[name]
		f.mu.Unlock()
		for ver, v := range vs {
			if file == tarballName(name, ver) {
				w.Header().Set("Content-Type", "application/octet-stream")
				w.Write(v.tarball)
				return
			}
		}
		http.NotFound(w, r)
		return
	}
	name := strings.Replace(path, "%2F", "/", 1)
	f.mu.Lock()
	vs, ok := f.pkgs[name]
	f.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	versions := map[string]any{}
	var latest version
	for ver, v := range vs {
		integrity := v.integrity
		if integrity == "" {
			integrity = sri512(v.tarball)
		}
		dist := map[string]any{"tarball": f.srv.URL + "/" + name + "/-/" + tarballName(name, ver), "integrity": integrity}
		if v.unpacked > 0 {
			dist["unpackedSize"] = v.unpacked
		}
		versions[ver] = map[string]any{"name": name, "version": ver, "dependencies": v.deps,
			"peerDependencies": v.peer, "optionalDependencies": v.optional, "dist": dist}
		if pv, _ := parseVersion(ver); compareVersions(pv, latest) > 0 {
			latest = pv
		}
	}
	w.Header().Set("Content-Type", "application/vnd.npm.install-v1+json")
	json.NewEncoder(w).Encode(map[string]any{"name": name, "dist-tags": map[string]string{"latest": latest.String()}, "versions": versions})
}

func tarballName(name, ver string) string {
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	return name + "-" + ver + ".tgz"
}

// testWheel is a wheel a test builds: METADATA, WHEEL and RECORD as a
// build backend writes them, and the package's files.
type testWheel struct {
	name, version  string
	tag            string // "" = py3-none-any
	requires       []string
	requiresPython string
	files          map[string]string
}

func (w testWheel) filename() string {
	tag := w.tag
	if tag == "" {
		tag = "py3-none-any"
	}
	return strings.ReplaceAll(w.name, "-", "_") + "-" + w.version + "-" + tag + ".whl"
}

func (w testWheel) build(t *testing.T) []byte {
	t.Helper()
	dist := strings.ReplaceAll(w.name, "-", "_") + "-" + w.version
	files := map[string]string{}
	for k, v := range w.files {
		files[k] = v
	}
	if len(w.files) == 0 {
		files[strings.ReplaceAll(w.name, "-", "_")+"/__init__.py"] = fmt.Sprintf("VERSION = %q\n", w.version)
	}
	md := "Metadata-Version: 2.1\nName: " + w.name + "\nVersion: " + w.version + "\n"
	if w.requiresPython != "" {
		md += "Requires-Python: " + w.requiresPython + "\n"
	}
	for _, r := range w.requires {
		md += "Requires-Dist: " + r + "\n"
	}
	md += "\nA package a test built.\nRequires-Dist: not-a-header\n"
	files[dist+".dist-info/METADATA"] = md
	files[dist+".dist-info/WHEEL"] = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
	names := make([]string, 0, len(files))
	for k := range files {
		names = append(names, k)
	}
	sort.Strings(names)
	var record strings.Builder
	for _, n := range names {
		s := sha256.Sum256([]byte(files[n]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", n, base64.RawURLEncoding.EncodeToString(s[:]), len(files[n]))
	}
	record.WriteString(dist + ".dist-info/RECORD,,\n")
	files[dist+".dist-info/RECORD"] = record.String()
	names = append(names, dist+".dist-info/RECORD")
	return packagestest.Zip(t, names, files)
}

// indexFileEntry is one file a fake index lists.
type indexFileEntry struct {
	filename string
	data     []byte
	sha256   string // "" = the file's own; "-" = none given
	yanked   bool
}

// fakeIndex is a simple index on 127.0.0.1: /simple/<project>/ in HTML
// (PEP 503) or, when asked for it, JSON (PEP 691); files under /files/.
type fakeIndex struct {
	t        *testing.T
	srv      *httptest.Server
	mu       sync.Mutex
	projects map[string][]indexFileEntry
	json     bool
	requests []string
	handle   func(w http.ResponseWriter, r *http.Request) bool
}

func newFakeIndex(t *testing.T) *fakeIndex {
	f := &fakeIndex{t: t, projects: map[string][]indexFileEntry{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeIndex) url() string { return f.srv.URL + "/simple" }

func (f *fakeIndex) addWheel(w testWheel) []byte {
	b := w.build(f.t)
	f.addFile(normalizePyName(w.name), indexFileEntry{filename: w.filename(), data: b})
	return b
}

func (f *fakeIndex) addFile(project string, e indexFileEntry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.projects[project] = append(f.projects[project], e)
}

func (f *fakeIndex) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, r.URL.Path)
	handle, useJSON := f.handle, f.json
	f.mu.Unlock()
	if handle != nil && handle(w, r) {
		return
	}
	if fn, ok := strings.CutPrefix(r.URL.Path, "/files/"); ok {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, es := range f.projects {
			for _, e := range es {
				if e.filename == fn {
					w.Write(e.data)
					return
				}
			}
		}
		http.NotFound(w, r)
		return
	}
	project := strings.Trim(strings.TrimPrefix(r.URL.Path, "/simple/"), "/")
	f.mu.Lock()
	es, ok := f.projects[project]
	f.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	hashOf := func(e indexFileEntry) string {
		switch e.sha256 {
		case "":
			return sha256hex(e.data)
		case "-":
			return ""
		}
		return e.sha256
	}
	if useJSON && strings.Contains(r.Header.Get("Accept"), simpleJSON) {
		var files []map[string]any
		for _, e := range es {
			fm := map[string]any{"filename": e.filename, "url": "../../files/" + e.filename, "hashes": map[string]string{}}
			if h := hashOf(e); h != "" {
				fm["hashes"] = map[string]string{"sha256": h}
			}
			if e.yanked {
				fm["yanked"] = "broken"
			}
			files = append(files, fm)
		}
		w.Header().Set("Content-Type", simpleJSON)
		json.NewEncoder(w).Encode(map[string]any{"meta": map[string]string{"api-version": "1.1"}, "name": project, "files": files})
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<!DOCTYPE html>\n<html><body><h1>Links for %s</h1>\n", project)
	for _, e := range es {
		frag := ""
		if h := hashOf(e); h != "" {
			frag = "#sha256=" + h
		}
		y := ""
		if e.yanked {
			y = ` data-yanked=""`
		}
		fmt.Fprintf(w, "<a href=\"/files/%s%s\"%s>%s</a><br/>\n", e.filename, frag, y, e.filename)
	}
	fmt.Fprint(w, "</body></html>\n")
}
