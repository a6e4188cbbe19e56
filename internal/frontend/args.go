package frontend

import (
	"encoding/json"
	"errors"
	"fmt"
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

func (s argSchema) declares(key string) bool {
	i := sort.SearchStrings(s.known, key)
	return i < len(s.known) && s.known[i] == key
}

// decode reads raw, the arguments object, by exact key. It returns the
// -32602 answer that names the offending key.
func (s argSchema) decode(tool string, raw json.RawMessage) (arguments, *jsonrpc.Error) {
	var args arguments
	var seen map[string]bool // beyond a few arguments, for the duplicate check
	var bad *jsonrpc.Error
	err := jsonrpc.Object(raw, func(k, v []byte) error {
		key := string(k)
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
		if !s.declares(key) {
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

// stringArg returns a string argument: nil when absent or null, an error
// naming the argument when it is not a string.
func (a arguments) stringArg(key string) (*string, error) {
	raw := a.get(key)
	if jsonrpc.IsNull(raw) {
		return nil, nil
	}
	s, ok := jsonrpc.String(raw)
	if !ok {
		return nil, fmt.Errorf("argument %s must be a string", key)
	}
	return &s, nil
}

// boolArg is stringArg for a boolean.
func (a arguments) boolArg(key string) (*bool, error) {
	raw := a.get(key)
	if jsonrpc.IsNull(raw) {
		return nil, nil
	}
	var b bool
	if json.Unmarshal(raw, &b) != nil {
		return nil, fmt.Errorf("argument %s must be a boolean", key)
	}
	return &b, nil
}

// intArg is stringArg for an integer within [lo, hi]; 0 when absent.
func (a arguments) intArg(key string, lo, hi int64) (int64, error) {
	raw := a.get(key)
	if jsonrpc.IsNull(raw) {
		return 0, nil
	}
	var n int64
	if json.Unmarshal(raw, &n) != nil || n < lo || n > hi {
		return 0, fmt.Errorf("argument %s must be an integer from %d to %d", key, lo, hi)
	}
	return n, nil
}
