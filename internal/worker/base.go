package worker

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"execd/internal/atomicfile"
	"execd/sandbox"
)

// A base image is a guest's interpreter right after initialisation (Python:
// with the modules of Config.PythonPreload imported), made once per module
// and initParams, kept in shared memory and cached on disk. A new worker is
// a clone of it, and every other image holds only the pages that differ
// from it. See RATIONALE.md, "Why are base images deterministic?".
type base struct {
	img    *Image   // its header (module, init, size, globals, clock); no pages
	sum    [32]byte // sha256 of its memory: the identity images name as parent
	shared *sharedPages
}

// baseSlot is a base being made or made, for one initParams.
type baseSlot struct {
	done chan struct{}
	b    *base
	err  error
}

// key identifies the base images of one module, its read-only files
// (sandbox.FilesSum: the guest reads them at init) and initParams.
func (p initParams) key(module, files [32]byte) [32]byte {
	h := sha256.New()
	h.Write([]byte("execd base image\x00"))
	h.Write(binary.LittleEndian.AppendUint32(nil, imageVersion))
	h.Write(module[:])
	h.Write(files[:])
	h.Write(binary.LittleEndian.AppendUint32(nil, p.heapLimit))
	h.Write([]byte(p.preload))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// pythonPreloadCell is the cell that imports mods into a Python base image
// without binding names in __main__, then moves every object alive into
// the collector's permanent generation (gc.freeze), so that a collection
// in a clone does not write to, and so copy, the base's pages. Last, it
// resets the cell counter of the guest's driver (sandbox/python/driver.py,
// the globals of the frame that runs the cell), so that the user's first
// cell is still <cell-1> in tracebacks (TestPythonErrors).
func pythonPreloadCell(mods []string) string {
	if len(mods) == 0 {
		return ""
	}
	q := make([]string, len(mods))
	for i, m := range mods {
		q[i] = strconv.Quote(m)
	}
	return "for _m in (" + strings.Join(q, ", ") + ",):\n    __import__(_m)\ndel _m\n" +
		"__import__('gc').collect()\n__import__('gc').freeze()\n" +
		"_d = __import__('sys')._getframe(1).f_globals\n_d['_count'] = 0\n_d['_cells'].clear()\ndel _d\n"
}

// prepareBase makes g's base image for the engine's initParams: from the
// disk cache, else by initialising an interpreter. When the preload fails
// (a module that does not exist), the base is made without it; when no
// base can be made, new workers initialise from scratch.
func (e *Engine) prepareBase(g *guest) {
	if g.info.notImageable != "" {
		e.log.Warn("guest without memory images: new workers initialise from scratch",
			zap.String("language", g.lang), zap.String("reason", "its state is not only memory and globals: "+g.info.notImageable))
		return
	}
	if !g.reseed {
		e.log.Warn("guest does not export "+reseedExport+": clones of its base image share the state of its random generators",
			zap.String("language", g.lang))
	}
	p := e.initParams(g.lang)
	b, err := e.baseFor(g, p)
	if e.bg.Err() != nil {
		return // the engine closed meanwhile
	}
	if err != nil && p.preload != "" {
		e.log.Error("sandbox.python_preload failed; the base image is made without it", zap.String("language", g.lang), zap.Error(err))
		p.preload = ""
		b, err = e.baseFor(g, p)
	}
	if err != nil {
		e.log.Error("no base image: new workers initialise from scratch", zap.String("language", g.lang), zap.Error(err))
		return
	}
	g.base = b
}

// baseFor returns g's base image for p, making it once: from the disk
// cache or by initialising an interpreter. Restore uses it for images made
// under other initParams (an earlier preload list or memory limit).
func (e *Engine) baseFor(g *guest, p initParams) (*base, error) {
	files, err := sandbox.FilesSum(g.lang)
	if err != nil {
		return nil, err
	}
	k := p.key(g.sum, files)
	g.basesMu.Lock()
	s, ok := g.bases[k]
	if !ok {
		s = &baseSlot{done: make(chan struct{})}
		g.bases[k] = s
	}
	g.basesMu.Unlock()
	if ok {
		select {
		case <-s.done:
		case <-e.bg.Done():
			return nil, ErrClosed
		}
		return s.b, s.err
	}
	s.b, s.err = e.makeBase(g, p, k)
	if s.err != nil {
		// A later call may try again (the cause may pass).
		g.basesMu.Lock()
		delete(g.bases, k)
		g.basesMu.Unlock()
	}
	close(s.done)
	return s.b, s.err
}

func (e *Engine) makeBase(g *guest, p initParams, k [32]byte) (*base, error) {
	path := ""
	if e.cfg.CacheDir != "" {
		path = filepath.Join(e.cfg.CacheDir, "images", g.lang+"-"+hex.EncodeToString(k[:16])+".img")
		b, err := e.loadBase(g, p, path)
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			e.log.Warn("cached base image unusable; making it again", zap.String("path", path), zap.Error(err))
		}
	}
	start := time.Now()
	img, err := e.buildBase(g, p)
	if err != nil {
		return nil, err
	}
	b, err := newBase(img)
	if err != nil {
		return nil, err
	}
	e.log.Debug("base image made", zap.String("language", g.lang), zap.Duration("took", time.Since(start)),
		zap.Int("pages", len(img.pages)), zap.Uint64("memory", img.memSize))
	if path != "" {
		if err := writeImageFile(path, img); err != nil {
			e.log.Warn("base image not cached", zap.String("path", path), zap.Error(err))
		}
	}
	return b, nil
}

