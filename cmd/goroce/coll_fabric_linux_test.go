package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/fabric"
	"github.com/goroce/goroce/internal/fabric/fabrictest"
	"github.com/goroce/goroce/internal/testutil"
)

// splitFabric cuts goroce coll --fabric's output into nccl-tests' part and
// the fabric's summary after it.
func splitFabric(t *testing.T, out string) (table, summary string) {
	t.Helper()
	i := strings.Index(out, "#\n# goroce fabric: ")
	require.GreaterOrEqual(t, i, 0, "no fabric summary:\n%s", out)
	return out[:i], out[i:]
}

// summaryCounts parses the summary's whole-job line.
func summaryCounts(t *testing.T, summary string) map[string]uint64 {
	t.Helper()
	m := regexp.MustCompile(`whole job: (\d+) QPs sent (\d+) packets, retransmitted (\d+) \(\S+ %; Go-Back-N (\d+), NAK sequence errors (\d+)\); CNPs sent (\d+), received (\d+), rate cuts (\d+); CE marks (\d+), tbf drops (\d+)`).FindStringSubmatch(summary)
	require.NotNil(t, m, summary)
	out := map[string]uint64{}
	for i, k := range []string{"qps", "sent", "retransmitted", "gbn", "seqnak", "cnps_sent", "cnps_received", "cuts", "marks", "drops"} {
		out[k], _ = strconv.ParseUint(m[i+1], 10, 64)
	}
	return out
}

// TestCollFabric runs goroce coll on a namespace fabric as root (issue 26
// parts 2 and 5): an all-reduce of 4 ranks interleaved over 2 leaves of 2
// hosts, 2 spines at 200 Mbit/s, 4 QPs per connection. The table is
// clean; the summary names each rank's host, the per-spine load of every
// timed run, the job's counters, the ideal and the model's prediction,
// and every ring connection's QPs with their source ports and the spine
// each took; the spines the QPs took account for the bytes the spines
// forwarded; and the report is a self-contained page with every part.
func TestCollFabric(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a namespace fabric and runs a job across it; skipped under -short")
	}
	f := fabrictest.Up(t, fabric.Config{HostsPerLeaf: 2, Spines: 2, Rate: 200 * fabric.Mbit, Buffer: 4 << 20})
	report := filepath.Join(t.TempDir(), "r.html")
	out, errOut, code := runGoroce(t, 3*time.Minute, "coll", "all_reduce", "-np", "4", "--fabric", f.Name, "--placement", "interleaved",
		"-b", "256K", "-e", "1M", "-f", "4", "-n", "2", "-w", "1", "--ceiling=false", "--algo", "ring", "--qps-per-conn", "4", "--sample-every", "4", "--report", report)
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	table, summary := splitFabric(t, out)
	requireClean(t, table, "all_reduce_perf", 2)
	t.Logf("\n%s", summary)

	assert.Contains(t, summary, "ranks interleaved: 0:h0 1:h2 2:h1 3:h3")
	assert.Contains(t, summary, "congestion control --cc 200mbit; QP ACK timeout 1.073741824s")
	// The timed runs: two sizes, two halves, the spines' bytes.
	runs := regexp.MustCompile(`(?m)^# +(\d+) +(out|in) +([\d.]+) +([\d.]+) +([\d.]+) +([\d.]+) `).FindAllStringSubmatch(summary, -1)
	require.Len(t, runs, 4, summary)
	c := summaryCounts(t, summary)
	assert.Equal(t, uint64(4*3*2*4), c["qps"], "4 ranks × 3 peers × 2 channels × 4 QPs")
	assert.Less(t, float64(c["retransmitted"]), 0.01*float64(c["sent"]), "no retransmission storm")
	assert.Zero(t, c["drops"], "4 MiB buffers")
	assert.Regexp(t, `all_reduce 1048576 B \(ring\): busbw \S+ / \S+ GB/s .*; balanced ideal 0\.0246\d* GB/s.*the model's prediction`, summary,
		"the ideal: 200 Mbit/s × 0.986 of each spine's, 2 spines for 2 pairs each way")

	// Every ring connection crosses the leaves: 4 ranks × 2 channels, each
	// QP on one spine, from its own kernel-rule port. The same QPs from the
	// other end, if listed (their ACKs and clear-to-sends), show the same
	// port and spine: the kernel rule and the kernel's flow hash are both
	// symmetric.
	conn := regexp.MustCompile(`(?m)^# rank (\d) \(h\d\) -> rank (\d) \(h\d\) ch (\d):(.*)$`).FindAllStringSubmatch(summary, -1)
	require.GreaterOrEqual(t, len(conn), 8, summary)
	forward := 0
	qpRE := regexp.MustCompile(`qp(\d) 0x[0-9a-f]+ sport (\d+) s(\d)$`)
	perSpine := make([]int, 2)
	ports := map[string]string{}
	for _, m := range conn {
		from, _ := strconv.Atoi(m[1])
		to, _ := strconv.Atoi(m[2])
		qs := strings.Split(strings.TrimSpace(m[4]), ", ")
		require.Len(t, qs, 4, m[0])
		key := m[1] + m[2] + m[3]
		if to != (from+1)%4 {
			require.Equal(t, (to+1)%4, from, "the ring, forward or back: %s", m[0])
			key = m[2] + m[1] + m[3]
		}
		for _, q := range qs {
			qm := qpRE.FindStringSubmatch(q)
			require.NotNil(t, qm, "a QP with one sampled spine: %q", q)
			if prev, ok := ports[key+qm[1]]; ok {
				assert.Equal(t, prev, qm[2]+" "+qm[3], "both ends of a QP pair: one port, one spine (%s)", m[0])
			}
			ports[key+qm[1]] = qm[2] + " " + qm[3]
		}
		if to != (from+1)%4 {
			continue
		}
		forward++
		require.Len(t, qs, 4, m[0])
		for _, q := range qs {
			qm := qpRE.FindStringSubmatch(q)
			require.NotNil(t, qm, "a QP with one sampled spine: %q", q)
			port, _ := strconv.Atoi(qm[2])
			assert.GreaterOrEqual(t, port, 49152, "a kernel-rule port")
			k, _ := strconv.Atoi(qm[3])
			perSpine[k]++
		}
	}
	require.Equal(t, 8, forward, "the ring's connections: 4 ranks × 2 channels")
	// The QPs carry equal shares (messages round robin), so each spine's
	// share of the bytes is its share of the QPs, within the ACKs, CTSs and
	// chunking.
	for _, r := range runs {
		var bytes [2]float64
		for k := range 2 {
			bytes[k], _ = strconv.ParseFloat(r[3+k], 64)
		}
		got := bytes[0] / (bytes[0] + bytes[1])
		want := float64(perSpine[0]) / 32
		assert.InDelta(t, want, got, 0.1, "spine 0's share of %s %s: %v MB against %d of 32 QPs", r[1], r[2], bytes, perSpine[0])
	}

	doc, err := os.ReadFile(report)
	require.NoError(t, err)
	checkReport(t, doc)
	for _, want := range []string{`class="chart busbw"`, `class="chart fabric"`, `class="chart series"`, "rank 3", "l1-s1", "CNPs received", "measured / predicted"} {
		assert.Contains(t, string(doc), want)
	}
}

