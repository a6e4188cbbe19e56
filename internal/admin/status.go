package admin

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"execd/internal/egress"
	"execd/internal/frontend"
	"execd/internal/upstream"
	"execd/internal/workspace"
)

// StatusSources are what the status page shows. Nil functions leave their
// part out.
type StatusSources struct {
	Version string
	Started time.Time
	// Limits are the configuration values an operator sizes execd by, as
	// key and value (config keys, e.g. "limits.max_concurrent_runs").
	Limits  []Limit
	Calls   func() []frontend.RunningCall
	Health  func() workspace.Health
	Streams func() int
	// GuestMemory: see Sources.GuestMemory.
	GuestMemory func() (used, budget int64)
	Workspaces  *WorkspaceView
	Errors      *RecentErrors
	// Network lists the workspaces' recent requests (egress.Service's
	// Recent): host, method, outcome, status, bytes and time, never a
	// path, a query or a header.
	Network func() []egress.WorkspaceRequests
	// Tasks lists the tasks updated last, newest first
	// (frontend.Server.Tasks).
	Tasks func() []frontend.TaskInfo
	// Upstreams reports code mode's upstream MCP servers: state,
	// connections, tools and calls by outcome (upstream.Hub's Status).
	Upstreams func() []upstream.Status
}

// Limit is one configuration value shown on the status page.
type Limit struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// WorkspaceView reads every principal's workspaces (workspace.Manager's
// ListAll) at most once per MaxAge, for the status page and the
// execd_workspaces gauge: a listing reads the data directory.
type WorkspaceView struct {
	List   func() []workspace.Info
	MaxAge time.Duration // zero means 2s

	mu    sync.Mutex
	at    time.Time
	infos []workspace.Info
}

