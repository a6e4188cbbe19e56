package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestExampleMatchesDefaults(t *testing.T) {
	b, err := os.ReadFile("../../config.toml.example")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(string(b))
	if err != nil {
		t.Fatalf("config.toml.example does not load: %v", err)
	}
	if want := Default(); !reflect.DeepEqual(got, want) {
		t.Errorf("config.toml.example differs from the built-in defaults:\n got %+v\nwant %+v", got, want)
	}
}

func TestParseOverrides(t *testing.T) {
	c, err := Parse(`
[server]
listen = "127.0.0.1:9000"
[limits]
request_timeout = "1m30s"
max_concurrent_runs = 3
[sandbox]
strict_termination = false
`)
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Listen != "127.0.0.1:9000" || c.Limits.RequestTimeout.Duration != 90*time.Second ||
		c.Limits.MaxConcurrentRuns != 3 || c.Sandbox.StrictTermination {
		t.Errorf("overrides not applied: %+v", c)
	}
	if c.Server.Path != "/mcp" {
		t.Errorf("untouched key lost its default: path = %q", c.Server.Path)
	}
}

func TestParseErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct{ text, key string }{
		{"[server]\nlisten = \"nonsense\"", "server.listen"},
		{"[server]\nlistn = \"x\"", "server.listn"},
		{"[limits]\nmax_memory_mib = 1", "limits.max_memory_mib"},
		{"[limits]\nrequest_timeout = \"soon\"", "request_timeout"},
		{"[protocol]\nprogress_heartbeat = \"1h\"", "protocol.progress_heartbeat"},
		{"[protocol]\ninput_timeout = \"0s\"", "protocol.input_timeout"},
		{"[protocol]\ntask_after = \"-1s\"", "protocol.task_after"},
		{"[protocol]\ntask_after = \"1ms\"", "protocol.task_after"},
		{"[protocol]\ntask_after = \"2h\"", "protocol.task_after"},
		{"[protocol]\ntask_ttl = \"0s\"", "protocol.task_ttl"},
		{"[protocol]\ntask_ttl = \"1000h\"", "protocol.task_ttl"},
		{"[protocol]\nmax_tasks_per_principal = 0", "protocol.max_tasks_per_principal"},
		{"[limits]\nmax_image_bytes = 10", "limits.max_image_bytes"},
		{"[limits]\nmax_images = 0", "limits.max_images"},
		{"[limits]\nmax_input_answer_bytes = 100", "limits.max_input_answer_bytes"},
		{"[limits]\nmax_input_answer_bytes = 100000000", "limits.max_input_answer_bytes"},
		{"[log]\nlevel = \"loud\"", "log.level"},
		{"[log]\nformat = \"xml\"", "log.format"},
		{"[workspace]\nmax_workspaces = 0", "workspace.max_workspaces"},
		{"[workspace]\nhibernate_after = \"-1m\"", "workspace.hibernate_after"},
		{"[limits]\nmax_runs_per_principal = -1", "limits.max_runs_per_principal"},
		{"[limits]\nmax_concurrent_runs = 2\nmax_runs_per_principal = 3", "limits.max_runs_per_principal"},
		{"[server]\nallowed_origins = [\"example.com\"]", "server.allowed_origins"},
		{"[limits]\nrequest_timeout = \"-1s\"", "limits.request_timeout"},
		{"[limits]\nmax_total_memory_mib = 10", "limits.max_total_memory_mib"},
		{"[limits]\nmax_total_memory_mib = -1", "limits.max_total_memory_mib"},
		{"[sandbox]\npython_preload = [\"json\", \"os; import sys\"]", "sandbox.python_preload"},
		{"[sandbox]\npython_preload = [\"\"]", "sandbox.python_preload"},
		{"[network]\nmax_requests_per_run = 0", "network.max_requests_per_run"},
		{"[network]\nmax_concurrent_requests = 300", "network.max_concurrent_requests"},
		{"[network]\nmax_request_bytes = 10", "network.max_request_bytes"},
		{"[network]\nmax_response_bytes = -1", "network.max_response_bytes"},
		{"[network]\nrequest_timeout = \"1ms\"", "network.request_timeout"},
		{"[network]\nbytes_per_minute = -5", "network.bytes_per_minute"},
		{"[network]\nmax_redirects = 6", "network.max_redirects"},
		{"[network]\nallow = \"api.example.com\"", "network.allow"},
		{"[network]\nalow = []", "network.alow"},
		{"[[network.secrets]]\nname = \"A\"\nvalue = \"x\"", "network.secrets.value"},
		{"[network.principals.a]\nallw = []", "network.principals.a.allw"},
		{"[packages]\nnpm_registry = \"ftp://example.com\"", "packages.npm_registry"},
		{"[packages]\npython_index = \"https://user:pw@example.com/simple\"", "packages.python_index"},
		{"[packages]\npython_index = \"example.com/simple\"", "packages.python_index"},
		{"[packages]\nallow = [\"left pad\"]", "packages.allow"},
		{"[packages]\ndeny = [\"\"]", "packages.deny"},
		{"[packages]\nmax_package_bytes = 10", "packages.max_package_bytes"},
		{"[packages]\nmax_package_bytes = 2048\nmax_total_bytes = 1024", "packages.max_total_bytes"},
		{"[packages]\nfetch_timeout = \"10ms\"", "packages.fetch_timeout"},
		{"[packages]\npip = true", "packages.pip"},
		{"nonsense", "config"},
	} {
		_, err := Parse(tc.text)
		if err == nil {
			t.Errorf("%q: no error", tc.text)
			continue
		}
		if !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: error %q does not name %s", tc.text, err, tc.key)
		}
	}
}

