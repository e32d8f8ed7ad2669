package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"expvar"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
	"github.com/goroce/goroce/roce/metrics"
)

// scrape is one parsed scrape: value by "name{label=value,…}" with the
// labels in the parser's (sorted) order.
type scrape map[string]float64

func key(name string, labels ...string) string {
	return name + "{" + strings.Join(labels, ",") + "}"
}

// parseScrape parses a scrape with the official parser, under the strict
// (legacy) metric-name rules, and checks each family's type.
func parseScrape(t *testing.T, r io.Reader) scrape {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(r)
	require.NoError(t, err)
	s := scrape{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			var v float64
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				require.True(t, strings.HasSuffix(name, "_total"), name)
				v = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			default:
				t.Fatalf("%s: unexpected type %v", name, f.GetType())
			}
			sort.Strings(ls)
			s[key(name, ls...)] = v
		}
	}
	return s
}

func get(t *testing.T, ts *httptest.Server) scrape {
	t.Helper()
	resp, err := http.Get(ts.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, metrics.TextContentType, resp.Header.Get("Content-Type"))
	assert.Equal(t, expfmt.TypeTextPlain, expfmt.ResponseFormat(resp.Header).FormatType())
	return parseScrape(t, resp.Body)
}

// counterView is what the test reads from the API directly, to compare
// with a scrape: the values under the metric names.
type counterView map[string]uint64

func view(devs []*roce.Device, qps []*roce.QP) counterView {
	v := counterView{}
	for i, d := range devs {
		dl := "device=" + d.LocalAddr().String()
		q := qps[i]
		ql := []string{dl, "peer=" + peerOf(qps, i), "peer_qpn=" + strconv.Itoa(int(qps[1-i].QPN())), "qpn=" + strconv.Itoa(int(q.QPN()))}
		// QP counters first, as the exporter reads them, so that the sums
		// bound the device's.
		c := q.Counters().Snapshot()
		for k := range qp.Counter(qp.NumCounters) {
			v[key("goroce_qp_"+k.String()+"_total", ql...)] = c[k]
		}
		cs := q.CC()
		v[key("goroce_qp_np_cnp_sent_total", ql...)] = cs.CNPsSent
		v[key("goroce_qp_rp_cnp_rcvd_total", ql...)] = cs.CNPsReceived
		st := d.Stats()
		v[key("goroce_device_sent_pkts_total", dl)] = st.TxPackets.Load()
		v[key("goroce_device_rcvd_pkts_total", dl)] = st.RxPackets.Load()
		v[key("goroce_device_ack_deferred_total", dl)] = c[qp.CounterAckDeferred]
		v[key("goroce_device_np_cnp_sent_total", dl)] = st.TxCNPs.Load()
		v[key("goroce_device_np_ecn_marked_roce_packets_total", dl)] = st.RxECN[link.CE].Load()
		v[key("goroce_device_rp_cnp_handled_total", dl)] = st.CNPsHandled.Load()
		v[key("goroce_device_rp_cnp_ignored_total", dl)] = st.CNPsIgnored.Load()
		v[key("goroce_device_drops_total", dl, "reason=bad_icrc")] = st.BadICRC.Load()
		v[key("goroce_device_drops_total", dl, "reason=dropped_no_qp")] = st.DroppedNoQP.Load()
		v[key("goroce_device_rcvd_ecn_pkts_total", dl, "ecn=ce")] = st.RxECN[link.CE].Load()
		v[key("goroce_device_rcvd_ecn_pkts_total", dl, "ecn=ect0")] = st.RxECN[link.ECT0].Load()
	}
	return v
}

func peerOf(qps []*roce.QP, i int) string {
	return netip.AddrPortFrom(qps[1-i].Info().Addr, 4791).String()
}

// metricsPair is two devices on a link/mem network that CE-marks every
// markEvery-th packet, so that DCQCN has CNPs to count and a rate to show.
type metricsPair struct {
	devs []*roce.Device
	qps  []*roce.QP
	cqs  []*cq.CQ
	src  *mr.Region
	dst  *mr.Region
}

