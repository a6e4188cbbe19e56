package main

// Packages on demand end to end: the real binary and guests, an npm
// registry and a Python simple index the test serves on loopback with
// packages it writes (packagestest), and, in TestPackagesFromNPM, real
// packages from the public npm registry pinned by version and integrity.

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"execd/internal/packages/packagestest"
)

// startPackagesDaemon runs execd with [packages] pointing at npm and
// index, its cache in cache.
func startPackagesDaemon(t *testing.T, data, cache, npm, index string) *daemon {
	t.Helper()
	return startDaemon(t, data, "", fmt.Sprintf("[sandbox]\ncache_dir = %q\n[packages]\nnpm_registry = %q\npython_index = %q\n", cache, npm, index))
}

// cacheEntries are the packages in the cache.
func cacheEntries(t *testing.T, cache string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(cache, "packages", "sha*"))
	return m
}

// fakePackages publishes the registry's packages: an ES module package
// with an exports map (conditions and a subpath), a CommonJS one with a
// dependency, a relative cycle and a nested copy of a conflicting version,
// and one that needs Node's fs.
func fakePackages(t *testing.T) *packagestest.NPM {
	reg := packagestest.NewNPM(t)
	reg.Add(t, "esm-pkg", "1.0.0", map[string]any{"type": "module", "exports": map[string]any{
		".":     map[string]any{"types": "./index.d.ts", "require": "./index.cjs", "import": "./index.js"},
		"./sub": "./lib/sub.js", "./feature/*": "./lib/features/*.js"}}, map[string]string{
		"index.js": "export const kind = 'esm'; export default 42;", "index.cjs": "module.exports = {kind: 'cjs'};",
		"lib/sub.js": "import d from 'esm-pkg'; export const sub = d + 1;", "lib/features/a.js": "export default 'feature a';"})
	reg.Add(t, "dep", "1.0.0", nil, map[string]string{"index.js": "module.exports = {n: 41};"})
	reg.Add(t, "dep", "2.0.0", nil, map[string]string{"index.js": "module.exports = {n: 2};"})
	reg.Add(t, "cjs-pkg", "1.0.0", map[string]any{"main": "lib/main", "dependencies": map[string]string{"dep": "^1.0.0"}}, map[string]string{
		"lib/main.js": "const dep = require('dep'); exports.value = dep.n + require('./one').n; exports.cycle = require('./b').seen; exports.file = __filename.endsWith('lib/main.js'); exports.path = require('node:path').join('a', '..', 'b');",
		"lib/one.js":  "exports.n = 1;",
		"lib/b.js":    "exports.early = 'partial'; exports.seen = require('./c').sawB;",
		"lib/c.js":    "exports.sawB = require('./b').early;"})
	reg.Add(t, "needs-fs", "1.0.0", nil, map[string]string{"index.js": "const fs = require('fs'); module.exports = fs;"})
	reg.Add(t, "auto-pkg", "1.0.0", map[string]any{"module": "esm.js"}, map[string]string{
		"index.js": "module.exports = 'cjs';", "esm.js": "import {v} from './v'; export default v;", "v.js": "export const v = 'esm via module';"})
	return reg
}