func FuzzParse(f *testing.F) {
	b, _ := os.ReadFile("../../config.toml.example")
	f.Add(string(b))
	f.Add("[server]\nlisten = \"127.0.0.1:1\"\n")
	f.Add("[limits]\nrequest_timeout = 5\n")
	f.Fuzz(func(t *testing.T, text string) {
		c, err := Parse(text)
		if err == nil {
			if verr := c.Validate(); verr != nil {
				t.Fatalf("Parse accepted a config that Validate rejects: %v", verr)
			}
		}
	})
}

func TestSyntaxErrorsShowWhere(t *testing.T) {
	_, err := Parse("[server]\nlisten = \"127.0.0.1:1\n")
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "^") {
		t.Errorf("unterminated string: %v; want its line and a caret", err)
	}
	// toml reports line 0 for this one, where its caret formatter panics:
	// the plain message must come back instead.
	for _, text := range []string{"\"\r\n", "\"\r", "[a]\n\"\r\n"} {
		if _, err := Parse(text); err == nil || !strings.HasPrefix(err.Error(), "config: ") {
			t.Errorf("%q: %v; want a config error", text, err)
		}
	}
}

func TestParseNetwork(t *testing.T) {
	c, err := Parse(`
[network]
allow = ["api.example.com", "http://127.0.0.1:8080"]
bytes_per_minute = 0
[[network.secrets]]
name = "TOKEN"
env = "TOKEN"
hosts = ["api.example.com"]
header = "Authorization: Bearer {value}"
[network.principals.team-a]
allow = ["*.team-a.example"]
[[network.principals.team-a.secrets]]
name = "KEY"
value_file = "/etc/key"
hosts = ["api.team-a.example"]
`)
	if err != nil {
		t.Fatal(err)
	}
	n := c.Network
	if len(n.Allow) != 2 || n.BytesPerMinute != 0 || n.MaxRequestsPerRun != 500 {
		t.Errorf("network: %+v", n)
	}
	if want := []Secret{{Name: "TOKEN", Env: "TOKEN", Hosts: []string{"api.example.com"}, Header: "Authorization: Bearer {value}"}}; !reflect.DeepEqual(n.Secrets, want) {
		t.Errorf("secrets: %+v", n.Secrets)
	}
	p, ok := n.Principals["team-a"]
	if !ok || len(p.Allow) != 1 || len(p.Secrets) != 1 || p.Secrets[0].ValueFile != "/etc/key" {
		t.Errorf("principals: %+v", n.Principals)
	}
}

func TestTaskAfterZeroMeansNever(t *testing.T) {
	c, err := Parse("[protocol]\ntask_after = \"0s\"\nmax_tasks_per_principal = 3\n")
	if err != nil {
		t.Fatalf("task_after = 0s (never) refused: %v", err)
	}
	if c.Protocol.TaskAfter.Duration != 0 || c.Protocol.MaxTasksPerPrincipal != 3 || c.Protocol.TaskTTL.Duration != time.Hour {
		t.Errorf("protocol: %+v", c.Protocol)
	}
}

