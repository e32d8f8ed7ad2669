package cm

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/goroce/goroce/bth"
)

// rdma_cm's timer settings (drivers/infiniband/core/cma.c).
const (
	// DefaultCMResponseTimeout is CMA_CM_RESPONSE_TIMEOUT: 4.096 µs·2^20 ≈ 4.3 s.
	DefaultCMResponseTimeout = 20
	// DefaultMaxCMRetries is CMA_MAX_CM_RETRIES.
	DefaultMaxCMRetries = 15
	// DefaultPacketLifeTime is CMA_IBOE_PACKET_LIFETIME, the packet life
	// time rdma_cm gives RoCE paths (4.096 µs·2^18).
	DefaultPacketLifeTime = 18
	// DefaultTargetACKDelay is the CA ACK delay rxe reports (REP
	// TargetACKDelay 15 in the rping capture).
	DefaultTargetACKDelay = 15
	// DefaultPKey is the default partition key.
	DefaultPKey = 0xFFFF
)

// Errors returned by the Manager's API. Wire input never causes an error:
// bad or unexpected MADs are dropped and counted in Stats.
var (
	ErrUnknownID      = errors.New("cm: no such connection")
	ErrInvalidState   = errors.New("cm: operation not valid in this state")
	ErrPrivateData    = errors.New("cm: private data too long")
	ErrInvalidParam   = errors.New("cm: invalid parameter")
	ErrServiceInUse   = errors.New("cm: service ID already listened on")
	ErrNotListening   = errors.New("cm: service ID not listened on")
	ErrCommIDsExhaust = errors.New("cm: no free communication ID")
)

// Timeout converts a 5-bit IBA time value (4.096 µs·2^n) to a duration
// as the kernel's cm_convert_to_ms does: 2^(n-8) ms, at least 1 ms.
func Timeout(n uint8) time.Duration {
	if n <= 8 {
		return time.Millisecond
	}
	return time.Millisecond << (n - 8)
}

// ACKTimeout returns the local ACK timeout (4.096 µs·2^n) for a path
// with the given packet life time to a CA with the given ACK delay: the
// log2 of 2·2^lifetime + 2^ackDelay, rounded up, at most 31 (IBA
// 9.7.6.1.3; the value the kernel's cm_ack_timeout gives).
func ACKTimeout(ackDelay, packetLifeTime uint8) uint8 {
	a, b := int(packetLifeTime)+1, int(ackDelay)
	hi, lo := max(a, b), min(a, b)
	t := hi
	if lo >= hi-1 {
		t++
	}
	return uint8(min(t, 31))
}

// Config configures a Manager. The zero value works: rdma_cm's timers, a
// random comm-ID source and CA GUID 0.
type Config struct {
	// LocalCAGUID is the GUID this CA puts in REQ and REP (rxe: derived
	// from the netdev MAC).
	LocalCAGUID uint64
	// TIDHigh is the upper half of every transaction ID this Manager
	// starts (the MAD agent's hi_tid); the lower half is derived from the
	// local comm ID as the kernel does.
	TIDHigh uint32
	// CMResponseTimeout is the 5-bit response timeout advertised in REQ
	// (0: DefaultCMResponseTimeout).
	CMResponseTimeout uint8
	// MaxCMRetries is how often a REQ, REP or DREQ is retransmitted
	// (0: DefaultMaxCMRetries; at most 15).
	MaxCMRetries uint8
	// PacketLifeTime is the path packet life time (0: DefaultPacketLifeTime).
	PacketLifeTime uint8
	// TargetACKDelay is the ACK delay this CA reports in REP
	// (0: DefaultTargetACKDelay).
	TargetACKDelay uint8
	// Rand draws communication IDs; nil uses a randomly seeded source.
	// Tests pass a seeded one for reproducible traces.
	Rand *rand.Rand
}

// Datagram is a MAD to send to QP1 of the peer with the given address.
// The Manager gives up the buffer: the caller owns MAD.
type Datagram struct {
	Peer netip.Addr
	MAD  []byte
}

