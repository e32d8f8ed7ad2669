// Package doccheck holds TestGoDoc, which keeps the go doc of every public
// package of the module complete (issue 28): a doc.go whose package comment
// says what the package is, a runnable Example, and a doc comment on every
// exported name that starts with that name. It has no code of its own.
package doccheck
