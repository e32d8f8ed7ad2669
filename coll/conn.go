package coll

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/roce"
)

// The wire protocol of a connection (doc/coll.md §3). Data flows from a
// sender to a receiver in messages of at most Config.Chunk bytes, each
// numbered by its sequence number on the connection and direction (1, 2,
// …, continuing across calls). The receiver owns Steps staging slots and
// says which one a message may land in with a clear-to-send (CTS): an
// inline RDMA WRITE of one 32-byte FIFO element into the sender's FIFO
// region, slot seq mod Steps:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+---------------------------------------------------------------+
//	|                 addr (u64, little-endian) ...                 |
//	+---------------------------------------------------------------+
//	|                 ... addr                                      |
//	+---------------------------------------------------------------+
//	|                 rkey (u32)                                    |
//	+---------------------------------------------------------------+
//	|                 size (u32): bytes the slot holds              |
//	+---------------------------------------------------------------+
//	|                 seq (u64): the message this slot is for ...   |
//	+---------------------------------------------------------------+
//	|                 ... seq                                       |
//	+---------------------------------------------------------------+
//	|                 reserved (8 bytes, zero)                      |
//	+---------------------------------------------------------------+
//
// little-endian as NCCL's ncclIbSendFifo is host memory, seq last so that
// an element written in order is complete once seq matches. The sender
// waits until the element's seq is the message's, then writes the message
// into addr/rkey with RDMA WRITE WITH IMMEDIATE, imm = the low 32 bits of
// seq, signalled: one WRITE on QP seq mod QPsPerConn (round robin), or
// with Split one on every QP of the connection, QP i carrying bytes
// [i·p, (i+1)·p) of the message, p = ⌈len/QPs⌉ rounded up to 128 bytes
// (a part may be empty). The receiver keeps receive WRs posted on every
// QP for the immediates; a message has arrived when its parts' completions
// are in, and its slot is offered again (CTS for seq + Steps) once the
// receiver has consumed it.

// ctsSize is the size of one FIFO element.
const ctsSize = 32

// splitAlign is the granularity of a split message's parts (NCCL's
// IB_WRITE_CHUNK_ALIGNMENT).
const splitAlign = 128

// WRID layout: kind in the top 2 bits, connection index in the next 22,
// then a 40-bit sequence counter (data, CTS) or QP index (receives).
const (
	kindData = 1
	kindCTS  = 2
	kindRecv = 3
)

func wrid(kind, conn int, low uint64) uint64 {
	return uint64(kind)<<62 | uint64(conn)<<40 | low&(1<<40-1)
}

func wridKind(w uint64) int    { return int(w >> 62) }
func wridConn(w uint64) int    { return int(w >> 40 & (1<<22 - 1)) }
func wridLow(w uint64) uint64  { return w & (1<<40 - 1) }
func isPow2(n int) bool        { return n > 0 && n&(n-1) == 0 }
func ceilDiv(a, b int) int     { return (a + b - 1) / b }
func roundUp(a, m int) int     { return ceilDiv(a, m) * m }
func sameMem(a, b []byte) bool { return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] }

// conn is one connection: this rank and one peer on one channel, with
// QPsPerConn QPs carrying both directions. Only the goroutine running a
// call (holding Comm.callMu) touches it after Join.
type conn struct {
	c        *Comm
	idx      int // peer × Channels + channel
	peer, ch int
	qps      []*roce.QP
	peerQPN  []uint32
	peerPSN  []uint32
	peerAddr netip.Addr
	steps    uint64
	chunk    int
	parts    int // WRITE WITH IMMEDIATEs per message

	// This rank → peer. Message k (0-based; seq k+1) is staged in slot
	// k mod steps of txBuf, posted once the peer's CTS for it is in the
	// FIFO, done when its WRs completed.
	txBuf                        []byte
	txMR                         *roce.MR
	txProduced, txPosted, txDone uint64
	txLen, txPend                []int // per slot: bytes, WRs outstanding
	txQueued                     bool  // in engine.txq
	fifoVA                       uint64

	// Peer → this rank. CTSs are posted for messages below rxCTS; message
	// rxConsumed is the next the program takes.
	rxBuf             []byte
	rxMR              *roce.MR
	rxOn              bool
	rxConsumed, rxCTS uint64
	rxParts, rxLen    []int // per slot: parts and bytes arrived
	rxListed          bool  // in engine.rxq
	remFIFO           uint64
	remRKey           roce.Key
	ctsOff            int // this connection's elements in Comm.ctsBuf
	recvWR            roce.RecvWR
	perQP             int // receive WRs kept posted on each QP
}

