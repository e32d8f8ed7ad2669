package afpacket

import (
	"log/slog"
	"net/netip"
	"time"

	"github.com/goroce/goroce/link/internal/rawnet"
)

// Defaults applied to zero Config fields.
const (
	DefaultBlockSize     = 1 << 20
	DefaultBlocks        = 16
	DefaultRetireTimeout = time.Millisecond
	DefaultFrames        = 2048
	DefaultBatchSize     = 64
	DefaultSndBuf        = 8 << 20
)

// Ring selects the TPACKET version of the receive ring.
type Ring uint8

// Receive ring versions.
const (
	// RingV2 (the default) is a TPACKET_V2 ring of fixed-size slots: the
	// kernel hands each frame over at once and wakes a waiting reader.
	// RoCE is request / acknowledge traffic: a requester stalls when its
	// window of unacknowledged packets is full, so the ACK latency sets the
	// throughput, and V2 beats V3 at both (doc/limits.md §3.1).
	RingV2 Ring = iota
	// RingV3 is a TPACKET_V3 ring of variable-size frames packed into
	// blocks: the fewest wakeups and the least memory for one-way
	// streaming (doc/limits.md §3 measured it as the biggest lever for a raw
	// receiver), but the kernel hands a block over only when it is full or
	// when RetireTimeout (≥ 1 ms) expires, so a packet arriving alone — an
	// ACK, a latency probe — waits up to that long.
	RingV3
)

// String returns the TPACKET name of r.
func (r Ring) String() string {
	switch r {
	case RingV2:
		return "TPACKET_V2"
	case RingV3:
		return "TPACKET_V3"
	}
	return "Ring(invalid)"
}

// Guard selects how the link keeps the kernel from answering RoCE frames
// addressed to an address it owns with ICMP port unreachable.
type Guard uint8

// Guard modes.
const (
	// GuardAuto (the default) binds a UDP socket to Addr whose filter drops
	// every datagram, when Addr is configured on an interface of the
	// namespace. Open fails if another socket owns the port there.
	GuardAuto Guard = iota
	// GuardOff does nothing: with Addr configured, the kernel answers each
	// RoCE frame with an ICMP port unreachable (rate-limited) unless
	// something else (an nftables netdev-ingress drop rule, a UDP socket)
	// takes care of it.
	GuardOff
)

// Config configures Open. Interface and Addr are required; every other
// zero field gets its default.
type Config struct {
	// Interface is the network interface to send and receive on.
	Interface string
	// Addr is the link's IP address and UDP port (port 0 means 4791). The
	// address need not be configured on the interface: the link answers
	// ARP / neighbour solicitations for it itself when the kernel does not
	// own it. An IPv4-mapped IPv6 address means IPv4.
	Addr netip.AddrPort

	// Ring selects the receive ring version (default RingV2).
	Ring Ring
	// FrameSlot and Frames size a TPACKET_V2 ring (default 2048 slots,
	// each large enough for a frame of the interface MTU plus the
	// kernel's 80-byte header); FrameSlot bounds the largest frame
	// received (larger ones are cut by the kernel and counted in
	// Drops.TooBig).
	FrameSlot, Frames int
	// BlockSize and Blocks size a TPACKET_V3 ring (default 16 × 1 MiB);
	// BlockSize must be a multiple of the page size and hold a frame.
	BlockSize, Blocks int
	// RetireTimeout is how long the kernel waits before handing a partly
	// filled TPACKET_V3 block over (default 1 ms, the kernel's granularity).
	RetireTimeout time.Duration

	// BatchSize is the number of frames per sendmmsg call (default 64).
	BatchSize int
	// BusyPoll is how long Recv polls the ring for the next frame before
	// it sleeps in the Go netpoller (default 0: it sleeps at once). A
	// receiver that sleeps as soon as the ring is empty makes the sender
	// pay for a wake-up per frame (on veth the receive path runs on the
	// sending CPU) and each frame after a sleep a scheduler round trip:
	// polling helps when cores are free and costs throughput when they are
	// not, which is why it is off by default (doc/limits.md §3.1). The
	// cost is at most BusyPoll of CPU per received batch.
	BusyPoll time.Duration
	// SndBuf is the socket send buffer in bytes (default 8 MiB, forced
	// with CAP_NET_ADMIN); it bounds the frames in flight in the kernel.
	SndBuf int
	// NoQdiscBypass keeps frames going through the interface's qdisc
	// (by default PACKET_QDISC_BYPASS hands them straight to the driver).
	NoQdiscBypass bool

	// TOS is the IPv4 TOS / IPv6 traffic class of sent packets; its ECN
	// bits are replaced by each Datagram's ECN, its DSCP by each
	// Datagram's DSCP when not 0. TTL is the IPv4 TTL / IPv6 hop limit
	// (default 64).
	TOS, TTL uint8

	// Tag sends every frame with an IEEE 802.1Q tag carrying VLAN ID
	// VLANID (0: priority-tagged, the PCP alone) and, as its PCP, each
	// Datagram's Priority: the PFC class (roce.ConnectOptions.Priority;
	// CNPs roce.Config.CNPPriority). Frames received with a tag are then
	// accepted if it carries VLANID (the kernel strips it before the ring:
	// Recv reports its PCP as Datagram.Priority); without Tag they are
	// dropped (Drops().VLAN). The interface needs no VLAN device.
	Tag    bool
	VLANID uint16

	// Guard selects the ICMP-suppression method (default GuardAuto).
	Guard Guard
	// ResolveTimeout bounds the resolution of a next-hop MAC address on
	// first contact (default 1 s); Send blocks that long at most.
	ResolveTimeout time.Duration
	// NoFilter skips the in-kernel classic-BPF filter, so every IP frame
	// of the interface reaches the ring and the link's own classifier
	// (for diagnostics and tests: slower).
	NoFilter bool

	// Logger receives setup messages; nil discards. The data path never
	// logs.
	Logger *slog.Logger
}

