package qp_test

// Retransmission follow-ups to matrix B5 (doc/matrix.md §3), from a capture of
// goroce's own traffic over a lossy link: the requester's reaction to a NAK
// PSN sequence error while a Go-Back-N is already under way, and where a
// retransmission resumes when the PSN the peer asks for lies inside a
// multi-packet message. Each test drives one requester by hand (hand,
// matrix_b_test.go) in virtual time and asserts the exact packets on the
// wire: opcode, PSN and, where it matters, the RETH.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/wire"
)

// wirePkt is one request on the wire, as a test expects it.
type wirePkt struct {
	op  bth.Opcode
	psn bth.PSN
}

func (w wirePkt) String() string { return fmt.Sprintf("%v@%d", w.op, w.psn) }

// wireOf reduces emitted packets to opcode and PSN.
func wireOf(out []emitted) []wirePkt {
	w := make([]wirePkt, len(out))
	for i, e := range out {
		w[i] = wirePkt{e.f.BTH.Opcode, e.f.BTH.PSN}
	}
	return w
}

// seqString prints a packet sequence for failure messages.
func seqString(w []wirePkt) string {
	s := make([]string, len(w))
	for i, p := range w {
		s[i] = p.String()
	}
	return strings.Join(s, " ")
}

// requireWire asserts that got is exactly want, packet by packet.
func requireWire(t *testing.T, what string, want []wirePkt, got []emitted) {
	t.Helper()
	g := wireOf(got)
	require.Equal(t, want, g, "%s:\nwant %s\ngot  %s", what, seqString(want), seqString(g))
}

// drainN returns the next n packets the QP emits (fewer if it stops).
func (h *hand) drainN(n int) []emitted {
	var out []emitted
	for len(out) < n {
		p, ok := h.next()
		if !ok {
			break
		}
		out = append(out, emitted{f: p.Fields(), payload: append([]byte(nil), p.Payload...)})
	}
	return out
}

// fire moves the hand's clock to the QP's deadline and runs its timers.
func (h *hand) fire() {
	h.t.Helper()
	d, ok := h.e.qp.Deadline()
	require.True(h.t, ok, "no timer armed")
	h.now = d
	h.e.qp.OnTimeout(h.now)
}

// writeSeq is the opcodes and PSNs of packets from..to (inclusive) of
// messages of per packets each, starting at base: WRITE (or SEND) FIRST,
// MIDDLE…, LAST.
func writeSeq(send bool, base bth.PSN, per, from, to int) []wirePkt {
	first, middle, last := bth.RCRDMAWriteFirst, bth.RCRDMAWriteMiddle, bth.RCRDMAWriteLast
	if send {
		first, middle, last = bth.RCSendFirst, bth.RCSendMiddle, bth.RCSendLast
	}
	var w []wirePkt
	for i := from; i <= to; i++ {
		op := middle
		switch i % per {
		case 0:
			op = first
		case per - 1:
			op = last
		}
		w = append(w, wirePkt{op, base.Add(uint32(i))})
	}
	return w
}

// postMessages posts nwqe signaled SENDs or WRITEs of per MTU-sized packets
// each and returns the QP's first transmission of them.
func postMessages(t *testing.T, h *hand, send bool, nwqe, per int) []emitted {
	t.Helper()
	m := h.e.qp.Query().PathMTU.Bytes()
	msg := per * m
	local := testutil.Pattern(testutil.Seed(t), nwqe*msg)
	lm := h.e.reg(local, allAccess)
	for i := 0; i < nwqe; i++ {
		wr := qp.SendWR{WRID: uint64(i), Flags: qp.SendSignaled,
			SGL: []qp.SGE{{Addr: lm.IOVA() + uint64(i*msg), Length: uint32(msg), LKey: lm.LKey()}}}
		if send {
			wr.Opcode = qp.WRSend
		} else {
			wr.Opcode, wr.RemoteAddr, wr.RKey = qp.WRRDMAWrite, 0x10000000+uint64(i*msg), 0x1234
		}
		require.NoError(t, h.e.qp.PostSend(&wr))
	}
	return h.drain()
}

// messageKinds are the two multi-packet message kinds the retransmission
// tests run with.
var messageKinds = []struct {
	name string
	send bool
}{{"WRITE", false}, {"SEND", true}}

