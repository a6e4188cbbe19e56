package check

import (
	"path"
	"strings"
	"testing"
	"time"
)

// unit is a systemd unit file: section -> key -> values in order (a key may
// repeat; an empty assignment resets it, as systemd does).
type unit map[string]map[string][]string

func parseUnit(t *testing.T, text string) unit {
	t.Helper()
	u := unit{}
	section := ""
	for n, l := range trimmedLines(text) {
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";"):
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			section = l[1 : len(l)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok || section == "" {
				t.Fatalf("execd.service line %d: %q is not key=value in a section", n+1, l)
			}
			if v == "" {
				u[section][k] = nil
			} else {
				u[section][k] = append(u[section][k], v)
			}
		}
	}
	return u
}

// one returns the single value of a key in [Service].
func (u unit) one(t *testing.T, key string) string {
	t.Helper()
	v := u["Service"][key]
	if len(v) != 1 {
		t.Fatalf("[Service] %s: want one value, got %q", key, v)
	}
	return v[0]
}

func systemdFiles(t *testing.T) (unit, string) {
	t.Helper()
	return parseUnit(t, readFile(t, "systemd/execd.service")), readFile(t, "systemd/config.toml")
}

func TestUnitConfigIsAValidExecdConfig(t *testing.T) {
	u, text := systemdFiles(t)
	cfg, _ := loadConfig(t, "deploy/systemd/config.toml", text)
	if !strings.Contains(u.one(t, "ExecStart"), " -config /etc/execd/config.toml") {
		t.Errorf("ExecStart %q does not read /etc/execd/config.toml", u.one(t, "ExecStart"))
	}
	host := strings.Split(cfg.Server.Listen, ":")[0]
	if host != "127.0.0.1" && host != "[::1]" && host != "localhost" && cfg.Server.AuthTokensFile == "" {
		t.Errorf("the shipped config listens on %s without auth", cfg.Server.Listen)
	}
}

func TestUnitDirectoriesMatchConfig(t *testing.T) {
	u, text := systemdFiles(t)
	cfg, set := loadConfig(t, "deploy/systemd/config.toml", text)
	if !set["workspace.data_dir"] || !set["sandbox.cache_dir"] {
		t.Fatal("data_dir and cache_dir must be set: their defaults follow $HOME, which ProtectHome hides")
	}
	if want := path.Join("/var/lib", u.one(t, "StateDirectory")); path.Clean(cfg.Workspace.DataDir) != want {
		t.Errorf("data_dir %s is not the StateDirectory %s: ProtectSystem=strict makes it read-only", cfg.Workspace.DataDir, want)
	}
	if want := path.Join("/var/cache", u.one(t, "CacheDirectory")); path.Clean(cfg.Sandbox.CacheDir) != want {
		t.Errorf("cache_dir %s is not the CacheDirectory %s", cfg.Sandbox.CacheDir, want)
	}
}

func TestUnitStopTimeoutCoversShutdown(t *testing.T) {
	u, text := systemdFiles(t)
	cfg, _ := loadConfig(t, "deploy/systemd/config.toml", text)
	if s := u.one(t, "KillSignal"); s != "SIGTERM" {
		t.Errorf("KillSignal %s: execd shuts down gracefully on SIGTERM", s)
	}
	d, err := time.ParseDuration(u.one(t, "TimeoutStopSec"))
	if err != nil {
		t.Fatalf("TimeoutStopSec: %v (write it with a unit, e.g. 30s)", err)
	}
	if need := stopBudget(cfg); d <= need {
		t.Errorf("TimeoutStopSec %s must exceed shutdown_grace + interrupt_grace + %s = %s", d, httpCloseWait, need)
	}
}

func TestUnitHardening(t *testing.T) {
	u, _ := systemdFiles(t)
	want := map[string]string{
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
		"PrivateDevices": "yes", "RestrictNamespaces": "yes", "SystemCallArchitectures": "native",
		"RestrictAddressFamilies": "AF_INET AF_INET6", "User": "execd", "UMask": "0077",
	}
	for k, v := range want {
		if got := u.one(t, k); got != v {
			t.Errorf("%s=%s, want %s", k, got, v)
		}
	}
	if len(u["Service"]["SystemCallFilter"]) == 0 {
		t.Error("no SystemCallFilter")
	}
	// The user comes from the sysusers entry shipped beside the unit.
	if !strings.Contains(readFile(t, "systemd/execd.sysusers"), "\nu execd ") {
		t.Error("execd.sysusers does not create user execd")
	}
	// wazero needs to map compiled code executable; with this setting it
	// silently falls back to its interpreter (check.sh shows the slowdown).
	if _, ok := u["Service"]["MemoryDenyWriteExecute"]; ok {
		t.Error("MemoryDenyWriteExecute is set: it takes wazero's compiler away")
	}
	if v, err := time.ParseDuration(u.one(t, "RestartSec")); err != nil || v <= 0 {
		t.Errorf("RestartSec %q", u.one(t, "RestartSec"))
	}
	if u.one(t, "LimitNOFILE") != "65536" {
		t.Errorf("LimitNOFILE %s", u.one(t, "LimitNOFILE"))
	}
}