// memDevice opens a device on n at addr with one QP and one CQ.
func memDevice(t testing.TB, n *mem.Network, addr string) (*roce.Device, *roce.QP, *mr.PD, *cq.CQ) {
	t.Helper()
	d, err := roce.Open(roce.Config{Link: n.Attach(netip.MustParseAddrPort(addr))})
	require.NoError(t, err)
	pd := d.AllocPD()
	c, err := d.CreateCQ(8192)
	require.NoError(t, err)
	q, err := d.CreateQP(roce.QPConfig{PD: pd, SendCQ: c, RecvCQ: c})
	require.NoError(t, err)
	return d, q, pd, c
}

func newMetricsPair(t *testing.T, markEvery uint64) *metricsPair {
	var n atomic.Uint64
	net := mem.New(mem.Config{QueueLen: 4096, Deliver: func(dg *link.Datagram) bool {
		if n.Add(1)%markEvery == 0 {
			dg.ECN = link.CE
		}
		return true
	}})
	p := &metricsPair{}
	var pds []*mr.PD
	for _, a := range []string{"10.0.0.1:4791", "10.0.0.2:4791"} {
		d, q, pd, c := memDevice(t, net, a)
		p.devs, p.qps, p.cqs, pds = append(p.devs, d), append(p.qps, q), append(p.cqs, c), append(pds, pd)
	}
	for i := range p.qps {
		require.NoError(t, p.qps[i].Connect(p.qps[1-i].Info(), roce.ConnectOptions{MTU: qp.MTU1024}))
	}
	var err error
	p.src, err = p.devs[0].RegisterMR(pds[0], make([]byte, 1<<20), mr.LocalWrite)
	require.NoError(t, err)
	p.dst, err = p.devs[1].RegisterMR(pds[1], make([]byte, 1<<20), mr.LocalWrite|mr.RemoteWrite)
	require.NoError(t, err)
	return p
}

// write posts n WRITEs of size bytes, at most depth outstanding, and waits
// for them.
func (p *metricsPair) write(t *testing.T, n, size, depth int) {
	wcs := make([]cq.Completion, 64)
	posted, done := 0, 0
	for done < n {
		for posted < n && posted-done < depth {
			require.NoError(t, p.qps[0].PostSend(&qp.SendWR{WRID: uint64(posted), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
				SGL:        []qp.SGE{{Addr: p.src.IOVA(), Length: uint32(size), LKey: p.src.LKey()}},
				RemoteAddr: p.dst.IOVA(), RKey: p.dst.RKey()}))
			posted++
		}
		k := p.cqs[0].Poll(wcs)
		for _, wc := range wcs[:k] {
			require.Equal(t, cq.StatusSuccess, wc.Status, wc.Status.String())
		}
		done += k
		if k == 0 {
			runtime.Gosched()
		}
	}
}

// sources returns the pair's devices as an Exporter's sources.
func (p *metricsPair) sources() []metrics.Source {
	s := make([]metrics.Source, len(p.devs))
	for i, d := range p.devs {
		s[i] = d
	}
	return s
}

func (p *metricsPair) close(t *testing.T) {
	for _, d := range p.devs {
		require.NoError(t, d.Close())
	}
}

// quiet waits until the counters stop moving (the last ACKs and CNPs are
// in) and returns them.
func (p *metricsPair) quiet(t *testing.T) counterView {
	prev := view(p.devs, p.qps)
	for i := 0; i < 100; i++ {
		time.Sleep(20 * time.Millisecond)
		v := view(p.devs, p.qps)
		if assert.ObjectsAreEqual(prev, v) {
			return v
		}
		prev = v
	}
	t.Fatal("counters keep moving")
	return nil
}

