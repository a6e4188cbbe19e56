// Package sandbox hands the built guest modules to the worker.
//
// The guests are WebAssembly reactor modules built from Debian source
// packages by build.sh (run by `make guests`) into sandbox/guests/, embedded
// into the binary at compile time. All of them implement the one ABI of
// ABI.md. EXECD_GUEST_DIR, when set, is read instead of the embedded copy
// (to try a guest without rebuilding execd).
package sandbox

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

//go:embed guests
var guests embed.FS

// files maps a language to its guest module's file name.
var files = map[string]string{
	"javascript": "qjs.wasm",
	"python":     "python.wasm",
}

// ErrNotBuilt is matched (errors.Is) by the error of Module for a known
// language whose guest has not been built.
var ErrNotBuilt = errors.New("not built")

// Module returns the WebAssembly bytes of the guest for lang.
func Module(lang string) ([]byte, error) {
	name, ok := files[lang]
	if !ok {
		return nil, fmt.Errorf("unknown language %q", lang)
	}
	var b []byte
	var err error
	if dir := os.Getenv("EXECD_GUEST_DIR"); dir != "" {
		b, err = os.ReadFile(filepath.Join(dir, name))
	} else {
		b, err = guests.ReadFile("guests/" + name)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("guest %s %w: run make guests", lang, ErrNotBuilt)
	}
	if err != nil {
		return nil, fmt.Errorf("guest %s: %w", lang, err)
	}
	return b, nil
}

// Languages lists, sorted, the languages whose guest is built: its module
// and its read-only files (Files) are there. It only looks (stat), reading
// nothing, so that a caller that needs the list at start does not wait for
// the bytes.
func Languages() []string {
	var out []string
	for lang, name := range files {
		if built(name) && (mounts[lang].zip == "" || built(mounts[lang].zip)) {
			out = append(out, lang)
		}
	}
	sort.Strings(out)
	return out
}

func built(name string) bool {
	var err error
	if dir := os.Getenv("EXECD_GUEST_DIR"); dir != "" {
		_, err = os.Stat(filepath.Join(dir, name))
	} else {
		_, err = fs.Stat(guests, "guests/"+name)
	}
	return err == nil
}
