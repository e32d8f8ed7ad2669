package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/goroce/goroce/coll"
	"github.com/goroce/goroce/internal/fabric"
	"github.com/goroce/goroce/qp"
)

// The spawner of goroce coll -np N --fabric (or --report) tells its ranks,
// through these variables, where to leave what the end of the run prints
// and draws: every rank writes its file (collRankFile) to
// $GOROCE_COLL_OUT/rank-N.json, and rank 0, given $GOROCE_COLL_FABRIC,
// snapshots that fabric's counters around each timed run.
const (
	envCollOut    = "GOROCE_COLL_OUT"
	envCollFabric = "GOROCE_COLL_FABRIC"
)

// collRankFile is what one rank reports to the spawner: its QPs with their
// source ports and counters, its device's counters and memory, and on
// rank 0 the table's rows and the fabric's counters of each timed run.
type collRankFile struct {
	Rank int    `json:"rank"`
	Host string `json:"host"`
	Addr string `json:"addr"`
	Pid  int    `json:"pid"`
	// QPs counts the rank's QPs; HeapJoin is the Go heap in use after the
	// join (QPs, posted receives, FIFO), HeapBefore before it.
	QPs        int             `json:"qps"`
	HeapBefore uint64          `json:"heap_before_join"`
	HeapJoin   uint64          `json:"heap_after_join"`
	JoinSec    float64         `json:"join_seconds"`
	Device     collDeviceStats `json:"device"`
	Conns      []collConnFile  `json:"conns"`
	// Rank 0: the configuration, the rows and the timed runs.
	Setup   *collSetup   `json:"setup,omitempty"`
	Rows    []collRow    `json:"rows,omitempty"`
	Windows []collWindow `json:"windows,omitempty"`
	Error   string       `json:"error,omitempty"`
}

type collDeviceStats struct {
	TxPackets uint64 `json:"tx_packets"`
	RxPackets uint64 `json:"rx_packets"`
	TxCNPs    uint64 `json:"tx_cnps"`
	RxCNPs    uint64 `json:"rx_cnps"`
	RxCE      uint64 `json:"rx_ce"`
}

type collConnFile struct {
	Peer    int          `json:"peer"`
	Channel int          `json:"channel"`
	QPs     []collQPFile `json:"qps"`
}

// collQPFile is one QP: its numbers and source port, and what it sent and
// repaired (rxe's counter names).
type collQPFile struct {
	Index         int    `json:"index"`
	QPN           uint32 `json:"qpn"`
	PeerQPN       uint32 `json:"peer_qpn"`
	SourcePort    uint16 `json:"sport"`
	Sent          uint64 `json:"sent_pkts"`
	Retransmitted uint64 `json:"retransmitted_pkts"`
	GoBackN       uint64 `json:"completer_retry_err"`
	SeqNAKs       uint64 `json:"rcvd_seq_err"`
	CNPsSent      uint64 `json:"cnps_sent"`
	CNPsReceived  uint64 `json:"cnps_received"`
	RateCuts      uint64 `json:"rate_cuts"`
}

// collSetup is the job's shape as rank 0 has it.
type collSetup struct {
	Collective  string  `json:"collective"`
	Ranks       int     `json:"ranks"`
	Algorithm   string  `json:"algorithm"`
	Channels    int     `json:"channels"`
	QPsPerConn  int     `json:"qps_per_conn"`
	Split       bool    `json:"split"`
	Chunk       int     `json:"chunk"`
	Steps       int     `json:"steps"`
	SourcePorts string  `json:"sport"`
	CC          string  `json:"cc"`
	MTU         int     `json:"mtu"`
	RankOrder   []int   `json:"rank_order,omitempty"`
	AvgBusBw    float64 `json:"avg_bus_bw"`
	Wrong       int     `json:"wrong"`
}

// collRow is one row of the table.
type collRow struct {
	Size  int         `json:"size"`
	Count int         `json:"count"`
	Type  string      `json:"type"`
	Redop string      `json:"redop"`
	Root  int         `json:"root"`
	Half  [2]collHalf `json:"halves"` // out-of-place, in place
}