// Event is something the consumer must know about one connection.
type Event struct {
	Kind        EventKind
	ID          CommID // the local communication ID of the connection
	Peer        netip.Addr
	ServiceID   ServiceID
	Reason      RejectReason // EventRejected
	TimedOut    bool         // EventDisconnected: our DREQ was never answered
	SIDRStatus  SIDRStatus   // EventSIDRReply
	QKey        uint32       // EventSIDRReply: the resolved UD QP's Q_Key
	PrivateData []byte       // a copy of the message's private data
	// QP holds the queue-pair attributes the connection negotiated:
	// on EventConnectRequest what the REQ offers (the local fields are
	// zero until Accept), on EventEstablished the final values.
	QP QPParams
}

// Output is what one call produced: MADs to send, then events to deliver.
// Apply the events (QP transitions) before transmitting the MADs.
type Output struct {
	Send   []Datagram
	Events []Event
}

// QPParams are the queue-pair attributes a connection negotiates, the
// values ib_cm_init_qp_attr hands rdma_cm for the RTR and RTS transitions.
type QPParams struct {
	Transport TransportType
	LocalQPN  bth.QPN
	RemoteQPN bth.QPN // dest_qp_num
	// SendPSN (sq_psn) is the Starting PSN of the message the peer sent
	// (its REQ or REP) and RecvPSN (rq_psn) that of the one this side
	// sent: a Starting PSN names the PSN its sender's receive queue
	// expects, as the kernel's cm.c reads it (cm_req_handler and
	// cm_rep_handler set sq_psn from the received message, ib_send_cm_req
	// and ib_send_cm_rep rq_psn from the sent one), and as rxe peers check.
	SendPSN         bth.PSN
	RecvPSN         bth.PSN
	PathMTU         MTU
	MaxRdAtomic     uint8 // max_rd_atomic: RDMA READ/atomics this side may have outstanding
	MaxDestRdAtomic uint8 // max_dest_rd_atomic: those this side serves at once
	RetryCount      uint8 // retry_cnt
	RNRRetryCount   uint8 // rnr_retry
	ACKTimeout      uint8 // timeout: 4.096 µs·2^n
	SRQ             bool  // the peer's QP uses an SRQ
	Path            Path  // seen from this side: Local* are this side's
}

// ConnectParams are the active side's parameters (rdma_connect).
type ConnectParams struct {
	Peer      netip.Addr // where the CM MADs go (the peer's IP)
	ServiceID ServiceID
	Transport TransportType // RC or UC
	QPN       bth.QPN
	// StartingPSN is the first PSN the local QP expects to receive (its
	// rq_psn, 24 bits); the peer's REP names the one it sends with (see
	// QPParams.SendPSN).
	StartingPSN        bth.PSN
	ResponderResources uint8
	InitiatorDepth     uint8
	RetryCount         uint8 // 0–7
	RNRRetryCount      uint8 // 0–7, 7 = infinite
	PathMTU            MTU
	FlowControl        bool
	SRQ                bool
	// Path is the primary path; LocalACKTimeout 0 is filled in from the
	// packet life time and ACK delay. See RoCEPath.
	Path        Path
	PKey        uint16 // 0: DefaultPKey
	PrivateData []byte // at most PrivateDataREQ bytes (rdma_cm: IPHeader + 56)
}

// AcceptParams are the passive side's parameters (rdma_accept).
type AcceptParams struct {
	QPN bth.QPN
	// StartingPSN is the first PSN the local QP expects to receive (its
	// rq_psn); it sends from the REQ's (see QPParams.SendPSN).
	StartingPSN        bth.PSN
	ResponderResources uint8 // lowered to the REQ's initiator depth
	InitiatorDepth     uint8 // lowered to the REQ's responder resources
	RNRRetryCount      uint8 // what the active side's QP should use
	SRQ                bool
	FlowControl        bool
	PrivateData        []byte // at most PrivateDataREP bytes
}

