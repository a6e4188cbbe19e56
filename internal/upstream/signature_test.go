package upstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"execd/internal/config"
)

func TestSignatures(t *testing.T) {
	h := newHub(t, Options{}, fakeUpstream(t, "gh", func(u *config.Upstream) {
		u.Allow, u.Ask = []string{"echo", "add", "big"}, []string{"create-issue"}
	}))
	if got := h.Signatures("local", "javascript", 0); got != "// tools.gh: not connected yet; tools.list() lists their tools\n" {
		t.Errorf("before a listing:\n%s", got)
	}
	if err := h.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	js := `tools.gh.echo({text: string})  // Echoes its text.
tools.gh.add({a: number, b: number}): {sum: number}  // Adds two numbers
tools.gh.create_issue({title: string, body?: string, draft?: boolean, labels?: string[], priority?: "low" | "high"})  // Opens an issue (asks the person first)
tools.gh.big()
`
	py := `tools.gh.echo(text: str)  # Echoes its text.
tools.gh.add(a: float, b: float) -> {"sum": float}  # Adds two numbers
tools.gh.create_issue(title: str, body: str | None = None, draft: bool = False, labels: list[str] | None = None, priority: Literal["low", "high"] | None = None)  # Opens an issue (asks the person first)
tools.gh.big()
`
	if got := h.Signatures("local", "javascript", 0); got != js {
		t.Errorf("javascript:\n%s\nwant:\n%s", got, js)
	}
	if got := h.Signatures("local", "python", 0); got != py {
		t.Errorf("python:\n%s\nwant:\n%s", got, py)
	}
	// Over the budget: signatures while they fit, then names.
	got := h.Signatures("local", "python", 300)
	want := `tools.gh.echo(text: str)  # Echoes its text.
tools.gh.add(a: float, b: float) -> {"sum": float}  # Adds two numbers
# 2 more, by name (tools.list() gives their signatures):
# tools.gh: create_issue, big
`
	if got != want {
		t.Errorf("budget 300:\n%s\nwant:\n%s", got, want)
	}
	if got := h.Signatures("local", "python", 60); len(got) > 60 || !strings.Contains(got, "tools.list()") {
		t.Errorf("budget 60: %q", got)
	}
}

func TestSignatureShapes(t *testing.T) {
	for _, tc := range []struct {
		schema, js, py string
	}{
		{`{"type":"object"}`, `tools.s.t()`, `tools.s.t()`},
		{`{"type":"object","properties":{"from":{"type":"string"},"max-results":{"type":"integer"}},"required":["from"]}`,
			`tools.s.t({from: string, "max-results"?: number})`, `tools.s.t(**{"from": str, "max-results"?: int})`},
		{`{"type":"object","properties":{"q":{"type":["string","null"]},"n":{"type":"integer","default":10}},"required":["q"]}`,
			`tools.s.t({q: string | null, n?: number})`, `tools.s.t(q: str | None, n: int = 10)`},
		{`{"type":"object","properties":{"tags":{"type":"array","items":{"anyOf":[{"type":"string"},{"type":"number"}]}},"meta":{"type":"object","additionalProperties":{"type":"string"}}},"required":["tags","meta"]}`,
			`tools.s.t({meta: Record<string, string>, tags: (string | number)[]})`, `tools.s.t(meta: dict[str, str], tags: list[str | float])`},
		{`{"type":"object","properties":{"x":{"$ref":"#/$defs/X"},"c":{"const":"v"}},"required":["x","c"]}`,
			`tools.s.t({c: "v", x: any})`, `tools.s.t(c: "v", x: Any)`},
		{`not json`, `tools.s.t()`, `tools.s.t()`},
	} {
		ti := ToolInfo{Server: "s", Ident: "t", InputSchema: json.RawMessage(tc.schema), Access: AccessAllow}
		if got := signatureLine(ti, false, "//"); got != tc.js {
			t.Errorf("%s\njs: %s\nwant %s", tc.schema, got, tc.js)
		}
		if got := signatureLine(ti, true, "#"); got != tc.py {
			t.Errorf("%s\npy: %s\nwant %s", tc.schema, got, tc.py)
		}
	}
}

// Idents: what code can write after tools.<upstream>., unique, and Call
// takes either name.
func TestIdents(t *testing.T) {
	l := newToolList([]*mcp.Tool{{Name: "get-sum"}, {Name: "get_sum"}, {Name: "2fa"}, {Name: "class"}, {Name: "a.b"}})
	for name, want := range map[string]string{"get-sum": "get_sum_2", "get_sum": "get_sum", "2fa": "_2fa", "class": "_class", "a.b": "a_b"} {
		if got := l.ident[name]; got != want {
			t.Errorf("ident of %q: %q, want %q", name, got, want)
		}
		if l.find(name).Name != name || l.find(want).Name != name {
			t.Errorf("find %q / %q", name, want)
		}
	}
}

func FuzzSignature(f *testing.F) {
	f.Add(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`, "desc. more")
	f.Add(`{"type":"object","properties":{"a\nb":{"enum":["x\ny",1,null,true]}}}`, "line\nline")
	f.Add(`{"properties":{"a":{"type":"array","items":{"type":"array","items":{"type":"object","properties":{"b":{}}}}}}}`, "")
	f.Fuzz(func(t *testing.T, schema, desc string) {
		ti := ToolInfo{Server: "s", Ident: "t", InputSchema: json.RawMessage(schema), OutputSchema: json.RawMessage(schema), Description: desc}
		for _, py := range []bool{false, true} {
			line := signatureLine(ti, py, "#")
			if strings.ContainsAny(line, "\n\r") {
				t.Fatalf("a line break in %q", line)
			}
			if !strings.HasPrefix(line, "tools.s.t(") {
				t.Fatalf("line %q", line)
			}
		}
		items := []sigItem{{"s", "t", signatureLine(ti, false, "//")}, {"s", "u", "tools.s.u()"}}
		for _, budget := range []int{0, 40, 100, 4096} {
			if out := fit(items, nil, "//", budget); len(out) > budget {
				t.Fatalf("budget %d: %d bytes", budget, len(out))
			}
		}
	})
}