func TestParsePackages(t *testing.T) {
	c, err := Parse(`
[packages]
npm = false
npm_registry = "http://127.0.0.1:4873/"
allow = ["npm:@myorg/*", "pypi:attrs"]
deny = ["*-evil"]
max_package_bytes = 4096
max_total_bytes = 8192
fetch_timeout = "5s"
`)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Packages
	if p.NPM || !p.Python || p.NPMRegistry != "http://127.0.0.1:4873/" || len(p.Allow) != 2 || p.Deny[0] != "*-evil" ||
		p.MaxPackageBytes != 4096 || p.MaxTotalBytes != 8192 || p.FetchTimeout.Duration != 5*time.Second {
		t.Errorf("[packages] not read as written: %+v", p)
	}
}

func TestParseUpstreams(t *testing.T) {
	c, err := Parse(`
[code_mode]
description_budget = 2048

[[upstream]]
name = "github"
command = ["npx", "-y", "server-github"]
env = { A = "1" }
pass_env = ["GITHUB_TOKEN"]
allow = ["get_*"]
ask = ["create_*"]
principals = ["team-a"]

[[upstream]]
name = "search"
url = "https://mcp.example.com/mcp"
headers = { "X-Team" = "data" }
bearer = { env = "SEARCH_TOKEN" }
allow = ["*"]
max_calls_per_run = 5
call_timeout = "2s"
`)
	if err != nil {
		t.Fatal(err)
	}
	if c.CodeMode.DescriptionBudget != 2048 || len(c.Upstreams) != 2 {
		t.Fatalf("code_mode %+v, %d upstreams", c.CodeMode, len(c.Upstreams))
	}
	gh, s := c.Upstreams[0], c.Upstreams[1]
	if gh.Name != "github" || len(gh.Command) != 3 || gh.Env["A"] != "1" || gh.PassEnv[0] != "GITHUB_TOKEN" ||
		gh.Allow[0] != "get_*" || gh.Ask[0] != "create_*" || gh.Principals[0] != "team-a" {
		t.Errorf("github: %+v", gh)
	}
	// Keys left out take their defaults; keys given keep their values.
	if gh.MaxCallsPerRun != DefaultUpstreamMaxCallsPerRun || gh.CallTimeout.Duration != DefaultUpstreamCallTimeout ||
		gh.ConnectTimeout.Duration != DefaultUpstreamConnectTimeout {
		t.Errorf("github's defaults: %+v", gh)
	}
	if s.URL != "https://mcp.example.com/mcp" || s.Headers["X-Team"] != "data" || s.Bearer == nil || s.Bearer.Env != "SEARCH_TOKEN" ||
		s.MaxCallsPerRun != 5 || s.CallTimeout.Duration != 2*time.Second {
		t.Errorf("search: %+v", s)
	}
}

