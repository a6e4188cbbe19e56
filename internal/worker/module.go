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
	secType      = 1
	secFunction  = 3
	secExport    = 7
	secData      = 11
	secDataCount = 12
)

// Exports prepareModule adds.
const (
	// globalExportPrefix + a global's index exports each mutable global the
	// module defines and does not export itself, so that the host can read
	// and write it (image.go).
	globalExportPrefix = "execd.global."
	// dataInitExport writes the module's data segments into memory: what
	// instantiation does for active segments, which the rewrite makes
	// passive, so that an instance restored from an image does not copy
	// them only to overwrite them (see RATIONALE.md).
	dataInitExport = "execd.data"
)

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
	// switch's countdown included, in index order; with images, each with
	// the name it is exported under.
	globals []moduleGlobal
	// notImageable says why linear memory plus globals is not the whole
	// state of an instance between calls ("" when it is): an imported
	// memory, table or mutable global, a mutable reference global, or code
	// that writes tables or drops segments. Memory images of such a module
	// would be incomplete.
	notImageable string
	// dataInit is dataInitExport when the module had active data segments
	// (a fresh instance must call it first), else "".
	dataInit string
}

type section struct {
	id   byte
	body []byte
}

// rewrites says what prepareModule changes in a module.
type rewrites struct {
	// killSwitch adds the kill switch (killswitch.go).
	killSwitch bool
	// images exports every mutable global the module defines that it does
	// not export already (globalExportPrefix), and makes its active data
	// segments passive with a function that writes them (dataInitExport),
	// for a fresh instance to call first.
	images bool
}

