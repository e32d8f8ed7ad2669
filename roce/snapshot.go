package roce

import (
	"math"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/goroce/goroce/cc"
)

// Snapshot is a copy of a device's counters and its QPs' at one moment, in
// plain values: what an exporter (package roce/metrics) or a test reads.
// Each value is read atomically, the QPs' before the device's packet
// counters, so that a sum over the QPs never runs ahead of the device's.
type Snapshot struct {
	// Addr is the device's address (Device.LocalAddr).
	Addr netip.AddrPort
	// Stats are the device counters.
	Stats StatsSnapshot
	// QPTotals are the counters of every QP the device has had, destroyed
	// ones included, summed: rxe's device-wide counts of the same names.
	QPTotals CounterSnapshot
	// QPs are the device's live QPs, by QPN.
	QPs []QPSnapshot
}

// QPSnapshot is one QP's part of a Snapshot.
type QPSnapshot struct {
	QPN QPN
	// Peer and PeerQPN are the connected peer's address and QP; Peer is
	// invalid until the QP has an address vector.
	Peer    netip.AddrPort
	PeerQPN QPN
	// Counters are the QP's counters (QP.Counters).
	Counters CounterSnapshot
	// CNPsSent and CNPsReceived count the QP's CNPs (CCStats).
	CNPsSent, CNPsReceived uint64
	// Rate is its reaction point's current rate (DCQCN's RC); 0 with the
	// reaction point off.
	Rate cc.Bitrate
}

// StatsSnapshot is a copy of Stats in plain values; its fields are those
// of Stats, documented there.
type StatsSnapshot struct {
	RxPackets, TxPackets                              uint64
	DroppedNoQP, BadAddr, BadICRC, BadHdr             uint64
	ICRCIDFixups, SendErrors, TxGathered              uint64
	ICRCIDOutOfWindow, ICRCIDReseeds                  uint64
	RxECN                                             [4]uint64
	TxCNPs, RxCNPs, CNPsIgnored, CNPsHandled          uint64
	CNPsNoQP, EventsDropped                           uint64
	RxBatches, RxYields, CapturePackets, CaptureDrops uint64
}

// Snapshot returns the counters' values, each read atomically.
func (s *Stats) Snapshot() StatsSnapshot {
	v := StatsSnapshot{
		RxPackets: s.RxPackets.Load(), TxPackets: s.TxPackets.Load(),
		DroppedNoQP: s.DroppedNoQP.Load(), BadAddr: s.BadAddr.Load(), BadICRC: s.BadICRC.Load(), BadHdr: s.BadHdr.Load(),
		ICRCIDFixups: s.ICRCIDFixups.Load(), SendErrors: s.SendErrors.Load(), TxGathered: s.TxGathered.Load(),
		ICRCIDOutOfWindow: s.ICRCIDOutOfWindow.Load(), ICRCIDReseeds: s.ICRCIDReseeds.Load(),
		TxCNPs: s.TxCNPs.Load(), RxCNPs: s.RxCNPs.Load(), CNPsIgnored: s.CNPsIgnored.Load(), CNPsHandled: s.CNPsHandled.Load(),
		CNPsNoQP: s.CNPsNoQP.Load(), EventsDropped: s.EventsDropped.Load(),
		RxBatches: s.RxBatches.Load(), RxYields: s.RxYields.Load(),
		CapturePackets: s.CapturePackets.Load(), CaptureDrops: s.CaptureDrops.Load(),
	}
	for i := range v.RxECN {
		v.RxECN[i] = s.RxECN[i].Load()
	}
	return v
}

// Snapshot returns the device's counters and its QPs'. It costs the data
// path nothing: every value is an atomic the data path updates anyway, or
// a congestion-control value it publishes when it changes (publishRate),
// and the QPs are found through an index that only CreateQP, Modify and
// Destroy write, not through the engine locks. Any goroutine may call it;
// calls are serialized.
func (d *Device) Snapshot() Snapshot {
	x := &d.snaps
	x.mu.Lock()
	defer x.mu.Unlock()
	x.fold()
	s := Snapshot{Addr: d.local, QPTotals: x.retired}
	x.qps.Range(func(_, v any) bool {
		e := v.(*qpEntry)
		q := QPSnapshot{QPN: e.h.q.QPN(), Peer: e.peer, PeerQPN: e.peerQPN, Counters: e.h.q.Counters().Snapshot(),
			CNPsSent: e.h.cc.cnpTx.Load(), CNPsReceived: e.h.cc.cnpRx.Load(), Rate: e.h.cc.loadRate()}
		for i := range s.QPTotals {
			s.QPTotals[i] += q.Counters[i]
		}
		s.QPs = append(s.QPs, q)
		return true
	})
	slices.SortFunc(s.QPs, func(a, b QPSnapshot) int { return int(a.QPN) - int(b.QPN) })
	s.Stats = d.stats.Snapshot()
	return s
}

// snapIndex is the device's index of its QPs for Snapshot, read without
// the engine locks.
type snapIndex struct {
	qps sync.Map // *QP → *qpEntry; written under the QP's engine lock

	mu      sync.Mutex      // serializes snapshots and folds; never taken by the data path
	retired CounterSnapshot // the counters of destroyed QPs, folded in; guarded by mu
}

// qpEntry is the immutable label set of one QP, replaced when they change.
type qpEntry struct {
	h       *QP
	peer    netip.AddrPort // invalid until connected
	peerQPN QPN
	gone    atomic.Bool // destroyed: fold into retired and forget
}

// snapPut (re)publishes h's labels; the caller holds the engine lock.
func (d *Device) snapPut(h *QP) {
	d.snaps.qps.Store(h, &qpEntry{h: h, peer: h.dst, peerQPN: h.destQPN})
}

// snapGone marks h destroyed; the caller holds the engine lock. Its
// counters stay in QPTotals: the next snapshot (or this call, when no
// snapshot is running) folds them into retired.
func (d *Device) snapGone(h *QP) {
	if v, ok := d.snaps.qps.Load(h); ok {
		v.(*qpEntry).gone.Store(true)
	}
	if d.snaps.mu.TryLock() {
		d.snaps.fold()
		d.snaps.mu.Unlock()
	}
}

// fold moves destroyed QPs into retired; the caller holds x.mu.
func (x *snapIndex) fold() {
	x.qps.Range(func(k, v any) bool {
		if e := v.(*qpEntry); e.gone.Load() {
			s := e.h.q.Counters().Snapshot()
			for i := range s {
				x.retired[i] += s[i]
			}
			x.qps.Delete(k)
		}
		return true
	})
}

// loadRate returns the reaction point's rate as last published by the
// engine (publishRate); any goroutine may call it.
func (c *qpCC) loadRate() cc.Bitrate { return cc.Bitrate(math.Float64frombits(c.rate.Load())) }

// publishRate makes the reaction point's current rate readable without
// the engine lock; the engine calls it, under the lock, after every call
// into the reaction point. It stores only when the rate changed, so an
// uncongested QP pays a comparison per packet.
func (c *qpCC) publishRate() {
	var r cc.Bitrate
	if c.rp != nil {
		r = c.rp.Rate()
	}
	if r != c.pubRate || !c.pubOK {
		c.pubRate, c.pubOK = r, true
		c.rate.Store(math.Float64bits(float64(r)))
	}
}
