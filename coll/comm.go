package coll

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// Errors of the package. Errors that concern a rank (it died, never
// joined, failed or stopped answering) are *RankError values, which match
// ErrRank.
var (
	// ErrInvalidArg is goroce's invalid-argument sentinel (roce's).
	ErrInvalidArg = roce.ErrInvalidArg
	// ErrClosed is returned by every call after Close (roce's sentinel).
	ErrClosed = roce.ErrClosed
	// ErrRank is matched by every *RankError.
	ErrRank = errors.New("coll: rank failed")
	// ErrTimeout is matched by the errors of a rendezvous or a call that
	// made no progress for Config.Timeout.
	ErrTimeout = errors.New("coll: timed out")
	// ErrProtocol is matched by a peer's message that breaks the wire
	// protocol (doc/coll.md §3): a wrong length, a sequence number outside
	// the window, a clear-to-send for a slot that was never offered.
	ErrProtocol = errors.New("coll: protocol violation")
)

// RankError says which rank failed a job: it died (its control connection
// closed), never joined, failed a call, or stopped answering.
type RankError struct {
	// Ranks are the ranks concerned (several when a rendezvous misses
	// more than one).
	Ranks []int
	// Hosts are their host names and pids where known ("host pid 1234").
	Hosts []string
	// Reporter is the rank that observed the failure.
	Reporter int
	// Reason says what happened.
	Reason string
	// Err is the underlying error, if any (ErrTimeout for a stall).
	Err error
}

// Error names the ranks and the reason.
func (e *RankError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "coll: rank %d: ", e.Reporter)
	if len(e.Ranks) == 1 {
		fmt.Fprintf(&b, "rank %d", e.Ranks[0])
	} else {
		b.WriteString("ranks ")
		for i, r := range e.Ranks {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Itoa(r))
		}
	}
	if len(e.Hosts) > 0 && e.Hosts[0] != "" {
		fmt.Fprintf(&b, " (%s)", strings.Join(e.Hosts, ", "))
	}
	b.WriteString(" ")
	b.WriteString(e.Reason)
	if e.Err != nil && !strings.Contains(e.Reason, e.Err.Error()) {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrRank) true.
func (e *RankError) Is(target error) bool { return target == ErrRank }

// Unwrap returns the underlying error.
func (e *RankError) Unwrap() error { return e.Err }

// SourcePortMode says which UDP source port each QP sends from, the ECMP
// entropy of RoCEv2 (Annex A17.3).
type SourcePortMode uint8

const (
	// PortKernel derives each QP's port from its QPN and its peer's, as
	// the Linux kernel does for rxe and mlx5 (rdma_get_udp_sport with flow
	// label 0, NCCL's setting): the default.
	PortKernel SourcePortMode = iota
	// PortFixed sends every QP from 4791, as a device that does not spread
	// its flows would: the case that breaks ECMP balance.
	PortFixed
	// PortExplicit gives QP i of each connection port
	// Config.ExplicitPortBase + i (mlx5dv_modify_qp_udp_sport).
	PortExplicit
)

// String returns the mode's flag spelling: kernel, fixed, explicit.
func (m SourcePortMode) String() string {
	switch m {
	case PortKernel:
		return "kernel"
	case PortFixed:
		return "fixed"
	case PortExplicit:
		return "explicit"
	}
	return fmt.Sprintf("SourcePortMode(%d)", uint8(m))
}

// ParseSourcePortMode parses kernel, fixed or explicit.
func ParseSourcePortMode(s string) (SourcePortMode, error) {
	for _, m := range []SourcePortMode{PortKernel, PortFixed, PortExplicit} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%w: source-port mode %q (kernel, fixed or explicit)", ErrInvalidArg, s)
}