// buildBase initialises an interpreter with deterministic clocks and
// randomness, runs the preload, and images it.
func (e *Engine) buildBase(g *guest, p initParams) (*Image, error) {
	inst, err := e.initInstance(e.bg, g, WorkerOptions{}, p, true)
	if err != nil {
		return nil, err
	}
	defer inst.close()
	if p.preload != "" {
		st := &runState{}
		stop := context.AfterFunc(e.bg, func() { st.kill.Store(true) })
		env, err := inst.evalCall(withRunState(e.bg, st), p.preload)
		stop()
		if err != nil {
			return nil, fmt.Errorf("preload: %w", err)
		}
		if env.Status != "ok" {
			msg := env.Status
			if env.Error != nil {
				msg = env.Error.Type + ": " + env.Error.Message
			}
			return nil, fmt.Errorf("preload: %s", msg)
		}
	}
	return inst.snapshot(g), nil
}

// newBase puts img's memory into shared pages.
func newBase(img *Image) (*base, error) {
	if img.parent != ([32]byte{}) {
		return nil, errors.New("a base image must not have a parent")
	}
	sp, err := newSharedPages(img.memSize, func(m []byte) {
		for i, p := range img.pages { // without a parent, a page XOR zero is the page
			copy(m[int(p)*imagePage:], img.data[i*imagePage:(i+1)*imagePage])
		}
	})
	if err != nil {
		return nil, fmt.Errorf("base image memory: %w", err)
	}
	hdr := *img
	hdr.pages, hdr.data = nil, nil
	return &base{img: &hdr, sum: sha256.Sum256(sp.bytes()), shared: sp}, nil
}

// loadBase reads a cached base image made for g's module and p.
func (e *Engine) loadBase(g *guest, p initParams, path string) (*base, error) {
	f, err := atomicfile.Open(path) // a FIFO planted in the cache is refused, not waited for
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The header is judged before the pages are read, by the memory limit
	// (g, still being prepared, is checked below).
	img, err := readImage(f, maxMemorySize/imagePage, func(img *Image) error { return e.checkImage(nil, img) })
	if err != nil {
		return nil, err
	}
	if img.lang != g.lang || img.module != g.sum || img.init != p || img.parent != ([32]byte{}) {
		return nil, errors.New("made for another module or initialisation")
	}
	return newBase(img)
}

// writeImageFile writes img to path durably and atomically (a reader, or a
// crash, sees the old file or the new one, never half of one), mode 0600,
// making path's directory if needed.
func writeImageFile(path string, img *Image) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, 0o600, atomicfile.Durable, func(f *os.File) error {
		w := bufio.NewWriterSize(f, 256<<10)
		if _, err := img.WriteTo(w); err != nil {
			return err
		}
		return w.Flush()
	})
}

func (g *guest) closeBases() {
	g.basesMu.Lock()
	defer g.basesMu.Unlock()
	for _, s := range g.bases {
		select {
		case <-s.done:
			if s.b != nil {
				s.b.shared.close()
			}
		default:
		}
	}
	g.bases = map[[32]byte]*baseSlot{}
}
