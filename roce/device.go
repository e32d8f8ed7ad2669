package roce

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
)

// Config configures a Device.
type Config struct {
	// Link is the transport; the device closes it on Close. Nil means a
	// link/udp socket on Addr, opened by Open.
	Link link.Link
	// Addr is the local address of the UDP link Open opens when Link is
	// nil, as udp.Config.Addr (the zero AddrPort binds 0.0.0.0:4791, whose
	// Info a peer cannot use: give the address peers reach). Ignored when
	// Link is set.
	Addr netip.AddrPort
	// DestPort is the UDP port packets are sent to; 0 means 4791. Only
	// tests set it (two devices on one host need two ports).
	DestPort uint16
	// MaxQPs bounds the QPs of the device (default 65536, rxe's max_qp).
	MaxQPs int
	// Batch is the most datagrams per link Send and Recv: a transmit batch
	// and a receive batch (default DefaultBatch, at most 1024).
	Batch int
	// CopyPayloads copies every packet's payload into a packet buffer even
	// over a link that could send it from its memory region
	// (link.Gatherer), as the device did before it could; for comparisons.
	CopyPayloads bool
	// Logger receives rare events (never per packet); nil discards.
	Logger *slog.Logger
	// NotECT sends packets Not-ECT (IP ECN 00), as rxe does by default.
	// Otherwise every packet of a QP carries ECT(0) (doc/dcqcn.md §7.1), so
	// that ECN switches mark it CE instead of dropping it, unless the QP's
	// traffic class or ConnectOptions.ECN asks for another codepoint.
	NotECT bool
	// ICRCIDRecovery says how ICRCs are checked when the link does not
	// see the IPv4 ID (link/udp); the zero value is ICRCIDWindow.
	ICRCIDRecovery ICRCIDRecovery
	// CNPDSCP is the DSCP of the CNPs the device sends (the data packets
	// carry their QP's traffic class): 0 means DefaultCNPDSCP (48, as
	// ConnectX's cnp_dscp), CodeZero means 0. CNPs leave from their QP's
	// UDP source port, with its ECN codepoint.
	CNPDSCP int
	// CNPPriority is the 802.1Q PCP of CNPs on raw links that tag frames:
	// 0 means DefaultCNPPriority (6), CodeZero means 0.
	CNPPriority int
	// CC configures congestion control (DCQCN); its zero value enables
	// it with the paper's parameters. ConnectOptions.CC overrides it per
	// QP.
	CC CCConfig
	// Capture, if set, writes every packet the device sends and receives
	// to a pcapng stream, without ever blocking the data path; see
	// CaptureConfig.
	Capture *CaptureConfig
	// CM configures the connection manager that Listen and Dial start
	// (timers, retries, CA GUID); the zero value has rdma_cm's.
	CM CMConfig
	// Waiters, if set, is shared with other devices of the process whose
	// goroutines wait for this one's work (see Waiters); nil gives the
	// device a count of its own.
	Waiters *Waiters
	// Shards is the number of engines the QPs are spread over, each with
	// its own lock, timer goroutine and transmit batches; a QP belongs to
	// the shard its QPN picks (doc/engine.md). 0 means GOMAXPROCS at
	// Open, at most DefaultMaxShards: QPs on different shards are driven
	// in parallel, on as many cores as the process may use. 1 gives the
	// single engine of earlier versions. At most 256.
	Shards int
	// BusyPoll, when positive, is how long the receive goroutine keeps
	// polling its link after the last datagram before it waits, on links
	// that can (link.BusyPoller; link/udp). While traffic flows the
	// goroutine then holds its processor and finds each datagram by a poll
	// instead of a wake-up, at the price of a processor kept busy: for a
	// process with a processor to spare per device, not for many devices
	// or processes sharing a few cores (doc/limits.md §9). 0, the default,
	// waits as soon as the link is empty; links that cannot poll ignore it.
	BusyPoll time.Duration
}

// DefaultBatch is Config.Batch's default: the window of one QP
// (qp.MaxUnackedPSNs). The small requests a QP's ACK lets go then leave in
// one link Send (one sendmmsg on link/udp) and are received, and
// acknowledged, in one batch, where batches of 64 took two sends, two
// receives and two ACKs per window (doc/limits.md §9).
const DefaultBatch = qp.MaxUnackedPSNs

