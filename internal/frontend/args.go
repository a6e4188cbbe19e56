package frontend

import (
	"encoding/json"
	"errors"
	"sort"
	"strings"

	"execd/internal/jsonrpc"
)

// A tool's arguments are read by exact key, once, before the call runs,
// and the same reading serves the mirrored Mcp-Param-* headers and the
// tool: no key may appear twice, a key that differs from a declared
// argument only in case is refused, and with additionalProperties: false
// so is any key the schema does not declare. Otherwise a header checked
// against "workspace" could be smuggled past by a "Workspace" that a
// case-insensitive or last-key-wins reader takes instead.

// arguments are the members of a tool call's arguments object, in order.
type arguments []argument

type argument struct {
	key   string
	value json.RawMessage
}

// get returns the value of key, or nil.
func (a arguments) get(key string) json.RawMessage {
	for _, m := range a {
		if m.key == key {
			return m.value
		}
	}
	return nil
}

// argSchema is what a tool declares of its arguments.
type argSchema struct {
	known  []string // the inputSchema's properties, sorted
	closed bool     // additionalProperties: false
}

func newArgSchema(inputSchema map[string]any) argSchema {
	var s argSchema
	props, _ := inputSchema["properties"].(map[string]any)
	for k := range props {
		s.known = append(s.known, k)
	}
	sort.Strings(s.known)
	s.closed = inputSchema["additionalProperties"] == false
	return s
}

// declared returns the declared name equal to key, so that a declared
// key costs no copy of its own; ok is false for any other key.
func (s argSchema) declared(key []byte) (name string, ok bool) {
	for _, k := range s.known {
		if k == string(key) {
			return k, true
		}
	}
	return "", false
}

// decode reads raw, the arguments object, by exact key. It returns the
// -32602 answer that names the offending key.
func (s argSchema) decode(tool string, raw json.RawMessage) (arguments, *jsonrpc.Error) {
	args := make(arguments, 0, len(s.known))
	var seen map[string]bool // beyond a few arguments, for the duplicate check
	var bad *jsonrpc.Error
	err := jsonrpc.Object(raw, func(k, v []byte) error {
		key, known := s.declared(k)
		if !known {
			key = string(k)
		}
		var dup bool
		if seen != nil {
			dup = seen[key]
		} else {
			dup = args.get(key) != nil
		}
		if dup {
			bad = argError("Invalid params: the argument %q appears twice", key)
			return errStop
		}
		if !known {
			for _, known := range s.known {
				if strings.EqualFold(known, key) {
					bad = argError("Invalid params: unknown argument %q (argument names are case-sensitive: did you mean %q?)", key, known)
					return errStop
				}
			}
			if s.closed {
				bad = argError("Invalid params: unknown argument %q; %s takes %s", key, tool, strings.Join(s.known, ", "))
				return errStop
			}
		}
		args = append(args, argument{key: key, value: v})
		if seen == nil && len(args) > 8 {
			seen = make(map[string]bool, 2*len(args))
			for _, a := range args {
				seen[a.key] = true
			}
		} else if seen != nil {
			seen[key] = true
		}
		return nil
	})
	if bad != nil {
		return nil, bad
	}
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: arguments must be an object")
	}
	return args, nil
}

// errStop ends a walk whose answer is already known.
var errStop = errors.New("stop")

// argError is the -32602 answer naming the argument key, also in data.
func argError(format, key string, more ...any) *jsonrpc.Error {
	e := jsonrpc.Errorf(jsonrpc.CodeInvalidParams, format, append([]any{key}, more...)...)
	e.Data = map[string]any{"argument": key}
	return e
}
