package testutil

import (
	"fmt"
	"time"
)

// Defaults applied by [NewLink] to zero fields of an enabled knob.
const (
	// DefaultHoldMax bounds how long Impairment.Reorder holds a packet back
	// when too little traffic follows it.
	DefaultHoldMax = time.Millisecond
	// DefaultCorruptHeaderLen is the length of the region that CorruptHeader
	// hits: the first 50 bytes of the UDP payload, as the QUIC interop
	// runner's corrupt-rate scenario does.
	DefaultCorruptHeaderLen = 50
)

// Impairment configures one direction of a [Link]. The zero value is a
// perfect link: no loss and zero delay, so a packet sent at t is received
// at t. Every knob is off at its zero value. Rates are probabilities in
// [0, 1]; [NewLink] panics on out-of-range values.
//
// A sent packet goes through these stages, in order:
//
//  1. Drop decisions, in [DropReason] order: Blackhole, DropList, DropIf,
//     Loss, GilbertElliott, BurstLoss. Every enabled random knob is consulted
//     for every packet, even one that an earlier knob already drops, so the
//     loss pattern of one knob does not depend on the others.
//  2. Duplication (Dup). The duplicate goes through stages 3 and 4 on its
//     own, right after the original (so it gets its own jitter and uses
//     bandwidth), but is never held back by Reorder.
//  3. Corruption (Corrupt), decided for each copy independently.
//  4. Timing: serialization (Bandwidth, QueueLimit), then Delay ± Jitter.
//     Deliveries stay in FIFO order: a packet never arrives before one sent
//     earlier, so jitter bunches packets up rather than reordering them,
//     unless JitterReorder is set.
//  5. Reordering (Reorder): the packet is held back until k later packets
//     have been scheduled, and delivered right after the k-th.
type Impairment struct {
	// Loss drops each packet independently with this probability.
	Loss float64
	// GilbertElliott drops packets in bursts; see [GilbertElliott].
	GilbertElliott GilbertElliott
	// BurstLoss drops packets at a rate with a cap on consecutive drops; see
	// [BurstLoss].
	BurstLoss BurstLoss
	// DropList lists the 0-based Send indices of packets to drop, as the
	// QUIC runner's droplist does. Duplicates and injected packets have no
	// index of their own and are not affected.
	DropList []int
	// DropIf classifies packets (ACK only, READ responses only, last packet
	// of a message …). Matching packets are dropped with probability
	// DropIfRate; a DropIfRate of 0 with DropIf set means 1 (drop them all).
	// DropIf must not retain or modify the packet.
	DropIf func(pkt []byte) bool
	// DropIfRate is the probability of dropping a packet that DropIf matches.
	DropIfRate float64
	// Blackhole drops every packet sent inside its windows; see [Blackhole].
	Blackhole Blackhole

	// Dup sends a second copy of each surviving packet with this probability.
	Dup float64

	// Corrupt flips bits in a random byte of some copies; see [Corrupt].
	Corrupt Corrupt

	// Bandwidth, in bits per second, serializes packets: a packet departs
	// when the previous one has finished and takes len×8/Bandwidth. Zero
	// means infinitely fast.
	Bandwidth uint64
	// QueueLimit, with Bandwidth set, caps the packets waiting for or in
	// serialization; a packet arriving at a full queue is dropped
	// (DropQueueFull), as a drop-tail router queue does. Zero means no cap.
	QueueLimit int
	// Delay is the one-way propagation delay added after serialization.
	Delay time.Duration
	// Jitter adds a uniform random offset in [-Jitter, +Jitter] to Delay.
	// The total delay never goes below zero.
	Jitter time.Duration
	// JitterReorder lets jitter reorder packets (netem's behaviour). By
	// default deliveries stay FIFO and only Reorder reorders.
	JitterReorder bool

	// Reorder holds packets back; see [Reorder].
	Reorder Reorder

	// OnPacket, if set, is called synchronously for every [Event]. It may
	// count or inspect but must not call back into the Link.
	OnPacket func(ev Event)
}

// GilbertElliott is the two-state Markov loss model. The link starts in the
// good state; for each packet it first decides loss with the current
// state's probability, then moves Good→Bad with probability PGB or Bad→Good
// with probability PBG. The mean loss rate is
//
//	PGB/(PGB+PBG)×LossBad + PBG/(PGB+PBG)×LossGood
//
// and bad periods last 1/PBG packets on average. The model is enabled when
// PGB > 0.
type GilbertElliott struct {
	PGB      float64 // probability of moving from Good to Bad, per packet
	PBG      float64 // probability of moving from Bad to Good, per packet
	LossGood float64 // loss probability in the good state (default 0)
	LossBad  float64 // loss probability in the bad state; 0 means 1
}

// BurstLoss is the QUIC interop runner's drop-rate model: each packet is
// dropped with probability Rate, except that after MaxBurst consecutive
// drops by this knob the next packet always passes. MaxBurst 0 means no
// cap. Because of the cap the realized rate is slightly below Rate.
type BurstLoss struct {
	Rate     float64
	MaxBurst int
}

// Reorder holds packets back. Each packet (not duplicates) is held with
// probability Rate for k slots, k uniform in [MinSlots, MaxSlots]: it is
// delivered right after the k-th copy scheduled after it, i.e. after the
// next k copies that are neither dropped nor held themselves (duplicates
// count). If fewer than k follow in time, it is released HoldMax after its
// normal delivery time, so a held packet never waits forever for traffic
// that does not come.
type Reorder struct {
	Rate     float64
	MinSlots int           // default 1
	MaxSlots int           // default MinSlots
	HoldMax  time.Duration // default DefaultHoldMax
}

