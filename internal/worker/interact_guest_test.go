package worker

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The guests' show(), input() and prompt() (sandbox/ABI.md, execd.show and
// execd.input), through Run with the real guests.

// A 1x1 PNG, and JavaScript that makes its bytes b.
const pixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"

var jsPixel = func() string {
	b, _ := base64.StdEncoding.DecodeString(pixelPNG)
	var parts []string
	for _, c := range b {
		parts = append(parts, strconv.Itoa(int(c)))
	}
	return "const b = new Uint8Array([" + strings.Join(parts, ",") + "]); "
}()

// script answers input() from a list; "" declines, and a nil answers
// slice blocks until the run is stopped.
type script struct {
	answers []InputAnswer
	prompts []string
	delay   time.Duration
	asked   chan struct{} // if not nil, signalled at each question
}

func (s *script) Input(ctx context.Context, prompt string) InputAnswer {
	s.prompts = append(s.prompts, prompt)
	if s.asked != nil {
		s.asked <- struct{}{}
	}
	if s.answers == nil {
		<-ctx.Done()
		return InputAnswer{Status: InputEOF}
	}
	if s.delay > 0 {
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return InputAnswer{Status: InputEOF}
		}
	}
	a := s.answers[0]
	s.answers = s.answers[1:]
	return a
}

func ok(text string) InputAnswer { return InputAnswer{Status: InputOK, Text: text} }

func imageWorker(t *testing.T, lang string) *Worker {
	t.Helper()
	dir := t.TempDir()
	png, _ := base64.StdEncoding.DecodeString(pixelPNG)
	os.WriteFile(filepath.Join(dir, "pixel.png"), png, 0o600)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not an image"), 0o600)
	if lang == "python" {
		return newPyWorker(t, WorkerOptions{Dir: dir})
	}
	return newWorker(t, testEngine(t, true), WorkerOptions{Dir: dir})
}

func TestShowInBothGuests(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		lang, code string
		images     int
	}{
		{"javascript", jsPixel + `show(b); show(b.buffer); show("/workspace/pixel.png"); "shown"`, 3},
		{"python", "import base64\nfrom execd import show\nb = base64.b64decode('" + pixelPNG + "')\nshow(b)\nshow(bytearray(b))\nshow('/workspace/pixel.png')\n" +
			"class Fig:\n    def _repr_png_(self):\n        return b\nshow(Fig())\n'shown'", 4},
	} {
		w := imageWorker(t, c.lang)
		r := mustRun(t, w, c.code, StatusOK)
		if len(r.Images) != c.images {
			t.Fatalf("%s: %d images; want %d", c.lang, len(r.Images), c.images)
		}
		for _, img := range r.Images {
			if img.MIME != "image/png" || base64.StdEncoding.EncodeToString(img.Data) != pixelPNG {
				t.Fatalf("%s: image %s of %d bytes", c.lang, img.MIME, len(img.Data))
			}
		}
		// The next run starts without them.
		if r := mustRun(t, w, "1", StatusOK); len(r.Images) != 0 {
			t.Fatalf("%s: the next run carries %d images", c.lang, len(r.Images))
		}
	}
}

func TestShowRefusesWithAMessage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ lang, code, want string }{
		{"javascript", `show("/workspace/notes.txt")`, "TypeError: show(): not an image"},
		{"javascript", `show(new Uint8Array([1, 2, 3]))`, "TypeError: show(): not an image"},
		{"javascript", `show(Uint8Array.from("\x89PNG\r\n\x1a\n<script>alert(1)</script>", c => c.charCodeAt(0)))`, "TypeError: show(): not an image: it starts like PNG"},
		{"javascript", `show(42)`, "TypeError: show() takes a path or the bytes"},
		{"javascript", `show("/workspace/nope.png")`, "No such file"},
		{"javascript", jsPixel + `for (let i = 0; i < 9; i++) show(b)`, "RangeError: show(): this result already carries the most images"},
		{"javascript", `const b = new Uint8Array(3 << 20); b.set([0x89, 0x50, 0x4e, 0x47, 13, 10, 26, 10]); show(b)`, "RangeError: show(): the image is larger than execd allows"},
		{"python", "from execd import show\nshow('/workspace/notes.txt')", "ValueError: show(): not an image"},
		{"python", "from execd import show\nshow(42)", "TypeError: show() takes a path"},
		{"python", "from execd import show\nshow(b'\\x89PNG\\r\\n\\x1a\\n<script>alert(1)</script>')", "ValueError: show(): not an image: it starts like PNG"},
		{"python", "from execd import show\nopen('cut.png', 'wb').write(open('pixel.png', 'rb').read()[:20])\nshow('cut.png')", "ValueError: show(): not an image: it starts like PNG"},
		{"python", "from execd import show\nshow('nope.png')", "FileNotFoundError"},
		{"python", "import base64\nfrom execd import show\nb = base64.b64decode('" + pixelPNG + "')\nfor i in range(9):\n    show(b)", "RuntimeError: show(): this result already carries the most images"},
		{"python", "from execd import show\nshow(b'\\x89PNG\\r\\n\\x1a\\n' + bytes(3 << 20))", "ValueError: show(): the image is larger than execd allows"},
	} {
		w := imageWorker(t, c.lang)
		r := mustRun(t, w, c.code, StatusError)
		if got := r.Error.Type + ": " + r.Error.Message; !strings.Contains(got, c.want) {
			t.Errorf("%s %q: %s; want %q", c.lang, c.code, got, c.want)
		}
		// The images shown before the refusal are kept, at most the limit.
		if len(r.Images) > 8 {
			t.Errorf("%s: %d images kept", c.lang, len(r.Images))
		}
	}
}

