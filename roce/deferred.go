package roce

import "time"

// sendDeferred sends, on the receive goroutine after the OnBatch
// function, the WQEs that verbs called since the last batch left to their
// QP's reply (QP.kick: a QP whose oldest WQE awaits its ACK sends new
// WQEs when the next reply is processed). A function that polls its CQ
// and posts the next requests runs after the batch's replies were
// processed and its packets sent; without this its requests would wait
// for the reply after the next one, half a round of the window idle
// (doc/latency.md §8). Each shard whose verbs deferred work transmits once,
// so the requests the function posted on all its QPs leave together.
func (d *Device) sendDeferred() {
	for _, s := range d.shards {
		s.lock()
		if s.deferred {
			s.deferred = false
			s.service(time.Now())
		}
		s.unlockRx()
	}
}