// startMessages connects a hand-driven QP, posts nwqe messages of per
// packets and checks their first transmission; it returns the hand and the
// first PSN.
func startMessages(t *testing.T, send bool, nwqe, per int) (*hand, bth.PSN) {
	t.Helper()
	pa := defaultParams()
	h := newHand(t, pa)
	base := pa.psnA
	first := postMessages(t, h, send, nwqe, per)
	requireWire(t, "first transmission", writeSeq(send, base, per, 0, nwqe*per-1), first)
	return h, base
}

// TestB5_RepeatedNAKDuringRetry checks the requester's reaction to a NAK
// PSN sequence error that arrives while a Go-Back-N for an earlier one is
// under way. rdma_rxe (rxe_comp.c) sets comp.started_retry when it
// schedules a retry (req.need_retry) and, in COMPST_ERROR_RETRY, starts no
// other retry sequence while it is set unless the retransmit timer fired
// (comp.timeout_retry); only reset_retry_counters clears it (an ACK, a READ
// response or an ATOMIC ACK in check_ack, or a response past the oldest
// SEND/WRITE WQE in check_psn). A NAK itself only moves comp.psn forward,
// the implicit ACK of every PSN before its own (IBA 9.7.5.1.3).
//
// goroce follows rxe for a NAK repeated for the PSN the Go-Back-N resends
// from (same-psn: no second Go-Back-N, no retry spent), after an ACK
// (after-ack) and on the timer (timeout). A NAK for a later PSN reports a
// new gap (new-gap): the responder NAKs a gap once, so the resent packet
// at that PSN was lost again; goroce starts a new Go-Back-N at once where
// rxe waits for the timer.
//
// Two WRITEs (or SENDs) of 8 packets: all 16 sent, then NAK(p = 3); the
// requester resends 3, 4, 5 when the second NAK arrives.
func TestB5_RepeatedNAKDuringRetry(t *testing.T) {
	const nwqe, per, p = 2, 8, 3
	tests := []struct {
		name string
		// second is what reaches the requester after it resent p..p+2.
		second func(h *hand, base bth.PSN)
		// then is what it sends after that: packets from..to of the
		// messages (indices from base), each range in order.
		then [][2]int
		// retries is completer_retry_err at the end.
		retries uint64
	}{{
		name:    "same-psn",
		second:  func(h *hand, base bth.PSN) { h.inject(h.ack(aeth.NAKPSNSequenceError, base.Add(p), 0)) },
		then:    [][2]int{{p + 3, nwqe*per - 1}},
		retries: 1,
	}, {
		// A NAK for a later PSN reports a new gap: the responder took the
		// resent p and p+1 and NAKs once per gap (C9-100's check; rxe
		// sent_psn_nak), so p+2 was lost again. goroce starts a new
		// Go-Back-N at once where rxe, with started_retry still set, waits
		// for the timer: with rxe's rule the matrix A3 (1% loss) goodput falls
		// from over 0.4 to about 0.16 × G0 and matrix A6 (reorder) below 0.5.
		name:    "new-gap",
		second:  func(h *hand, base bth.PSN) { h.inject(h.ack(aeth.NAKPSNSequenceError, base.Add(p+2), 0)) },
		then:    [][2]int{{p + 2, nwqe*per - 1}},
		retries: 2,
	}, {
		// Control: an ACK in between ends the retry (reset_retry_counters),
		// so the next NAK starts a new Go-Back-N at its PSN.
		name: "after-ack",
		second: func(h *hand, base bth.PSN) {
			h.inject(h.ack(aeth.ACKUnlimited, base.Add(p), 0))
			h.inject(h.ack(aeth.NAKPSNSequenceError, base.Add(p+2), 0))
		},
		then:    [][2]int{{p + 2, nwqe*per - 1}},
		retries: 2,
	}, {
		// Control: the retransmit timer overrides started_retry
		// (comp.timeout_retry): Go-Back-N again from comp.psn.
		name:    "timeout",
		second:  func(h *hand, base bth.PSN) { h.fire() },
		then:    [][2]int{{p, nwqe*per - 1}},
		retries: 2,
	}}
	for _, kind := range messageKinds {
		send := kind.send
		for _, tc := range tests {
			t.Run(kind.name+"/"+tc.name, func(t *testing.T) {
				h, base := startMessages(t, send, nwqe, per)

				h.inject(h.ack(aeth.NAKPSNSequenceError, base.Add(p), 0))
				requireWire(t, "Go-Back-N from the NAK PSN", writeSeq(send, base, per, p, p+2), h.drainN(3))

				tc.second(h, base)
				var want []wirePkt
				for _, r := range tc.then {
					want = append(want, writeSeq(send, base, per, r[0], r[1])...)
				}
				requireWire(t, "after the second "+tc.name, want, h.drain())

				s := h.e.qp.Counters().Snapshot()
				assert.Equal(t, tc.retries, s[qp.CounterCompleterRetryErr], "completer_retry_err (Go-Back-N sequences)")
				assert.Empty(t, h.e.poll(), "no WQE completes: nothing past the first WQE was acknowledged")
			})
		}
	}
}

