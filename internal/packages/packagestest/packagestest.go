// Package packagestest serves an npm registry and a Python simple index
// on loopback for tests of what uses internal/packages: packages the test
// writes, file by file, with the hashes real registries give.
package packagestest

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
)

// NPM is a registry: packuments at /<name>, tarballs at
// /<name>/-/<file>.tgz, each with its sha512 integrity.
type NPM struct {
	Srv *httptest.Server
	mu  sync.Mutex
	// pkgs: name → version → (manifest, tarball)
	pkgs     map[string]map[string]npmVersion
	requests []string
	handler  func(w http.ResponseWriter, req *http.Request) bool
}

type npmVersion struct {
	manifest map[string]any
	tgz      []byte
}

// NewNPM starts an empty registry, closed at the end of the test.
func NewNPM(t testing.TB) *NPM {
	r := &NPM{pkgs: map[string]map[string]npmVersion{}}
	r.Srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Srv.Close)
	return r
}

// URL is the registry's, for packages.npm_registry.
func (r *NPM) URL() string { return r.Srv.URL }

// Add publishes name@version: pkg is its package.json (name and version
// are filled in; its dependencies are the manifest's too), files the
// others, by path in the package.
func (r *NPM) Add(t testing.TB, name, version string, pkg map[string]any, files map[string]string) {
	t.Helper()
	if pkg == nil {
		pkg = map[string]any{}
	}
	pkg["name"], pkg["version"] = name, version
	pj, err := json.Marshal(pkg)
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{"package.json": string(pj)}
	for k, v := range files {
		all[k] = v
	}
	r.publish(name, version, pkg, tarball(t, all))
}

// AddTarball publishes name@version as the tarball tgz, whatever it
// holds, with its own sha512 integrity: a hostile package (Tarball
// builds one).
func (r *NPM) AddTarball(t testing.TB, name, version string, tgz []byte) {
	t.Helper()
	r.publish(name, version, map[string]any{}, tgz)
}

// Handle makes h answer first: a request h reports handled (true) is
// not served by the registry (a registry that hangs, or answers garbage).
func (r *NPM) Handle(h func(w http.ResponseWriter, req *http.Request) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handler = h
}

func (r *NPM) publish(name, version string, pkg map[string]any, tgz []byte) {
	m := map[string]any{"name": name, "version": version}
	for _, k := range []string{"dependencies", "peerDependencies", "optionalDependencies"} {
		if v, ok := pkg[k]; ok {
			m[k] = v
		}
	}
	sum := sha512.Sum512(tgz)
	m["dist"] = map[string]any{"tarball": r.Srv.URL + "/" + name + "/-/" + tgzName(name, version),
		"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum[:])}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pkgs[name] == nil {
		r.pkgs[name] = map[string]npmVersion{}
	}
	r.pkgs[name][version] = npmVersion{manifest: m, tgz: tgz}
}

// Requests are the paths asked for so far, in order.
func (r *NPM) Requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.requests...)
}

func tgzName(name, version string) string {
	return name[strings.LastIndex(name, "/")+1:] + "-" + version + ".tgz"
}

func (r *NPM) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests = append(r.requests, req.URL.Path)
	h := r.handler
	r.mu.Unlock()
	if h != nil && h(w, req) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	path := strings.Replace(strings.TrimPrefix(req.URL.EscapedPath(), "/"), "%2F", "/", 1)
	if name, file, ok := strings.Cut(path, "/-/"); ok {
		for ver, v := range r.pkgs[name] {
			if file == tgzName(name, ver) {
				w.Header().Set("Content-Type", "application/octet-stream")
				w.Write(v.tgz)
				return
			}
		}
		http.NotFound(w, req)
		return
	}
	vs, ok := r.pkgs[path]
	if !ok {
		http.NotFound(w, req)
		return
	}
	versions := map[string]any{}
	var names []string
	for ver, v := range vs {
		versions[ver] = v.manifest
		names = append(names, ver)
	}
	sort.Strings(names) // tests publish versions whose order sorts
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"name": path, "dist-tags": map[string]string{"latest": names[len(names)-1]}, "versions": versions})
}