func TestPackagesEndToEnd(t *testing.T) {
	reg := fakePackages(t)
	idx := packagestest.NewIndex(t)
	idx.Add(t, packagestest.Wheel{Project: "demo-pkg", Version: "1.0", Requires: []string{"dep-pkg>=1", `winonly; sys_platform == "win32"`},
		Files: map[string]string{"demo_pkg/__init__.py": "from dep_pkg import twice\ndef hello(x):\n    return 'hello ' + twice(x)\n"}})
	idx.Add(t, packagestest.Wheel{Project: "dep-pkg", Version: "1.2", Files: map[string]string{"dep_pkg/__init__.py": "def twice(x):\n    return x * 2\n"}})
	idx.Add(t, packagestest.Wheel{Project: "dep-pkg", Version: "0.9", Files: map[string]string{"dep_pkg/__init__.py": "def twice(x):\n    return x\n"}})
	idx.Add(t, packagestest.Wheel{Project: "winonly", Version: "1.0", Files: map[string]string{"winonly/__init__.py": ""}})
	idx.Add(t, packagestest.Wheel{Project: "native-pkg", Version: "1.0", Tag: "cp311-cp311-manylinux_2_17_x86_64"})
	idx.Add(t, packagestest.Wheel{Project: "bad-hash", Version: "1.0", BadHash: true, Files: map[string]string{"bad_hash/__init__.py": ""}})
	data, cache := t.TempDir(), t.TempDir()
	d := startPackagesDaemon(t, data, cache, reg.URL(), idx.URL())
	c := newMCP(t, d.url, true)

	// The tool installs, with versions and sizes; a conflicting version
	// at the root nests the dependency's own copy.
	sc, isErr := c.Tool("install_packages", map[string]any{"workspace": "js", "language": "javascript", "packages": []any{"esm-pkg", "cjs-pkg", "dep@2"}})
	if isErr || !strings.Contains(fmt.Sprint(sc["installed"]), "name:cjs-pkg version:1.0.0") || !strings.Contains(fmt.Sprint(sc["installed"]), "name:dep version:1.0.0") {
		t.Fatalf("install_packages: %v", sc)
	}
	for _, tc := range []struct{ code, want string }{
		{`import d, {kind} from "esm-pkg"; [d, kind]`, `[42, "esm"]`},
		{`require("esm-pkg").kind`, `"cjs"`},
		{`import {sub} from "esm-pkg/sub"; import a from "esm-pkg/feature/a"; [sub, a]`, `[43, "feature a"]`},
		{`const m = require("cjs-pkg"); [m.value, m.cycle, m.file, m.path, require("dep").n]`, `[42, "partial", true, "b", 2]`},
		{`import cjs, {value} from "cjs-pkg"; [cjs.value, value]`, `[42, 42]`},
		{`import path from "node:path"; import {EventEmitter} from "events"; import util from "node:util"; import {Buffer} from "node:buffer"; import {fileURLToPath} from "node:url";
const e = new EventEmitter(); let got = 0; e.once("x", (v) => { got += v; }); e.emit("x", 2); e.emit("x", 3);
[path.relative("/a/b", "/a/c/d"), util.format("%s:%d %j", "n", 7, {a: 1}), Buffer.from("aGk=", "base64").toString(), Buffer.from("hi").toString("hex"), got, fileURLToPath("file:///workspace/x")]`,
			`["../c/d", "n:7 {\"a\":1}", "hi", "6869", 2, "/workspace/x"]`},
	} {
		if sc, isErr := c.run("js", tc.code); isErr || sc["result"] != tc.want {
			t.Errorf("%s\n= %v, want %s", tc.code, sc, tc.want)
		}
	}
	for _, tc := range []struct{ code, want string }{
		{`await import("esm-pkg/nope")`, `Package subpath './nope' is not defined by "exports" in esm-pkg@1.0.0`},
		{`require("needs-fs")`, `Cannot load Node's built-in module 'fs' (imported by needs-fs@1.0.0`},
		{`import cp from "node:child_process"`, `no 'child_process'`},
		{`import x from "no-such-package"`, `no-such-package`},
	} {
		if sc, isErr := c.run("js", tc.code); !isErr || !strings.Contains(fmt.Sprint(sc["error"]), tc.want) {
			t.Errorf("%s\n= %v, want an error with %q", tc.code, sc, tc.want)
		}
	}

	// A bare import of a package not installed installs it; its "module"
	// entry is an ES module whose relative imports have no extension.
	if sc, isErr := c.run("js", `import v from "auto-pkg"; v`); isErr || sc["result"] != `"esm via module"` {
		t.Fatalf("an import that installs: %v", sc)
	}
	if sc, isErr := c.run("js", `import ms from "npm:dep@1"; ms.n`); isErr || sc["result"] != `41` {
		t.Errorf("npm: specifier: %v", sc)
	}

	// A version the tool changes is what the next require finds, in the
	// same interpreter.
	if sc, isErr := c.run("js3", `require("dep").n`); isErr || sc["result"] != "2" {
		t.Errorf("dep's latest: %v", sc)
	}
	if sc, isErr := c.Tool("install_packages", map[string]any{"workspace": "js3", "language": "javascript", "packages": []any{"dep@1.0.0"}}); isErr {
		t.Fatalf("install_packages: %v", sc)
	}
	if sc, isErr := c.run("js3", `require("dep").n`); isErr || sc["result"] != "41" {
		t.Errorf("after install_packages dep@1.0.0: %v", sc)
	}

	// A second workspace of the same packages adds nothing to the cache
	// and fetches no tarball.
	entries, tarballs := len(cacheEntries(t, cache)), countTarballs(reg)
	if sc, isErr := c.run("js2", `import d from "esm-pkg"; d`); isErr || sc["result"] != "42" {
		t.Fatalf("second workspace: %v", sc)
	}
	if n := len(cacheEntries(t, cache)); n != entries || countTarballs(reg) != tarballs {
		t.Errorf("a second workspace made the cache %d entries (was %d) and fetched %d tarballs (was %d)", n, entries, countTarballs(reg), tarballs)
	}

	// Python: %pip and install(); a marker excludes winonly on wasi.
	sc, isErr = c.runLang("py", "python", "%pip install demo-pkg\nimport demo_pkg\ndemo_pkg.hello('ab')")
	if isErr || sc["result"] != `'hello abab'` || !strings.Contains(fmt.Sprint(sc["stdout"]), "Installed demo-pkg-1.0 dep-pkg-1.2") {
		t.Fatalf("%%pip install: %v", sc)
	}
	if sc, _ := c.Tool("list_workspaces", nil); !strings.Contains(fmt.Sprint(sc), "name:dep-pkg version:1.2") || strings.Contains(fmt.Sprint(sc), "winonly") {
		t.Errorf("list_workspaces: %v", sc)
	}
	for _, tc := range []struct{ code, want string }{
		{"from execd import install\ninstall('native-pkg')", "native-pkg has no pure-Python wheel"},
		{"!pip install bad-hash", "sha256"},
		{"from execd import install\ninstall('dep-pkg<1')", "dep-pkg>=1 (required by demo-pkg 1.0)"},
	} {
		if sc, isErr := c.runLang("py", "python", tc.code); !isErr || !strings.Contains(fmt.Sprint(sc["error"]), tc.want) {
			t.Errorf("%s\n= %v, want an error with %q", tc.code, sc, tc.want)
		}
	}
	if sc, isErr := c.runLang("py", "python", "import demo_pkg, importlib.metadata\n(demo_pkg.hello('x'), importlib.metadata.version('demo-pkg'))"); isErr || sc["result"] != `('hello xx', '1.0')` {
		t.Errorf("after refused installs: %v", sc)
	}
	if sc, isErr := c.Tool("install_packages", map[string]any{"workspace": "py", "language": "python", "packages": []any{"native-pkg"}}); !isErr || sc["code"] != "not_pure" {
		t.Errorf("install_packages of a project without a pure wheel: %v", sc)
	}

	// A fork gets the packages; a restart (hibernation on the way) keeps
	// them without fetching anything.
	if sc, isErr := c.Tool("fork_workspace", map[string]any{"workspace": "js", "new_workspace": "js-fork"}); isErr {
		t.Fatalf("fork: %v", sc)
	}
	if sc, isErr := c.run("js-fork", `import {sub} from "esm-pkg/sub"; require("cjs-pkg").value + sub`); isErr || sc["result"] != "85" {
		t.Errorf("in the fork: %v", sc)
	}
	// npm:dep@1 above made the workspace's own dep 1.x.
	if sc, isErr := c.run("js", `var kept = require("dep").n`); isErr {
		t.Fatalf("%v", sc)
	}
	d.stop()
	before := len(reg.Requests())
	d = startPackagesDaemon(t, data, cache, reg.URL(), idx.URL())
	c = newMCP(t, d.url, true)
	if sc, isErr := c.run("js", `import a from "esm-pkg/feature/a"; [a, require("cjs-pkg").value, kept]`); isErr || sc["result"] != `["feature a", 42, 41]` {
		t.Errorf("after a restart: %v", sc)
	}
	if sc, isErr := c.runLang("py", "python", "import dep_pkg\ndep_pkg.twice(3)"); isErr || sc["result"] != "6" {
		t.Errorf("python after a restart: %v", sc)
	}
	if got := reg.Requests()[before:]; len(got) != 0 {
		t.Errorf("the restart fetched %v", got)
	}

	// reset_workspace with files drops them.
	if sc, isErr := c.Tool("reset_workspace", map[string]any{"workspace": "js", "files": true}); isErr {
		t.Fatalf("reset: %v", sc)
	}
	if _, err := os.Stat(filepath.Join(data, "local", "js", ".execd", "packages.lock.json")); !os.IsNotExist(err) {
		t.Errorf("the lock after a reset of the files: %v", err)
	}
	d.stop()
}