// TestB5_RepeatedNAKAfterReadResponses: the first NAK for a PSN cannot
// be applied yet because a READ before it still waits for responses, so
// the Go-Back-N starts at the READ and resends the NAKed PSN behind it. The
// READ's responses then arrive (progress) and the same NAK arrives again (a
// duplicate, or late). The responder NAKs a gap once (IBA 9.7.5.1.2, C9-100
// as rxe check_psn implements it: sent_psn_nak until the ePSN arrives), so
// a NAK repeated for a PSN whose Go-Back-N is already under way reports
// nothing new: it must not restart it (the retransmit timer still covers a
// lost retransmission).
//
// READ R0 of 4 response PSNs at base..base+3, WRITE W1 of 4 packets at
// base+4..base+7. The responses at base+2 and base+3 and W1's FIRST are
// lost; NAK(base+4) makes the requester resend R0 for its last two
// packets and W1 from its FIRST.
func TestB5_RepeatedNAKAfterReadResponses(t *testing.T) {
	pa := defaultParams()
	h := newHand(t, pa)
	m := pa.mtu.Bytes()
	const per = 4
	msg := per * m
	local := make([]byte, 2*msg)
	lm := h.e.reg(local, allAccess)
	const remote = 0x10000000
	require.NoError(t, h.e.qp.PostSend(&qp.SendWR{WRID: 0, Flags: qp.SendSignaled, Opcode: qp.WRRDMARead,
		RemoteAddr: remote, RKey: 0x1234,
		SGL: []qp.SGE{{Addr: lm.IOVA(), Length: uint32(msg), LKey: lm.LKey()}}}))
	require.NoError(t, h.e.qp.PostSend(&qp.SendWR{WRID: 1, Flags: qp.SendSignaled, Opcode: qp.WRRDMAWrite,
		RemoteAddr: remote + uint64(msg), RKey: 0x1234,
		SGL: []qp.SGE{{Addr: lm.IOVA() + uint64(msg), Length: uint32(msg), LKey: lm.LKey()}}}))
	base := pa.psnA
	w1 := writeSeq(false, base, per, per, 2*per-1)
	requireWire(t, "first transmission", append([]wirePkt{{bth.RCRDMAReadRequest, base}}, w1...), h.drain())

	resp := func(op bth.Opcode, k uint32) {
		var f wire.Fields
		f.BTH.Opcode, f.BTH.PSN = op, base.Add(k)
		f.AETH.Syndrome = aeth.ACKUnlimited
		h.inject(h.packet(f, make([]byte, m)))
	}
	resp(bth.RCRDMAReadResponseFirst, 0)
	resp(bth.RCRDMAReadResponseMiddle, 1)
	nak := h.ack(aeth.NAKPSNSequenceError, base.Add(per), 0)
	h.inject(nak)
	out := h.drainN(2)
	requireWire(t, "Go-Back-N from the READ", []wirePkt{{bth.RCRDMAReadRequest, base.Add(2)}, w1[0]}, out)
	assert.Equal(t, uint64(remote+2*m), out[0].f.RETH.VA)
	assert.Equal(t, uint32(msg-2*m), out[0].f.RETH.DMALength)

	resp(bth.RCRDMAReadResponseMiddle, 2)
	resp(bth.RCRDMAReadResponseLast, 3)
	wcs := h.e.poll()
	require.Len(t, wcs, 1, "the READ completes")
	assert.Equal(t, uint64(0), wcs[0].WRID)

	h.inject(nak) // the same NAK again
	requireWire(t, "after the repeated NAK: the Go-Back-N goes on", w1[1:], h.drain())
	s := h.e.qp.Counters().Snapshot()
	assert.Equal(t, uint64(1), s[qp.CounterCompleterRetryErr], "completer_retry_err (Go-Back-N sequences)")
}

