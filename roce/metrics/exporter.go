package metrics

import (
	"bufio"
	"expvar"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/goroce/goroce/roce"
)

// devCounter names a device-level counter of the export: one name table,
// devCounterNames, and one loader, load.
type devCounter uint8

const (
	devSentPkts            devCounter = iota // Stats.TxPackets (rxe sent_pkts)
	devRcvdPkts                              // Stats.RxPackets (rxe rcvd_pkts)
	devDuplicateRequest                      // Σ QPs (rxe duplicate_request)
	devOutOfSeqRequest                       // Σ QPs (rxe out_of_seq_request)
	devRcvdRNRErr                            // Σ QPs (rxe rcvd_rnr_err)
	devSendRNRErr                            // Σ QPs (rxe send_rnr_err)
	devRcvdSeqErr                            // Σ QPs (rxe rcvd_seq_err)
	devAckDeferred                           // Σ QPs (rxe ack_deferred)
	devRetryExceededErr                      // Σ QPs (rxe retry_exceeded_err)
	devRetryRNRExceededErr                   // Σ QPs (rxe retry_rnr_exceeded_err)
	devCompleterRetryErr                     // Σ QPs (rxe completer_retry_err)
	devSendErr                               // Stats.SendErrors (rxe send_err)
	devNPCNPSent                             // Stats.TxCNPs (ConnectX np_cnp_sent)
	devNPECNMarked                           // Stats.RxECN[CE] (ConnectX np_ecn_marked_roce_packets)
	devRPCNPHandled                          // Stats.CNPsHandled (ConnectX rp_cnp_handled)
	devRPCNPIgnored                          // Stats.CNPsIgnored (ConnectX rp_cnp_ignored)
	devRcvdCNPs                              // Stats.RxCNPs
	devCNPsNoQP                              // Stats.CNPsNoQP
	devICRCIDFixups                          // Stats.ICRCIDFixups
	devRetransmittedPkts                     // Σ QPs
	devRkeyViolation                         // Σ QPs
	numDevCounters
)

// devCounterNames is the name table of devCounter.
var devCounterNames = [numDevCounters]string{
	devSentPkts:            "sent_pkts",
	devRcvdPkts:            "rcvd_pkts",
	devDuplicateRequest:    "duplicate_request",
	devOutOfSeqRequest:     "out_of_seq_request",
	devRcvdRNRErr:          "rcvd_rnr_err",
	devSendRNRErr:          "send_rnr_err",
	devRcvdSeqErr:          "rcvd_seq_err",
	devAckDeferred:         "ack_deferred",
	devRetryExceededErr:    "retry_exceeded_err",
	devRetryRNRExceededErr: "retry_rnr_exceeded_err",
	devCompleterRetryErr:   "completer_retry_err",
	devSendErr:             "send_err",
	devNPCNPSent:           "np_cnp_sent",
	devNPECNMarked:         "np_ecn_marked_roce_packets",
	devRPCNPHandled:        "rp_cnp_handled",
	devRPCNPIgnored:        "rp_cnp_ignored",
	devRcvdCNPs:            "rcvd_cnp_pkts",
	devCNPsNoQP:            "cnp_no_qp",
	devICRCIDFixups:        "icrc_ipid_fixups",
	devRetransmittedPkts:   "retransmitted_pkts",
	devRkeyViolation:       "rkey_violation",
}

// devFromQP maps the device counters that are sums over the QPs (as rxe
// counts them device-wide) to the QP counter summed.
var devFromQP = [...]struct {
	d devCounter
	q roce.Counter
}{
	{devDuplicateRequest, roce.CounterDuplicateRequest},
	{devOutOfSeqRequest, roce.CounterOutOfSeqRequest},
	{devRcvdRNRErr, roce.CounterRcvdRNRErr},
	{devSendRNRErr, roce.CounterSendRNRErr},
	{devRcvdSeqErr, roce.CounterRcvdSeqErr},
	{devAckDeferred, roce.CounterAckDeferred},
	{devRetryExceededErr, roce.CounterRetryExceededErr},
	{devRetryRNRExceededErr, roce.CounterRetryRNRExceededErr},
	{devCompleterRetryErr, roce.CounterCompleterRetryErr},
	{devRetransmittedPkts, roce.CounterRetransmittedPkts},
	{devRkeyViolation, roce.CounterRkeyViolation},
}