// vlanFilter is the VLAN ID tagged frames must carry (-1: none may).
func (c Config) vlanFilter() int {
	if !c.Tag {
		return -1
	}
	return int(c.VLANID)
}

func (c Config) withDefaults() Config {
	c.Addr = rawnet.RoCEAddr(c.Addr)
	if c.BlockSize <= 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.Blocks <= 0 {
		c.Blocks = DefaultBlocks
	}
	if c.RetireTimeout <= 0 {
		c.RetireTimeout = DefaultRetireTimeout
	}
	if c.Frames <= 0 {
		c.Frames = DefaultFrames
	}
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.SndBuf <= 0 {
		c.SndBuf = DefaultSndBuf
	}
	if c.TTL == 0 {
		c.TTL = 64
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Info reports what Open found and obtained.
type Info struct {
	Interface string
	Ifindex   int
	MAC       [6]byte
	// MTU is the interface MTU; the largest RoCE payload that fits is
	// MTU − IP − UDP − BTH − RETH − ICRC (choose the QP path MTU below it).
	MTU  int
	Ring Ring
	// RingBytes is the size of the mapped receive ring.
	RingBytes int
	// QdiscBypass says PACKET_QDISC_BYPASS is on.
	QdiscBypass bool
	// Owned says the kernel has Addr configured (it answers ARP / ND for
	// it); Guarded says the guard socket is bound.
	Owned, Guarded bool
	// Refused lists options the kernel refused, as "NAME: error".
	Refused []string
}

// Drops counts received frames the link did not deliver, by reason.
type Drops struct {
	// Frames the classifier skipped: not ours or malformed.
	Truncated, VLAN, NotIP, IPOptions, Fragment, NotUDP, OtherAddr, NotRoCE uint64
	// TooBig counts frames longer than the ring frame (the kernel cut them)
	// or than the caller's buffer.
	TooBig uint64
	// RingFull counts frames the kernel dropped because the ring was full
	// (PACKET_STATISTICS tp_drops); Freezes counts TPACKET_V3 queue freezes.
	RingFull, Freezes uint64
}

// total returns the sum of the classifier drops and ring drops.
func (d Drops) total() uint64 {
	return d.Truncated + d.VLAN + d.NotIP + d.IPOptions + d.Fragment + d.NotUDP + d.OtherAddr + d.NotRoCE + d.TooBig + d.RingFull
}
