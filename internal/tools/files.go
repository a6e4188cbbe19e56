package tools

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"execd/internal/frontend"
	"execd/internal/jsonrpc"
	"execd/internal/workspace"
)

// Workspace files seen from outside: as MCP resources
// (workspace://{workspace}/{+path}, resources/templates/list, /list and
// /read) and through the read_file and write_file tools, for clients
// without resources. Both read and write through the workspace registry,
// which confines paths and charges the quota exactly as the guest's own
// /workspace does, holding the workspace's turn.

// Limits of the file methods and tools.
const (
	// maxResourceBytes is the largest file resources/read returns.
	maxResourceBytes = 4 << 20
	// readFileDefault and readFileMax are read_file's length when none is
	// given and the most it reads at once.
	readFileDefault = 256 << 10
	readFileMax     = 1 << 20
	// writeFileMax is the largest content write_file takes when the
	// server's body limit holds it in base64 (writeLimit).
	writeFileMax = 4 << 20
	// writeEnvelope is what a write_file request needs beside its content:
	// the JSON-RPC envelope, the workspace id and the path.
	writeEnvelope = 64 << 10
	// maxResultFiles is how many changed files a result of execute_code
	// names.
	maxResultFiles = 20
)

const uriScheme = "workspace://"

// fileURI is the resource URI of a file of a workspace: the path expanded
// as RFC 6570 {+path} does (reserved characters and "/" kept, everything
// else percent-encoded), but for "?" and "#", which would start the URI's
// query and fragment and are percent-encoded too.
func fileURI(ws, p string) string {
	var b strings.Builder
	b.WriteString(uriScheme)
	b.WriteString(ws)
	b.WriteByte('/')
	for i := 0; i < len(p); i++ {
		c := p[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~:/[]@!$&'()*+,;=", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// parseFileURI reads workspace://{workspace}/{+path}; ok is false for a
// URI of another scheme.
func parseFileURI(uri string) (ws, p string, ok bool, err error) {
	rest, found := strings.CutPrefix(uri, uriScheme)
	if !found {
		return "", "", false, nil
	}
	ws, enc, _ := strings.Cut(rest, "/")
	if err := workspace.ValidateID(ws); err != nil {
		return "", "", true, fmt.Errorf("the URI does not name a workspace (%s)", err)
	}
	if strings.ContainsAny(enc, "?#") {
		return "", "", true, errors.New("a file's URI has no query or fragment: a \"?\" or \"#\" in a file's name is written %3F or %23")
	}
	if strings.HasSuffix(enc, "/") {
		return "", "", true, errors.New("the URI ends in \"/\": it names a directory, and only files are resources")
	}
	p, err = url.PathUnescape(enc)
	if err != nil {
		return "", "", true, fmt.Errorf("the URI's path is not percent-encoded correctly: %v", err)
	}
	return ws, p, true, nil
}

// mimeOf guesses a file's media type from its bytes (when head is not
// nil), then from its name; a fixed table, so that the answer does not
// depend on the host's mime.types.
func mimeOf(name string, head []byte) string {
	if m := workspace.ImageType(head); m != "" {
		return m
	}
	if t, ok := mimeTypes[strings.ToLower(path.Ext(name))]; ok {
		return t
	}
	if head != nil && isText(head) {
		return "text/plain"
	}
	return "application/octet-stream"
}

var mimeTypes = map[string]string{
	".txt": "text/plain", ".md": "text/markdown", ".csv": "text/csv", ".tsv": "text/tab-separated-values",
	".json": "application/json", ".jsonl": "application/jsonl", ".xml": "application/xml", ".yaml": "application/yaml", ".yml": "application/yaml",
	".html": "text/html", ".htm": "text/html", ".css": "text/css", ".js": "text/javascript", ".mjs": "text/javascript", ".py": "text/x-python",
	".log": "text/plain", ".sql": "application/sql", ".svg": "image/svg+xml", ".pdf": "application/pdf", ".zip": "application/zip",
	".gz": "application/gzip", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp",
	".sqlite": "application/vnd.sqlite3", ".db": "application/vnd.sqlite3", ".wasm": "application/wasm",
}

// isText reports UTF-8 without NUL bytes.
func isText(b []byte) bool {
	return utf8.Valid(b) && !strings.ContainsRune(string(b), 0)
}

// fileError is the message of a registry error about a file.
func fileError(err error) string {
	var we *workspace.Error
	if errors.As(err, &we) {
		return we.Msg
	}
	return err.Error()
}

// fileResources are the workspace files as resources: the template, the
// files changed lately, and reads of workspace:// URIs.
func (t *tools) fileResources() frontend.Resources {
	return frontend.Resources{
		Templates: []map[string]any{{
			"uriTemplate": uriScheme + "{workspace}/{+path}",
			"name":        "workspace-file",
			"title":       "A file of a workspace",
			"description": "A file under /workspace of one of your workspaces: workspace is its id, path the file's path below /workspace.",
		}},
		List:    t.listFiles,
		Read:    t.readResource,
		Private: true,
		URIs:    uriScheme + "{workspace}/{path}",
	}
}

// listFiles lists the files the caller's runs and write_file changed
// lately (it depends on the principal only, never on the connection).
func (t *tools) listFiles(_ context.Context, c *frontend.Call) []map[string]any {
	var list []map[string]any
	for _, f := range t.exec.RecentFiles(c.Principal()) {
		e := map[string]any{
			"uri":      fileURI(f.Workspace, f.Path),
			"name":     f.Workspace + "/" + f.Path,
			"mimeType": mimeOf(f.Path, nil),
			"size":     f.Size,
		}
		if c.Version() != frontend.Version20250326 {
			e["annotations"] = map[string]any{"lastModified": f.Modified.UTC().Format(time.RFC3339)}
		}
		list = append(list, e)
	}
	return list
}

// readResource reads a workspace:// URI; nil for any other.
func (t *tools) readResource(ctx context.Context, c *frontend.Call, uri string) (any, *jsonrpc.Error) {
	ws, p, mine, err := parseFileURI(uri)
	if !mine {
		return nil, nil
	}
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: " + err.Error(), Data: map[string]any{"uri": uri}}
	}
	c.Tag("workspace", ws)
	d, err := t.exec.ReadFile(ctx, c.Principal(), ws, p, 0, maxResourceBytes+1)
	if err != nil {
		switch {
		case errors.Is(err, workspace.ErrNotFound), errors.Is(err, workspace.ErrFileNotFound):
			return nil, frontend.ResourceNotFound(c, uri, fileError(err))
		case errors.Is(err, workspace.ErrInvalidPath), errors.Is(err, workspace.ErrInvalidID):
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: " + fileError(err), Data: map[string]any{"uri": uri}}
		case ctx.Err() != nil:
			return nil, nil
		}
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "Internal error: %s", fileError(err))
	}
	if d.Size > maxResourceBytes {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Data: map[string]any{"uri": uri, "size": d.Size, "limit": maxResourceBytes},
			Message: fmt.Sprintf("Invalid params: %s is %d bytes; resources/read returns files of at most %d bytes. Read it in parts with the read_file tool (offset, length)", d.Path, d.Size, maxResourceBytes)}
	}
	item := map[string]any{"uri": uri, "mimeType": mimeOf(d.Path, d.Data)}
	if isText(d.Data) {
		item["text"] = string(d.Data)
	} else {
		item["blob"] = base64.StdEncoding.EncodeToString(d.Data)
	}
	return map[string]any{"contents": []any{item}}, nil
}

