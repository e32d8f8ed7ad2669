package coll

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
)

// The rendezvous protocol (doc/coll.md §2): a star of TCP connections to
// rank 0, which carries an allgather of every rank's hello (its address
// and FIFO), then the routed exchange of QP numbers, then a barrier, and
// stays open as the job's control plane (goodbyes and aborts).
//
// Every message is a frame:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+---------------------------------------------------------------+
//	|                      magic "GRCL" (4 bytes)                   |
//	+---------------+---------------+-------------------------------+
//	|    version    |     type      |           reserved            |
//	+---------------+---------------+-------------------------------+
//	|                    payload length (bytes)                     |
//	+---------------------------------------------------------------+
//	|                    payload (type-specific) ...                |
//
// all integers big-endian. A frame with another magic or version, an
// unknown type, or a payload longer than maxPayload is refused before its
// payload is read.

const (
	rdzvMagic   = "GRCL"
	rdzvVersion = 1
	frameHeader = 12
	// maxPayload bounds one frame's payload: a table of 64 Ki ranks, or a
	// QP list of 64 Ki peers × 16 QPs, fits with room to spare.
	maxPayload = 64 << 20
	// maxString bounds a job ID, host name or error text.
	maxString = 1024
)

// msgType is the type byte of a rendezvous frame.
type msgType uint8

const (
	msgHello  msgType = 1 // rank → rank 0: who I am
	msgTable  msgType = 2 // rank 0 → rank: everybody's hello
	msgQPs    msgType = 3 // rank → rank 0: my QPs towards each peer
	msgRoute  msgType = 4 // rank 0 → rank: the peers' QPs towards me
	msgReady  msgType = 5 // rank → rank 0: connected
	msgGo     msgType = 6 // rank 0 → rank: everybody connected
	msgBye    msgType = 7 // rank → rank 0: closing, not dead
	msgAbort  msgType = 8 // either way: a rank failed (rank, reason)
	msgRefuse msgType = 9 // rank 0 → rank: the rendezvous failed (reason)
)

// ErrBadFrame is wrapped by every error of a malformed rendezvous frame.
var ErrBadFrame = errors.New("coll: malformed rendezvous frame")

// frame is one decoded frame.
type frame struct {
	typ     msgType
	payload []byte
}

