package fabric

// evKind is what an event does when it fires.
type evKind uint8

const (
	evStart    evKind = iota // a flow starts
	evStop                   // a flow stops
	evTx                     // a sender may start its next packet (gen-checked)
	evArrive                 // a packet has fully arrived at the switch
	evPortDone               // the bottleneck port finished a packet
	evRecv                   // a packet has fully arrived at the receiver
	evCNP                    // a CNP reaches its sender
	evCCTimer                // a controller deadline (gen-checked)
	evPause                  // a PFC PAUSE reaches a sender
	evResume                 // a PFC RESUME reaches a sender
	evSample                 // record a time-series point
)

// event is one scheduled occurrence. Events are ordered by time, then by
// the order they were scheduled (seq), which makes runs deterministic.
type event struct {
	at   ps
	seq  uint64
	flow int32
	gen  uint32
	kind evKind
	ce   bool
}

// eventHeap is a 4-ary min-heap of events by (at, seq), typed to avoid
// container/heap's interface boxing; four children per node halve the
// depth of a binary heap, which pays off since every packet costs four
// pushes and pops.
type eventHeap []event

func (h eventHeap) less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].seq < h[j].seq)
}

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for k := c + 1; k < c+4 && k < n; k++ {
			if s.less(k, m) {
				m = k
			}
		}
		if !s.less(m, i) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// fifo is the switch egress queue of flow indices (all packets have the
// same size), a growable ring buffer.
type fifo struct {
	buf        []int32
	head, size int
}

func (q *fifo) push(f int32) {
	if q.size == len(q.buf) {
		nb := make([]int32, max(64, 2*len(q.buf)))
		for i := range q.size {
			nb[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = nb, 0
	}
	q.buf[(q.head+q.size)%len(q.buf)] = f
	q.size++
}

func (q *fifo) pop() int32 {
	f := q.buf[q.head]
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	return f
}