// The file tools.

const pathDesc = "The file's path: relative to /workspace (\"out/data.csv\") or absolute under it (\"/workspace/out/data.csv\")."

// readFileArgs are read_file's arguments.
type readFileArgs struct {
	Workspace string `json:"workspace" header:"Workspace" desc:"The workspace id."`
	Path      string `json:"path" missing:"the file's path under /workspace"`
	Offset    int64  `json:"offset,omitempty" minimum:"0" desc:"The byte to start at (default 0)."`
	Length    int64  `json:"length,omitempty" minimum:"1"`
}

func (t *tools) addReadFile() error {
	return frontend.AddTool(t.srv, frontend.Tool[readFileArgs]{
		Name:  "read_file",
		Title: "Read a file",
		Description: fmt.Sprintf("Read a file of a workspace (a path under /workspace). Text comes back as it is (encoding utf-8), anything else in base64. "+
			"At most %d bytes at a time (%d without length); truncated and nextOffset say when there is more.", readFileMax, readFileDefault),
		Properties: map[string]map[string]any{
			"path":   {"description": pathDesc},
			"length": {"maximum": readFileMax, "description": fmt.Sprintf("How many bytes to read at most (default %d).", readFileDefault)},
		},
		Annotations: annotationsReadOnly,
		Run:         t.readFile,
	})
}

