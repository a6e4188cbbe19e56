package jsonrpc

import (
	"encoding/json"
	"testing"
)

func TestDecodeKinds(t *testing.T) {
	for _, tc := range []struct {
		in         string
		code       int // 0 = valid
		req, notif bool
		resp       bool
		id         string
	}{
		{in: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, req: true, id: "1"},
		{in: `{"jsonrpc":"2.0","id":"a","method":"ping","params":{}}`, req: true, id: `"a"`},
		{in: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, notif: true},
		{in: `{"jsonrpc":"2.0","id":3,"result":{}}`, resp: true, id: "3"},
		{in: `{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"x"}}`, resp: true, id: "3"},
		{in: `{"jsonrpc":"2.0","id":null,"method":"ping"}`, code: CodeInvalidRequest},
		{in: `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, code: CodeInvalidRequest},
		{in: `{"jsonrpc":"2.0","id":1e3,"method":"ping"}`, req: true, id: "1e3"},
		{in: `{"jsonrpc":"2.0","id":1E2,"method":"ping"}`, req: true, id: "1E2"},
		{in: `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}`, req: true, id: "123456789012345678901234567890"},
		{in: `{"jsonrpc":"2.0","id":9223372036854775808,"method":"ping"}`, req: true, id: "9223372036854775808"},
		{in: `{"jsonrpc":"2.0","id":2.55e1,"method":"ping"}`, code: CodeInvalidRequest},
		{in: `{"jsonrpc":"2.0","id":1e-1,"method":"ping"}`, code: CodeInvalidRequest},
		{in: `{"jsonrpc":"2.0","id":1e9999999,"method":"ping"}`, code: CodeInvalidRequest},
		{in: `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, code: CodeInvalidRequest},
		{in: `{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call"}`, code: CodeInvalidRequest, id: "1"},
		{in: `{"jsonrpc":"2.0","id":1,"Method":"tools/call"}`, code: CodeInvalidRequest, id: "1"},
		{in: `null`, code: CodeInvalidRequest},
		{in: `{"jsonrpc":"2.0","id":1,"method":"ping"} x`, code: CodeParseError},
		{in: `{"jsonrpc":"2.0","id":-9223372036854775808,"method":"ping"}`, req: true, id: "-9223372036854775808"},
		{in: `{"jsonrpc":"2.0","id":"\u00e9","method":"tools\/list"}`, req: true, id: `"\u00e9"`},
		{in: `{"jsonrpc":"2.0","id":{},"method":"ping"}`, code: CodeInvalidRequest},
		{in: `{"jsonrpc":"1.0","id":1,"method":"ping"}`, code: CodeInvalidRequest, id: "1"},
		{in: `{"id":1,"method":"ping"}`, code: CodeInvalidRequest, id: "1"},
		{in: `{"jsonrpc":"2.0","id":1,"method":7}`, code: CodeInvalidRequest, id: "1"},
		{in: `{"jsonrpc":"2.0","id":1,"method":"x","params":3}`, code: CodeInvalidRequest, id: "1"},
		{in: `{"jsonrpc":"2.0","id":1}`, code: CodeInvalidRequest, id: "1"},
		{in: `{"jsonrpc":"2.0"}`, code: CodeInvalidRequest},
		{in: `[1]`, code: CodeInvalidRequest},
		{in: `"x"`, code: CodeInvalidRequest},
		{in: `{"jsonrpc":`, code: CodeParseError},
		{in: ``, code: CodeParseError},
	} {
		m, e := Decode([]byte(tc.in))
		if tc.code != 0 {
			if e == nil || e.Code != tc.code {
				t.Errorf("%s: error %v; want code %d", tc.in, e, tc.code)
			}
			if tc.id != "" && (m == nil || m.ID.String() != tc.id) {
				t.Errorf("%s: id not kept for the error answer", tc.in)
			}
			continue
		}
		if e != nil {
			t.Errorf("%s: unexpected error %v", tc.in, e)
			continue
		}
		if m.IsRequest() != tc.req || m.IsNotification() != tc.notif || m.IsResponse() != tc.resp {
			t.Errorf("%s: kinds req=%v notif=%v resp=%v", tc.in, m.IsRequest(), m.IsNotification(), m.IsResponse())
		}
		if tc.id != "" && m.ID.String() != tc.id {
			t.Errorf("%s: id %s; want %s", tc.in, m.ID.String(), tc.id)
		}
	}
}

