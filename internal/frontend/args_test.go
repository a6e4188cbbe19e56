package frontend

import (
	"encoding/json"
	"strings"
	"testing"
)

var execSchema = newArgSchema(map[string]any{
	"properties":           map[string]any{"code": map[string]any{}, "language": map[string]any{}, "workspace": map[string]any{}, "timeout_ms": map[string]any{}},
	"additionalProperties": false,
})

func TestArgumentsByExactKey(t *testing.T) {
	for _, tc := range []struct {
		in, bad string // bad: the key the error must name
	}{
		{in: `{"code":"1","language":"js","workspace":"w","timeout_ms":5}`},
		{in: `{}`},
		{in: `{"workspace":"decoy","Workspace":"victim"}`, bad: "Workspace"},
		{in: `{"CODE":"2+2","code":"1"}`, bad: "CODE"},
		{in: `{"workspace":"a","workspace":"b"}`, bad: "workspace"},
		{in: `{"w\u006frkspace":"a","workspace":"b"}`, bad: "workspace"},
		{in: `{"code":"1","extra":true}`, bad: "extra"},
	} {
		args, jerr := execSchema.decode("execute_code", json.RawMessage(tc.in))
		if tc.bad == "" {
			if jerr != nil {
				t.Errorf("%s: %v", tc.in, jerr)
			}
			continue
		}
		if jerr == nil || jerr.Code != -32602 || !strings.Contains(jerr.Message, `"`+tc.bad+`"`) {
			t.Errorf("%s: %v, %v; want -32602 naming %q", tc.in, args, jerr, tc.bad)
		}
	}
	open := newArgSchema(map[string]any{"properties": map[string]any{"prompt": map[string]any{}}})
	if _, jerr := open.decode("t", json.RawMessage(`{"prompt":"x","other":1}`)); jerr != nil {
		t.Errorf("a schema without additionalProperties: false refused an undeclared key: %v", jerr)
	}
	if _, jerr := open.decode("t", json.RawMessage(`{"Prompt":"x"}`)); jerr == nil {
		t.Error("a case variant of a declared key was accepted by an open schema")
	}
}

// FuzzArguments: whatever the arguments, what is accepted has unique keys,
// each declared, and each value is the one encoding/json reads for it.
func FuzzArguments(f *testing.F) {
	for _, s := range []string{`{"code":"1","language":"js"}`, `{"workspace":"a","Workspace":"b"}`, `{"a":{"b":[1,2]}}`, `[1]`, `{"code":1e5}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		args, jerr := execSchema.decode("execute_code", raw)
		if jerr != nil {
			if jerr.Code != -32602 {
				t.Fatalf("code %d", jerr.Code)
			}
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("accepted %q that encoding/json refuses: %v", raw, err)
		}
		if len(m) != len(args) {
			t.Fatalf("%d arguments; encoding/json sees %d keys", len(args), len(m))
		}
		for _, a := range args {
			if _, ok := execSchema.declared([]byte(a.key)); !ok || string(m[a.key]) != string(a.value) {
				t.Fatalf("argument %q = %s; encoding/json %s", a.key, a.value, m[a.key])
			}
		}
	})
}
