package frontend

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
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
	return append(b, '}')
}

// execResult is execute_code's CallToolResult: the text block is the
// structured content serialised without HTML escapes (what the model
// reads), and the whole is then escaped as json.Marshal would.
type execResult struct {
	out     execOutput
	isError bool
}

func (r execResult) encode(era Era, version string) json.RawMessage {
	text := r.out.appendTo(make([]byte, 0, 256), false)
	b := make([]byte, 0, 2*len(text)+160)
	b = append(b, '{')
	if era == EraModern {
		b = append(b, `"_meta":{"`+metaServerInfo+`":{"name":"`+ServerName+`","version":`...)
		b = appendJSONString(b, version, true)
		b = append(b, `}},`...)
	}
	b = append(b, `"content":[{"text":`...)
	b = appendJSONString(b, string(text), true)
	b = append(b, `,"type":"text"}],"isError":`...)
	b = strconv.AppendBool(b, r.isError)
	if era == EraModern {
		b = append(b, `,"resultType":"complete"`...)
	}
	b = append(b, `,"structuredContent":`...)
	b = r.out.appendTo(b, true)
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