func countTarballs(reg *packagestest.NPM) int {
	n := 0
	for _, p := range reg.Requests() {
		if strings.HasSuffix(p, ".tgz") {
			n++
		}
	}
	return n
}

// pinned are the real packages TestPackagesFromNPM installs, with the
// integrity the public registry gives for each.
var pinned = map[string]string{
	"dayjs@1.11.13":   "sha512-oaMBel6gjolK862uaPQOVTA7q3TZhuSvuMQAAglQDOWYO9A91IrAOUJEyKVlqJlHE0vq5p5UXxzdPfMH/x6xNg==",
	"nanoid@5.0.9":    "sha512-Aooyr6MXU6HpvvWXKoVoXwKMs/KyVakWwg7xQfv5/S/RIgJMy0Ifa45H9qqYy7pTCszrHzP21Uk4PZq2HpEM8Q==",
	"zod@3.25.76":     "sha512-gzUt/qt81nXsFGKIFcC3YnfEAx5NkunCfnDlvuBSSFS02bcXu4Lmea0AFIUwbLWxWPx3d9p8S5QoaujKcNQxcQ==",
	"papaparse@5.4.1": "sha512-HipMsgJkZu8br23pW15uvo6sib6wne/4woLZPlFf3rpDyMe9ywEXUsuD7+6K9PRkJlVT51j/sCOYDKGGS3ZJrw==",
	"date-fns@4.1.0":  "sha512-Ukq0owbQXxa/U3EGtsdVBkR1w7KOQ5gIBqdH2hkvknzZPYvBxb/aa6E8L7tmjFtkwZBu3UXBbjIgPo/Ez4xaNg==",
	"fs-extra@11.2.0": "sha512-PmDi3uwK5nFuXh7XDTlVnS17xJS7vW36is2+w3xcv8SVxiB4NyATf4ctkVY5bkSjX0Y4nbvZCq1/EjtEyr9ktw==",
}