// Get returns a listing no older than MaxAge.
func (v *WorkspaceView) Get() []workspace.Info {
	age := v.MaxAge
	if age == 0 {
		age = 2 * time.Second
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.infos == nil || time.Since(v.at) >= age {
		v.infos = v.List()
		if v.infos == nil {
			v.infos = []workspace.Info{}
		}
		v.at = time.Now()
	}
	return v.infos
}

// Count is the workspaces by state (Sources.Workspaces).
func (v *WorkspaceView) Count() (live, hibernated int) {
	for _, in := range v.Get() {
		switch {
		case in.Live:
			live++
		case in.Hibernated:
			hibernated++
		}
	}
	return live, hibernated
}

// status is the JSON document status.json serves (the page renders it).
type status struct {
	Version    string       `json:"version"`
	Started    time.Time    `json:"started"`
	Now        time.Time    `json:"now"`
	UptimeSec  float64      `json:"uptimeSeconds"`
	Limits     []Limit      `json:"limits"`
	Gauges     []Limit      `json:"gauges"`
	Workspaces []wsStatus   `json:"workspaces"`
	Calls      []callStatus `json:"calls"`
	Errors     []ErrorEntry `json:"errors"`
	// Network: the workspaces that used the network lately, most recent
	// first, with their last requests.
	Network []egress.WorkspaceRequests `json:"network"`
	// Tasks: the tasks running and those that ended lately, newest first.
	Tasks []taskStatus `json:"tasks"`
	// Upstreams: code mode's upstream MCP servers, in the configuration's
	// order.
	Upstreams []upstream.Status `json:"upstreams"`
}

type taskStatus struct {
	ID        string    `json:"id"`
	Principal string    `json:"principal"`
	Tool      string    `json:"tool,omitempty"`
	Workspace string    `json:"workspace,omitempty"`
	Status    string    `json:"status"`
	Running   bool      `json:"running"`
	Message   string    `json:"message,omitempty"`
	Created   time.Time `json:"created"`
	Updated   time.Time `json:"updated"`
}

type wsStatus struct {
	Principal   string    `json:"principal"`
	ID          string    `json:"id"`
	Languages   []string  `json:"languages"`
	State       string    `json:"state"` // live, hibernated, files
	Running     bool      `json:"running"`
	MemoryBytes int64     `json:"memoryBytes"`
	DiskBytes   int64     `json:"diskBytes"`
	LastUsed    time.Time `json:"lastUsed"`
}

type callStatus struct {
	ID        string    `json:"id"`
	Method    string    `json:"method"`
	Tool      string    `json:"tool,omitempty"`
	Era       string    `json:"era"`
	Transport string    `json:"transport"`
	Principal string    `json:"principal"`
	Workspace string    `json:"workspace,omitempty"`
	Language  string    `json:"language,omitempty"`
	ElapsedMs int64     `json:"elapsedMs"`
	Progress  string    `json:"progress,omitempty"`
	Started   time.Time `json:"started"`
}

// maxListed bounds the workspaces the page lists (most recently used first).
const maxListed = 500

func (s *StatusSources) document() status {
	now := time.Now()
	st := status{Version: s.Version, Started: s.Started, Now: now, UptimeSec: now.Sub(s.Started).Seconds(),
		Limits: s.Limits, Gauges: []Limit{}, Workspaces: []wsStatus{}, Calls: []callStatus{}, Errors: []ErrorEntry{}}
	if st.Limits == nil {
		st.Limits = []Limit{}
	}
	gauge := func(k string, v any) { st.Gauges = append(st.Gauges, Limit{k, fmt.Sprint(v)}) }
	if s.Health != nil {
		h := s.Health()
		gauge("run slots busy", fmt.Sprintf("%d of %d", h.RunsInFlight, h.RunSlots))
		gauge("live interpreters", h.Live)
		if h.FDExhaustions > 0 {
			gauge("calls refused for want of file descriptors", h.FDExhaustions)
		}
	}
	if s.Streams != nil {
		gauge("open streams", s.Streams())
	}
	if s.GuestMemory != nil {
		u, b := s.GuestMemory()
		gauge("guest memory", fmt.Sprintf("%s of %s", mib(u), mib(b)))
	}
	if s.Workspaces != nil {
		for i, in := range s.Workspaces.Get() {
			if i == maxListed {
				break
			}
			state := "files"
			switch {
			case in.Live:
				state = "live"
			case in.Hibernated:
				state = "hibernated"
			}
			langs := in.Languages
			if langs == nil {
				langs = []string{}
			}
			st.Workspaces = append(st.Workspaces, wsStatus{Principal: in.Principal, ID: in.ID, Languages: langs, State: state,
				Running: in.Running, MemoryBytes: in.MemoryBytes, DiskBytes: in.DiskBytes, LastUsed: in.LastUsed})
		}
	}
	if s.Calls != nil {
		for _, c := range s.Calls() {
			st.Calls = append(st.Calls, callStatus{ID: c.ID, Method: c.Method, Tool: c.Tool, Era: c.Era.String(), Transport: c.Transport,
				Principal: c.Principal, Workspace: c.Tags["workspace"], Language: c.Tags["language"], ElapsedMs: now.Sub(c.Started).Milliseconds(),
				Progress: c.Progress, Started: c.Started})
		}
	}
	if s.Errors != nil {
		st.Errors = s.Errors.List()
	}
	st.Network = []egress.WorkspaceRequests{}
	if s.Network != nil {
		st.Network = s.Network()
	}
	st.Upstreams = []upstream.Status{}
	if s.Upstreams != nil {
		st.Upstreams = s.Upstreams()
	}
	st.Tasks = []taskStatus{}
	if s.Tasks != nil {
		for _, ti := range s.Tasks() {
			st.Tasks = append(st.Tasks, taskStatus{ID: ti.ID, Principal: ti.Principal, Tool: ti.Tool, Workspace: ti.Workspace,
				Status: ti.Status, Running: ti.Running, Message: ti.Message, Created: ti.Created, Updated: ti.Updated})
		}
	}
	return st
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

//go:embed status.html
var statusPage []byte

func (s *StatusSources) serveJSON(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	_ = enc.Encode(s.document())
}

func servePage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// The page runs only its own script and reads only status.json.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
	_, _ = w.Write(statusPage)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}
