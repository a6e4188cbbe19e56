package admin

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"execd/internal/frontend"
	"execd/internal/tasks"
)

func TestTaskMetricsCountEveryStatus(t *testing.T) {
	m := NewMetrics(Sources{Tasks: func() map[tasks.Status]int {
		return map[tasks.Status]int{tasks.Working: 2, tasks.Completed: 5}
	}})
	want := `
# HELP execd_tasks Task records kept, by status: working and input_required (running), completed, failed, cancelled (kept protocol.task_ttl after they ended).
# TYPE execd_tasks gauge
execd_tasks{status="cancelled"} 0
execd_tasks{status="completed"} 5
execd_tasks{status="failed"} 0
execd_tasks{status="input_required"} 0
execd_tasks{status="working"} 2
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), "execd_tasks"); err != nil {
		t.Error(err)
	}
}

func TestStatusListsTasks(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := Handler(Options{Listen: "127.0.0.1:0", Status: &StatusSources{Started: at, Tasks: func() []frontend.TaskInfo {
		return []frontend.TaskInfo{{ID: "0123abcd", Principal: "alice", Tool: "execute_code", Workspace: "w", Status: "working",
			Message: "3/10 loading", Created: at, Updated: at, Running: true}}
	}}})
	r := httptest.NewRequest(http.MethodGet, "/status.json", nil)
	r.Host = "127.0.0.1:9090"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var st struct {
		Tasks []map[string]any `json:"tasks"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || len(st.Tasks) != 1 {
		t.Fatalf("status.json: %v %s", err, w.Body.String())
	}
	k := st.Tasks[0]
	if k["id"] != "0123abcd" || k["workspace"] != "w" || k["status"] != "working" || k["message"] != "3/10 loading" || k["running"] != true {
		t.Errorf("task on the status page: %v", k)
	}
}
