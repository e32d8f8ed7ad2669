//go:build !linux

package main

import (
	"fmt"
	"io"
)

// runFabricIncast needs Linux network namespaces.
func runFabricIncast(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "goroce fabric incast: Linux only")
	return 1
}