// TestPackagesFromNPM installs real packages from registry.npmjs.org: an
// ES module package (nanoid, date-fns with a subpath), CommonJS ones
// (dayjs with a plugin, papaparse), one with an exports map and subpaths
// (zod), and one that needs fs (a clear refusal).
func TestPackagesFromNPM(t *testing.T) {
	data, cache := t.TempDir(), t.TempDir()
	d := startPackagesDaemon(t, data, cache, "https://registry.npmjs.org", "http://127.0.0.1:1/simple")
	c := newMCP(t, d.url, true)
	var specs []any
	for s := range pinned {
		specs = append(specs, s)
	}
	sc, isErr := c.Tool("install_packages", map[string]any{"workspace": "real", "language": "javascript", "packages": specs})
	if isErr {
		t.Fatalf("install_packages from registry.npmjs.org (reachable from this machine?): %v", sc)
	}
	lock, err := os.ReadFile(filepath.Join(data, "local", "real", ".execd", "packages.lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		NPM struct {
			Packages map[string]struct{ Version, Integrity string }
		}
	}
	if err := json.Unmarshal(lock, &l); err != nil {
		t.Fatal(err)
	}
	for spec, integrity := range pinned {
		name, version, _ := strings.Cut(spec, "@")
		if e := l.NPM.Packages["node_modules/"+name]; e.Version != version || e.Integrity != integrity || !strings.Contains(fmt.Sprint(sc["installed"]), "name:"+name+" version:"+version) {
			t.Errorf("%s is in the lock as %+v", spec, e)
		}
	}
	for _, tc := range []struct{ code, want string }{
		{`import { nanoid, customAlphabet } from "nanoid"; [nanoid().length, customAlphabet("ab", 4)().length]`, `[21, 4]`},
		{`import { format } from "date-fns"; import { addDays } from "date-fns/addDays"; format(addDays(new Date(2024, 0, 30), 3), "yyyy-MM-dd")`, `"2024-02-02"`},
		{`import dayjs from "dayjs"; import utc from "dayjs/plugin/utc"; dayjs.extend(utc); dayjs.utc("2024-03-01T12:00:00Z").add(1, "day").format()`, `"2024-03-02T12:00:00Z"`},
		{`const Papa = require("papaparse"); Papa.parse("a,b\n1,2", {header: true, dynamicTyping: true}).data`, `[{a: 1, b: 2}]`},
		{`import { z } from "zod"; import * as z4 from "zod/v4"; [z.object({n: z.number()}).safeParse({n: "x"}).success, z4.string().parse("ok")]`, `[false, "ok"]`},
	} {
		if sc, isErr := c.run("real", tc.code); isErr || sc["result"] != tc.want {
			t.Errorf("%s\n= %v, want %s", tc.code, sc, tc.want)
		}
	}
	if sc, isErr := c.run("real", `await import("fs-extra")`); !isErr || !strings.Contains(fmt.Sprint(sc["error"]), "Cannot load Node's built-in module 'fs' (imported by graceful-fs@") {
		t.Errorf("fs-extra: %v", sc)
	}
	// A second workspace of the same versions adds nothing to the cache.
	entries := len(cacheEntries(t, cache))
	if sc, isErr := c.Tool("install_packages", map[string]any{"workspace": "real2", "language": "javascript", "packages": []any{"dayjs@1.11.13", "zod@3.25.76"}}); isErr {
		t.Fatalf("second workspace: %v", sc)
	}
	if sc, isErr := c.run("real2", `import dayjs from "dayjs"; dayjs("2024-01-01").year()`); isErr || sc["result"] != "2024" {
		t.Errorf("second workspace: %v", sc)
	}
	if n := len(cacheEntries(t, cache)); n != entries {
		t.Errorf("a second workspace made the cache %d entries, was %d", n, entries)
	}
	d.stop()
}

