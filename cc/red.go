package cc

// RED is the marking curve of a DCQCN congestion point, a switch egress
// queue (doc/dcqcn.md §1.1):
//
//	p(q) = 0                                 q ≤ Kmin
//	p(q) = Pmax·(q − Kmin)/(Kmax − Kmin)     Kmin < q ≤ Kmax
//	p(q) = 1                                 q > Kmax
//
// where q is the queue length in bytes. The caller supplies the uniform
// random number, so the curve stays deterministic and sans-IO; both ns-3
// reference models evaluate it at dequeue with the queue length left
// behind the departing packet (§1.1). RED is a small value type, safe to
// copy and to share between goroutines.
type RED struct {
	kmin, kmax int
	pmax       float64
	slope      float64 // Pmax / (Kmax − Kmin), 0 when Kmin = Kmax
}

// NewRED returns the marking curve for cfg, or an error wrapping
// [ErrInvalidConfig].
func NewRED(cfg REDConfig) (RED, error) {
	if err := cfg.Validate(); err != nil {
		return RED{}, err
	}
	r := RED{kmin: cfg.Kmin, kmax: cfg.Kmax, pmax: cfg.Pmax}
	if cfg.Kmax > cfg.Kmin {
		r.slope = cfg.Pmax / float64(cfg.Kmax-cfg.Kmin)
	}
	return r, nil
}

// Config returns the curve's parameters.
func (r RED) Config() REDConfig { return REDConfig{Kmin: r.kmin, Kmax: r.kmax, Pmax: r.pmax} }

// Probability returns p(q), the marking probability at queue length q
// bytes (doc/dcqcn.md §1.1).
func (r RED) Probability(q int) float64 {
	switch {
	case q <= r.kmin:
		return 0
	case q > r.kmax:
		return 1
	}
	return r.slope * float64(q-r.kmin)
}

// Mark reports whether a packet leaving a queue of q bytes is CE marked,
// given u drawn uniformly from [0, 1): it is when u < p(q).
func (r RED) Mark(q int, u float64) bool { return u < r.Probability(q) }