// dropReasons are the device's receive drops, the reason label of
// goroce_device_drops_total (named as the QP counters that count the
// same drops).
var dropReasons = [...]struct {
	name string
	load func(*roce.StatsSnapshot) uint64
}{
	{"dropped_no_qp", func(s *roce.StatsSnapshot) uint64 { return s.DroppedNoQP }},
	{"bad_addr", func(s *roce.StatsSnapshot) uint64 { return s.BadAddr }},
	{"bad_icrc", func(s *roce.StatsSnapshot) uint64 { return s.BadICRC }},
	{"bad_hdr", func(s *roce.StatsSnapshot) uint64 { return s.BadHdr }},
}

// ecnNames are the IP ECN codepoints, indexed by codepoint, the ecn label
// of goroce_device_rcvd_ecn_pkts_total.
var ecnNames = [4]string{"not_ect", "ect1", "ect0", "ce"}

// devSnap is one device's values in a scrape.
type devSnap struct {
	addr  string
	c     [numDevCounters]uint64
	drops [len(dropReasons)]uint64
	ecn   [4]uint64
	qps   []roce.QPSnapshot // by QPN
}

// load reads src's snapshot into the export's counters.
func load(src Source) devSnap {
	v := src.Snapshot()
	s := devSnap{addr: v.Addr.String(), qps: v.QPs}
	for _, f := range devFromQP {
		s.c[f.d] = v.QPTotals[f.q]
	}
	st := &v.Stats
	s.c[devSentPkts] = st.TxPackets
	s.c[devRcvdPkts] = st.RxPackets
	s.c[devSendErr] = st.SendErrors
	s.c[devNPCNPSent] = st.TxCNPs
	s.c[devNPECNMarked] = st.RxECN[3]
	s.c[devRPCNPHandled] = st.CNPsHandled
	s.c[devRPCNPIgnored] = st.CNPsIgnored
	s.c[devRcvdCNPs] = st.RxCNPs
	s.c[devCNPsNoQP] = st.CNPsNoQP
	s.c[devICRCIDFixups] = st.ICRCIDFixups
	for i, r := range dropReasons {
		s.drops[i] = r.load(st)
	}
	s.ecn = st.RxECN
	return s
}

// Source is what an Exporter reads: a *roce.Device, or anything else
// that takes snapshots of the same shape. Snapshot is called from the
// reader's goroutine, once per device per scrape.
type Source interface {
	// Snapshot copies the source's counters.
	Snapshot() roce.Snapshot
}

var _ Source = (*roce.Device)(nil)

// Exporter exports the counters of a set of devices and their QPs: in the
// Prometheus text format (ServeHTTP, WriteText), through expvar (Expvar,
// PublishExpvar) and as `rdma statistic show` lines (WriteStatistic).
// Devices are labelled by their address, QPs by QPN and peer. Its methods
// may be called from any goroutine; reading takes no lock of the data
// path and allocates only on the reader's side. The zero value exports no
// device.
type Exporter struct {
	mu   sync.Mutex // serializes Add and Remove
	devs atomic.Pointer[[]Source]
}

var _ http.Handler = (*Exporter)(nil)

// NewExporter returns an Exporter of devs.
func NewExporter(devs ...Source) *Exporter {
	e := &Exporter{}
	for _, d := range devs {
		e.Add(d)
	}
	return e
}

// Add adds d to the exported devices (once). d must be comparable (a
// *roce.Device is).
func (e *Exporter) Add(d Source) {
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.devices()
	if slices.Contains(old, d) {
		return
	}
	n := append(slices.Clip(old), d)
	e.devs.Store(&n)
}

// Remove removes d from the exported devices.
func (e *Exporter) Remove(d Source) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := slices.DeleteFunc(slices.Clone(e.devices()), func(x Source) bool { return x == d })
	e.devs.Store(&n)
}

func (e *Exporter) devices() []Source {
	if p := e.devs.Load(); p != nil {
		return *p
	}
	return nil
}

func (e *Exporter) snapshot() []devSnap {
	devs := e.devices()
	s := make([]devSnap, len(devs))
	for i, d := range devs {
		s[i] = load(d)
	}
	return s
}

// TextContentType is the Content-Type of the Prometheus text exposition
// format that ServeHTTP writes.
const TextContentType = "text/plain; version=0.0.4; charset=utf-8"

// ServeHTTP writes the metrics in the Prometheus text format 0.0.4.
func (e *Exporter) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", TextContentType)
	e.WriteText(w)
}

// qpLabelNames describes the labels of the QP metrics, in order.
const qpLabelNames = "device, qpn, peer (IP:port, empty until connected), peer_qpn"

