package main

// show() and input() through the real binary and the real guests: an image
// in the result (and no structuredContent then), the person's answer
// through elicitation (legacy, HTTP and stdio) and through input_required
// (2026-07-28), and a parked run that keeps its workspace but not its run
// slot.

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"execd/internal/mcptest"
)

const pixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"

func TestImagesInTheResult(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	for _, modern := range []bool{false, true} {
		c := newMCP(t, d.url, modern)
		c.init()
		for _, step := range [][2]string{ // Python writes the picture JavaScript shows
			{"python", "import base64\nfrom execd import show\nopen('p.png', 'wb').write(base64.b64decode('" + pixelPNG + "'))\nshow('p.png')\nprint('drawn')"},
			{"javascript", `show("/workspace/p.png"); console.log("drawn")`},
		} {
			lang, code := step[0], step[1]
			m := c.RPC("tools/call", map[string]any{"name": "execute_code", "arguments": map[string]any{"code": code, "language": lang, "workspace": fmt.Sprintf("img-%v", modern)}}, nil)
			res, _ := m["result"].(map[string]any)
			if _, has := res["structuredContent"]; has {
				t.Fatalf("modern=%v %s: a result with an image has structuredContent: %v", modern, lang, res)
			}
			content := res["content"].([]any)
			img := content[1].(map[string]any)
			if img["type"] != "image" || img["mimeType"] != "image/png" || img["data"] != pixelPNG {
				t.Fatalf("modern=%v %s: content[1] = %v", modern, lang, img)
			}
			sc, isErr, err := mcptest.Structured(m)
			if err != nil || isErr || sc["stdout"] != "drawn\n" || sc["images"] != float64(1) {
				t.Fatalf("modern=%v %s: the text block: %v %v", modern, lang, sc, err)
			}
		}
		// Without an image, structuredContent is there.
		if m := c.RPC("tools/call", map[string]any{"name": "execute_code", "arguments": map[string]any{"code": "1", "language": "javascript"}}, nil); m["result"].(map[string]any)["structuredContent"] == nil {
			t.Fatalf("modern=%v: a result without images lacks structuredContent: %v", modern, m)
		}
	}
	d.stop()
}

func accept(value string) map[string]any {
	return map[string]any{"action": "accept", "content": map[string]any{"value": value}}
}

func TestInputLegacyHTTP(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	c := newMCP(t, d.url, false)
	c.InitializeWith(`{"elicitation":{}}`)
	for _, tc := range []struct{ lang, code, answer, want string }{
		{"python", `"Hello, " + input("Your name? ")`, "Ada", `'Hello, Ada'`},
		{"javascript", `"Hello, " + prompt("Your name?")`, "Grace", `"Hello, Grace"`},
		{"python", "try:\n    input('Continue? ')\nexcept EOFError:\n    r = 'declined'\nr", "", `'declined'`},
		{"javascript", `String(prompt("Continue?"))`, "", `"null"`},
	} {
		ev := c.Stream("tools/call", map[string]any{"name": "execute_code", "arguments": map[string]any{"code": tc.code, "language": tc.lang, "workspace": "ask"}})
		var sc map[string]any
		for m := range ev {
			if m["method"] == "elicitation/create" {
				p := m["params"].(map[string]any)
				if !strings.Contains(fmt.Sprint(p["requestedSchema"]), "value") || !strings.Contains(fmt.Sprint(p["message"]), "?") {
					t.Fatalf("%s: the elicitation: %v", tc.lang, p)
				}
				result := accept(tc.answer)
				if tc.answer == "" {
					result = map[string]any{"action": "decline"}
				}
				if code := c.Respond(m["id"], result); code != http.StatusAccepted {
					t.Fatalf("%s: the response got HTTP %d", tc.lang, code)
				}
				continue
			}
			if m["id"] != nil {
				var err error
				if sc, _, err = mcptest.Structured(m); err != nil {
					t.Fatal(err)
				}
			}
		}
		if sc["result"] != tc.want {
			t.Fatalf("%s %q: %v", tc.lang, tc.code, sc)
		}
	}
	d.stop()
}