func TestUpstreamErrorsNameTheKey(t *testing.T) {
	const ok = "name = \"gh\"\ncommand = [\"x\"]\nallow = [\"*\"]\n"
	for _, tc := range []struct{ text, key string }{
		{"[code_mode]\ndescription_budget = 10", "code_mode.description_budget"},
		{"[code_mode]\nbudget = 10", "code_mode.budget"},
		{"[[upstream]]\n" + ok + "colour = 1", "upstream.colour"},
		{"[[upstream]]\nname = \"1x\"\ncommand = [\"x\"]\nallow = [\"*\"]", "upstream[0].name"},
		{"[[upstream]]\nname = \"list\"\ncommand = [\"x\"]\nallow = [\"*\"]", "upstream[0].name"},
		{"[[upstream]]\nname = \"class\"\ncommand = [\"x\"]\nallow = [\"*\"]", "upstream[0].name"},
		{"[[upstream]]\n" + ok + "[[upstream]]\n" + ok, "upstream[1].name"},
		{"[[upstream]]\nname = \"gh\"\nallow = [\"*\"]", "upstream[0] (gh)"},
		{"[[upstream]]\n" + ok + "url = \"https://x.example\"", "upstream[0] (gh)"},
		{"[[upstream]]\nname = \"gh\"\ncommand = [\"\"]\nallow = [\"*\"]", "upstream[0] (gh).command"},
		{"[[upstream]]\nname = \"gh\"\nurl = \"ftp://x.example\"\nallow = [\"*\"]", "upstream[0] (gh).url"},
		{"[[upstream]]\nname = \"gh\"\nurl = \"https://u:p@x.example\"\nallow = [\"*\"]", "upstream[0] (gh).url"},
		{"[[upstream]]\n" + ok + "env = { \"A=B\" = \"1\" }", "upstream[0] (gh).env"},
		{"[[upstream]]\n" + ok + "pass_env = [\"A B\"]", "upstream[0] (gh).pass_env"},
		{"[[upstream]]\n" + ok + "headers = { \"X\" = \"1\" }", "upstream[0] (gh)"},
		{"[[upstream]]\nname = \"gh\"\nurl = \"https://x.example\"\nallow = [\"*\"]\nheaders = { \"Mcp-Session-Id\" = \"1\" }", "upstream[0] (gh).headers"},
		{"[[upstream]]\nname = \"gh\"\nurl = \"https://x.example\"\nallow = [\"*\"]\nheaders = { \"X\" = \"a\\nb\" }", "upstream[0] (gh).headers"},
		{"[[upstream]]\nname = \"gh\"\nurl = \"https://x.example\"\nallow = [\"*\"]\nbearer = { env = \"A\", value_file = \"/f\" }", "upstream[0] (gh).bearer"},
		{"[[upstream]]\nname = \"gh\"\nurl = \"https://x.example\"\nallow = [\"*\"]\nbearer = { value = \"secret\" }", "upstream.bearer.value"},
		{"[[upstream]]\nname = \"gh\"\nurl = \"https://x.example\"\nallow = [\"*\"]\nbearer = { env = \"A\" }\nheaders = { Authorization = \"x\" }", "upstream[0] (gh).headers"},
		{"[[upstream]]\nname = \"gh\"\ncommand = [\"x\"]", "upstream[0] (gh)"},
		{"[[upstream]]\n" + ok + "ask = [\"a b\"]", "upstream[0] (gh).ask"},
		{"[[upstream]]\nname = \"gh\"\ncommand = [\"x\"]\nallow = [\"\"]", "upstream[0] (gh).allow"},
		{"[[upstream]]\n" + ok + "principals = [\"a\", \"a\"]", "upstream[0] (gh).principals"},
		{"[[upstream]]\n" + ok + "max_calls_per_run = -1", "upstream[0] (gh).max_calls_per_run"},
		{"[[upstream]]\n" + ok + "call_timeout = \"1ms\"", "upstream[0] (gh).call_timeout"},
		{"[[upstream]]\n" + ok + "call_timeout = \"2h\"", "upstream[0] (gh).call_timeout"},
		{"[[upstream]]\n" + ok + "connect_timeout = \"-1s\"", "upstream[0] (gh).connect_timeout"},
	} {
		_, err := Parse(tc.text)
		if err == nil {
			t.Errorf("%q: no error", tc.text)
			continue
		}
		if !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: error %q does not name %s", tc.text, err, tc.key)
		}
	}
}

// The [[upstream]] example in config.toml.example loads once uncommented,
// so that an operator who copies it gets a working entry.
func TestExampleUpstreamLoads(t *testing.T) {
	b, err := os.ReadFile("../../config.toml.example")
	if err != nil {
		t.Fatal(err)
	}
	_, block, found := strings.Cut(string(b), "\n# [[upstream]]\n")
	if !found {
		t.Fatal("config.toml.example has no commented [[upstream]] example")
	}
	var text strings.Builder
	text.WriteString("[[upstream]]\n")
	for _, line := range strings.Split(block, "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		text.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "#"), " ") + "\n")
	}
	c, err := Parse(text.String())
	if err != nil {
		t.Fatalf("the example does not load: %v\n%s", err, text.String())
	}
	if len(c.Upstreams) != 1 || c.Upstreams[0].Name != "github" || len(c.Upstreams[0].Ask) == 0 {
		t.Errorf("the example: %+v", c.Upstreams)
	}
}
