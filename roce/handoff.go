package roce

import (
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/link"
)

// handOffBytes is the datagram length from which a request packet with
// payload counts on its own towards handOffMin.
const handOffBytes = 1024

// weigh adds dg, which q just built into b, to the send work the
// receive goroutine weighs against handOffMin before it hands its sender
// role over (shard.unlock). A hand-off is a wake-up of the sender
// goroutine (a futex call on each side), worth it only for work that
// takes longer: sealing and copying large packets, each of which counts,
// or many send calls — a run of small request packets of one QP goes out
// in one GSO send, and counts once. So 64 WRITEs of 64 bytes on one QP
// weigh 1 and are sent where they were built (the hand-off of such
// batches cost the 64-byte message rate test a fifth of its CPU per
// message, doc/limits.md §9), while 31 packets of a 64 KiB WRITE weigh 31
// and the small WRITEs of many QPs one per QP, and go to the sender.
func (b *txBatch) weigh(q *QP, dg *link.Datagram) {
	op := bth.Opcode(dg.Buf[0])
	if !op.IsRequest() || !op.HasPayload() {
		return
	}
	if dg.Len() >= handOffBytes || b.last != q {
		b.reqs++
	}
	b.last = q
}
