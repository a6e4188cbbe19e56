package main

// Tasks outlive their process: a finished task's result is read after a
// restart, and a task that was running when execd stopped, by SIGTERM
// after the shutdown grace or by SIGKILL, fails saying that execd stopped.

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"execd/internal/mcptest"
)

// taskClient speaks the 2026-07-28 era, declaring the tasks extension.
func taskClient(t *testing.T, d *daemon) *mcptest.Client {
	return &mcptest.Client{T: t, URL: d.url, Caps: mcptest.TasksCaps()}
}

// startTaskRun calls execute_code with code and returns the task it
// became.
func startTaskRun(t *testing.T, c *mcptest.Client, ws, code string) string {
	t.Helper()
	msg := c.Answer("tools/call", map[string]any{"name": "execute_code",
		"arguments": map[string]any{"code": code, "language": "python", "workspace": ws}})
	res, _ := msg["result"].(map[string]any)
	id, _ := res["taskId"].(string)
	if res["resultType"] != "task" || id == "" {
		t.Fatalf("the call did not become a task: %v", msg)
	}
	return id
}

// taskState polls tasks/get until the task is no longer working (at most
// a minute) and returns its result.
func taskState(t *testing.T, c *mcptest.Client, id string) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		msg := c.Answer("tasks/get", map[string]any{"taskId": id})
		res, _ := msg["result"].(map[string]any)
		if res == nil {
			t.Fatalf("tasks/get: %v", msg)
		}
		if res["status"] != "working" || time.Now().After(deadline) {
			return res
		}
	}
}

const taskConfig = "[protocol]\ntask_after = \"300ms\"\n"

func TestTaskResultSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	d := startDaemon(t, dir, "", taskConfig)
	c := taskClient(t, d)
	id := startTaskRun(t, c, "kept", "import time\ntime.sleep(1)\nprint('slept')\n6*7")
	done := taskState(t, c, id)
	if done["status"] != "completed" {
		t.Fatalf("task: %v", done)
	}
	d.stop()

	d2 := startDaemon(t, dir, "", taskConfig)
	after := taskState(t, taskClient(t, d2), id)
	inner, _ := after["result"].(map[string]any)
	sc, _ := inner["structuredContent"].(map[string]any)
	if after["status"] != "completed" || sc["stdout"] != "slept\n" || sc["result"] != "42" {
		t.Errorf("the task after a restart: %v", after)
	}
	d2.stop()
}

func TestTaskRunningAtStopFails(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			d := startDaemon(t, dir, `shutdown_grace = "1s"`, taskConfig)
			c := taskClient(t, d)
			id := startTaskRun(t, c, "busy", "x = 1\nwhile True:\n    pass")
			msg := c.Answer("tasks/get", map[string]any{"taskId": id})
			if res, _ := msg["result"].(map[string]any); res["status"] != "working" {
				t.Fatalf("a busy loop's task: %v", msg)
			}
			d.cmd.Process.Signal(sig)
			select {
			case <-d.exited:
			case <-time.After(time.Minute):
				t.Fatalf("execd did not exit after %s\n%s", sig, d.logs())
			}
			d2 := startDaemon(t, dir, "", taskConfig)
			c2 := taskClient(t, d2)
			got := taskState(t, c2, id)
			e, _ := got["error"].(map[string]any)
			if got["status"] != "failed" || !strings.Contains(fmt.Sprint(e["message"]), "execd stopped") ||
				!strings.Contains(fmt.Sprint(got["statusMessage"]), "execd stopped") {
				t.Errorf("after %s the task is %v; want failed, saying that execd stopped", sig, got)
			}
			// The workspace is still there; after SIGTERM with the variables
			// set before the loop (it was hibernated at the stop).
			plain := &mcptest.Client{T: t, URL: d2.url}
			sc, _ := plain.Tool("execute_code", map[string]any{"code": "print('back', globals().get('x'))", "language": "python", "workspace": "busy"})
			want := "back 1\n"
			if sig == syscall.SIGKILL {
				want = "back None\n"
			}
			if sc["stdout"] != want {
				t.Errorf("the workspace after the stop: %v; want stdout %q", sc, want)
			}
			d2.stop()
		})
	}
}
