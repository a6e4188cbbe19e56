package packages

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// pyEnvVersions is name → version of an environment.
func pyEnvVersions(env *PythonEnv) map[string]string {
	m := map[string]string{}
	for _, p := range env.Packages {
		m[p.Name] = p.Version
	}
	return m
}

func TestPythonDependencyFromAnIndex(t *testing.T) {
	for _, form := range []string{"html", "json"} {
		t.Run(form, func(t *testing.T) {
			idx := newFakeIndex(t)
			idx.json = form == "json"
			idx.addWheel(testWheel{name: "helper", version: "1.0"})
			idx.addWheel(testWheel{name: "helper", version: "2.0"})
			idx.addWheel(testWheel{name: "helper", version: "3.0b1"}) // a prerelease: not taken
			idx.addWheel(testWheel{name: "helper", version: "2.5", requiresPython: ">=3.12"})
			idx.addWheel(testWheel{name: "my-app", version: "1.0", requires: []string{"helper>=1.0"},
				files: map[string]string{"my_app/__init__.py": "from helper import VERSION\n"}})
			s, _ := newService(t, testConfig("", idx.url()))
			ctx := context.Background()
			lock, env, err := s.AddPython(ctx, nil, "My_App")
			if err != nil {
				t.Fatal(err)
			}
			if got, want := pyEnvVersions(env), map[string]string{"my-app": "1.0", "helper": "2.0"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("installed %v, want %v", got, want)
			}
			for _, p := range env.Packages {
				init := filepath.Join(s.CacheDir(), filepath.FromSlash(p.Dir), strings.ReplaceAll(p.Name, "-", "_"), "__init__.py")
				if _, err := os.Stat(init); err != nil {
					t.Errorf("%s: %v", p.Name, err)
				}
			}
			if len(env.Paths) != 2 || env.Paths[0] != env.Packages[0].Dir {
				t.Errorf("paths %v", env.Paths)
			}
			if deps := lock.Python.Packages["my-app"].Dependencies; !reflect.DeepEqual(deps, []string{"helper"}) {
				t.Errorf("my-app's dependencies in the lock: %v", deps)
			}

			// The lock, through its bytes, gives the same directories
			// without asking the index anything more.
			b, err := lock.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseLock(b)
			if err != nil {
				t.Fatal(err)
			}
			before := len(idx.requests)
			entries := cacheEntries(t, s)
			env2, err := s.Python(ctx, back)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(env2, env) || len(idx.requests) != before {
				t.Errorf("from the lock: %+v after %d more requests, want %+v and none", env2, len(idx.requests)-before, env)
			}
			// Asking again adds nothing to the cache.
			if _, _, err := s.AddPython(ctx, back, "my-app"); err != nil {
				t.Fatal(err)
			}
			if got := cacheEntries(t, s); !reflect.DeepEqual(got, entries) {
				t.Errorf("the cache went from %v to %v", entries, got)
			}

			// A new service with an empty cache, from the lock alone,
			// fetches the same wheels again and checks them.
			s2, _ := newService(t, testConfig("", idx.url()))
			env3, err := s2.Python(ctx, back)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(env3, env) {
				t.Errorf("restored %+v, want %+v", env3, env)
			}
		})
	}
}

func TestPythonMarkersAndExtras(t *testing.T) {
	idx := newFakeIndex(t)
	idx.addWheel(testWheel{name: "tool", version: "1.0", requires: []string{
		`winonly>=1; sys_platform == "win32"`,
		`posixdep; os_name == "posix"`,
		`oldpy; python_version < "3.8"`,
		`fastlib; extra == "fast"`,
	}})
	idx.addWheel(testWheel{name: "posixdep", version: "0.1"})
	idx.addWheel(testWheel{name: "fastlib", version: "4.0"})
	// winonly and oldpy are not on the index at all: asking for them
	// would fail.
	s, _ := newService(t, testConfig("", idx.url()))
	_, env, err := s.AddPython(context.Background(), nil, "tool")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pyEnvVersions(env), map[string]string{"tool": "1.0", "posixdep": "0.1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("installed %v, want %v", got, want)
	}
	_, env, err = s.AddPython(context.Background(), nil, "tool[fast]")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pyEnvVersions(env), map[string]string{"tool": "1.0", "posixdep": "0.1", "fastlib": "4.0"}; !reflect.DeepEqual(got, want) {
		t.Errorf("with [fast]: installed %v, want %v", got, want)
	}
	if _, _, err := s.AddPython(context.Background(), nil, `winonly; sys_platform == "win32"`); err != nil {
		t.Errorf("a requirement whose marker excludes the sandbox: %v", err)
	}
}

func TestPythonRefusesAProjectWithoutAPureWheel(t *testing.T) {
	idx := newFakeIndex(t)
	idx.addWheel(testWheel{name: "numpy", version: "2.1.0", tag: "cp311-cp311-manylinux_2_17_x86_64"})
	idx.addWheel(testWheel{name: "numpy", version: "2.1.0", tag: "cp311-cp311-win_amd64"})
	idx.addFile("numpy", indexFileEntry{filename: "numpy-2.1.0.tar.gz", data: []byte("not really")})
	idx.addWheel(testWheel{name: "needs-numpy", version: "1.0", requires: []string{"numpy>=2"}})
	s, _ := newService(t, testConfig("", idx.url()))
	_, _, err := s.AddPython(context.Background(), nil, "needs-numpy")
	wantCode(t, err, CodeNotPure, "numpy", "pure-Python wheel", "C extensions")
	if e := cacheEntries(t, s); len(e) != 1 {
		t.Errorf("the cache holds %v, want needs-numpy's wheel only", e)
	}
}

