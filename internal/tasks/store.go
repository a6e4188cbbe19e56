// Package tasks keeps the records of MCP tasks: calls that answered with a
// task handle and went on running, whose status and final result a client
// fetches later (tasks/get). A record is bound to the principal that made
// it: another principal's lookup of its id finds nothing, exactly as for an
// id that was never minted. Records live in memory and, with a directory,
// on disk as well (disk.go), written before a new task is announced and at
// every change of status, so that a finished task's result outlives a
// restart and a task that was running when execd stopped says so.
//
// The store knows nothing of MCP's wire shapes: results and errors are
// kept as the JSON the front end gives it, and what a record means to the
// client is worded there (internal/frontend/tasks.go).
package tasks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Status is a task's status, as MCP names it.
type Status string

const (
	Working       Status = "working"
	InputRequired Status = "input_required"
	Completed     Status = "completed"
	Failed        Status = "failed"
	Cancelled     Status = "cancelled"
)

// Statuses lists every status, in lifecycle order.
var Statuses = []Status{Working, InputRequired, Completed, Failed, Cancelled}

// Terminal reports whether s is final: a record in it never changes again.
func (s Status) Terminal() bool { return s == Completed || s == Failed || s == Cancelled }

// Record is one task.
type Record struct {
	ID        string `json:"id"`
	Principal string `json:"principal"`
	// Version is the protocol version of the call that made the task: it
	// says in which shape the task is written on the wire.
	Version string `json:"version"`
	// Tool is the tool the call ran; Tags what it said it acted on (the
	// workspace), for the operator's view.
	Tool string            `json:"tool,omitempty"`
	Tags map[string]string `json:"tags,omitempty"`

	Status  Status    `json:"status"`
	Message string    `json:"message,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// TTL is how long the record is kept once the task has finished.
	TTL time.Duration `json:"ttl"`

	// Inputs are the input requests the task waits on (input_required), as
	// the front end wrote them.
	Inputs json.RawMessage `json:"inputs,omitempty"`
	// Result is the call's result, Error its JSON-RPC error: what the call
	// would have answered had it not become a task.
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
	// Stopped: the task was still running when the execd that ran it
	// stopped without finishing it (found so when the store opened); it is
	// Failed, and its run is lost.
	Stopped bool `json:"stopped,omitempty"`
}

// Expires is when a finished record may be dropped; zero while the task
// runs.
func (r *Record) Expires() time.Time {
	if !r.Status.Terminal() {
		return time.Time{}
	}
	return r.Updated.Add(r.TTL)
}

// Errors of the store.
var (
	// ErrNotFound: no task of this principal has the id (never minted,
	// another principal's, or expired).
	ErrNotFound = errors.New("task not found")
	// ErrFinished: the task is in a terminal status, which never changes.
	ErrFinished = errors.New("task already finished")
	// ErrFull: the principal has Config.MaxPerPrincipal tasks, none of
	// them finished, so none could be dropped to make room.
	ErrFull = errors.New("too many tasks")
	// ErrBadCursor: a List cursor that names no task of the principal.
	ErrBadCursor = errors.New("unknown cursor")
)

// Config configures a Store. Each field says what its zero value means.
type Config struct {
	// Dir is the data directory: records go to
	// Dir/<principal dir>/~tasks/<id>.json. Empty means memory only.
	Dir string
	// PrincipalDir names a principal's directory under Dir. Nil means the
	// principal itself when it is a plain visible name, otherwise "~" and
	// the hex of its bytes (or of their SHA-256 when long).
	PrincipalDir func(principal string) string
	// TTL is how long a finished record is kept, and the longest a caller
	// may ask for. Zero means an hour.
	TTL time.Duration
	// MaxPerPrincipal caps the records of one principal. Zero means 64.
	MaxPerPrincipal int
	// NewID mints task ids; they must be unguessable, and 1-64 characters
	// of A-Z a-z 0-9 and '-'. Nil means 128 random bits in hex.
	NewID func() string
	// Logger gets the store's disk errors. Nil means none.
	Logger *zap.Logger
}

// Store holds the records. Its methods are safe for concurrent use.
type Store struct {
	cfg Config
	log *zap.Logger

	mu    sync.Mutex
	byKey map[key]*entry
	count map[string]int // records per principal

	stop     chan struct{}
	stopOnce sync.Once
	swept    chan struct{} // closed when the sweeper has ended
}

type key struct{ principal, id string }

// entry is a record and the channel closed when it reaches a terminal
// status (Wait).
type entry struct {
	rec  Record
	done chan struct{}
	// wmu orders the entry's disk writes: each writes the record as it is
	// when the write begins, so the last write leaves the newest state.
	wmu     sync.Mutex
	dropped bool // guarded by Store.mu
}

// Open returns a store; with a Dir it loads the records found there first:
// expired ones are removed, and those still running are marked Failed and
// Stopped (their execd ended without finishing them). Close it when done.
func Open(cfg Config) (*Store, error) {
	if cfg.TTL <= 0 {
		cfg.TTL = time.Hour
	}
	if cfg.MaxPerPrincipal <= 0 {
		cfg.MaxPerPrincipal = 64
	}
	if cfg.NewID == nil {
		cfg.NewID = randomID
	}
	if cfg.PrincipalDir == nil {
		cfg.PrincipalDir = principalDir
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	s := &Store{cfg: cfg, log: log, byKey: map[key]*entry{}, count: map[string]int{},
		stop: make(chan struct{}), swept: make(chan struct{})}
	if cfg.Dir != "" {
		if err := s.load(time.Now()); err != nil {
			return nil, err
		}
	}
	go s.sweeper(min(max(cfg.TTL/4, time.Second), time.Minute))
	return s, nil
}

// Close stops the store's sweeper. The records stay where they are.
// Idempotent.
func (s *Store) Close() {
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.swept
}

// TTL is the longest a finished record is kept (Config.TTL).
func (s *Store) TTL() time.Duration { return s.cfg.TTL }

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// validID reports whether id may name a task (and a file).
func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// New is what a task starts with.
type New struct {
	Version string
	Tool    string
	Tags    map[string]string
	Message string
	// TTL is the caller's wish; zero or more than Config.TTL means
	// Config.TTL.
	TTL time.Duration
}

// Create makes a Working task for principal. It is written to disk (with a
// Dir) before Create returns, so that a Get of its id finds it even after
// a crash. At the principal's cap the oldest finished record is dropped;
// if none has finished, Create fails with ErrFull.
func (s *Store) Create(principal string, n New) (Record, error) {
	now := time.Now()
	ttl := n.TTL
	if ttl <= 0 || ttl > s.cfg.TTL {
		ttl = s.cfg.TTL
	}
	s.mu.Lock()
	var old *entry
	if s.count[principal] >= s.cfg.MaxPerPrincipal {
		if old = s.oldestFinishedLocked(principal); old == nil {
			s.mu.Unlock()
			return Record{}, fmt.Errorf("%w: %d tasks of this client are still running", ErrFull, s.count[principal])
		}
		s.dropLocked(old)
	}
	var id string
	for {
		id = s.cfg.NewID()
		if !validID(id) {
			s.mu.Unlock()
			return Record{}, fmt.Errorf("tasks: minted id %q is not 1-64 characters of A-Z a-z 0-9 -", id)
		}
		if s.byKey[key{principal, id}] == nil {
			break
		}
	}
	e := &entry{rec: Record{ID: id, Principal: principal, Version: n.Version, Tool: n.Tool, Tags: n.Tags,
		Status: Working, Message: n.Message, Created: now, Updated: now, TTL: ttl}, done: make(chan struct{})}
	s.byKey[key{principal, id}] = e
	s.count[principal]++
	rec := e.rec
	s.mu.Unlock()
	if old != nil {
		s.unpersist(old)
	}
	if err := s.persist(e); err != nil {
		s.mu.Lock()
		s.dropLocked(e)
		s.mu.Unlock()
		s.unpersist(e)
		return Record{}, err
	}
	return rec, nil
}

// oldestFinishedLocked is the principal's finished record that finished
// first, or nil.
func (s *Store) oldestFinishedLocked(principal string) *entry {
	var old *entry
	for k, e := range s.byKey {
		if k.principal == principal && e.rec.Status.Terminal() && (old == nil || e.rec.Updated.Before(old.rec.Updated)) {
			old = e
		}
	}
	return old
}

// dropLocked forgets a record; unpersist, called once s.mu is released,
// removes its file.
func (s *Store) dropLocked(e *entry) {
	k := key{e.rec.Principal, e.rec.ID}
	if s.byKey[k] != e {
		return
	}
	e.dropped = true
	delete(s.byKey, k)
	if s.count[k.principal]--; s.count[k.principal] <= 0 {
		delete(s.count, k.principal)
	}
}

// persist writes e's record as it is now, unless it was dropped.
func (s *Store) persist(e *entry) error {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	s.mu.Lock()
	rec, dropped := e.rec, e.dropped
	s.mu.Unlock()
	if dropped {
		return nil
	}
	return s.write(rec)
}

// unpersist removes the file of a dropped record, after any write of it
// that began earlier.
func (s *Store) unpersist(e *entry) {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	s.remove(e.rec)
}

// Get returns principal's task id. An expired record is not found (the
// sweeper drops it).
func (s *Store) Get(principal, id string) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.liveLocked(principal, id, time.Now())
	if e == nil {
		return Record{}, false
	}
	return e.rec, true
}

// liveLocked is principal's entry id unless it is missing or expired at
// now.
func (s *Store) liveLocked(principal, id string, now time.Time) *entry {
	e := s.byKey[key{principal, id}]
	if e == nil {
		return nil
	}
	if exp := e.rec.Expires(); !exp.IsZero() && now.After(exp) {
		return nil
	}
	return e
}

// Update changes principal's task id with change, unless it has finished
// (ErrFinished, with the record) or does not exist (ErrNotFound). The new
// record is written to disk before Update returns; Updated is set to now.
func (s *Store) Update(principal, id string, change func(*Record)) (Record, error) {
	now := time.Now()
	s.mu.Lock()
	e := s.liveLocked(principal, id, now)
	if e == nil {
		s.mu.Unlock()
		return Record{}, ErrNotFound
	}
	if e.rec.Status.Terminal() {
		rec := e.rec
		s.mu.Unlock()
		return rec, ErrFinished
	}
	change(&e.rec)
	e.rec.ID, e.rec.Principal, e.rec.Updated = id, principal, now
	rec := e.rec
	if rec.Status.Terminal() {
		close(e.done)
	}
	s.mu.Unlock()
	if err := s.persist(e); err != nil {
		// Memory is right; the disk is behind until the next change.
		s.log.Warn("task record not saved", zap.String("task", id), zap.Error(err))
	}
	return rec, nil
}

// Wait returns principal's task id once it has finished, or ctx's error.
func (s *Store) Wait(ctx context.Context, principal, id string) (Record, error) {
	s.mu.Lock()
	e := s.liveLocked(principal, id, time.Now())
	s.mu.Unlock()
	if e == nil {
		return Record{}, ErrNotFound
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return Record{}, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return e.rec, nil
}

// List returns principal's tasks, oldest first, at most limit of them
// after the task named by cursor ("" for the first page), and the cursor
// of the next page ("" when this one is the last).
func (s *Store) List(principal, cursor string, limit int) ([]Record, string, error) {
	now := time.Now()
	s.mu.Lock()
	var all []Record
	for k := range s.byKey {
		if k.principal != principal {
			continue
		}
		if e := s.liveLocked(k.principal, k.id, now); e != nil {
			all = append(all, e.rec)
		}
	}
	s.mu.Unlock()
	sortOldestFirst(all)
	start := 0
	if cursor != "" {
		start = -1
		for i, r := range all {
			if r.ID == cursor {
				start = i + 1
				break
			}
		}
		if start < 0 {
			return nil, "", ErrBadCursor
		}
	}
	page := all[start:]
	next := ""
	if limit > 0 && len(page) > limit {
		page = page[:limit]
		next = page[limit-1].ID
	}
	return page, next, nil
}

func sortOldestFirst(rs []Record) {
	sort.Slice(rs, func(i, j int) bool {
		if !rs[i].Created.Equal(rs[j].Created) {
			return rs[i].Created.Before(rs[j].Created)
		}
		return rs[i].ID < rs[j].ID
	})
}

// Counts is how many records there are in each status.
func (s *Store) Counts() map[Status]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Status]int, len(Statuses))
	for _, st := range Statuses {
		out[st] = 0
	}
	for _, e := range s.byKey {
		out[e.rec.Status]++
	}
	return out
}

// Recent returns the n records of every principal updated last, newest
// first (n <= 0: all).
func (s *Store) Recent(n int) []Record {
	s.mu.Lock()
	out := make([]Record, 0, len(s.byKey))
	for _, e := range s.byKey {
		out = append(out, e.rec)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Updated.After(out[j].Updated) })
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// sweeper drops expired records every period until Close.
func (s *Store) sweeper(period time.Duration) {
	defer close(s.swept)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.sweep(now)
		}
	}
}

// sweep drops the records expired at now.
func (s *Store) sweep(now time.Time) {
	var gone []*entry
	s.mu.Lock()
	for _, e := range s.byKey {
		if exp := e.rec.Expires(); !exp.IsZero() && now.After(exp) {
			s.dropLocked(e)
			gone = append(gone, e)
		}
	}
	s.mu.Unlock()
	for _, e := range gone {
		s.unpersist(e)
	}
}
