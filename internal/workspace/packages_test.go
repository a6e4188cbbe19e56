package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"

	"execd/internal/config"
	"execd/internal/packages"
	"execd/internal/packages/packagestest"
)

func newPackages(t *testing.T, npmURL, pyURL string) *packages.Service {
	t.Helper()
	cfg := config.Default().Packages
	cfg.NPMRegistry, cfg.PythonIndex = npmURL, pyURL
	svc, err := packages.New(cfg, t.TempDir(), packages.Options{Log: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func names(ps []Package) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.Name+"@"+p.Version)
	}
	return strings.Join(s, " ")
}

func TestInstallPackagesKeepsALockInTheWorkspace(t *testing.T) {
	reg := packagestest.NewNPM(t)
	reg.Add(t, "left", "1.0.0", nil, map[string]string{"index.js": "module.exports = 1"})
	reg.Add(t, "app", "1.0.0", map[string]any{"dependencies": map[string]string{"left": "^1.0.0"}}, map[string]string{"index.js": "module.exports = 2"})
	m := newTestManager(t, Config{Packages: newPackages(t, reg.URL(), "http://127.0.0.1:1/simple")}, newFakeFactory())
	ctx := context.Background()

	got, err := m.InstallPackages(ctx, "p", "w", "javascript", []string{"app"})
	if err != nil {
		t.Fatal(err)
	}
	if names(got.Added) != "app@1.0.0 left@1.0.0" || !got.Added[0].Direct || got.Added[1].Direct || got.Added[0].Bytes == 0 {
		t.Fatalf("installed %+v", got.Added)
	}
	if f, err := m.ReadFile(ctx, "p", "w", LockPath, 0, 1<<20); err != nil || !strings.Contains(string(f.Data), `"node_modules/left"`) {
		t.Fatalf("the lock: %v %s", err, f.Data)
	}
	if l := m.List("p"); len(l) != 1 || names(l[0].Packages) != "app@1.0.0 left@1.0.0" {
		t.Fatalf("list: %+v", l)
	}
	again, err := m.InstallPackages(ctx, "p", "w", "js", []string{"app"})
	if err != nil || len(again.Added) != 0 || len(again.Packages) != 2 {
		t.Fatalf("installing again: %+v %v", again, err)
	}

	// A run's guest gets the tree, and "unchanged" for the generation it has.
	ans := map[string]any{}
	if err := json.Unmarshal([]byte(*run(t, m, "p", "w", `packages {"op":"npm"}`).Result.Value), &ans); err != nil {
		t.Fatal(err)
	}
	tree, _ := ans["tree"].(map[string]any)
	if root, _ := tree["root"].(map[string]any); root == nil || root["app"] == nil || ans["gen"] == "" {
		t.Fatalf("the guest's tree: %v", ans)
	}
	if v := *run(t, m, "p", "w", `packages {"op":"npm","have":"`+ans["gen"].(string)+`"}`).Result.Value; v != `{"unchanged":true}` {
		t.Errorf("same generation: %s", v)
	}
	if v := *run(t, m, "p", "w", `packages {"op":"install","language":"javascript","packages":["nope"]}`).Result.Value; !strings.Contains(v, `"code":"not_found"`) || !strings.Contains(v, "nope") {
		t.Errorf("an unknown package from the guest: %s", v)
	}

	// A checkpoint keeps the lock of its time: what was installed after it
	// is gone once it is restored.
	reg.Add(t, "later", "1.0.0", nil, map[string]string{"index.js": ""})
	cp, err := m.Checkpoint(ctx, "p", "w", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.InstallPackages(ctx, "p", "w", "javascript", []string{"later"}); err != nil {
		t.Fatal(err)
	}
	if err := m.RestoreCheckpoint(ctx, "p", "w", cp); err != nil {
		t.Fatal(err)
	}
	for _, in := range m.List("p") {
		if in.ID == "w" && names(in.Packages) != "app@1.0.0 left@1.0.0" {
			t.Errorf("after restoring the checkpoint: %+v", in.Packages)
		}
	}

	// A fork has them; a reset of the files drops them.
	if _, err := m.Fork(ctx, "p", "w", "w2"); err != nil {
		t.Fatal(err)
	}
	for _, in := range m.List("p") {
		if in.ID == "w2" && names(in.Packages) != "app@1.0.0 left@1.0.0" {
			t.Errorf("the fork's packages: %+v", in.Packages)
		}
	}
	if err := m.Reset(ctx, "p", "w", true); err != nil {
		t.Fatal(err)
	}
	for _, in := range m.List("p") {
		if in.ID == "w" && in.Packages != nil {
			t.Errorf("packages after a reset of the files: %+v", in.Packages)
		}
	}
}

func TestInstallPackagesErrors(t *testing.T) {
	idx := packagestest.NewIndex(t)
	idx.Add(t, packagestest.Wheel{Project: "native", Version: "1.0", Tag: "cp311-cp311-manylinux_2_17_x86_64"})
	reg := packagestest.NewNPM(t)
	m := newTestManager(t, Config{Packages: newPackages(t, reg.URL(), idx.URL())}, newFakeFactory("javascript", "python"))
	ctx := context.Background()
	var we *Error
	var pe *packages.Error
	_, err := m.InstallPackages(ctx, "p", "w", "python", []string{"native"})
	if !errors.As(err, &we) || we.Code != PackagesFailed || !errors.As(err, &pe) || pe.Code != packages.CodeNotPure {
		t.Errorf("a project without a pure wheel: %v", err)
	}
	if _, err := m.InstallPackages(ctx, "p", "w", "javascript", []string{"missing"}); !errors.As(err, &pe) || pe.Code != packages.CodeNotFound {
		t.Errorf("an unknown npm package: %v", err)
	}
	if _, err := m.WriteFile(ctx, "p", "w", LockPath, []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.InstallPackages(ctx, "p", "w", "javascript", []string{"x"}); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("a broken lock: %v", err)
	}
	m2 := newTestManager(t, Config{}, newFakeFactory())
	if _, err := m2.InstallPackages(ctx, "p", "w", "javascript", []string{"x"}); !errors.As(err, &we) || we.Code != PackagesFailed {
		t.Errorf("without a Service: %v", err)
	}
	if v := *run(t, m2, "p", "w", `packages {"op":"npm"}`).Result.Value; v != "none" {
		t.Errorf("a run without a Service has a PackageSource: %s", v)
	}
}