// TestPackagesSurviveHibernation: packages a workspace imported, and
// those it installed without importing yet, import after the workspace
// hibernates (hibernate_after) and is restored, in both guests, without a
// request to the registry or the index.
func TestPackagesSurviveHibernation(t *testing.T) {
	reg := fakePackages(t)
	idx := packagestest.NewIndex(t)
	idx.Add(t, packagestest.Wheel{Project: "demo-pkg", Version: "1.0", Requires: []string{"dep-pkg>=1"},
		Files: map[string]string{"demo_pkg/__init__.py": "from dep_pkg import twice\ndef hello(x):\n    return 'hello ' + twice(x)\n"}})
	idx.Add(t, packagestest.Wheel{Project: "dep-pkg", Version: "1.2", Files: map[string]string{"dep_pkg/__init__.py": "def twice(x):\n    return x * 2\n"}})
	idx.Add(t, packagestest.Wheel{Project: "later-pkg", Version: "2.0", Files: map[string]string{"later_pkg/__init__.py": "V = 'later'\n"}})
	data, cache := t.TempDir(), t.TempDir()
	d := startDaemon(t, data, "", fmt.Sprintf("[sandbox]\ncache_dir = %q\n[packages]\nnpm_registry = %q\npython_index = %q\n", cache, reg.URL(), idx.URL()),
		`hibernate_after = "1s"`)
	c := newMCP(t, d.url, true)

	if sc, isErr := c.Tool("install_packages", map[string]any{"workspace": "hib", "language": "javascript", "packages": []any{"esm-pkg", "cjs-pkg"}}); isErr {
		t.Fatalf("install_packages: %v", sc)
	}
	if sc, isErr := c.run("hib", `import d from "esm-pkg"; var kept = d + require("cjs-pkg").value; kept`); isErr || sc["result"] != "84" {
		t.Fatalf("before hibernation: %v", sc)
	}
	if sc, isErr := c.Tool("install_packages", map[string]any{"workspace": "hib", "language": "python", "packages": []any{"demo-pkg", "later-pkg"}}); isErr {
		t.Fatalf("install_packages: %v", sc)
	}
	if sc, isErr := c.runLang("hib", "python", "import demo_pkg\nkept = demo_pkg.hello('ab')\nkept"); isErr || sc["result"] != `'hello abab'` {
		t.Fatalf("python before hibernation: %v", sc)
	}
	npmBefore, indexBefore := len(reg.Requests()), len(idx.Requests())

	waitFor(t, "both interpreters of hib hibernated", d.logs, func() bool { return len(workspaceImages(data, "hib")) >= 2 })
	for _, tc := range []struct{ lang, code, want string }{
		// kept is the interpreter's state (restored, not started again);
		// the subpath and the dependency are imported for the first time.
		{"javascript", `import a from "esm-pkg/feature/a"; import {sub} from "esm-pkg/sub"; [kept, a, sub, require("dep").n]`, `[84, "feature a", 43, 41]`},
		{"python", "import later_pkg, dep_pkg, importlib.metadata\n(kept, later_pkg.V, dep_pkg.twice(2), importlib.metadata.version('later-pkg'))", `('hello abab', 'later', 4, '2.0')`},
	} {
		if sc, isErr := c.runLang("hib", tc.lang, tc.code); isErr || sc["result"] != tc.want || sc["reset"] == true {
			t.Errorf("%s after hibernation: %v, want %s", tc.lang, sc, tc.want)
		}
	}
	if got := workspaceImages(data, "hib"); len(got) != 0 {
		t.Errorf("not restored from its images: %v", got)
	}
	if got := reg.Requests()[npmBefore:]; len(got) != 0 {
		t.Errorf("after hibernation the registry was asked for %v", got)
	}
	if got := idx.Requests()[indexBefore:]; len(got) != 0 {
		t.Errorf("after hibernation the index was asked for %v", got)
	}
	d.stop()
}