// appendFrame appends the frame of typ and payload to b.
func appendFrame(b []byte, typ msgType, payload []byte) []byte {
	b = append(b, rdzvMagic...)
	b = append(b, rdzvVersion, byte(typ), 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

// readFrame reads one frame from r. The payload is allocated only after
// the header passed its checks, and never larger than maxPayload.
func readFrame(r io.Reader) (frame, error) {
	var h [frameHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return frame{}, err
	}
	f, n, err := parseHeader(h[:])
	if err != nil {
		return frame{}, err
	}
	f.payload = make([]byte, n)
	if _, err := io.ReadFull(r, f.payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return frame{}, err
	}
	return f, nil
}

// parseHeader checks a frame header and returns its type and length.
func parseHeader(h []byte) (frame, int, error) {
	if len(h) < frameHeader {
		return frame{}, 0, fmt.Errorf("%w: %d-byte header", ErrBadFrame, len(h))
	}
	if string(h[:4]) != rdzvMagic {
		return frame{}, 0, fmt.Errorf("%w: magic %q (is this a goroce rendezvous?)", ErrBadFrame, h[:4])
	}
	if h[4] != rdzvVersion {
		return frame{}, 0, fmt.Errorf("%w: version %d, want %d", ErrBadFrame, h[4], rdzvVersion)
	}
	typ := msgType(h[5])
	if typ < msgHello || typ > msgRefuse {
		return frame{}, 0, fmt.Errorf("%w: type %d", ErrBadFrame, typ)
	}
	n := binary.BigEndian.Uint32(h[8:])
	if n > maxPayload {
		return frame{}, 0, fmt.Errorf("%w: %d-byte payload", ErrBadFrame, n)
	}
	return frame{typ: typ}, int(n), nil
}

// decodeFrame decodes a whole frame held in b (the fuzz tests' entry).
func decodeFrame(b []byte) (frame, error) {
	f, n, err := parseHeader(b)
	if err != nil {
		return frame{}, err
	}
	if len(b)-frameHeader != n {
		return frame{}, fmt.Errorf("%w: payload %d bytes, header says %d", ErrBadFrame, len(b)-frameHeader, n)
	}
	f.payload = b[frameHeader:]
	return f, nil
}

// reader decodes a payload field by field; the first short or invalid
// field sets err and every later read returns zero.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, a ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrBadFrame}, a...)...)
	}
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.fail("truncated payload")
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u16() uint16 {
	if v := r.take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if v := r.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (r *reader) str() string {
	n := int(r.u16())
	if n > maxString {
		r.fail("%d-byte string", n)
		return ""
	}
	return string(r.take(n))
}

func (r *reader) addrPort() netip.AddrPort {
	v := r.take(16)
	port := r.u16()
	if v == nil {
		return netip.AddrPort{}
	}
	a := netip.AddrFrom16([16]byte(v)).Unmap()
	return netip.AddrPortFrom(a, port)
}

// done fails unless the payload was consumed exactly.
func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	return r.err
}

func appendStr(b []byte, s string) []byte {
	if len(s) > maxString {
		s = s[:maxString]
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendAddrPort(b []byte, a netip.AddrPort) []byte {
	ip := a.Addr().As16()
	b = append(b, ip[:]...)
	return binary.BigEndian.AppendUint16(b, a.Port())
}

// hello is what each rank tells rank 0, and what rank 0's table repeats
// for every rank.
type hello struct {
	JobID     string
	Size      int
	Rank      int
	LocalRank int
	Pid       int
	Host      string
	Addr      netip.AddrPort // the data-plane device's address
	FIFOVA    uint64         // the rank's FIFO region
	FIFORKey  uint32
	// Shape is the data-plane configuration every rank must share.
	Shape shape
}

// shape is the part of a Config that every rank of a job must have alike:
// the wire layout of the connections depends on it.
type shape struct {
	Channels, QPsPerConn, Steps, Chunk int
	Split                              bool
	OrderHash                          uint32 // of the ring order
}

const helloFixed = 4 + 4 + 4 + 4 + 18 + 8 + 4 + 2 + 2 + 2 + 4 + 1 + 4 // without the strings

func (h *hello) append(b []byte) []byte {
	b = appendStr(b, h.JobID)
	b = binary.BigEndian.AppendUint32(b, uint32(h.Size))
	b = binary.BigEndian.AppendUint32(b, uint32(h.Rank))
	b = binary.BigEndian.AppendUint32(b, uint32(h.LocalRank))
	b = binary.BigEndian.AppendUint32(b, uint32(h.Pid))
	b = appendStr(b, h.Host)
	b = appendAddrPort(b, h.Addr)
	b = binary.BigEndian.AppendUint64(b, h.FIFOVA)
	b = binary.BigEndian.AppendUint32(b, h.FIFORKey)
	b = binary.BigEndian.AppendUint16(b, uint16(h.Shape.Channels))
	b = binary.BigEndian.AppendUint16(b, uint16(h.Shape.QPsPerConn))
	b = binary.BigEndian.AppendUint16(b, uint16(h.Shape.Steps))
	b = binary.BigEndian.AppendUint32(b, uint32(h.Shape.Chunk))
	split := byte(0)
	if h.Shape.Split {
		split = 1
	}
	b = append(b, split)
	return binary.BigEndian.AppendUint32(b, h.Shape.OrderHash)
}

func (h *hello) read(r *reader) {
	h.JobID = r.str()
	h.Size = int(r.u32())
	h.Rank = int(r.u32())
	h.LocalRank = int(r.u32())
	h.Pid = int(r.u32())
	h.Host = r.str()
	h.Addr = r.addrPort()
	h.FIFOVA = r.u64()
	h.FIFORKey = r.u32()
	h.Shape.Channels = int(r.u16())
	h.Shape.QPsPerConn = int(r.u16())
	h.Shape.Steps = int(r.u16())
	h.Shape.Chunk = int(r.u32())
	switch v := r.take(1); {
	case v == nil:
	case v[0] > 1:
		r.fail("split flag %d", v[0])
	default:
		h.Shape.Split = v[0] == 1
	}
	h.Shape.OrderHash = r.u32()
}

func decodeHello(p []byte) (hello, error) {
	r := reader{b: p}
	var h hello
	h.read(&r)
	return h, r.done()
}

// decodeTable decodes rank 0's table: a count and that many hellos, which
// must be ranks 0 … count-1 in order.
func decodeTable(p []byte) ([]hello, error) {
	r := reader{b: p}
	n := int(r.u32())
	if r.err == nil && n*helloFixed > len(r.b) {
		return nil, fmt.Errorf("%w: table of %d ranks in %d bytes", ErrBadFrame, n, len(p))
	}
	t := make([]hello, n)
	for i := range t {
		t[i].read(&r)
		if r.err == nil && t[i].Rank != i {
			r.fail("table entry %d is rank %d", i, t[i].Rank)
		}
	}
	return t, r.done()
}

func appendTable(b []byte, t []hello) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(t)))
	for i := range t {
		b = t[i].append(b)
	}
	return b
}

