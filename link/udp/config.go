package udp

import (
	"log/slog"
	"net/netip"
	"time"

	"github.com/goroce/goroce/rocev2"
)

// Defaults applied to zero Config fields.
const (
	DefaultBatchSize = 64
	DefaultSndBuf    = 16 << 20
	DefaultRcvBuf    = 16 << 20
	// DefaultMaxSourcePorts bounds the send sockets of SourcePort unless
	// Config.MaxSourcePorts says otherwise: the kernel rule's 16384 ports
	// are drawn by QP pairs about uniformly, so 4096 sockets keep every QP
	// on its own port up to about 4700 QPs (16384·ln(4/3)) on average. It is
	// lowered to a quarter of RLIMIT_NOFILE where that is smaller.
	DefaultMaxSourcePorts = 4096
)

// Checksum selects the UDP checksum of sent datagrams.
type Checksum uint8

// Checksum modes.
const (
	// ChecksumAuto (the default) sends checksum 0, as rxe does, except in
	// sendmmsg batches that carry a GSO super-packet: Linux segments only
	// checksummed super-packets, so those batches get a computed (usually
	// offloaded) checksum.
	ChecksumAuto Checksum = iota
	// ChecksumZero always sends checksum 0 and therefore never uses GSO.
	ChecksumZero
	// ChecksumFull always lets the kernel compute the checksum.
	ChecksumFull
)

// String returns the mode's name.
func (c Checksum) String() string {
	switch c {
	case ChecksumAuto:
		return "auto"
	case ChecksumZero:
		return "zero"
	case ChecksumFull:
		return "full"
	}
	return "Checksum(invalid)"
}

// Config configures Open. The zero value binds 0.0.0.0:4791 with GSO, GRO,
// batches of 64 and 16 MiB socket buffers.
type Config struct {
	// Addr is the local address to bind. The zero AddrPort means
	// 0.0.0.0:4791; otherwise it is used as given, and port 0 picks a free
	// port (as with net.ListenUDP). An IPv4-mapped IPv6 address binds IPv4.
	Addr netip.AddrPort
	// BatchSize is the number of messages per sendmmsg / recvmmsg call
	// (default 64); a GSO or GRO message holds up to 64 datagrams. With
	// GRO, Recv maps BatchSize × 64 KiB of anonymous memory, which costs
	// only the pages it touches.
	BatchSize int
	// DisableGSO turns UDP_SEGMENT off on send; DisableGRO turns UDP_GRO
	// off on receive.
	DisableGSO, DisableGRO bool
	// SndBuf and RcvBuf are the socket buffer sizes to request in bytes
	// (default 16 MiB each; negative keeps the kernel default). With
	// CAP_NET_ADMIN the link forces them (SO_SNDBUFFORCE, SO_RCVBUFFORCE);
	// otherwise the kernel caps them at net.core.wmem_max / rmem_max. Info
	// reports what was obtained.
	SndBuf, RcvBuf int
	// TOS is the IPv4 TOS / IPv6 traffic class of the socket: its DSCP goes
	// on every datagram. Its ECN bits should be the ECN most datagrams
	// carry (e.g. link.ECT0): datagrams whose Datagram.ECN differs get a
	// control message.
	TOS uint8
	// Checksum selects the UDP checksum of sent datagrams (default
	// ChecksumAuto).
	Checksum Checksum
	// MaxSourcePorts bounds the send sockets SourcePort (link.SourcePorter)
	// opens, one file descriptor each, bound to the ports QPs send from
	// (the receive socket stays the only one on Addr's port). Zero means
	// DefaultMaxSourcePorts, or a quarter of the soft RLIMIT_NOFILE if
	// that is lower; negative opens none, so every datagram leaves from
	// Addr's port. Past the bound, ports share the open sockets
	// (Stats().SourcePortShared).
	MaxSourcePorts int
	// BusyPoll is how long Pump keeps polling the socket, without waiting,
	// after the last datagram it received (link.BusyPoller, SetBusyPoll);
	// 0, the default, waits in the netpoller as soon as the socket is
	// empty. Negative is taken as 0.
	BusyPoll time.Duration
	// Logger receives setup messages (what the kernel granted or refused)
	// and GSO refusals; nil discards. The data path never logs.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if !c.Addr.IsValid() {
		c.Addr = netip.AddrPortFrom(netip.IPv4Unspecified(), rocev2.UDPPort)
	}
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.SndBuf == 0 {
		c.SndBuf = DefaultSndBuf
	}
	if c.RcvBuf == 0 {
		c.RcvBuf = DefaultRcvBuf
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Info reports what the kernel granted at Open, what it refused, and
// counters of the GSO/GRO machinery.
type Info struct {
	// SndBuf and RcvBuf are the socket buffer sizes as getsockopt reports
	// them (Linux doubles the requested value for its bookkeeping).
	SndBuf, RcvBuf int
	// BufForced says SO_SNDBUFFORCE / SO_RCVBUFFORCE were accepted.
	BufForced bool
	// GSO and GRO say whether the link currently uses them.
	GSO, GRO bool
	// Checksum is the configured checksum mode; ZeroChecksumTx says the
	// socket currently sends checksum 0.
	Checksum       Checksum
	ZeroChecksumTx bool
	// Refused lists the socket options the kernel refused at Open, as
	// "NAME: error".
	Refused []string
	// GSORefused counts super-packets the kernel refused (after the first,
	// GSO is off).
	GSORefused uint64
	// GSOSent counts super-packets of two or more segments sent;
	// GROReceived counts coalesced buffers of two or more segments split.
	GSOSent, GROReceived uint64
	// GROCopied counts datagrams Recv copied out of its own buffers
	// because they did not land in the caller's: the first coalesced
	// buffers of a flow, a gso_size change, more segments than slots.
	GROCopied uint64
	// Truncated counts datagrams dropped because the receive buffer was
	// too small (also in Stats().RecvDropped).
	Truncated uint64
	// EmptyReads counts receive system calls that found the socket empty
	// (EAGAIN): one per wake-up of a Recv loop, fewer under Pump, and one
	// per poll of an empty socket while Pump busy-polls (BusyPoll).
	EmptyReads uint64
	// PolledReads counts receive system calls of a busy-polling Pump that
	// found datagrams after one or more empty polls: datagrams a waiting
	// pump would have been woken for (BusyPoll). With EmptyReads it says
	// what polling cost and what it found.
	PolledReads uint64
}
