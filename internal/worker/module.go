package worker

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/tetratelabs/wazero/api"
)

// Wasm section ids used here (see also killswitch.go).
const (
	secExport = 7
)

// globalExportPrefix names the exports prepareModule adds: every mutable
// global the module defines is exported as globalExportPrefix + its index,
// so that the host can read and write it (memory images, image.go).
const globalExportPrefix = "execd.global."

var errRewrite = errors.New("guest rewrite")

// moduleGlobal is one mutable global of a prepared module.
type moduleGlobal struct {
	index  uint32 // in the module's global index space
	typ    api.ValueType
	export string // the export prepareModule gave it
}

// moduleInfo is what prepareModule learnt about a guest module.
type moduleInfo struct {
	// globals lists every mutable global the module defines, the kill
	// switch's countdown included, in index order.
	globals []moduleGlobal
	// notImageable says why linear memory plus globals is not the whole
	// state of an instance between calls ("" when it is): an imported
	// memory, table or mutable global, or code that writes tables or drops
	// segments. Memory images of such a module would be incomplete.
	notImageable string
}

// prepareModule rewrites a guest module before it is compiled: it exports
// every mutable global it defines (globalExportPrefix) and, with
// killSwitch, adds the kill switch (killswitch.go). It reads every
// instruction of the code section either way and refuses a module it
// cannot fully parse.
func prepareModule(bin []byte, killSwitch bool) ([]byte, moduleInfo, error) {
	var info moduleInfo
	if len(bin) < 8 || !bytes.Equal(bin[:4], []byte("\x00asm")) || !bytes.Equal(bin[4:8], []byte{1, 0, 0, 0}) {
		return nil, info, fmt.Errorf("%w: not a wasm 1.0 module", errRewrite)
	}
	type section struct {
		id   byte
		body []byte
	}
	var secs []section
	r := &reader{b: bin, off: 8}
	for r.off < len(r.b) {
		id := r.byte()
		n := r.u32()
		body := r.bytes(int(n))
		if r.err != nil {
			return nil, info, fmt.Errorf("%w: section %d: %v", errRewrite, id, r.err)
		}
		secs = append(secs, section{id, body})
	}

	var imp imports
	var defined []globalType
	gi, ci, ei := -1, -1, -1
	for i, s := range secs {
		var err error
		switch s.id {
		case secImport:
			imp, err = readImports(s.body, killSwitchModule, killSwitchImport)
		case secGlobal:
			gi = i
			defined, err = readGlobals(s.body)
		case secExport:
			ei = i
		case secCode:
			ci = i
		}
		if err != nil {
			return nil, info, fmt.Errorf("%w: section %d: %v", errRewrite, s.id, err)
		}
	}
	info.notImageable = imp.outside
	if killSwitch {
		if gi < 0 || ci < 0 {
			return nil, info, fmt.Errorf("%w: the module needs global and code sections", errRewrite)
		}
		if !imp.found {
			return nil, info, fmt.Errorf("%w: the module does not import %s.%s", errRewrite, killSwitchModule, killSwitchImport)
		}
	}
	for i, g := range defined {
		if !g.mutable {
			continue
		}
		if g.typ == api.ValueTypeExternref || g.typ == valueTypeFuncref {
			// Its value is a host pointer, meaningless in another instance.
			if info.notImageable == "" {
				info.notImageable = "a mutable reference global"
			}
			continue
		}
		info.globals = append(info.globals, moduleGlobal{index: imp.globals + uint32(i), typ: g.typ})
	}

	if killSwitch {
		countdown := imp.globals + uint32(len(defined))
		// global section: the countdown, (mut i32) = killSwitchEvery.
		g := []byte{api.ValueTypeI32, 0x01, 0x41}
		g = appendS32(g, killSwitchEvery)
		secs[gi].body = appendToVec(secs[gi].body, append(g, 0x0b))
		info.globals = append(info.globals, moduleGlobal{index: countdown, typ: api.ValueTypeI32})
	}
	if ci >= 0 {
		var check []byte
		if killSwitch {
			check = loopHead(imp.globals+uint32(len(defined)), imp.fn)
		}
		code, outside, err := instrumentCode(secs[ci].body, check)
		if err != nil {
			return nil, info, fmt.Errorf("%w: code: %v", errRewrite, err)
		}
		secs[ci].body = code
		if info.notImageable == "" && outside != "" {
			info.notImageable = outside
		}
	}

	// export section: every mutable global.
	if len(info.globals) > 0 {
		var names map[string]bool
		if ei >= 0 {
			var err error
			if names, err = readExportNames(secs[ei].body); err != nil {
				return nil, info, fmt.Errorf("%w: section %d: %v", errRewrite, secExport, err)
			}
		} else {
			// No export section: one goes right after the global section,
			// where the binary format orders it.
			ei = gi + 1
			secs = append(secs[:ei], append([]section{{secExport, []byte{0}}}, secs[ei:]...)...)
		}
		for i := range info.globals {
			g := &info.globals[i]
			g.export = globalExportPrefix + strconv.FormatUint(uint64(g.index), 10)
			if names[g.export] {
				return nil, info, fmt.Errorf("%w: the module already exports %q", errRewrite, g.export)
			}
			item := appendName(nil, g.export)
			item = append(item, 0x03) // global
			item = appendU32(item, g.index)
			secs[ei].body = appendToVec(secs[ei].body, item)
		}
	}

	out := append(make([]byte, 0, len(bin)+len(bin)/4), bin[:8]...)
	for _, s := range secs {
		out = append(out, s.id)
		out = appendU32(out, uint32(len(s.body)))
		out = append(out, s.body...)
	}
	return out, info, nil
}

type globalType struct {
	typ     api.ValueType
	mutable bool
}

// readGlobals reads the global section: each global's type, mutability and
// (skipped) constant initialiser.
func readGlobals(sec []byte) ([]globalType, error) {
	r := &reader{b: sec}
	n := r.u32()
	var out []globalType
	for i := uint32(0); i < n && r.err == nil; i++ {
		t := r.byte()
		switch t {
		case api.ValueTypeI32, api.ValueTypeI64, api.ValueTypeF32, api.ValueTypeF64,
			api.ValueTypeExternref, valueTypeFuncref:
		default:
			if r.err == nil {
				return nil, fmt.Errorf("global %d: value type 0x%02x", i, t)
			}
		}
		mut := r.byte()
		if mut > 1 {
			return nil, fmt.Errorf("global %d: mutability 0x%02x", i, mut)
		}
		for r.err == nil {
			op := r.byte()
			if op == 0x0b {
				break
			}
			if _, err := skipImmediates(r, op); err != nil {
				return nil, fmt.Errorf("global %d initialiser: %v", i, err)
			}
		}
		out = append(out, globalType{typ: t, mutable: mut == 1})
	}
	return out, r.err
}

// readExportNames reads the names the export section already uses.
func readExportNames(sec []byte) (map[string]bool, error) {
	r := &reader{b: sec}
	n := r.u32()
	names := map[string]bool{}
	for i := uint32(0); i < n && r.err == nil; i++ {
		names[r.name()] = true
		r.byte()
		r.u32()
	}
	if r.err == nil && r.off != len(r.b) {
		return nil, errors.New("trailing bytes after the exports")
	}
	return names, r.err
}

func appendName(b []byte, s string) []byte {
	return append(appendU32(b, uint32(len(s))), s...)
}

// valueTypeFuncref is the binary encoding of funcref (api has no constant).
const valueTypeFuncref api.ValueType = 0x70