// TestB5_ResumeInsideMessage checks that a retransmission starts at the
// PSN the responder asked for when it lies inside a multi-packet message
// other than the one the requester was resending, after a NAK PSN sequence
// error or a timeout: rxe req_retry resumes the oldest unacknowledged WQE at
// comp.psn — (comp.psn - first_psn) packets in (retry_first_write_send), so
// a MIDDLE or LAST without RETH — and never resends a packet the responder
// acknowledged (IBA 9.7.5.1.3: a NAK acknowledges every PSN before its
// own; a coalesced ACK every PSN up to its own, 9.7.5.1.1).
//
// Two messages of 4 packets, W0 at base..base+3 and W1 at base+4..base+7.
// A NAK for base+1 makes the requester resend base+1..base+7; the ACK for
// that retransmission is lost, so the timer fires and it starts again at
// base+1. With base+1 resent — W0 partly sent for the second time — the
// ACK for W0's LAST (base+3) from the first retransmission arrives, then:
//
//   - nak: a NAK for base+5, in the middle of W1 (base+5 was lost in the
//     first retransmission): the requester must go on at base+5, a MIDDLE,
//     not at W1's FIRST;
//   - ack+timeout: a coalesced ACK for base+5, then the timer: the
//     requester must go on at base+6.
//
// In both W0 completes (everything in it is acknowledged) and the rest of
// W0 is not sent a third time.
func TestB5_ResumeInsideMessage(t *testing.T) {
	const nwqe, per = 2, 4
	tests := []struct {
		name  string
		after func(h *hand, base bth.PSN)
		from  int // the first packet sent after, from base
	}{{
		name:  "nak",
		after: func(h *hand, base bth.PSN) { h.inject(h.ack(aeth.NAKPSNSequenceError, base.Add(5), 0)) },
		from:  5,
	}, {
		name: "ack+timeout",
		after: func(h *hand, base bth.PSN) {
			h.inject(h.ack(aeth.ACKUnlimited, base.Add(5), 0))
			h.fire()
		},
		from: 6,
	}}
	for _, kind := range messageKinds {
		send := kind.send
		for _, tc := range tests {
			t.Run(kind.name+"/"+tc.name, func(t *testing.T) {
				h, base := startMessages(t, send, nwqe, per)

				h.inject(h.ack(aeth.NAKPSNSequenceError, base.Add(1), 0))
				requireWire(t, "Go-Back-N after the NAK", writeSeq(send, base, per, 1, nwqe*per-1), h.drain())
				h.fire()
				requireWire(t, "Go-Back-N after the timeout", writeSeq(send, base, per, 1, 1), h.drainN(1))

				h.inject(h.ack(aeth.ACKUnlimited, base.Add(3), 0))
				tc.after(h, base)
				out := h.drain()
				requireWire(t, "resumption", writeSeq(send, base, per, tc.from, nwqe*per-1), out)
				for i, e := range out {
					assert.Zero(t, e.f.RETH, "packet %d: a MIDDLE or LAST carries no RETH", i)
				}
				// The payload resumes at the same offset: packet k of W1
				// carries bytes k*MTU.. of W1's buffer.
				m := h.e.qp.Query().PathMTU.Bytes()
				local := testutil.Pattern(testutil.Seed(t), nwqe*per*m)
				for i, e := range out {
					k := tc.from + i
					assert.Equal(t, local[k*m:(k+1)*m], e.payload, "payload of PSN base+%d", k)
				}

				wcs := h.e.poll()
				require.Len(t, wcs, 1, "W0 completes, W1 does not")
				assert.Equal(t, uint64(0), wcs[0].WRID)
				assert.Equal(t, cq.StatusSuccess, wcs[0].Status)
			})
		}
	}
}

