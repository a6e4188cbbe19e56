package workspace

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tetratelabs/wazero/experimental/sys"
	"go.uber.org/zap"

	"execd/internal/guestfs"
	"execd/internal/worker"
)

// fakeFactory makes fakeRunners, which understand a tiny language:
//
//	set K V    remember K=V          get K      value of K
//	write F S  write S to file F     read F     content of file F
//	open F     keep F open (the runner then cannot be saved)   close
//	utimefd F  set F's times through a handle opened for reading
//	rand       the next number of the runner's generator
//	wait       block until released
//	ask P      the answer of the run's Input to the prompt P
//	kill       end as a hard kill would (timeout, instance discarded)
//	crash      end as a crash would (error, instance discarded)
//	fresh      report a run on a replaced instance
//
// Its images are the variables and the generator's state in a small
// checksummed text format; build tells images of another "guest build"
// apart (ErrImageStale).
type fakeFactory struct {
	langs []string
	build string

	mu        sync.Mutex
	live      int
	maxLive   int
	made      int
	restored  int
	clones    int
	order     []string // codes in the order runs started
	newErr    error
	compiling map[string]bool
	maxMem    int // > 0: NewRunner and Restore fail with ErrMemoryBudget at this many live runners
	trims     int // Trims that freed something

	running    atomic.Int32 // runs in flight across all runners
	maxRunning atomic.Int32

	started chan string   // receives "wait" runs as they start
	release chan struct{} // one token lets one "wait" run finish
}

func newFakeFactory(langs ...string) *fakeFactory {
	if len(langs) == 0 {
		langs = []string{"javascript"}
	}
	return &fakeFactory{langs: langs, build: "1", started: make(chan string, 100), release: make(chan struct{}, 100)}
}

func (f *fakeFactory) Languages() []string { return f.langs }

func (f *fakeFactory) Compiling(lang string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.compiling[lang]
}

func (f *fakeFactory) NewRunner(ctx context.Context, lang string, disk Disk) (Runner, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.newErr != nil {
		return nil, f.newErr
	}
	if f.maxMem > 0 && f.live >= f.maxMem {
		return nil, fmt.Errorf("%w: %d live", ErrMemoryBudget, f.live)
	}
	f.made++
	return f.newLocked(lang, disk, map[string]string{}, uint64(f.made)*7919), nil
}

// newLocked makes a runner that sees disk as a guest does: the sys.FS the
// engine mounts.
func (f *fakeFactory) newLocked(lang string, disk Disk, vars map[string]string, seed uint64) *fakeRunner {
	f.live++
	f.maxLive = max(f.maxLive, f.live)
	return &fakeRunner{f: f, lang: lang, fsys: disk.(*guestfs.FS), vars: vars, seed: seed}
}

func (f *fakeFactory) liveCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live
}

// fakeImage is a fakeRunner's saved state.
type fakeImage struct {
	Build string            `json:"build"`
	Lang  string            `json:"lang"`
	Vars  map[string]string `json:"vars"`
	Seed  uint64            `json:"seed"`
}

func (img *fakeImage) Language() string { return img.Lang }

const fakeMagic = "FAKEIMG1"

func (img *fakeImage) WriteTo(w io.Writer) (int64, error) {
	b, _ := json.Marshal(img)
	n, err := fmt.Fprintf(w, "%s %08x %s\n", fakeMagic, crc32.ChecksumIEEE(b), b)
	return int64(n), err
}

func (f *fakeFactory) ReadImage(r io.Reader) (Image, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrImageCorrupt, err)
	}
	parts := strings.SplitN(strings.TrimSuffix(line, "\n"), " ", 3)
	if len(parts) != 3 || parts[0] != fakeMagic {
		return nil, fmt.Errorf("%w: bad header", ErrImageCorrupt)
	}
	if sum, err := strconv.ParseUint(parts[1], 16, 32); err != nil || uint32(sum) != crc32.ChecksumIEEE([]byte(parts[2])) {
		return nil, fmt.Errorf("%w: checksum", ErrImageCorrupt)
	}
	img := &fakeImage{}
	if err := json.Unmarshal([]byte(parts[2]), img); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrImageCorrupt, err)
	}
	return img, nil
}

func (f *fakeFactory) Restore(ctx context.Context, i Image, disk Disk, clone bool) (Runner, error) {
	img := i.(*fakeImage)
	f.mu.Lock()
	defer f.mu.Unlock()
	if img.Build != f.build {
		return nil, fmt.Errorf("%w: build %s, running %s", ErrImageStale, img.Build, f.build)
	}
	if f.maxMem > 0 && f.live >= f.maxMem {
		return nil, fmt.Errorf("%w: %d live", ErrMemoryBudget, f.live)
	}
	f.restored++
	seed := img.Seed
	if clone {
		f.clones++
		seed = seed*31 + uint64(f.restored)*104729
	}
	vars := map[string]string{}
	for k, v := range img.Vars {
		vars[k] = v
	}
	return f.newLocked(img.Lang, disk, vars, seed), nil
}

