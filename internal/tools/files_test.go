package tools

import (
	"testing"

	"execd/internal/workspace"
)

// A file's URI reads back as its workspace and path, and no URI reads as
// a path the registry would take outside the workspace.
func FuzzFileURI(f *testing.F) {
	for _, s := range []string{"workspace://w/a.txt", "workspace://w/my%20notes.txt", "workspace://w/..%2F..%2Fx", "workspace://../x", "workspace://w", "file:///etc/passwd", "workspace://w/%zz", "workspace://w/a/b?c#d"} {
		f.Add(s, "w", "a b/ü?#%.txt")
	}
	f.Fuzz(func(t *testing.T, uri, ws, p string) {
		if gotWS, gotP, mine, err := parseFileURI(uri); mine && err == nil {
			if workspace.ValidateID(gotWS) != nil {
				t.Fatalf("parseFileURI(%q) gave the workspace %q", uri, gotWS)
			}
			_, _ = workspace.CleanPath(gotP) // the registry judges the path
		}
		clean, err := workspace.CleanPath(p)
		if err != nil || workspace.ValidateID(ws) != nil {
			return
		}
		gotWS, gotP, mine, err := parseFileURI(fileURI(ws, clean))
		if !mine || err != nil || gotWS != ws || gotP != clean {
			t.Fatalf("fileURI(%q, %q) = %q reads back as %q, %q (%v, %v)", ws, clean, fileURI(ws, clean), gotWS, gotP, mine, err)
		}
	})
}