// TestB5_ReadResumeAfterTimeout: a READ of 4 response packets whose first
// two responses arrived is re-requested after a timeout for the remaining
// two only, at comp.psn with the RETH moved on by two MTUs (rxe req_retry:
// iova += npsn * mtu, the length from dma.resid); the READ after it is
// requested again whole, at its own PSN.
func TestB5_ReadResumeAfterTimeout(t *testing.T) {
	pa := defaultParams()
	h := newHand(t, pa)
	m := pa.mtu.Bytes()
	const nwqe, per = 2, 4
	msg := per * m
	local := make([]byte, nwqe*msg)
	lm := h.e.reg(local, allAccess)
	const remote = 0x10000000
	for i := 0; i < nwqe; i++ {
		wr := qp.SendWR{WRID: uint64(i), Flags: qp.SendSignaled, Opcode: qp.WRRDMARead,
			RemoteAddr: remote + uint64(i*msg), RKey: 0x1234,
			SGL: []qp.SGE{{Addr: lm.IOVA() + uint64(i*msg), Length: uint32(msg), LKey: lm.LKey()}}}
		require.NoError(t, h.e.qp.PostSend(&wr))
	}
	base := pa.psnA
	first := h.drain()
	requireWire(t, "first transmission", []wirePkt{
		{bth.RCRDMAReadRequest, base}, {bth.RCRDMAReadRequest, base.Add(per)}}, first)

	// The first two responses of READ 0 arrive; the other two are lost.
	for i, op := range []bth.Opcode{bth.RCRDMAReadResponseFirst, bth.RCRDMAReadResponseMiddle} {
		var f wire.Fields
		f.BTH.Opcode, f.BTH.PSN = op, base.Add(uint32(i))
		f.AETH.Syndrome = aeth.ACKUnlimited
		h.inject(h.packet(f, make([]byte, m)))
	}
	require.Empty(t, h.drain(), "no request before the timer")
	h.fire()
	out := h.drain()
	requireWire(t, "READ resumed at comp.psn, then the next READ whole", []wirePkt{
		{bth.RCRDMAReadRequest, base.Add(2)}, {bth.RCRDMAReadRequest, base.Add(per)}}, out)
	assert.Equal(t, uint64(remote+2*m), out[0].f.RETH.VA)
	assert.Equal(t, uint32(msg-2*m), out[0].f.RETH.DMALength)
	assert.Equal(t, uint64(remote+msg), out[1].f.RETH.VA)
	assert.Equal(t, uint32(msg), out[1].f.RETH.DMALength)
}

// TestB5_RetryAfterImplicitCompletion: a response past a READ completes the
// SEND/WRITE WQEs before it implicitly (a cumulative ACK) and then reports
// the READ's response lost. rxe check_psn calls reset_retry_counters for
// every WQE it completes that way, which clears comp.started_retry and
// refills retry_cnt, so the lost READ response starts a new Go-Back-N at
// once even when the previous one is still marked as under way.
//
// WRITE W0 at base, READ R at base+1, WRITE W2 at base+2. A NAK for base
// starts a Go-Back-N; the responder then answers the retransmission with a
// coalesced ACK for base+2, R's response having been lost: W0 completes and
// the requester must resend R and W2 now, not after the retransmit timer.
func TestB5_RetryAfterImplicitCompletion(t *testing.T) {
	pa := defaultParams()
	h := newHand(t, pa)
	m := pa.mtu.Bytes()
	local := make([]byte, 3*m)
	lm := h.e.reg(local, allAccess)
	const remote = 0x10000000
	for i, op := range []qp.WROpcode{qp.WRRDMAWrite, qp.WRRDMARead, qp.WRRDMAWrite} {
		require.NoError(t, h.e.qp.PostSend(&qp.SendWR{WRID: uint64(i), Flags: qp.SendSignaled, Opcode: op,
			RemoteAddr: remote + uint64(i*m), RKey: 0x1234,
			SGL: []qp.SGE{{Addr: lm.IOVA() + uint64(i*m), Length: uint32(m), LKey: lm.LKey()}}}))
	}
	base := pa.psnA
	all := []wirePkt{{bth.RCRDMAWriteOnly, base}, {bth.RCRDMAReadRequest, base.Add(1)}, {bth.RCRDMAWriteOnly, base.Add(2)}}
	requireWire(t, "first transmission", all, h.drain())
	h.inject(h.ack(aeth.NAKPSNSequenceError, base, 0))
	requireWire(t, "Go-Back-N after the NAK", all, h.drain())

	h.inject(h.ack(aeth.ACKUnlimited, base.Add(2), 2))
	wcs := h.e.poll()
	require.Len(t, wcs, 1, "W0 completes implicitly")
	assert.Equal(t, uint64(0), wcs[0].WRID)
	assert.Equal(t, cq.StatusSuccess, wcs[0].Status)
	requireWire(t, "at once: a new Go-Back-N from the READ", all[1:], h.drain())
	s := h.e.qp.Counters().Snapshot()
	assert.Equal(t, uint64(2), s[qp.CounterCompleterRetryErr], "completer_retry_err (Go-Back-N sequences)")
}
