package worker

import (
	"context"
	"fmt"
	"testing"

	"github.com/tetratelabs/wazero/api"

	"execd/sandbox"
)

// What memory images rely on in the guests (sandbox/ABI.md, "Memory images
// and clones"): between calls an instance's state is its linear memory and
// __stack_pointer, and execd_reseed gives a clone fresh random state.

const exportReseed = "execd_reseed"

// cloneState makes dst's instance a copy of src's, the way restoring a
// memory image does: the linear memory, byte for byte, and __stack_pointer.
// dst must be a fresh worker of the same language whose memory is not
// larger than src's.
func cloneState(t *testing.T, src, dst *Worker) {
	t.Helper()
	sm, dm := src.inst.mod.Memory(), dst.inst.mod.Memory()
	if dm.Size() > sm.Size() {
		t.Fatalf("clone target is larger (%d bytes) than its source (%d)", dm.Size(), sm.Size())
	}
	if grow := (sm.Size() - dm.Size()) / 65536; grow > 0 {
		if _, ok := dm.Grow(grow); !ok {
			t.Fatalf("cannot grow the clone's memory by %d pages", grow)
		}
	}
	b, ok := sm.Read(0, sm.Size())
	if !ok || !dm.Write(0, b) {
		t.Fatal("copying linear memory failed")
	}
	sp := src.inst.mod.ExportedGlobal("__stack_pointer")
	dsp, ok := dst.inst.mod.ExportedGlobal("__stack_pointer").(api.MutableGlobal)
	if sp == nil || !ok {
		t.Fatal("the guest does not export a mutable __stack_pointer")
	}
	dsp.Set(sp.Get())
}

// reseed calls the guest's execd_reseed export directly.
func reseed(t *testing.T, w *Worker) {
	t.Helper()
	fn := w.inst.mod.ExportedFunction(exportReseed)
	if fn == nil {
		t.Fatalf("the %s guest does not export %s", w.Language(), exportReseed)
	}
	r, err := fn.Call(context.Background())
	if err != nil {
		t.Fatalf("%s: %v", exportReseed, err)
	}
	if rc := int32(r[0]); rc != 0 {
		t.Fatalf("%s returned %d", exportReseed, rc)
	}
}

func newLangWorker(t *testing.T, lang string) *Worker {
	t.Helper()
	if lang == "python" {
		return newPyWorker(t, WorkerOptions{})
	}
	return newWorker(t, testEngine(t, true), WorkerOptions{})
}

// TestReseedGivesClonesTheirOwnRandomness: two clones of one instance draw
// the same random numbers (they are copies) until each calls execd_reseed;
// then their sequences differ, and every variable is still there.
func TestReseedGivesClonesTheirOwnRandomness(t *testing.T) {
	cases := []struct {
		name, lang, setup, draw, kept, want string
		// copies: the clones draw the same numbers when not reseeded.
		copies bool
	}{
		{"javascript", "javascript", "let kept = 'base'; Math.random()",
			"[Math.random(), Math.random(), Math.random()].join()", "kept", `"base"`, true},
		{"python", "python", "import random, tempfile\nkept = 'base'\nnames = tempfile._get_candidate_names()\nnext(names)",
			"random.random(), random.getrandbits(64), next(names), next(tempfile._get_candidate_names())", "kept", "'base'", true},
		// random imported only in the clones: it seeds itself at import,
		// from the host's entropy, not from the cloned memory.
		{"python import after clone", "python", "kept = 'base'", "import random\nrandom.random()", "kept", "'base'", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := newLangWorker(t, c.lang)
			mustRun(t, base, c.setup, StatusOK)
			draws := func(reseedFirst bool) (string, string) {
				a, b := newLangWorker(t, c.lang), newLangWorker(t, c.lang)
				cloneState(t, base, a)
				cloneState(t, base, b)
				if reseedFirst {
					reseed(t, a)
					reseed(t, b)
				}
				if got := value(mustRun(t, a, c.kept, StatusOK)); got != c.want {
					t.Fatalf("clone lost its state: %s = %s", c.kept, got)
				}
				return value(mustRun(t, a, c.draw, StatusOK)), value(mustRun(t, b, c.draw, StatusOK))
			}
			// Control: without a reseed the clones are the same interpreter.
			if c.copies {
				if x, y := draws(false); x != y {
					t.Fatalf("clones differ before any reseed (%s vs %s): the test's clone is not a copy", x, y)
				}
			}
			if x, y := draws(true); x == y {
				t.Fatalf("clones draw the same numbers after %s: %s", exportReseed, x)
			}
		})
	}
}