func newConn(c *Comm, peer, ch int, h hello) *conn {
	cfg := &c.cfg
	steps := cfg.Steps
	cn := &conn{c: c, idx: peer*cfg.Channels + ch, peer: peer, ch: ch, peerAddr: h.Addr.Addr(),
		steps: uint64(steps), chunk: cfg.Chunk, parts: 1,
		peerQPN: make([]uint32, cfg.QPsPerConn), peerPSN: make([]uint32, cfg.QPsPerConn),
		txLen: make([]int, steps), txPend: make([]int, steps),
		rxParts: make([]int, steps), rxLen: make([]int, steps),
		perQP: 2*steps + 2}
	if cfg.Split {
		cn.parts = cfg.QPsPerConn
	}
	slots := uint64((cfg.Rank*cfg.Channels + ch) * steps * ctsSize)
	cn.remFIFO = h.FIFOVA + slots // the peer's FIFO elements for this rank's CTSs
	cn.remRKey = roce.Key(h.FIFORKey)
	cn.ctsOff = cn.idx * steps * ctsSize
	cn.fifoVA = c.fifoMR.IOVA() + uint64(cn.idx*steps*ctsSize)
	return cn
}

// connect moves the connection's QPs to RTS towards the peer's and posts
// their receives.
func (cn *conn) connect() error {
	cfg := &cn.c.cfg
	for i, q := range cn.qps {
		o := roce.ConnectOptions{MTU: cfg.MTU, Timeout: cfg.QPTimeout,
			Access: roce.LocalWrite | roce.RemoteWrite, TrafficClass: cfg.TrafficClass}
		switch cfg.SourcePorts {
		case PortFixed:
			o.SourcePort = 4791
		case PortExplicit:
			o.SourcePort = cfg.ExplicitPortBase + uint16(i)
		}
		remote := roce.Info{Addr: cn.peerAddr, QPN: bth.QPN(cn.peerQPN[i]), PSN: bth.PSN(cn.peerPSN[i]), MTU: cfg.MTU}
		if err := q.Connect(remote, o); err != nil {
			return fmt.Errorf("coll: rank %d: connecting QP %d to rank %d: %w", cfg.Rank, i, cn.peer, err)
		}
		for range cn.perQP {
			cn.recvWR = roce.RecvWR{WRID: wrid(kindRecv, cn.idx, uint64(i))}
			if err := q.PostRecv(&cn.recvWR); err != nil {
				return err
			}
		}
	}
	return nil
}

// ensureTx allocates the send staging slots (first use only).
func (cn *conn) ensureTx() error {
	if cn.txMR != nil {
		return nil
	}
	cn.txBuf = make([]byte, int(cn.steps)*cn.chunk)
	var err error
	cn.txMR, err = cn.c.dev.RegisterMR(nil, cn.txBuf, 0)
	return err
}

// ensureRx allocates the receive staging slots (first use only); the
// first progress pass then offers all of them to the peer.
func (cn *conn) ensureRx() error {
	if cn.rxOn {
		return nil
	}
	cn.rxBuf = make([]byte, int(cn.steps)*cn.chunk)
	var err error
	if cn.rxMR, err = cn.c.dev.RegisterMR(nil, cn.rxBuf, roce.LocalWrite|roce.RemoteWrite); err != nil {
		return err
	}
	cn.rxOn = true
	return nil
}

// txFree reports whether a message can be staged.
func (cn *conn) txFree() bool { return cn.txProduced-cn.txDone < cn.steps }