// TestInstallPackagesHostileRegistry: through the install_packages tool,
// a tarball that climbs out of its directory, one with a link out, a
// registry that answers garbage and one that hangs are each refused with
// an error that names the package and says why; nothing of them is left
// in the cache or the workspace, and a good package installs and imports
// afterwards.
func TestInstallPackagesHostileRegistry(t *testing.T) {
	reg := packagestest.NewNPM(t)
	pj := func(name string) packagestest.Entry {
		return packagestest.Entry{Name: "package/package.json", Body: `{"name":"` + name + `","version":"1.0.0"}`}
	}
	reg.AddTarball(t, "climbs", "1.0.0", packagestest.Tarball(t, pj("climbs"), packagestest.Entry{Name: "package/../../../escaped.js", Body: "pwned"}))
	reg.AddTarball(t, "links-out", "1.0.0", packagestest.Tarball(t, pj("links-out"),
		packagestest.Entry{Name: "package/passwd", Type: tar.TypeSymlink, Link: "/etc/passwd"}))
	reg.Add(t, "good", "1.0.0", nil, map[string]string{"index.js": "module.exports = 'good';"})
	reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
		switch r.URL.Path {
		case "/garbage":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"name": "garbage", "versions": {"1.0.0": [`))
			return true
		case "/hangs":
			<-r.Context().Done()
			return true
		}
		return false
	})
	data, cache := t.TempDir(), t.TempDir()
	d := startDaemon(t, data, "", fmt.Sprintf("[sandbox]\ncache_dir = %q\n[packages]\nnpm_registry = %q\nfetch_timeout = \"1s\"\n", cache, reg.URL()))
	c := newMCP(t, d.url, true)

	for _, tc := range []struct{ name, code, want string }{
		{"climbs", "unsafe", "goes up a directory"},
		{"links-out", "unsafe", "outside the package"},
		{"garbage", "registry", "not a packument"},
		{"hangs", "timeout", "packages.fetch_timeout"},
	} {
		sc, isErr := c.Tool("install_packages", map[string]any{"workspace": "hostile", "language": "javascript", "packages": []any{tc.name}})
		msg := fmt.Sprint(sc["error"])
		t.Logf("%s: %s: %s", tc.name, sc["code"], msg)
		if !isErr || sc["code"] != tc.code || !strings.Contains(msg, tc.name) || !strings.Contains(msg, tc.want) {
			t.Errorf("install_packages %s: %v, want code %s and an error naming it that says %q", tc.name, sc, tc.code, tc.want)
		}
	}
	if got := cacheEntries(t, cache); len(got) != 0 {
		t.Errorf("the refusals left %v in the cache", got)
	}
	for _, dir := range []string{cache, data} {
		filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err == nil && (e.Name() == "escaped.js" || e.Name() == "passwd") {
				t.Errorf("written: %s", p)
			}
			return nil
		})
	}
	if sc, isErr := c.Tool("install_packages", map[string]any{"workspace": "hostile", "language": "javascript", "packages": []any{"good"}}); isErr {
		t.Fatalf("a good package after the refusals: %v", sc)
	}
	if sc, isErr := c.run("hostile", `require("good")`); isErr || sc["result"] != `"good"` {
		t.Errorf("importing it: %v", sc)
	}
	if got := cacheEntries(t, cache); len(got) != 1 {
		t.Errorf("the cache after the good package: %v", got)
	}
	d.stop()
}

// TestPackagesChargeTheQuota: with the real binary and guest, a package
// only one workspace uses takes room from that workspace's disk quota
// beside its files; a second workspace installing it gives the room
// back, the second one's reset takes it again at once, and a restart
// measures the same from the locks on disk.
func TestPackagesChargeTheQuota(t *testing.T) {
	reg := packagestest.NewNPM(t)
	reg.Add(t, "big", "1.0.0", nil, map[string]string{"index.js": "//" + strings.Repeat("a", 600_000) + "\nmodule.exports = 7;"})
	data, cache := t.TempDir(), t.TempDir()
	conf := fmt.Sprintf("[sandbox]\ncache_dir = %q\n[packages]\nnpm_registry = %q\npython_index = \"http://127.0.0.1:1/simple\"\n", cache, reg.URL())
	d := startDaemon(t, data, "", conf, "max_disk_mib = 1")
	c := newMCP(t, d.url, true)
	install := func(c *mcp, ws string) {
		t.Helper()
		if sc, isErr := c.Tool("install_packages", map[string]any{"workspace": ws, "language": "javascript", "packages": []any{"big"}}); isErr {
			t.Fatalf("install_packages in %s: %v", ws, sc)
		}
	}
	// write writes n bytes to name and says what the package exports and
	// what the write threw.
	write := func(c *mcp, ws, name string, n int) string {
		t.Helper()
		sc, isErr := c.run(ws, fmt.Sprintf(`let err = ""; try { fs.writeFile("/workspace/%s", "x".repeat(%d)) } catch (e) { err = String(e) } require("big") + " " + err`, name, n))
		if isErr {
			t.Fatalf("%s: %v", ws, sc)
		}
		r, _ := sc["result"].(string)
		return r
	}
	install(c, "a")
	if r := write(c, "a", "data", 500_000); !strings.HasPrefix(r, `"7 `) || !strings.Contains(r, "rror") {
		t.Fatalf("500 kB of files beside a 600 kB package only a uses, under 1 MiB: %s", r)
	}
	install(c, "b")
	if r := write(c, "a", "data", 500_000); r != `"7 "` {
		t.Fatalf("the same write once b uses the package too: %s", r)
	}
	if sc, isErr := c.Tool("reset_workspace", map[string]any{"workspace": "b", "files": true}); isErr {
		t.Fatalf("reset_workspace: %v", sc)
	}
	if r := write(c, "a", "more", 1000); !strings.HasPrefix(r, `"7 `) || !strings.Contains(r, "rror") {
		t.Errorf("a write once b dropped the package: %s", r)
	}
	d.stop()

	d = startDaemon(t, data, "", conf, "max_disk_mib = 1")
	c = newMCP(t, d.url, true)
	if r := write(c, "a", "more", 1000); !strings.HasPrefix(r, `"7 `) || !strings.Contains(r, "rror") {
		t.Errorf("a write after a restart: %s", r)
	}
	d.stop()
}
