package floors

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "execd/"

// root is the repository's top: this package is internal/floors.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// run runs a command at the top and returns its output; a failure fails the
// test (without go or git the floors cannot be checked).
func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = root(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// imports is every package of the module's build graph with its direct
// imports, from one go list -deps (tests' imports are not floors).
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out := run(t, "go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	g := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) > 0 {
			g[f[0]] = f[1:]
		}
	}
	return g
}

// deps is everything pkg imports, directly or not.
func deps(g map[string][]string, pkg string) map[string]bool {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		for _, d := range g[p] {
			if !seen[d] {
				seen[d] = true
				walk(d)
			}
		}
	}
	walk(pkg)
	return seen
}

func TestFloorsRunOneWay(t *testing.T) {
	g := imports(t)
	for _, tc := range []struct {
		pkg    string
		direct bool     // only pkg's own imports, not theirs
		not    []string // import paths, or prefixes ending in "/"
		why    string
	}{
		{"internal/frontend", false, []string{"internal/workspace", "internal/worker"},
			"the engine knows MCP, not sandboxes"},
		{"internal/tools", true, []string{"internal/worker"},
			"the tools talk to the workspace floor, which owns its vocabulary"},
		{"internal/workspace", true, []string{"github.com/tetratelabs/wazero/experimental", "github.com/tetratelabs/wazero/experimental/"},
			"wazero's experimental API is the worker's business"},
		{"internal/worker", false, []string{"internal/jsonrpc", "internal/frontend", "internal/tools", "internal/workspace"},
			"the sandbox floor imports nothing above it"},
	} {
		pkg := module + tc.pkg
		if _, ok := g[pkg]; !ok {
			t.Errorf("%s is not in the build graph", pkg)
			continue
		}
		got := map[string]bool{}
		for _, d := range g[pkg] {
			got[d] = true
		}
		how := "imports"
		if !tc.direct {
			got, how = deps(g, pkg), "depends on"
		}
		for d := range got {
			for _, bad := range tc.not {
				if !strings.Contains(bad, ".") {
					bad = module + bad
				}
				if d == bad || strings.HasSuffix(bad, "/") && strings.HasPrefix(d, bad) {
					t.Errorf("%s %s %s: %s", tc.pkg, how, d, tc.why)
				}
			}
		}
	}
}

// Nothing built is committed at the top (binaries belong in bin/, which is
// ignored): no tracked file there is an ELF executable or holds a NUL byte.
func TestNoBinariesAtTheTop(t *testing.T) {
	top := root(t)
	n := 0
	for name := range strings.Lines(string(run(t, "git", "ls-files"))) {
		name = strings.TrimSuffix(name, "\n")
		if strings.Contains(name, "/") {
			continue
		}
		n++
		b, err := os.ReadFile(filepath.Join(top, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if bytes.HasPrefix(b, []byte("\x7fELF")) || bytes.IndexByte(b, 0) >= 0 {
			t.Errorf("%s is a binary (%d bytes) tracked at the top of the repository", name, len(b))
		}
	}
	if n == 0 {
		t.Fatal("git ls-files lists no file at the top")
	}
}

// No Go file in internal/ is over 600 lines: a file that long holds more
// than one thing.
func TestNoLongFilesInInternal(t *testing.T) {
	const most = 600
	err := filepath.WalkDir(filepath.Join(root(t), "internal"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := bytes.Count(b, []byte("\n")); n > most {
			rel, _ := filepath.Rel(root(t), path)
			t.Errorf("%s: %d lines (at most %d)", rel, n, most)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