// TestMetricsScrapeDuringTransfer scrapes the Prometheus handler while a
// transfer runs and checks every value against the counters read through
// the API just before and just after (monotonic bounds), then, once the
// transfer is over, exactly, the DCQCN rate included.
func TestMetricsScrapeDuringTransfer(t *testing.T) {
	g0 := runtime.NumGoroutine()
	p := newMetricsPair(t, 20)
	e := metrics.NewExporter(p.sources()...)
	ts := httptest.NewServer(e)

	var wg sync.WaitGroup
	var finished atomic.Bool
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer finished.Store(true)
		p.write(t, 160, 256<<10, 8) // 40 MiB, 40,960 packets at MTU 1024
	}()
	mid := 0
	for !finished.Load() {
		before := view(p.devs, p.qps)
		s := get(t, ts)
		after := view(p.devs, p.qps)
		for k, lo := range before {
			v, ok := s[k]
			require.True(t, ok, "scrape lacks %s", k)
			hi := after[k]
			require.True(t, float64(lo) <= v && v <= float64(hi), "%s: scraped %v, outside [%d, %d]", k, v, lo, hi)
		}
		if !finished.Load() {
			mid++
		}
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	require.Positive(t, mid, "no scrape during the transfer")
	t.Logf("%d scrapes during the transfer", mid)

	final := p.quiet(t)
	s := get(t, ts)
	for k, v := range final {
		assert.Equal(t, float64(v), s[k], k)
	}
	for i, q := range p.qps {
		dl := "device=" + p.devs[i].LocalAddr().String()
		ql := key("goroce_qp_dcqcn_rate_bits_per_second", dl, "peer="+peerOf(p.qps, i),
			"peer_qpn="+strconv.Itoa(int(p.qps[1-i].QPN())), "qpn="+strconv.Itoa(int(q.QPN())))
		assert.Equal(t, float64(q.CC().Rate), s[ql], ql)
	}
	// CE marks made CNPs, and the sender's DCQCN slowed down.
	assert.Positive(t, s[key("goroce_device_np_cnp_sent_total", "device=10.0.0.2:4791")])
	assert.Positive(t, s[key("goroce_device_rp_cnp_handled_total", "device=10.0.0.1:4791")])
	assert.Positive(t, final[key("goroce_device_sent_pkts_total", "device=10.0.0.1:4791")])

	// A destroyed QP leaves the QP metrics; its counts stay in the
	// device's sums, as rxe's device-wide counters keep them.
	// A WRITE with a bad rkey gives b's QP an rkey_violation to keep.
	require.NoError(t, p.qps[0].PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
		SGL:        []qp.SGE{{Addr: p.src.IOVA(), Length: 64, LKey: p.src.LKey()}},
		RemoteAddr: p.dst.IOVA(), RKey: p.dst.RKey() + 1}))
	require.Equal(t, cq.StatusRemAccessErr, waitOne(t, p.cqs[0]).Status)
	rkey := key("goroce_device_rkey_violation_total", "device=10.0.0.2:4791")
	s = get(t, ts)
	require.Equal(t, 1.0, s[rkey])
	require.NoError(t, p.qps[1].Destroy())
	s2 := get(t, ts)
	assert.Equal(t, 1.0, s2[rkey])
	for k := range s2 {
		assert.False(t, strings.Contains(k, "qpn="+strconv.Itoa(int(p.qps[1].QPN()))) &&
			strings.Contains(k, "device=10.0.0.2"), "destroyed QP still exported: %s", k)
	}

	ts.Close()
	p.close(t)
	requireGoroutines(t, g0)
}

