package roce

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// CCConfig configures DCQCN congestion control (doc/dcqcn.md §1.2, §1.3, §7.3)
// for a device's QPs. Its zero value turns both ends on with the paper's
// parameters (cc.ProfileP):
//
//   - the notification point (NP): a QP that receives a CE-marked request
//     or data packet sends its peer QP a CNP (BTH opcode 0x81, RoCEv2 Annex
//     A17.9.2), at most one per N (50 µs) per QP, ahead of any pacing;
//   - the reaction point (RP): a QP that receives a CNP cuts its sending
//     rate (cc.DCQCN) and paces its packets (requests, ACKs and READ
//     responses alike) at that rate until DCQCN has recovered to the line
//     rate.
//
// Both are on by default because both are harmless to a peer without
// congestion control: rdma_rxe neither sends CNPs nor reacts to them
// (doc/dcqcn.md §3.4) — it drops opcode 0x81 as an unknown opcode — so a
// goroce QP facing rxe never paces, and the CNPs it sends are dropped.
// Before the first CNP a QP is not paced at all (DCQCN starts at line
// rate), so the cost without congestion is a few comparisons per packet.
//
// Set RP.LineRate to the link's speed: DCQCN's first cuts halve the line
// rate, which does not slow a sender that cannot reach it anyway.
type CCConfig struct {
	// DisableRP turns the reaction point off: received CNPs are counted
	// (Stats.CNPsIgnored) and otherwise ignored, as rxe does, and a QP is
	// paced only by ConnectOptions.MaxRate.
	DisableRP bool
	// DisableNP turns the notification point off: no CNPs are sent.
	DisableNP bool
	// NewRP, when set, makes each QP's reaction point instead of DCQCN: the
	// device drives it through the cc.Controller interface (OnPacketSent
	// for every packet the QP puts on the wire, OnCNP for every CNP that
	// passed the intake checks, OnTimeout before each pacing decision) and
	// paces the QP at its Rate while that is below the line rate
	// (RP.LineRate, or cc.ProfileP's when RP is nil). It is called under
	// the device's engine lock when a QP is created, and again when
	// ConnectOptions.CC gives the QP a configuration of its own; the Controller is
	// owned by that QP and used only under the lock. Ignored with
	// DisableRP.
	NewRP func() cc.Controller
	// RP holds the reaction point's parameters; nil means
	// cc.ProfileP.Config() (100 Gb/s line rate, 100 Mb/s floor). They are
	// checked by cc.Config.Validate: NaN, infinite, zero or negative
	// values are rejected.
	RP *cc.Config
	// NP holds the notification point's parameters; nil means
	// cc.ProfileP.NPConfig() (N = 50 µs).
	NP *cc.NPConfig
	// PaceDepth is the pacer's bucket depth in bytes on the wire: the
	// longest burst a paced QP sends; 0 means MaxPaceDepth (16 KiB, four
	// packets at MTU 4096). It is raised to one full packet if smaller.
	// Not negative, at most MaxPaceDepth.
	PaceDepth int
}

// MaxPaceDepth bounds CCConfig.PaceDepth and is its default: a pacer's
// bucket of cc.MaxPaceDepth bytes (16 KiB).
const MaxPaceDepth = cc.MaxPaceDepth

