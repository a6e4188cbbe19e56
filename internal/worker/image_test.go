package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero/api"

	"execd/sandbox"
)

// memHash is the sha256 of w's linear memory.
func memHash(t testing.TB, w *Worker) [32]byte {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inst == nil {
		t.Fatal("worker without instance")
	}
	return sha256.Sum256(w.inst.mem.bytes())
}

// globalsOf reads w's mutable globals.
func globalsOf(t testing.TB, w *Worker) []uint64 {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []uint64
	for _, g := range w.g.info.globals {
		out = append(out, w.inst.mod.ExportedGlobal(g.export).Get())
	}
	return out
}

func encode(t testing.TB, img *Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := img.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteTo = %d, %v (wrote %d)", n, err, buf.Len())
	}
	return buf.Bytes()
}

func snapshot(t testing.TB, w *Worker) *Image {
	t.Helper()
	img, err := w.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return img
}

func restore(t testing.TB, e *Engine, img *Image, clone bool) *Worker {
	t.Helper()
	w, err := e.Restore(context.Background(), img, WorkerOptions{}, clone)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func langWorker(t testing.TB, e *Engine, lang string, opts WorkerOptions) *Worker {
	t.Helper()
	w, err := e.NewWorker(context.Background(), lang, opts)
	if err != nil {
		t.Fatalf("NewWorker(%s): %v", lang, err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// stateCode, per language: code that leaves state behind, code that reads
// it (and changes it), and what the read gives the first time.
var stateCode = map[string]struct{ set, get, want string }{
	"javascript": {
		set:  "let counter = 41; const m = new Map([['k', [1, 2, 3]]]); function inc() { return ++counter + m.get('k').length }",
		get:  "inc()",
		want: "45",
	},
	"python": {
		set:  "import json\ncounter = 41\ndata = {'k': [1, 2, 3]}\ndef inc():\n    global counter\n    counter += 1\n    return counter + len(json.loads(json.dumps(data))['k'])",
		get:  "inc()",
		want: "45",
	},
}

// The same state after a restore: the memory hash, the globals, the
// variables, the functions; and from there both interpreters go on alike.
func TestImageRestoresTheSameState(t *testing.T) {
	t.Parallel()
	e := testEngine(t, true)
	for _, lang := range e.Languages() {
		t.Run(lang, func(t *testing.T) {
			sc := stateCode[lang]
			w := langWorker(t, e, lang, WorkerOptions{})
			mustRun(t, w, sc.set, StatusOK)
			img := snapshot(t, w)
			hash, globals := memHash(t, w), globalsOf(t, w)
			if img.Language() != lang || img.MemoryBytes() != w.MemoryBytes() {
				t.Errorf("image of %s, %d bytes; want %s, %d", img.Language(), img.MemoryBytes(), lang, w.MemoryBytes())
			}
			read, err := ReadImage(bytes.NewReader(encode(t, img)))
			if err != nil {
				t.Fatalf("ReadImage: %v", err)
			}
			w2 := restore(t, e, read, false)
			if memHash(t, w2) != hash {
				t.Error("restored memory differs from the snapshot's")
			}
			if g2 := globalsOf(t, w2); !slices.Equal(g2, globals) {
				t.Errorf("restored globals %v; want %v", g2, globals)
			}
			r := mustRun(t, w2, sc.get, StatusOK)
			if value(r) != sc.want || !r.Restored || r.Discontinuous() {
				t.Errorf("restored %s = %s (restored %v); want %s, restored, no reset", sc.get, describe(r), r.Restored, sc.want)
			}
			if r := mustRun(t, w, sc.get, StatusOK); value(r) != sc.want {
				t.Errorf("original %s = %s after the snapshot; want %s", sc.get, describe(r), sc.want)
			}
			// An image of a restored worker restores too.
			w3 := restore(t, e, snapshot(t, w2), false)
			if r := mustRun(t, w3, sc.get, StatusOK); value(r) == sc.want || r.Status != StatusOK {
				t.Errorf("second generation %s = %s; want the next value", sc.get, describe(r))
			}
		})
	}
}

// randomCode draws from each guest's seeded generator.
var randomCode = map[string]struct{ setup, draw string }{
	"javascript": {"", "Math.random()"},
	"python":     {"import random", "random.random()"},
}

// A continued interpreter (clone=false) repeats what the original would
// have drawn; clones (new workers, clone=true) each draw their own.
func TestImageRandomState(t *testing.T) {
	t.Parallel()
	e := testEngine(t, true)
	for _, lang := range e.Languages() {
		t.Run(lang, func(t *testing.T) {
			rc := randomCode[lang]
			w := langWorker(t, e, lang, WorkerOptions{})
			if rc.setup != "" {
				mustRun(t, w, rc.setup, StatusOK)
			}
			img := snapshot(t, w)
			a := value(mustRun(t, restore(t, e, img, false), rc.draw, StatusOK))
			b := value(mustRun(t, restore(t, e, img, false), rc.draw, StatusOK))
			orig := value(mustRun(t, w, rc.draw, StatusOK))
			if a != b || a != orig {
				t.Errorf("continued interpreters drew %s and %s, the original %s; want the same", a, b, orig)
			}
			if !e.guests[lang].reseed {
				t.Skipf("the %s guest does not export %s: clones share its random state (continuation checked above)", lang, reseedExport)
			}
			c1 := value(mustRun(t, restore(t, e, img, true), rc.draw, StatusOK))
			c2 := value(mustRun(t, restore(t, e, img, true), rc.draw, StatusOK))
			if c1 == c2 || c1 == a {
				t.Errorf("clones drew %s and %s (continuation %s); want each its own", c1, c2, a)
			}
			if x, y := twoNewDraws(t, e, lang); x == y {
				t.Errorf("two new workers drew the same %s", x)
			}
		})
	}
}

// twoNewDraws is what two new workers of lang draw first from their
// random generators.
func twoNewDraws(t *testing.T, e *Engine, lang string) (string, string) {
	t.Helper()
	rc := randomCode[lang]
	n1 := langWorker(t, e, lang, WorkerOptions{})
	n2 := langWorker(t, e, lang, WorkerOptions{})
	if rc.setup != "" {
		mustRun(t, n1, rc.setup, StatusOK)
		mustRun(t, n2, rc.setup, StatusOK)
	}
	return value(mustRun(t, n1, rc.draw, StatusOK)), value(mustRun(t, n2, rc.draw, StatusOK))
}

// The guest's monotonic clock goes on from the image's reading, even in an
// engine started later (whose own clock starts near zero).
func TestImageClockContinues(t *testing.T) {
	t.Parallel()
	e := testEngine(t, true)
	if !contains(e.Languages(), "python") {
		t.Fatal("python guest not built: make guests")
	}
	w := langWorker(t, e, "python", WorkerOptions{})
	mustRun(t, w, "import time\ntime.sleep(0.05)", StatusOK)
	before := value(mustRun(t, w, "time.monotonic_ns()", StatusOK))
	img := snapshot(t, w)
	later := newTestEngine(t, testConfig(true))
	w2 := restore(t, later, img, false)
	after := value(mustRun(t, w2, "time.monotonic_ns()", StatusOK))
	if len(after) < len(before) || len(after) == len(before) && after < before {
		t.Errorf("monotonic clock went from %s to %s across the restore", before, after)
	}
}

func TestReadImageErrors(t *testing.T) {
	t.Parallel()
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	mustRun(t, w, "let kept = 'x'.repeat(10000)", StatusOK)
	good := encode(t, snapshot(t, w))
	if _, err := ReadImage(bytes.NewReader(good)); err != nil {
		t.Fatalf("good image: %v", err)
	}
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := map[string]struct {
		b    []byte
		want error
	}{
		"empty":                  {nil, ErrImageCorrupt},
		"not an image":           {[]byte("PK\x03\x04 definitely a zip file, not an image"), ErrImageCorrupt},
		"magic only":             {good[:8], ErrImageCorrupt},
		"prefix only":            {good[:16], ErrImageCorrupt},
		"half a header":          {good[:40], ErrImageCorrupt},
		"no payload":             {good[:len(good)/2], ErrImageCorrupt},
		"no checksum":            {good[:len(good)-4], ErrImageCorrupt},
		"one byte short":         {good[:len(good)-1], ErrImageCorrupt},
		"a flipped checksum":     {mutate(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrImageCorrupt},
		"a flipped header byte":  {mutate(func(b []byte) []byte { b[30] ^= 0x40; return b }), ErrImageCorrupt},
		"a flipped payload byte": {mutate(func(b []byte) []byte { b[len(b)-20] ^= 0x01; return b }), ErrImageCorrupt},
		"another version": {mutate(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[8:], imageVersion+1)
			return b
		}), ErrImageVersion},
		"version zero, truncated": {mutate(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[8:], 0)
			return b[:20]
		}), ErrImageVersion},
	}
	for name, tc := range cases {
		img, err := ReadImage(bytes.NewReader(tc.b))
		if !errors.Is(err, tc.want) || img != nil {
			t.Errorf("%s: ReadImage = %v, %v; want %v", name, img != nil, err, tc.want)
		}
	}
	// Every truncation is an error, never a panic or a hang.
	for n := 0; n < len(good); n += max(1, len(good)/200) {
		if _, err := ReadImage(bytes.NewReader(good[:n])); !errors.Is(err, ErrImageCorrupt) {
			t.Fatalf("truncated to %d of %d bytes: %v", n, len(good), err)
		}
	}
}

// An intact image the engine cannot use says so: another build of the
// module (here the same guest without the kill switch), or more memory
// than the engine's limit.
func TestRestoreStaleImage(t *testing.T) {
	t.Parallel()
	strict := testEngine(t, true)
	w := newWorker(t, strict, WorkerOptions{})
	mustRun(t, w, "let big = new Uint8Array(40 << 20).fill(7); big.length", StatusOK)
	img := snapshot(t, w)
	if _, err := testEngine(t, false).Restore(context.Background(), img, WorkerOptions{}, false); !errors.Is(err, ErrImageStale) {
		t.Errorf("restore into another module build: %v; want ErrImageStale", err)
	}
	cfg := testConfig(true)
	cfg.MemoryLimitMiB = 32
	small := newTestEngine(t, cfg)
	_, err := small.Restore(context.Background(), img, WorkerOptions{}, false)
	if !errors.Is(err, ErrImageStale) || !strings.Contains(err.Error(), "MiB") {
		t.Errorf("restore of a %d MiB image under a 32 MiB limit: %v; want ErrImageStale", img.MemoryBytes()>>20, err)
	}
	// Nothing of the refused restores is left behind.
	if got := small.MemoryBytes(); got != 0 {
		t.Errorf("engine holds %d bytes after refused restores", got)
	}
}

// Snapshot refuses while the guest holds a file open: its descriptor lives
// on the host and would name nothing, or the wrong file, after a restore.
func TestSnapshotRefusesOpenFiles(t *testing.T) {
	t.Parallel()
	e := testEngine(t, true)
	w := langWorker(t, e, "python", WorkerOptions{Dir: t.TempDir()})
	mustRun(t, w, "f = open('notes.txt', 'w'); f.write('a')", StatusOK)
	if _, err := w.Snapshot(context.Background()); !errors.Is(err, ErrNotSnapshottable) {
		t.Fatalf("Snapshot with a file open: %v; want ErrNotSnapshottable", err)
	}
	mustRun(t, w, "f.close(); import os; os.listdir('.')", StatusOK)
	img := snapshot(t, w)
	w2, err := e.Restore(context.Background(), img, WorkerOptions{Dir: t.TempDir()}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if r := mustRun(t, w2, "open('other.txt', 'w').write('xyz')", StatusOK); value(r) != "3" {
		t.Errorf("restored worker cannot write files: %s", describe(r))
	}
}

func TestSnapshotWithoutInstance(t *testing.T) {
	t.Parallel()
	e := testEngine(t, true)
	w := newWorker(t, e, WorkerOptions{})
	w.Close()
	if _, err := w.Snapshot(context.Background()); !errors.Is(err, ErrNotSnapshottable) {
		t.Errorf("Snapshot of a closed worker: %v", err)
	}
}

// The tripwire for a guest that gains a mutable global: every mutable
// global is exported by the rewrite and lands in the image, and the
// guests' globals are what ABI.md says their state is.
func TestImageCapturesEveryMutableGlobal(t *testing.T) {
	t.Parallel()
	for _, strict := range []bool{true, false} {
		e := testEngine(t, strict)
		for _, lang := range e.Languages() {
			g := e.guests[lang]
			// Read the global section independently of prepareModule.
			bin, err := sandbox.Module(lang)
			if err != nil {
				t.Fatal(err)
			}
			var mutable int
			for _, gt := range globalsOfBinary(t, bin) {
				if gt.mutable {
					mutable++
				}
			}
			want := mutable
			if strict {
				want++ // the kill switch's countdown
			}
			if len(g.info.globals) != want {
				t.Errorf("%s (strict %v): images capture %d globals, the module has %d mutable", lang, strict, len(g.info.globals), want)
			}
			if mutable != 1 {
				t.Errorf("%s: %d mutable globals; sandbox/ABI.md says the state between calls is memory plus __stack_pointer: "+
					"check that a new global needs nothing but saving (TestImageRestoresTheSameState), then update this test", lang, mutable)
			}
			w := langWorker(t, e, lang, WorkerOptions{})
			img := snapshot(t, w)
			if len(img.globals) != want {
				t.Errorf("%s: the image holds %d globals; want %d", lang, len(img.globals), want)
			}
			sp := w.inst.mod.ExportedGlobal("__stack_pointer")
			var found bool
			for i, gl := range g.info.globals {
				found = found || img.globals[i].val == sp.Get() && gl.typ == api.ValueTypeI32
			}
			if !found {
				t.Errorf("%s: __stack_pointer is not among the image's globals", lang)
			}
		}
	}
}

// globalsOfBinary reads a module's global section with the rewrite's own
// reader but none of its code.
func globalsOfBinary(t *testing.T, bin []byte) []globalType {
	t.Helper()
	r := &reader{b: bin, off: 8}
	for r.off < len(r.b) {
		id := r.byte()
		body := r.bytes(int(r.u32()))
		if id == secGlobal {
			gs, err := readGlobals(body)
			if err != nil {
				t.Fatal(err)
			}
			return gs
		}
	}
	t.Fatal("no global section")
	return nil
}

// A module with several mutable globals of every number type, none of them
// exported, and state in memory: the image restores all of it.
func TestImageOfAModuleWithManyGlobals(t *testing.T) {
	t.Parallel()
	e := testEngine(t, false)
	bin, info, err := prepareModule(globalsModule(), rewrites{images: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(info.globals) != 4 || info.notImageable != "" {
		t.Fatalf("prepareModule found %d mutable globals (%q); want 4", len(info.globals), info.notImageable)
	}
	cm, err := e.rt.CompileModule(context.Background(), bin)
	if err != nil {
		t.Fatal(err)
	}
	g := &guest{lang: "test", cm: cm, info: info, sum: sha256.Sum256(bin), ready: closedChan}
	inst, err := e.initInstance(context.Background(), g, WorkerOptions{}, initParams{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer inst.close()
	ctx := context.Background()
	call := func(i *instance, name string) float64 {
		r, err := i.mod.ExportedFunction(name).Call(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(r) == 0 {
			return 0
		}
		return api.DecodeF64(r[0])
	}
	call(inst, "bump")
	call(inst, "bump")
	want := call(inst, "sum")
	img, err := ReadImage(bytes.NewReader(encode(t, inst.snapshot(g))))
	if err != nil {
		t.Fatal(err)
	}
	inst2, err := e.restoreInstance(ctx, g, img, nil, WorkerOptions{}, false, false)
	if err != nil {
		t.Fatal(err)
	}
	defer inst2.close()
	if got := call(inst2, "sum"); got != want {
		t.Errorf("restored sum = %v; want %v", got, want)
	}
	call(inst, "bump")
	call(inst2, "bump")
	if a, b := call(inst, "sum"), call(inst2, "sum"); a != b {
		t.Errorf("after one more bump: %v and %v", a, b)
	}
}

// globalsModule: globals 0..3 mutable i32, i64, f32, f64 (none exported),
// global 4 immutable; "bump" adds to each and to the i32 at address 70000
// (the second page); "sum" adds them all up as f64. Exports also the two
// functions the instance code calls (_initialize, execd_init) and memory.
func globalsModule() []byte {
	sec := func(id byte, body ...byte) []byte {
		return append(appendU32([]byte{id}, uint32(len(body))), body...)
	}
	m := []byte("\x00asm\x01\x00\x00\x00")
	// types: 0 () -> (), 1 (i32) -> i32, 2 () -> f64
	m = append(m, sec(1, 3, 0x60, 0, 0, 0x60, 1, 0x7f, 1, 0x7f, 0x60, 0, 1, 0x7c)...)
	m = append(m, sec(3, 4, 0, 1, 0, 2)...) // functions: _initialize, execd_init, bump, sum
	m = append(m, sec(5, 1, 0, 2)...)       // memory: 2 pages
	globals := []byte{5,
		0x7f, 1, 0x41, 1, 0x0b, // i32 = 1
		0x7e, 1, 0x42, 2, 0x0b, // i64 = 2
		0x7d, 1, 0x43, 0, 0, 0x40, 0x40, 0x0b, // f32 = 3
		0x7c, 1, 0x44, 0, 0, 0, 0, 0, 0, 0x10, 0x40, 0x0b, // f64 = 4
		0x7f, 0, 0x41, 5, 0x0b, // const i32 = 5
	}
	m = append(m, sec(6, globals...)...)
	exp := []byte{5}
	for i, name := range []string{"_initialize", "execd_init", "bump", "sum"} {
		exp = appendName(exp, name)
		exp = append(exp, 0x00, byte(i))
	}
	exp = appendName(exp, "memory")
	exp = append(exp, 0x02, 0)
	m = append(m, sec(7, exp...)...)
	bodies := [][]byte{
		{0, 0x0b},
		{0, 0x41, 0, 0x0b},
		{0,
			0x23, 0, 0x41, 10, 0x6a, 0x24, 0, // g0 += 10
			0x23, 1, 0x42, 20, 0x7c, 0x24, 1, // g1 += 20
			0x23, 2, 0x43, 0, 0, 0, 0x3f, 0x92, 0x24, 2, // g2 += 0.5
			0x23, 3, 0x44, 0, 0, 0, 0, 0, 0, 0xd0, 0x3f, 0xa0, 0x24, 3, // g3 += 0.25
			0x41, 0xf0, 0xa2, 0x04, 0x41, 0xf0, 0xa2, 0x04, 0x28, 2, 0, 0x41, 3, 0x6a, 0x36, 2, 0, // mem[70000] += 3
			0x0b},
		{0,
			0x23, 0, 0xb7, 0x23, 1, 0xb9, 0xa0, 0x23, 2, 0xbb, 0xa0, 0x23, 3, 0xa0, 0x23, 4, 0xb7, 0xa0,
			0x41, 0xf0, 0xa2, 0x04, 0x28, 2, 0, 0xb7, 0xa0,
			0x0b},
	}
	code := []byte{byte(len(bodies))}
	for _, b := range bodies {
		code = append(appendU32(code, uint32(len(b))), b...)
	}
	return append(m, sec(10, code...)...)
}

// MemoryBytes: the worker's linear memory, summed by the engine, given
// back on Close.
func TestMemoryBytes(t *testing.T) {
	t.Parallel()
	cfg := testConfig(true)
	e := newTestEngine(t, cfg)
	base := e.MemoryBytes()
	w := newWorker(t, e, WorkerOptions{})
	if w.MemoryBytes() <= 0 || e.MemoryBytes() != base+w.MemoryBytes() {
		t.Fatalf("worker %d bytes, engine %d (was %d)", w.MemoryBytes(), e.MemoryBytes(), base)
	}
	before := w.MemoryBytes()
	mustRun(t, w, "globalThis.keep = new Uint8Array(20 << 20).fill(1); 0", StatusOK)
	// The guest may serve the first pages from free space at the top of its
	// heap: allow one wasm page less than the array.
	if grown := w.MemoryBytes(); grown < before+20<<20-64<<10 || e.MemoryBytes() != base+grown {
		t.Errorf("after 20 MiB: worker %d bytes (was %d), engine %d", grown, before, e.MemoryBytes())
	}
	w.Close()
	if w.MemoryBytes() != 0 || e.MemoryBytes() != base {
		t.Errorf("after Close: worker %d, engine %d; want 0, %d", w.MemoryBytes(), e.MemoryBytes(), base)
	}
}

// FuzzReadImage: no input panics, hangs or allocates without bound; what
// decodes encodes back to a decodable image of the same content. The
// checksum of each input is also fixed up, so that the fuzzer reaches the
// parser behind it.
func FuzzReadImage(f *testing.F) {
	img := &Image{lang: "javascript", memSize: 2 << 16, clock: 12345,
		globals: []imageGlobal{{typ: api.ValueTypeI32, val: 7}},
		pages:   []uint32{0, 17}, data: bytes.Repeat([]byte{1, 2, 3, 4}, 2*imagePage/4)}
	var buf bytes.Buffer
	img.WriteTo(&buf)
	f.Add(buf.Bytes())
	empty := &Image{lang: "python", memSize: 1 << 16}
	buf.Reset()
	empty.WriteTo(&buf)
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(b []byte) {
			img, err := readImage(bytes.NewReader(b), 64, nil)
			if err != nil {
				if !errors.Is(err, ErrImageCorrupt) && !errors.Is(err, ErrImageVersion) {
					t.Fatalf("untyped error %v", err)
				}
				// A damaged or truncated image stays so whatever its judge says.
				if msg := err.Error(); strings.Contains(msg, "checksum mismatch") || strings.Contains(msg, "truncated") {
					if _, jerr := readImage(bytes.NewReader(b), 64, func(*Image) error { return ErrImageStale }); !errors.Is(jerr, ErrImageCorrupt) {
						t.Fatalf("a damaged image, judged: %v (unjudged: %v)", jerr, err)
					}
				}
				return
			}
			// A judge refusing the header gets its error back, the image
			// being intact.
			refuse := errors.New("refused")
			if _, err := readImage(bytes.NewReader(b), 64, func(*Image) error { return refuse }); !errors.Is(err, refuse) {
				t.Fatalf("an intact image refused by its judge: %v", err)
			}
			var out bytes.Buffer
			img.WriteTo(&out)
			again, err := readImage(&out, 64, nil)
			if err != nil {
				t.Fatalf("re-encoded image does not decode: %v", err)
			}
			if again.memSize != img.memSize || !bytes.Equal(again.data, img.data) || len(again.pages) != len(img.pages) {
				t.Fatal("re-encoded image differs")
			}
		}
		check(b)
		if len(b) >= 20 {
			fixed := append([]byte(nil), b...)
			binary.LittleEndian.PutUint32(fixed[len(fixed)-4:], crc32.Checksum(fixed[:len(fixed)-4], castagnoli))
			check(fixed)
		}
	})
}
