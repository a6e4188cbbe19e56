package main

// Hibernation with the real binary and the real guests: state that survives
// a stop and a restart, idleness, eviction, damaged images and a SIGKILL in
// the middle of saving.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"execd/internal/atomicfile"
	"execd/internal/worker"
)

// runLang calls execute_code in lang (in a new workspace when ws is empty)
// and returns structuredContent and isError.
func (c *mcp) runLang(ws, lang, code string) (map[string]any, bool) {
	c.T.Helper()
	args := map[string]any{"code": code, "language": lang}
	if ws != "" {
		args["workspace"] = ws
	}
	return c.Tool("execute_code", args)
}

// state is what each test workspace defines, per language, and how to ask
// for it back: the answer must be want.
var state = []struct {
	lang, define, ask, want string
}{
	{"javascript", `var n = 41; let greeting = "hi"; const obj = {a: [1, 2, {b: "deep"}]};
function twice(x) { return 2 * x } class Box { constructor(v) { this.v = v } get() { return this.v } }
var box = new Box("boxed"); var counter = (() => { let c = 0; return () => ++c })(); counter(); counter(); 1`,
		`[n + 1, greeting, obj.a[2].b, twice(21), box.get(), counter(), typeof Box].join(",")`,
		`"42,hi,deep,42,boxed,3,function"`},
	{"python", "import json, re, collections\nn = 41\nd = collections.Counter('hello')\n" +
		"def twice(x):\n    return 2 * x\nclass Box:\n    def __init__(self, v):\n        self.v = v\nbox = Box('boxed')\npat = re.compile(r'l+')\ngen = iter(range(10))\nnext(gen)\n",
		`",".join(map(str, [n + 1, d["l"], twice(21), box.v, pat.search("hello").group(), next(gen), json.dumps({"k": 1})]))`,
		`'42,2,42,boxed,ll,1,{"k": 1}'`},
}

func defineState(t *testing.T, c *mcp, ws string) {
	t.Helper()
	for _, s := range state {
		if sc, isErr := c.runLang(ws, s.lang, s.define); isErr {
			t.Fatalf("%s %s: %v", ws, s.lang, sc)
		}
	}
}

// checkState asks every language of ws for its state and returns what
// differs; status must be ok (not reset).
func checkState(t *testing.T, c *mcp, ws string) []string {
	t.Helper()
	var bad []string
	for _, s := range state {
		sc, isErr := c.runLang(ws, s.lang, s.ask)
		if isErr || sc["status"] != "ok" || sc["result"] != s.want || sc["reset"] == true {
			bad = append(bad, fmt.Sprintf("%s %s: %v", ws, s.lang, sc))
		}
	}
	return bad
}

func images(t *testing.T, data string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(data, "*", "~state", "*", "*.img"))
	return m
}

// workspaceImages are the images of workspace ws (of any principal).
func workspaceImages(data, ws string) []string {
	m, _ := filepath.Glob(filepath.Join(data, "*", "~state", ws, "*.img"))
	return m
}

func TestSIGTERMHibernatesAndARestartRestores(t *testing.T) {
	data := t.TempDir()
	d := startDaemon(t, data, "")
	for _, modern := range []bool{false, true} {
		c := newMCP(t, d.url, modern)
		c.init()
		ws := fmt.Sprintf("kept-%v", modern)
		defineState(t, c, ws)
		if sc, isErr := c.run(ws, `fs.writeFile("/workspace/note.txt", "a file"); 1`); isErr {
			t.Fatalf("write: %v", sc)
		}
	}
	d.stop()
	if got := images(t, data); len(got) != 4 {
		t.Fatalf("images after SIGTERM: %v\n%s", got, d.logs())
	}
	for _, img := range images(t, data) {
		st, _ := os.Stat(img)
		if st.Mode().Perm() != 0o600 || strings.Contains(img, string(filepath.Separator)+"kept-") && !strings.Contains(img, "~state") {
			t.Errorf("%s: mode %v", img, st.Mode())
		}
		t.Logf("%s: %d bytes", filepath.Base(filepath.Dir(img))+"/"+filepath.Base(img), st.Size())
	}

	d2 := startDaemon(t, data, "")
	for _, modern := range []bool{false, true} {
		c := newMCP(t, d2.url, modern)
		c.init()
		ws := fmt.Sprintf("kept-%v", modern)
		for _, b := range checkState(t, c, ws) {
			t.Error("after a restart: " + b)
		}
		if sc, _ := c.run(ws, `fs.readFile("/workspace/note.txt")`); sc["result"] != `"a file"` {
			t.Errorf("file: %v", sc)
		}
	}
	if got := images(t, data); len(got) != 0 {
		t.Errorf("images of restored (live) workspaces are still there: %v", got)
	}
	d2.stop()
}

