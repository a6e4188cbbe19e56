package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func filterAll(t *testing.T, in string, mode frameMode, max int) (string, []int64, []string) {
	t.Helper()
	var drops []int64
	var noise []string
	f := newFrameFilter(strings.NewReader(in), mode, max)
	f.onDrop = func(n int64, _ bool) { drops = append(drops, n) }
	f.onNoise = func(l []byte) { noise = append(noise, string(l)) }
	// One byte at a time: the caller's buffer size must not matter.
	out, err := io.ReadAll(iotest.OneByteReader(f))
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return string(out), drops, noise
}

func TestFramesLines(t *testing.T) {
	big := strings.Repeat("x", 200<<10) // over the reader's 64 KiB buffer too
	two := `{"result":{"text":"` + big + `"},"jsonrpc":"2.0","id":2}` + "\n"
	ab := `{"jsonrpc":"2.0","id":"a\"b","result":"` + big + `"}` + "\r\n"
	in := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" +
		"Server listening on stdio\n" + two +
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"m":"` + big + `"}}` + "\n" + ab +
		`{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":"` + big + `"}` + "\n" +
		`{"jsonrpc":"2.0","id":4,"result":{}}` + "\n"
	out, drops, noise := filterAll(t, in, framesLines, 1000)
	want := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"answer too large","data":{"execd.tooLarge":` + fmt.Sprint(len(two)) + `}}}` + "\n" +
		`{"jsonrpc":"2.0","id":"a\"b","error":{"code":-32603,"message":"answer too large","data":{"execd.tooLarge":` + fmt.Sprint(len(ab)) + `}}}` + "\n" +
		`{"jsonrpc":"2.0","id":4,"result":{}}` + "\n"
	if out != want {
		t.Errorf("out:\n%.600s\nwant:\n%s", out, want)
	}
	if len(drops) != 4 {
		t.Errorf("drops %v, want 4 (two responses, a notification, a request)", drops)
	}
	if len(noise) != 1 || noise[0] != "Server listening on stdio" {
		t.Errorf("noise %q", noise)
	}
}

func TestFramesLinesAtTheLimit(t *testing.T) {
	msg := `{"jsonrpc":"2.0","id":1,"result":"abc"}`
	for _, tc := range []struct {
		max  int
		kept bool
	}{{len(msg), true}, {len(msg) - 1, false}} {
		out, _, _ := filterAll(t, msg+"\n", framesLines, tc.max)
		if got := out == msg+"\n"; got != tc.kept {
			t.Errorf("max %d: out %q", tc.max, out)
		}
	}
	// The last line without its newline, within the limit, is passed on.
	if out, _, _ := filterAll(t, msg, framesLines, 100); out != msg {
		t.Errorf("unterminated: %q", out)
	}
	// An oversized last line cut short is dropped, and the stream ends.
	if out, drops, _ := filterAll(t, `{"id":1,"result":"`+strings.Repeat("y", 500), framesLines, 100); out != "" || len(drops) != 1 {
		t.Errorf("cut short: %q, drops %v", out, drops)
	}
}

func TestFramesSSE(t *testing.T) {
	nine := "data: {\"jsonrpc\":\"2.0\",\"id\":9,\"result\":\"" + strings.Repeat("z", 5000) + "\"}\n"
	in := "event: message\nid: 7\n" + nine + "\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":10,\"result\":1}\n\n"
	out, drops, _ := filterAll(t, in, framesSSE, 1000)
	want := "event: message\nid: 7\ndata: {\"jsonrpc\":\"2.0\",\"id\":9,\"error\":{\"code\":-32603,\"message\":\"answer too large\",\"data\":{\"execd.tooLarge\":" + fmt.Sprint(len(nine)) + "}}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":10,\"result\":1}\n\n"
	if out != want || len(drops) != 1 {
		t.Errorf("out:\n%s\nwant:\n%s", out, want)
	}
}

func TestFramesWhole(t *testing.T) {
	small := `{"jsonrpc":"2.0","id":1,"result":{}}`
	if out, _, _ := filterAll(t, small, framesWhole, 100); out != small {
		t.Errorf("small body: %q", out)
	}
	big := `{"jsonrpc":"2.0","result":"` + strings.Repeat("w", 300<<10) + `","id":5}`
	out, _, _ := filterAll(t, big, framesWhole, 1000)
	if !strings.Contains(out, `"id":5,"error"`) || !strings.Contains(out, tooLargeKey) {
		t.Errorf("big body: %q", out)
	}
	// A large body that is no response cannot be answered: an error.
	f := newFrameFilter(strings.NewReader(`[`+strings.Repeat(`1,`, 1000)+`1]`), framesWhole, 100)
	if _, err := io.ReadAll(f); err == nil {
		t.Error("a large batch: no error")
	}
}

func FuzzIDScanner(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"result":{"id":7,"a":[1,{"id":2}]},"id":"x\"y"}`,
		`{"method":"m","id":3}`,
		`{"id":null}`, `{"id":1e3}`, `{"id":[1]}`, `{"i\u0064":1}`, `{"id":1,"id":2}`,
		` { "id" : -0.5 , "x" : "}" } `, `{}`, `[]`, `"id"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var s idScanner
		s.feed([]byte(in))
		id, ok := s.responseID()
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(in), &m) != nil {
			return // not an object: whatever the scanner says is not checked against json
		}
		_, hasMethod := m["method"]
		want, hasID := m["id"]
		wantOK := hasID && !hasMethod && len(want) > 0 && strings.ContainsAny(string(want[:1]), `"-0123456789`)
		if ok {
			if !hasID || hasMethod || !bytes.Equal(id, want) {
				t.Fatalf("%q: scanned id %s, json says %s (method %v)", in, id, want, hasMethod)
			}
			return
		}
		// Missed: only escaped keys (which the scanner does not decode)
		// or an id longer than it keeps may explain it.
		if wantOK && !strings.Contains(in, `\`) && len(want) <= maxID {
			t.Fatalf("%q: no id scanned, json says %s", in, want)
		}
	})
}