func TestInputInBothGuests(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		lang, code string
		answers    []InputAnswer
		status     Status
		want       string // in the value, or in the error
	}{
		{"javascript", `prompt("Your name?") + "!"`, []InputAnswer{ok("Ada")}, StatusOK, `"Ada!"`},
		{"javascript", `[prompt("a"), prompt("b")].join("|")`, []InputAnswer{ok("x"), ok("ÿ")}, StatusOK, `"x|ÿ"`},
		{"javascript", `prompt("Continue?") === null`, []InputAnswer{{Status: InputEOF}}, StatusOK, "true"},
		{"javascript", `prompt("?")`, []InputAnswer{{Status: InputTimedOut}}, StatusError, "nobody answered within"},
		{"python", `input("Your name? ") + "!"`, []InputAnswer{ok("Ada")}, StatusOK, `'Ada!'`},
		{"python", "try:\n    input('Continue?')\nexcept EOFError as e:\n    r = 'EOF: ' + str(e)\nr", []InputAnswer{{Status: InputEOF}}, StatusOK, "EOF: EOF when reading a line"},
		{"python", `input()`, []InputAnswer{{Status: InputTimedOut}}, StatusError, "EOFError: input(): nobody answered within"},
	} {
		w := imageWorker(t, c.lang)
		src := &script{answers: c.answers}
		r := w.Run(context.Background(), c.code, RunOptions{Input: src})
		got := value(r)
		if r.Error != nil {
			got = r.Error.Type + ": " + r.Error.Message
		}
		if r.Status != c.status || !strings.Contains(got, c.want) {
			t.Errorf("%s %q: %s %s; want %s %q", c.lang, c.code, r.Status, got, c.status, c.want)
		}
	}
	// Python's input() writes its prompt to stdout, as without a terminal.
	w := imageWorker(t, "python")
	src := &script{answers: []InputAnswer{ok("Ada")}}
	if r := w.Run(context.Background(), `print(input("Name? "))`, RunOptions{Input: src}); r.Stdout != "Name? Ada\n" || src.prompts[0] != "Name? " {
		t.Fatalf("stdout %q, prompt %q", r.Stdout, src.prompts)
	}
}

// Without anyone to answer, input() ends at once saying so.
func TestInputWithoutAClient(t *testing.T) {
	t.Parallel()
	for lang, want := range map[string]string{
		"javascript": "prompt(): nobody can answer: the MCP client cannot be asked",
		"python":     "EOFError: input(): nobody can answer: the MCP client cannot be asked",
	} {
		w := imageWorker(t, lang)
		code := `prompt("?")`
		if lang == "python" {
			code = `input("?")`
		}
		r := mustRun(t, w, code, StatusError)
		if got := r.Error.Type + ": " + r.Error.Message; !strings.Contains(got, want) {
			t.Errorf("%s: %s", lang, got)
		}
	}
}

