package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"execd/internal/workspace"
)

// Registry is what Shared wraps: *workspace.Manager, which runs and keeps
// the workspaces (workspace.Executor) and can save one to disk at once.
type Registry interface {
	workspace.Executor
	Hibernate(ctx context.Context, principal, id string) error
}

// Shared serves workspaces from a data directory that several execd
// instances share (cluster.shared_storage). A workspace is used by one
// instance at a time: a call, a reset or a delete first takes the
// workspace's lock (an flock on a file under LockDir, waited for
// cancellably), and a call saves the workspace's interpreters to disk
// before it lets the lock go, so that the next call, on whichever
// instance, restores them. An interpreter that cannot be saved (it holds a
// file open) stays live here, and its lock stays taken until a later call
// here saves it: other instances' calls to that workspace wait.
// Shared implements workspace.Executor.
type Shared struct {
	reg  Registry
	dir  string
	log  *zap.Logger
	poll time.Duration

	mu   sync.Mutex
	held map[string]*heldLock
}

type heldLock struct {
	f    *os.File
	refs int  // calls of this process between lock and unlock
	keep bool // the workspace is live here: keep it locked
}

// NewShared wraps reg; locks live in lockDir (created 0700), which every
// instance must see (it is under the shared data directory).
func NewShared(reg Registry, lockDir string, log *zap.Logger) (*Shared, error) {
	if err := os.MkdirAll(lockDir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: lock directory: %w", err)
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Shared{reg: reg, dir: lockDir, log: log, poll: 5 * time.Millisecond, held: map[string]*heldLock{}}, nil
}

// lockName is the lock file of (principal, id): a digest, so that any
// principal and id make a safe, fixed-length name.
func lockName(principal, id string) string {
	sum := sha256.Sum256([]byte(principal + "\x00" + id))
	return hex.EncodeToString(sum[:20]) + ".lock"
}

// lock takes the workspace's lock, waiting while another instance holds
// it, until ctx ends. The first wait is reported through sink.
func (s *Shared) lock(ctx context.Context, principal, id string, sink interface {
	Progress(done, total float64, message string)
}) (string, error) {
	name := lockName(principal, id)
	s.mu.Lock()
	if h := s.held[name]; h != nil {
		h.refs++
		s.mu.Unlock()
		return name, nil
	}
	s.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(s.dir, name), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return "", &workspace.Error{Code: workspace.StartFailed, Msg: "could not open the workspace's lock on the shared storage", Err: err}
	}
	wait, told := s.poll, false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return "", &workspace.Error{Code: workspace.StartFailed, Msg: "could not lock the workspace on the shared storage", Err: err}
		}
		if !told && sink != nil {
			sink.Progress(0, 0, fmt.Sprintf("queued: workspace %s is in use on another execd instance", id))
			told = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return "", ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 200*time.Millisecond)
	}
	// No entry can have appeared meanwhile: an entry exists only while its
	// file holds the flock, which excludes this one (flock locks belong to
	// open files, not processes).
	s.mu.Lock()
	s.held[name] = &heldLock{f: f, refs: 1}
	s.mu.Unlock()
	return name, nil
}

// unlock ends one call's hold; the lock goes when no call holds it and
// the workspace is not live here.
func (s *Shared) unlock(name string, keep bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[name]
	if h == nil {
		return
	}
	h.refs--
	h.keep = keep
	if h.refs == 0 && !h.keep {
		delete(s.held, name)
		h.f.Close() // releases the flock
	}
}

// save hibernates the workspace so that another instance can restore it;
// it reports whether the workspace stays live here.
func (s *Shared) save(principal, id string) (live bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := s.reg.Hibernate(ctx, principal, id)
	switch {
	case err == nil, errors.Is(err, workspace.ErrNotFound):
		return false
	case errors.Is(err, &workspace.Error{Code: workspace.NotSaveable}):
		s.log.Info("workspace stays live on this instance (it cannot be saved now)", zap.String("workspace", id), zap.Error(err))
	default:
		s.log.Warn("saving the workspace for the other instances failed; it stays live here", zap.String("workspace", id), zap.Error(err))
	}
	return true
}

