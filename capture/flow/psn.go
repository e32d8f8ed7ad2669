package flow

import "github.com/goroce/goroce/bth"

// signed24 returns the 24-bit modular difference a - b as a signed number
// in [-2^23, 2^23), the distance bth.PSN.Compare measures.
func signed24(a, b bth.PSN) int64 { return int64(int32(uint32(a-b)<<8) >> 8) }

// unwrapper maps 24-bit PSNs onto a line of int64 values, so a stream
// longer than 2^24 PSNs or crossing the wrap plots and compares plainly.
// Values are relative to the first PSN given (0), and each new PSN is
// placed within ±2^23 of the highest one seen.
type unwrapper struct {
	ok  bool
	raw bth.PSN // the highest PSN seen
	u   int64   // its unwrapped value
}

// at returns the unwrapped value of p without moving the reference.
func (w *unwrapper) at(p bth.PSN) int64 {
	if !w.ok {
		return 0
	}
	return w.u + signed24(p, w.raw)
}

// see places p and moves the reference up when p is the highest so far.
func (w *unwrapper) see(p bth.PSN) int64 {
	if !w.ok {
		w.ok, w.raw, w.u = true, p, 0
		return 0
	}
	u := w.at(p)
	if u > w.u {
		w.raw, w.u = p, u
	}
	return u
}

// raise moves the reference to the unwrapped value u (at or above the
// current one), for a request that consumes several PSNs.
func (w *unwrapper) raise(u int64) {
	if !w.ok || u <= w.u {
		return
	}
	w.raw = w.raw.Add(uint32(u - w.u))
	w.u = u
}

// psnAt returns the PSN whose unwrapped value is u.
func (w *unwrapper) psnAt(u int64) bth.PSN {
	return w.raw.Add(uint32(u - w.u))
}

// validMTU reports whether n is one of the IBA path MTUs (IBA 9.6.1.2).
func validMTU(n int) bool {
	switch n {
	case 256, 512, 1024, 2048, 4096:
		return true
	}
	return false
}

// ReadSpan returns the number of PSNs a READ of length n takes with path
// MTU mtu: ceil(n/mtu), at least 1 (rxe_req.c update_wqe_psn).
func ReadSpan(n uint32, mtu int) int64 {
	if n == 0 || mtu <= 0 {
		return 1
	}
	return (int64(n) + int64(mtu) - 1) / int64(mtu)
}