// TestReseedKeepsState: execd_reseed on a running workspace changes nothing
// the code can see but its random numbers.
func TestReseedKeepsState(t *testing.T) {
	for _, c := range []struct{ lang, setup, check, want string }{
		{"javascript", "let n = 41; const o = {k: [1, 2]}; function inc(v) { return v + 1 }", "[inc(n), o]", "[42, {k: [1, 2]}]"},
		{"python", "import random\nn = 41\no = {'k': [1, 2]}\ndef inc(v): return v + 1", "inc(n), o, random.random() < 1", "(42, {'k': [1, 2]}, True)"},
	} {
		w := newLangWorker(t, c.lang)
		mustRun(t, w, c.setup, StatusOK)
		reseed(t, w)
		reseed(t, w)
		if got := value(mustRun(t, w, c.check, StatusOK)); got != c.want {
			t.Errorf("%s after %s: %s; want %s", c.lang, exportReseed, got, c.want)
		}
	}
}

// TestGuestMutableGlobals: the only mutable global a built guest defines is
// its exported __stack_pointer (a memory image saves it with the linear
// memory), and the kill switch adds exactly its own countdown, which needs
// no saving.
func TestGuestMutableGlobals(t *testing.T) {
	for _, lang := range []string{"javascript", "python"} {
		bin, err := sandbox.Module(lang)
		if err != nil {
			t.Fatalf("%s: %v (run make guests)", lang, err)
		}
		mut, err := mutableGlobals(bin)
		if err != nil {
			t.Fatalf("%s: %v", lang, err)
		}
		if len(mut) != 1 || mut[0] != "__stack_pointer" {
			t.Errorf("%s: mutable globals %q; want only __stack_pointer", lang, mut)
		}
		ks, err := addKillSwitch(bin)
		if err != nil {
			t.Fatalf("%s: %v", lang, err)
		}
		mut, err = mutableGlobals(ks)
		if err != nil {
			t.Fatalf("%s with the kill switch: %v", lang, err)
		}
		if len(mut) != 2 || mut[0] != "__stack_pointer" || mut[1] != "" {
			t.Errorf("%s with the kill switch: mutable globals %q; want __stack_pointer and one unexported countdown", lang, mut)
		}
	}
}

// mutableGlobals lists the module's mutable globals, imported ones first,
// each by its export name ("" when not exported).
func mutableGlobals(bin []byte) ([]string, error) {
	r := &reader{b: bin, off: 8}
	var mut []uint32
	names := map[uint32]string{}
	imported := uint32(0)
	for r.off < len(r.b) && r.err == nil {
		id := r.byte()
		s := &reader{b: r.bytes(int(r.u32()))}
		switch id {
		case secImport:
			for n, i := s.u32(), uint32(0); i < n && s.err == nil; i++ {
				s.name()
				s.name()
				switch kind := s.byte(); kind {
				case 0x00:
					s.u32()
				case 0x01:
					s.byte()
					skipLimits(s)
				case 0x02:
					skipLimits(s)
				case 0x03:
					s.byte()
					if s.byte() == 1 {
						mut = append(mut, imported)
					}
					imported++
				default:
					return nil, fmt.Errorf("import kind 0x%02x", kind)
				}
			}
		case secGlobal:
			for n, i := s.u32(), uint32(0); i < n && s.err == nil; i++ {
				s.byte() // value type
				if s.byte() == 1 {
					mut = append(mut, imported+i)
				}
				for op := s.byte(); op != 0x0b && s.err == nil; op = s.byte() {
					if err := skipImmediates(s, op); err != nil {
						return nil, err
					}
				}
			}
		case 7: // exports
			for n, i := s.u32(), uint32(0); i < n && s.err == nil; i++ {
				name := s.name()
				kind, idx := s.byte(), s.u32()
				if kind == 0x03 {
					names[idx] = name
				}
			}
		}
		if s.err != nil {
			return nil, fmt.Errorf("section %d: %v", id, s.err)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	out := make([]string, len(mut))
	for i, g := range mut {
		out[i] = names[g]
	}
	return out, nil
}
