package afxdp

import (
	"log/slog"
	"net/netip"
	"time"

	"github.com/goroce/goroce/link/internal/rawnet"
)

// Defaults applied to zero Config fields.
const (
	DefaultFrames    = 8192
	DefaultFrameSize = 4096
	DefaultRingSize  = 4096
	DefaultBatchSize = 64
)

// Mode selects where the XDP program runs.
type Mode uint8

// XDP attach modes.
const (
	// ModeAuto (the default) tries the driver (native) hook and falls back
	// to the generic (skb) hook.
	ModeAuto Mode = iota
	// ModeGeneric runs the program in the kernel's generic hook: any
	// interface, copy mode. On veth it is the faster (doc/limits.md §4).
	ModeGeneric
	// ModeNative runs it in the driver (XDP_FLAGS_DRV_MODE), which zero
	// copy needs; Open fails if the driver has no XDP support.
	ModeNative
)

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeGeneric:
		return "generic"
	case ModeNative:
		return "native"
	}
	return "Mode(invalid)"
}

// Config configures Open. Interface and Addr are required; every other
// zero field gets its default.
type Config struct {
	// Interface is the network interface; QueueID the receive queue the
	// socket binds (default 0; frames the NIC steers to another queue go
	// to the kernel).
	Interface string
	QueueID   int
	// Addr is the link's IP address and UDP port (port 0 means 4791); it
	// need not be configured on the interface (the link then answers ARP
	// / neighbour solicitations for it).
	Addr netip.AddrPort

	// Mode selects the XDP hook (default ModeAuto).
	Mode Mode
	// NoZeroCopy binds in copy mode even where the driver offers zero
	// copy (by default zero copy is tried in native mode).
	NoZeroCopy bool
	// NoMultiBuffer turns XDP_USE_SG off: a frame must then fit one UMEM
	// frame, so the largest RoCE path MTU is 2048 (see the package
	// documentation). By default multi-buffer is used when the kernel
	// offers it, which RoCE MTU 4096 needs.
	NoMultiBuffer bool

	// Frames and FrameSize size the UMEM (default 8192 frames of 4096
	// bytes, half for receiving, half for sending); FrameSize is 2048 or
	// 4096 (the kernel's limit in aligned mode).
	Frames, FrameSize int
	// RingSize is the number of entries of each of the four rings
	// (default 4096; a power of two).
	RingSize int
	// BatchSize bounds the datagrams Recv takes per call (default 64).
	BatchSize int
	// BusyPoll is how long Recv polls the RX ring for the next frame
	// before it sleeps in the Go netpoller (default 0: it sleeps at once).
	// It spares the sender a wake-up per frame when cores are free and
	// costs throughput when they are not (doc/limits.md §3.1).
	BusyPoll time.Duration

	// TOS is the IPv4 TOS / IPv6 traffic class of sent packets (its ECN
	// bits are replaced by each Datagram's ECN); TTL the IPv4 TTL / IPv6
	// hop limit (default 64).
	TOS, TTL uint8

	// Tag sends every frame with an IEEE 802.1Q tag carrying VLAN ID
	// VLANID (0: priority-tagged, the PCP alone) and, as its PCP, each
	// Datagram's Priority: the PFC class (roce.ConnectOptions.Priority;
	// CNPs roce.Config.CNPPriority). The XDP program then also redirects
	// frames with one tag carrying VLANID (Recv reports its PCP as
	// Datagram.Priority); without Tag, tagged frames pass to the kernel.
	// Untagged frames are accepted either way. The tag must be in the
	// frame when the program sees it: a tag the sender's driver put in
	// the skb's metadata instead (VLAN offload) is invisible to it; see
	// the package documentation. The interface needs no VLAN device.
	Tag    bool
	VLANID uint16

	// NoGuard skips the guard UDP socket bound to Addr when the kernel
	// owns it (see link/afpacket's Guard; here it only matters for frames
	// that arrive on another queue than QueueID).
	NoGuard bool
	// ResolveTimeout bounds next-hop MAC resolution on first contact
	// (default 1 s).
	ResolveTimeout time.Duration

	// Logger receives setup messages; nil discards. The data path never
	// logs.
	Logger *slog.Logger
}

// vlanFilter is the VLAN ID tagged frames must carry (-1: none may).
func (c Config) vlanFilter() int {
	if !c.Tag {
		return -1
	}
	return int(c.VLANID & 0x0fff)
}

func (c Config) withDefaults() Config {
	c.Addr = rawnet.RoCEAddr(c.Addr)
	if c.Frames <= 0 {
		c.Frames = DefaultFrames
	}
	if c.FrameSize <= 0 {
		c.FrameSize = DefaultFrameSize
	}
	if c.RingSize <= 0 {
		c.RingSize = DefaultRingSize
	}
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.TTL == 0 {
		c.TTL = 64
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Info reports what Open obtained.
type Info struct {
	Interface string
	Ifindex   int
	MAC       [6]byte
	MTU       int
	QueueID   int
	// Mode is the hook the program runs in (generic or native);
	// ZeroCopy and MultiBuffer say what the socket was bound with.
	Mode                  Mode
	ZeroCopy, MultiBuffer bool
	// MaxFrame is the largest Ethernet frame the link sends and receives:
	// the interface MTU plus 14 (18 with Config.Tag), or one UMEM frame
	// without multi-buffer.
	MaxFrame int
	// ProgID is the kernel's id of the attached XDP program.
	ProgID uint32
	// Owned says the kernel has Addr configured; Guarded that the guard
	// socket is bound.
	Owned, Guarded bool
	// Refused lists what the kernel refused at Open (and the fallback
	// taken), as "WHAT: error".
	Refused []string
}

// Drops counts received frames the link did not deliver, by reason, and
// the XDP socket's own counters (XDP_STATISTICS).
type Drops struct {
	Truncated, VLAN, NotIP, IPOptions, Fragment, NotUDP, OtherAddr, NotRoCE uint64
	// TooBig counts frames longer than the caller's buffer or than the
	// link's frame limit.
	TooBig uint64
	// From the kernel (XDP_STATISTICS): RxDropped counts frames the socket
	// could not take — no fill-ring frame (also counted in FillRingEmpty:
	// a ring overrun) or longer than one UMEM frame without multi-buffer;
	// RxRingFull counts frames lost to a full RX ring; RxInvalid and
	// TxInvalid count rejected descriptors.
	RxDropped, RxRingFull, FillRingEmpty, RxInvalid, TxInvalid uint64
}

func (d Drops) total() uint64 {
	return d.Truncated + d.VLAN + d.NotIP + d.IPOptions + d.Fragment + d.NotUDP + d.OtherAddr + d.NotRoCE +
		d.TooBig + d.RxDropped + d.RxRingFull
}
