package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/sys"

	"execd/sandbox"
)

// spinModule is a hand-assembled module that imports execd.interrupted
// (function 0) and exports "spin" (function 1), which loops forever in a
// loop nested in a block, so that the check lands inside nested control
// flow. It has one global of its own.
func spinModule() []byte {
	sec := func(id byte, body ...byte) []byte {
		return append(appendU32([]byte{id}, uint32(len(body))), body...)
	}
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, sec(1, 2, 0x60, 0, 0, 0x60, 0, 1, 0x7f)...) // types: () -> (), () -> i32
	imp := []byte{1}
	imp = appendName(imp, "execd")
	imp = appendName(imp, "interrupted")
	m = append(m, sec(2, append(imp, 0x00, 0x01)...)...)                    // import function, type 1
	m = append(m, sec(3, 1, 0)...)                                          // function 1 has type 0
	m = append(m, sec(6, 1, 0x7f, 0x01, 0x41, 0x07, 0x0b)...)               // global 0: mut i32 = 7
	m = append(m, sec(7, 1, 4, 's', 'p', 'i', 'n', 0x00, 0x01)...)          // export "spin" = function 1
	body := []byte{0, 0x02, 0x40, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b, 0x0b} // block loop br 0 end end end
	m = append(m, sec(10, append([]byte{1, byte(len(body))}, body...)...)...)
	return m
}

func TestKillSwitchStopsAnEndlessLoop(t *testing.T) {
	ctx := context.Background()
	bin, err := addKillSwitch(spinModule())
	if err != nil {
		t.Fatal(err)
	}
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	if err := instantiateHost(ctx, rt); err != nil {
		t.Fatal(err)
	}
	mod, err := rt.Instantiate(ctx, bin)
	if err != nil {
		t.Fatalf("instrumented module does not instantiate: %v", err)
	}
	st := &runState{}
	done := make(chan error, 1)
	go func() {
		_, err := mod.ExportedFunction("spin").Call(context.WithValue(ctx, runKey{}, st))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("spin returned before the kill: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	// The soft interrupt is only an answer to the guest's poll: the
	// spinning loop ignores it.
	st.interrupt.Store(true)
	select {
	case err := <-done:
		t.Fatalf("spin returned on the soft interrupt: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	// Meanwhile the garbage collector can stop the world: the countdown
	// leaves the machine code often enough for the goroutine to be
	// preempted. (Without it this GC waits for the loop, forever.)
	gcDone := make(chan struct{})
	go func() { runtime.GC(); close(gcDone) }()
	select {
	case <-gcDone:
	case <-time.After(10 * time.Second):
		t.Fatal("a garbage collection waited for the spinning guest")
	}
	st.kill.Store(true)
	select {
	case err := <-done:
		var exit *sys.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != killExitCode {
			t.Fatalf("spin ended with %v; want exit code %d", err, killExitCode)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the kill switch did not stop the loop")
	}
}

// TestKillSwitchOnTheGuests: the real guests take the kill switch, and the
// strict engine compiles and runs exactly that module with its exports. The
// compilation is the shared strict test engine's (the slow part: the Python
// guest is 8 MB of wasm), not one of this test's own.
func TestKillSwitchOnTheGuests(t *testing.T) {
	e := testEngine(t, true)
	for _, lang := range sandbox.Languages() {
		bin, err := sandbox.Module(lang)
		if err != nil {
			t.Fatal(err)
		}
		plain, _, err := prepareModule(bin, rewrites{images: true})
		if err != nil {
			t.Fatalf("%s: %v", lang, err)
		}
		strict, _, err := prepareModule(bin, rewrites{killSwitch: true, images: true})
		if err != nil {
			t.Fatalf("%s: %v", lang, err)
		}
		if len(strict) <= len(plain) {
			t.Errorf("%s: no check added (%d -> %d bytes)", lang, len(plain), len(strict))
		}
		g := e.guests[lang]
		if g.sum != sha256.Sum256(strict) {
			t.Errorf("%s: the strict engine compiled another module than the guest with the kill switch", lang)
		}
		if _, ok := g.cm.ExportedFunctions()[exportEval]; !ok {
			t.Errorf("%s: exports lost", lang)
		}
	}
}

func TestKillSwitchRefusesWhatItCannotRead(t *testing.T) {
	good := spinModule()
	for name, bin := range map[string][]byte{
		"empty":     nil,
		"not wasm":  []byte("\x00asn\x01\x00\x00\x00"),
		"truncated": good[:len(good)-3],
		"simd": func() []byte {
			b := append([]byte(nil), good...)
			b[len(b)-5] = 0xfd // the br becomes a SIMD prefix
			return b
		}(),
		"no sections":          []byte("\x00asm\x01\x00\x00\x00"),
		"no execd.interrupted": bytes.Replace(good, []byte("interrupted"), []byte("interruptex"), 1),
	} {
		if _, err := addKillSwitch(bin); !errors.Is(err, errRewrite) {
			t.Errorf("%s: err = %v; want a kill switch error", name, err)
		}
	}
}

func FuzzKillSwitch(f *testing.F) {
	f.Add(spinModule())
	f.Fuzz(func(t *testing.T, bin []byte) {
		out, err := addKillSwitch(bin)
		if err != nil {
			return
		}
		if len(out) <= len(bin) {
			t.Fatalf("accepted without adding the countdown: %d -> %d bytes", len(bin), len(out))
		}
	})
}
