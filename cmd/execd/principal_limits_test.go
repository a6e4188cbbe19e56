package main

import (
	"testing"

	"execd/internal/config"
)

// A principal's disk budget and workspace cap default to bounds only where
// tokens make several principals; the one local principal is the
// operator. -1 turns either off, a positive value is taken as it is.
func TestPrincipalLimitsDefaults(t *testing.T) {
	for _, c := range []struct {
		tokens           bool
		disk, workspaces int // as configured
		wantDisk, wantWS int
	}{
		{false, 0, 0, 0, 0},
		{true, 0, 0, 8 * 1024, 1024},
		{true, -1, -1, 0, 0},
		{true, 100, 7, 100, 7},
		{false, 100, 7, 100, 7},
	} {
		cfg := config.Default()
		if c.tokens {
			cfg.Server.AuthTokensFile = "/tokens"
		}
		cfg.Workspace.MaxPrincipalDiskMiB, cfg.Workspace.MaxWorkspacesPerPrincipal = c.disk, c.workspaces
		if got := principalDisk(cfg); got != c.wantDisk {
			t.Errorf("%+v: disk %d", c, got)
		}
		if got := principalWorkspaces(cfg); got != c.wantWS {
			t.Errorf("%+v: workspaces %d", c, got)
		}
	}
}