// Stats are device-wide counters (rxe's are device-wide too), readable
// from any goroutine. Per-QP counters are on each QP.
type Stats struct {
	RxPackets    atomic.Uint64
	TxPackets    atomic.Uint64
	DroppedNoQP  atomic.Uint64 // destination QPN not found (rxe: dropped, no count)
	BadAddr      atomic.Uint64 // source IP is not the QP's peer (rxe check_addr)
	BadICRC      atomic.Uint64
	BadHdr       atomic.Uint64 // too short or failed to parse
	ICRCIDFixups atomic.Uint64 // IPv4 ICRCs verified by recovering the sender's IP ID
	SendErrors   atomic.Uint64
	// TxGathered counts packets sent with their payload read where it lies
	// in its memory region (a link.Gatherer link), not copied; they are
	// counted in TxPackets too.
	TxGathered atomic.Uint64

	// ICRCIDOutOfWindow counts packets whose ICRC verified only over an
	// IPv4 ID outside their peer's window (ICRCIDWindow); they are
	// dropped and also counted in BadICRC, device-wide and on the QP.
	ICRCIDOutOfWindow atomic.Uint64
	// ICRCIDReseeds counts the times a peer's ID window was started or
	// restarted from a recovered ID: the peer's first such packet, the
	// first after an idle gap, or a run of out-of-window ones.
	ICRCIDReseeds atomic.Uint64

	// RxECN counts received packets by their IP ECN field, indexed by
	// codepoint (link.NotECT, link.ECT1, link.ECT0, link.CE).
	RxECN [4]atomic.Uint64
	// TxCNPs counts CNPs sent by the QPs' notification points; RxCNPs the
	// CNPs received for a QP of the device (ICRC and source checked).
	TxCNPs, RxCNPs atomic.Uint64
	// CNPsIgnored counts received CNPs whose QP has its reaction point off.
	CNPsIgnored atomic.Uint64
	// CNPsHandled counts received CNPs fed to a QP's reaction point
	// (ConnectX rp_cnp_handled); RxCNPs = CNPsHandled + CNPsIgnored.
	CNPsHandled atomic.Uint64
	// CNPsNoQP counts CNPs for a QPN the device does not have; they are
	// dropped (and also counted in DroppedNoQP).
	CNPsNoQP atomic.Uint64

	// EventsDropped counts asynchronous events not queued on
	// Device.Events because EventQueueLen were unread.
	EventsDropped atomic.Uint64

	// RxBatches counts the batches of datagrams the receive goroutine
	// processed (RxSeq); RxYields those after which it yielded its
	// processor because somebody may wait for what the batch did: it
	// pushed a completion, sent a bulk reply, or a goroutine is counted
	// in the device's Waiters (Config.Waiters; doc/latency.md §7).
	RxBatches, RxYields atomic.Uint64

	// CapturePackets counts the packets Config.Capture wrote (counted
	// when its buffer is flushed to the writer); CaptureDrops those it
	// did not write because its queue was full (the writer was slow) or
	// the writer had failed.
	CapturePackets, CaptureDrops atomic.Uint64
}

