package packages

import (
	"context"
	"testing"
)

func TestNPMLockPinsVersions(t *testing.T) {
	reg := newFakeRegistry(t)
	reg.add("@scope/lib", "1.0.0", fakeVersion{})
	reg.add("app", "1.0.0", fakeVersion{deps: map[string]string{"@scope/lib": "^1.0.0"}})
	s, _ := newService(t, testConfig(reg.srv.URL, ""))
	ctx := context.Background()
	lock, tree, err := s.AddNPM(ctx, nil, "app")
	if err != nil {
		t.Fatal(err)
	}
	if lock.NPM.Requires["app"] != "^1.0.0" {
		t.Errorf("a bare name is saved as %q, want ^1.0.0", lock.NPM.Requires["app"])
	}
	if lib := tree.Packages[tree.Packages[tree.Root["app"]].Deps["@scope/lib"]]; lib.Path != "node_modules/@scope/lib" {
		t.Errorf("@scope/lib at %s", lib.Path)
	}
	reg.add("@scope/lib", "1.1.0", fakeVersion{})
	reg.add("other", "2.0.0", fakeVersion{})
	lock2, tree2, err := s.AddNPM(ctx, lock, "other")
	if err != nil {
		t.Fatal(err)
	}
	if v := lock2.NPM.Packages["node_modules/@scope/lib"].Version; v != "1.0.0" {
		t.Errorf("@scope/lib %s after adding another package, want the lock's 1.0.0", v)
	}
	if _, ok := tree2.Root["other"]; !ok || len(lock2.NPM.Requires) != 2 {
		t.Errorf("requires %v", lock2.NPM.Requires)
	}
	// A fresh resolve takes the new release.
	lock3, _, err := s.AddNPM(ctx, nil, "app")
	if err != nil {
		t.Fatal(err)
	}
	if v := lock3.NPM.Packages["node_modules/@scope/lib"].Version; v != "1.1.0" {
		t.Errorf("@scope/lib %s without a lock, want 1.1.0", v)
	}
}

func TestNPMDependencyKinds(t *testing.T) {
	reg := newFakeRegistry(t)
	reg.add("peer", "3.0.0", fakeVersion{})
	reg.add("opt", "1.0.0", fakeVersion{})
	reg.add("plugin", "1.0.0", fakeVersion{peer: map[string]string{"peer": "^3"},
		optional: map[string]string{"opt": "1", "missing-opt": "1"}})
	s, _ := newService(t, testConfig(reg.srv.URL, ""))
	lock, _, err := s.AddNPM(context.Background(), nil, "plugin")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for p, e := range lock.NPM.Packages {
		got[p] = e.Version
	}
	want := map[string]string{"node_modules/plugin": "1.0.0", "node_modules/peer": "3.0.0", "node_modules/opt": "1.0.0"}
	if len(got) != len(want) || got["node_modules/peer"] != "3.0.0" || got["node_modules/opt"] != "1.0.0" {
		t.Errorf("installed %v, want %v (the peer beside it, the missing optional left out)", got, want)
	}

	_, _, err = s.AddNPM(context.Background(), nil, "git-dep@github:user/repo")
	wantCode(t, err, CodeInvalid, "git-dep@github:user/repo")
	reg.add("uses-git", "1.0.0", fakeVersion{deps: map[string]string{"x": "git+https://example.com/x.git"}})
	_, _, err = s.AddNPM(context.Background(), nil, "uses-git")
	wantCode(t, err, CodeInvalid, "uses-git@1.0.0", "not from the registry")
	_, _, err = s.AddNPM(context.Background(), nil, "nonexistent")
	wantCode(t, err, CodeNotFound, "nonexistent")
	_, _, err = s.AddNPM(context.Background(), nil, "peer@^4")
	wantCode(t, err, CodeNotFound, "peer", "^4")
}

func TestNPMPolicy(t *testing.T) {
	reg := newFakeRegistry(t)
	reg.add("left-pad", "1.0.0", fakeVersion{})
	reg.add("app", "1.0.0", fakeVersion{deps: map[string]string{"left-pad": "1"}})
	cfg := testConfig(reg.srv.URL, "")
	cfg.Deny = []string{"npm:left-*"}
	s, _ := newService(t, cfg)
	_, _, err := s.AddNPM(context.Background(), nil, "app")
	wantCode(t, err, CodeDenied, "left-pad", "app@1.0.0", "packages.deny")
	cfg.Deny, cfg.Allow = nil, []string{"pypi:*"}
	s, _ = newService(t, cfg)
	_, _, err = s.AddNPM(context.Background(), nil, "app")
	wantCode(t, err, CodeDenied, "packages.allow")
	cfg.NPM = false
	s, _ = newService(t, cfg)
	_, _, err = s.AddNPM(context.Background(), nil, "app")
	wantCode(t, err, CodeOff, "packages.npm")
}

func TestNPMSpecs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want NPMSpec
	}{
		{"dayjs", NPMSpec{Name: "dayjs"}},
		{"npm:zod@^3", NPMSpec{Name: "zod", Range: "^3"}},
		{"zod/v4", NPMSpec{Name: "zod", Subpath: "/v4"}},
		{"npm:zod@3.25/v4/mini", NPMSpec{Name: "zod", Range: "3.25", Subpath: "/v4/mini"}},
		{"@scope/pkg", NPMSpec{Name: "@scope/pkg"}},
		{"@scope/pkg@next/sub", NPMSpec{Name: "@scope/pkg", Range: "next", Subpath: "/sub"}},
		{"pkg@>=1 <2", NPMSpec{Name: "pkg", Range: ">=1 <2"}},
	} {
		got, err := ParseNPMSpec(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseNPMSpec(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "@scope", "../x", "pkg@", "pkg@not a range!", "pkg/../x", ".hidden", "pkg//x", "@/x"} {
		if _, err := ParseNPMSpec(bad); err == nil {
			t.Errorf("ParseNPMSpec(%q) accepted it", bad)
		}
	}
}
