package tools

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"

	"execd/internal/frontend"
	"execd/internal/workspace"
)

// mapResult is what execResult replaces: the result as a map, shaped and
// marshalled by encoding/json.
func mapResult(t *testing.T, s *frontend.Server, era frontend.Era, r execResult) []byte {
	t.Helper()
	m := frontend.StructuredResult(r.out, r.isError)
	content := m["content"].([]map[string]any)
	for _, img := range r.images {
		content = append(content, map[string]any{"type": "image", "mimeType": img.MIME, "data": base64.StdEncoding.EncodeToString(img.Data)})
	}
	for _, f := range r.out.Files {
		content = append(content, map[string]any{"type": "resource_link", "uri": f.URI, "name": f.Path, "size": f.Size, "mimeType": mimeOf(f.Path, nil)})
	}
	m["content"] = content
	if len(r.images) > 0 {
		delete(m, "structuredContent")
	}
	b, err := s.EncodeResult(era, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestExecResultEncodesAsTheMapWould(t *testing.T) {
	s := newTestServer(testOptions(), &fakeExec{})
	v := `<b>&"x"` + "\u2028\x01\xff"
	for _, out := range []execOutput{
		{Status: "ok", Workspace: "w", Language: "javascript", DurationMs: 3},
		{Status: "error", Stdout: "a\nb\t<c>", Stderr: "\u00e9\u2029", Result: &v, Error: "TypeError: x\n    at <eval>", Workspace: "分析", Language: "python", DurationMs: 1204, Truncated: true, Reset: true,
			ResetReason: "killed", Notice: "Earlier variables are gone <&>."},
		{Status: "error", Error: "missing argument code"},
		{Status: "ok", Workspace: "w", Files: []fileRef{{Path: "/workspace/a <b>.png", Size: 7, URI: "workspace://w/a%20%3Cb%3E.png"}, {Path: "/workspace/c", Size: 0, URI: "workspace://w/c"}}, MoreFiles: true, Images: 2},
		{Status: "ok", Workspace: "w", Network: []hostUse{{Host: "api.example.com", Requests: 3}, {Host: "[::1]:8443", Requests: 1}}},
		{Status: "error", Network: []hostUse{{Host: "a<b>&", Requests: 1}}, Images: 1},
		{Status: "ok", ToolCalls: []toolCallUse{{Server: "gh", Tool: "list_issues", Outcome: "ok", Count: 3}, {Server: "gh", Tool: "<x>", Outcome: "limit", Count: 1}}},
	} {
		for _, era := range []frontend.Era{frontend.EraLegacy, frontend.EraModern} {
			for _, isErr := range []bool{false, true} {
				r := execResult{out: out, isError: isErr}
				if out.Images > 0 {
					r.images = []workspace.Picture{{MIME: "image/png", Data: []byte("\x89PNG\r\n\x1a\n<&>")}, {MIME: "image/gif", Data: []byte("GIF89a")}}
				}
				if got, want := mustEncode(t, s, era, r), mapResult(t, s, era, r); !bytes.Equal(got, want) {
					t.Errorf("%s era:\n got %s\nwant %s", era, got, want)
				}
			}
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"plain", "<a href=\"x\">&amp;</a>", "\x00\x1f\x7f", "\u2028\u2029", "\xff\xfe", "é分析😀", `\\"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s, true); !bytes.Equal(got, want) {
			t.Fatalf("escapeHTML: %q; encoding/json %q", got, want)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		if got := appendJSONString(nil, s, false); !bytes.Equal(got, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))) {
			t.Fatalf("no escapeHTML: %q; encoding/json %q", got, buf.Bytes())
		}
	})
}

// mustEncode is r as the engine sends it in era.
func mustEncode(t *testing.T, s *frontend.Server, era frontend.Era, r execResult) []byte {
	t.Helper()
	b, err := s.EncodeResult(era, r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
