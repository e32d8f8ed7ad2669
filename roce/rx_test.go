package roce_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/roce"
	"github.com/goroce/goroce/wire"
)

// TestIntakeOrder pins the order of the receive path's checks, rxe_rcv's:
// a datagram too short for a BTH and an ICRC is a bad header; then the
// destination QP must exist, the source be its peer (check_addr) and the
// ICRC verify, and only then does a header that failed to parse count as
// a bad header, on the QP too. The headers are parsed once, before any of
// these checks (rxBatch.process), so the order must come from where the
// parse error is looked at, which this test fixes.
func TestIntakeOrder(t *testing.T) {
	n := mem.NewNetwork()
	d, err := roce.Open(roce.Config{Link: n.Attach(netip.MustParseAddrPort("10.0.0.1:4791"))})
	require.NoError(t, err)
	defer d.Close()
	q, err := d.CreateQP(roce.QPConfig{})
	require.NoError(t, err)
	p := newRawPeer(t, n.Attach(netip.MustParseAddrPort("10.0.0.2:4791")), d.LocalAddr(), 0x118)
	defer p.close()
	require.NoError(t, q.Connect(p.info(), roce.ConnectOptions{}))
	stranger := n.Attach(netip.MustParseAddrPort("10.0.0.3:4791"))
	defer stranger.Close()

	// send builds an empty SEND ONLY to dst, lets edit break it so that
	// its parse fails with perr, seals it from l's address (or leaves the
	// ICRC zero) and sends it from l.
	send := func(l link.Link, dst roce.QPN, edit func(bth.Header), perr error, sealed bool) {
		f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCSendOnly, PKey: 0xffff, DestQP: dst, PSN: p.psn}}
		buf := make([]byte, 256)
		k, err := wire.Build(buf, &f, nil)
		require.NoError(t, err)
		pkt := buf[:k]
		edit(bth.Header(pkt[:bth.Size]))
		var wp wire.Packet
		require.ErrorIs(t, wp.Parse(pkt), perr)
		if sealed {
			seal(pkt, l.LocalAddr(), d.LocalAddr())
		}
		_, err = l.Send([]link.Datagram{{Buf: pkt, Dst: d.LocalAddr()}})
		require.NoError(t, err)
	}
	badPad := func(h bth.Header) { h.SetPadCount(3) }   // a pad beyond the empty payload
	unknown := func(h bth.Header) { h.SetOpcode(0x1f) } // no RC opcode 0x1F
	other := q.QPN() ^ 1

	type counts struct{ badHdr, noQP, badAddr, badICRC, qpBadHdr, qpBadICRC uint64 }
	tests := []struct {
		name string
		send func()
		want counts
	}{
		{"shorter than BTH and ICRC", func() {
			_, err := p.l.Send([]link.Datagram{{Buf: make([]byte, bth.Size+3), Dst: d.LocalAddr()}})
			require.NoError(t, err)
		}, counts{badHdr: 1}},
		{"bad pad to no QP", func() { send(p.l, other, badPad, wire.ErrBadPad, true) }, counts{noQP: 1}},
		{"unknown opcode from a stranger", func() { send(stranger, q.QPN(), unknown, wire.ErrUnknownOpcode, true) }, counts{badAddr: 1}},
		{"unknown opcode with a bad ICRC", func() { send(p.l, q.QPN(), unknown, wire.ErrUnknownOpcode, false) }, counts{badICRC: 1, qpBadICRC: 1}},
		{"unknown opcode from the peer", func() { send(p.l, q.QPN(), unknown, wire.ErrUnknownOpcode, true) }, counts{badHdr: 1, qpBadHdr: 1}},
		{"bad pad from the peer", func() { send(p.l, q.QPN(), badPad, wire.ErrBadPad, true) }, counts{badHdr: 1, qpBadHdr: 1}},
	}
	st := d.Stats()
	read := func() counts {
		c := q.Counters()
		return counts{st.BadHdr.Load(), st.DroppedNoQP.Load(), st.BadAddr.Load(), st.BadICRC.Load(),
			c.Load(roce.CounterBadHdr), c.Load(roce.CounterBadICRC)}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, rx := read(), st.RxPackets.Load()
			tc.send()
			require.Eventually(t, func() bool { return st.RxPackets.Load() == rx+1 }, 5*time.Second, time.Millisecond)
			after := read()
			got := counts{after.badHdr - before.badHdr, after.noQP - before.noQP, after.badAddr - before.badAddr,
				after.badICRC - before.badICRC, after.qpBadHdr - before.qpBadHdr, after.qpBadICRC - before.qpBadICRC}
			assert.Equal(t, tc.want, got)
		})
	}
}
