package cc

import "time"

// NPStats counts an [NP]'s decisions.
type NPStats struct {
	// CE counts CE-marked data packets seen.
	CE uint64
	// CNPs counts CNPs requested.
	CNPs uint64
	// Suppressed counts CE-marked data packets that fell within N of the
	// previous CNP and so requested none.
	Suppressed uint64
}

// NP is the notification point of one QP in the receiver NIC (doc/dcqcn.md
// §1.2, §7.3). A CE-marked data packet requests a CNP at once if no CNP
// was sent for the QP in the last Interval (N); packets that are not CE
// marked, and ACKs and CNPs whatever their marking, never do. The first
// CNP is therefore immediate and the CNP rate is at most 1/N, with a CE
// packet in the window before each one.
//
// The CNP goes to the QP's sender; building and sending it (BTH opcode
// 0x81, BECN set, doc/dcqcn.md §7.2) is the caller's job.
type NP struct {
	interval time.Duration
	last     time.Time
	sent     bool
	stats    NPStats
}

// NewNP returns a notification point for one QP, or an error wrapping
// [ErrInvalidConfig].
func NewNP(cfg NPConfig) (*NP, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &NP{interval: cfg.Interval}, nil
}

// OnPacket takes one received packet of the QP: ce reports an IP ECN
// field of 11 (CE), isData that it is a request or data packet (not an
// ACK, NAK or CNP). It reports whether a CNP must be sent now.
func (n *NP) OnPacket(now time.Time, ce, isData bool) (sendCNP bool) {
	if !ce || !isData {
		return false
	}
	n.stats.CE++
	if n.sent && now.Sub(n.last) < n.interval {
		n.stats.Suppressed++
		return false
	}
	n.sent, n.last = true, now
	n.stats.CNPs++
	return true
}

// LastCNP returns when the latest CNP was requested, and false if none
// was.
func (n *NP) LastCNP() (time.Time, bool) { return n.last, n.sent }

// Stats returns the counters.
func (n *NP) Stats() NPStats { return n.stats }