// validate checks c, wrapping ErrInvalidArg and, for DCQCN parameters,
// cc.ErrInvalidConfig.
func (c *CCConfig) validate() error {
	var errs []error
	if c.RP != nil && !c.DisableRP {
		if err := c.RP.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.NP != nil && !c.DisableNP {
		if err := c.NP.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.PaceDepth < 0 || c.PaceDepth > MaxPaceDepth {
		errs = append(errs, fmt.Errorf("PaceDepth %d outside [0, %d]", c.PaceDepth, MaxPaceDepth))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: congestion control: %w", ErrInvalidArg, err)
	}
	return nil
}

// validRate reports whether r is a usable pacing ceiling: 0 (none) or
// positive and finite.
func validRate(r cc.Bitrate) bool {
	f := float64(r)
	return f == 0 || (f > 0 && !math.IsInf(f, 0))
}

// CCStats is a snapshot of one QP's congestion control.
type CCStats struct {
	// Paced says the pacer holds the QP to PaceRate: DCQCN's rate is below
	// its line rate, or ConnectOptions.MaxRate is set.
	Paced    bool
	PaceRate cc.Bitrate
	// Rate is the reaction point's current rate (DCQCN's RC); TargetRate
	// and Alpha are DCQCN's RT and α. All are zero with the reaction point
	// off; TargetRate, Alpha and RP stay zero with a CCConfig.NewRP
	// controller.
	Rate, TargetRate cc.Bitrate
	Alpha            float64
	// RP and NP are the reaction and notification points' counters.
	RP cc.Stats
	NP cc.NPStats
	// CNPsSent and CNPsReceived count CNPs this QP sent and received.
	CNPsSent, CNPsReceived uint64
	// PaceWaits counts the times the pacer held the QP back.
	PaceWaits uint64
}

// qpCC is one QP's congestion control: DCQCN's RP and NP and the pacer.
// It is guarded by the engine lock.
type qpCC struct {
	rp      cc.Controller // nil: RP off; *cc.DCQCN unless CCConfig.NewRP
	np      *cc.NP        // nil: NP off
	line    cc.Bitrate
	maxRate cc.Bitrate // 0: no ceiling
	depth   int        // configured bucket depth (0: default)

	paced bool // the pacer is engaged
	pace  cc.Pacer

	paceWaits uint64

	// Read without the engine lock by Device.Snapshot (snapshot.go).
	cnpTx, cnpRx atomic.Uint64
	rate         atomic.Uint64 // float64 bits of the RP's rate (publishRate)
	pubRate      cc.Bitrate    // the rate last stored in rate
	pubOK        bool          // rate has been stored
}

// init (re)builds c from cfg, keeping the counters; cfg is valid.
func (c *qpCC) init(cfg *CCConfig) error {
	c.rp, c.np, c.paced = nil, nil, false
	c.depth = cfg.PaceDepth
	if !cfg.DisableRP {
		rc := cc.ProfileP.Config()
		if cfg.RP != nil {
			rc = *cfg.RP
		}
		c.line = rc.LineRate
		if cfg.NewRP != nil {
			if c.rp = cfg.NewRP(); c.rp == nil {
				return fmt.Errorf("%w: CCConfig.NewRP returned nil", ErrInvalidArg)
			}
		} else {
			rp, err := cc.New(rc)
			if err != nil {
				return fmt.Errorf("%w: %w", ErrInvalidArg, err)
			}
			c.rp = rp
		}
	}
	if !cfg.DisableNP {
		nc := cc.ProfileP.NPConfig()
		if cfg.NP != nil {
			nc = *cfg.NP
		}
		np, err := cc.NewNP(nc)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidArg, err)
		}
		c.np = np
	}
	c.publishRate()
	return nil
}

// setPath sizes the pacer for the path MTU and IP version.
func (c *qpCC) setPath(mtu qp.MTU, dst netip.AddrPort) {
	c.pace.SetSize(c.depth, qp.MaxPacketLen(mtu)+outerLen(dst))
}

// outerLen is the IP and UDP header bytes around a transport packet: the
// rates count bytes on the wire from the IP header on.
func outerLen(dst netip.AddrPort) int {
	if a := dst.Addr(); a.Is6() && !a.Is4In6() {
		return rocev2.IPv6HeaderLen + rocev2.UDPHeaderLen
	}
	return rocev2.IPv4HeaderLen + rocev2.UDPHeaderLen
}

// ready brings the RP's timers up to now, engages, retunes or releases the
// pacer, and reports whether a packet may go at now.
func (c *qpCC) ready(now time.Time) bool {
	r, on := c.maxRate, c.maxRate > 0
	if c.rp != nil {
		c.rp.OnTimeout(now)
		c.publishRate()
		// Below line rate DCQCN is limiting; at line rate the QP is not
		// paced, so an uncongested QP keeps its batches.
		if rc := c.rp.Rate(); rc < c.line && (!on || rc < r) {
			r, on = rc, true
		}
	}
	switch {
	case !on:
		c.paced = false
		return true
	case !c.paced:
		c.paced = true
		c.pace.Start(now, r)
	default:
		c.pace.SetRate(now, r)
	}
	return c.pace.Ready(now)
}

// sent charges a packet of n bytes on the wire to the RP's byte counter and
// the pacer.
func (c *qpCC) sent(now time.Time, n int) {
	if c.rp != nil {
		c.rp.OnPacketSent(now, n)
		c.publishRate()
	}
	if c.paced {
		c.pace.Sent(now, n)
	}
}