// Window is a half-open interval [Start, End) of virtual time, relative to
// the origin of its [Blackhole].
type Window struct {
	Start, End time.Duration
}

// Blackhole drops every packet whose Send time falls inside one of Windows.
// Packets already in flight when a window opens are still delivered.
//
// Window times are relative to Origin; a zero Origin means [Epoch], where
// every [Clock] starts, so with a fake clock the windows are relative to the
// start of the test. To give absolute times, set Origin to a time.Time and
// the windows relative to it. If Period > 0 the schedule repeats: a Send at
// Origin+t is checked at offset t mod Period. Sends before Origin are never
// dropped.
type Blackhole struct {
	Windows []Window
	Period  time.Duration
	Origin  time.Time
}

// OnOff returns the QUIC runner's blackhole schedule "--on=on --off=off":
// the link works for on, then drops everything for off, repeating.
func OnOff(on, off time.Duration) Blackhole {
	return Blackhole{Windows: []Window{{Start: on, End: on + off}}, Period: on + off}
}

//go:generate stringer -type=CorruptRegion -trimprefix=Corrupt

// CorruptRegion selects the bytes that [Corrupt] may hit.
type CorruptRegion uint8

// Corruption regions.
const (
	CorruptAnywhere CorruptRegion = iota // any byte of the packet
	CorruptHeader                        // one of the first Corrupt.HeaderLen bytes
	CorruptTail4                         // one of the last 4 bytes: the ICRC
)

// Corrupt picks copies with probability Rate and XORs one random byte of
// Region with a random nonzero value, so the packet always changes. A
// region longer than the packet is cut to the packet; an empty packet is
// never corrupted.
type Corrupt struct {
	Rate      float64
	Region    CorruptRegion
	HeaderLen int // for CorruptHeader; default DefaultCorruptHeaderLen
}

// normalize validates imp and fills in defaults. It panics on a
// programmer error (a rate out of range, an inverted window…).
func (imp Impairment) normalize() Impairment {
	rate := func(name string, p float64) {
		if !(p >= 0 && p <= 1) { // also rejects NaN
			panic(fmt.Sprintf("testutil: Impairment.%s = %v, want a probability in [0, 1]", name, p))
		}
	}
	nonneg := func(name string, v int64) {
		if v < 0 {
			panic(fmt.Sprintf("testutil: Impairment.%s = %d, want >= 0", name, v))
		}
	}
	rate("Loss", imp.Loss)
	rate("GilbertElliott.PGB", imp.GilbertElliott.PGB)
	rate("GilbertElliott.PBG", imp.GilbertElliott.PBG)
	rate("GilbertElliott.LossGood", imp.GilbertElliott.LossGood)
	rate("GilbertElliott.LossBad", imp.GilbertElliott.LossBad)
	rate("BurstLoss.Rate", imp.BurstLoss.Rate)
	rate("DropIfRate", imp.DropIfRate)
	rate("Dup", imp.Dup)
	rate("Reorder.Rate", imp.Reorder.Rate)
	rate("Corrupt.Rate", imp.Corrupt.Rate)
	nonneg("BurstLoss.MaxBurst", int64(imp.BurstLoss.MaxBurst))
	nonneg("QueueLimit", int64(imp.QueueLimit))
	nonneg("Delay", int64(imp.Delay))
	nonneg("Jitter", int64(imp.Jitter))
	nonneg("Reorder.MinSlots", int64(imp.Reorder.MinSlots))
	nonneg("Reorder.HoldMax", int64(imp.Reorder.HoldMax))
	nonneg("Blackhole.Period", int64(imp.Blackhole.Period))
	nonneg("Corrupt.HeaderLen", int64(imp.Corrupt.HeaderLen))

	if imp.GilbertElliott.LossBad == 0 {
		imp.GilbertElliott.LossBad = 1
	}
	if imp.DropIf != nil && imp.DropIfRate == 0 {
		imp.DropIfRate = 1
	}
	r := &imp.Reorder
	if r.MinSlots == 0 {
		r.MinSlots = 1
	}
	if r.MaxSlots == 0 {
		r.MaxSlots = r.MinSlots
	}
	if r.MaxSlots < r.MinSlots {
		panic(fmt.Sprintf("testutil: Impairment.Reorder slots [%d, %d] inverted", r.MinSlots, r.MaxSlots))
	}
	if r.HoldMax == 0 {
		r.HoldMax = DefaultHoldMax
	}
	if imp.Corrupt.HeaderLen == 0 {
		imp.Corrupt.HeaderLen = DefaultCorruptHeaderLen
	}
	if imp.Corrupt.Region > CorruptTail4 {
		panic(fmt.Sprintf("testutil: Impairment.Corrupt.Region = %v", imp.Corrupt.Region))
	}
	for _, w := range imp.Blackhole.Windows {
		if w.Start < 0 || w.End < w.Start {
			panic(fmt.Sprintf("testutil: Impairment.Blackhole window [%v, %v) invalid", w.Start, w.End))
		}
	}
	for _, i := range imp.DropList {
		nonneg("DropList[]", int64(i))
	}
	return imp
}
