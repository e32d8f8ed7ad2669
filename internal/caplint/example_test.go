package caplint_test

import (
	"fmt"
	"os"

	"github.com/goroce/goroce/internal/caplint"
)

// ExampleLint lints the capture of goroce's own traffic over an impaired
// link: the link corrupted two packets, and nothing else breaks a rule.
func ExampleLint() {
	f, err := os.Open("../../testdata/cap/impaired.pcap")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	findings, _, err := caplint.Lint(f)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, x := range findings {
		fmt.Println(x.Frame, x.Rule, x.Conn)
	}
	// Output:
	// 65 ICRC 1
	// 77 ICRC 1
}
