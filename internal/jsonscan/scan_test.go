package jsonscan

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestObjectAndString(t *testing.T) {
	var keys []string
	var vals []string
	err := Object([]byte(` {"a":1, "b\u0063":[1,{"x":"}"}], "":"\"q\"" , "a":null} `), func(k, v []byte) error {
		keys = append(keys, string(k))
		vals = append(vals, string(v))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "bc", "", "a"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("keys %q; want %q (duplicates passed on, escapes decoded)", keys, want)
	}
	if want := []string{`1`, `[1,{"x":"}"}]`, `"\"q\""`, `null`}; !reflect.DeepEqual(vals, want) {
		t.Errorf("values %q; want %q", vals, want)
	}
	for _, bad := range []string{`{`, `{"a"}`, `{"a":1,}`, `{"a":01}`, `{"a":"\x01"}`, `{"a":"\q"}`, `{} {}`, `{"a":tru}`} {
		if Object([]byte(bad), func(k, v []byte) error { return nil }) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if err := Object([]byte(`[1]`), nil); err != ErrNotObject {
		t.Errorf("an array: %v", err)
	}
	for raw, want := range map[string]string{`"plain"`: "plain", `"caf\u00e9"`: "café", `"café"`: "café", `"\ud800"`: "\ufffd", "\"\xff\"": "\ufffd"} {
		if got, ok := String([]byte(raw)); !ok || got != want {
			t.Errorf("String(%s) = %q, %v; want %q", raw, got, ok, want)
		}
	}
}

func TestIsNumber(t *testing.T) {
	for raw, want := range map[string]bool{"0": true, "-0": true, "12.5e-3": true, "1E+9": true,
		"": false, "01": false, "1.": false, ".5": false, "-": false, " 1": false, "1 ": false, "1e": false, "NaN": false, `"1"`: false} {
		if got := IsNumber([]byte(raw)); got != want {
			t.Errorf("IsNumber(%q) = %v", raw, got)
		}
	}
}

// FuzzObject checks the one-pass reader against encoding/json: the same
// inputs are valid, and an object's members are the same.
func FuzzObject(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[true,false,null],"c":{"d":"e\n"}}`, `{"a":-0.5e+3}`, `{"\u00e9":"\ud83d\ude00"}`, `[1,2]`, `{"a":1}x`, `{"a":[[[[]]]]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := map[string]json.RawMessage{}
		dups := false
		err := Object(b, func(k, v []byte) error {
			if _, ok := got[string(k)]; ok {
				dups = true
			}
			got[string(k)] = append(json.RawMessage(nil), v...)
			return nil
		})
		if (err != ErrSyntax) != json.Valid(b) {
			t.Fatalf("Object: %v; json.Valid: %v for %q", err, json.Valid(b), b)
		}
		if err != nil || dups {
			return
		}
		var want map[string]json.RawMessage
		if e := json.Unmarshal(b, &want); e != nil {
			t.Fatalf("encoding/json refused %q: %v", b, e)
		}
		if len(want) != len(got) {
			t.Fatalf("members %v; encoding/json %v", got, want)
		}
		for k, v := range want {
			if string(got[k]) != string(v) {
				t.Fatalf("member %q: %s; encoding/json %s", k, got[k], v)
			}
		}
		// The members match byte for byte; a value is not decoded on its own,
		// since valid JSON such as 1e999 does not fit any Go value.
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Fatalf("member %q not in encoding/json's %v", k, want)
			}
		}
	})
}