type fakeRunner struct {
	f      *fakeFactory
	lang   string
	fsys   sys.FS
	vars   map[string]string
	seed   uint64
	open   sys.File
	inRun  atomic.Int32
	closed atomic.Bool
	used   atomic.Bool // ran or was snapshotted since the last Trim
}

func (r *fakeRunner) Run(ctx context.Context, code string, opts worker.RunOptions) worker.Result {
	if r.closed.Load() {
		return worker.Result{Status: worker.StatusError, Stderr: "run on a closed runner"}
	}
	if r.inRun.Add(1) != 1 {
		panic("concurrent Run on one runner")
	}
	defer r.inRun.Add(-1)
	r.used.Store(true)
	n := r.f.running.Add(1)
	defer r.f.running.Add(-1)
	for {
		m := r.f.maxRunning.Load()
		if n <= m || r.f.maxRunning.CompareAndSwap(m, n) {
			break
		}
	}
	r.f.mu.Lock()
	r.f.order = append(r.f.order, code)
	r.f.mu.Unlock()

	res := worker.Result{Status: worker.StatusOK}
	set := func(v string) { res.Value = &v }
	fail := func(msg string) { res.Status, res.Stderr = worker.StatusError, msg }
	f := strings.Fields(code)
	switch {
	case strings.HasPrefix(code, "packages "): // the run's PackageSource, asked as a guest would
		if opts.Packages == nil {
			set("none")
		} else {
			set(string(opts.Packages.Packages(ctx, []byte(strings.TrimPrefix(code, "packages ")))))
		}
	case len(f) == 3 && f[0] == "set":
		r.vars[f[1]] = f[2]
	case len(f) == 2 && f[0] == "get":
		if v, ok := r.vars[f[1]]; ok {
			set(v)
		} else {
			res.Status = worker.StatusError
			res.Error = &worker.GuestError{Type: "ReferenceError", Message: f[1] + " is not defined"}
		}
	case len(f) == 3 && f[0] == "write":
		file, errno := r.fsys.OpenFile(f[1], sys.O_RDWR|sys.O_CREAT|sys.O_TRUNC, 0o600)
		if errno == 0 {
			_, errno = file.Write([]byte(f[2]))
			file.Close()
		}
		if errno != 0 {
			fail(errno.Error())
		}
	case len(f) == 3 && f[0] == "ln": // ln target link
		if errno := r.fsys.Symlink(f[1], f[2]); errno != 0 {
			fail(errno.Error())
		}
	case len(f) == 3 && f[0] == "overwrite": // overwrite src dst: dst gets src's bytes in place, and its times back
		st, errno := r.fsys.Stat(f[2])
		var data []byte
		if errno == 0 {
			var src sys.File
			if src, errno = r.fsys.OpenFile(f[1], sys.O_RDONLY, 0); errno == 0 {
				buf := make([]byte, 1<<20)
				n, _ := src.Read(buf)
				data = buf[:n]
				src.Close()
			}
		}
		if errno == 0 {
			var dst sys.File
			if dst, errno = r.fsys.OpenFile(f[2], sys.O_WRONLY|sys.O_TRUNC, 0); errno == 0 {
				_, errno = dst.Write(data)
				dst.Close()
			}
		}
		if errno == 0 {
			errno = r.fsys.Utimens(f[2], st.Atim, st.Mtim)
		}
		if errno != 0 {
			fail(errno.Error())
		}
	case len(f) == 2 && f[0] == "rm":
		if errno := r.fsys.Unlink(f[1]); errno != 0 {
			fail(errno.Error())
		}
	case len(f) == 3 && f[0] == "append":
		file, errno := r.fsys.OpenFile(f[1], sys.O_WRONLY|sys.O_APPEND, 0)
		if errno == 0 {
			_, errno = file.Write([]byte(f[2]))
			file.Close()
		}
		if errno != 0 {
			fail(errno.Error())
		}
	case len(f) == 2 && f[0] == "read":
		file, errno := r.fsys.OpenFile(f[1], sys.O_RDONLY, 0)
		if errno != 0 {
			fail(errno.Error())
			break
		}
		buf := make([]byte, 1<<20)
		k, _ := file.Read(buf)
		file.Close()
		set(string(buf[:k]))
	case len(f) == 2 && f[0] == "utimefd": // os.utime(fd, (1e9, 1e9)) on a file opened for reading
		file, errno := r.fsys.OpenFile(f[1], sys.O_RDONLY, 0)
		if errno == 0 {
			errno = file.Utimens(1e18, 1e18)
			file.Close()
		}
		if errno != 0 {
			fail(errno.Error())
		}
	case len(f) == 2 && f[0] == "open":
		file, errno := r.fsys.OpenFile(f[1], sys.O_RDWR|sys.O_CREAT, 0o600)
		if errno != 0 {
			fail(errno.Error())
		}
		r.open = file
	case code == "close":
		if r.open != nil {
			r.open.Close()
			r.open = nil
		}
	case code == "rand":
		r.seed = r.seed*6364136223846793005 + 1442695040888963407
		set(strconv.FormatUint(r.seed>>33, 10))
	case len(f) == 2 && f[0] == "ask":
		if opts.Input == nil {
			fail("nobody can answer")
			break
		}
		ans := opts.Input.Input(ctx, f[1])
		if ans.Status != worker.InputOK {
			fail(fmt.Sprintf("input status %d", ans.Status))
			break
		}
		set(ans.Text)
	case len(f) >= 1 && f[0] == "wait":
		r.f.started <- code
		select {
		case <-r.f.release:
		case <-ctx.Done():
			res.Status = worker.StatusInterrupted
		}
	case code == "kill":
		res.Status = worker.StatusTimeout
		res.Discarded = worker.DiscardKilled
	case code == "crash":
		res.Status = worker.StatusError
		res.Error = &worker.GuestError{Type: "SandboxCrash", Message: "crashed"}
		res.Discarded = worker.DiscardCrashed
	case code == "fresh":
		res.FreshInstance = true
	}
	return res
}