// Defaults of Config.
const (
	DefaultChannels   = 2
	DefaultQPsPerConn = 1
	DefaultSteps      = 8
	// DefaultChunk is the largest message on a connection. NCCL's is 512
	// KiB (a 4 MiB buffer in 8 steps); on loopback, where one QP's window
	// of 128 packets at MTU 4096 is 512 KiB, 128 KiB keeps four messages
	// of each QP in flight (doc/coll.md §5 has the measurement).
	DefaultChunk = 128 << 10
	// DefaultTimeout bounds the rendezvous and every call's time without
	// progress.
	DefaultTimeout = 60 * time.Second
	// DefaultExplicitPortBase is PortExplicit's first port.
	DefaultExplicitPortBase = 49152
	// MaxChunk bounds Config.Chunk (the CTS's size field and a QP's
	// message limit leave far more room).
	MaxChunk = 64 << 20
)

// Config configures Join. Rank, Size and Rendezvous are required (Launch
// fills them from a launcher's environment); everything else has a usable
// zero value. All ranks of a job must agree on Channels, QPsPerConn,
// Steps, Chunk, Split and RankOrder: Join refuses a job where they differ.
type Config struct {
	// Rank is this process's rank, 0 … Size-1; LocalRank its index among
	// the ranks on its host.
	Rank, Size, LocalRank int
	// LocalSize is the number of ranks on this host (0: unknown). When it
	// is Size, the job runs on this host alone, and the ranks take
	// loopback addresses (Addr).
	LocalSize int
	// Rendezvous is where rank 0 serves the rendezvous: "host:port"
	// (rank 0 listens there, the others dial it) or "file://DIR" (rank 0
	// listens on an ephemeral port of its data-plane address and writes
	// it to DIR/goroce-JOBID.rdzv, which the others read).
	Rendezvous string
	// JobID names the job; every rank must give the same one. A rank of
	// another job (or a stray connection) is refused at the rendezvous.
	JobID string
	// Addr is the data-plane device's address (UDP port 4791 if the port
	// is 0). The zero value picks one: for a job on this host alone (a
	// rendezvous host that is a loopback address or resolves to one, or
	// LocalSize = Size, or a file rendezvous), 127.X.Y.Z with X from the
	// job ID and Y.Z from the rank (LoopbackAddr), so that the ranks each
	// have their own; otherwise the address this host routes to the
	// rendezvous host from, which one rank per host can have (more need
	// an address each).
	Addr netip.AddrPort
	// Timeout bounds the rendezvous and any call's time without progress
	// (default DefaultTimeout); a rank that dies is reported at once.
	Timeout time.Duration
	// Channels is the number of independent pipelines a collective is
	// split across, each with its own connection to each peer (NCCL's
	// channels; default DefaultChannels). Trees alternate between the two
	// trees of the double binary tree by channel.
	Channels int
	// QPsPerConn is the number of RC QPs of each connection
	// (NCCL_IB_QPS_PER_CONNECTION; default 1, at most 128).
	QPsPerConn int
	// Split sends every message split across the connection's QPs
	// (NCCL_IB_SPLIT_DATA_ON_QPS=1) instead of whole messages round robin.
	Split bool
	// Steps is the number of messages in flight per connection and
	// direction, its FIFO depth (NCCL_STEPS; default 8, at most 64).
	Steps int
	// Chunk is the largest message in bytes (default DefaultChunk); a
	// connection's staging buffers hold Steps of them each way.
	Chunk int
	// TrafficClass is the IP TOS byte of every data packet, DSCP and ECN
	// (NCCL_IB_TC's meaning: 106 is DSCP 26 with ECT(0)).
	TrafficClass uint8
	// SourcePorts picks the QPs' UDP source ports (default PortKernel).
	SourcePorts SourcePortMode
	// ExplicitPortBase is PortExplicit's first port (default
	// DefaultExplicitPortBase).
	ExplicitPortBase uint16
	// RankOrder is the order of the ring (and the labels of the trees),
	// a permutation of 0 … Size-1; nil is the natural order.
	RankOrder []int
	// Algorithm forces an algorithm for every collective that has it;
	// AlgoAuto chooses by size and rank count.
	Algorithm Algorithm
	// MTU is the path MTU of the QPs; 0 picks the largest RoCE MTU the
	// interface of Addr carries (4096 on loopback, 1024 on a 1500-byte
	// Ethernet).
	MTU qp.MTU
	// QPTimeout is the QPs' local ACK timeout (roce.ConnectOptions;
	// default roce.DefaultTimeout, 67 ms).
	QPTimeout time.Duration
	// Progress says which goroutine drives a call (ProgressAuto: the
	// measured default, doc/coll.md §5).
	Progress Progress
	// CC is the device's congestion control (roce.CCConfig: DCQCN's
	// notification and reaction points). The zero value is roce's default,
	// both on with the paper's parameters at a 100 Gb/s line rate; a
	// fabric slower than that wants RP.LineRate set to its link rate
	// (goroce coll --cc, doc/fabric.md "Collectives on the fabric").
	CC roce.CCConfig
	// Host names this rank in reports (default os.Hostname()).
	Host string
	// Configure, if set, adjusts the device's configuration before it
	// opens: a Link of its own (an impaired one), Shards, a Capture.
	Configure func(*roce.Config)
	// Logger receives rare events (never per message); nil discards.
	Logger *slog.Logger
}

