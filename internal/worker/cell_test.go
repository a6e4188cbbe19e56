package worker

import (
	"strings"
	"testing"
)

// TestJSNumberLiterals: the JavaScript guest reads short decimal integers
// without QuickJS's general number parser (quickjs-wasi.patch); every other
// literal still goes through it. Each case's value is what Node prints.
func TestJSNumberLiterals(t *testing.T) {
	t.Parallel()
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	cases := []struct{ name, code, want string }{
		{"digits", "[1, 7, 42, 100, 123456789]", "[1, 7, 42, 100, 123456789]"},
		{"ten digits", "[1234567890, 9999999999 + 1, 2147483648, 4294967296]", "[1234567890, 10000000000, 2147483648, 4294967296]"},
		{"types", "[typeof 5, Object.is(5, 5.0), 1 / 3 > 0.33, 2 ** 31]", `["number", true, true, 2147483648]`},
		{"zero and legacy octal", "[0, 0.5, 0x1f, 0o17, 0b101]", "[0, 0.5, 31, 15, 5]"},
		{"fractions and exponents", "[1.5, 12.25, 1e3, 2E-2, 5., 3.e1]", "[1.5, 12.25, 1000, 0.02, 5, 30]"},
		{"separators", "[1_000, 12_345_678_901]", "[1000, 12345678901]"},
		{"bigint", "[10n, 123456789n * 10n, typeof 1n]", `[10n, 1234567890n, "bigint"]`},
		{"member access", "[5..toString(), 5 .toFixed(1), (12).toString(2)]", `["5", "5.0", "1100"]`},
		{"in expressions", "let a = [3,4]; [a[1], 2+3*4, -7, 10%3, 1<2]", "[4, 14, -7, 1, true]"},
		{"an int value", "1+1", "2"},
		{"zero", "0", "0"},
		{"negative zero", "-0", "-0"},
		{"negative", "-7", "-7"},
		{"int limits", "2147483647", "2147483647"},
		{"int minimum", "-2147483648 | 0", "-2147483648"},
		{"beyond int", "2147483647 + 1", "2147483648"},
		{"identifier after", "try { eval('10instanceof Number') } catch (e) { e.name }", `"SyntaxError"`},
		{"identifier after short", "try { eval('3in x') } catch (e) { e.name }", `"SyntaxError"`},
	}
	for _, c := range cases {
		check(t, w, c.name, c.code, c.want)
	}
	// The strict-mode rule for leading zeros is untouched.
	r := w.Run(t.Context(), "'use strict'; 010", RunOptions{})
	if r.Status != StatusError {
		t.Errorf("strict 010: %s; want a SyntaxError", describe(r))
	}
}

// TestJSStackNamesTheCell: a cell's code and an eval's run in functions
// that have no length or name property (quickjs-wasi.patch: nothing can
// reach them); stack traces still call them <eval>.
func TestJSStackNamesTheCell(t *testing.T) {
	t.Parallel()
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	r := w.Run(t.Context(), "function f() { throw new Error('y') }\nf()", RunOptions{})
	if r.Status != StatusError || r.Error == nil || !strings.Contains(r.Error.Stack, "at f (<cell>:1:") || !strings.Contains(r.Error.Stack, "at <eval> (<cell>:2:") {
		t.Errorf("throw in a function: %s", describe(r))
	}
	check(t, w, "eval's stack", "eval('(function g() { return new Error(\"z\").stack })()').split('\\n').slice(0, 3)",
		`["    at g (<input>:1:33)", "    at <eval> (<input>:1:47)", "    at <eval> (<cell>:1:5)"]`)
	// A function of the code keeps both, whatever its name.
	check(t, w, "a function named <eval>", `const o = {"<eval>": function (a, b) {}}; [o["<eval>"].name, o["<eval>"].length, Object.hasOwn(o["<eval>"], "length")]`,
		`["<eval>", 2, true]`)
	check(t, w, "await", "await null; try { null.x } catch (e) { e.stack.trim() }", `"at <eval> (<cell>:1:23)"`)
}
