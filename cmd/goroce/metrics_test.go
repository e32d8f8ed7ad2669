package main

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPerfMetricsAndStats runs a loopback perf with --metrics and
// --stats: during the run /metrics serves both devices in the Prometheus
// text format, and at the end --stats prints `rdma statistic show` lines.
func TestPerfMetricsAndStats(t *testing.T) {
	if testing.Short() {
		t.Skip("real UDP sockets; skipped with -short")
	}
	var stdout, stderr syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- runPerf([]string{"write", "-s", "65536", "-D", "1.5", "--local", "127.0.0.41:4791", "--remote", "127.0.0.42:4791",
			"--metrics", "127.0.0.1:0", "--stats"}, &stdout, &stderr)
	}()
	served := regexp.MustCompile(`serving metrics on (http://\S+/metrics)`)
	var url string
	for i := 0; i < 200 && url == ""; i++ {
		if m := served.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.NotEmpty(t, url, stderr.String())

	// Scrape until both devices have sent packets (the run has started).
	var sent map[string]float64
	for i := 0; i < 100 && len(sent) < 2; i++ {
		time.Sleep(20 * time.Millisecond)
		resp, err := http.Get(url)
		require.NoError(t, err)
		p := expfmt.NewTextParser(model.LegacyValidation)
		fams, err := p.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		sent = map[string]float64{}
		if f := fams["goroce_device_sent_pkts_total"]; f != nil {
			for _, m := range f.GetMetric() {
				if v := m.GetCounter().GetValue(); v > 0 {
					sent[m.GetLabel()[0].GetValue()] = v
				}
			}
		}
	}
	assert.Contains(t, sent, "127.0.0.41:4791")
	assert.Contains(t, sent, "127.0.0.42:4791")

	require.Equal(t, 0, <-code, stderr.String())
	out := stderr.String()
	assert.Regexp(t, `(?m)^link goroce0/1 sent_pkts [1-9]\d* rcvd_pkts [1-9]\d* duplicate_request 0 `, out)
	assert.Regexp(t, `(?m)^link goroce1/1 sent_pkts [1-9]\d* `, out)
	assert.Regexp(t, `(?m)^link goroce0/1 cntn \d+ qp-type RC pid \d+ comm \S+ sent_pkts [1-9]`, out)
	assert.Equal(t, 2, strings.Count(out, "    LQPN: <"), out)
	assert.Contains(t, stdout.String(), "65536")
}
