package frontend

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

	"execd/internal/jsonrpc"
	"execd/internal/worker"
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
	// writeFileMax is the largest content write_file takes.
	writeFileMax = 4 << 20
	// maxResultFiles is how many changed files a result of execute_code
	// names.
	maxResultFiles = 20
)

// codeResourceNotFound is the 2025 revisions' error for an unknown
// resource (docs/specification/2025-11-25/server/resources.mdx, Error
// Handling); 2026-07-28 uses -32602 (SEP-2164).
const codeResourceNotFound = -32002

const uriScheme = "workspace://"

// fileURI is the resource URI of a file of a workspace: the path expanded
// as RFC 6570 {+path} does (reserved characters and "/" kept, everything
// else percent-encoded).
func fileURI(ws, p string) string {
	var b strings.Builder
	b.WriteString(uriScheme)
	b.WriteString(ws)
	b.WriteByte('/')
	for i := 0; i < len(p); i++ {
		c := p[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~:/?#[]@!$&'()*+,;=", c) >= 0 {
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
	if m := worker.ImageType(head); m != "" {
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

// The resources methods. Extensions (the conformance fixtures) add their
// own resources beside the workspace files; their Read answers the URIs
// it knows.

func (s *Server) resourceTemplates(_ context.Context, c *Call) (any, *jsonrpc.Error) {
	tpls := []map[string]any{{
		"uriTemplate": uriScheme + "{workspace}/{+path}",
		"name":        "workspace-file",
		"title":       "A file of a workspace",
		"description": "A file under /workspace of one of your workspaces: workspace is its id, path the file's path below /workspace.",
	}}
	if rs := s.feat.resources; rs != nil {
		tpls = append(tpls, rs.Templates...)
	}
	return s.cacheable(c, map[string]any{"resourceTemplates": tpls}, cachePublic), nil
}

// listResources lists the files the caller's runs and write_file changed
// lately (it depends on the principal only, never on the connection).
func (s *Server) listResources(_ context.Context, c *Call) (any, *jsonrpc.Error) {
	if !jsonrpc.IsNull(c.meta.head.cursor) {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: unknown cursor (the list has one page)")
	}
	var list []map[string]any
	if rs := s.feat.resources; rs != nil {
		list = append(list, rs.List...)
	}
	for _, f := range s.exec.RecentFiles(c.principal) {
		e := map[string]any{
			"uri":      fileURI(f.Workspace, f.Path),
			"name":     f.Workspace + "/" + f.Path,
			"mimeType": mimeOf(f.Path, nil),
			"size":     f.Size,
		}
		if c.version != Version20250326 {
			e["annotations"] = map[string]any{"lastModified": f.Modified.UTC().Format(time.RFC3339)}
		}
		list = append(list, e)
	}
	if list == nil {
		list = []map[string]any{}
	}
	return s.cacheable(c, map[string]any{"resources": list}, cachePrivate), nil
}

// notFound is the era's answer to an unknown resource.
func notFound(c *Call, uri, why string) *jsonrpc.Error {
	code := codeResourceNotFound
	if c.era == EraModern {
		code = jsonrpc.CodeInvalidParams
	}
	return &jsonrpc.Error{Code: code, Message: "Resource not found: " + why, Data: map[string]any{"uri": uri}}
}

func (s *Server) readResource(ctx context.Context, c *Call) (any, *jsonrpc.Error) {
	uri := rawString(c.meta.head.uri)
	if uri == "" {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: resources/read needs a uri")
	}
	ws, p, mine, err := parseFileURI(uri)
	if !mine {
		if rs := s.feat.resources; rs != nil {
			res, jerr := rs.Read(ctx, c, uri)
			if jerr != nil || res != nil {
				if jerr != nil {
					return nil, jerr
				}
				return s.cacheable(c, res, cachePublic), nil
			}
		}
		return nil, notFound(c, uri, "execd serves "+uriScheme+"{workspace}/{path} URIs only")
	}
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: " + err.Error(), Data: map[string]any{"uri": uri}}
	}
	c.setWorkspace(ws)
	d, err := s.exec.ReadFile(ctx, c.principal, ws, p, 0, maxResourceBytes+1)
	if err != nil {
		switch {
		case errors.Is(err, workspace.ErrNotFound), errors.Is(err, workspace.ErrFileNotFound):
			return nil, notFound(c, uri, fileError(err))
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
	return s.cacheable(c, map[string]any{"contents": []any{item}}, cachePrivate), nil
}

// The file tools.

func pathProp(desc string) map[string]any {
	return map[string]any{"type": "string", "description": desc}
}

func (s *Server) readFileTool() *tool {
	return &tool{
		name: "read_file",
		def: map[string]any{
			"title": "Read a file",
			"description": fmt.Sprintf("Read a file of a workspace (a path under /workspace). Text comes back as it is (encoding utf-8), anything else in base64. "+
				"At most %d bytes at a time (%d without length); truncated and nextOffset say when there is more.", readFileMax, readFileDefault),
			"inputSchema": objectSchema(map[string]any{
				"workspace": workspaceProp(),
				"path":      pathProp("The file's path: relative to /workspace (\"out/data.csv\") or absolute under it (\"/workspace/out/data.csv\")."),
				"offset":    map[string]any{"type": "integer", "minimum": 0, "description": "The byte to start at (default 0)."},
				"length":    map[string]any{"type": "integer", "minimum": 1, "maximum": readFileMax, "description": fmt.Sprintf("How many bytes to read at most (default %d).", readFileDefault)},
			}, "workspace", "path"),
			"annotations": annotationsReadOnly,
		},
		run: func(ctx context.Context, c *Call, args arguments) (any, *jsonrpc.Error) {
			p, err := args.stringArg("path")
			if err != nil || p == nil {
				return toolError("", "missing argument path: the file's path under /workspace"), nil
			}
			offset, err := args.intArg("offset", 0, 1<<62)
			if err != nil {
				return toolError("", err.Error()), nil
			}
			length, err := args.intArg("length", 1, readFileMax)
			if err != nil {
				return toolError("", err.Error()), nil
			}
			if length == 0 {
				length = readFileDefault
			}
			return s.workspaceOp(ctx, args, "nothing was read", func(ws string) (map[string]any, error) {
				d, err := s.exec.ReadFile(ctx, c.principal, ws, *p, offset, length)
				if err != nil {
					return nil, err
				}
				data := d.Data
				out := map[string]any{"path": "/workspace/" + d.Path, "uri": fileURI(ws, d.Path), "size": d.Size, "offset": d.Offset}
				// A chunk that ends inside a UTF-8 sequence of a text file
				// ends before it instead.
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
		},
	}
}

func (s *Server) writeFileTool() *tool {
	return &tool{
		name: "write_file",
		def: map[string]any{
			"title": "Write a file",
			"description": fmt.Sprintf("Write a file into a workspace (a path under /workspace; directories are made as needed), replacing what was there, "+
				"for the code to use. Text as it is (encoding utf-8, the default) or bytes in base64. At most %d bytes; the workspace's disk quota applies.", writeFileMax),
			"inputSchema": objectSchema(map[string]any{
				"workspace": workspaceProp(),
				"path":      pathProp("The file's path: relative to /workspace (\"in/data.csv\") or absolute under it."),
				"content":   map[string]any{"type": "string", "description": "The file's content."},
				"encoding":  map[string]any{"type": "string", "enum": []string{"utf-8", "base64"}, "description": "How content is written: utf-8 (default) or base64."},
			}, "workspace", "path", "content"),
			"annotations": map[string]any{"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false},
		},
		run: func(ctx context.Context, c *Call, args arguments) (any, *jsonrpc.Error) {
			p, err := args.stringArg("path")
			if err != nil || p == nil {
				return toolError("", "missing argument path: the file's path under /workspace"), nil
			}
			content, err := args.stringArg("content")
			if err != nil || content == nil {
				return toolError("", "missing argument content: the file's content (a string)"), nil
			}
			enc, err := args.stringArg("encoding")
			if err != nil {
				return toolError("", err.Error()), nil
			}
			data := []byte(*content)
			switch deref(enc) {
			case "", "utf-8":
			case "base64":
				if data, err = base64.StdEncoding.DecodeString(*content); err != nil {
					return toolError("", "content is not valid base64: "+err.Error()), nil
				}
			default:
				return toolError("", fmt.Sprintf("encoding must be utf-8 or base64, not %q", *enc)), nil
			}
			if len(data) > writeFileMax {
				return toolError("", fmt.Sprintf("the content is %d bytes; write_file takes at most %d. Write it in parts from code, or generate it in the sandbox", len(data), writeFileMax)), nil
			}
			return s.workspaceOp(ctx, args, "nothing was written", func(ws string) (map[string]any, error) {
				f, err := s.exec.WriteFile(ctx, c.principal, ws, *p, data)
				if err != nil {
					return nil, err
				}
				return map[string]any{"path": "/workspace/" + f.Path, "size": f.Size, "uri": fileURI(ws, f.Path)}, nil
			})
		},
	}
}
