package worker

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"
)

func TestPageRuns(t *testing.T) {
	const (
		base = pmPresent | pmFile // an unwritten base page
		anon = pmPresent          // a private copy, or the zero page
		swap = pmSwapped
	)
	entries := []uint64{base, base, anon, swap, base, base, base, base | 0x1234, base, swap | pmFile, base, anon, anon, 0, pmFile}
	var runs pageRuns
	runs.add(0, entries[:6])
	runs.add(6, entries[6:]) // the run from page 4 goes on across the two reads
	wantRead := []pageRun{{0, 2}, {4, 5}, {10, 1}}
	wantWritten := []pageRun{{2, 1}, {11, 2}}
	if !slices.Equal(runs.read, wantRead) || !slices.Equal(runs.written, wantWritten) {
		t.Fatalf("read runs %v, written %v; want %v, %v", runs.read, runs.written, wantRead, wantWritten)
	}
}

// pageKinds counts b's pages that pagemap shows as present file pages
// (base pages only read) and as present private ones (written: mapped
// exclusively, which the shared zero page a read of untouched memory maps
// is not), on Linux; elsewhere it returns -1, -1.
func pageKinds(t *testing.T, b []byte) (file, private int) {
	t.Helper()
	if runtime.GOOS != "linux" || len(b) == 0 {
		return -1, -1
	}
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ps := os.Getpagesize()
	buf := make([]byte, 8*(len(b)/ps))
	if _, err := f.ReadAt(buf, int64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))/uintptr(ps)*8)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(buf); i += 8 {
		e := binary.NativeEndian.Uint64(buf[i:])
		switch {
		case e&pmPresent == 0:
		case e&pmFile != 0:
			file++
		case e&(1<<56) != 0: // exclusively mapped
			private++
		}
	}
	return file, private
}

