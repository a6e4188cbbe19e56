package packages

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"execd/internal/config"
)

// The public npm registry, with versions and integrities pinned here: a
// new release changes nothing these tests see.
var pinnedNPM = map[string]string{
	"nanoid@5.0.9":  "sha512-Aooyr6MXU6HpvvWXKoVoXwKMs/KyVakWwg7xQfv5/S/RIgJMy0Ifa45H9qqYy7pTCszrHzP21Uk4PZq2HpEM8Q==",
	"zod@3.25.76":   "sha512-gzUt/qt81nXsFGKIFcC3YnfEAx5NkunCfnDlvuBSSFS02bcXu4Lmea0AFIUwbLWxWPx3d9p8S5QoaujKcNQxcQ==",
	"debug@2.6.9":   "sha512-bC7ElrdJaJnPbAP+1EotYvqZsb3ecl5wi6Bfi6BJTUcNowp6cvspg0jXznRTKDjm/E7AdgFBVeAPVMNcKGsHMA==",
	"ms@2.0.0":      "sha512-Tpp60P6IUJDTuOq/5Z8cdskzJujfwqfOTkrwIwj7IRISpnkJnT6SyJ4PCPnGMoFjC9ddhal5KVIYtAt97ix05A==",
	"ms@2.1.3":      "sha512-6FlzubTLZG3J2a/NVCAleEhjzq5oxgHyaCU9yYXvcLsvoVaHJq/s5xXI6/XXP6tz7R9xAOtHnSO/tXtF3WRTlA==",
	"dayjs@1.11.13": "sha512-oaMBel6gjolK862uaPQOVTA7q3TZhuSvuMQAAglQDOWYO9A91IrAOUJEyKVlqJlHE0vq5p5UXxzdPfMH/x6xNg==",
}

func publicRegistry(t *testing.T) (*Service, context.Context) {
	if testing.Short() {
		t.Skip("reaches registry.npmjs.org")
	}
	cfg := config.Default().Packages
	s, err := New(cfg, t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return s, ctx
}

// checkPinned fails unless every package of the tree is one pinned
// above, with the lock's integrity the pinned one, and its files there.
func checkPinned(t *testing.T, s *Service, lock *Lock, tree *NPMTree) {
	t.Helper()
	for _, p := range tree.Packages {
		id := p.Name + "@" + p.Version
		want, ok := pinnedNPM[id]
		if !ok {
			t.Errorf("%s at %s is not a pinned version", id, p.Path)
			continue
		}
		if got := lock.NPM.Packages[p.Path].Integrity; got != want {
			t.Errorf("%s: integrity %s, want %s", id, got, want)
		}
		var pj struct{ Name, Version string }
		b, err := os.ReadFile(filepath.Join(s.CacheDir(), filepath.FromSlash(p.Dir), "package.json"))
		if err != nil || json.Unmarshal(b, &pj) != nil || pj.Name != p.Name || pj.Version != p.Version {
			t.Errorf("%s: package.json in %s is %+v (%v)", id, p.Dir, pj, err)
		}
	}
}

func TestNPMRegistryESM(t *testing.T) {
	s, ctx := publicRegistry(t)
	lock, tree, err := s.AddNPM(ctx, nil, "nanoid@5.0.9")
	if err != nil {
		t.Fatal(err)
	}
	checkPinned(t, s, lock, tree)
	p := tree.Packages[tree.Root["nanoid"]]
	if p.Type != "module" || p.Path != "node_modules/nanoid" {
		t.Errorf("nanoid: type %q at %s", p.Type, p.Path)
	}
	var exports map[string]json.RawMessage
	if err := json.Unmarshal(p.Exports, &exports); err != nil || exports["./non-secure"] == nil {
		t.Errorf("nanoid's exports %s", p.Exports)
	}
	if lock.NPM.Requires["nanoid"] != "5.0.9" {
		t.Errorf("requires %v", lock.NPM.Requires)
	}
}

// TestNPMRegistryCommonJSWithDependencies: debug@2.6.9 needs ms 2.0.0
// exactly; with the workspace asking for ms 2.1.3 too, npm nests 2.0.0
// under debug.
func TestNPMRegistryCommonJSWithDependencies(t *testing.T) {
	s, ctx := publicRegistry(t)
	lock, tree, err := s.AddNPM(ctx, nil, "debug@2.6.9", "ms@2.1.3", "dayjs@1.11.13")
	if err != nil {
		t.Fatal(err)
	}
	checkPinned(t, s, lock, tree)
	places := map[string]string{}
	for _, p := range tree.Packages {
		places[p.Path] = p.Version
	}
	want := map[string]string{"node_modules/debug": "2.6.9", "node_modules/debug/node_modules/ms": "2.0.0",
		"node_modules/ms": "2.1.3", "node_modules/dayjs": "1.11.13"}
	if !reflect.DeepEqual(places, want) {
		t.Fatalf("placed %v, want %v", places, want)
	}
	debug := tree.Packages[tree.Root["debug"]]
	if ms := tree.Packages[debug.Deps["ms"]]; ms.Version != "2.0.0" {
		t.Errorf("debug finds ms %s", ms.Version)
	}
	if ms := tree.Packages[tree.Root["ms"]]; ms.Version != "2.1.3" {
		t.Errorf("the workspace finds ms %s", ms.Version)
	}
	if debug.Type != "" || debug.Main != "./src/index.js" {
		t.Errorf("debug: type %q main %q", debug.Type, debug.Main)
	}

	// The lock alone, in a service with an empty cache, gives the same
	// tree: a fork or a restart on another host.
	b, _ := lock.Marshal()
	back, err := ParseLock(b)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := New(config.Default().Packages, t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tree2, err := s2.NPM(ctx, back)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tree2, tree) {
		t.Errorf("from the lock:\n%+v\nwant\n%+v", tree2, tree)
	}
}

// TestNPMRegistryExportsAndTheCache: zod's exports map has subpaths; a
// second resolve of the same package, by another workspace or the same
// one, adds nothing to the cache.
func TestNPMRegistryExportsAndTheCache(t *testing.T) {
	s, ctx := publicRegistry(t)
	lock, tree, err := s.AddNPM(ctx, nil, "zod@3.25.76/v4")
	if err != nil {
		t.Fatal(err)
	}
	checkPinned(t, s, lock, tree)
	var exports map[string]json.RawMessage
	if err := json.Unmarshal(tree.Packages[tree.Root["zod"]].Exports, &exports); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{".", "./v4", "./v4/mini", "./v3"} {
		if exports[sub] == nil {
			t.Errorf("zod's exports have no %q", sub)
		}
	}
	entries := cacheEntries(t, s)
	if len(entries) != 1 {
		t.Fatalf("cache entries %v", entries)
	}
	info, err := os.Stat(filepath.Join(s.CacheDir(), entries[0]))
	if err != nil {
		t.Fatal(err)
	}
	_, tree2, err := s.AddNPM(ctx, nil, "zod@3.25.76")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AddNPM(ctx, lock, "zod"); err != nil {
		t.Fatal(err)
	}
	again, err := os.Stat(filepath.Join(s.CacheDir(), entries[0]))
	if err != nil {
		t.Fatal(err)
	}
	if got := cacheEntries(t, s); !reflect.DeepEqual(got, entries) || !again.ModTime().Equal(info.ModTime()) {
		t.Errorf("the cache went from %v to %v", entries, got)
	}
	if tree2.Packages[0].Dir != tree.Packages[0].Dir {
		t.Errorf("two directories for one package: %s, %s", tree.Packages[0].Dir, tree2.Packages[0].Dir)
	}
}