// prepareModule rewrites a guest module before it is compiled. It reads
// every instruction of the code section whatever it changes, and refuses a
// module it cannot fully parse.
func prepareModule(bin []byte, rw rewrites) ([]byte, moduleInfo, error) {
	killSwitch := rw.killSwitch
	var info moduleInfo
	if len(bin) < 8 || !bytes.Equal(bin[:4], []byte("\x00asm")) || !bytes.Equal(bin[4:8], []byte{1, 0, 0, 0}) {
		return nil, info, fmt.Errorf("%w: not a wasm 1.0 module", errRewrite)
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
	find := func(id byte) int {
		for i, s := range secs {
			if s.id == id {
				return i
			}
		}
		return -1
	}

	var imp imports
	var defined []globalType
	for _, s := range secs {
		var err error
		switch s.id {
		case secImport:
			imp, err = readImports(s.body, killSwitchModule, killSwitchImport)
		case secGlobal:
			defined, err = readGlobals(s.body)
		}
		if err != nil {
			return nil, info, fmt.Errorf("%w: section %d: %v", errRewrite, s.id, err)
		}
	}
	info.notImageable = imp.outside
	gi, ci := find(secGlobal), find(secCode)
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

	if rw.images {
		var err error
		if secs, err = imageRewrites(secs, &info, imp.funcs); err != nil {
			return nil, info, err
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

// imageRewrites exports the mutable globals (naming each in info) and makes
// the data segments passive.
func imageRewrites(secs []section, info *moduleInfo, importedFuncs uint32) ([]section, error) {
	exported := map[uint32]string{} // global index -> an export name it already has
	for _, s := range secs {
		if s.id == secExport {
			var err error
			if exported, err = readGlobalExports(s.body); err != nil {
				return nil, fmt.Errorf("%w: exports: %v", errRewrite, err)
			}
		}
	}
	var exports [][]byte
	for i := range info.globals {
		g := &info.globals[i]
		if name, ok := exported[g.index]; ok {
			g.export = name
			continue
		}
		g.export = globalExportPrefix + strconv.FormatUint(uint64(g.index), 10)
		exports = append(exports, exportItem(g.export, 0x03, g.index))
	}
	secs, fn, err := passiveData(secs, importedFuncs)
	if err != nil {
		return nil, fmt.Errorf("%w: data: %v", errRewrite, err)
	}
	if fn >= 0 {
		info.dataInit = dataInitExport
		exports = append(exports, exportItem(dataInitExport, 0x00, uint32(fn)))
	}
	if secs, err = addExports(secs, exports); err != nil {
		return nil, fmt.Errorf("%w: exports: %v", errRewrite, err)
	}
	return secs, nil
}

func exportItem(name string, kind byte, index uint32) []byte {
	return appendU32(append(appendName(nil, name), kind), index)
}

// addExports appends items to the export section, making one (where the
// binary format orders it: after the globals, or the sections before them)
// when the module has none.
func addExports(secs []section, items [][]byte) ([]section, error) {
	if len(items) == 0 {
		return secs, nil
	}
	ei := -1
	for i, s := range secs {
		if s.id == secExport {
			ei = i
		}
	}
	var names map[string]bool
	if ei >= 0 {
		var err error
		if names, err = readExportNames(secs[ei].body); err != nil {
			return nil, err
		}
	} else {
		ei = insertAt(secs, secExport)
		secs = append(secs[:ei], append([]section{{secExport, []byte{0}}}, secs[ei:]...)...)
	}
	for _, it := range items {
		name := (&reader{b: it}).name()
		if names[name] {
			return nil, fmt.Errorf("the module already exports %q", name)
		}
		secs[ei].body = appendToVec(secs[ei].body, it)
	}
	return secs, nil
}

// sectionOrder is the position of each known section id in a module.
var sectionOrder = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 8, 9: 9, 12: 10, 10: 11, 11: 12}

// insertAt is where a new section with id goes: before the first known
// section that must follow it.
func insertAt(secs []section, id byte) int {
	for i, s := range secs {
		if o, ok := sectionOrder[s.id]; ok && o > sectionOrder[id] {
			return i
		}
	}
	return len(secs)
}

// passiveData makes the module's active data segments (memory 0) passive
// and adds a function, of index imported+defined functions, that writes
// them and drops them, in order, as instantiation would. It returns that
// function's index, or -1 when there was nothing to change.
func passiveData(secs []section, importedFuncs uint32) ([]section, int, error) {
	di := -1
	for i, s := range secs {
		if s.id == secData {
			di = i
		}
	}
	if di < 0 {
		return secs, -1, nil
	}
	r := &reader{b: secs[di].body}
	n := r.u32()
	data := appendU32(nil, n)
	body := []byte{0} // no locals
	converted := false
	for i := uint32(0); i < n && r.err == nil; i++ {
		start := r.off
		switch flag := r.u32(); flag {
		case 0: // active, memory 0: offset expression, bytes
			from := r.off
			if err := skipConstExpr(r); err != nil {
				return nil, -1, fmt.Errorf("segment %d: %v", i, err)
			}
			offset := r.b[from : r.off-1] // without its end
			seg := r.bytes(int(r.u32()))
			data = appendU32(append(data, 0x01), uint32(len(seg))) // passive
			data = append(data, seg...)
			body = append(body, offset...)
			body = append(body, 0x41, 0x00, 0x41) // i32.const 0; i32.const len
			body = appendS32(body, int32(len(seg)))
			body = appendU32(append(body, 0xfc, 0x08), i) // memory.init i 0
			body = append(body, 0x00)
			body = appendU32(append(body, 0xfc, 0x09), i) // data.drop i
			converted = true
		case 1: // passive
			r.bytes(int(r.u32()))
			data = append(data, r.b[start:r.off]...)
		case 2: // active, explicit memory
			r.u32()
			if err := skipConstExpr(r); err != nil {
				return nil, -1, fmt.Errorf("segment %d: %v", i, err)
			}
			r.bytes(int(r.u32()))
			data = append(data, r.b[start:r.off]...)
		default:
			return nil, -1, fmt.Errorf("segment %d: flags %d", i, flag)
		}
	}
	if r.err != nil {
		return nil, -1, r.err
	}
	if r.off != len(r.b) {
		return nil, -1, errors.New("trailing bytes after the segments")
	}
	if !converted {
		return secs, -1, nil
	}
	body = append(body, 0x0b)
	ti, fi, ci := -1, -1, -1
	hasCount := false
	for i, s := range secs {
		switch s.id {
		case secType:
			ti = i
		case secFunction:
			fi = i
		case secCode:
			ci = i
		case secDataCount:
			hasCount = true
		}
	}
	if ti < 0 || fi < 0 || ci < 0 {
		return nil, -1, errors.New("active data without type, function or code sections")
	}
	typ, types, err := findType(secs[ti].body)
	if err != nil {
		return nil, -1, fmt.Errorf("types: %v", err)
	}
	if typ < 0 {
		secs[ti].body = appendToVec(secs[ti].body, []byte{0x60, 0, 0})
		typ = int(types)
	}
	defined, err := (&reader{b: secs[fi].body}).count()
	if err != nil {
		return nil, -1, fmt.Errorf("functions: %v", err)
	}
	secs[fi].body = appendToVec(secs[fi].body, appendU32(nil, uint32(typ)))
	secs[ci].body = appendToVec(secs[ci].body, append(appendU32(nil, uint32(len(body))), body...))
	secs[di].body = data
	if !hasCount {
		// memory.init and data.drop need the data count section.
		at := insertAt(secs, secDataCount)
		secs = append(secs[:at], append([]section{{secDataCount, appendU32(nil, n)}}, secs[at:]...)...)
	}
	return secs, int(importedFuncs + defined), nil
}

// findType returns the index of the type () -> () in the type section, or
// -1, and the number of types.
func findType(sec []byte) (int, uint32, error) {
	r := &reader{b: sec}
	n := r.u32()
	found := -1
	for i := uint32(0); i < n && r.err == nil; i++ {
		if form := r.byte(); form != 0x60 && r.err == nil {
			return -1, 0, fmt.Errorf("type %d: form 0x%02x", i, form)
		}
		params := r.u32()
		r.bytes(int(params))
		results := r.u32()
		r.bytes(int(results))
		if params == 0 && results == 0 && found < 0 {
			found = int(i)
		}
	}
	return found, n, r.err
}

// skipConstExpr advances r over a constant expression and its end.
func skipConstExpr(r *reader) error {
	for r.err == nil {
		op := r.byte()
		if op == 0x0b {
			return r.err
		}
		if err := skipImmediates(r, op); err != nil {
			return err
		}
	}
	return r.err
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
		if err := skipConstExpr(r); err != nil {
			return nil, fmt.Errorf("global %d initialiser: %v", i, err)
		}
		out = append(out, globalType{typ: t, mutable: mut == 1})
	}
	return out, r.err
}

// readGlobalExports maps each exported global to one of its export names.
func readGlobalExports(sec []byte) (map[uint32]string, error) {
	r := &reader{b: sec}
	n := r.u32()
	out := map[uint32]string{}
	for i := uint32(0); i < n && r.err == nil; i++ {
		name, kind, idx := r.name(), r.byte(), r.u32()
		if _, ok := out[idx]; kind == 0x03 && !ok && r.err == nil {
			out[idx] = name
		}
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