// A cancel while the code waits for input ends the wait: the run is
// interrupted, the interpreter keeps its state.
func TestCancelWhileWaitingForInput(t *testing.T) {
	t.Parallel()
	for lang, code := range map[string][2]string{
		"javascript": {`var kept = 7; try { prompt("wait") } catch (e) { "caught" }`, "kept"},
		"python":     {"kept = 7\ntry:\n    input('wait')\nexcept BaseException:\n    pass\nwhile True:\n    pass", "kept"},
	} {
		w := imageWorker(t, lang)
		ctx, cancel := context.WithCancel(context.Background())
		src := &script{asked: make(chan struct{}, 1)} // blocks
		done := make(chan Result, 1)
		go func() { done <- w.Run(ctx, code[0], RunOptions{Input: src}) }()
		<-src.asked
		cancel()
		r := <-done
		if r.Status != StatusInterrupted || r.Discontinuous() {
			t.Fatalf("%s: %s", lang, describe(r))
		}
		if r := mustRun(t, w, code[1], StatusOK); value(r) != "7" {
			t.Fatalf("%s: state after the cancelled input: %s", lang, describe(r))
		}
	}
}

// The time the code waits for input is not run time.
func TestWaitingForInputIsNotRunTime(t *testing.T) {
	t.Parallel()
	for lang, code := range map[string]string{"javascript": `prompt("slow") + "!"`, "python": `input("slow") + "!"`} {
		w := imageWorker(t, lang)
		src := &script{answers: []InputAnswer{ok("late")}, delay: 1500 * time.Millisecond}
		r := w.Run(context.Background(), code, RunOptions{Input: src, Timeout: time.Second})
		if r.Status != StatusOK || !strings.Contains(value(r), "late!") {
			t.Fatalf("%s: an answer after 1.5 s with a 1 s timeout: %s", lang, describe(r))
		}
		if r.Duration >= src.delay {
			t.Errorf("%s: Duration %s counts the wait of %s", lang, r.Duration, src.delay)
		}
	}
}

// A prompt or a progress message longer than the host reads is cut at a
// character boundary by both guests, so the host gets valid UTF-8.
func TestLongTextIsCutAtACharacter(t *testing.T) {
	t.Parallel()
	for lang, code := range map[string]string{
		"javascript": `const s = "x".repeat(16383) + "é"; progress(1, "y".repeat(4095) + "é"); prompt(s)`,
		"python":     "from execd import progress\nprogress(1, 'y' * 4095 + 'é')\ninput('x' * 16383 + 'é')",
	} {
		w := imageWorker(t, lang)
		src := &script{answers: []InputAnswer{ok("fine")}}
		rec := &progressRec{}
		if r := w.Run(context.Background(), code, RunOptions{Input: src, Sink: rec}); r.Status != StatusOK {
			t.Fatalf("%s: %s", lang, describe(r))
		}
		if len(src.prompts) != 1 || src.prompts[0] != strings.Repeat("x", 16383) {
			t.Errorf("%s: the prompt is %d bytes, valid UTF-8 %v", lang, len(src.prompts[0]), utf8.ValidString(src.prompts[0]))
		}
		if len(rec.calls) != 1 || rec.calls[0] != "1 0 "+strings.Repeat("y", 4095) {
			t.Errorf("%s: the progress message is %q", lang, rec.calls)
		}
	}
}

// An answer arrives whole however long, up to limits.max_input_answer_bytes
// (4 MiB by default); a longer one is refused with an error that names the
// key, never cut.
func TestLongInputAnswers(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("0123456789", 350_000) + "é€" // 3.5 MB, past the guests' first buffer
	tooLong := strings.Repeat("x", defaultMaxInputAnswer+1)
	for _, c := range []struct {
		lang, code, want string
	}{
		{"javascript", `const a = prompt("paste"); a.length + " " + a.slice(-4)`, `"3500002 89é€"`},
		{"python", `a = input("paste"); f"{len(a)} {a[-4:]}"`, `'3500002 89é€'`},
	} {
		w := imageWorker(t, c.lang)
		r := w.Run(context.Background(), c.code, RunOptions{Input: &script{answers: []InputAnswer{ok(long)}}})
		if r.Status != StatusOK || value(r) != c.want {
			t.Errorf("%s: a 3.5 MB answer: %s; want %s", c.lang, describe(r), c.want)
		}
		r = w.Run(context.Background(), c.code, RunOptions{Input: &script{answers: []InputAnswer{ok(tooLong)}}})
		want := map[string]string{"javascript": "RangeError", "python": "ValueError"}[c.lang]
		if r.Status != StatusError || r.Error.Type != want || !strings.Contains(r.Error.Message, "limits.max_input_answer_bytes") {
			t.Errorf("%s: an answer over the limit: %s; want a %s naming the key", c.lang, describe(r), want)
		}
		if r := mustRun(t, w, "1 + 1", StatusOK); value(r) != "2" {
			t.Errorf("%s: after a refused answer: %s", c.lang, describe(r))
		}
	}
}