func (r *fakeRunner) Snapshot(ctx context.Context) (Image, error) {
	if r.closed.Load() {
		return nil, errors.New("snapshot of a closed runner")
	}
	if r.open != nil {
		return nil, fmt.Errorf("%w: a file is open", ErrNotSaveable)
	}
	r.used.Store(true)
	vars := map[string]string{}
	for k, v := range r.vars {
		vars[k] = v
	}
	r.f.mu.Lock()
	build := r.f.build
	r.f.mu.Unlock()
	return &fakeImage{Build: build, Lang: r.lang, Vars: vars, Seed: r.seed}, nil
}

func (r *fakeRunner) MemoryBytes() int64 { return 1 << 20 }

// Trim frees fakeTrimBytes when the runner ran or was snapshotted since
// its last Trim, as a worker does, and counts it in the factory's trims;
// like a worker it leaves a runner in a Run, or closed, alone.
func (r *fakeRunner) Trim() int64 {
	if r.closed.Load() || r.inRun.Load() != 0 || !r.used.Swap(false) {
		return 0
	}
	r.f.mu.Lock()
	r.f.trims++
	r.f.mu.Unlock()
	return fakeTrimBytes
}

const fakeTrimBytes = 3 << 20

var _ Trimmer = (*fakeRunner)(nil)

func (r *fakeRunner) Close() error {
	if r.closed.Swap(true) {
		return errors.New("closed twice")
	}
	if r.open != nil {
		r.open.Close()
	}
	r.f.mu.Lock()
	r.f.live--
	r.f.mu.Unlock()
	return nil
}

// sink records progress messages and signals each one.
type sink struct {
	mu   sync.Mutex
	msgs []string
	ch   chan string
}

func newSink() *sink { return &sink{ch: make(chan string, 10)} }

func (s *sink) Progress(_, _ float64, msg string) {
	s.mu.Lock()
	s.msgs = append(s.msgs, msg)
	s.mu.Unlock()
	select {
	case s.ch <- msg:
	default:
	}
}

func (s *sink) messages() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.msgs...)
}

func newTestManager(t *testing.T, cfg Config, f Factory) *Manager {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	m, err := NewManager(cfg, f, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		if t.Failed() {
			cancel() // a failed test may have left a turn held: do not wait for it
		}
		m.Close(ctx)
		cancel()
	})
	return m
}

func run(t *testing.T, m *Manager, principal, id, code string) Outcome {
	t.Helper()
	return runLang(t, m, principal, id, "javascript", code)
}

func runLang(t *testing.T, m *Manager, principal, id, lang, code string) Outcome {
	t.Helper()
	out, err := m.Run(context.Background(), Request{Principal: principal, Workspace: id, Language: lang, Code: code})
	if err != nil {
		t.Fatalf("Run(%q, %q): %v", id, code, err)
	}
	return out
}

func value(r Result) string {
	if r.Value == nil {
		return "<nil>"
	}
	return *r.Value
}