// RoCEPath returns the primary path of a RoCEv2 REQ between two IP
// addresses as the kernel builds it: RoCEv2 GIDs, the permissive LID
// (routed, hop limit 64) and traffic class 0.
func RoCEPath(local, remote netip.Addr) Path {
	return Path{LocalLID: PermissiveLID, RemoteLID: PermissiveLID,
		LocalGID: GIDFromAddr(local), RemoteGID: GIDFromAddr(remote), HopLimit: 64}
}

// Stats counts what the Manager did with received MADs.
type Stats struct {
	Received      uint64 // CM MADs accepted by Parse
	Malformed     uint64 // not a CM Send MAD
	Unmatched     uint64 // no connection for the comm IDs (dropped)
	Duplicates    uint64 // duplicates answered or dropped
	WrongState    uint64 // valid message in a state that does not take it
	Retransmitted uint64 // REQ, REP, DREQ resent on timeout
	Rejected      uint64 // REJ sent
	// TimedOut counts connections given up because their REQ or REP
	// was never answered through all its retransmissions (the kernel's
	// IB_CM_REQ_ERROR and IB_CM_REP_ERROR): a listener's half-open
	// connection whose RTU never came is one.
	TimedOut uint64
	// Destroyed counts connections the consumer destroyed before they
	// were established or ended (Destroy).
	Destroyed uint64
}

type remoteKey struct {
	id   CommID
	guid uint64
}

type sidrKey struct {
	peer netip.Addr
	id   CommID
}

type qpnKey struct {
	qpn  bth.QPN
	guid uint64
}

// conn is one connection's state.
type conn struct {
	state   State
	local   CommID
	remote  CommID
	passive bool
	peer    netip.Addr
	guid    uint64 // remote CA GUID
	sid     ServiceID
	tid     uint64 // TID replies echo (REQ's on the passive side, DREQ's)
	qp      QPParams

	// The message awaiting an answer, and its retransmission timer.
	msg      []byte
	timeout  time.Duration
	retries  int // retransmissions left
	deadline time.Time

	// reply is resent for duplicates: MRA (MRA_REQ_SENT), RTU
	// (Established, active), DREP (Timewait).
	reply []byte

	// From the REQ, for the passive side.
	req                             []byte
	maxRetries                      int
	respTimeout                     time.Duration
	inRemoteID, inRemoteQPN, inSIDR bool
}

// Manager is the CM state machine for all connections of one port. It
// is not safe for concurrent use: one goroutine owns it (the device's CM
// loop) and calls Receive, OnTimeout and the API methods, each of which
// returns the MADs to send and the events to deliver.
type Manager struct {
	cfg       Config
	rng       *rand.Rand
	conns     map[CommID]*conn
	byRemote  map[remoteKey]*conn
	byQPN     map[qpnKey]*conn
	bySIDR    map[sidrKey]*conn
	listeners map[ServiceID]bool
	stats     Stats
	out       Output
}

// New returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.CMResponseTimeout == 0 {
		cfg.CMResponseTimeout = DefaultCMResponseTimeout
	}
	if cfg.MaxCMRetries == 0 {
		cfg.MaxCMRetries = DefaultMaxCMRetries
	}
	if cfg.PacketLifeTime == 0 {
		cfg.PacketLifeTime = DefaultPacketLifeTime
	}
	if cfg.TargetACKDelay == 0 {
		cfg.TargetACKDelay = DefaultTargetACKDelay
	}
	if cfg.CMResponseTimeout > 31 || cfg.MaxCMRetries > 15 || cfg.PacketLifeTime > 31 || cfg.TargetACKDelay > 31 {
		return nil, fmt.Errorf("%w: timer field out of range", ErrInvalidParam)
	}
	rng := cfg.Rand
	if rng == nil {
		rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return &Manager{cfg: cfg, rng: rng, conns: map[CommID]*conn{}, byRemote: map[remoteKey]*conn{},
		byQPN: map[qpnKey]*conn{}, bySIDR: map[sidrKey]*conn{}, listeners: map[ServiceID]bool{}}, nil
}

