package tools

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"execd/internal/frontend"
	"execd/internal/packages"
	"execd/internal/tasks"
	"execd/internal/workspace"
)

// fakeInstaller installs "good" and refuses everything else as a project
// without a pure wheel.
type fakeInstaller struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeInstaller) InstallPackages(_ context.Context, principal, id, lang string, specs []string) (workspace.Installed, error) {
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf("%s %s %s %v", principal, id, lang, specs))
	f.mu.Unlock()
	if specs[0] != "good" {
		pe := &packages.Error{Code: packages.CodeNotPure, Package: specs[0], Message: specs[0] + " has no pure-Python wheel"}
		return workspace.Installed{}, &workspace.Error{Code: workspace.PackagesFailed, Msg: pe.Message, Err: pe}
	}
	p := workspace.Package{Language: lang, Name: "good", Version: "1.2.3", Bytes: 10, Direct: true}
	return workspace.Installed{Language: lang, Added: []workspace.Package{p}, Packages: []workspace.Package{p, {Language: lang, Name: "dep", Version: "2.0.0"}}}, nil
}

func newPackagesServer(t *testing.T, inst workspace.Installer) *client {
	t.Helper()
	cfg := testOptions()
	st, err := tasks.Open(tasks.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Options.Tasks = st
	s, err := frontend.New(cfg.Options)
	if err != nil {
		t.Fatal(err)
	}
	context.AfterFunc(s.Detached(), st.Close)
	if err := Register(s, Options{Executor: &fakeExec{started: make(chan string, 1)}, Languages: []string{"javascript", "python"}, Packages: inst}); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return &client{T: t, URL: ts.URL + "/mcp"}
}

func TestInstallPackagesBothEras(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(map[bool]string{false: "modern", true: "legacy"}[legacy], func(t *testing.T) {
			inst := &fakeInstaller{}
			c := newPackagesServer(t, inst)
			c.Legacy = legacy
			if legacy {
				c.Initialize()
			}
			if list := fmt.Sprint(c.RPC("tools/list", nil, nil)); !strings.Contains(list, "name:install_packages") || !strings.Contains(list, "packages:map[description") {
				t.Fatalf("tools/list: %.300s", list)
			}
			sc, isErr := c.Tool("install_packages", map[string]any{"workspace": "w", "language": "python", "packages": []any{"good"}})
			if isErr || sc["workspace"] != "w" || fmt.Sprint(sc["installed"]) != "[map[bytes:10 direct:true language:python name:good version:1.2.3]]" ||
				!strings.Contains(fmt.Sprint(sc["packages"]), "name:dep version:2.0.0") {
				t.Errorf("install: %v", sc)
			}
			sc, isErr = c.Tool("install_packages", map[string]any{"workspace": "w", "language": "python", "packages": []any{"numpy"}})
			if !isErr || sc["code"] != "not_pure" || sc["error"] != "numpy has no pure-Python wheel" {
				t.Errorf("refused: %v", sc)
			}
			for _, bad := range []map[string]any{
				{"workspace": "w", "language": "python"},
				{"workspace": "w", "language": "python", "packages": []any{}},
				{"workspace": "w", "language": "python", "packages": "good"},
				{"workspace": "w", "packages": []any{"good"}},
			} {
				if sc, isErr := c.Tool("install_packages", bad); !isErr || sc["error"] == nil {
					t.Errorf("%v: %v", bad, sc)
				}
			}
			// Without a workspace a new one is named.
			if sc, isErr := c.Tool("install_packages", map[string]any{"language": "javascript", "packages": []any{"good"}}); isErr || sc["workspace"] == "" {
				t.Errorf("no workspace: %v", sc)
			}
			inst.mu.Lock()
			defer inst.mu.Unlock()
			if len(inst.calls) != 3 || inst.calls[0] != "local w python [good]" {
				t.Errorf("calls: %q", inst.calls)
			}
		})
	}
}

func TestNoInstallPackagesWithoutAnInstaller(t *testing.T) {
	c := newPackagesServer(t, nil)
	if list := fmt.Sprint(c.RPC("tools/list", nil, nil)); strings.Contains(list, "install_packages") {
		t.Errorf("install_packages is listed without an installer")
	}
}