func TestIdleWorkspacesHibernateAndComeBack(t *testing.T) {
	data := t.TempDir()
	d := startDaemon(t, data, "", "", `hibernate_after = "1s"`)
	c := newMCP(t, d.url, true)
	defineState(t, c, "idle")
	// The janitor looks every second: within a few the images are there.
	waitFor(t, "both images with hibernate_after = 1s", d.logs, func() bool { return len(images(t, data)) >= 2 })
	for _, b := range checkState(t, c, "idle") {
		t.Error("after hibernation: " + b)
	}
	d.stop()
}

func TestEvictedWorkspacesHibernate(t *testing.T) {
	// max_workspaces counts interpreters: with 2, each of six two-language
	// workspaces is hibernated as soon as another one is used.
	d := startDaemon(t, t.TempDir(), "", "", "max_workspaces = 2")
	c := newMCP(t, d.url, true)
	for i := range 6 {
		defineState(t, c, fmt.Sprintf("lru%d", i))
	}
	for i := range 6 {
		for _, b := range checkState(t, c, fmt.Sprintf("lru%d", i)) {
			t.Error("after eviction: " + b)
		}
	}
	d.stop()
}

func TestUnusableImagesStartFresh(t *testing.T) {
	data := t.TempDir()
	d := startDaemon(t, data, "")
	c := newMCP(t, d.url, true)
	damage := map[string]func(p string){
		"truncated": func(p string) { b, _ := os.ReadFile(p); os.WriteFile(p, b[:len(b)/3], 0o600) },
		"corrupted": func(p string) {
			b, _ := os.ReadFile(p)
			for i := len(b) / 2; i < len(b)/2+64 && i < len(b); i++ {
				b[i] ^= 0xff
			}
			os.WriteFile(p, b, 0o600)
		},
		"foreign": func(p string) { os.WriteFile(p, []byte("\x89PNG\r\n\x1a\n not an interpreter image"), 0o600) },
	}
	for name := range damage {
		if sc, isErr := c.run(name, `var v = 1; fs.writeFile("/workspace/kept.txt", "`+name+`"); 1`); isErr {
			t.Fatal(sc)
		}
	}
	d.stop()
	for name, f := range damage {
		f(filepath.Join(data, "local", "~state", name, "javascript.img"))
	}
	d2 := startDaemon(t, data, "")
	c2 := newMCP(t, d2.url, true)
	for name := range damage {
		sc, _ := c2.run(name, `typeof v + "," + fs.readFile("/workspace/kept.txt")`)
		if sc["status"] != "reset" || sc["reset"] != true || sc["result"] != `"undefined,`+name+`"` {
			t.Errorf("%s image: %v; want status reset, files kept", name, sc)
		}
		if sc, _ := c2.run(name, "var w = 2; w"); sc["status"] != "ok" {
			t.Errorf("%s: the next call: %v", name, sc)
		}
	}
	// The daemon's log reaches the test through a pipe, a moment after the
	// answers that follow each line.
	unusable := func() int { return strings.Count(d2.logs(), "saved interpreter unusable") }
	waitFor(t, "a warning line for each damaged image", d2.logs, func() bool { return unusable() >= len(damage) })
	d2.stop()
	if n := unusable(); n != len(damage) {
		t.Errorf("%d warning lines for %d damaged images:\n%s", n, len(damage), d2.logs())
	}
}