// WriteText writes the metrics in the Prometheus text exposition format
// 0.0.4: each family once (# HELP, # TYPE, then one sample per device or
// QP), devices in the order they were added, QPs by QPN.
func (e *Exporter) WriteText(w io.Writer) error {
	snap := e.snapshot()
	bw := bufio.NewWriter(w)
	var b []byte
	flush := func() {
		bw.Write(b)
		b = b[:0]
	}
	head := func(name, help, typ string) {
		b = append(b, "# HELP "...)
		b = append(b, name...)
		b = append(b, ' ')
		b = append(b, help...)
		b = append(b, "\n# TYPE "...)
		b = append(b, name...)
		b = append(b, ' ')
		b = append(b, typ...)
		b = append(b, '\n')
	}
	devSample := func(name string, d *devSnap, lname, lval string, v uint64) {
		b = append(b, name...)
		b = append(b, `{device="`...)
		b = appendLabel(b, d.addr)
		if lname != "" {
			b = append(b, `",`...)
			b = append(b, lname...)
			b = append(b, `="`...)
			b = appendLabel(b, lval)
		}
		b = append(b, `"} `...)
		b = strconv.AppendUint(b, v, 10)
		b = append(b, '\n')
	}
	qpLabels := func(name string, d *devSnap, q *roce.QPSnapshot) {
		b = append(b, name...)
		b = append(b, `{device="`...)
		b = appendLabel(b, d.addr)
		b = append(b, `",qpn="`...)
		b = strconv.AppendUint(b, uint64(q.QPN), 10)
		b = append(b, `",peer="`...)
		if q.Peer.IsValid() {
			b = appendLabel(b, q.Peer.String())
		}
		b = append(b, `",peer_qpn="`...)
		if q.Peer.IsValid() {
			b = strconv.AppendUint(b, uint64(q.PeerQPN), 10)
		}
		b = append(b, `"} `...)
	}

	for k := range numDevCounters {
		name := "goroce_device_" + devCounterNames[k] + "_total"
		head(name, "Device counter "+devCounterNames[k]+" (rdma statistic name), by device address.", "counter")
		for i := range snap {
			devSample(name, &snap[i], "", "", snap[i].c[k])
		}
		flush()
	}
	head("goroce_device_drops_total", "Received packets dropped by the device, by reason.", "counter")
	for i := range snap {
		for r := range dropReasons {
			devSample("goroce_device_drops_total", &snap[i], "reason", dropReasons[r].name, snap[i].drops[r])
		}
	}
	head("goroce_device_rcvd_ecn_pkts_total", "Received packets by IP ECN codepoint.", "counter")
	for i := range snap {
		for c := range ecnNames {
			devSample("goroce_device_rcvd_ecn_pkts_total", &snap[i], "ecn", ecnNames[c], snap[i].ecn[c])
		}
	}
	flush()
	for k := range roce.Counter(roce.NumCounters) {
		name := "goroce_qp_" + k.String() + "_total"
		head(name, "QP counter "+k.String()+" (rdma statistic name), by "+qpLabelNames+".", "counter")
		for i := range snap {
			for j := range snap[i].qps {
				q := &snap[i].qps[j]
				qpLabels(name, &snap[i], q)
				b = strconv.AppendUint(b, q.Counters[k], 10)
				b = append(b, '\n')
			}
		}
		flush()
	}
	qpExtra := [...]struct {
		name, help, typ string
		val             func(q *roce.QPSnapshot, b []byte) []byte
	}{
		{"goroce_qp_np_cnp_sent_total", "CNPs sent by the QP's notification point.", "counter",
			func(q *roce.QPSnapshot, b []byte) []byte { return strconv.AppendUint(b, q.CNPsSent, 10) }},
		{"goroce_qp_rp_cnp_rcvd_total", "CNPs received for the QP (handled by its reaction point, or ignored when it is off).", "counter",
			func(q *roce.QPSnapshot, b []byte) []byte { return strconv.AppendUint(b, q.CNPsReceived, 10) }},
		{"goroce_qp_dcqcn_rate_bits_per_second", "Current rate of the QP's reaction point (DCQCN's RC); 0 with the reaction point off.", "gauge",
			func(q *roce.QPSnapshot, b []byte) []byte { return strconv.AppendFloat(b, float64(q.Rate), 'g', -1, 64) }},
	}
	for _, x := range qpExtra {
		head(x.name, x.help, x.typ)
		for i := range snap {
			for j := range snap[i].qps {
				q := &snap[i].qps[j]
				qpLabels(x.name, &snap[i], q)
				b = x.val(q, b)
				b = append(b, '\n')
			}
		}
		flush()
	}
	return bw.Flush()
}

