package cm_test

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/internal/testutil"
)

var (
	addrA = netip.MustParseAddr("10.77.0.3") // active (client)
	addrB = netip.MustParseAddr("10.77.0.2") // passive (server)
	sid   = cm.IPServiceID(cm.PortSpaceTCP, 7174)
)

// oneWay is the fake link's one-way delay.
const oneWay = 50 * time.Microsecond

// flight is a MAD on the fake link.
type flight struct {
	at   time.Time
	to   netip.Addr
	from netip.Addr
	mad  []byte
}

// side is one Manager with the events it reported.
type side struct {
	m      *cm.Manager
	addr   netip.Addr
	events []cm.Event
	sent   []cm.AttrID
}

// pair wires two Managers back to back through an in-memory link that a
// test can impair per message (drop or duplicate), on a fake clock.
type pair struct {
	t     *testing.T
	clock *testutil.Clock
	a, b  *side
	link  []flight
	// impair decides, per MAD sent, how many copies arrive (0 drops it).
	impair func(from netip.Addr, m cm.MAD) int
	// onEvent lets a test answer events (Accept on ConnectRequest, ...).
	onEvent func(s *side, e cm.Event)
}

func newPair(t *testing.T) *pair {
	t.Helper()
	mk := func(guid uint64, seed uint64) *cm.Manager {
		m, err := cm.New(cm.Config{LocalCAGUID: guid, TIDHigh: 2, Rand: rand.New(rand.NewPCG(seed, 1))})
		require.NoError(t, err)
		return m
	}
	p := &pair{t: t, clock: testutil.NewClock(),
		a: &side{m: mk(0x505400fffe770003, 1), addr: addrA},
		b: &side{m: mk(0x505400fffe770002, 2), addr: addrB}}
	require.NoError(t, p.b.m.Listen(sid))
	p.onEvent = func(s *side, e cm.Event) {
		if e.Kind == cm.EventConnectRequest {
			p.accept(s, e.ID)
		}
	}
	return p
}

func (p *pair) now() time.Time { return p.clock.Now() }

func (p *pair) side(a netip.Addr) *side {
	if a == p.a.addr {
		return p.a
	}
	return p.b
}

// out queues a side's output on the link and records its events.
func (p *pair) out(s *side, o cm.Output) {
	for _, d := range o.Send {
		m, err := cm.Parse(d.MAD)
		require.NoError(p.t, err)
		s.sent = append(s.sent, m.AttrID())
		n := 1
		if p.impair != nil {
			n = p.impair(s.addr, m)
		}
		for range n {
			p.link = append(p.link, flight{at: p.now().Add(oneWay), to: d.Peer, from: s.addr, mad: d.MAD})
		}
	}
	for _, e := range o.Events {
		s.events = append(s.events, e)
		if p.onEvent != nil {
			p.onEvent(s, e)
		}
	}
}

func (p *pair) accept(s *side, id cm.CommID) cm.QPParams {
	qp, o, err := s.m.Accept(p.now(), id, &cm.AcceptParams{QPN: 0x1c, StartingPSN: 0x8a4257,
		ResponderResources: 1, InitiatorDepth: 1, RNRRetryCount: 7, PrivateData: []byte("rep")})
	require.NoError(p.t, err)
	p.out(s, o)
	return qp
}

func connectParams() *cm.ConnectParams {
	path := cm.RoCEPath(addrA, addrB)
	path.FlowLabel = 0x1494d
	return &cm.ConnectParams{Peer: addrB, ServiceID: sid, QPN: 0x1c, StartingPSN: 0x574ee1,
		ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7,
		PathMTU: cm.MTU1024, Path: path, PrivateData: []byte("req")}
}

func (p *pair) connect(cp *cm.ConnectParams) cm.CommID {
	id, o, err := p.a.m.Connect(p.now(), cp)
	require.NoError(p.t, err)
	p.out(p.a, o)
	return id
}

// run delivers MADs and fires timers in time order until nothing is left
// or the clock passes limit.
func (p *pair) run(limit time.Duration) {
	end := p.now().Add(limit)
	for {
		next, kind := time.Time{}, 0
		if len(p.link) > 0 {
			slices.SortStableFunc(p.link, func(x, y flight) int { return x.at.Compare(y.at) })
			next, kind = p.link[0].at, 1
		}
		for i, s := range []*side{p.a, p.b} {
			if d, ok := s.m.Deadline(); ok && (kind == 0 || d.Before(next)) {
				next, kind = d, 2+i
			}
		}
		if kind == 0 || next.After(end) {
			return
		}
		if next.After(p.now()) {
			p.clock.Set(next)
		}
		switch kind {
		case 1:
			f := p.link[0]
			p.link = p.link[1:]
			s := p.side(f.to)
			p.out(s, s.m.Receive(p.now(), f.from, f.mad))
		case 2:
			p.out(p.a, p.a.m.OnTimeout(p.now()))
		case 3:
			p.out(p.b, p.b.m.OnTimeout(p.now()))
		}
	}
}

// kinds lists a side's event kinds.
func kinds(s *side) []cm.EventKind {
	var out []cm.EventKind
	for _, e := range s.events {
		out = append(out, e.Kind)
	}
	return out
}

func count(ids []cm.AttrID, a cm.AttrID) int {
	n := 0
	for _, x := range ids {
		if x == a {
			n++
		}
	}
	return n
}

// dropNth drops the n-th (1-based) message of the given type and lets the
// rest through.
func dropNth(a cm.AttrID, n int) func(netip.Addr, cm.MAD) int {
	seen := 0
	return func(_ netip.Addr, m cm.MAD) int {
		if m.AttrID() == a {
			seen++
			if seen == n {
				return 0
			}
		}
		return 1
	}
}

func testClockNow() time.Time { return testutil.NewClock().Now() }
