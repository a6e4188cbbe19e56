package packages

import "fmt"

// Code is the kind of an Error, for callers that branch on it (with
// errors.As) rather than on its text.
type Code string

const (
	// CodeOff: packages.npm or packages.python is off.
	CodeOff Code = "off"
	// CodeInvalid: a specifier, requirement or lock that does not parse.
	CodeInvalid Code = "invalid"
	// CodeDenied: packages.allow or packages.deny refuses a name.
	CodeDenied Code = "denied"
	// CodeNotFound: the registry or index has no such package, or no
	// version of it that satisfies what was asked.
	CodeNotFound Code = "not_found"
	// CodeNotPure: a Python project has no pure wheel (py3-none-any).
	CodeNotPure Code = "not_pure"
	// CodeConflict: two requirements of one Python project that no version
	// satisfies together.
	CodeConflict Code = "conflict"
	// CodeTooLarge: a package over packages.max_package_bytes, or a
	// workspace over packages.max_total_bytes.
	CodeTooLarge Code = "too_large"
	// CodeIntegrity: a download whose hash is not the one the registry, the
	// index or the lock gives.
	CodeIntegrity Code = "integrity"
	// CodeUnsafe: an archive with an entry that would land outside its
	// directory (../, an absolute path, a link pointing out).
	CodeUnsafe Code = "unsafe"
	// CodeRegistry: the registry or index failed or answered something
	// that is not what it should be (status, content type, JSON, HTML).
	CodeRegistry Code = "registry"
	// CodeTimeout: packages.fetch_timeout passed.
	CodeTimeout Code = "timeout"
)

// Error is why packages could not be installed. Message is the sentence
// for the person or model that asked: it names the package and, where one
// decides, the config key; it never holds a credential.
type Error struct {
	Code    Code
	Package string // the package at fault, when there is one
	Message string
}

func (e *Error) Error() string { return e.Message }

func errorf(code Code, pkg, format string, args ...any) *Error {
	return &Error{Code: code, Package: pkg, Message: fmt.Sprintf(format, args...)}
}