func TestPythonHashMismatch(t *testing.T) {
	idx := newFakeIndex(t)
	w := testWheel{name: "tampered", version: "1.0"}
	idx.addFile("tampered", indexFileEntry{filename: w.filename(), data: w.build(t), sha256: strings.Repeat("ab", 32)})
	s, _ := newService(t, testConfig("", idx.url()))
	_, _, err := s.AddPython(context.Background(), nil, "tampered")
	wantCode(t, err, CodeIntegrity, w.filename(), "sha256")
	if e := cacheEntries(t, s); len(e) != 0 {
		t.Errorf("the cache holds %v", e)
	}
}

func TestPythonConflictNamesBoth(t *testing.T) {
	idx := newFakeIndex(t)
	idx.addWheel(testWheel{name: "lib", version: "1.0"})
	idx.addWheel(testWheel{name: "lib", version: "2.0"})
	idx.addWheel(testWheel{name: "old-user", version: "1.0", requires: []string{"lib==1.0"}})
	idx.addWheel(testWheel{name: "new-user", version: "1.0", requires: []string{"lib>=2"}})
	s, _ := newService(t, testConfig("", idx.url()))
	_, _, err := s.AddPython(context.Background(), nil, "old-user", "new-user")
	wantCode(t, err, CodeConflict, "lib==1.0 (required by old-user 1.0)", "lib>=2 (required by new-user 1.0)")

	// A later requirement that the chosen version does not satisfy, and
	// another version does, is resolved.
	_, env, err := s.AddPython(context.Background(), nil, "lib", "old-user")
	if err != nil {
		t.Fatal(err)
	}
	if got := pyEnvVersions(env)["lib"]; got != "1.0" {
		t.Errorf("lib %s, want 1.0", got)
	}
}

func TestPythonYankedAndPinned(t *testing.T) {
	idx := newFakeIndex(t)
	idx.addWheel(testWheel{name: "pkg", version: "1.0"})
	w := testWheel{name: "pkg", version: "1.1"}
	idx.addFile("pkg", indexFileEntry{filename: w.filename(), data: w.build(t), yanked: true})
	s, _ := newService(t, testConfig("", idx.url()))
	_, env, err := s.AddPython(context.Background(), nil, "pkg")
	if err != nil {
		t.Fatal(err)
	}
	if v := pyEnvVersions(env)["pkg"]; v != "1.0" {
		t.Errorf("got %s, want 1.0 (1.1 is yanked)", v)
	}
	_, env, err = s.AddPython(context.Background(), nil, "pkg==1.1")
	if err != nil {
		t.Fatal(err)
	}
	if v := pyEnvVersions(env)["pkg"]; v != "1.1" {
		t.Errorf("got %s, want 1.1 (pinned)", v)
	}
}

func TestPythonLockPinsVersions(t *testing.T) {
	idx := newFakeIndex(t)
	idx.addWheel(testWheel{name: "pkg", version: "1.0"})
	s, _ := newService(t, testConfig("", idx.url()))
	lock, _, err := s.AddPython(context.Background(), nil, "pkg")
	if err != nil {
		t.Fatal(err)
	}
	idx.addWheel(testWheel{name: "pkg", version: "1.1"})
	idx.addWheel(testWheel{name: "other", version: "1.0"})
	lock2, env, err := s.AddPython(context.Background(), lock, "other")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pyEnvVersions(env), map[string]string{"pkg": "1.0", "other": "1.0"}; !reflect.DeepEqual(got, want) {
		t.Errorf("installed %v, want %v: the lock's version of pkg is kept", got, want)
	}
	if !reflect.DeepEqual(lock2.Python.Requires, []string{"pkg", "other"}) {
		t.Errorf("requires %v", lock2.Python.Requires)
	}
	_, env, err = s.AddPython(context.Background(), lock2, "pkg>1.0")
	if err != nil {
		t.Fatal(err)
	}
	if v := pyEnvVersions(env)["pkg"]; v != "1.1" {
		t.Errorf("after asking pkg>1.0: %s", v)
	}
}

func TestPythonPolicy(t *testing.T) {
	idx := newFakeIndex(t)
	idx.addWheel(testWheel{name: "good", version: "1.0", requires: []string{"Evil_Dep"}})
	idx.addWheel(testWheel{name: "evil-dep", version: "1.0"})
	cfg := testConfig("", idx.url())
	cfg.Deny = []string{"pypi:evil-*"}
	s, _ := newService(t, cfg)
	_, _, err := s.AddPython(context.Background(), nil, "good")
	wantCode(t, err, CodeDenied, "evil-dep", "good 1.0", "packages.deny")
	cfg.Deny, cfg.Allow = nil, []string{"npm:*"}
	s, _ = newService(t, cfg)
	_, _, err = s.AddPython(context.Background(), nil, "good")
	wantCode(t, err, CodeDenied, "packages.allow")
	cfg.Python = false
	s, _ = newService(t, cfg)
	_, _, err = s.AddPython(context.Background(), nil, "good")
	wantCode(t, err, CodeOff, "packages.python")
}
