package sandbox

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// The guest must be built for the tests of execd to mean anything: this
// fails, never skips, when it is not.
func TestJavaScriptGuestBuilt(t *testing.T) {
	b, err := Module("javascript")
	if err != nil {
		t.Fatalf("%v", err)
	}
	if !bytes.HasPrefix(b, []byte("\x00asm\x01\x00\x00\x00")) {
		t.Fatalf("qjs.wasm is not a WebAssembly module")
	}
	if langs := Languages(); len(langs) == 0 || langs[0] != "javascript" {
		t.Errorf("Languages() = %v", langs)
	}
}

func TestModuleErrors(t *testing.T) {
	t.Setenv("EXECD_GUEST_DIR", t.TempDir())
	_, err := Module("javascript")
	if !errors.Is(err, ErrNotBuilt) || err.Error() != "guest javascript not built: run make guests" {
		t.Errorf("missing guest: %v", err)
	}
	if _, err := Module("cobol"); err == nil || !strings.Contains(err.Error(), "unknown language") {
		t.Errorf("unknown language: %v", err)
	}
	if langs := Languages(); len(langs) != 0 {
		t.Errorf("Languages() with no guests = %v", langs)
	}
}