// Stats returns the counters.
func (m *Manager) Stats() Stats { return m.stats }

// Len returns the number of connections the Manager remembers, including
// those in time-wait.
func (m *Manager) Len() int { return len(m.conns) }

// State returns a connection's state (StateIdle for an unknown ID).
func (m *Manager) State(id CommID) State {
	if c := m.conns[id]; c != nil {
		return c.state
	}
	return StateIdle
}

// Listen makes REQs for sid reach the consumer as EventConnectRequest.
func (m *Manager) Listen(sid ServiceID) error {
	if m.listeners[sid] {
		return fmt.Errorf("%w: %v", ErrServiceInUse, sid)
	}
	m.listeners[sid] = true
	return nil
}

// Unlisten stops listening on sid. Connections already made stay.
func (m *Manager) Unlisten(sid ServiceID) error {
	if !m.listeners[sid] {
		return fmt.Errorf("%w: %v", ErrNotListening, sid)
	}
	delete(m.listeners, sid)
	return nil
}

// Deadline returns the earliest time OnTimeout has work to do.
func (m *Manager) Deadline() (time.Time, bool) {
	var t time.Time
	ok := false
	for _, c := range m.conns {
		if !c.deadline.IsZero() && (!ok || c.deadline.Before(t)) {
			t, ok = c.deadline, true
		}
	}
	return t, ok
}

// flush hands the accumulated output to the caller.
func (m *Manager) flush() Output {
	o := m.out
	m.out = Output{}
	return o
}

func (m *Manager) send(peer netip.Addr, mad []byte) {
	m.out.Send = append(m.out.Send, Datagram{Peer: peer, MAD: clone(mad)})
}

func (m *Manager) event(c *conn, k EventKind, pd []byte) *Event {
	m.out.Events = append(m.out.Events, Event{Kind: k, ID: c.local, Peer: c.peer, ServiceID: c.sid,
		QP: c.qp, PrivateData: clone(pd)})
	return &m.out.Events[len(m.out.Events)-1]
}

// tid is the transaction ID of a message this side starts: hi_tid in the
// upper half, the local comm ID's wire bytes read little-endian in the
// lower, as the kernel's cm_form_tid gives on a little-endian host.
func (m *Manager) tid(local CommID) uint64 {
	return uint64(m.cfg.TIDHigh)<<32 | uint64(bits.ReverseBytes32(uint32(local)))
}

func (m *Manager) newID() (CommID, error) {
	for range 64 {
		id := CommID(m.rng.Uint32())
		if id != 0 && m.conns[id] == nil {
			return id, nil
		}
	}
	return 0, ErrCommIDsExhaust
}

// arm starts the retransmission timer for msg, which was just sent.
func (c *conn) arm(now time.Time, msg []byte, timeout time.Duration, retries int) {
	c.msg, c.timeout, c.retries, c.deadline = msg, timeout, retries, now.Add(timeout)
}

// cancel stops the retransmission timer (ib_cancel_mad).
func (c *conn) cancel() { c.msg, c.deadline = nil, time.Time{} }

// remove forgets a connection (the kernel's reset to idle).
func (m *Manager) remove(c *conn) {
	c.state = StateIdle
	c.cancel()
	delete(m.conns, c.local)
	if c.inRemoteID {
		delete(m.byRemote, remoteKey{c.remote, c.guid})
	}
	if c.inRemoteQPN {
		delete(m.byQPN, qpnKey{c.qp.RemoteQPN, c.guid})
	}
	if c.inSIDR {
		delete(m.bySIDR, sidrKey{c.peer, c.remote})
	}
}

// timewait enters time-wait; the connection is forgotten after the QP's
// ACK timeout, by which the peer's packets have left the network
// (cm_enter_timewait).
func (m *Manager) timewait(now time.Time, c *conn) {
	c.state = StateTimewait
	c.cancel()
	c.deadline = now.Add(Timeout(c.qp.ACKTimeout))
}