// Device is a RoCEv2 device: the objects of the verbs API (PDs, MRs, CQs,
// QPs) over one Link. Its QPs are spread over shards (Config.Shards), each
// an engine with its own lock that owns its QPs' transport state; verbs
// calls from other goroutines take their QP's engine lock to hand work
// over (see QP.PostSend), so they may be called from any goroutine.
type Device struct {
	cfg   Config
	link  link.Link
	local netip.AddrPort
	mrs   *mr.Table
	pd    *mr.PD // the default PD: RegisterMR(nil, …) and QPConfig{}
	log   *slog.Logger
	stats Stats

	snaps snapIndex // the QPs Snapshot reads (snapshot.go)

	shards []*shard     // the engines; a QP's is shardOf(QPN)
	nqps   atomic.Int64 // QPs in all shards' tables (MaxQPs)
	// rcvWant is the receive buffer growRcvBuf last asked the link for.
	rcvWant atomic.Int64
	closed  atomic.Bool // Close has begun; stored before Close takes each engine lock

	// rxMu is held by the receive goroutine while it processes a batch;
	// Close takes it once, after setting closed, so that no batch is read
	// after the link (whose lent buffers it may be) is closed.
	rxMu sync.Mutex

	sendMu sync.Mutex // held around link.Send, which one goroutine may call at a time

	objMu sync.Mutex // guards cqs
	cqs   []*cq.CQ   // the CQs the device made (CreateCQ and QPs' own), closed by Close

	evMu     sync.Mutex // guards evClosed and the sends on events
	evClosed bool
	events   chan Event // Events

	done chan struct{}
	wg   sync.WaitGroup

	planner link.IPIDPlanner       // non-nil when the link's kernel picks IPv4 IDs
	sporter link.SourcePorter      // non-nil when the link sends from per-QP source ports
	cnpDSCP uint8                  // Config.CNPDSCP resolved
	cnpPrio uint8                  // Config.CNPPriority resolved
	idsMu   sync.Mutex             // guards ids: every shard verifies ICRCs
	ids     idTracker              // peers' IPv4 ID counters (ICRCIDWindow)
	gather  bool                   // the link sends two-part datagrams (link.Gatherer)
	cap     *capture               // Config.Capture's, or nil
	rx      rxNotify               // RxSeq, WaitRx and the yield after a batch (rxwait.go)
	waiters *Waiters               // Config.Waiters, or the device's own
	hook    cqHook                 // the cq.Hook of the CQs the device makes
	pushed  atomic.Bool            // a CQ the device made took a completion since the last batch
	onBatch atomic.Pointer[func()] // OnBatch's function
	inBatch atomic.Bool            // the OnBatch function is running: verbs leave their WQEs to sendDeferred

	testQPN  func() bth.QPN // internal tests: picks the next QPN (nil: random)
	cmMu     sync.Mutex     // guards cms and cmClosed; Listen or Dial start cms (cm.go)
	cmClosed bool           // closeCM ran: no manager starts any more
	cms      *cmState
}