// txSlot returns the staging memory of the next message, n bytes.
func (cn *conn) txSlot(n int) []byte {
	off := int(cn.txProduced%cn.steps) * cn.chunk
	return cn.txBuf[off : off+n : off+n]
}

// rxReady reports whether the next message has arrived whole.
func (cn *conn) rxReady() bool {
	return cn.rxConsumed < cn.rxCTS && cn.rxParts[cn.rxConsumed%cn.steps] == cn.parts
}

// rxSlot returns the next message's n bytes, checking that n arrived.
func (cn *conn) rxSlot(n int) ([]byte, error) {
	s := int(cn.rxConsumed % cn.steps)
	if got := cn.rxLen[s]; got != n {
		return nil, fmt.Errorf("%w: rank %d sent %d bytes as message %d on channel %d, this rank expected %d (do all ranks call the same collectives with the same sizes?)",
			ErrProtocol, cn.peer, got, cn.rxConsumed+1, cn.ch, n)
	}
	off := s * cn.chunk
	return cn.rxBuf[off : off+n : off+n], nil
}

// consume frees the next message's slot.
func (cn *conn) consume() {
	s := cn.rxConsumed % cn.steps
	cn.rxParts[s], cn.rxLen[s] = 0, 0
	cn.rxConsumed++
}

// postCTS offers the free receive slots to the peer once half of them
// are free (the other half still offered, so the peer is never without
// one): the FIFO elements of consecutive slots in one inline WRITE, two
// when the run wraps, on the connection's first QP, in one post. Offering
// slots in batches rather than one by one saves a packet and its ACK per
// message of small collectives, whose messages are one per call.
func (cn *conn) postCTS(e *engine) (bool, error) {
	if cn.rxCTS+cn.steps/2 > cn.rxConsumed+cn.steps {
		return false, nil
	}
	k := 0
	for cn.rxCTS < cn.rxConsumed+cn.steps {
		s := int(cn.rxCTS % cn.steps)
		run := 0
		for cn.rxCTS < cn.rxConsumed+cn.steps && (run == 0 || int(cn.rxCTS%cn.steps) != 0) {
			t := int(cn.rxCTS % cn.steps)
			el := cn.c.ctsBuf[cn.ctsOff+t*ctsSize : cn.ctsOff+(t+1)*ctsSize]
			binary.LittleEndian.PutUint64(el[0:], cn.rxMR.IOVA()+uint64(t*cn.chunk))
			binary.LittleEndian.PutUint32(el[8:], uint32(cn.rxMR.RKey()))
			binary.LittleEndian.PutUint32(el[12:], uint32(cn.chunk))
			binary.LittleEndian.PutUint64(el[16:], cn.rxCTS+1)
			binary.LittleEndian.PutUint64(el[24:], 0)
			cn.rxCTS++
			run++
		}
		e.ctsSGE[k] = cn.c.ctsMR.SGE(cn.ctsOff+s*ctsSize, run*ctsSize)
		e.ctsWRs[k] = roce.SendWR{WRID: wrid(kindCTS, cn.idx, cn.rxCTS-1), Opcode: roce.WRRDMAWrite,
			Flags: roce.SendInline, SGL: e.ctsSGE[k : k+1 : k+1],
			RemoteAddr: cn.remFIFO + uint64(s*ctsSize), RKey: cn.remRKey}
		k++
	}
	if k == 0 {
		return false, nil
	}
	if _, err := cn.qps[0].PostSendBatch(e.ctsWRs[:k]); err != nil {
		return true, fmt.Errorf("coll: rank %d: clear-to-send to rank %d: %w", cn.c.cfg.Rank, cn.peer, err)
	}
	return true, nil
}

