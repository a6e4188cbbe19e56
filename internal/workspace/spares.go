package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"go.uber.org/zap"
)

// Spare directories: a workspace's files directory, made by its first
// change, is an empty directory made ahead of need and renamed into place,
// not a mkdir on the call's path (RATIONALE.md, "Why are files directories
// made ahead of need?"). Each Manager keeps them in ~spare.<pid>.<ns> at
// the top of the data directory, named as its live journal is; the
// compaction of that journal after the Manager is gone removes them
// (removeSpares), and a clean Close removes them itself.
const sparePrefix = "~spare."

// SpareDirs is how many empty directories a Manager keeps ready: a burst
// of that many workspaces' first writes makes no directory on their path.
const SpareDirs = 8

// spareDirs is the Manager's pool of spare directories; its zero value (no
// dir) has none, and mkdir then makes every directory itself. A goroutine
// of its own makes more as the pool is used.
type spareDirs struct {
	dir string
	log *zap.Logger

	mu       sync.Mutex
	ready    []string // names in dir, each an empty directory made by this pool
	made     int      // names given so far
	disabled bool     // a rename showed the pool cannot serve (see disable)

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// newSpareDirs makes the pool's directory, named after the Manager's
// journal (suffix "<pid>.<ns>"), and starts filling it. Without a journal
// there is nothing to remove a crashed Manager's spares by: no pool.
func newSpareDirs(dataDir, suffix string, log *zap.Logger) *spareDirs {
	s := &spareDirs{log: log}
	if suffix == "" {
		return s
	}
	dir := filepath.Join(dataDir, sparePrefix+suffix)
	if err := os.Mkdir(dir, 0o700); err != nil {
		log.Warn("spare directories: none (new workspaces make their own)", zap.Error(err))
		return s
	}
	s.dir = dir
	s.wake = make(chan struct{}, 1)
	s.stop = make(chan struct{})
	s.done = make(chan struct{})
	go s.refill()
	s.wake <- struct{}{}
	return s
}

// mkdir makes dir (mode 0700) as os.Mkdir does, with the same errors,
// by renaming a spare directory into place when one is ready. A spare
// that can no longer be renamed (removed meanwhile, or dir's parent
// missing) falls back to os.Mkdir, which says what is wrong; so does one
// that turns out not to be a directory of its own (replaced under the
// pool by a file or a link), which is removed again.
func (s *spareDirs) mkdir(dir string) error {
	if name := s.take(); name != "" {
		src := filepath.Join(s.dir, name)
		err := renameNoReplace(src, dir)
		if err == nil {
			s.used()
			if st, err := os.Lstat(dir); err == nil && st.IsDir() {
				return nil
			}
			s.log.Warn("spare directories: a spare was not a directory", zap.String("spare", name))
			if err := os.Remove(dir); err != nil {
				return err
			}
			return os.Mkdir(dir, 0o700)
		}
		switch {
		case errors.Is(err, syscall.EEXIST):
			s.put(name) // still spare
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.EEXIST}
		case errors.Is(err, syscall.EXDEV), errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ENOSYS), errors.Is(err, syscall.EOPNOTSUPP):
			s.disable(err) // another file system, or one without RENAME_NOREPLACE
		default: // dir's parent missing (a principal's first workspace), or the spare gone
			if _, err := os.Lstat(src); err == nil {
				s.put(name)
			} else {
				s.used()
			}
		}
	}
	return os.Mkdir(dir, 0o700)
}

// take hands out the oldest ready spare's name; "" when none is ready.
func (s *spareDirs) take() string {
	if s.dir == "" {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.disabled || len(s.ready) == 0 {
		return ""
	}
	name := s.ready[0] // the oldest
	s.ready = append(s.ready[:0], s.ready[1:]...)
	return name
}

// used asks for a spare in place of one that is no longer there.
func (s *spareDirs) used() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *spareDirs) put(name string) {
	s.mu.Lock()
	s.ready = append(s.ready, name)
	s.mu.Unlock()
}

// disable stops the pool for good: its directory and the data directory's
// workspaces are not on one file system, or the file system cannot rename
// without replacing, so no spare can become a workspace.
func (s *spareDirs) disable(err error) {
	s.mu.Lock()
	first := !s.disabled
	s.disabled = true
	s.mu.Unlock()
	if first {
		s.log.Warn("spare directories: off (new workspaces make their own)", zap.Error(err))
	}
}

// refill makes spares until SpareDirs are ready, whenever one is taken. A
// directory it cannot make ends the round; the next take tries again.
func (s *spareDirs) refill() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case <-s.wake:
		}
		for {
			s.mu.Lock()
			full := s.disabled || len(s.ready) >= SpareDirs
			name := strconv.Itoa(s.made)
			if !full {
				s.made++
			}
			s.mu.Unlock()
			if full {
				break
			}
			if err := os.Mkdir(filepath.Join(s.dir, name), 0o700); err != nil {
				s.log.Warn("spare directories: cannot make one", zap.Error(err))
				break
			}
			s.put(name)
			select {
			case <-s.stop:
				return
			default:
			}
		}
	}
}

// close stops the refill and removes the pool's directory with what is
// left in it. Only for a Manager's Close; only the first call acts.
func (s *spareDirs) close() {
	if s.dir == "" {
		return
	}
	s.once.Do(func() {
		close(s.stop)
		<-s.done
		s.mu.Lock()
		s.ready = nil
		s.disabled = true
		s.mu.Unlock()
		if err := os.RemoveAll(s.dir); err != nil {
			s.log.Warn("spare directories: removal", zap.Error(err))
		}
	})
}

// removeSpares removes every spare pool in dataDir whose Manager's journal
// is gone: compactJournals runs it after it has compacted (and removed)
// the journals of the Managers that are gone; a running Manager's journal
// is there, and so is one whose compaction failed: their pools stay.
func removeSpares(dataDir string, ents []os.DirEntry) {
	for _, e := range ents {
		suffix, ok := strings.CutPrefix(e.Name(), sparePrefix)
		if !ok || !e.IsDir() || exists(filepath.Join(dataDir, journalPrefix+suffix)) {
			continue
		}
		_ = os.RemoveAll(filepath.Join(dataDir, e.Name()))
	}
}
