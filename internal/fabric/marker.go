package fabric

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/goroce/goroce/internal/ebpf"
)

// The marker (doc/fabric.md "The marker") is a tc classifier on the egress
// of every rate-limited switch port: a phantom queue, as in HULL (Alizadeh
// et al., "Less is More: Trading a little Bandwidth for Ultra-Low Latency
// in the Data Center", NSDI 2012), that marks ECN-capable packets CE when
// a virtual copy of the port's queue, served at γ times the link rate,
// holds more than a threshold. The kernel has no RED qdisc here, and a
// virtual queue marks before the real one (the tbf behind it) builds up.
//
// The virtual queue is kept as the time at which it would be empty, T
// (CLOCK_MONOTONIC ns), in the spirit of a virtual clock: a packet of len
// bytes arriving at now finds a backlog of T − now ns of service (none if
// T ≤ now) and moves T to max(T, now) + len/(γ·rate). The backlog in ns
// is the backlog in bytes over γ·rate, so the threshold and the buffer
// are compared in ns and the program needs no division. An arrival that
// finds the virtual queue fuller than the port's buffer does not join it,
// as a real port would drop it (the tbf behind decides whether it really
// does).
//
// Concurrency: packets of one port may be classified on several CPUs at
// once. While the queue is busy (T > now), T moves by an atomic add, so
// no arrival is lost. When it is empty, the first arrival restarts T at
// now + len/(γ·rate) by compare-and-exchange; one that loses that race
// adds its service time to whatever the winner wrote. The approximation
// is in the test T ≤ now, read before the update: two packets that find
// an empty queue at once both count as first (the second's CAS fails and
// it adds itself), and a packet counted while another restarts the queue
// may see the restarted T; either way at most one packet's service time
// is misplaced, and only at the moment the queue empties. The counters
// are atomic adds; the largest backlog is a plain maximum, which a race
// may leave one packet low.
//
// Map value of one marked egress (eight uint64 fields in the host's byte order):
const (
	slotT       = 0  // T, the time the virtual queue empties
	slotPackets = 8  // packets classified
	slotBytes   = 16 // their bytes (skb->len: the frame with its Ethernet header)
	slotOver    = 24 // packets that found the backlog above the threshold
	slotMarks   = 32 // of those, packets that left CE (marked here or before)
	slotFull    = 40 // packets that found the virtual queue full
	slotMaxNS   = 48 // the largest backlog found, in ns of service
	slotSize    = 64
)

// q20 is the fixed-point scale of the service time per byte.
const q20 = 20

// markerParams are a port's constants, baked into its program.
type markerParams struct {
	slot          uint32
	nsPerByteQ20  uint64 // ns of service per byte at γ·rate, × 2^20
	thresholdNS   int64  // the threshold as a backlog in ns
	capNS         int64  // the buffer as a backlog in ns
	bytesPerNanos float64
}

// newMarkerParams computes a port's constants for a link of rate r (not
// 0), γ, the threshold and the buffer in bytes.
func newMarkerParams(slot int, r Rate, gamma float64, threshold, buffer int) markerParams {
	bpns := gamma * float64(r) / 8 / 1e9 // bytes per ns at γ·rate
	return markerParams{
		slot:          uint32(slot),
		nsPerByteQ20:  uint64(math.Round(math.Ldexp(1/bpns, q20))),
		thresholdNS:   int64(math.Round(float64(threshold) / bpns)),
		capNS:         int64(math.Round(float64(buffer) / bpns)),
		bytesPerNanos: bpns,
	}
}

// tcActOK lets a packet pass (TC_ACT_OK).
const tcActOK = 0

