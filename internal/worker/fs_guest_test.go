package worker

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"execd/internal/guestfs"
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

// A workspace that has written nothing has no directory on the host
// (guestfs.NewLazy): each guest sees an empty /workspace — it stats, lists
// and reads as one, its imports work — and its first write makes the
// directory.
func TestWorkspaceDirNotMadeYet(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		lang, look, write, want string
	}{
		{"javascript",
			`[fs.exists("/workspace"), fs.readdir("/workspace"), fs.exists("a.txt"), JSON.parse("[1]")[0]]`,
			`fs.writeFile("a.txt", "hi"); fs.readdir(".")`,
			`[true, [], false, 1]`},
		{"python",
			"import os, json, stat\n" +
				"(stat.S_ISDIR(os.stat('/workspace').st_mode), os.listdir('.'), os.listdir('/workspace'), os.path.exists('a.txt'), json.loads('[1]')[0])",
			"open('a.txt', 'w').write('hi')\nos.listdir('.')",
			`(True, [], [], False, 1)`},
	} {
		t.Run(c.lang, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "ws")
			q, err := guestfs.NewLazy(dir, 0, nil, func() error { return os.MkdirAll(dir, 0o700) })
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			w, err := testEngine(t, true).NewWorker(context.Background(), c.lang, WorkerOptions{FS: q})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if r := mustRun(t, w, c.look, StatusOK); value(r) != c.want {
				t.Errorf("a workspace not made yet: %s; want %s", value(r), c.want)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("looking made the directory: %v", err)
			}
			if r := mustRun(t, w, c.write, StatusOK); !strings.Contains(value(r), "a.txt") {
				t.Errorf("after the first write: %s", value(r))
			}
			if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "hi" {
				t.Errorf("a.txt on the host: %q, %v", b, err)
			}
		})
	}
}
