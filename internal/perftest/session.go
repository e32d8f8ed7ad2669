package perftest

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/qp"
)

// ErrGID is wrapped by the errors for a peer GID this side cannot reach.
var ErrGID = errors.New("perftest: unusable peer GID")

// GIDAddr returns the IP address a RoCEv2 peer's GID names, or an error
// naming the likely cause when it is not an IPv4-mapped GID: the peer chose
// the wrong GID index (doc/rxe.md §10 item 8). flag is the
// peer tool's GID-index option ("-x" for perftest, "-g" for ibv_*_pingpong).
func GIDAddr(gid [16]byte, flag string) (netip.Addr, error) {
	a := netip.AddrFrom16(gid)
	switch {
	case a.IsUnspecified():
		return netip.Addr{}, fmt.Errorf("%w: the peer sent GID :: (it was run without %s: RoCE needs a GID; on rxe use %s 1, the RoCEv2 GID ::ffff:<IPv4>)",
			ErrGID, flag, flag)
	case a.Is4In6():
		return a.Unmap(), nil
	case a.IsLinkLocalUnicast():
		return netip.Addr{}, fmt.Errorf("%w: the peer sent %v, its IPv6 link-local GID (rxe GID index 0): run it with %s 1, the RoCEv2 GID ::ffff:<IPv4>",
			ErrGID, a, flag)
	}
	return netip.Addr{}, fmt.Errorf("%w: the peer sent the IPv6 GID %v, but goroce's link here is IPv4: run the peer with the GID index of its ::ffff:<IPv4> GID (%s 1 on rxe)",
		ErrGID, a, flag)
}

// Session runs one tool's exchange on a Conn, step by step: Hello, Keys,
// (the caller connects its QPs and posts receives) Barrier, (traffic,
// SizeDone after each size of -a) Results, Close. Each method does what
// the tool does at that point, possibly nothing.
type Session struct {
	c    *Conn
	tool Tool

	// RemoteVersion is the peer's version string, after Hello.
	RemoteVersion string

	local  [][]byte // marshalled key message per QP
	remote []Dest
	seen   []bool
}

// NewSession starts the exchange of tool t on c.
func NewSession(c *Conn, t Tool) *Session { return &Session{c: c, tool: t} }

// Conn returns the session's connection.
func (s *Session) Conn() *Conn { return s.c }