// Run implements workspace.Executor.
func (s *Shared) Run(ctx context.Context, req workspace.Request) (workspace.Outcome, error) {
	if req.Workspace == "" {
		// A new id: no other instance can know it before this answer.
		out, err := s.reg.Run(ctx, req)
		if err == nil {
			if name, lerr := s.lock(context.Background(), req.Principal, out.Workspace, nil); lerr == nil {
				s.unlock(name, s.save(req.Principal, out.Workspace))
			}
		}
		return out, err
	}
	if workspace.ValidateID(req.Workspace) != nil {
		return s.reg.Run(ctx, req) // refused without touching anything
	}
	name, err := s.lock(ctx, req.Principal, req.Workspace, req.Sink)
	if err != nil {
		return workspace.Outcome{Workspace: req.Workspace}, err
	}
	out, err := s.reg.Run(ctx, req)
	s.unlock(name, s.save(req.Principal, req.Workspace))
	return out, err
}

// NewID implements workspace.Executor.
func (s *Shared) NewID() string { return s.reg.NewID() }

// ListPage implements workspace.Executor.
func (s *Shared) ListPage(principal string, from *workspace.ListFrom, limit int) ([]workspace.Info, bool) {
	return s.reg.ListPage(principal, from, limit)
}

// locked runs op holding the workspace's lock (an invalid id is op's to
// refuse, without a lock).
func (s *Shared) locked(ctx context.Context, principal, id string, op func() error) error {
	if workspace.ValidateID(id) != nil {
		return op()
	}
	name, err := s.lock(ctx, principal, id, nil)
	if err != nil {
		return err
	}
	defer s.unlock(name, false)
	return op()
}

// Reset implements workspace.Executor.
func (s *Shared) Reset(ctx context.Context, principal, id string, files bool) error {
	return s.locked(ctx, principal, id, func() error { return s.reg.Reset(ctx, principal, id, files) })
}

// Delete implements workspace.Executor.
func (s *Shared) Delete(ctx context.Context, principal, id string) error {
	return s.locked(ctx, principal, id, func() error { return s.reg.Delete(ctx, principal, id) })
}

// Checkpoint implements workspace.Executor.
func (s *Shared) Checkpoint(ctx context.Context, principal, id, name string) (cp string, err error) {
	err = s.locked(ctx, principal, id, func() error { cp, err = s.reg.Checkpoint(ctx, principal, id, name); return err })
	return cp, err
}

// RestoreCheckpoint implements workspace.Executor.
func (s *Shared) RestoreCheckpoint(ctx context.Context, principal, id, checkpoint string) error {
	return s.locked(ctx, principal, id, func() error { return s.reg.RestoreCheckpoint(ctx, principal, id, checkpoint) })
}

// Fork implements workspace.Executor: the source's lock is held; the new
// workspace exists only once the fork is done, saved on the shared disk.
func (s *Shared) Fork(ctx context.Context, principal, id, newID string) (fork string, err error) {
	err = s.locked(ctx, principal, id, func() error { fork, err = s.reg.Fork(ctx, principal, id, newID); return err })
	return fork, err
}

// ReadFile implements workspace.Executor.
func (s *Shared) ReadFile(ctx context.Context, principal, id, path string, offset, length int64) (d workspace.FileData, err error) {
	err = s.locked(ctx, principal, id, func() error { d, err = s.reg.ReadFile(ctx, principal, id, path, offset, length); return err })
	return d, err
}

// WriteFile implements workspace.Executor.
func (s *Shared) WriteFile(ctx context.Context, principal, id, path string, data []byte) (f workspace.FileInfo, err error) {
	err = s.locked(ctx, principal, id, func() error { f, err = s.reg.WriteFile(ctx, principal, id, path, data); return err })
	return f, err
}

// InstallPackages implements workspace.Installer when the registry does
// (a *workspace.Manager does), holding the workspace's lock.
func (s *Shared) InstallPackages(ctx context.Context, principal, id, language string, specs []string) (in workspace.Installed, err error) {
	inst, ok := s.reg.(workspace.Installer)
	if !ok {
		return in, &workspace.Error{Code: workspace.PackagesFailed, Msg: "packages are not available on this instance"}
	}
	err = s.locked(ctx, principal, id, func() error { in, err = inst.InstallPackages(ctx, principal, id, language, specs); return err })
	return in, err
}

// RecentFiles implements workspace.Executor: the files changed through this
// instance.
func (s *Shared) RecentFiles(principal string) []workspace.FileInfo {
	return s.reg.RecentFiles(principal)
}
