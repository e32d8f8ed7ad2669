//go:build !linux

package main

import (
	"fmt"
	"io"
)

// spawnReported needs Linux: the fabric's namespaces, and the report's
// rank files are written by ranks that --fabric places there.
func spawnReported(t *collTest, f *collFlags, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "goroce coll: --fabric and --report need Linux")
	return exitFailed
}
