package main

// Packages on demand, measured with the real binary and the public npm
// registry: a cold install of date-fns against `npm install` of the same
// on the host, and the first import of a cached package in a new
// workspace.

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

const benchPackage = "date-fns@4.1.0"

// BenchmarkPackagesDateFns: per iteration a daemon with an empty cache
// (not timed), then install_packages of date-fns (cold-install-ms); the
// first import in that workspace (first-import-ms); an import in a new
// workspace, which installs from the cache (new-workspace-import-ms: the
// registry is asked for the packument, the tarball is not fetched); and
// `npm install` of the same with an empty npm cache (npm-install-ms).
func BenchmarkPackagesDateFns(b *testing.B) {
	npm, _ := exec.LookPath("npm") // without npm, no comparison

	var cold, first, fresh, host time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		data, cache := b.TempDir(), b.TempDir()
		d := launchBench(b, benchTOML(data, cache))
		// Both guests compiled and imaged first: not what is measured.
		for _, lang := range []string{"javascript", "python"} {
			if r := d.call("", "warm", lang, "1"); r != "1" {
				b.Fatalf("warm-up: %s", r)
			}
		}
		b.StartTimer()

		start := time.Now()
		if sc := d.tool("", "install_packages", map[string]any{"workspace": "w", "language": "javascript", "packages": []any{benchPackage}}); sc == nil || sc["error"] != nil {
			b.Fatalf("install: %v", sc)
		}
		cold += time.Since(start)
		start = time.Now()
		if r := d.call("", "w", "javascript", `import { addDays } from "date-fns"; addDays(new Date(0), 1).getTime()`); r != "86400000" {
			b.Fatalf("import: %s", r)
		}
		first += time.Since(start)
		start = time.Now()
		if r := d.call("", "w2", "javascript", `import { addDays } from "npm:`+benchPackage+`"; addDays(new Date(0), 1).getTime()`); r != "86400000" {
			b.Fatalf("import in a new workspace: %s", r)
		}
		fresh += time.Since(start)

		if npm == "" {
			b.StopTimer()
			d.stop(b)
			continue
		}
		dir := b.TempDir()
		os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"bench","version":"1.0.0"}`), 0o600)
		cmd := exec.Command(npm, "install", "--no-audit", "--no-fund", "--ignore-scripts", "--cache", filepath.Join(dir, ".npm-cache"), benchPackage)
		cmd.Dir = dir
		start = time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("npm install: %v\n%s", err, out)
		}
		host += time.Since(start)
		b.StopTimer()
		d.stop(b)
	}
	n := float64(b.N) * float64(time.Millisecond)
	b.ReportMetric(float64(cold)/n, "cold-install-ms")
	if host > 0 {
		b.ReportMetric(float64(host)/n, "npm-install-ms")
		b.ReportMetric(float64(cold)/float64(host), "install-ratio")
	}
	b.ReportMetric(float64(first)/n, "first-import-ms")
	b.ReportMetric(float64(fresh)/n, "new-workspace-import-ms")
	b.ReportMetric(0, "ns/op")
}

func benchTOML(data, cache string) string {
	return "[server]\nlisten = \"127.0.0.1:0\"\n[sandbox]\ncache_dir = \"" + cache + "\"\n[workspace]\ndata_dir = \"" + data + "\"\n"
}
