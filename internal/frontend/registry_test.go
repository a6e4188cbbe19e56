package frontend

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"execd/internal/jsonrpc"
	"execd/internal/mcptest"
)

type sampleArgs struct {
	Name   string  `json:"name" desc:"Who." missing:"whom to greet"`
	Lang   string  `json:"lang"`
	Count  *int64  `json:"count,omitempty" minimum:"1" maximum:"9" desc:"How often."`
	Loud   *bool   `json:"loud,omitempty"`
	Place  *string `json:"place,omitempty" header:"Place" enum:"home,work"`
	Weight float64 `json:"weight,omitempty"`
}

// The inputSchema comes from the struct: types, descriptions, bounds,
// enums, the mirrored header, required fields in their order, closed.
func TestAddToolDerivesTheSchema(t *testing.T) {
	s := newTestServer(testOptions())
	err := AddTool(s, Tool[sampleArgs]{Name: "greet", Description: "Greets.",
		Properties: map[string]map[string]any{"lang": {"enum": []string{"en", "fr"}}},
		Run:        func(context.Context, *Call, sampleArgs) (any, *jsonrpc.Error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.toolsList(listLegacy, "")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Tools []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(list.Tools[len(list.Tools)-1]["inputSchema"])
	want := `{"additionalProperties":false,"properties":{"count":{"description":"How often.","maximum":9,"minimum":1,"type":"integer"},` +
		`"lang":{"enum":["en","fr"],"type":"string"},"loud":{"type":"boolean"},"name":{"description":"Who.","type":"string"},` +
		`"place":{"enum":["home","work"],"type":"string","x-mcp-header":"Place"},"weight":{"type":"number"}},"required":["name","lang"],"type":"object"}`
	if string(got) != want {
		t.Fatalf("inputSchema\n got %s\nwant %s", got, want)
	}
}

// Arguments that do not fit the struct are an isError result that names
// the first argument and what it must be; the handler gets the rest.
func TestAddToolDecodesArguments(t *testing.T) {
	s := newTestServer(testOptions())
	var ran []sampleArgs
	var invalid []string
	err := AddTool(s, Tool[sampleArgs]{Name: "greet", Description: "Greets.",
		Run: func(_ context.Context, _ *Call, in sampleArgs) (any, *jsonrpc.Error) {
			ran = append(ran, in)
			return StructuredResult(map[string]any{"ok": true}, false), nil
		},
		Invalid: func(in sampleArgs, msg string) any {
			invalid = append(invalid, fmt.Sprintf("%s|%s", in.Lang, msg))
			return StructuredResult(map[string]any{"error": msg}, true)
		}})
	if err != nil {
		t.Fatal(err)
	}
	c := &client{T: t, URL: httpURL(t, s)}
	c.Initialize()
	for _, tc := range []struct{ args, want string }{
		{`{"name":"Ada","lang":"en","count":3,"loud":true,"place":"home","weight":1.5}`, ""},
		{`{"lang":"en"}`, "en|missing argument name: whom to greet"},
		{`{"name":null,"lang":"fr"}`, "fr|missing argument name: whom to greet"},
		{`{"name":"Ada"}`, "|missing argument lang"},
		{`{"name":7,"lang":"en"}`, "en|argument name must be a string"},
		{`{"name":"Ada","lang":"en","count":0}`, "en|argument count must be an integer from 1 to 9"},
		{`{"name":"Ada","lang":"en","count":1.5}`, "en|argument count must be an integer from 1 to 9"},
		{`{"name":"Ada","lang":"en","loud":"yes"}`, "en|argument loud must be a boolean"},
	} {
		invalid = nil
		ran = nil
		res, isErr := c.Tool("greet", mustObject(t, tc.args))
		if tc.want == "" {
			if isErr || len(ran) != 1 || *ran[0].Count != 3 || !*ran[0].Loud || *ran[0].Place != "home" || ran[0].Weight != 1.5 {
				t.Errorf("%s: %v %v %+v", tc.args, res, isErr, ran)
			}
			continue
		}
		if !isErr || len(ran) != 0 || len(invalid) != 1 || invalid[0] != tc.want || res["error"] != tc.want[strings.IndexByte(tc.want, '|')+1:] {
			t.Errorf("%s: %v %v, invalid %q; want %q", tc.args, res, isErr, invalid, tc.want)
		}
	}
	// Keys are read exactly: a case variant or an undeclared key is a
	// protocol error naming it.
	for _, args := range []string{`{"name":"a","lang":"en","Name":"b"}`, `{"name":"a","lang":"en","other":1}`} {
		r := c.Post(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":`+args+`}}`, nil)
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if !strings.Contains(string(b), `"code":-32602`) {
			t.Errorf("%s: %s", args, b)
		}
	}
}

// A tool is refused at registration when it could not be listed or
// called as declared.
func TestAddToolRefusesBadTools(t *testing.T) {
	s := newTestServer(testOptions())
	run := func(context.Context, *Call, struct{}) (any, *jsonrpc.Error) { return nil, nil }
	for name, err := range map[string]error{
		"no description": AddTool(s, Tool[struct{}]{Name: "a", Run: run}),
		"no run":         AddTool(s, Tool[struct{}]{Name: "a", Description: "x"}),
		"taken name":     AddTool(s, Tool[struct{}]{Name: "test_echo", Description: "x", Run: run}),
		"bad name":       AddTool(s, Tool[struct{}]{Name: "a b", Description: "x", Run: run}),
		"given schema":   AddTool(s, Tool[struct{}]{Name: "a", Description: "x", InputSchema: map[string]any{}, Run: run}),
		"raw, no schema": AddTool(s, Tool[json.RawMessage]{Name: "a", Description: "x", Run: func(context.Context, *Call, json.RawMessage) (any, *jsonrpc.Error) { return nil, nil }}),
		"bad type": AddTool(s, Tool[struct {
			A []int `json:"a"`
		}]{Name: "a", Description: "x", Run: func(context.Context, *Call, struct {
			A []int `json:"a"`
		}) (any, *jsonrpc.Error) {
			return nil, nil
		}}),
		"unknown property": AddTool(s, Tool[struct{}]{Name: "a", Description: "x", Properties: map[string]map[string]any{"b": {}}, Run: run}),
	} {
		if err == nil {
			t.Errorf("%s: registered", name)
		}
	}
}

// Beyond requestLinesPerSecond requests a second, one request line in
// requestLinesPerSecond is written; the front end's other lines are not
// sampled with them.
func TestRequestLinesAreSampled(t *testing.T) {
	lg := mcptest.NewLogs()
	opts := testOptions()
	opts.Logger = lg.Log
	s, ts := newHTTP(t, opts)
	c := &client{T: t, URL: ts.URL + "/mcp"}
	c.Initialize()
	const n = 3 * requestLinesPerSecond
	for i := range n {
		resp := c.Post(context.Background(), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i+2), nil)
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	// n requests within at most a few seconds: the first hundred of each
	// second and one in a hundred after.
	if got := lg.FilterMessage("request").Len(); got < requestLinesPerSecond || got >= n {
		t.Errorf("%d request lines for %d requests", got, n+1)
	}
	s.log.Warn("something else")
	if lg.FilterMessage("something else").Len() != 1 {
		t.Error("another line was sampled with the request lines")
	}
}

func httpURL(t *testing.T, s *Server) string {
	t.Helper()
	ts := httptestServer(t, s)
	return ts + "/mcp"
}

func mustObject(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// A describer gives each principal its own description of a tool, in
// lists encoded per principal; SetDescription renews them, a nil
// describer gives everyone the tool's own again.
func TestSetDescriberPerPrincipal(t *testing.T) {
	s := newTestServer(testOptions())
	descOf := func(kind listKind, principal string) (string, string) {
		t.Helper()
		raw, err := s.toolsList(kind, principal)
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Tools []map[string]any `json:"tools"`
			Scope string           `json:"cacheScope"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			t.Fatal(err)
		}
		for _, tool := range list.Tools {
			if tool["name"] == "test_echo" {
				d, _ := tool["description"].(string)
				return d, list.Scope
			}
		}
		t.Fatal("no test_echo")
		return "", ""
	}
	if err := s.SetDescriber("nope", func(string) string { return "x" }); err == nil {
		t.Error("a describer of an unknown tool was accepted")
	}
	version := "1"
	if err := s.SetDescriber("test_echo", func(p string) string { return "Answers " + p + "'s text, v" + version + "." }); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"alice", "bob", "alice"} {
		if d, _ := descOf(listLegacy, p); d != "Answers "+p+"'s text, v1." {
			t.Errorf("%s's description: %q", p, d)
		}
	}
	if d, scope := descOf(listModern, "bob"); d != "Answers bob's text, v1." || scope != "private" {
		t.Errorf("bob's modern list: %q, cacheScope %q", d, scope)
	}
	version = "2"
	if d, _ := descOf(listLegacy, "alice"); d != "Answers alice's text, v1." {
		t.Errorf("the list was not kept until a change: %q", d)
	}
	if err := s.SetDescription("test_echo", "Answers its text again."); err != nil {
		t.Fatal(err)
	}
	if d, _ := descOf(listLegacy, "alice"); d != "Answers alice's text, v2." {
		t.Errorf("after SetDescription: %q", d)
	}
	if err := s.SetDescriber("test_echo", nil); err != nil {
		t.Fatal(err)
	}
	if d, scope := descOf(listModern, "alice"); d != "Answers its text again." || scope != "public" {
		t.Errorf("without a describer: %q, cacheScope %q", d, scope)
	}
}

// FuzzDecodeArg: an argument's value is decoded into its field exactly as
// encoding/json decodes it (the string fast path included), and refused
// exactly when encoding/json refuses it.
func FuzzDecodeArg(f *testing.F) {
	for _, s := range []string{`"Ada"`, `"a\"b\u00e9\ud83d\ude00"`, "\"\xff\xfe\"", `"\u2028<&>"`, `7`, `1.5`, `true`, `{"a":1}`, `[1]`, `"é"`, `""`} {
		f.Add([]byte(s))
	}
	fields, _, err := deriveSchema(reflect.TypeOf(sampleArgs{}), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) || jsonrpc.IsNull(raw) {
			return
		}
		raw = bytes.TrimSpace(raw) // a member's value, as jsonrpc.Object hands it out
		for _, fl := range fields {
			var got sampleArgs
			msg := decodeArg(raw, fl, reflect.ValueOf(&got).Elem().Field(fl.index))
			var want sampleArgs
			dst := reflect.ValueOf(&want).Elem().Field(fl.index)
			val := dst
			if fl.ptr {
				val = reflect.New(dst.Type().Elem()).Elem()
			}
			ok := json.Unmarshal(raw, val.Addr().Interface()) == nil
			if ok && (fl.min != nil && val.Int() < *fl.min || fl.max != nil && val.Int() > *fl.max) {
				ok = false
			}
			if ok && fl.ptr {
				dst.Set(val.Addr())
			}
			if !ok {
				want = sampleArgs{}
			}
			if (msg == "") != ok || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s into %s: %+v, %q; encoding/json %+v, ok %v", raw, fl.key, got, msg, want, ok)
			}
		}
	})
}

// A tool name is read as JSON reads it, whether or not it names a tool and
// however it is escaped.
func TestToolNameDecoding(t *testing.T) {
	s := newTestServer(testOptions())
	err := AddTool(s, Tool[sampleArgs]{Name: "greet", Description: "Greets.",
		Run: func(context.Context, *Call, sampleArgs) (any, *jsonrpc.Error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{`"greet"`, `"gr\u0065et"`, `"nope"`, `"gré"`, `""`, `"a\"b"`, `7`, `null`, `{"a":1}`} {
		got, ok := s.tools.name(json.RawMessage(raw))
		want, wantOK := jsonrpc.String(json.RawMessage(raw))
		if got != want || ok != wantOK {
			t.Errorf("%s: %q, %v; jsonrpc.String %q, %v", raw, got, ok, want, wantOK)
		}
	}
}
