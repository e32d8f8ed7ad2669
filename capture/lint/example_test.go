package lint_test

import (
	"fmt"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/lint"
)

// ExampleLint lints the capture of goroce's own traffic over an impaired
// link: the link corrupted two packets, and nothing else breaks a
// transport rule. The CNP-DSCP warning is true of that traffic: goroce's
// UDP binding sends every datagram with one TOS, so A's CNPs carry DSCP 0
// like the data of B they throttle (CNPs of their own DSCP, 48 by
// default, are part of issue 14).
func ExampleLint() {
	r, err := capture.Open("../../testdata/cap/impaired.pcap")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	findings, _, err := lint.Lint(r)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, x := range findings {
		fmt.Println(x.Frame, x.Rule, x.Conn)
	}
	// Output:
	// 43 CNP-DSCP 1
	// 65 ICRC 1
	// 77 ICRC 1
}