// Hello exchanges the versions, the system data and the MTU (steps 2 to 4
// of every test) and returns the path MTU both sides use: the smaller of
// local and the peer's.
func (s *Session) Hello(local qp.MTU) (qp.MTU, error) {
	in, err := s.c.Exchange("the version", marshalVersion(Version), versionLen)
	if err != nil {
		return 0, err
	}
	if s.RemoteVersion, _, err = parseVersion(in); err != nil {
		return 0, err
	}
	var b [sysDataLen]byte
	for _, v := range []uint32{CycleBuffer, CacheLineSize} {
		b = [4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
		if _, err := s.c.Exchange("the system data", b[:], sysDataLen); err != nil {
			return 0, err
		}
	}
	in, err = s.c.Exchange("the MTU", marshalMTU(local), mtuLen)
	if err != nil {
		return 0, err
	}
	rem, err := parseMTU(in)
	if err != nil {
		return 0, err
	}
	return min(local, rem), nil
}

// Keys sends the key message of every local QP and returns the peer's,
// doing every key exchange before the traffic but the last (the barrier).
// len(local) is the number of QPs, which both sides must agree on (-q).
// A peer GID that is not IPv4-mapped fails at once with ErrGID (GIDAddr).
func (s *Session) Keys(local []Dest) ([]Dest, error) {
	if len(local) == 0 || len(local) > s.tool.MaxQPs() {
		return nil, fmt.Errorf("perftest: %d QPs (%s allows 1 to %d)", len(local), s.tool.Name(), s.tool.MaxQPs())
	}
	s.local = make([][]byte, len(local))
	for i := range local {
		marshal := local[i].Marshal
		if s.c.CM() {
			marshal = local[i].MarshalBinary
		}
		b, err := marshal()
		if err != nil {
			return nil, err
		}
		s.local[i] = b
	}
	s.remote = make([]Dest, len(local))
	s.seen = make([]bool, len(local))
	steps := s.tool.preKeys()
	for i, st := range steps[:len(steps)-1] {
		if err := s.step(st); err != nil {
			if i == 0 && errors.Is(err, ErrPeerClosed) {
				// perftest checks its GID type against the server's address
				// family just before; -x 0 (rxe's link-local GID) with an
				// IPv4 address ends it here ("Found Incompatibility issue
				// with GID types").
				err = fmt.Errorf("%w (perftest quits here when it rejects its own GID: is the peer's -x the index of its ::ffff:<IPv4> GID, -x 1 on rxe, and not 0, the link-local one?)", err)
			}
			return nil, err
		}
	}
	return s.remote, nil
}

// CMSync is one of the two handshakes of create_rdma_cm_connection in
// perftest's -R mode, before the test QPs connect through the RDMA CM (the
// server listens by then) and after (they are up): a binary key message
// each way, all zero as perftest has not filled it in yet. The peer's is
// only checked for its size.
func (s *Session) CMSync() error {
	if !s.c.CM() {
		return errors.New("perftest: CMSync outside the rdma_cm mode")
	}
	_, err := s.c.Exchange("the rdma_cm handshake", make([]byte, DestBinarySize), DestBinarySize)
	return err
}

// Barrier is the last key exchange before the traffic: the peer has moved
// its QPs to RTS and posted its receives, and the client starts when it
// returns.
func (s *Session) Barrier() error {
	steps := s.tool.preKeys()
	return s.step(steps[len(steps)-1])
}

// SizeDone synchronises the two sides after each message size of -a (last
// says it was the last size): ib_send_bw exchanges two key messages after
// every size (the receiver must know the sender finished); ib_send_lat one
// before every size but the first (its receives are posted per size), i.e.
// after every size but the last; the other tools nothing.
func (s *Session) SizeDone(last bool) error {
	if s.tool.Verb != Send {
		return nil
	}
	n := 2
	if s.tool.Lat {
		n = 0
		if !last {
			n = 1
		}
	}
	for range n {
		if err := s.step(once); err != nil {
			return err
		}
	}
	return nil
}

// Results is the end-of-test exchange of the write, read and atomic bw
// tests: a key message, then the results (xchg_bw_reports). The client
// passes its figures; the server gets them (and sends its own, which
// perftest leaves uninitialised; this side sends mine). Tools without a
// results exchange return the zero Report.
func (s *Session) Results(mine Report) (Report, error) {
	var rem Report
	if !s.tool.hasResults() {
		return rem, nil
	}
	if err := s.step(once); err != nil {
		return rem, err
	}
	names := [5]string{"the results' size", "the results' iterations", "the results' peak bandwidth",
		"the results' average bandwidth", "the results' message rate"}
	for i, f := range mine.fields() {
		in, err := s.c.Exchange(names[i], f[:], reportLen)
		if err != nil {
			return rem, err
		}
		rem.setField(i, in)
	}
	return rem, nil
}

// Close ends the test: the close exchange (ctx_close_connection: a key
// message, then, over TCP, "done" each way) for the tools that have it,
// then the connection is closed.
func (s *Session) Close() error {
	defer s.c.Close()
	if !s.tool.hasClose() {
		return nil
	}
	if err := s.step(once); err != nil {
		return err
	}
	return s.c.Done()
}

// step does one key exchange: QP 0's message, or every QP's in turn. The
// first message of each QP is its destination; later ones must repeat it
// (perftest resends the same struct), else the two sides are out of step.
func (s *Session) step(st keyStep) error {
	n := 1
	if st == perQP {
		n = len(s.local)
	}
	size, parse := DestSize, ParseDest
	if s.c.CM() {
		size, parse = DestBinarySize, ParseDestBinary
	}
	for i := range n {
		what := fmt.Sprintf("the key message of QP %d", i)
		in, err := s.c.Exchange(what, s.local[i], size)
		if err != nil {
			return err
		}
		d, err := parse(in)
		if err != nil {
			return err
		}
		if !s.seen[i] {
			// A GID this side cannot reach ends the test now, with the
			// likely cause, rather than when the peer gives up (perftest
			// checks the GIDs after this first exchange and quits). Over
			// the RDMA CM the QPs are connected already and the GID is
			// not used.
			if _, err := GIDAddr(d.GID, "-x"); err != nil && !s.c.CM() {
				return err
			}
			s.remote[i], s.seen[i] = d, true
			continue
		}
		if p := s.remote[i]; d.QPN != p.QPN || d.PSN != p.PSN || !bytes.Equal(d.GID[:], p.GID[:]) {
			return fmt.Errorf("%w: the peer's key message for QP %d changed from QPN %#x to %#x: the two sides are out of step (different tools, or different -q or -a?)",
				ErrGarbled, i, p.QPN, d.QPN)
		}
	}
	return nil
}
