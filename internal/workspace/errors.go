package workspace

// Code says which kind of failure an [Error] is.
type Code int

const (
	// InvalidID: the workspace id is not 1–64 characters of [A-Za-z0-9._-].
	InvalidID Code = iota + 1
	// InvalidPrincipal: the caller's principal is empty.
	InvalidPrincipal
	// UnsupportedLanguage: no guest runs the requested language.
	UnsupportedLanguage
	// NotFound: the workspace does not exist for this principal.
	NotFound
	// Closed: the Manager is closed (the daemon is shutting down).
	Closed
	// StartFailed: a fresh interpreter for the workspace could not be made,
	// or its files or saved state could not be changed.
	StartFailed
	// Exists: the checkpoint name or the fork's workspace id is taken.
	Exists
	// NotSaveable: an interpreter could not be saved for a checkpoint or a
	// fork (it holds open files, or this build cannot save interpreters).
	NotSaveable
	// LimitReached: a per-workspace limit (checkpoints, disk quota) would
	// be exceeded.
	LimitReached
	// Exhausted: the process is out of file descriptors.
	Exhausted
	// InvalidPath: a file path is malformed, leaves the workspace, or
	// names something that is not a regular file.
	InvalidPath
	// FileNotFound: the workspace has no file at the path.
	FileNotFound
	// PackagesFailed: packages could not be installed (Err is the
	// *packages.Error that says why).
	PackagesFailed
)

func (c Code) String() string {
	switch c {
	case InvalidID:
		return "invalid_id"
	case InvalidPrincipal:
		return "invalid_principal"
	case UnsupportedLanguage:
		return "unsupported_language"
	case NotFound:
		return "not_found"
	case Closed:
		return "closed"
	case StartFailed:
		return "start_failed"
	case Exists:
		return "exists"
	case NotSaveable:
		return "not_saveable"
	case LimitReached:
		return "limit_reached"
	case Exhausted:
		return "exhausted"
	case InvalidPath:
		return "invalid_path"
	case FileNotFound:
		return "file_not_found"
	case PackagesFailed:
		return "packages_failed"
	}
	return "unknown"
}

// Error is the one error type of this package. Msg is written to be shown to
// a model as is. Match a kind with errors.Is against the Err… values, or
// errors.As to read the code and message.
type Error struct {
	Code Code
	Msg  string
	Err  error // the underlying cause, if any
}

func (e *Error) Error() string { return e.Msg }

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, workspace.ErrNotFound) works whatever the message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Values to match with errors.Is.
var (
	ErrInvalidID           = &Error{Code: InvalidID, Msg: "invalid workspace id"}
	ErrInvalidPrincipal    = &Error{Code: InvalidPrincipal, Msg: "invalid principal"}
	ErrUnsupportedLanguage = &Error{Code: UnsupportedLanguage, Msg: "unsupported language"}
	ErrNotFound            = &Error{Code: NotFound, Msg: "workspace not found"}
	ErrClosed              = &Error{Code: Closed, Msg: "execd is shutting down; the code did not run"}
	ErrStartFailed         = &Error{Code: StartFailed, Msg: "could not start an interpreter"}
	ErrExists              = &Error{Code: Exists, Msg: "already exists"}
	ErrLimitReached        = &Error{Code: LimitReached, Msg: "limit reached"}
	ErrExhausted           = &Error{Code: Exhausted, Msg: "out of file descriptors"}
	ErrInvalidPath         = &Error{Code: InvalidPath, Msg: "invalid path"}
	ErrFileNotFound        = &Error{Code: FileNotFound, Msg: "no such file"}
)