func (t *tools) readFile(ctx context.Context, c *frontend.Call, in readFileArgs) (any, *jsonrpc.Error) {
	length := in.Length
	if length == 0 {
		length = readFileDefault
	}
	return t.workspaceOp(ctx, c, in.Workspace, "nothing was read", func(ws string) (map[string]any, error) {
		d, err := t.exec.ReadFile(ctx, c.Principal(), ws, in.Path, in.Offset, length)
		if err != nil {
			return nil, err
		}
		data := d.Data
		out := map[string]any{"path": "/workspace/" + d.Path, "uri": fileURI(ws, d.Path), "size": d.Size, "offset": d.Offset}
		// A chunk that ends inside a UTF-8 sequence of a text file ends
		// before it instead.
		text := isText(data)
		for cut := 1; !text && cut <= 3 && cut < len(data) && d.Offset+int64(len(data)) < d.Size; cut++ {
			if isText(data[:len(data)-cut]) {
				data, text = data[:len(data)-cut], true
			}
		}
		if text {
			out["encoding"], out["content"] = "utf-8", string(data)
		} else {
			out["encoding"], out["content"] = "base64", base64.StdEncoding.EncodeToString(data)
		}
		out["length"] = len(data)
		if end := d.Offset + int64(len(data)); end < d.Size {
			out["truncated"], out["nextOffset"] = true, end
		}
		return out, nil
	})
}

// writeFileArgs are write_file's arguments.
type writeFileArgs struct {
	Workspace string  `json:"workspace" header:"Workspace" desc:"The workspace id."`
	Path      string  `json:"path" desc:"The file's path: relative to /workspace (\"in/data.csv\") or absolute under it." missing:"the file's path under /workspace"`
	Content   string  `json:"content" desc:"The file's content." missing:"the file's content (a string)"`
	Encoding  *string `json:"encoding,omitempty" enum:"utf-8,base64" desc:"How content is written: utf-8 (default) or base64."`
}

// writeLimit is the largest content write_file takes: writeFileMax, or
// less where the server's body limit could not carry that much in base64,
// so that every content the description promises arrives at the tool and a
// larger one gets the tool's own refusal rather than the transport's.
func writeLimit(maxBody int64) int {
	fits := (maxBody - writeEnvelope) / 4 * 3
	return int(max(0, min(fits, writeFileMax)))
}

func (t *tools) addWriteFile() error {
	t.writeMax = writeLimit(t.srv.MaxBodyBytes())
	return frontend.AddTool(t.srv, frontend.Tool[writeFileArgs]{
		Name:  "write_file",
		Title: "Write a file",
		Description: fmt.Sprintf("Write a file into a workspace (a path under /workspace; directories are made as needed), replacing what was there, "+
			"for the code to use. Text as it is (encoding utf-8, the default) or bytes in base64. At most %d bytes; the workspace's disk quota applies.", t.writeMax),
		Annotations: map[string]any{"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false},
		Run:         t.writeFile,
	})
}

func (t *tools) writeFile(ctx context.Context, c *frontend.Call, in writeFileArgs) (any, *jsonrpc.Error) {
	data := []byte(in.Content)
	switch deref(in.Encoding) {
	case "", "utf-8":
	case "base64":
		var err error
		if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
			return toolError("", "content is not valid base64: "+err.Error()), nil
		}
	default:
		return toolError("", fmt.Sprintf("encoding must be utf-8 or base64, not %q", *in.Encoding)), nil
	}
	if len(data) > t.writeMax {
		return toolError("", fmt.Sprintf("the content is %d bytes; write_file takes at most %d. Write it in parts from code, or generate it in the sandbox", len(data), t.writeMax)), nil
	}
	return t.workspaceOp(ctx, c, in.Workspace, "nothing was written", func(ws string) (map[string]any, error) {
		f, err := t.exec.WriteFile(ctx, c.Principal(), ws, in.Path, data)
		if err != nil {
			return nil, err
		}
		return map[string]any{"path": "/workspace/" + f.Path, "size": f.Size, "uri": fileURI(ws, f.Path)}, nil
	})
}
