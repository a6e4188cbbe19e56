package worker

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The one-pass envelope decoder agrees with encoding/json on every input:
// the same envelope, or an error from both.
func FuzzEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"status":"ok","value":"2","error":null}`,
		`{"status":"ok","value":null,"error":null}`,
		`{"status":"ok"}`,
		`{"status":"error","value":null,"error":{"type":"TypeError","message":"x is not a function","stack":"at <cell-1>:1"}}`,
		`{"status":"ok","value":"\u00e9\n\"q\"","error":null}`,
		`{"Status":"ok","VALUE":"1"}`,
		`{"status":"ok","value":"1","value":null}`,
		`{"status":"ok","value":42}`,
		`{"status":1}`,
		`{"status":"ok","extra":[1,2]}`,
		`{"status":"ok","value":"\xff"}`,
		`{"status":"interrupted"}`, `{"status":"oom","value":null}`, `{"status":"o\u006b"}`, `{"status":"ok" }`,
		`[]`, `null`, `{`, `{"status":"ok"} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := decodeEnvelope(body)
		var want envelope
		wantErr := json.Unmarshal(body, &want)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%q: error %v, encoding/json %v", body, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(*got, want) {
			t.Fatalf("%q: %+v, encoding/json %+v", body, *got, want)
		}
	})
}
