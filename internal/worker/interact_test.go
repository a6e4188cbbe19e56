package worker

import (
	"bytes"
	"context"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The host side of execd.show and execd.input, on a real instance's
// memory; the guests' show()/input()/prompt() are tested in
// interact_guest_test.go.

// guestBytes writes b into the instance's memory (a buffer from the guest's
// own allocator) and returns its address.
func guestBytes(t *testing.T, w *Worker, b []byte) uint32 {
	t.Helper()
	r, err := w.inst.alloc.Call(context.Background(), uint64(len(b)))
	if err != nil || r[0] == 0 {
		t.Fatalf("execd_alloc: %v", err)
	}
	if !w.inst.mod.Memory().Write(uint32(r[0]), b) {
		t.Fatal("write to guest memory")
	}
	return uint32(r[0])
}

// Small images of each type, made by the standard library's encoders (a
// WebP by hand: see imagesize_test.go).
var (
	pngBytes  = encoded(func(w *bytes.Buffer, m image.Image) error { return png.Encode(w, m) })
	jpegBytes = encoded(func(w *bytes.Buffer, m image.Image) error { return jpeg.Encode(w, m, nil) })
	gifBytes  = encoded(func(w *bytes.Buffer, m image.Image) error { return gif.Encode(w, m, nil) })
	webpBytes = webpLossless(3, 2)
)

func encoded(enc func(*bytes.Buffer, image.Image) error) []byte {
	var b bytes.Buffer
	if err := enc(&b, image.NewRGBA(image.Rect(0, 0, 3, 2))); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func TestShowKeepsRecognisedImagesWithinTheLimits(t *testing.T) {
	t.Parallel()
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	mustRun(t, w, "1", StatusOK)
	const limit = 1024
	st := &runState{maxImageBytes: limit, maxImages: 4}
	mod := w.inst.mod
	for _, c := range []struct {
		data []byte
		want int32
		mime string
	}{
		{pngBytes, 0, "image/png"},
		{jpegBytes, 0, "image/jpeg"},
		{[]byte("<svg xmlns='x'/>"), showNotImage, ""},
		{[]byte("GIF87"), showNotImage, ""},
		{append(append([]byte(nil), pngBytes...), make([]byte, limit-len(pngBytes)+1)...), showTooLarge, ""},
		// A signature with no image behind it.
		{[]byte("\x89PNG\r\n\x1a\n<script>alert(1)</script>"), showUnreadable, "image/png"},
		{pngBytes[:20], showUnreadable, "image/png"},
		{[]byte("\xff\xd8\xff<script>"), showUnreadable, "image/jpeg"},
		{[]byte("GIF89a"), showUnreadable, "image/gif"},
		{[]byte("RIFF\x24\x00\x00\x00WEBPVP8 <script>"), showUnreadable, "image/webp"},
		{gifBytes, 0, "image/gif"},
		{webpBytes, 0, "image/webp"},
		{pngBytes, showTooMany, ""},
	} {
		ptr := guestBytes(t, w, c.data)
		if got := st.show(mod, ptr, uint32(len(c.data))); got != c.want {
			t.Errorf("show(%q) = %d; want %d", c.data, got, c.want)
		}
		if c.mime != "" && ImageType(c.data) != c.mime {
			t.Errorf("ImageType(%q) = %q; want %q", c.data, ImageType(c.data), c.mime)
		}
	}
	if len(st.images) != 4 || st.images[0].MIME != "image/png" || string(st.images[3].Data) != string(webpBytes) {
		t.Fatalf("kept %d images: %+v", len(st.images), st.images)
	}
	// What was kept is a copy: the guest's memory may change.
	ptr := guestBytes(t, w, pngBytes)
	st2 := &runState{maxImageBytes: limit, maxImages: 4}
	st2.show(mod, ptr, uint32(len(pngBytes)))
	mod.Memory().Write(ptr, []byte("XXXX"))
	if string(st2.images[0].Data) != string(pngBytes) {
		t.Fatal("the kept image changed with the guest's memory")
	}
	st2.finished.Store(true)
	if got := st2.show(mod, ptr, 4); got == 0 {
		t.Fatal("an image shown after the run ended was kept")
	}
}

// answerWith is an InputSource with a fixed answer that records the
// prompt.
type answerWith struct {
	ans    InputAnswer
	prompt string
	block  bool // wait for ctx to end instead
}

func (a *answerWith) Input(ctx context.Context, prompt string) InputAnswer {
	a.prompt = prompt
	if a.block {
		<-ctx.Done()
	}
	return a.ans
}

func TestInputAnswersTheGuest(t *testing.T) {
	t.Parallel()
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	mustRun(t, w, "1", StatusOK)
	mod := w.inst.mod
	prompt := guestBytes(t, w, []byte("Your name? "))
	buf := guestBytes(t, w, make([]byte, 8))
	read := func(n int32) string {
		b, _ := mod.Memory().Read(buf, uint32(n))
		return string(b)
	}
	var st *runState
	ask := func(in InputSource, stopped bool) (int32, string) {
		ctx, cancel := context.WithCancel(context.Background())
		if stopped {
			cancel()
		}
		defer cancel()
		st = &runState{input: in, stopCtx: ctx, maxInputAnswer: 12}
		n := st.ask(mod, prompt, 11, buf, 8)
		got := ""
		if n > 0 && n <= 8 {
			got = read(n)
		}
		return n, got
	}
	src := &answerWith{ans: InputAnswer{Status: InputOK, Text: "Ada"}}
	if n, got := ask(src, false); n != 3 || got != "Ada" || src.prompt != "Your name? " {
		t.Errorf("an answer: %d %q (prompt %q)", n, got, src.prompt)
	}
	if n := st.takeAnswer(mod, buf, 8); n != noAnswerHeld {
		t.Errorf("an answer that fitted is held too: %d", n)
	}
	// An answer longer than the buffer is held, whole, for input_answer.
	if n, _ := ask(&answerWith{ans: InputAnswer{Status: InputOK, Text: "Zoëëëëë"}}, false); n != 12 {
		t.Errorf("an answer longer than the buffer: %d", n)
	}
	if n := st.takeAnswer(mod, buf, 8); n != 12 {
		t.Errorf("input_answer with a short buffer: %d; want the length", n)
	}
	if n := st.takeAnswer(mod, buf, 12); n != 12 || read(n) != "Zoëëëëë" {
		t.Errorf("input_answer: %d %q", n, read(n))
	}
	if n := st.takeAnswer(mod, buf, 12); n != noAnswerHeld {
		t.Errorf("input_answer twice: %d", n)
	}
	// The next question forgets an answer not taken.
	ask(&answerWith{ans: InputAnswer{Status: InputOK, Text: "Zoëëëëë"}}, false)
	st.input, st.stopCtx = &answerWith{ans: InputAnswer{Status: InputEOF}}, context.Background()
	if n := st.ask(mod, prompt, 11, buf, 8); n != inputEOF || st.takeAnswer(mod, buf, 12) != noAnswerHeld {
		t.Errorf("an answer held across questions: %d", n)
	}
	// One byte over the limit is refused, not cut.
	if n, _ := ask(&answerWith{ans: InputAnswer{Status: InputOK, Text: "Zoëëëëë!"}}, false); n != inputTooLong || st.takeAnswer(mod, buf, 16) != noAnswerHeld {
		t.Errorf("an answer over the limit: %d", n)
	}
	for _, c := range []struct {
		in      InputSource
		stopped bool
		want    int32
	}{
		{nil, false, inputNoClient},
		{&answerWith{ans: InputAnswer{Status: InputEOF}}, false, inputEOF},
		{&answerWith{ans: InputAnswer{Status: InputNoClient}}, false, inputNoClient},
		{&answerWith{ans: InputAnswer{Status: InputTimedOut}}, false, inputTimedOut},
		{&answerWith{ans: InputAnswer{Status: InputOK, Text: "late"}, block: true}, true, inputStopped},
	} {
		if n, _ := ask(c.in, c.stopped); n != c.want {
			t.Errorf("%+v: %d; want %d", c.in, n, c.want)
		}
	}
}

// The run's timer counts only the time it runs, not the pauses.
func TestRunTimerStopsWhilePaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var firings atomic.Int32
		fired := func(*runTimer) bool { return firings.Load() > 0 }
		rt := newRunTimer(100*time.Millisecond, func() { firings.Add(1) })
		time.Sleep(60 * time.Millisecond)
		rt.pause()
		time.Sleep(time.Hour)
		if fired(rt) {
			t.Fatal("fired while paused")
		}
		rt.resume()
		time.Sleep(39 * time.Millisecond)
		synctest.Wait()
		if fired(rt) {
			t.Fatal("fired before its time")
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		if !fired(rt) {
			t.Fatal("did not fire after 101 ms of running")
		}
		rt.pause() // after firing: stays fired, no panic
		rt.resume()
		rt.stop()
		if n := firings.Load(); n != 1 {
			t.Fatalf("fired %d times", n)
		}
		(*runTimer)(nil).pause() // a run without a timeout
		(*runTimer)(nil).stop()
	})
}

