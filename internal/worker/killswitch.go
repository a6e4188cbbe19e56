package worker

import (
	"errors"
	"fmt"
)

// The kill switch is how the hard kill stops a guest that ignores the soft
// interrupt (a loop inside the interpreter's C code: a regular expression
// backtracking, a huge bignum, a naive substring search).
//
// addKillSwitch rewrites a guest module before it is compiled. It appends a
// mutable i32 global, a countdown, and puts at the head of every loop
//
//	countdown -= 1
//	if countdown == 0 {
//	        countdown = killSwitchEvery
//	        drop(execd.interrupted())
//	}
//
// so every killSwitchEvery loop iterations the guest calls the host. That
// call does two things:
//   - once the run is killed, execd.interrupted traps the guest (a panic
//     with a sys.ExitError, which wazero turns into the call's error);
//   - it leaves the guest's machine code for Go, where the goroutine can be
//     preempted. Go cannot preempt a goroutine inside wazero's compiled
//     code, so without such calls a guest spinning in a native loop holds up
//     every stop-the-world pause, that is the garbage collector of the whole
//     process, until the loop ends.
//
// A guest that does not return by itself must run some loop forever (or
// recurse until its stack traps), so it reaches the host at most
// killSwitchEvery iterations after the kill.
//
// wazero's own mechanism (WithCloseOnContextDone) calls into Go at every
// loop iteration instead, which ran interpreter-heavy code 6 to 8 times
// slower, and starts a watcher goroutine per wasm call.
const killSwitchEvery = 1 << 14

// The import the countdown calls: sandbox/ABI.md's execd.interrupted.
const (
	killSwitchModule = hostModule
	killSwitchImport = "interrupted"
)

// Wasm section ids used here.
const (
	secImport = 2
	secGlobal = 6
	secCode   = 10
)

// addKillSwitch returns bin with the kill switch added and nothing else
// changed. It refuses a module it cannot fully parse (an instruction it
// does not know, a missing import, global or code section) rather than
// produce one whose loops are unchecked.
func addKillSwitch(bin []byte) ([]byte, error) {
	out, _, err := prepareModule(bin, rewrites{killSwitch: true})
	return out, err
}

// loopHead is the code put at the head of every loop.
func loopHead(countdown, fn uint32) []byte {
	b := []byte{0x23} // global.get countdown
	b = appendU32(b, countdown)
	b = append(b, 0x41, 0x01, 0x6b, 0x24) // i32.const 1; i32.sub; global.set countdown
	b = appendU32(b, countdown)
	b = append(b, 0x23) // global.get countdown
	b = appendU32(b, countdown)
	b = append(b, 0x45, 0x04, 0x40, 0x41) // i32.eqz; if; i32.const killSwitchEvery
	b = appendS32(b, killSwitchEvery)
	b = append(b, 0x24) // global.set countdown
	b = appendU32(b, countdown)
	b = append(b, 0x10) // call execd.interrupted
	b = appendU32(b, fn)
	return append(b, 0x1a, 0x0b) // drop; end
}

// instrumentCode rewrites the code section's function bodies, putting
// check at every loop head; with check nil it only reads them. It also
// reports the first instruction found that changes instance state outside
// linear memory and the globals (a table write, a dropped segment): memory
// images (image.go) cannot capture such state.
func instrumentCode(sec, check []byte) (out []byte, outside string, err error) {
	r := &reader{b: sec}
	n := r.u32()

	if check != nil {
		out = appendU32(make([]byte, 0, len(sec)+len(sec)/8), n)
	}
	var body []byte
	for i := uint32(0); i < n && r.err == nil; i++ {
		size := r.u32()
		fn := &reader{b: r.bytes(int(size))}
		if r.err != nil {
			break
		}
		body = body[:0]
		// Locals: copied as they are.
		groups := fn.u32()
		for j := uint32(0); j < groups && fn.err == nil; j++ {
			fn.u32()
			fn.byte()
		}
		if fn.err != nil {
			return nil, "", fmt.Errorf("function %d locals: %v", i, fn.err)
		}
		body = append(body, fn.b[:fn.off]...)
		from := fn.off
		for fn.off < len(fn.b) {
			op := fn.byte()
			loop := op == 0x03
			var sub uint32
			if op == 0xfc {
				sub = (&reader{b: fn.b, off: fn.off}).u32()
			}
			state := stateOutside(op, sub)
			if err := skipImmediates(fn, op); err != nil {
				return nil, "", fmt.Errorf("function %d at byte %d: %v", i, fn.off, err)
			}
			if fn.err != nil {
				return nil, "", fmt.Errorf("function %d: %v", i, fn.err)
			}
			if state != "" && outside == "" {
				outside = fmt.Sprintf("%s in function %d", state, i)
			}
			if loop && check != nil {
				body = append(body, fn.b[from:fn.off]...)
				body = append(body, check...)
				from = fn.off
			}
		}
		if check != nil {
			body = append(body, fn.b[from:]...)
			out = appendU32(out, uint32(len(body)))
			out = append(out, body...)
		}
	}
	if r.err != nil {
		return nil, "", r.err
	}
	if r.off != len(r.b) {
		return nil, "", errors.New("trailing bytes after the function bodies")
	}
	if check == nil {
		out = sec
	}
	return out, outside, nil
}