// Entry is one entry of a tarball Tarball builds, its name as it is
// (npm's "package/" prefix included), of type Type (tar.TypeReg when 0).
type Entry struct {
	Name, Body, Link string
	Type             byte
}

// Tarball is a gzipped tarball of entries exactly as given: ".." in
// names, links pointing anywhere.
func Tarball(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Mode: 0o644, Size: int64(len(e.Body)), Typeflag: e.Type, Linkname: e.Link}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.Body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	gz.Close()
	return buf.Bytes()
}

func tarball(t testing.TB, files map[string]string) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		body := files[n]
		if err := tw.WriteHeader(&tar.Header{Name: "package/" + n, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	gz.Close()
	return buf.Bytes()
}

// Index is a PEP 503 simple index of wheels: /<project>/ lists each
// project's files with their sha256.
type Index struct {
	Srv      *httptest.Server
	mu       sync.Mutex
	files    map[string]map[string][]byte // project → file name → bytes
	bad      map[string]bool              // file names listed with a wrong hash
	requests []string
}

// NewIndex starts an empty index, closed at the end of the test.
func NewIndex(t testing.TB) *Index {
	x := &Index{files: map[string]map[string][]byte{}, bad: map[string]bool{}}
	x.Srv = httptest.NewServer(http.HandlerFunc(x.serve))
	t.Cleanup(x.Srv.Close)
	return x
}

// URL is the index's, for packages.python_index.
func (x *Index) URL() string { return x.Srv.URL + "/simple" }

// Wheel is one wheel to build.
type Wheel struct {
	Project, Version string
	Tag              string            // "py3-none-any" when empty
	Requires         []string          // Requires-Dist lines
	Files            map[string]string // path in the wheel → content
	BadHash          bool              // the index lists a hash that is not the file's
}

// Add builds w and lists it.
func (x *Index) Add(t testing.TB, w Wheel) {
	t.Helper()
	if w.Tag == "" {
		w.Tag = "py3-none-any"
	}
	dist := strings.ReplaceAll(w.Project, "-", "_")
	info := dist + "-" + w.Version + ".dist-info/"
	meta := "Metadata-Version: 2.1\nName: " + w.Project + "\nVersion: " + w.Version + "\n"
	for _, r := range w.Requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	files := map[string]string{info + "METADATA": meta,
		info + "WHEEL": "Wheel-Version: 1.0\nGenerator: packagestest\nRoot-Is-Purelib: true\nTag: " + w.Tag + "\n"}
	for k, v := range w.Files {
		files[k] = v
	}
	var record strings.Builder
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		record.WriteString(n + ",,\n")
	}
	files[info+"RECORD"] = record.String() + info + "RECORD,,\n"
	names = append(names, info+"RECORD")
	whl := Zip(t, names, files)
	name := fmt.Sprintf("%s-%s-%s.whl", dist, w.Version, w.Tag)
	project := strings.ToLower(strings.NewReplacer("_", "-", ".", "-").Replace(w.Project))
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.files[project] == nil {
		x.files[project] = map[string][]byte{}
	}
	x.files[project][name] = whl
	x.bad[name] = w.BadHash
}

// Zip is a zip archive of files, the entries in the order of names
// (the files a wheel holds, its RECORD last).
func Zip(t testing.TB, names []string, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	for _, n := range names {
		f, err := z.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte(files[n]))
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Requests are the paths asked for so far, in order.
func (x *Index) Requests() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]string(nil), x.requests...)
}

func (x *Index) serve(w http.ResponseWriter, req *http.Request) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.requests = append(x.requests, req.URL.Path)
	p := strings.Trim(strings.TrimPrefix(req.URL.Path, "/simple"), "/")
	project, file, _ := strings.Cut(p, "/")
	files, ok := x.files[project]
	if !ok {
		http.NotFound(w, req)
		return
	}
	if file != "" {
		b, ok := files[file]
		if !ok {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "text/html")
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "<!DOCTYPE html><html><body>")
	for _, n := range names {
		sum := sha256.Sum256(files[n])
		h := hex.EncodeToString(sum[:])
		if x.bad[n] {
			h = strings.Repeat("0", 64)
		}
		fmt.Fprintf(w, "<a href=\"%s#sha256=%s\">%s</a>\n", n, h, n)
	}
	fmt.Fprintln(w, "</body></html>")
}
