package perftest

import (
	"fmt"
	"strings"
)

// Verb is the RDMA operation a tool measures.
type Verb uint8

// Verbs, as perftest's user_param.verb.
const (
	Write Verb = iota
	Read
	Send
	Atomic
)

// String returns the verb as the tools spell it (ib_<verb>_bw).
func (v Verb) String() string {
	switch v {
	case Write:
		return "write"
	case Read:
		return "read"
	case Send:
		return "send"
	case Atomic:
		return "atomic"
	}
	return fmt.Sprintf("Verb(%d)", uint8(v))
}

// AtomicType is ib_atomic_bw's -A.
type AtomicType uint8

// Atomic operations.
const (
	FetchAndAdd AtomicType = iota // -A FETCH_AND_ADD (the default)
	CmpAndSwap                    // -A CMP_AND_SWAP
)

// String returns -A's spelling.
func (a AtomicType) String() string {
	if a == CmpAndSwap {
		return "CMP_AND_SWAP"
	}
	return "FETCH_AND_ADD"
}

// ParseAtomicType parses -A's argument.
func ParseAtomicType(s string) (AtomicType, error) {
	switch strings.ToUpper(s) {
	case "FETCH_AND_ADD":
		return FetchAndAdd, nil
	case "CMP_AND_SWAP":
		return CmpAndSwap, nil
	}
	return 0, fmt.Errorf("perftest: -A %q: want FETCH_AND_ADD or CMP_AND_SWAP", s)
}

// Tool is one perftest program: ib_<verb>_bw or ib_<verb>_lat.
type Tool struct {
	Verb Verb
	Lat  bool
}

// Tools lists the programs this package speaks for, in a stable order.
var Tools = []Tool{
	{Write, false}, {Read, false}, {Send, false}, {Atomic, false},
	{Write, true}, {Read, true}, {Send, true},
}

// Name returns the program's name, e.g. "ib_read_lat".
func (t Tool) Name() string {
	if t.Lat {
		return "ib_" + t.Verb.String() + "_lat"
	}
	return "ib_" + t.Verb.String() + "_bw"
}

// ParseTool parses a program name ("ib_write_bw", "write_bw").
func ParseTool(s string) (Tool, error) {
	n := strings.TrimPrefix(s, "ib_")
	for _, t := range Tools {
		if strings.TrimPrefix(t.Name(), "ib_") == n {
			return t, nil
		}
	}
	return Tool{}, fmt.Errorf("perftest: unknown tool %q (ib_{write,read,send,atomic}_bw, ib_{write,read,send}_lat)", s)
}

// ReadsOrAtomics reports whether the tool's requests need responder
// resources, so that its key message advertises the device's
// max_qp_rd_atom instead of 1.
func (t Tool) ReadsOrAtomics() bool { return t.Verb == Read || t.Verb == Atomic }

// keyStep is one key-message exchange: of every QP's message in turn, or
// of QP 0's only.
type keyStep uint8

const (
	perQP keyStep = iota
	once
)

// preKeys returns the key exchanges before the traffic, the last of which
// is the barrier after which the client starts (perftest 4.5, checked in
// captures; "once" exchanges carry QP 0's message):
//
//	write/read/atomic bw: per QP, per QP (after RTR/RTS), once
//	send bw:              per QP, (RTR/RTS) once, per QP, (receives posted) once
//	*_lat (one QP):       once, per QP, (RTR/RTS) per QP, once
func (t Tool) preKeys() []keyStep {
	switch {
	case t.Lat:
		return []keyStep{once, perQP, perQP, once}
	case t.Verb == Send:
		return []keyStep{perQP, once, perQP, once}
	}
	return []keyStep{perQP, perQP, once}
}

// hasResults reports whether the test ends with the results exchange
// (xchg_bw_reports): the half-duplex bw tests where the server is passive.
func (t Tool) hasResults() bool { return !t.Lat && t.Verb != Send }

// hasClose reports whether the test ends with ctx_close_connection (a key
// message and "done"); ib_write_lat just exits.
func (t Tool) hasClose() bool { return !(t.Lat && t.Verb == Write) }

// ServerPassive reports whether the server takes no part in the traffic:
// it waits for the client's end-of-test message while the client's
// requests run against its buffer.
func (t Tool) ServerPassive() bool {
	return t.Verb == Read && t.Lat || !t.Lat && t.Verb != Send
}

// MaxQPs is the number of QPs the tool allows (perftest: "Multiple QPs
// only available on bw tests").
func (t Tool) MaxQPs() int {
	if t.Lat {
		return 1
	}
	return 1 << 14
}

// AllSizes returns the message sizes of -a: 2^1 … 2^23 bytes, for every
// tool but ib_atomic_bw (whose size is 8).
func AllSizes() []int {
	s := make([]int, 0, 23)
	for i := 1; i < 24; i++ {
		s = append(s, 1<<i)
	}
	return s
}