// stateOutside names op (with sub, the sub-opcode of an 0xfc prefix) when
// it changes instance state outside linear memory and the globals: a table
// write or a dropped segment. "" otherwise.
func stateOutside(op byte, sub uint32) string {
	switch {
	case op == 0x26:
		return "table.set"
	case op != 0xfc:
		return ""
	}
	switch sub {
	case 9:
		return "data.drop"
	case 12:
		return "table.init"
	case 13:
		return "elem.drop"
	case 14:
		return "table.copy"
	case 15:
		return "table.grow"
	case 17:
		return "table.fill"
	}
	return ""
}

// skipImmediates advances r over the immediates of op: the core
// instructions, sign extension, saturating truncation, bulk memory and
// reference types. SIMD, exceptions, threads and GC are refused.
func skipImmediates(r *reader, op byte) error {
	switch {
	case op == 0x00 || op == 0x01 || op == 0x05 || op == 0x0b || op == 0x0f ||
		op == 0x1a || op == 0x1b || op == 0xd1 || (op >= 0x45 && op <= 0xc4):
		// no immediates
	case op >= 0x02 && op <= 0x04: // block, loop, if
		skipBlockType(r)
	case op == 0x0c || op == 0x0d || op == 0x10 || op == 0x12 || op == 0xd2 ||
		(op >= 0x20 && op <= 0x26) || op == 0x3f || op == 0x40:
		r.u32()
	case op == 0x0e: // br_table
		n := r.u32()
		for i := uint32(0); i <= n && r.err == nil; i++ {
			r.u32()
		}
	case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
		r.u32()
		r.u32()
	case op == 0x1c: // select t*
		n := r.u32()
		r.bytes(int(n))
	case op >= 0x28 && op <= 0x3e: // loads and stores: memarg
		if align := r.u32(); align&0x40 != 0 {
			r.u32() // memory index (multi-memory)
		}
		r.u32()
	case op == 0x41:
		r.leb(5)
	case op == 0x42:
		r.leb(10)
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xd0: // ref.null t
		r.byte()
	case op == 0xfc:
		switch sub := r.u32(); {
		case sub <= 7: // trunc_sat
		case sub == 8 || sub == 10 || sub == 12 || sub == 14: // memory.init, memory.copy, table.init, table.copy
			r.u32()
			r.u32()
		case sub <= 17:
			r.u32()
		default:
			return fmt.Errorf("unknown instruction 0xfc %d", sub)
		}
	default:
		return fmt.Errorf("unsupported instruction 0x%02x", op)
	}
	return nil
}

func skipBlockType(r *reader) {
	switch b := r.peek(); {
	case b == 0x40 || (b >= 0x6f && b <= 0x7f):
		r.byte()
	default:
		r.leb(5) // a type index, as s33
	}
}

// imports is what prepareModule needs of the import section.
type imports struct {
	globals uint32 // imported globals: defined ones are numbered after them
	funcs   uint32 // imported functions: likewise
	fn      uint32 // function index of module.name
	found   bool
	// outside names state the module shares with another module (an
	// imported memory, table or mutable global), which its memory images
	// cannot capture; "" when there is none.
	outside string
}

func readImports(sec []byte, module, name string) (imports, error) {
	var imp imports
	r := &reader{b: sec}
	n := r.u32()
	funcs := uint32(0)
	for i := uint32(0); i < n && r.err == nil; i++ {
		mod, field := r.name(), r.name()
		switch kind := r.byte(); kind {
		case 0x00: // function
			r.u32()
			if mod == module && field == name {
				imp.fn, imp.found = funcs, true
			}
			funcs++
		case 0x01: // table
			r.byte()
			skipLimits(r)
			imp.outside = "an imported table"
		case 0x02: // memory
			skipLimits(r)
			imp.outside = "an imported memory"
		case 0x03: // global
			r.byte()
			if r.byte() != 0 {
				imp.outside = "an imported mutable global"
			}
			imp.globals++
		default:
			return imp, fmt.Errorf("import kind 0x%02x", kind)
		}
	}
	imp.funcs = funcs
	return imp, r.err
}

func skipLimits(r *reader) {
	if flags := r.byte(); flags&1 != 0 {
		r.u32()
	}
	r.u32()
}

// appendToVec adds one encoded item to a section that is a vector.
func appendToVec(sec, item []byte) []byte {
	r := &reader{b: sec}
	n := r.u32()
	out := appendU32(make([]byte, 0, len(sec)+len(item)+5), n+1)
	out = append(out, sec[r.off:]...)
	return append(out, item...)
}

// appendS32 appends v as a signed LEB128 (i32.const's immediate).
func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
