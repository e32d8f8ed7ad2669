package metrics_test

import (
	"bufio"
	"fmt"
	"net/netip"
	"strings"

	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/roce"
	"github.com/goroce/goroce/roce/metrics"
)

// An Exporter of one device: its counters in the Prometheus text format
// (an Exporter is also the http.Handler that serves them).
func Example() {
	d, err := roce.Open(roce.Config{Link: mem.NewNetwork().Attach(netip.MustParseAddrPort("10.0.0.1:4791"))})
	if err != nil {
		panic(err)
	}
	defer d.Close()
	e := metrics.NewExporter(d)
	var b strings.Builder
	if err := e.WriteText(&b); err != nil {
		panic(err)
	}
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "goroce_device_sent_pkts_total") || strings.HasPrefix(sc.Text(), "# TYPE goroce_device_sent_pkts_total") {
			fmt.Println(sc.Text())
		}
	}
	// Output:
	// # TYPE goroce_device_sent_pkts_total counter
	// goroce_device_sent_pkts_total{device="10.0.0.1:4791"} 0
}