func TestSIGKILLWhileSavingLeavesNoBrokenImage(t *testing.T) {
	// Workspaces with large heaps take a while to save: SIGKILL lands in
	// the middle of it. Every image left must read, and every workspace
	// comes back with its state or says it was lost — never an error.
	data := t.TempDir()
	d := startDaemon(t, data, `shutdown_grace = "30s"`, "[limits]\nmax_concurrent_runs = 4", "max_workspaces = 64")
	c := newMCP(t, d.url, true)
	const n = 12
	for i := range n {
		code := fmt.Sprintf(`var tag = %d; var heap = []; for (let j = 0; j < 40; j++) heap.push(new Array(20000).fill(j * %d + 0.5)); heap.length`, i, i)
		if sc, isErr := c.run(fmt.Sprintf("big%d", i), code); isErr {
			t.Fatalf("%d: %v", i, sc)
		}
	}
	// The first round: a complete set of images (the "previous" ones).
	d.stop()
	d = startDaemon(t, data, `shutdown_grace = "30s"`, "[limits]\nmax_concurrent_runs = 4", "max_workspaces = 64")
	c = newMCP(t, d.url, true)
	for i := range n {
		if sc, isErr := c.run(fmt.Sprintf("big%d", i), "tag += 100; heap.push([tag]); tag"); isErr || sc["status"] != "ok" {
			t.Fatalf("%d: %v", i, sc)
		}
	}
	// The restored workspaces have no images on disk: the first file to
	// appear under ~state (an image being written, or one just renamed into
	// place) is the saving under way, and the kill lands in it. The files
	// are looked for without a pause: saving them all takes milliseconds.
	saving := func() []string {
		m, _ := filepath.Glob(filepath.Join(data, "*", "~state", "*", atomicfile.TempPrefix+"*"))
		return append(m, images(t, data)...)
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	for deadline := time.Now().Add(time.Minute); len(saving()) == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("no image written within a minute of SIGTERM\n%s", d.logs())
		}
	}
	d.cmd.Process.Kill()
	<-d.exited
	if complete := len(images(t, data)); complete == n {
		t.Fatalf("the kill came after all %d images were saved: the test did not kill a saving", n)
	} else {
		t.Logf("SIGKILL with %d of %d images complete", complete, n)
	}
	for _, p := range images(t, data) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := worker.ReadImage(bytes.NewReader(b)); err != nil {
			t.Errorf("%s is broken after SIGKILL: %v", p, err)
		}
	}
	d2 := startDaemon(t, data, "")
	c2 := newMCP(t, d2.url, true)
	restored, lost := 0, 0
	for i := range n {
		sc, _ := c2.run(fmt.Sprintf("big%d", i), "typeof tag === 'number' ? tag : 'gone'")
		switch {
		case sc["status"] == "ok" && sc["result"] == fmt.Sprint(i+100):
			restored++
		case sc["status"] == "reset" && sc["result"] == `"gone"`:
			lost++
		default:
			t.Errorf("big%d after SIGKILL while saving: %v", i, sc)
		}
	}
	t.Logf("after SIGKILL while saving: %d restored, %d reported lost", restored, lost)
	if strings.Contains(d2.logs(), "saved interpreter unusable") {
		t.Errorf("a damaged image was found:\n%s", d2.logs())
	}
	d2.stop()
}

func TestManyWorkspacesStayBoundedWithHibernation(t *testing.T) {
	// The creation loop of TestWorkspaceCreationLoopStaysBounded, with
	// hibernation: memory stops growing, and every sampled workspace still
	// has its variable.
	d := startDaemon(t, t.TempDir(), "", "", "max_workspaces = 4")
	c := newMCP(t, d.url, true)
	for i := range 40 {
		if sc, isErr := c.run(fmt.Sprintf("m%d", i), fmt.Sprintf("var big = new Array(1e5).fill(%d); big.length", i)); isErr {
			t.Fatalf("call %d: %v", i, sc)
		}
	}
	warm := rssKiB(t, d.cmd.Process.Pid)
	for i := 40; i < 240; i++ {
		if sc, isErr := c.run(fmt.Sprintf("m%d", i), fmt.Sprintf("var big = new Array(1e5).fill(%d); big.length", i)); isErr {
			t.Fatalf("call %d: %v", i, sc)
		}
	}
	after := rssKiB(t, d.cmd.Process.Pid)
	if after > warm+96*1024 {
		t.Fatalf("RSS grew from %d KiB to %d KiB over 200 more workspaces with max_workspaces = 4", warm, after)
	}
	for i := 0; i < 240; i += 17 {
		if sc, _ := c.run(fmt.Sprintf("m%d", i), "big[99999]"); sc["status"] != "ok" || sc["result"] != fmt.Sprint(i) {
			t.Errorf("m%d: %v", i, sc)
		}
	}
	t.Logf("RSS after 40 workspaces: %d KiB; after 240: %d KiB", warm, after)
	d.stop()
}