type collHalf struct {
	TimeUs float64 `json:"time_us"`
	AlgBw  float64 `json:"alg_bw"`
	BusBw  float64 `json:"bus_bw"`
	Wrong  int64   `json:"wrong"`
	Check  bool    `json:"checked"`
}

// collWindow is one timed run (the iterations of one half of a row) as
// the fabric saw it: its counters from just before the barrier that
// starts the timing to just after the ranks agreed on the time.
type collWindow struct {
	Size    int           `json:"size"`
	Type    string        `json:"type"`
	InPlace bool          `json:"in_place"`
	Start   time.Time     `json:"start"`
	End     time.Time     `json:"end"`
	BusBw   float64       `json:"bus_bw"`
	Fabric  *fabric.Stats `json:"fabric,omitempty"`
}

// fabricWatch is rank 0's view of the fabric its job runs on: a snapshot
// of the counters before each timed run and the difference after it.
type fabricWatch struct {
	f       *fabric.Fabric
	before  *fabric.Stats
	start   time.Time
	windows []collWindow
	err     error
}

// begin snapshots the counters before a timed run.
func (w *fabricWatch) begin() {
	if w == nil {
		return
	}
	w.start = time.Now()
	w.before = nil
	if w.f == nil {
		return
	}
	s, err := w.f.Stats()
	if err != nil {
		w.err = err
		return
	}
	w.before = s
}

// end records the timed run that began at the last begin.
func (w *fabricWatch) end(size int, dt coll.DataType, inPlace bool, busbw float64) {
	if w == nil {
		return
	}
	win := collWindow{Size: size, Type: dt.String(), InPlace: inPlace, Start: w.start, End: time.Now(), BusBw: busbw}
	if w.f != nil && w.before != nil {
		s, err := w.f.Stats()
		if err == nil {
			win.Fabric, err = s.Sub(w.before)
		}
		if err != nil {
			w.err = err
		}
	}
	w.windows = append(w.windows, win)
}

// qpFiles returns a rank's connections with their QPs' counters.
func connFiles(c *coll.Comm) ([]collConnFile, int) {
	var out []collConnFile
	n := 0
	for _, ci := range c.Conns() {
		cf := collConnFile{Peer: ci.Peer, Channel: ci.Channel}
		for _, q := range ci.QPs {
			cn := q.QP.Counters()
			st := q.QP.CC()
			cf.QPs = append(cf.QPs, collQPFile{Index: q.Index, QPN: q.QPN, PeerQPN: q.PeerQPN, SourcePort: q.SourcePort,
				Sent: cn.Load(qp.CounterSentPkts), Retransmitted: cn.Load(qp.CounterRetransmittedPkts),
				GoBackN: cn.Load(qp.CounterCompleterRetryErr), SeqNAKs: cn.Load(qp.CounterRcvdSeqErr),
				CNPsSent: st.CNPsSent, CNPsReceived: st.CNPsReceived, RateCuts: st.RP.Decreases})
			n++
		}
		out = append(out, cf)
	}
	return out, n
}

// heapInuse returns the Go heap in use after a collection.
func heapInuse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// writeRankFile writes rf to dir/rank-N.json (through a temporary file,
// so the spawner never reads half of one).
func writeRankFile(dir string, rf *collRankFile) error {
	b, err := json.Marshal(rf)
	if err != nil {
		return err
	}
	name := filepath.Join(dir, fmt.Sprintf("rank-%d.json", rf.Rank))
	if err := os.WriteFile(name+".tmp", b, 0o644); err != nil {
		return err
	}
	return os.Rename(name+".tmp", name)
}

// readRankFiles reads the files of n ranks from dir; a rank without one
// is nil.
func readRankFiles(dir string, n int) []*collRankFile {
	out := make([]*collRankFile, n)
	for r := range n {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank-%d.json", r)))
		if err != nil {
			continue
		}
		var rf collRankFile
		if json.Unmarshal(b, &rf) == nil && rf.Rank == r {
			out[r] = &rf
		}
	}
	return out
}
