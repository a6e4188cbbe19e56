package tools

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"execd/internal/frontend"
	"execd/internal/workspace"
)

// execute_code's result is the commonest answer, so it is written by hand
// rather than through a map and encoding/json's reflection. The bytes are
// exactly what json.Marshal of the equivalent map would give (keys sorted,
// HTML characters escaped), so the wire is the same; the tests compare the
// two (encode_test.go).

// execOutput is execute_code's structuredContent, in its wire order.
type execOutput struct {
	Status     string  `json:"status"`
	Stdout     string  `json:"stdout"`
	Stderr     string  `json:"stderr"`
	Result     *string `json:"result,omitempty"`
	Error      string  `json:"error,omitempty"`
	Workspace  string  `json:"workspace,omitempty"`
	Language   string  `json:"language,omitempty"`
	DurationMs int64   `json:"durationMs"`
	Truncated  bool    `json:"truncated"`
	Reset      bool    `json:"reset,omitempty"`
	// ResetReason is the code of workspace.ResetReason when Reset.
	ResetReason string `json:"reset_reason,omitempty"`
	// Notice is what else the model must know, in sentences.
	Notice string `json:"notice,omitempty"`
	// Files are the files the run created or changed, at most
	// maxResultFiles; MoreFiles says it changed more.
	Files     []fileRef `json:"files,omitempty"`
	MoreFiles bool      `json:"moreFiles,omitempty"`
	// Images counts the images the result carries as image blocks.
	Images int `json:"images,omitempty"`
	// Network lists the hosts the run's requests reached.
	Network []hostUse `json:"network,omitempty"`
	// ToolCalls are the run's calls of upstream tools (code mode), by
	// tool and outcome.
	ToolCalls []toolCallUse `json:"toolCalls,omitempty"`
}

// toolCallUse is how many calls a run made of one upstream tool with one
// outcome, in its wire order.
type toolCallUse struct {
	Server  string `json:"server"`
	Tool    string `json:"tool"`
	Outcome string `json:"outcome"`
	Count   int    `json:"count"`
}

// hostUse is a host a run reached and how many requests did, in its wire
// order.
type hostUse struct {
	Host     string `json:"host"`
	Requests int    `json:"requests"`
}

// fileRef names one changed file, in its wire order.
type fileRef struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	URI  string `json:"uri"`
}

// appendTo writes o as JSON; escapeHTML as encoding/json's option.
func (o *execOutput) appendTo(b []byte, escapeHTML bool) []byte {
	b = append(b, `{"status":`...)
	b = appendJSONString(b, o.Status, escapeHTML)
	b = append(b, `,"stdout":`...)
	b = appendJSONString(b, o.Stdout, escapeHTML)
	b = append(b, `,"stderr":`...)
	b = appendJSONString(b, o.Stderr, escapeHTML)
	if o.Result != nil {
		b = append(b, `,"result":`...)
		b = appendJSONString(b, *o.Result, escapeHTML)
	}
	if o.Error != "" {
		b = append(b, `,"error":`...)
		b = appendJSONString(b, o.Error, escapeHTML)
	}
	if o.Workspace != "" {
		b = append(b, `,"workspace":`...)
		b = appendJSONString(b, o.Workspace, escapeHTML)
	}
	if o.Language != "" {
		b = append(b, `,"language":`...)
		b = appendJSONString(b, o.Language, escapeHTML)
	}
	b = append(b, `,"durationMs":`...)
	b = strconv.AppendInt(b, o.DurationMs, 10)
	b = append(b, `,"truncated":`...)
	b = strconv.AppendBool(b, o.Truncated)
	if o.Reset {
		b = append(b, `,"reset":true`...)
	}
	if o.ResetReason != "" {
		b = append(b, `,"reset_reason":`...)
		b = appendJSONString(b, o.ResetReason, escapeHTML)
	}
	if o.Notice != "" {
		b = append(b, `,"notice":`...)
		b = appendJSONString(b, o.Notice, escapeHTML)
	}
	if len(o.Files) > 0 {
		b = append(b, `,"files":[`...)
		for i, f := range o.Files {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"path":`...)
			b = appendJSONString(b, f.Path, escapeHTML)
			b = append(b, `,"size":`...)
			b = strconv.AppendInt(b, f.Size, 10)
			b = append(b, `,"uri":`...)
			b = appendJSONString(b, f.URI, escapeHTML)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if o.MoreFiles {
		b = append(b, `,"moreFiles":true`...)
	}
	if o.Images > 0 {
		b = append(b, `,"images":`...)
		b = strconv.AppendInt(b, int64(o.Images), 10)
	}
	if len(o.Network) > 0 {
		b = append(b, `,"network":[`...)
		for i, h := range o.Network {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"host":`...)
			b = appendJSONString(b, h.Host, escapeHTML)
			b = append(b, `,"requests":`...)
			b = strconv.AppendInt(b, int64(h.Requests), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(o.ToolCalls) > 0 {
		b = append(b, `,"toolCalls":[`...)
		for i, c := range o.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"server":`...)
			b = appendJSONString(b, c.Server, escapeHTML)
			b = append(b, `,"tool":`...)
			b = appendJSONString(b, c.Tool, escapeHTML)
			b = append(b, `,"outcome":`...)
			b = appendJSONString(b, c.Outcome, escapeHTML)
			b = append(b, `,"count":`...)
			b = strconv.AppendInt(b, int64(c.Count), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// execResult is execute_code's CallToolResult: the text block is the
// structured content serialised without HTML escapes (what the model
// reads), then an image block per image and a resource_link block per
// changed file; the whole is then escaped as json.Marshal would. A result
// with images has no structuredContent (RATIONALE.md, "Why do results with
// images carry no structuredContent?").
type execResult struct {
	out     execOutput
	isError bool
	images  []workspace.Picture
}

// EncodeResult implements frontend.EncodedResult.
func (r execResult) EncodeResult(env frontend.ResultEnvelope) json.RawMessage {
	text := r.out.appendTo(make([]byte, 0, 256), false)
	b := make([]byte, 0, 2*len(text)+160)
	b = append(b, '{')
	b = env.AppendMeta(b)
	b = append(b, `"content":[{"text":`...)
	b = appendJSONString(b, string(text), true)
	b = append(b, `,"type":"text"}`...)
	for _, img := range r.images {
		b = append(b, `,{"data":"`...)
		b = base64.StdEncoding.AppendEncode(b, img.Data)
		b = append(b, `","mimeType":`...)
		b = appendJSONString(b, img.MIME, true)
		b = append(b, `,"type":"image"}`...)
	}
	for _, f := range r.out.Files {
		b = append(b, `,{"mimeType":`...)
		b = appendJSONString(b, mimeOf(f.Path, nil), true)
		b = append(b, `,"name":`...)
		b = appendJSONString(b, f.Path, true)
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, f.Size, 10)
		b = append(b, `,"type":"resource_link","uri":`...)
		b = appendJSONString(b, f.URI, true)
		b = append(b, '}')
	}
	b = append(b, `],"isError":`...)
	b = strconv.AppendBool(b, r.isError)
	b = env.AppendResultType(b)
	if len(r.images) == 0 {
		b = append(b, `,"structuredContent":`...)
		b = r.out.appendTo(b, true)
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string exactly as encoding/json
// writes it: control characters, quote and backslash escaped (\b \f \n \r
// \t by name), invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped, and,
// with escapeHTML, <, > and & as \u003c, \u003e and \u0026.
func appendJSONString(b []byte, s string, escapeHTML bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!escapeHTML || c != '<' && c != '>' && c != '&') {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