func (c *Config) defaults() error {
	if c.Size < 1 || c.Rank < 0 || c.Rank >= c.Size {
		return fmt.Errorf("%w: rank %d of size %d", ErrInvalidArg, c.Rank, c.Size)
	}
	if c.Size > 1<<16 {
		return fmt.Errorf("%w: size %d above %d", ErrInvalidArg, c.Size, 1<<16)
	}
	if c.Size > 1 && c.Rendezvous == "" {
		return fmt.Errorf("%w: no rendezvous address for a job of %d ranks", ErrInvalidArg, c.Size)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Channels == 0 {
		c.Channels = DefaultChannels
	}
	if c.QPsPerConn == 0 {
		c.QPsPerConn = DefaultQPsPerConn
	}
	if c.Steps == 0 {
		c.Steps = DefaultSteps
	}
	if c.Chunk == 0 {
		c.Chunk = DefaultChunk
	}
	if c.ExplicitPortBase == 0 {
		c.ExplicitPortBase = DefaultExplicitPortBase
	}
	switch {
	case c.Timeout < 0:
		return fmt.Errorf("%w: timeout %v", ErrInvalidArg, c.Timeout)
	case c.Channels < 1 || c.Channels > 64:
		return fmt.Errorf("%w: %d channels (1 … 64)", ErrInvalidArg, c.Channels)
	case c.QPsPerConn < 1 || c.QPsPerConn > 128:
		return fmt.Errorf("%w: %d QPs per connection (1 … 128)", ErrInvalidArg, c.QPsPerConn)
	case c.Steps < 2 || c.Steps > 64:
		return fmt.Errorf("%w: %d steps (2 … 64)", ErrInvalidArg, c.Steps)
	case c.Chunk < 256 || c.Chunk > MaxChunk || c.Chunk%128 != 0:
		return fmt.Errorf("%w: chunk %d bytes (a multiple of 128 in 256 … %d)", ErrInvalidArg, c.Chunk, MaxChunk)
	case c.SourcePorts > PortExplicit:
		return fmt.Errorf("%w: source-port mode %d", ErrInvalidArg, c.SourcePorts)
	case !c.Algorithm.valid():
		return fmt.Errorf("%w: algorithm %d", ErrInvalidArg, c.Algorithm)
	}
	if c.RankOrder != nil {
		if len(c.RankOrder) != c.Size {
			return fmt.Errorf("%w: rank order of %d ranks for size %d", ErrInvalidArg, len(c.RankOrder), c.Size)
		}
		seen := make([]bool, c.Size)
		for _, r := range c.RankOrder {
			if r < 0 || r >= c.Size || seen[r] {
				return fmt.Errorf("%w: rank order %v is not a permutation of 0 … %d", ErrInvalidArg, c.RankOrder, c.Size-1)
			}
			seen[r] = true
		}
	}
	if c.Host == "" {
		c.Host, _ = os.Hostname()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// shape returns the part of c all ranks must share.
func (c *Config) shape() shape {
	h := fnv.New32a()
	for _, r := range c.RankOrder {
		fmt.Fprintf(h, "%d,", r)
	}
	return shape{Channels: c.Channels, QPsPerConn: c.QPsPerConn, Steps: c.Steps, Chunk: c.Chunk,
		Split: c.Split, OrderHash: h.Sum32()}
}

// Progress is how a call is driven.
type Progress uint8

const (
	// ProgressAuto is the default mode (defaultInline says which).
	ProgressAuto Progress = iota
	// ProgressCaller progresses on the calling goroutine, which sleeps in
	// roce.Device.WaitRx between received batches.
	ProgressCaller
	// ProgressInline runs to completion: the device's receive goroutine
	// progresses the call after each batch it received
	// (roce.Device.OnBatch), so no goroutine is woken per message; the
	// caller sleeps until the call is done.
	ProgressInline
)

// defaultInline is ProgressAuto's choice.
const defaultInline = true

// String returns the mode's flag spelling: auto, caller, inline.
func (p Progress) String() string {
	switch p {
	case ProgressAuto:
		return "auto"
	case ProgressCaller:
		return "caller"
	case ProgressInline:
		return "inline"
	}
	return fmt.Sprintf("Progress(%d)", uint8(p))
}

// ParseProgress parses auto, caller or inline.
func ParseProgress(s string) (Progress, error) {
	for _, p := range []Progress{ProgressAuto, ProgressCaller, ProgressInline} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: progress %q (auto, caller or inline)", ErrInvalidArg, s)
}

// Peer is what a communicator knows of one rank.
type Peer struct {
	Rank, LocalRank int
	Host            string
	Pid             int
	// Addr is the rank's data-plane device address.
	Addr netip.AddrPort
}

// QPInfo describes one QP of a connection.
type QPInfo struct {
	// Index is the QP's index in its connection (round robin and split
	// use them in this order).
	Index int
	// QPN and PeerQPN are this QP's number and its peer QP's.
	QPN, PeerQPN uint32
	// SourcePort is the UDP source port this QP's packets carry; the
	// peer's QP sends from the same port under the kernel rule, which is
	// symmetric in the two QPNs.
	SourcePort uint16
	// QP is the QP itself, for its counters and congestion control
	// (read-only use: the communicator posts to it).
	QP *roce.QP
}

// ConnInfo describes a connection: the QPs between this rank and one
// peer on one channel.
type ConnInfo struct {
	Peer    int
	Channel int
	QPs     []QPInfo
}

// Comm is a communicator: this process's rank in a job of Size ranks,
// connected to every other rank by Channels connections of QPsPerConn RC
// QPs each over one roce.Device. Its collectives (AllReduce, … and Run)
// must be called by every rank of the job in the same order with matching
// arguments, one call at a time per communicator (they serialise on a
// lock); Close may be called from any goroutine and ends a call in
// progress with ErrClosed.
type Comm struct {
	cfg   Config
	peers []Peer

	dev      *roce.Device
	scq, rcq *roce.CQ
	fifo     []byte // my FIFO: the peers' CTSs for my sends, Steps × 32 bytes per connection
	fifoMR   *roce.MR
	ctsBuf   []byte // the CTSs I write, copied inline at post time
	ctsMR    *roce.MR
	conns    []*conn // peer × Channels + channel; nil for this rank
	ctl      *control

	ctx    context.Context
	cancel context.CancelCauseFunc

	callMu sync.Mutex // one call at a time; holds eng
	eng    engine

	// Run to completion (Config.Progress): inlMu guards eng while a call
	// is active, between the caller and the device's receive goroutine.
	inline    bool
	inlMu     sync.Mutex
	inlActive bool
	inlErr    error
	inlDone   chan struct{}

	errMu sync.Mutex
	err   error // the first fatal error; every later call returns it

	inCall  atomic.Bool
	moves   atomic.Uint64 // progress steps, for the watchdog
	quit    chan struct{}
	watchWG sync.WaitGroup
	// closeOnce runs Close's work once; a Close called meanwhile (Abort
	// from a signal handler while the program closes) waits for it and
	// returns the same closeErr.
	closeOnce sync.Once
	closeErr  error
}

// Rank returns this process's rank.
func (c *Comm) Rank() int { return c.cfg.Rank }

// Size returns the number of ranks.
func (c *Comm) Size() int { return c.cfg.Size }

// LocalRank returns this rank's index among the ranks of its host.
func (c *Comm) LocalRank() int { return c.cfg.LocalRank }

// Config returns the communicator's configuration with its defaults
// filled in.
func (c *Comm) Config() Config { return c.cfg }

// Peers returns every rank's description, indexed by rank (this one
// included).
func (c *Comm) Peers() []Peer { return append([]Peer(nil), c.peers...) }

// Device returns the communicator's device, for its counters (Stats, an
// Exporter); the communicator owns it and closes it in Close.
func (c *Comm) Device() *roce.Device { return c.dev }

// Conns returns every connection of this rank with its QPs: their numbers
// and the UDP source ports they send from, by peer and channel.
func (c *Comm) Conns() []ConnInfo {
	var out []ConnInfo
	for _, cn := range c.conns {
		if cn == nil {
			continue
		}
		ci := ConnInfo{Peer: cn.peer, Channel: cn.ch}
		for i, q := range cn.qps {
			ci.QPs = append(ci.QPs, QPInfo{Index: i, QPN: uint32(q.QPN()), PeerQPN: cn.peerQPN[i], SourcePort: q.SourcePort(), QP: q})
		}
		out = append(out, ci)
	}
	return out
}

// Join makes this process's rank of a job: it opens the data-plane
// device, meets the other ranks at the rendezvous (rank 0 serves it),
// connects a QP set to every peer and returns when every rank has done so.
// A rank that does not join within cfg.Timeout fails every rank's Join
// with a *RankError naming it; ctx ends Join early.
func Join(ctx context.Context, cfg Config) (_ *Comm, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	c := &Comm{cfg: cfg, quit: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancelCause(context.Background())
	defer func() {
		if err != nil {
			c.teardown()
		}
	}()
	if err := c.openDevice(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	me := hello{JobID: cfg.JobID, Size: cfg.Size, Rank: cfg.Rank, LocalRank: cfg.LocalRank,
		Pid: os.Getpid(), Host: cfg.Host, Addr: c.dev.LocalAddr(),
		FIFOVA: c.fifoMR.IOVA(), FIFORKey: uint32(c.fifoMR.RKey()), Shape: cfg.shape()}
	table := []hello{me}
	if cfg.Size > 1 {
		c.ctl, table, err = rendezvous(ctx, &c.cfg, me, deadline)
		if err != nil {
			return nil, err
		}
	}
	c.peers = make([]Peer, cfg.Size)
	for i, h := range table {
		c.peers[i] = Peer{Rank: h.Rank, LocalRank: h.LocalRank, Host: h.Host, Pid: h.Pid, Addr: h.Addr}
	}
	if cfg.Size > 1 {
		if err := c.connect(ctx, table, deadline); err != nil {
			return nil, err
		}
		c.ctl.start(c)
	}
	c.eng.init(c)
	c.inlDone = make(chan struct{}, 1)
	switch cfg.Progress {
	case ProgressInline:
		c.inline = true
	case ProgressAuto:
		c.inline = defaultInline
	}
	if c.inline {
		c.dev.OnBatch(c.onBatch)
	}
	c.watchWG.Add(1)
	go c.watch()
	return c, nil
}

// openDevice opens the device and registers the FIFO and CTS regions.
func (c *Comm) openDevice() error {
	cfg := &c.cfg
	addr, loop, err := dataAddr(cfg)
	if err != nil {
		return err
	}
	for try := 0; ; try++ {
		rc := roce.Config{Addr: addr, Logger: cfg.Logger, CC: cfg.CC}
		if cfg.Configure != nil {
			cfg.Configure(&rc)
		}
		c.dev, err = roce.Open(rc)
		if err == nil {
			break
		}
		if rc.Link != nil {
			rc.Link.Close() // Open leaves a given link to its caller
		}
		if !loop || !errors.Is(err, syscall.EADDRINUSE) || try == 99 {
			return fmt.Errorf("coll: rank %d: data-plane device on %v: %w", cfg.Rank, addr, err)
		}
		// Another job has this loopback address: any other will do,
		// the peers learn it at the rendezvous.
		a := addr.Addr().As4()
		a[1] = 100 + (a[1]-100+1)%100
		addr = netip.AddrPortFrom(netip.AddrFrom4(a), addr.Port())
	}
	if cfg.MTU == 0 {
		cfg.MTU = pathMTU(c.dev.LocalAddr().Addr())
	}
	nconn := cfg.Size * cfg.Channels
	c.fifo = make([]byte, nconn*cfg.Steps*ctsSize)
	if c.fifoMR, err = c.dev.RegisterMR(nil, c.fifo, roce.LocalWrite|roce.RemoteWrite); err != nil {
		return err
	}
	c.ctsBuf = make([]byte, nconn*cfg.Steps*ctsSize)
	if c.ctsMR, err = c.dev.RegisterMR(nil, c.ctsBuf, 0); err != nil {
		return err
	}
	return nil
}

// dataAddr returns the data-plane address of cfg (Config.Addr's rule),
// and whether it is a loopback address of LoopbackAddr's (another may
// then be taken).
func dataAddr(cfg *Config) (netip.AddrPort, bool, error) {
	if cfg.Addr.IsValid() {
		if cfg.Addr.Port() == 0 {
			return netip.AddrPortFrom(cfg.Addr.Addr(), 4791), false, nil
		}
		return cfg.Addr, false, nil
	}
	host := rendezvousHost(cfg.Rendezvous)
	if cfg.Size == 1 || cfg.LocalSize == cfg.Size || host == "" || isLoopbackHost(host) {
		return netip.AddrPortFrom(LoopbackAddr(cfg.JobID, cfg.Rank), 4791), true, nil
	}
	if cfg.LocalSize > 1 {
		return netip.AddrPort{}, false, fmt.Errorf("%w: rank %d: %d ranks on this host of a job across hosts need a data-plane address each (Config.Addr, GOROCE_ADDR with one address per local rank)",
			ErrInvalidArg, cfg.Rank, cfg.LocalSize)
	}
	// The address this host routes towards the rendezvous host from.
	u, err := net.Dial("udp", net.JoinHostPort(host, "9"))
	if err != nil {
		return netip.AddrPort{}, false, fmt.Errorf("coll: rank %d: no route to the rendezvous host %q for a data-plane address (set Config.Addr): %w", cfg.Rank, host, err)
	}
	defer u.Close()
	a := u.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
	return netip.AddrPortFrom(a, 4791), false, nil
}

// LoopbackAddr is the data-plane address a rank takes when the job runs on
// loopback: 127.X.Y.Z, X in 100 … 199 from a hash of jobID (so that two
// jobs on one host rarely meet; a rank whose address is taken moves on to
// the next X), Y.Z = rank+1 in base 256.
func LoopbackAddr(jobID string, rank int) netip.Addr {
	h := fnv.New32a()
	h.Write([]byte(jobID))
	x := byte(100 + h.Sum32()%100)
	v := rank + 1
	return netip.AddrFrom4([4]byte{127, x, byte(v >> 8), byte(v)})
}

// rendezvousHost returns the host of a rendezvous address ("" for file://).
func rendezvousHost(r string) string {
	if strings.HasPrefix(r, "file://") {
		return ""
	}
	h, _, err := net.SplitHostPort(r)
	if err != nil {
		return ""
	}
	return h
}

// isLoopbackHost reports whether h is, or resolves to, a loopback
// address (Debian names the host 127.0.1.1 in /etc/hosts, containers
// often 127.0.0.1).
func isLoopbackHost(h string) bool {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.IsLoopback()
	}
	addrs, err := net.LookupHost(h)
	if err != nil {
		return false
	}
	for _, s := range addrs {
		if a, err := netip.ParseAddr(s); err == nil && a.IsLoopback() {
			return true
		}
	}
	return false
}

// pathMTU returns the largest RoCE MTU whose packets fit the interface
// that holds a (loopback: MTU4096).
func pathMTU(a netip.Addr) qp.MTU {
	if a.IsLoopback() {
		return qp.MTU4096
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return qp.MTU1024
	}
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, ad := range addrs {
			ipn, ok := ad.(*net.IPNet)
			if !ok {
				continue
			}
			if ip, ok := netip.AddrFromSlice(ipn.IP); ok && ip.Unmap() == a {
				// RoCEv2 overhead: IPv4 20 (IPv6 40) + UDP 8 + BTH 12 +
				// RETH 16 + ICRC 4.
				room := ifc.MTU - 60 - 40
				for m := qp.MTU4096; m > qp.MTU256; m-- {
					if m.Bytes() <= room {
						return m
					}
				}
				return qp.MTU256
			}
		}
	}
	return qp.MTU1024
}

// connect makes the QPs towards every peer, exchanges their numbers
// through rank 0, moves them to RTS, posts their receives and waits at the
// rendezvous's barrier until every rank has done so.
func (c *Comm) connect(ctx context.Context, table []hello, deadline time.Time) error {
	cfg := &c.cfg
	nconn := cfg.Size * cfg.Channels
	perQP := 2*cfg.Steps + 2 // receives kept posted per QP
	qpsTotal := (cfg.Size - 1) * cfg.Channels * cfg.QPsPerConn
	var err error
	if c.rcq, err = c.dev.CreateCQ(qpsTotal*perQP + 64); err != nil {
		return err
	}
	// Signalled sends: at most Steps messages × QPs per connection, and
	// every WR's flush completion at Destroy.
	if c.scq, err = c.dev.CreateCQ(qpsTotal*(cfg.Steps+cfg.Steps+8) + 64); err != nil {
		return err
	}
	c.conns = make([]*conn, nconn)
	var mine []qpEntry
	for p := range cfg.Size {
		if p == cfg.Rank {
			continue
		}
		for ch := range cfg.Channels {
			cn := newConn(c, p, ch, table[p])
			for i := range cfg.QPsPerConn {
				q, err := c.dev.CreateQP(roce.QPConfig{SendCQ: c.scq, RecvCQ: c.rcq, Eager: true, MaxInline: max(256, cfg.Steps*ctsSize),
					MaxSendWR: 4*cfg.Steps + 16, MaxRecvWR: perQP})
				if err != nil {
					return err
				}
				cn.qps = append(cn.qps, q)
				inf := q.Info()
				mine = append(mine, qpEntry{Peer: p, Channel: ch, Index: i, QPN: uint32(inf.QPN), PSN: uint32(inf.PSN)})
			}
			c.conns[cn.idx] = cn
		}
	}
	theirs, err := c.ctl.exchange(ctx, cfg.Rank, mine, deadline)
	if err != nil {
		return err
	}
	got := 0
	for _, e := range theirs {
		if e.Peer < 0 || e.Peer >= cfg.Size || e.Peer == cfg.Rank || e.Channel >= cfg.Channels || e.Index >= cfg.QPsPerConn {
			return fmt.Errorf("%w: rendezvous routed QP %+v", ErrProtocol, e)
		}
		cn := c.conns[e.Peer*cfg.Channels+e.Channel]
		if cn.peerQPN[e.Index] != 0 {
			return fmt.Errorf("%w: rendezvous routed QP %+v twice", ErrProtocol, e)
		}
		cn.peerQPN[e.Index], cn.peerPSN[e.Index] = e.QPN, e.PSN
		got++
	}
	if got != qpsTotal {
		return fmt.Errorf("%w: rendezvous routed %d QPs, want %d", ErrProtocol, got, qpsTotal)
	}
	for _, cn := range c.conns {
		if cn == nil {
			continue
		}
		if err := cn.connect(); err != nil {
			return err
		}
	}
	return c.ctl.barrier(ctx, cfg.Rank, deadline)
}

// fail records err as the communicator's fatal error (the first one
// wins), tells rank 0 so that every rank learns of it, and ends a call in
// progress. It returns the recorded error.
func (c *Comm) fail(err error) error {
	c.errMu.Lock()
	first := c.err == nil
	if first {
		c.err = err
	}
	err = c.err
	c.errMu.Unlock()
	if first {
		c.cancel(err)
		if c.ctl != nil && !errors.Is(err, ErrClosed) {
			c.ctl.reportAbort(c.cfg.Rank, err)
		}
	}
	return err
}

// failed returns the fatal error, if any.
func (c *Comm) failed() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

// watch ends a call that made no progress for Timeout (the stall is
// described by the call itself, which knows what it waits for).
func (c *Comm) watch() {
	defer c.watchWG.Done()
	tick := time.NewTicker(max(c.cfg.Timeout/8, 5*time.Millisecond))
	defer tick.Stop()
	var last uint64
	var since time.Time
	for {
		select {
		case <-c.quit:
			return
		case now := <-tick.C:
			m := c.moves.Load()
			if !c.inCall.Load() || m != last || since.IsZero() {
				last, since = m, now
				continue
			}
			if now.Sub(since) >= c.cfg.Timeout {
				c.eng.stalled.Store(true)
				c.cancel(errStall)
				return
			}
		}
	}
}

// errStall is the cause with which the watchdog ends a stalled call.
var errStall = errors.New("coll: stalled")

// Close ends the communicator: a call in progress returns ErrClosed, this
// rank's posted messages are given until Timeout to be acknowledged, and
// then, unless the job has failed, Close waits (up to Timeout) until every
// rank has called Close, so that no rank's device goes while another is
// still in its last collective. It closes the device last and is
// idempotent.
func (c *Comm) Close() error {
	c.closeOnce.Do(c.close)
	return c.closeErr
}

// close is Close's work, run once.
func (c *Comm) close() {
	// End a call in progress, then drain what this rank still sends.
	alive := c.failed() == nil
	c.fail(ErrClosed)
	c.callMu.Lock()
	if alive {
		c.eng.drain(time.Now().Add(c.cfg.Timeout))
	}
	c.callMu.Unlock()
	if c.ctl != nil {
		c.ctl.close(time.Now().Add(c.cfg.Timeout), !alive)
	}
	c.closeErr = c.teardown()
}

// Abort ends the communicator at once as failed with reason: every other
// rank's current or next call fails with an error that names this rank
// and reason (a program's SIGINT handler calls it). It does not wait for
// the other ranks, unlike Close.
func (c *Comm) Abort(reason error) error {
	c.fail(c.rankErr(c.cfg.Rank, reason, "aborted: %v", reason))
	return c.Close()
}

// teardown stops the watchdog and closes the device.
func (c *Comm) teardown() error {
	select {
	case <-c.quit:
	default:
		close(c.quit)
	}
	c.watchWG.Wait()
	c.cancel(ErrClosed)
	if c.ctl != nil {
		c.ctl.shutdown()
	}
	var err error
	if c.dev != nil {
		err = c.dev.Close()
	}
	return err
}

// failRemote records a failure another rank reported (or rank 0 relayed)
// without reporting it back.
func (c *Comm) failRemote(err error) {
	c.errMu.Lock()
	if c.err == nil {
		c.err = err
		c.cancel(err)
	}
	c.errMu.Unlock()
}
