package capreport_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/goroce/goroce/internal/capreport"
)

// ExampleBuild makes the HTML report of a capture.
func ExampleBuild() {
	f, err := os.Open("../../testdata/pcaps/read_bw_s8.pcap")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	r, err := capreport.Build(f, "read_bw_s8.pcap", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	var page bytes.Buffer
	if err := capreport.Write(&page, r); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(r.Flows.Connections), "connection,", r.Total, "findings,", strings.Count(page.String(), "<svg"), "charts")
	// Output:
	// 1 connection, 0 findings, 4 charts
}
