// Package errs holds the error sentinels that several goroce packages
// share, so that errors.Is matches them whichever package returned them: a
// caller of roce checks roce.ErrInvalidArg and also catches an invalid
// argument that mr, cq or qp found. Each of those packages re-exports the
// sentinels it returns under the same name; none defines its own.
//
// The package imports nothing of the project, so the lowest packages (mr,
// cq) can use it.
package errs

import "errors"

var (
	// ErrInvalidArg means a configuration or argument is malformed.
	ErrInvalidArg = errors.New("goroce: invalid argument")
	// ErrClosed means the object, or the device it belongs to, is closed.
	ErrClosed = errors.New("goroce: closed")
)

// Narrow returns a new sentinel with text msg that errors.Is also matches
// to parent: a narrower case of a shared error, such as qp.ErrInvalidAttr of
// ErrInvalidArg. It is meant for package-level sentinels, created once.
func Narrow(msg string, parent error) error { return &narrowed{msg: msg, parent: parent} }

type narrowed struct {
	msg    string
	parent error
}

func (e *narrowed) Error() string { return e.msg }

// Unwrap returns the wider error, which is what lets errors.Is match it.
func (e *narrowed) Unwrap() error { return e.parent }