// TestCollFabricECN is the DCQCN demonstration of issue 26 part 3 with a
// collective: an all-to-all of 4 ranks, two on each leaf, whose
// cross-leaf traffic all goes through one spine at 100 Mbit/s with 1 MiB
// of buffer per port. With DCQCN on (--cc fitted to the link) the
// receivers' NPs answer the CE marks with CNPs, the senders cut their
// rates, and the links drop (almost) nothing; with it off the buffer
// overflows and the QPs go back N. The two runs are alternated.
func TestCollFabricECN(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a namespace fabric and runs a job across it; skipped under -short")
	}
	f := fabrictest.Up(t, fabric.Config{HostsPerLeaf: 2, Spines: 1, Rate: 100 * fabric.Mbit, Buffer: 1 << 20})
	counts := map[string]map[string]uint64{}
	for _, mode := range []string{"auto", "off"} {
		out, errOut, code := runGoroce(t, 3*time.Minute, "coll", "alltoall", "-np", "4", "--fabric", f.Name, "--placement", "block",
			"-b", "16M", "-e", "16M", "-n", "1", "-w", "0", "-c", "0", "--ceiling=false", "--cc", mode)
		require.Equal(t, 0, code, "%s\n%s", out, errOut)
		_, summary := splitFabric(t, out)
		counts[mode] = summaryCounts(t, summary)
		t.Logf("--cc %s: %v", mode, counts[mode])
	}
	on, off := counts["auto"], counts["off"]
	assert.Positive(t, on["cnps_sent"], "the NPs sent CNPs")
	assert.Equal(t, on["cnps_sent"], on["cnps_received"], "every CNP reached its QP")
	assert.Positive(t, on["cuts"], "the RPs cut their rates")
	assert.Positive(t, on["marks"])
	assert.Zero(t, off["cnps_sent"]+off["cuts"], "no DCQCN when off")
	assert.Greater(t, off["drops"], uint64(100), "without DCQCN the buffer overflows")
	assert.Positive(t, off["gbn"], "and the QPs go back N")
	assert.LessOrEqual(t, float64(on["drops"]), 0.1*float64(off["drops"]), "tbf drops with DCQCN on / off")
	assert.Less(t, on["retransmitted"], off["retransmitted"])
}

// checkReport checks what the report promises: well-formed XML, no script,
// nothing outside the page.
func checkReport(t *testing.T, doc []byte) {
	t.Helper()
	testutil.RequireXML(t, doc)
	s := strings.ToLower(string(doc))
	assert.NotContains(t, s, "<script")
	assert.NotContains(t, s, "http://")
	assert.NotContains(t, s, "https://")
}

// TestCollReportLoopback: --report without a fabric (unprivileged, two
// ranks on loopback) writes a page with the busbw chart and a table row
// for every size, the job's counters, and no fabric part; the table on
// stdout is nccl-tests' as without --report.
func TestCollReportLoopback(t *testing.T) {
	report := filepath.Join(t.TempDir(), "r.html")
	out, errOut, code := runGoroce(t, time.Minute, "coll", "all_reduce", "-np", "2", "-b", "64K", "-e", "256K", "-f", "4",
		"-n", "2", "-w", "1", "--ceiling=false", "--report", report)
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	line := "# goroce: report " + report + "\n"
	require.True(t, strings.HasSuffix(out, line), "the report's line last:\n%s", out)
	requireClean(t, strings.TrimSuffix(out, line), "all_reduce_perf", 2)
	assert.NotContains(t, out, "# goroce fabric:")
	doc, err := os.ReadFile(report)
	require.NoError(t, err)
	checkReport(t, doc)
	s := string(doc)
	assert.Contains(t, s, `class="chart busbw"`)
	assert.NotContains(t, s, `class="chart fabric"`)
	for _, size := range []string{"65536", "262144"} {
		assert.Contains(t, s, `<td class="n">`+size+`</td>`)
	}
	assert.Regexp(t, `<td>packets sent</td><td class="n">[1-9]\d*</td>`, s, "the ranks' QP counters reached the report")
	assert.Contains(t, s, "all_reduce, 2 ranks")
}