// tryPost posts the staged messages whose CTS has arrived, in order.
func (cn *conn) tryPost(e *engine) (bool, error) {
	moved := false
	for cn.txPosted < cn.txProduced {
		s := int(cn.txPosted % cn.steps)
		el := e.fifoEl[:]
		if err := cn.c.fifoMR.ReadAt(el, cn.fifoVA+uint64(s*ctsSize)); err != nil {
			return moved, err
		}
		seq := cn.txPosted + 1
		if binary.LittleEndian.Uint64(el[16:]) != seq {
			return moved, nil // not offered yet
		}
		addr := binary.LittleEndian.Uint64(el[0:])
		rkey := roce.Key(binary.LittleEndian.Uint32(el[8:]))
		room := int(binary.LittleEndian.Uint32(el[12:]))
		n := cn.txLen[s]
		if n > room {
			return moved, fmt.Errorf("%w: rank %d offered %d bytes for message %d on channel %d, this rank sends %d",
				ErrProtocol, cn.peer, room, seq, cn.ch, n)
		}
		off := s * cn.chunk
		if cn.parts == 1 {
			q := cn.qps[int(cn.txPosted%uint64(len(cn.qps)))]
			if err := cn.postWrite(e, q, off, n, addr, rkey, seq); err != nil {
				return moved, err
			}
		} else {
			p := roundUp(ceilDiv(n, cn.parts), splitAlign)
			for i, q := range cn.qps {
				lo, hi := min(i*p, n), min((i+1)*p, n)
				if err := cn.postWrite(e, q, off+lo, hi-lo, addr+uint64(lo), rkey, seq); err != nil {
					return moved, err
				}
			}
		}
		cn.txPend[s] = cn.parts
		cn.txPosted++
		moved = true
	}
	return moved, nil
}

// postWrite posts one WRITE WITH IMMEDIATE of n bytes at off of the
// staging buffer (n may be 0: a split message's empty part).
func (cn *conn) postWrite(e *engine, q *roce.QP, off, n int, addr uint64, rkey roce.Key, seq uint64) error {
	e.wr = roce.SendWR{WRID: wrid(kindData, cn.idx, seq-1), Opcode: roce.WRRDMAWriteWithImm,
		Flags: roce.SendSignaled, Imm: uint32(seq), RemoteAddr: addr, RKey: rkey}
	if n > 0 {
		e.sge[0] = cn.txMR.SGE(off, n)
		e.wr.SGL = e.sge[:1:1]
	}
	if err := q.PostSend(&e.wr); err != nil {
		return fmt.Errorf("coll: rank %d: WRITE to rank %d: %w", cn.c.cfg.Rank, cn.peer, err)
	}
	return nil
}

// onRecv accounts for an immediate: a part of message seq arrived.
func (cn *conn) onRecv(e *engine, wc *roce.Completion) error {
	qi := int(wridLow(wc.WRID))
	if qi >= len(cn.qps) {
		return fmt.Errorf("%w: receive completion for QP index %d", ErrProtocol, qi)
	}
	imm := wc.Imm
	// The full sequence number: the one in the window of offered slots
	// whose low 32 bits are imm.
	k := cn.rxConsumed + uint64(uint32(imm-1)-uint32(cn.rxConsumed))
	if wc.Flags&roce.WCWithImm == 0 || k >= cn.rxCTS {
		return fmt.Errorf("%w: rank %d wrote message %d on channel %d, this rank offered %d … %d",
			ErrProtocol, cn.peer, imm, cn.ch, cn.rxConsumed+1, cn.rxCTS)
	}
	s := k % cn.steps
	cn.rxParts[s]++
	cn.rxLen[s] += int(wc.ByteLen)
	if cn.rxParts[s] > cn.parts {
		return fmt.Errorf("%w: rank %d sent %d parts of message %d on channel %d", ErrProtocol, cn.peer, cn.rxParts[s], k+1, cn.ch)
	}
	cn.recvWR = roce.RecvWR{WRID: wrid(kindRecv, cn.idx, uint64(qi))}
	return cn.qps[qi].PostRecv(&cn.recvWR)
}

// onSend accounts for a completed WRITE of message k.
func (cn *conn) onSend(k uint64) {
	s := k % cn.steps
	if cn.txPend[s] > 0 {
		cn.txPend[s]--
	}
	for cn.txDone < cn.txPosted && cn.txPend[cn.txDone%cn.steps] == 0 {
		cn.txDone++
	}
}
