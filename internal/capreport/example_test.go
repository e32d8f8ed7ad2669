package capreport_test

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/internal/capreport"
)

// ExampleBuild makes the HTML report of a capture.
func ExampleBuild() {
	f, err := capture.Open("../../testdata/pcaps/read_bw_s8.pcap")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	r := capreport.Build(f, "read_bw_s8.pcap", nil)
	var page bytes.Buffer
	if err := capreport.Write(&page, r); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(r.Flows.Connections), "connection,", r.Total, "findings,", strings.Count(page.String(), "<svg"), "charts")
	// Output:
	// 1 connection, 0 findings, 4 charts
}