// TestTrimKeepsWrittenPages maps a base of 32 pages under a memory of 64,
// writes some pages inside the base and beyond it, reads the rest, and
// trims: every byte reads the same after, the written pages stay resident
// and the read ones are no longer mapped.
func TestTrimKeepsWrittenPages(t *testing.T) {
	ps := os.Getpagesize()
	baseLen := 32 * ps
	sp, err := newSharedPages(uint64(baseLen), func(b []byte) {
		for i := range b {
			b[i] = byte(i*7 + i/ps)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.close()
	size := uint64(64 * ps)
	a := &memoryAllocator{b: &budget{limit: 1 << 30}}
	m := a.Allocate(size, size).(*linearMemory)
	if m.Reallocate(size) == nil {
		t.Fatal("no memory")
	}
	defer m.Free()
	if err := m.mapShared(sp, uint64(baseLen)); err != nil {
		t.Fatal(err)
	}
	mem := m.bytes()
	// Read every page: the base's are mapped, the rest the zero page.
	sha256.Sum256(mem)
	for _, p := range []int{0, 3, 10, 11, 12, 31, 32, 40} { // written: 6 in the base, 2 beyond
		for i := p * ps; i < (p+1)*ps; i += 64 {
			mem[i] ^= 0x5a
		}
	}
	file, private := pageKinds(t, mem)
	before := sha256.Sum256(mem)

	freed, err := m.trimBase(uint64(baseLen))
	if err != nil {
		t.Fatal(err)
	}
	file2, private2 := pageKinds(t, mem) // before the hash reads every page again
	if after := sha256.Sum256(mem); after != before {
		t.Fatal("the memory changed across the trim")
	}
	if runtime.GOOS != "linux" {
		if freed != 0 {
			t.Fatalf("freed %d outside Linux", freed)
		}
		return
	}
	if file != 32-6 || private != 8 {
		t.Fatalf("before the trim: %d file pages, %d private, want 26 and 8", file, private)
	}
	if freed != int64(file*ps) {
		t.Fatalf("freed %d bytes, want %d (the base pages only read)", freed, file*ps)
	}
	if file2 != 0 || private2 != private {
		t.Fatalf("after the trim: %d file pages, %d private, want 0 and %d", file2, private2, private)
	}
	// The unwritten base pages read the base again.
	if !slices.Equal(mem[ps:2*ps], sp.bytes()[ps:2*ps]) {
		t.Fatal("page 1 does not read the base after the trim")
	}
}

// trimCase is a guest program for TestTrimKeepsGuestState: setup leaves
// variables and a large buffer of pseudo-random bytes (beyond the base
// image's memory) with its checksum; check reads them back.
type trimCase struct{ lang, setup, check, want string }

var trimCases = []trimCase{
	{"python", `import hashlib, random
big = bytearray(random.Random(7).randbytes(8 << 20))
digest = hashlib.sha256(big).hexdigest()
counter = 41
names = {"a": [1, 2, 3]}`,
		`counter += 1
(counter, names["a"], len(big), hashlib.sha256(big).hexdigest() == digest)`,
		"(42, [1, 2, 3], 8388608, True)"},
	{"javascript", `let big = new Uint8Array(1 << 20), seed = 7
for (let i = 0; i < big.length; i++) { seed = (Math.imul(seed, 1103515245) + 12345) >>> 0; big[i] = seed >>> 24 }
const fold = b => { let h = 0; for (let i = 0; i < b.length; i++) h = (Math.imul(h, 31) + b[i]) >>> 0; return h }
let digest = fold(big), counter = 41, names = {a: [1, 2, 3]}`,
		`counter += 1; JSON.stringify([counter, names.a, big.length, fold(big) === digest])`,
		`"[42,[1,2,3],1048576,true]"`},
}

// TestTrimKeepsGuestState trims a real interpreter that wrote variables and
// a large buffer: its memory hashes the same before and after, its base
// pages are no longer mapped while its private ones are, the next call
// finds every variable and the buffer's checksum, and a snapshot taken
// after the trim restores the same state.
func TestTrimKeepsGuestState(t *testing.T) {
	e := testEngine(t, true)
	for _, c := range trimCases {
		t.Run(c.lang, func(t *testing.T) {
			if !contains(e.Languages(), c.lang) {
				t.Fatalf("%s guest not built: run make guests", c.lang)
			}
			ctx := context.Background()
			w, err := e.NewWorker(ctx, c.lang, WorkerOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if r := w.Run(ctx, c.setup, RunOptions{}); r.Status != StatusOK {
				t.Fatal(describe(r))
			}
			mem := w.inst.mem.bytes()
			if uint64(len(mem)) <= w.inst.parent.img.memSize {
				t.Fatalf("the buffer did not grow the memory beyond the base (%d bytes)", len(mem))
			}
			// (Hashing reads every page: the counts come first.)
			file, private := pageKinds(t, mem)
			before := sha256.Sum256(mem)

			freed := w.Trim()
			file2, private2 := pageKinds(t, mem)
			if after := sha256.Sum256(w.inst.mem.bytes()); after != before {
				t.Fatal("the memory changed across the trim")
			}
			if runtime.GOOS == "linux" {
				t.Logf("trim freed %d KiB; file pages %d -> %d, private %d -> %d", freed>>10, file, file2, private, private2)
				if freed <= 0 || file2 != 0 || private2 != private {
					t.Fatalf("freed %d bytes; file pages %d -> %d, private %d -> %d", freed, file, file2, private, private2)
				}
			}
			if again := w.Trim(); again != 0 {
				t.Fatalf("a second trim with no call between freed %d bytes", again)
			}
			if r := w.Run(ctx, c.check, RunOptions{}); r.Status != StatusOK || value(r) != c.want {
				t.Fatalf("after the trim: %s, want %s", describe(r), c.want)
			}

			w.Trim()
			img, err := w.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			w2, err := e.Restore(ctx, img, WorkerOptions{}, false)
			if err != nil {
				t.Fatal(err)
			}
			defer w2.Close()
			want := map[string]string{"python": "(43, [1, 2, 3], 8388608, True)", "javascript": `"[43,[1,2,3],1048576,true]"`}[c.lang]
			if r := w2.Run(ctx, c.check, RunOptions{}); r.Status != StatusOK || value(r) != want {
				t.Fatalf("restored from a snapshot after the trim: %s, want %s", describe(r), want)
			}
		})
	}
}

// TestTrimConcurrent trims a worker over and over while it runs calls, and
// closes it during the trims: no call sees its state change.
func TestTrimConcurrent(t *testing.T) {
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	ctx := context.Background()
	if r := w.Run(ctx, "var n = 0; var s = 'x'.repeat(100000)", RunOptions{}); r.Status != StatusOK {
		t.Fatal(describe(r))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				w.Trim()
				runtime.Gosched()
			}
		}
	}()
	for i := 1; i <= 50; i++ {
		r := w.Run(ctx, "n++; s.length + n", RunOptions{})
		if want := strconv.Itoa(100000 + i); r.Status != StatusOK || value(r) != want {
			t.Fatalf("call %d: %s, want %s", i, describe(r), want)
		}
	}
	close(stop)
	wg.Wait()
	w.Close()
	if n := w.Trim(); n != 0 {
		t.Fatalf("a closed worker trimmed %d bytes", n)
	}
}

// TestTrimDoesNotWaitForRun: a Trim while a call spins returns 0 at once
// (a janitor must never wait minutes for a call), and the call goes on.
func TestTrimDoesNotWaitForRun(t *testing.T) {
	w := newWorker(t, testEngine(t, true), WorkerOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	spinning := make(chan struct{})
	rec := &progressRec{fn: func() { close(spinning) }}
	done := make(chan Result, 1)
	go func() { done <- w.Run(ctx, "var k = 7; progress(1); for (;;) {}", RunOptions{Sink: rec}) }()
	<-spinning
	if n := w.Trim(); n != 0 {
		t.Fatalf("a Trim during a call freed %d bytes", n)
	}
	cancel()
	if r := <-done; r.Status != StatusInterrupted || r.Discontinuous() {
		t.Fatalf("the call after the Trim: %s", describe(r))
	}
	if r := w.Run(context.Background(), "k", RunOptions{}); value(r) != "7" {
		t.Fatalf("after: %s", describe(r))
	}
	if n := w.Trim(); n <= 0 && runtime.GOOS == "linux" {
		t.Fatalf("the idle worker trimmed %d bytes", n)
	}
}

// BenchmarkPythonTrim: the cost of one Trim of an idle Python worker, the
// first one after its first cell (first-trim, the janitor's case) and one
// after a 1+1 (re-trim); and what a trim costs the next call: next-call
// alternates a 1+1 on an untrimmed worker and on one just trimmed, and
// reports the medians and their ratio.
func BenchmarkPythonTrim(b *testing.B) {
	e := pyBenchEngine(b, true)
	ctx := context.Background()
	newIdle := func(b *testing.B) *Worker {
		w, err := e.NewWorker(ctx, "python", WorkerOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if r := w.Run(ctx, "x = [i for i in range(1000)]", RunOptions{}); r.Status != StatusOK {
			b.Fatal(describe(r))
		}
		return w
	}
	call := func(b *testing.B, w *Worker) time.Duration {
		t := time.Now()
		if r := w.Run(ctx, "1+1", RunOptions{}); r.Status != StatusOK {
			b.Fatal(describe(r))
		}
		return time.Since(t)
	}
	med := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Nanoseconds()) / 1000
	}
	b.Run("first-trim", func(b *testing.B) {
		var ds []time.Duration
		var freed int64
		for b.Loop() {
			w := newIdle(b)
			t := time.Now()
			freed += w.Trim()
			ds = append(ds, time.Since(t))
			w.Close()
		}
		b.ReportMetric(med(ds), "µs/trim")
		b.ReportMetric(float64(freed)/float64(b.N)/(1<<20), "MiB-freed/trim")
	})
	b.Run("re-trim", func(b *testing.B) {
		w := newIdle(b)
		defer w.Close()
		var ds []time.Duration
		var freed int64
		for b.Loop() {
			call(b, w)
			t := time.Now()
			freed += w.Trim()
			ds = append(ds, time.Since(t))
		}
		b.ReportMetric(med(ds), "µs/trim")
		b.ReportMetric(float64(freed)/float64(b.N)/(1<<20), "MiB-freed/trim")
	})
	b.Run("next-call", func(b *testing.B) {
		plain, trimmed := newIdle(b), newIdle(b)
		defer plain.Close()
		defer trimmed.Close()
		var dp, dt []time.Duration
		for b.Loop() {
			dp = append(dp, call(b, plain))
			trimmed.Trim()
			dt = append(dt, call(b, trimmed))
		}
		p, t := med(dp), med(dt)
		b.ReportMetric(p, "µs/call-untrimmed")
		b.ReportMetric(t, "µs/call-after-trim")
		b.ReportMetric(t/p, "ratio")
	})
}
