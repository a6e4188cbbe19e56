package jsonrpc

import "execd/internal/jsonscan"

// The scanner's functions under their old names, for the engine, which
// still reads its messages' members with them; they are jsonscan's, and new
// code imports internal/jsonscan.

// Object is jsonscan.Object.
func Object(b []byte, each func(key, value []byte) error) error { return jsonscan.Object(b, each) }

// Array is jsonscan.Array.
func Array(b []byte, each func(item []byte) error) error { return jsonscan.Array(b, each) }

// IsObject is jsonscan.IsObject.
func IsObject(raw []byte) bool { return jsonscan.IsObject(raw) }

// String is jsonscan.String.
func String(raw []byte) (string, bool) { return jsonscan.String(raw) }

// IsNull is jsonscan.IsNull.
func IsNull(raw []byte) bool { return jsonscan.IsNull(raw) }
