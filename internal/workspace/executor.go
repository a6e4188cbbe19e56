package workspace

import "context"

// Executor runs code in workspaces and keeps them: what the tools above
// the registry need of it. *Manager implements it (the methods are
// documented there), and so does cluster.Shared, which wraps a Manager for
// several instances sharing one data directory. Errors meant for the user
// are *Error.
type Executor interface {
	Run(ctx context.Context, req Request) (Outcome, error)
	ListPage(principal string, from *ListFrom, limit int) (page []Info, more bool)
	Reset(ctx context.Context, principal, id string, files bool) error
	Delete(ctx context.Context, principal, id string) error
	Checkpoint(ctx context.Context, principal, id, name string) (string, error)
	RestoreCheckpoint(ctx context.Context, principal, id, checkpoint string) error
	Fork(ctx context.Context, principal, id, newID string) (string, error)
	ReadFile(ctx context.Context, principal, id, path string, offset, length int64) (FileData, error)
	WriteFile(ctx context.Context, principal, id, path string, data []byte) (FileInfo, error)
	RecentFiles(principal string) []FileInfo
	// NewID mints the id of a workspace that a call creates before it runs
	// (a run that must be named while it waits for input): the same minter
	// Run uses for a Request without a Workspace.
	NewID() string
}

var _ Executor = (*Manager)(nil)