// qpEntry is one QP of a connection: in msgQPs, the sender's QP towards
// Peer; in msgRoute, Peer's QP towards the receiver.
type qpEntry struct {
	Peer    int
	Channel int
	Index   int // the QP's index in the connection
	QPN     uint32
	PSN     uint32
}

const qpEntrySize = 4 + 2 + 2 + 4 + 4

func appendQPs(b []byte, qs []qpEntry) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(qs)))
	for _, q := range qs {
		b = binary.BigEndian.AppendUint32(b, uint32(q.Peer))
		b = binary.BigEndian.AppendUint16(b, uint16(q.Channel))
		b = binary.BigEndian.AppendUint16(b, uint16(q.Index))
		b = binary.BigEndian.AppendUint32(b, q.QPN)
		b = binary.BigEndian.AppendUint32(b, q.PSN)
	}
	return b
}

func decodeQPs(p []byte) ([]qpEntry, error) {
	r := reader{b: p}
	n := int(r.u32())
	if r.err == nil && n*qpEntrySize != len(r.b) {
		return nil, fmt.Errorf("%w: %d QP entries in %d bytes", ErrBadFrame, n, len(r.b))
	}
	qs := make([]qpEntry, n)
	for i := range qs {
		qs[i] = qpEntry{Peer: int(r.u32()), Channel: int(r.u16()), Index: int(r.u16()), QPN: r.u32(), PSN: r.u32()}
		if r.err == nil && (qs[i].QPN == 0 || qs[i].QPN > 0xFFFFFF || qs[i].PSN > 0xFFFFFF) {
			r.fail("QPN %#x PSN %#x", qs[i].QPN, qs[i].PSN)
		}
	}
	return qs, r.done()
}

// abortMsg says which rank failed, who saw it and why; rank 0 relays it
// to everyone.
type abortMsg struct {
	Rank     int // the rank that failed
	Reporter int // the rank that saw it
	Reason   string
}

func appendAbort(b []byte, a abortMsg) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(a.Rank))
	b = binary.BigEndian.AppendUint32(b, uint32(a.Reporter))
	return appendStr(b, a.Reason)
}

func decodeAbort(p []byte) (abortMsg, error) {
	r := reader{b: p}
	a := abortMsg{Rank: int(r.u32()), Reporter: int(r.u32())}
	a.Reason = r.str()
	return a, r.done()
}

func decodeRefuse(p []byte) (string, error) {
	r := reader{b: p}
	s := r.str()
	return s, r.done()
}
