package worker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Base images are deterministic: made twice, their memory is the same, so
// a cache that is lost can be made again and images made against it still
// restore. The cached file is written 0600 and read by the next engine.
func TestBaseImagesAreDeterministic(t *testing.T) {
	t.Parallel()
	shared := testEngine(t, true) // fills the compilation cache
	dir := t.TempDir()
	// A cache directory of our own for images, sharing the compiled code.
	entries, err := os.ReadDir(testCacheDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range entries {
		if ent.Name() != "images" {
			if err := os.Symlink(filepath.Join(testCacheDir, ent.Name()), filepath.Join(dir, ent.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg := testConfig(true)
	cfg.CacheDir = dir
	made := newTestEngine(t, cfg)
	files, err := filepath.Glob(filepath.Join(dir, "images", "*.img"))
	if err != nil || len(files) != len(made.Languages()) {
		t.Fatalf("cached base images: %v, %v; want one per language", files, err)
	}
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, st.Mode().Perm())
		}
	}
	loaded := newTestEngine(t, cfg)
	for _, lang := range made.Languages() {
		a, b, c := shared.guests[lang].base, made.guests[lang].base, loaded.guests[lang].base
		if a == nil || b == nil || c == nil {
			t.Fatalf("%s: no base image", lang)
		}
		if a.sum != b.sum || b.sum != c.sum {
			t.Errorf("%s: base images %x, %x (made again), %x (loaded); want one", lang, a.sum[:6], b.sum[:6], c.sum[:6])
		}
		if lang == "python" && !strings.Contains(b.img.init.preload, "statistics") {
			t.Errorf("python base image without the preload: %q", b.img.init.preload)
		}
	}
	// A damaged cache file is made again, not used.
	if err := os.WriteFile(files[0], []byte("execdimg garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	again := newTestEngine(t, cfg)
	for _, lang := range made.Languages() {
		if b := again.guests[lang].base; b == nil || b.sum != made.guests[lang].base.sum {
			t.Errorf("%s: base image after a damaged cache: %v", lang, b)
		}
	}
}

// A preloaded module is loaded in a new Python worker but not bound.
func TestPythonPreload(t *testing.T) {
	t.Parallel()
	w := langWorker(t, testEngine(t, true), "python", WorkerOptions{})
	r := mustRun(t, w, "import sys\n[m for m in ('json', 'statistics', 'dataclasses', 'typing') if m not in sys.modules]", StatusOK)
	if value(r) != "[]" {
		t.Errorf("modules not preloaded: %s", value(r))
	}
	if r := mustRun(t, w, "'json' in dir()", StatusOK); value(r) != "False" {
		t.Errorf("a preloaded module is bound in __main__: %s", value(r))
	}
}

// A preload that cannot be imported leaves it out, and the guest works.
func TestPythonPreloadFailure(t *testing.T) {
	t.Parallel()
	cfg := testConfig(true)
	cfg.PythonPreload = []string{"json", "no_such_module_here"}
	e := newTestEngine(t, cfg)
	if b := e.guests["python"].base; b == nil || b.img.init.preload != "" {
		t.Fatalf("base image after a failed preload: %+v", b)
	}
	w := langWorker(t, e, "python", WorkerOptions{})
	mustRun(t, w, "import json; json.dumps([1])", StatusOK)
}