// markerProgram assembles the marker of one port: its state is entry
// p.slot of the array map mapFD.
func markerProgram(mapFD int, p markerParams) ([]ebpf.Insn, error) {
	const (
		ctx = ebpf.R6 // struct __sk_buff *
		st  = ebpf.R7 // the slot's map value
		now = ebpf.R8
		bl  = ebpf.R9 // the backlog found, ns (signed)
	)
	var a ebpf.Asm
	a.MovReg(ctx, ebpf.R1)
	// st = bpf_map_lookup_elem(&map, &slot)
	a.StoreImm(ebpf.W, ebpf.FP, -4, int32(p.slot))
	a.LoadMapFD(ebpf.R1, mapFD)
	a.MovReg(ebpf.R2, ebpf.FP)
	a.ALU64(ebpf.Add, ebpf.R2, -4)
	a.Call(ebpf.HelperMapLookupElem)
	a.Jump(ebpf.JEq, ebpf.R0, 0, "out")
	a.MovReg(st, ebpf.R0)
	a.Call(ebpf.HelperKtimeGetNS)
	a.MovReg(now, ebpf.R0)
	// Count the packet and its bytes; r2 = its service time in ns.
	a.Load(ebpf.W, ebpf.R2, ctx, 0) // skb->len
	a.Mov(ebpf.R1, 1)
	a.AtomicAdd(ebpf.DW, st, slotPackets, ebpf.R1)
	a.AtomicAdd(ebpf.DW, st, slotBytes, ebpf.R2)
	a.LoadImm64(ebpf.R1, p.nsPerByteQ20)
	a.ALU64Reg(ebpf.Mul, ebpf.R2, ebpf.R1)
	a.ALU64(ebpf.Rsh, ebpf.R2, q20)
	// bl = T - now, the backlog the packet finds.
	a.Load(ebpf.DW, ebpf.R3, st, slotT)
	a.MovReg(bl, ebpf.R3)
	a.ALU64Reg(ebpf.Sub, bl, now)
	a.LoadImm64(ebpf.R1, uint64(p.capNS))
	a.JumpReg(ebpf.JSGT, bl, ebpf.R1, "full")
	a.Jump(ebpf.JSGT, bl, 0, "busy")
	// Empty: restart T at now + service unless another CPU moved it.
	a.MovReg(ebpf.R0, ebpf.R3)
	a.MovReg(ebpf.R4, now)
	a.ALU64Reg(ebpf.Add, ebpf.R4, ebpf.R2)
	a.AtomicCmpXchg(ebpf.DW, st, slotT, ebpf.R4)
	a.JumpReg(ebpf.JEq, ebpf.R0, ebpf.R3, "decide")
	a.Label("busy")
	a.AtomicAdd(ebpf.DW, st, slotT, ebpf.R2)
	a.Goto("decide")
	a.Label("full")
	a.Mov(ebpf.R1, 1)
	a.AtomicAdd(ebpf.DW, st, slotFull, ebpf.R1)
	a.Label("decide")
	a.Load(ebpf.DW, ebpf.R1, st, slotMaxNS)
	a.JumpReg(ebpf.JSLE, bl, ebpf.R1, "nomax")
	a.Store(ebpf.DW, st, slotMaxNS, bl)
	a.Label("nomax")
	a.LoadImm64(ebpf.R1, uint64(p.thresholdNS))
	a.JumpReg(ebpf.JSLE, bl, ebpf.R1, "out")
	a.Mov(ebpf.R1, 1)
	a.AtomicAdd(ebpf.DW, st, slotOver, ebpf.R1)
	// bpf_skb_ecn_set_ce: CE on ECT(0)/ECT(1), Not-ECT left alone.
	a.MovReg(ebpf.R1, ctx)
	a.Call(ebpf.HelperSkbECNSetCE)
	a.Jump(ebpf.JEq, ebpf.R0, 0, "out")
	a.Mov(ebpf.R1, 1)
	a.AtomicAdd(ebpf.DW, st, slotMarks, ebpf.R1)
	a.Label("out")
	a.Mov(ebpf.R0, tcActOK)
	a.Exit()
	prog, err := a.Assemble()
	if err != nil {
		return nil, fmt.Errorf("fabric: marker: %w", err)
	}
	return prog, nil
}

// ECNStats are the marker's counters of one egress.
type ECNStats struct {
	Packets, Bytes uint64
	// Over counts packets that found the virtual queue above the
	// threshold; Marks those of them that left CE (Not-ECT packets are
	// never marked, packets already CE count).
	Over, Marks uint64
	// Full counts packets that found the virtual queue at the buffer.
	Full uint64
	// MaxBacklog is the largest virtual backlog found, in bytes.
	MaxBacklog uint64
}

// decodeECN reads one slot's map value; bpns converts ns of backlog to
// bytes.
func decodeECN(v []byte, bpns float64) ECNStats {
	u := func(off int) uint64 { return binary.NativeEndian.Uint64(v[off:]) }
	return ECNStats{
		Packets: u(slotPackets), Bytes: u(slotBytes), Over: u(slotOver), Marks: u(slotMarks), Full: u(slotFull),
		MaxBacklog: uint64(math.Round(float64(int64(u(slotMaxNS))) * bpns)),
	}
}