// stats returns the snapshot.
func (c *qpCC) stats() CCStats {
	s := CCStats{Paced: c.paced, CNPsSent: c.cnpTx.Load(), CNPsReceived: c.cnpRx.Load(), PaceWaits: c.paceWaits}
	if c.paced {
		s.PaceRate = c.pace.Rate()
	}
	if c.rp != nil {
		s.Rate = c.rp.Rate()
	}
	if d, ok := c.rp.(*cc.DCQCN); ok {
		s.TargetRate, s.Alpha, s.RP = d.TargetRate(), d.Alpha(), d.Stats()
	}
	if c.np != nil {
		s.NP = c.np.Stats()
	}
	return s
}

// CC returns a snapshot of the QP's congestion control.
func (h *QP) CC() CCStats {
	h.sh.lock()
	defer h.sh.unlock()
	return h.cc.stats()
}

// isData reports whether op is a packet the NP answers with a CNP when it
// arrives CE-marked: an RC request or a READ response, not an ACK, atomic
// ACK or CNP (doc/dcqcn.md §7.3).
func isData(op bth.Opcode) bool {
	return op.Transport() == bth.TransportRC && (op.IsRequest() || op.HasPayload())
}

// cnpLen is the transport length of a CNP: BTH, 16 reserved bytes, ICRC.
const cnpLen = bth.Size + bth.CNPPadSize + bth.ICRCSize

// buildCNP writes into buf (at least cnpLen bytes) the transport packet of
// a CNP for the requester QP destQP (RoCEv2 Annex A17.9.2; doc/dcqcn.md §7.2):
// opcode 0x81, BECN set, P_Key 0xFFFF, PSN 0, 16 reserved zero bytes, and
// the ICRC over the IP/UDP headers from src to dst with IPv4 ID ipid. It is
// the device's CNP path; the golden test feeds it the ConnectX-4 Lx
// capture's addresses.
func buildCNP(buf []byte, destQP bth.QPN, src, dst netip.AddrPort, ipid uint16) int {
	f := rocev2.CNPFields(destQP)
	n, err := wire.Build(buf, &f, nil)
	if err != nil || n != cnpLen {
		panic("roce: CNP build failed") // the opcode table is static
	}
	var ph [rocev2.PseudoHeaderLen]byte
	ip, udp := rocev2.PseudoHeaders(&ph, src, dst, ipid, n)
	rocev2.PutICRC(buf[n-bth.ICRCSize:n], rocev2.ComputeICRC(ip, udp, buf[:n-bth.ICRCSize]))
	return n
}

// notify runs the NP for one received packet of q and queues a CNP for
// the peer's QP when it asks for one. CNPs go into the shard's transmit
// batch directly, ahead of the QPs' paced packets; the caller holds the
// engine lock and flushes the batch.
func (s *shard) notify(q *QP, now time.Time, ecn uint8, op bth.Opcode) {
	d := s.d
	if q.cc.np == nil || !q.dst.IsValid() {
		return
	}
	if !q.cc.np.OnPacket(now, ecn == link.CE, isData(op)) {
		return
	}
	tx := s.batch()
	if tx == nil {
		// Every batch is queued and this goroutine holds the sender
		// role: send them now, under the lock (rare: a CE mark while
		// the socket is full), rather than lose the CNP.
		s.sendQueued(false)
		tx = s.batch()
	}
	buf := tx.bufs[len(tx.dgs)]
	n := buildCNP(buf, q.destQPN, q.src, q.dst, 0)
	tx.dgs = append(tx.dgs, link.Datagram{Buf: buf[:n], Src: q.src, Dst: q.dst, ECN: q.ecn,
		DSCP: d.cnpDSCP, Priority: d.cnpPrio, FlowLabel: q.flow})
	d.stats.TxCNPs.Add(1)
	d.stats.TxPackets.Add(1)
	q.cc.cnpTx.Add(1)
	if len(tx.dgs) == cap(tx.dgs) {
		s.flushTx()
	}
}

// onCNP feeds a CNP for q to its reaction point. With the RP off the CNP
// is counted and ignored, as rxe ignores every CNP.
func (d *Device) onCNP(q *QP, now time.Time) {
	d.stats.RxCNPs.Add(1)
	q.cc.cnpRx.Add(1)
	if q.cc.rp == nil {
		d.stats.CNPsIgnored.Add(1)
		return
	}
	d.stats.CNPsHandled.Add(1)
	q.cc.rp.OnCNP(now)
	q.cc.publishRate()
}