// TestMetricsExpvar: the expvar value is valid JSON with the numbers of
// the text format, and PublishExpvar publishes it under the given name.
func TestMetricsExpvar(t *testing.T) {
	p := newMetricsPair(t, 10)
	defer p.close(t)
	p.write(t, 20, 64<<10, 4)
	final := p.quiet(t)

	e := metrics.NewExporter(p.sources()...)
	name := fmt.Sprintf("goroce_test_metrics_%p", e) // -count=N publishes again
	e.PublishExpvar(name)
	js := expvar.Get(name).String()
	var got []struct {
		Device   string            `json:"device"`
		Counters map[string]uint64 `json:"counters"`
		Drops    map[string]uint64 `json:"drops"`
		QPs      []struct {
			QPN      uint32            `json:"qpn"`
			Peer     string            `json:"peer"`
			PeerQPN  uint32            `json:"peer_qpn"`
			Counters map[string]uint64 `json:"counters"`
			CNPsSent uint64            `json:"np_cnp_sent"`
			Rate     float64           `json:"dcqcn_rate_bits_per_second"`
		} `json:"qps"`
	}
	require.NoError(t, json.Unmarshal([]byte(js), &got), js)
	require.Len(t, got, 2)

	var text bytes.Buffer
	require.NoError(t, e.WriteText(&text))
	s := parseScrape(t, &text)
	for i, d := range got {
		dl := "device=" + d.Device
		assert.Equal(t, p.devs[i].LocalAddr().String(), d.Device)
		for name, v := range d.Counters {
			assert.Equal(t, s[key("goroce_device_"+name+"_total", dl)], float64(v), name)
		}
		for r, v := range d.Drops {
			assert.Equal(t, s[key("goroce_device_drops_total", dl, "reason="+r)], float64(v), r)
		}
		require.Len(t, d.QPs, 1)
		q := d.QPs[0]
		assert.Equal(t, uint32(p.qps[i].QPN()), q.QPN)
		assert.Equal(t, peerOf(p.qps, i), q.Peer)
		ql := []string{dl, "peer=" + q.Peer, "peer_qpn=" + strconv.Itoa(int(q.PeerQPN)), "qpn=" + strconv.Itoa(int(q.QPN))}
		require.Len(t, q.Counters, qp.NumCounters)
		for name, v := range q.Counters {
			assert.Equal(t, s[key("goroce_qp_"+name+"_total", ql...)], float64(v), name)
			assert.Equal(t, final[key("goroce_qp_"+name+"_total", ql...)], v, name)
		}
		assert.Equal(t, final[key("goroce_qp_np_cnp_sent_total", ql...)], q.CNPsSent)
		assert.Equal(t, float64(p.qps[i].CC().Rate), q.Rate)
	}
	assert.Positive(t, got[1].QPs[0].CNPsSent)
}

// TestMetricsStatistic: WriteStatistic prints `rdma statistic show` lines
// with rxe's names in rxe's order, then the QP lines.
func TestMetricsStatistic(t *testing.T) {
	p := newMetricsPair(t, 1<<62)
	defer p.close(t)
	p.write(t, 4, 4096, 4)
	p.quiet(t)
	var b bytes.Buffer
	require.NoError(t, metrics.NewExporter(p.sources()...).WriteStatistic(&b))
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	require.Len(t, lines, 6, b.String())
	rxe := "sent_pkts rcvd_pkts duplicate_request out_of_seq_request rcvd_rnr_err send_rnr_err rcvd_seq_err ack_deferred retry_exceeded_err retry_rnr_exceeded_err completer_retry_err send_err"
	for i := 0; i < 2; i++ {
		f := strings.Fields(lines[i])
		require.Equal(t, []string{"link", "goroce" + strconv.Itoa(i) + "/1"}, f[:2])
		var names []string
		for j := 2; j+1 < len(f); j += 2 {
			names = append(names, f[j])
		}
		assert.Equal(t, rxe, strings.Join(names[:12], " "))
		assert.Equal(t, strconv.FormatUint(p.devs[i].Stats().TxPackets.Load(), 10), f[3])
	}
	qpn := strconv.Itoa(int(p.qps[0].QPN()))
	assert.True(t, strings.HasPrefix(lines[2], "link goroce0/1 cntn "+qpn+" qp-type RC pid "), lines[2])
	assert.Contains(t, lines[2], " sent_pkts "+strconv.FormatUint(p.qps[0].Counters().Load(qp.CounterSentPkts), 10)+" ")
	assert.Equal(t, "    LQPN: <"+qpn+">", lines[3])
}

// waitOne waits for one completion on c.
func waitOne(t *testing.T, c *cq.CQ) cq.Completion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wc [1]cq.Completion
	n, err := c.Wait(ctx, wc[:])
	require.NoError(t, err)
	require.Equal(t, 1, n)
	return wc[0]
}

// requireGoroutines waits for the goroutine count to fall back to n.
func requireGoroutines(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < 200 && runtime.NumGoroutine() > n; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if got := runtime.NumGoroutine(); got > n {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines, want %d:\n%s", got, n, buf[:runtime.Stack(buf, true)])
	}
}