// modernCall posts a 2026-07-28 tools/call of execute_code whose client
// declares elicitation, with more params, and returns the response.
func (c *mcp) modernCall(code, lang, ws string, more map[string]any) map[string]any {
	c.T.Helper()
	params := map[string]any{"name": "execute_code", "arguments": map[string]any{"code": code, "language": lang, "workspace": ws},
		"_meta": map[string]any{"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}}}
	for k, v := range more {
		params[k] = v
	}
	return c.RPC("tools/call", params, nil)
}

// In 2026-07-28 the call answers input_required and the retry resumes the
// run; while it waits the run holds its workspace but not its run slot.
func TestInputModernHTTP(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "", "[limits]\nmax_concurrent_runs = 1\nmax_runs_per_principal = 1")
	c := newMCP(t, d.url, true)
	for _, tc := range []struct{ lang, code, want string }{
		{"python", "x = 41\nname = input('Your name? ')\nf'{name} {x + 1}'", `'Ada 42'`},
		{"javascript", `var y = 41; const name = prompt("Your name?"); name + " " + (y + 1)`, `"Ada 42"`},
	} {
		ws := "ask-" + tc.lang
		first := c.modernCall(tc.code, tc.lang, ws, nil)
		res := first["result"].(map[string]any)
		state, _ := res["requestState"].(string)
		if res["resultType"] != "input_required" || state == "" {
			t.Fatalf("%s: %v", tc.lang, first)
		}
		// Another workspace runs meanwhile: the parked run gave its only slot back.
		if sc, isErr := c.runLang("other-"+tc.lang, "javascript", "6*7"); isErr || sc["result"] != "42" {
			t.Fatalf("%s: another workspace while one waits: %v", tc.lang, sc)
		}
		retry := c.modernCall(tc.code, tc.lang, ws, map[string]any{"requestState": state,
			"inputResponses": map[string]any{"input": accept("Ada")}})
		sc, isErr, err := mcptest.Structured(retry)
		if err != nil || isErr || sc["result"] != tc.want || sc["status"] != "ok" {
			t.Fatalf("%s: the retry: %v %v", tc.lang, retry, err)
		}
		again := c.modernCall(tc.code, tc.lang, ws, map[string]any{"requestState": state,
			"inputResponses": map[string]any{"input": accept("twice")}})
		if e, _ := again["error"].(map[string]any); e == nil || e["code"] != float64(-32602) {
			t.Fatalf("%s: the same state twice: %v", tc.lang, again)
		}
	}
	d.stop()
}

// Over stdio in the legacy era the question is a line on stdout and the
// answer a line on stdin.
func TestInputLegacyStdio(t *testing.T) {
	p := startStdio(t, fmt.Sprintf("[workspace]\ndata_dir = %q\n", t.TempDir()))
	next := func() map[string]any {
		t.Helper()
		select {
		case m, ok := <-p.lines:
			if !ok {
				t.Fatalf("stdout closed\n%s", p.logs())
			}
			return m
		case <-time.After(60 * time.Second):
			t.Fatalf("nothing on stdout\n%s", p.logs())
		}
		return nil
	}
	p.send(t, map[string]any{"id": 1, "method": "initialize", "params": map[string]any{"protocolVersion": "2025-11-25",
		"capabilities": map[string]any{"elicitation": map[string]any{}}, "clientInfo": map[string]any{"name": "stdio-test", "version": "1"}}})
	next()
	p.send(t, map[string]any{"method": "notifications/initialized"})
	p.send(t, map[string]any{"id": 2, "method": "tools/call", "params": map[string]any{"name": "execute_code",
		"arguments": map[string]any{"code": `input("Your name? ")`, "language": "python", "workspace": "s"}}})
	m := next()
	if m["method"] != "elicitation/create" {
		t.Fatalf("instead of the question: %v", m)
	}
	p.send(t, map[string]any{"id": m["id"], "result": accept("Grace")})
	sc, isErr, err := mcptest.Structured(next())
	if err != nil || isErr || sc["result"] != "'Grace'" || sc["stdout"] != "Your name? " {
		t.Fatalf("the answer: %v %v", sc, err)
	}
}
