package check

import (
	"encoding/json"
	"net"
	"regexp"
	"strings"
	"testing"
)

// instruction is one Containerfile instruction with continuation lines joined.
type instruction struct{ op, args string }

// stages returns the instructions of each build stage, in order.
func stages(t *testing.T, text string) [][]instruction {
	t.Helper()
	var out [][]instruction
	var cur strings.Builder
	flush := func() {
		l := strings.TrimSpace(cur.String())
		cur.Reset()
		if l == "" {
			return
		}
		op, args, _ := strings.Cut(l, " ")
		op = strings.ToUpper(op)
		if op == "FROM" {
			out = append(out, nil)
		}
		if len(out) == 0 {
			if op != "ARG" {
				t.Fatalf("Containerfile: %s before the first FROM", op)
			}
			return
		}
		out[len(out)-1] = append(out[len(out)-1], instruction{op, strings.TrimSpace(args)})
	}
	for _, l := range trimmedLines(text) {
		if strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\") + " ")
			continue
		}
		cur.WriteString(l)
		flush()
	}
	flush()
	return out
}

func find(st []instruction, op string) []string {
	var v []string
	for _, in := range st {
		if in.op == op {
			v = append(v, in.args)
		}
	}
	return v
}

func TestContainerfile(t *testing.T) {
	st := stages(t, readFile(t, "Containerfile"))
	if len(st) != 2 {
		t.Fatalf("want a build stage and a runtime stage, got %d stages", len(st))
	}
	build, final := st[0], st[1]
	runs := strings.Join(find(build, "RUN"), "\n")
	if !strings.Contains(runs, "make build") {
		t.Error("the build stage does not run make build (the guests' own build scripts)")
	}
	if !strings.Contains(runs, "find sandbox/guests -type f ! -name README.md -delete") {
		t.Error("the build stage does not drop guests copied from the build context")
	}

	cfg, _ := loadConfig(t, "deploy/container/config.toml", readFile(t, "container/config.toml"))
	host, port, _ := net.SplitHostPort(cfg.Server.Listen)
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		t.Errorf("image listens on %s: a container's port is reached from outside it", cfg.Server.Listen)
	}
	if cfg.Server.AuthTokensFile == "" {
		t.Error("the image's listener is reachable from outside but has no auth_tokens_file (SECURITY.md)")
	}

	user := find(final, "USER")
	if len(user) != 1 || !regexp.MustCompile(`^[1-9][0-9]*(:[1-9][0-9]*)?$`).MatchString(user[0]) {
		t.Errorf("USER %q: want one numeric non-root user (Kubernetes runAsNonRoot checks numbers only)", user)
	}
	var volumes []string
	for _, v := range find(final, "VOLUME") {
		if err := json.Unmarshal([]byte(v), &volumes); err != nil {
			volumes = append(volumes, strings.Fields(v)...)
		}
	}
	if len(volumes) != 1 || volumes[0] != cfg.Workspace.DataDir {
		t.Errorf("VOLUME %v, want workspace.data_dir %s", volumes, cfg.Workspace.DataDir)
	}
	if e := find(final, "EXPOSE"); len(e) != 1 || e[0] != port {
		t.Errorf("EXPOSE %v, execd listens on %s", e, port)
	}
	if h := find(final, "HEALTHCHECK"); len(h) != 1 || !strings.Contains(h[0], "execd-healthcheck") || !strings.Contains(h[0], `"`+port+`"`) {
		t.Errorf("HEALTHCHECK %v does not check execd's port %s", h, port)
	}
	if s := find(final, "STOPSIGNAL"); len(s) != 1 || s[0] != "SIGTERM" {
		t.Errorf("STOPSIGNAL %v", s)
	}
	copies := strings.Join(find(final, "COPY"), "\n")
	for _, want := range []string{"deploy/container/config.toml /etc/execd/config.toml", "deploy/container/healthcheck.sh /usr/local/bin/execd-healthcheck"} {
		if !strings.Contains(copies, want) {
			t.Errorf("runtime stage lacks COPY %s", want)
		}
	}
	if cmd := strings.Join(append(find(final, "ENTRYPOINT"), find(final, "CMD")...), " "); !strings.Contains(cmd, `"-config", "/etc/execd/config.toml"`) {
		t.Errorf("ENTRYPOINT/CMD %q do not read /etc/execd/config.toml", cmd)
	}
	prep := strings.Join(find(final, "RUN"), "\n")
	for _, dir := range []string{cfg.Workspace.DataDir, cfg.Sandbox.CacheDir} {
		if !strings.Contains(prep, dir) {
			t.Errorf("runtime stage does not create %s for the execd user", dir)
		}
	}
}