func TestIDKeepsItsType(t *testing.T) {
	for _, raw := range []string{`7`, `"7"`, `-3`, `"x y"`, `1E2`, `123456789012345678901234567890`, `-0`} {
		m, e := Decode([]byte(`{"jsonrpc":"2.0","id":` + raw + `,"method":"m"}`))
		if e != nil {
			t.Fatal(e)
		}
		b, _ := EncodeResult(m.ID, struct{}{})
		if want := `{"jsonrpc":"2.0","id":` + raw + `,"result":{}}`; string(b) != want {
			t.Errorf("got %s; want %s", b, want)
		}
	}
	for _, raw := range []string{`7`, `"7"`, `"\u00e9\n"`} {
		m, _ := Decode([]byte(`{"jsonrpc":"2.0","id":` + raw + `,"method":"m"}`))
		for _, res := range []string{`{}`, `{"content":[{"type":"text","text":"2"}],"isError":false}`} {
			want, _ := EncodeResult(m.ID, json.RawMessage(res))
			if got := EncodeRawResult(m.ID, json.RawMessage(res)); string(got) != string(want) {
				t.Errorf("EncodeRawResult = %s; EncodeResult = %s", got, want)
			}
		}
	}
	if string(EncodeError(ID{}, Errorf(CodeParseError, "x"))) != `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}` {
		t.Error("absent id must encode as null in an error")
	}
}

// Equal values are one id whatever their spelling, so that a cancel naming
// 100 reaches the request sent as 1E2; a string never equals a number.
func TestIDKeyIsByValue(t *testing.T) {
	same := [][]string{
		{`100`, `1E2`, `1e+2`, `100.0`, `10e1`, `1000e-1`},
		{`0`, `-0`, `0.0`, `0e5`},
		{`-7`, `-7.0`, `-70e-1`},
		{`123456789012345678901234567890`, `1.2345678901234567890123456789e29`},
		{`"a"`, `"\u0061"`},
	}
	seen := map[string]string{}
	for _, group := range same {
		var key string
		for _, raw := range group {
			var id ID
			_ = id.UnmarshalJSON([]byte(raw))
			if !id.Valid() {
				t.Fatalf("%s is not a valid id", raw)
			}
			k := id.Key()
			if key == "" {
				key = k
			} else if k != key {
				t.Errorf("%s has key %q; %s has %q", raw, k, group[0], key)
			}
		}
		if other, dup := seen[key]; dup {
			t.Errorf("%s and %s share the key %q", group[0], other, key)
		}
		seen[key] = group[0]
	}
	for _, raw := range []string{`"100"`, `1.5`, `1e-1`, `[1]`, `{}`, `true`, `null`, `01`, `1e99999999`} {
		var id ID
		_ = id.UnmarshalJSON([]byte(raw))
		if raw != `"100"` && id.Valid() {
			t.Errorf("%s accepted as an id", raw)
		}
		if raw == `"100"` && id.Key() == seen[`"100"`] {
			t.Errorf(`"100" matches the number 100`)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`{"jsonrpc":"2.0","id":"x","result":{}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":""}}`,
		`[{"jsonrpc":"2.0"}]`, `{`, `null`, `{"id":1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, e := Decode(b)
		// The one-pass reader accepts exactly what encoding/json accepts.
		if valid := json.Valid(b); valid != (e == nil || e.Code != CodeParseError) {
			t.Fatalf("json.Valid = %v but Decode answered %v for %q", valid, e, b)
		}
		if e != nil {
			// Every error must encode to valid JSON with an id or null.
			id := NullID
			if m != nil && m.ID.Valid() {
				id = m.ID
			}
			if !json.Valid(EncodeError(id, e)) {
				t.Fatalf("invalid error JSON for %q", b)
			}
			return
		}
		if !m.IsRequest() && !m.IsNotification() && !m.IsResponse() {
			t.Fatalf("accepted a message of no kind: %q", b)
		}
		if m.IsRequest() {
			if !m.ID.Valid() {
				t.Fatalf("request with invalid id accepted: %q", b)
			}
			out, err := EncodeResult(m.ID, map[string]any{})
			if err != nil || !json.Valid(out) {
				t.Fatalf("cannot echo id of %q", b)
			}
			if raw := EncodeRawResult(m.ID, json.RawMessage(`{}`)); string(raw) != string(out) {
				t.Fatalf("EncodeRawResult %s differs from EncodeResult %s", raw, out)
			}
		}
	})
}

func TestMethodNames(t *testing.T) {
	for raw, want := range map[string]string{
		`"tools/call"`:      "tools/call",
		`"tools\/call"`:     "tools/call",
		`"caf\u00e9"`:       "café",
		`"café"`:            "café",
		`"a\"b"`:            `a"b`,
		`"notifications/x"`: "notifications/x",
	} {
		m, e := Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":` + raw + `}`))
		if e != nil || m.Method != want {
			t.Errorf("method %s: got %q, %v; want %q", raw, m.Method, e, want)
		}
	}
}
