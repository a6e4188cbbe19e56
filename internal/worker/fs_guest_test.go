package worker

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The JavaScript guest's files: its fs functions, show() of a path and
// import() (sandbox/quickjs/guest.c), on a workspace directory.

func TestWorkspaceDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte("from host"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := newWorker(t, testEngine(t, true), WorkerOptions{Dir: dir})
	r := mustRun(t, w, "fs.writeFile('/workspace/out.txt', 'from guest'); fs.appendFile('/workspace/out.txt', '!'); fs.readFile('/workspace/in.txt')", StatusOK)
	if value(r) != `"from host"` {
		t.Errorf("readFile = %s", value(r))
	}
	b, err := os.ReadFile(filepath.Join(dir, "out.txt"))
	if err != nil || string(b) != "from guest!" {
		t.Errorf("out.txt = %q, %v", b, err)
	}
	r = mustRun(t, w, "fs.mkdir('/workspace/d'); fs.readdir('/workspace').sort()", StatusOK)
	if value(r) != `["d", "in.txt", "out.txt"]` {
		t.Errorf("readdir = %s", value(r))
	}
	// What is not under /workspace is not there, and the error says so.
	for _, p := range []string{"/etc/passwd", "/workspace/../../etc/passwd", "/proc/self/environ", "../etc/passwd"} {
		r = w.Run(context.Background(), "fs.readFile('"+p+"')", RunOptions{})
		if r.Status != StatusError || !strings.Contains(r.Error.Message, "outside /workspace") {
			t.Errorf("reading %s: %s", p, describe(r))
		}
	}
	// Without a Dir there is no file system at all.
	w2 := newWorker(t, testEngine(t, true), WorkerOptions{})
	if r := w2.Run(context.Background(), "fs.writeFile('/workspace/x', 'y')", RunOptions{}); r.Status != StatusError {
		t.Errorf("write without a workspace dir: %s", describe(r))
	}
}

// A relative path means a file under /workspace, the working directory, in
// every function that takes a path, as in Python.
func TestJSRelativePathsMeanTheWorkspace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	png, _ := base64.StdEncoding.DecodeString(pixelPNG)
	for name, data := range map[string][]byte{"a.txt": []byte("from host"), "plot.png": png, "lib.mjs": []byte("export const x = 42")} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w := newWorker(t, testEngine(t, true), WorkerOptions{Dir: dir})
	for _, c := range []struct{ name, code, want string }{
		{"readFile", `fs.readFile("a.txt")`, `"from host"`},
		{"writeFile", `fs.writeFile("b.txt", "new"); fs.readFile("/workspace/b.txt")`, `"new"`},
		{"appendFile", `fs.appendFile("./b.txt", "er"); fs.readFile("/workspace/b.txt")`, `"newer"`},
		{"exists", `[fs.exists("plot.png"), fs.exists("./a.txt"), fs.exists("."), fs.exists("nope")]`, `[true, true, true, false]`},
		{"mkdir", `fs.mkdir("d"); fs.writeFile("/workspace/d/e.txt", "e"); fs.exists("/workspace/d")`, `true`},
		{"readdir", `[fs.readdir(".").sort(), fs.readdir("d"), fs.readdir("d/..").length]`, `[["a.txt", "b.txt", "d", "lib.mjs", "plot.png"], ["e.txt"], 5]`},
		{"unlink", `fs.unlink("d/e.txt"); fs.exists("/workspace/d/e.txt")`, `false`},
		{"rmdir", `fs.rmdir("d"); fs.exists("/workspace/d")`, `false`},
		{"show", `show("plot.png"); "shown"`, `"shown"`},
		{"import", `const { x } = await import("./lib.mjs"); x`, `42`},
	} {
		r := w.Run(context.Background(), c.code, RunOptions{})
		if r.Status != StatusOK || value(r) != c.want {
			t.Errorf("%s: %s; want %s", c.name, describe(r), c.want)
		}
		if c.name == "show" && len(r.Images) != 1 {
			t.Errorf("show: %d images", len(r.Images))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "b.txt")); err != nil {
		t.Errorf("b.txt is not in the workspace: %v", err)
	}
}