// A run's timeout does not count the time the guest waits for input; a
// cancel while it waits ends the wait.
func TestTimeoutPausesWhileTheGuestWaits(t *testing.T) {
	t.Parallel()
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	mustRun(t, w, "1", StatusOK)
	if r := w.Run(context.Background(), "while (true) {}", RunOptions{Timeout: 50 * time.Millisecond}); r.Status != StatusTimeout || r.Discontinuous() ||
		!strings.Contains(r.Error.Message, "timed out") {
		t.Fatalf("a timeout without input: %s", describe(r))
	}
	mustRun(t, w, "2", StatusOK)
}

// An image's copy is memory the guest caused: six runs at once showing
// eight 2 MiB images each added 330 MB outside the memory budget. show()
// now charges each copy to the budget until the run ends; one the budget
// cannot hold is left out and counted, so that the result can say so.
func TestShowChargesTheMemoryBudget(t *testing.T) {
	t.Parallel()
	e := testEngine(t, true)
	w := newWorker(t, e, WorkerOptions{})
	mustRun(t, w, "1", StatusOK)
	b := &budget{limit: int64(len(pngBytes)) + 10}
	st := &runState{maxImageBytes: 1024, maxImages: 4, budget: b}
	mod := w.inst.mod
	ptr := guestBytes(t, w, pngBytes)
	if got := st.show(mod, ptr, uint32(len(pngBytes))); got != 0 {
		t.Fatalf("the first image: %d", got)
	}
	if got := st.show(mod, ptr, uint32(len(pngBytes))); got != 0 || st.imagesRefused != 1 || len(st.images) != 1 {
		t.Fatalf("an image the budget cannot hold: show = %d, refused %d, kept %d", got, st.imagesRefused, len(st.images))
	}
	if b.used.Load() != int64(len(pngBytes)) || st.imageBytes != int64(len(pngBytes)) {
		t.Fatalf("budget holds %d bytes for one image of %d", b.used.Load(), len(pngBytes))
	}

	// A real run: the images are charged while it runs and given back at
	// its end.
	code := jsPixel + `for (let i = 0; i < 3; i++) show(b); "shown"`
	mustRun(t, w, code, StatusOK) // the guest's heap grows to what the code needs
	before := e.MemoryBytes()
	r := mustRun(t, w, code, StatusOK)
	if len(r.Images) != 3 || r.ImagesRefused != 0 {
		t.Fatalf("%d images, %d refused", len(r.Images), r.ImagesRefused)
	}
	if after := e.MemoryBytes(); after != before {
		t.Fatalf("the budget holds %d bytes after the run, %d before", after, before)
	}
}
