package perf

import (
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/impair"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// Impaired puts an impairment (goroce perf|pingpong --impair) under a
// device: its Opener wraps the links a device opens, and it keeps the last
// one for the report. One goroutine sets it up; Link may then be read.
type Impaired struct {
	Config impair.Config
	// Link is the impaired link the opener made last (nil before).
	Link *impair.Link
}

// Opener returns open (nil: link/udp) wrapped in the impairment.
func (im *Impaired) Opener(open func(netip.AddrPort) (link.Link, error)) func(netip.AddrPort) (link.Link, error) {
	if open == nil {
		open = func(a netip.AddrPort) (link.Link, error) { return udp.Open(udp.Config{Addr: a}) }
	}
	return func(a netip.AddrPort) (link.Link, error) {
		l, err := open(a)
		if err != nil {
			return nil, err
		}
		il, err := impair.New(l, im.Config)
		if err != nil {
			l.Close()
			return nil, err
		}
		im.Link = il
		return il, nil
	}
}

// PeerReport is what the peer did about an impaired path, from this
// side's device and QP counters (rxe's names where rxe has the counter),
// and what the impairment did.
type PeerReport struct {
	Impair string        `json:"impair"`
	Link   impair.Report `json:"link"`

	// The peer as requester: its retransmitted requests that reached us
	// (duplicate_request: behind our expected PSN; our own duplicated
	// packets count too) and the requests that arrived after a gap
	// (out_of_seq_request; the first of a gap gets a NAK sequence error).
	DuplicateRequests uint64 `json:"duplicate_request"`
	OutOfSeqRequests  uint64 `json:"out_of_seq_request"`
	// The peer as responder: responses that matched no outstanding
	// request (repeated READ responses or ACKs), the NAKs it sent us.
	DuplicateResponses uint64 `json:"duplicate_responses"`
	NAKsReceived       uint64 `json:"rcvd_seq_err"`
	RNRsReceived       uint64 `json:"rcvd_rnr_err"`
	RNRsSent           uint64 `json:"send_rnr_err"`
	// Ours: packets we sent again (Go-Back-N and READ replays) and the
	// Go-Back-N retries that caused them.
	Retransmitted uint64 `json:"retransmitted_pkts"`
	Retries       uint64 `json:"completer_retry_err"`
	ReadReplays   uint64 `json:"read_replays"`
	// BadICRC counts received packets that failed the ICRC (those the
	// impairment corrupted, and any other).
	BadICRC uint64 `json:"bad_icrc"`
	// LongestStall is the longest gap between completions of the run's
	// loop (0 for a side that completes nothing) or, if longer, between
	// packets received from the peer.
	LongestStall   time.Duration `json:"longest_stall_ns"`
	LongestStallMs float64       `json:"longest_stall_ms"`
	StallBetween   string        `json:"stall_between"`
}

// NewPeerReport gathers the report of dev's qps over the impaired link l
// (nil: not impaired); completionGap is the run loop's longest gap between
// completions.
func NewPeerReport(dev *roce.Device, qps []*roce.QP, l *impair.Link, completionGap time.Duration) PeerReport {
	var r PeerReport
	for _, q := range qps {
		c := q.Counters()
		r.DuplicateRequests += c.Load(qp.CounterDuplicateRequest)
		r.OutOfSeqRequests += c.Load(qp.CounterOutOfSeqRequest)
		r.DuplicateResponses += c.Load(qp.CounterDroppedResponses)
		r.NAKsReceived += c.Load(qp.CounterRcvdSeqErr)
		r.RNRsReceived += c.Load(qp.CounterRcvdRNRErr)
		r.RNRsSent += c.Load(qp.CounterSendRNRErr)
		r.Retransmitted += c.Load(qp.CounterRetransmittedPkts) + c.Load(qp.CounterReplayedPkts)
		r.Retries += c.Load(qp.CounterCompleterRetryErr)
		r.ReadReplays += c.Load(qp.CounterReadReplays)
	}
	if dev != nil {
		r.BadICRC = dev.Stats().BadICRC.Load()
	}
	r.LongestStall, r.StallBetween = completionGap, "completions"
	if l != nil {
		r.Impair = l.Config().String()
		r.Link = l.Report()
		if r.Link.LongestRxGap > r.LongestStall {
			r.LongestStall, r.StallBetween = r.Link.LongestRxGap, "received packets"
		}
	}
	r.LongestStallMs = float64(r.LongestStall) / 1e6
	return r
}

// WritePeerReport prints r as a short block in perftest's style.
func WritePeerReport(w io.Writer, r PeerReport) {
	dir := func(c impair.Counters) string {
		return fmt.Sprintf("%d packets: %d dropped, %d duplicated, %d reordered, %d corrupted", c.Packets, c.Dropped, c.Duplicated, c.Reordered, c.Corrupted)
	}
	fmt.Fprintln(w, rule)
	fmt.Fprintf(w, " Impairment         : %s\n", r.Impair)
	fmt.Fprintf(w, "  sent to the peer  : %s\n", dir(r.Link.Tx))
	fmt.Fprintf(w, "  received from it  : %s\n", dir(r.Link.Rx))
	fmt.Fprintf(w, " The peer           : %d duplicate requests (its retransmissions), %d out-of-sequence requests, %d duplicate responses\n",
		r.DuplicateRequests, r.OutOfSeqRequests, r.DuplicateResponses)
	fmt.Fprintf(w, "  NAKs              : %d sequence-error NAKs received, %d RNR NAKs received, %d RNR NAKs sent\n",
		r.NAKsReceived, r.RNRsReceived, r.RNRsSent)
	fmt.Fprintf(w, " goroce             : %d packets retransmitted, %d Go-Back-N retries, %d READ replays, %d bad ICRC\n",
		r.Retransmitted, r.Retries, r.ReadReplays, r.BadICRC)
	fmt.Fprintf(w, " Longest stall      : %.2f ms (between %s)\n", r.LongestStallMs, r.StallBetween)
	fmt.Fprintln(w, rule)
}