// appendLabel appends v escaped as a label value of the text format:
// backslash, double quote and newline are escaped.
func appendLabel(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		case '\n':
			b = append(b, `\n`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// Expvar returns the metrics as a JSON-ready value for expvar.Func: a list
// of devices, each {"device": address, "counters": {name: value},
// "drops": {reason: value}, "rcvd_ecn_pkts": {codepoint: value}, "qps":
// [{"qpn", "peer", "peer_qpn", "counters", "np_cnp_sent", "rp_cnp_rcvd",
// "dcqcn_rate_bits_per_second"}]}, with the names of the text format less
// prefix and suffix.
func (e *Exporter) Expvar() any {
	snap := e.snapshot()
	out := make([]map[string]any, len(snap))
	for i := range snap {
		d := &snap[i]
		c := make(map[string]uint64, numDevCounters)
		for k := range numDevCounters {
			c[devCounterNames[k]] = d.c[k]
		}
		drops := make(map[string]uint64, len(dropReasons))
		for r := range dropReasons {
			drops[dropReasons[r].name] = d.drops[r]
		}
		ecn := make(map[string]uint64, len(ecnNames))
		for k := range ecnNames {
			ecn[ecnNames[k]] = d.ecn[k]
		}
		qps := make([]map[string]any, len(d.qps))
		for j := range d.qps {
			q := &d.qps[j]
			qc := make(map[string]uint64, roce.NumCounters)
			for k := range roce.Counter(roce.NumCounters) {
				qc[k.String()] = q.Counters[k]
			}
			m := map[string]any{
				"qpn": uint32(q.QPN), "counters": qc,
				"np_cnp_sent": q.CNPsSent, "rp_cnp_rcvd": q.CNPsReceived,
				"dcqcn_rate_bits_per_second": float64(q.Rate),
			}
			if q.Peer.IsValid() {
				m["peer"], m["peer_qpn"] = q.Peer.String(), uint32(q.PeerQPN)
			}
			qps[j] = m
		}
		out[i] = map[string]any{"device": d.addr, "counters": c, "drops": drops, "rcvd_ecn_pkts": ecn, "qps": qps}
	}
	return out
}

// PublishExpvar publishes the metrics as the expvar variable name, an
// expvar.Func of Expvar. Nothing is published unless it is called. Like
// expvar.Publish it panics if name is taken.
func (e *Exporter) PublishExpvar(name string) { expvar.Publish(name, expvar.Func(e.Expvar)) }

// WriteStatistic writes the counters as iproute2's `rdma statistic show`
// and `rdma statistic qp show` print them, so that the output diffs
// against rxe's: one line per device,
//
//	link goroce0/1 sent_pkts 12 rcvd_pkts 10 duplicate_request 0 …
//
// where goroceN is the device's index in the Exporter and the names are
// rxe's hw_counters (then ConnectX's and this project's), then one line
// per QP, each QP its own counter (cntn = QPN) as auto mode would bind it:
//
//	link goroce0/1 cntn 1234 qp-type RC pid 4242 comm goroce sent_pkts 6 …
//	    LQPN: <1234>
func (e *Exporter) WriteStatistic(w io.Writer) error {
	snap := e.snapshot()
	bw := bufio.NewWriter(w)
	var b []byte
	link := func(i int) {
		b = append(b, "link goroce"...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, "/1 "...)
	}
	pair := func(name string, v uint64) {
		b = append(b, name...)
		b = append(b, ' ')
		b = strconv.AppendUint(b, v, 10)
		b = append(b, ' ')
	}
	for i := range snap {
		d := &snap[i]
		link(i)
		for k := range numDevCounters {
			pair(devCounterNames[k], d.c[k])
		}
		for r := range dropReasons {
			pair(dropReasons[r].name, d.drops[r])
		}
		b = append(b[:len(b)-1], '\n')
	}
	pid, comm := os.Getpid(), filepath.Base(os.Args[0])
	for i := range snap {
		for j := range snap[i].qps {
			q := &snap[i].qps[j]
			link(i)
			b = append(b, "cntn "...)
			b = strconv.AppendUint(b, uint64(q.QPN), 10)
			b = append(b, " qp-type RC pid "...)
			b = strconv.AppendInt(b, int64(pid), 10)
			b = append(b, " comm "...)
			b = append(b, comm...)
			b = append(b, ' ')
			for k := range roce.Counter(roce.NumCounters) {
				pair(k.String(), q.Counters[k])
			}
			pair("np_cnp_sent", q.CNPsSent)
			pair("rp_cnp_rcvd", q.CNPsReceived)
			b = append(b[:len(b)-1], "\n    LQPN: <"...)
			b = strconv.AppendUint(b, uint64(q.QPN), 10)
			b = append(b, ">\n"...)
		}
	}
	bw.Write(b)
	return bw.Flush()
}
