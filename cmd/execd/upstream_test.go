package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Code mode through the daemon: an [[upstream]] (the fake stdio server of
// internal/upstream's tests) named in execute_code's description, called
// from both guests, its calls in the result's toolCalls, in /metrics and
// in /status.
func TestCodeModeEndToEnd(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fakeupstream")
	if out, err := exec.Command("go", "build", "-o", bin, "../../internal/upstream/testdata/fakeupstream").CombinedOutput(); err != nil {
		t.Fatalf("building the fake upstream: %v\n%s", err, out)
	}
	toml := fmt.Sprintf(`[server]
listen = "127.0.0.1:0"
admin_listen = "127.0.0.1:0"
[workspace]
data_dir = %q
[[upstream]]
name = "fake"
command = [%q]
allow = ["echo", "add", "fail"]
max_calls_per_run = 3
`, t.TempDir(), bin)
	d, admin := launch(t, toml, true)
	c := newMCP(t, d.url, true)

	list := fmt.Sprint(c.RPC("tools/list", nil, nil))
	for _, want := range []string{"tools.fake.echo({text: string})", "tools.fake.add(a: float, b: float)", "from execd import tools"} {
		if !strings.Contains(list, want) {
			t.Errorf("execute_code's description lacks %q: %.3000s", want, list)
		}
	}
	if strings.Contains(list, "tools.fake.delete_repo") {
		t.Error("the description names a tool that allow refuses")
	}
	sc, isErr := c.run("cm", `const [a, b] = await Promise.all([tools.fake.add({a: 1, b: 2}), tools.fake.echo({text: "hi"})]);
let e; try { await tools.fake.delete_repo({name: "x"}) } catch (x) { e = x.code }
[a.sum, b, e]`)
	if isErr || sc["result"] != `[3, "hi", "refused"]` {
		t.Fatalf("JavaScript: %v", sc)
	}
	if got := fmt.Sprint(sc["toolCalls"]); !strings.Contains(got, "map[count:1 outcome:ok server:fake tool:add]") ||
		!strings.Contains(got, "map[count:1 outcome:ok server:fake tool:echo]") || !strings.Contains(got, "outcome:refused server:fake tool:delete_repo") {
		t.Errorf("toolCalls: %s", got)
	}
	sc, isErr = c.runLang("cm", "python", "from execd import tools, ToolError\nr = [tools.fake.echo(text='p') for _ in range(3)]\n"+
		"try:\n    tools.fake.echo(text='p')\nexcept ToolError as e:\n    r.append(e.code)\nr")
	if isErr || sc["result"] != `['p', 'p', 'p', 'limit']` {
		t.Fatalf("Python: %v", sc)
	}
	_, metrics := get(t, admin+"/metrics")
	for _, want := range []string{`execd_upstream_up{state="up",transport="stdio",upstream="fake"} 1`,
		`execd_upstream_calls_total{outcome="ok",upstream="fake"} 5`, `execd_upstream_calls_total{outcome="limit",upstream="fake"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	_, status := get(t, admin+"/status.json")
	var st struct {
		Upstreams []struct {
			Name, Transport, State string
			Tools                  int
			Calls                  map[string]int
		}
	}
	if err := json.Unmarshal([]byte(status), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Upstreams) != 1 || st.Upstreams[0].Name != "fake" || st.Upstreams[0].State != "up" || st.Upstreams[0].Tools == 0 ||
		st.Upstreams[0].Calls["ok"] != 5 || st.Upstreams[0].Calls["refused"] != 1 {
		t.Errorf("/status.json's upstreams: %+v", st.Upstreams)
	}
}
