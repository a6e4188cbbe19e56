package worker

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"execd/internal/config"
	"execd/internal/upstream"
	"execd/internal/upstream/upstreamtest"
)

// Code mode as the code meets it: the real guests, a real Hub
// (internal/upstream) and its fake stdio upstream
// (internal/upstream/testdata/fakeupstream), which can hang, fail and
// report what it received on the wire; upstreamtest builds it.

// toolsHub is a Hub with one upstream, "fake", that allows every tool
// but create-issue (ask); edit changes it.
func toolsHub(t testing.TB, edit func(*config.Upstream)) *upstream.Hub {
	t.Helper()
	u := config.Upstream{Name: "fake", Command: []string{upstreamtest.FakeBin(t)}, Allow: []string{"*"}, Ask: []string{"create-issue"},
		MaxCallsPerRun: config.DefaultUpstreamMaxCallsPerRun,
		CallTimeout:    config.Duration{Duration: 20 * time.Second}, ConnectTimeout: config.Duration{Duration: 20 * time.Second}}
	if edit != nil {
		edit(&u)
	}
	h, err := upstream.New([]config.Upstream{u}, config.CodeMode{DescriptionBudget: 4096}, upstream.Options{MaxResultBytes: 1 << 20, MaxResultKey: "limits.max_output_bytes"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func runTools(t *testing.T, w *Worker, h *upstream.Hub, code string, want Status) Result {
	t.Helper()
	r := w.Run(context.Background(), code, RunOptions{Tools: h.NewRun("local", nil), Timeout: 30 * time.Second})
	if r.Status != want {
		t.Fatalf("%.300s\n= %s; want %s\nstdout: %.2000s\nstderr: %.2000s", code, describe(r), want, r.Stdout, r.Stderr)
	}
	return r
}

func TestToolsInJavaScript(t *testing.T) {
	h := toolsHub(t, nil)
	w := newLangWorker(t, "javascript")
	for _, c := range []struct{ name, code, want string }{
		{"text", `await tools.fake.echo({text: "hi"})`, `"hi"`},
		{"text that is JSON", `(await tools.fake.echo({text: '{"a": [1, 2]}'})).a`, `[1, 2]`},
		{"structured", `await tools.fake.add({a: 1, b: 2})`, `{sum: 3}`},
		{"in parallel", `await Promise.all([1, 2, 3].map((i) => tools.fake.add({a: i, b: 10})))`, `[{sum: 11}, {sum: 12}, {sum: 13}]`},
		{"with fetch's loop", `const [x] = await Promise.all([tools.fake.echo({text: "a"}), new Promise((r) => setTimeout(r, 5))]); x`, `"a"`},
		{"image", `const im = await tools.fake.image(); [im.text, im.images.length, im.images[0] instanceof Uint8Array, Array.from(im.images[0].slice(0, 4))]`,
			`["", 1, true, [137, 80, 78, 71]]`},
		{"tool error", `let e1; try { await tools.fake.fail() } catch (e) { e1 = e }; [e1 instanceof ToolError, e1 instanceof Error, e1.name, e1.message, e1.server, e1.tool, e1.code]`,
			`[true, true, "ToolError", "it failed", "fake", "fail", "tool_error"]`},
		{"unknown tool", `let e2; try { await tools.fake.nope() } catch (e) { e2 = e }; [e2.name, e2.code, e2.message]`,
			`["ToolError", "unknown_tool", "tools.fake.nope is not a tool this code may call (tools.list() lists them)"]`},
		{"unknown upstream", `let e3; try { await tools.other.echo({text: "x"}) } catch (e) { e3 = e }; e3.code`, `"unknown_tool"`},
		{"ask without a person", `let e4; try { await tools.fake["create-issue"]({title: "t"}) } catch (e) { e4 = e }; [e4.code, e4.message.includes("cannot ask")]`,
			`["refused", true]`},
		{"arguments not an object", `let e5; try { await tools.fake.echo([1]) } catch (e) { e5 = e }; [e5.name, e5.message]`,
			`["TypeError", "tools.fake.echo takes its arguments as one object"]`},
		{"list", `const l = tools.list(); const echo = l.find((t) => t.name === "echo"), ci = l.find((t) => t.name === "create-issue");
			[l.every((t) => t.server === "fake"), echo.description, echo.access, echo.inputSchema.required, ci.access, Object.keys(echo).sort()]`,
			`[true, "Echoes its text. Nothing else.", "allow", ["text"], "ask", ["access", "description", "inputSchema", "name", "server"]]`},
		{"progress flood", `await tools.fake.flood({n: 20000})`, `"flooded"`},
		{"not a thenable", `const t = await tools; typeof t.fake.echo`, `"function"`},
		{"not serialised", `JSON.stringify({t: tools.fake})`, `"{\"t\":{}}"`},
		{"prints", `[tools, tools.fake]`, `[tools {list: [Function: list], <upstream>: {<tool>: [Function]}}, tools.fake {<tool>: [Function]}]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if r := runTools(t, w, h, c.code, StatusOK); value(r) != c.want {
				t.Errorf("%s\n= %s\nwant %s\nstderr: %s", c.code, value(r), c.want, r.Stderr)
			}
		})
	}
}

func TestToolsInPython(t *testing.T) {
	h := toolsHub(t, nil)
	w := newLangWorker(t, "python")
	for _, c := range []struct{ name, code, want string }{
		{"text", "from execd import tools\ntools.fake.echo(text='hi')", `'hi'`},
		{"a dict", "tools.fake.echo({'text': 'hi'})", `'hi'`},
		{"structured", "tools.fake.add(a=1, b=2)", `{'sum': 3}`},
		{"image", "im = tools.fake.image()\n(im['text'], len(im['images']), im['images'][0][:4])", `('', 1, b'\x89PNG')`},
		{"tool error", "import execd\ntry:\n    tools.fake.fail()\nexcept execd.ToolError as e:\n    err = e\n(type(err).__name__, str(err), err.server, err.tool, err.code)",
			`('ToolError', 'it failed', 'fake', 'fail', 'tool_error')`},
		{"unknown tool", "from execd import ToolError\ntry:\n    tools.fake.nope()\nexcept ToolError as e:\n    err = e\nerr.code", `'unknown_tool'`},
		{"list", "l = tools.list()\n[(t['name'], t['access']) for t in l if t['name'] in ('echo', 'create-issue')]", `[('echo', 'allow'), ('create-issue', 'ask')]`},
		{"help", "import io, contextlib\nbuf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n    help(tools.fake.echo)\n" +
			"out = buf.getvalue()\n('Echoes its text. Nothing else.' in out, 'text (str)' in out, 'echo(' in out)", `(True, True, True)`},
		{"dir", "'add' in dir(tools.fake) and 'fake' in dir(tools)", `True`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if r := runTools(t, w, h, c.code, StatusOK); value(r) != c.want {
				t.Errorf("%s\n= %s\nwant %s\nstderr: %s", c.code, value(r), c.want, r.Stderr)
			}
		})
	}
}

// The run's result lists its calls, by tool and outcome.
func TestToolCallsInTheResult(t *testing.T) {
	h := toolsHub(t, nil)
	w := newLangWorker(t, "javascript")
	r := runTools(t, w, h, `for (let i = 0; i < 3; i++) await tools.fake.echo({text: "x"});
		try { await tools.fake.fail() } catch (e) {}
		try { await tools.fake.nope() } catch (e) {}
		tools.list().length > 0`, StatusOK)
	want := []ToolCall{{"fake", "echo", "ok", 3}, {"fake", "fail", "tool_error", 1}, {"fake", "nope", "unknown_tool", 1}}
	if !slices.Equal(r.ToolCalls, want) {
		t.Errorf("ToolCalls = %v, want %v", r.ToolCalls, want)
	}
	if r := runTools(t, w, h, `1`, StatusOK); r.ToolCalls != nil {
		t.Errorf("a run without calls has ToolCalls %v", r.ToolCalls)
	}
}

// max_calls_per_run: the call past it is a ToolError that names the key,
// in both guests; each run has its own count.
func TestToolsMaxCallsPerRun(t *testing.T) {
	h := toolsHub(t, func(u *config.Upstream) { u.MaxCallsPerRun = 2 })
	js := newLangWorker(t, "javascript")
	code := `const got = [];
		for (let i = 0; i < 3; i++) { try { got.push(await tools.fake.echo({text: "n" + i})) } catch (e) { got.push(e.code + ": " + e.message) } }
		got`
	want := `["n0", "n1", "limit: this run has made 2 calls to upstream \"fake\", as many as it may (max_calls_per_run of [[upstream]] \"fake\")"]`
	for range 2 {
		if r := runTools(t, js, h, code, StatusOK); value(r) != want {
			t.Errorf("= %s\nwant %s", value(r), want)
		}
	}
	py := newLangWorker(t, "python")
	r := runTools(t, py, h, "from execd import tools, ToolError\ntools.fake.echo(text='a')\ntools.fake.echo(text='b')\ntools.fake.echo(text='c')", StatusError)
	if r.Error.Type != "ToolError" || !strings.Contains(r.Error.Message, "max_calls_per_run") {
		t.Errorf("the third call raised %s: %s", r.Error.Type, r.Error.Message)
	}
	if !slices.Equal(r.ToolCalls, []ToolCall{{"fake", "echo", "ok", 2}, {"fake", "echo", "limit", 1}}) {
		t.Errorf("ToolCalls = %v", r.ToolCalls)
	}
}

// progressSignal reports each progress message on a channel.
type progressSignal chan string

func (p progressSignal) Progress(_, _ float64, msg string) {
	select {
	case p <- msg:
	default:
	}
}

// A cancel of the run reaches the upstream as notifications/cancelled of
// the call in flight, from either guest; the upstream's progress is the
// run's meanwhile; the interpreter's state survives.
func TestToolCallCancelledUpstream(t *testing.T) {
	for _, c := range []struct{ lang, code, check string }{
		{"javascript", `globalThis.kept = 7; await tools.fake.hang()`, `kept`},
		{"python", "from execd import tools\nkept = 7\ntools.fake.hang()", `kept`},
	} {
		t.Run(c.lang, func(t *testing.T) {
			h := toolsHub(t, nil)
			w := newLangWorker(t, c.lang)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sink := make(progressSignal, 8)
			done := make(chan Result, 1)
			go func() { done <- w.Run(ctx, c.code, RunOptions{Tools: h.NewRun("local", nil), Sink: sink}) }()
			select {
			case msg := <-sink: // the fake says "started" once the call is in flight
				if !strings.Contains(msg, "started") {
					t.Errorf("progress %q, want the upstream's", msg)
				}
			case r := <-done:
				t.Fatalf("the run ended first: %s\n%s", describe(r), r.Stderr)
			}
			cancel()
			r := <-done
			if r.Status != StatusInterrupted || r.Discontinuous() {
				t.Fatalf("= %s, want interrupted with its state", describe(r))
			}
			if !slices.Equal(r.ToolCalls, []ToolCall{{"fake", "hang", "cancelled", 1}}) {
				t.Errorf("ToolCalls = %v", r.ToolCalls)
			}
			got := runTools(t, w, h, c.check, StatusOK)
			if value(got) != "7" {
				t.Errorf("state after the cancel: %s", value(got))
			}
			res, err := h.NewRun("local", nil).Call(context.Background(), "fake", "received", json.RawMessage(`{"waitCancel": true}`), nil)
			if err != nil {
				t.Fatal(err)
			}
			var rec upstreamtest.Received
			if err := json.Unmarshal(res.StructuredContent, &rec); err != nil {
				t.Fatal(err)
			}
			var hangID json.RawMessage
			for _, c := range rec.Calls {
				if c.Name == "hang" {
					hangID = c.ID
				}
			}
			if len(rec.Cancels) != 1 || hangID == nil || string(rec.Cancels[0].RequestID) != string(hangID) {
				t.Errorf("the upstream received calls %s and cancels %s; want a cancel of the hang", mustJSON(rec.Calls), mustJSON(rec.Cancels))
			}
		})
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Without upstreams the code is told so, in a ToolError.
func TestToolsWithoutUpstreams(t *testing.T) {
	w := newLangWorker(t, "javascript")
	r := w.Run(context.Background(), `let e; try { await tools.github.list_issues() } catch (x) { e = x }; [e.name, e.code, e.message]`, RunOptions{})
	want := `["ToolError", "unknown_tool", "tools: this execd has no upstream MCP servers ([[upstream]] in its configuration)"]`
	if r.Status != StatusOK || value(r) != want {
		t.Errorf("= %s\nwant %s", describe(r), want)
	}
}

// Upstream failures reach the code as ToolErrors that say what happened
// and name the key that decides; the run and the interpreter go on.
func TestToolFailuresInTheGuests(t *testing.T) {
	h := toolsHub(t, func(u *config.Upstream) { u.CallTimeout = config.Duration{Duration: 300 * time.Millisecond} })
	slowOK := toolsHub(t, nil)
	down := toolsHub(t, func(u *config.Upstream) { u.Command = []string{filepath.Join(t.TempDir(), "no-such-server")} })
	for _, c := range []struct {
		name      string
		hub       *upstream.Hub
		call      string // JavaScript; the Python twin is derived
		code      string
		msg       string
		thenWorks bool
	}{
		{"crash mid-call", h, `crash()`, "unavailable", "went away during the call", true},
		{"hang", h, `hang()`, "timeout", "within 300ms (call_timeout of [[upstream]]", true},
		{"50 MB answer", slowOK, `big({bytes: 50000000})`, "too_large", "limits.max_output_bytes", true},
		{"garbage", h, `garbage()`, "unavailable", "", true},
		{"upstream down", down, `echo({text: "x"})`, "unavailable", "fake", false},
	} {
		for _, lang := range []string{"javascript", "python"} {
			t.Run(c.name+"/"+lang, func(t *testing.T) {
				w := newLangWorker(t, lang)
				code := `let e; try { await tools.fake.` + c.call + ` } catch (x) { e = x }; [e.name, e.code, e.message]`
				if lang == "python" {
					pyCall := strings.NewReplacer("({bytes: 50000000})", "(bytes=50000000)", `({text: "x"})`, `(text="x")`).Replace(c.call)
					code = "from execd import tools, ToolError\ntry:\n    tools.fake." + pyCall + "\nexcept ToolError as x:\n    e = x\n[type(e).__name__, e.code, str(e)]"
				}
				r := runTools(t, w, c.hub, code, StatusOK)
				v := value(r)
				if !strings.Contains(v, "ToolError") || !strings.Contains(v, c.code) || !strings.Contains(v, c.msg) {
					t.Errorf("= %s; want a ToolError %s saying %q", v, c.code, c.msg)
				}
				if c.thenWorks {
					next := `await tools.fake.echo({text: "again"})`
					if lang == "python" {
						next = `tools.fake.echo(text="again")`
					}
					if r := runTools(t, w, c.hub, next, StatusOK); !strings.Contains(value(r), "again") {
						t.Errorf("the next call: %s", value(r))
					}
				}
			})
		}
	}
}

// choiceInput answers every question with its choices' first, or "typed"
// when it has none, and records what each was offered.
type choiceInput struct {
	mu      sync.Mutex
	offered [][]string
}

func (c *choiceInput) Input(ctx context.Context, prompt string) InputAnswer {
	ch := Choices(ctx)
	c.mu.Lock()
	c.offered = append(c.offered, ch)
	c.mu.Unlock()
	if len(ch) > 0 {
		return InputAnswer{Status: InputOK, Text: ch[0]}
	}
	return InputAnswer{Status: InputOK, Text: "typed"}
}

// A tool call's question offers its choices to the run's Input
// (AskPerson); the code's own input() offers none, so code cannot dress
// its question up as an approval.
func TestAskPersonOffersChoices(t *testing.T) {
	h := toolsHub(t, func(u *config.Upstream) { u.Ask = []string{"echo"} })
	w := newLangWorker(t, "javascript")
	in := &choiceInput{}
	approve := func(ctx context.Context, a upstream.Approval) (upstream.Decision, error) {
		ans := AskPerson(ctx, "May it?", "allow once", "deny")
		if ans.Status == InputOK && ans.Text == "allow once" {
			return upstream.AllowOnce, nil
		}
		return upstream.Deny, nil
	}
	code := `const n = prompt("name?"); [n, await tools.fake.echo({text: "x"})]`
	r := w.Run(context.Background(), code, RunOptions{Tools: h.NewRun("local", approve), Input: in, Timeout: 30 * time.Second})
	if r.Status != StatusOK || r.Value == nil || *r.Value != `["typed", "x"]` {
		t.Fatalf("%s; stderr %.500s", describe(r), r.Stderr)
	}
	if len(in.offered) != 2 || in.offered[0] != nil || strings.Join(in.offered[1], "|") != "allow once|deny" {
		t.Errorf("offered %q; want none to input(), then the approval's choices", in.offered)
	}
}