// Open starts a device on cfg.Link, or on a UDP link (package link/udp) it
// opens on cfg.Addr when cfg.Link is nil. Either way Device.Close closes the
// link; if Open fails, it closes the link it opened and leaves cfg.Link to
// the caller.
func Open(cfg Config) (d *Device, err error) {
	if cfg.Link == nil {
		l, uerr := udp.Open(udp.Config{Addr: cfg.Addr})
		if uerr != nil {
			return nil, uerr
		}
		cfg.Link = l
		defer func() {
			if err != nil { // Open's own result: any later failure
				l.Close()
			}
		}()
	}
	if cfg.DestPort == 0 {
		cfg.DestPort = rocev2.UDPPort
	}
	if cfg.MaxQPs == 0 {
		cfg.MaxQPs = 1 << 16
	}
	if cfg.Batch == 0 {
		cfg.Batch = DefaultBatch
	}
	cfg.Shards = shardCount(cfg.Shards)
	if cfg.MaxQPs < 0 || cfg.Batch < 0 || cfg.BusyPoll < 0 || cfg.Batch > 1024 || cfg.Shards < 1 || cfg.Shards > maxShards {
		return nil, fmt.Errorf("%w: negative or too large limits", ErrInvalidArg)
	}
	if err := cfg.CC.validate(); err != nil {
		return nil, err
	}
	cnpDSCP, err := code(cfg.CNPDSCP, DefaultCNPDSCP, 63, "CNPDSCP")
	if err != nil {
		return nil, err
	}
	cnpPrio, err := code(cfg.CNPPriority, DefaultCNPPriority, 7, "CNPPriority")
	if err != nil {
		return nil, err
	}
	if cfg.ICRCIDRecovery > ICRCIDAny {
		return nil, fmt.Errorf("%w: ICRCIDRecovery %d", ErrInvalidArg, cfg.ICRCIDRecovery)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tbl, err := mr.NewTable(mr.TableConfig{})
	if err != nil {
		return nil, err
	}
	d = &Device{
		cfg: cfg, link: cfg.Link, local: cfg.Link.LocalAddr(), mrs: tbl, pd: tbl.AllocPD(), log: log,
		done:    make(chan struct{}),
		events:  make(chan Event, EventQueueLen),
		waiters: cfg.Waiters,
	}
	if d.waiters == nil {
		d.waiters = new(Waiters)
	}
	d.hook = cqHook{d}
	if cfg.Capture != nil {
		if d.cap, err = newCapture(cfg.Capture, d.local, &d.stats, log); err != nil {
			return nil, err
		}
	}
	if bp, ok := cfg.Link.(link.BusyPoller); ok && cfg.BusyPoll > 0 {
		bp.SetBusyPoll(cfg.BusyPoll)
	}
	d.planner, _ = cfg.Link.(link.IPIDPlanner)
	d.sporter, _ = cfg.Link.(link.SourcePorter)
	d.cnpDSCP, d.cnpPrio = cnpDSCP, cnpPrio
	if g, ok := cfg.Link.(link.Gatherer); ok && g.Gathers() && !cfg.CopyPayloads {
		d.gather = true
	}
	d.shards = make([]*shard, cfg.Shards)
	for i := range d.shards {
		d.shards[i] = newShard(d, cfg.Batch)
	}
	d.wg.Add(1 + 2*len(d.shards))
	go d.recvLoop()
	for _, s := range d.shards {
		go s.engineLoop()
		go s.senderLoop()
	}
	return d, nil
}

// Close stops the device: QPs are destroyed (their outstanding work
// completes with WR_FLUSH_ERR), the link is closed and every goroutine the
// device started has returned when Close returns. The CQs the device made
// (CreateCQ and the QPs' own) are closed after the flush completions are
// on them: they can still be polled, and a blocked Wait returns them and
// then an error that matches ErrClosed. After Close every verb of the
// device and its QPs returns ErrClosed; Close itself is idempotent. With
// Config.Capture, the capture's queue is written and flushed last, and a
// write error of the capture is returned with the link's. The channel of
// Events is closed.
func (d *Device) Close() error {
	d.closeCM() // listeners, connections and QP1 first: they need the engine
	if !d.closed.CompareAndSwap(false, true) {
		return nil
	}
	// Each engine lock once after closed: every verb, packet or timer
	// pass that began before has ended, none begins after, and no engine
	// arms its timer or queues a batch any more. The ACKs the QPs owe for
	// requests they executed leave in this last pass (qp's nextReply in
	// ERR): the receive goroutine's transmit pass after a batch stops at
	// closed, and the program may have polled those requests' receive
	// completions already (rxe acknowledges in the pass that completes).
	now := time.Now()
	for _, s := range d.shards {
		s.lock()
		for _, q := range s.qps {
			q.q.Modify(&qp.Attr{State: qp.StateErr}, qp.AttrState)
			s.activate(q)
		}
		for s.transmit(now); s.stalled; s.transmit(now) {
			s.unlock() // sends the queued batches (its resuming pass stops at closed)
			s.lock()
		}
		s.unlock()
	}
	d.evMu.Lock()
	d.evClosed = true
	close(d.events) // raise sends nothing once evClosed is set
	d.evMu.Unlock()
	d.rxMu.Lock() // the receive goroutine's batch in progress ends
	d.rxMu.Unlock()
	for _, s := range d.shards {
		s.waitSent() // what the last passes queued leaves before the link closes
	}
	close(d.done)
	for _, s := range d.shards {
		s.timer.close() // no arm after closed is set
	}
	err := d.link.Close()
	d.wg.Wait()
	d.objMu.Lock()
	cqs := d.cqs
	d.cqs = nil
	d.objMu.Unlock()
	for _, c := range cqs {
		c.Close()
	}
	if d.cap != nil {
		err = errors.Join(err, d.cap.close())
	}
	return err
}

// LocalAddr returns the address the device receives on.
func (d *Device) LocalAddr() netip.AddrPort { return d.local }

// Stats returns the device counters.
func (d *Device) Stats() *Stats { return &d.stats }

// AllocPD allocates a protection domain. Most programs need none: the
// device has a default one (PD), which nil selects in RegisterMR and
// QPConfig.
func (d *Device) AllocPD() *PD { return d.mrs.AllocPD() }

// PD returns the device's default protection domain, the one RegisterMR
// and CreateQP use when given none.
func (d *Device) PD() *PD { return d.pd }

// RegisterMR registers buf as a memory region of pd (nil: the default PD)
// with the given access. The caller keeps buf alive and must not reuse it
// until DeregisterMR. It returns ErrClosed after Close.
func (d *Device) RegisterMR(pd *PD, buf []byte, access AccessFlags) (*MR, error) {
	return d.RegisterMRConfig(pd, MRConfig{Buf: buf, Access: access})
}

// RegisterMRConfig registers a memory region of pd (nil: the default PD)
// with the options of cfg that RegisterMR leaves at their defaults: a
// fixed or zero-based IOVA, and Invalidatable, which lets LOCAL_INV and a
// peer's SEND with invalidate invalidate it (a fast-registration MR's
// behaviour, ib_alloc_mr). The caller keeps cfg.Buf alive and must not
// reuse it until DeregisterMR. It returns ErrClosed after Close.
func (d *Device) RegisterMRConfig(pd *PD, cfg MRConfig) (*MR, error) {
	if d.isClosed() {
		return nil, ErrClosed
	}
	if pd == nil {
		pd = d.pd
	}
	return d.mrs.Register(pd, cfg)
}

// DeregisterMR deregisters r; later remote accesses fail with a remote
// access error.
func (d *Device) DeregisterMR(r *MR) error { return d.mrs.Deregister(r) }

// CreateCQ creates a completion queue of the given depth, which Close
// closes. It returns ErrClosed after Close.
func (d *Device) CreateCQ(depth int) (*CQ, error) {
	c, err := cq.New(cq.Config{Capacity: depth, Hook: d.hook})
	if err != nil {
		return nil, err
	}
	d.objMu.Lock()
	defer d.objMu.Unlock()
	if d.closed.Load() {
		return nil, ErrClosed
	}
	d.cqs = append(d.cqs, c)
	return c, nil
}

// isClosed reports whether Close has begun.
func (d *Device) isClosed() bool { return d.closed.Load() }

// keepCQ adds c to the CQs Close closes.
func (d *Device) keepCQ(c *cq.CQ) {
	d.objMu.Lock()
	d.cqs = append(d.cqs, c)
	d.objMu.Unlock()
}

// forgetCQ drops c from the CQs Close closes.
func (d *Device) forgetCQ(c *cq.CQ) {
	d.objMu.Lock()
	defer d.objMu.Unlock()
	for i, x := range d.cqs {
		if x == c {
			d.cqs = append(d.cqs[:i], d.cqs[i+1:]...)
			return
		}
	}
}

// lockQPN draws a random unused QPN (IBA 10.2.4: QPNs need not be
// sequential; ReDMArk M1 recommends they are not), or takes qpn if it is
// not 0 and unused, and returns it with its shard's engine lock held.
func (d *Device) lockQPN(qpn bth.QPN) (bth.QPN, *shard, error) {
	if qpn != 0 {
		s := d.shardOf(qpn)
		s.lock()
		if _, ok := s.qps[qpn]; ok {
			s.unlock()
			return 0, nil, fmt.Errorf("%w: QPN %v in use", ErrInvalidArg, qpn)
		}
		return qpn, s, nil
	}
	if d.testQPN != nil {
		n := d.testQPN()
		s := d.shardOf(n)
		s.lock()
		return n, s, nil
	}
	var b [4]byte
	for i := 0; i < 64; i++ {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, nil, err
		}
		n := bth.QPN(binary.LittleEndian.Uint32(b[:]) & bth.QPNMask)
		// QPNs below 16 are reserved: 0 (SMI), 1 (GSI: the CM's MADs,
		// never a user QP), and the rest kept free as rxe keeps them.
		// QP1 is made by the connection manager (cm.go: createQP).
		if n < 16 || n == bth.QPNMulticast {
			continue
		}
		s := d.shardOf(n)
		s.lock()
		if _, ok := s.qps[n]; !ok {
			return n, s, nil
		}
		s.unlock()
	}
	return 0, nil, ErrTooManyQPs
}

// qpCount returns the number of QPs in the shards' tables.
func (d *Device) qpCount() int {
	n := 0
	for _, s := range d.shards {
		s.lock()
		n += len(s.qps)
		s.unlock()
	}
	return n
}
