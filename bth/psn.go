package bth

import "fmt"

// PSN is a 24-bit packet sequence number (IBA 9.7.1). Arithmetic on PSNs is
// modular: use Add, Sub and Compare, never the Go operators on the raw value.
type PSN uint32

// PSNMask keeps the 24 significant bits of a PSN.
const PSNMask = 0x00ffffff

// MaxPSNWindow is the largest distance at which Compare is antisymmetric
// (2^23 - 1). At a distance of exactly 2^23, Compare(a, b) and Compare(b, a)
// are both negative, as in rxe's psn_compare; every window of this project is
// far smaller (128 PSNs), so that edge never decides anything.
const MaxPSNWindow = 1<<23 - 1

// Add returns p + n modulo 2^24.
func (p PSN) Add(n uint32) PSN { return PSN((uint32(p) + n) & PSNMask) }

// Next returns p + 1 modulo 2^24.
func (p PSN) Next() PSN { return p.Add(1) }

// Sub returns the modular distance p - q as a 24-bit value.
func (p PSN) Sub(q PSN) uint32 { return (uint32(p) - uint32(q)) & PSNMask }

// Compare returns the modular order of p relative to q, exactly like rxe's
// psn_compare: (s32)((p - q) << 8). The result is > 0 when p is ahead of q
// (within 2^23), 0 when equal and < 0 when p is behind q. Only the sign is
// meaningful; the magnitude is the distance shifted left by 8.
func (p PSN) Compare(q PSN) int32 { return int32((uint32(p) - uint32(q)) << 8) }

// Before reports whether p precedes q in modular order.
func (p PSN) Before(q PSN) bool { return p.Compare(q) < 0 }

// After reports whether p follows q in modular order.
func (p PSN) After(q PSN) bool { return p.Compare(q) > 0 }

// InWindow reports whether p is one of the n PSNs that start at first:
// first, first+1, …, first+n-1 modulo 2^24. It is the test rxe writes as
// psn_compare(psn, first) >= 0 && psn_compare(psn, last) <= 0, and gives
// the same answer for every n up to MaxPSNWindow+1; unlike that pair it
// also holds for larger n. n = 0 is the empty window.
func (p PSN) InWindow(first PSN, n uint32) bool { return p.Sub(first) < n }

// Valid reports whether p fits in 24 bits.
func (p PSN) Valid() bool { return uint32(p)&^PSNMask == 0 }

// String formats the PSN in decimal, as Wireshark shows infiniband.bth.psn.
func (p PSN) String() string { return fmt.Sprintf("%d", uint32(p)) }

// QPN is a 24-bit queue pair number (IBA 9.2 DestQP).
type QPN uint32

// QPNMask keeps the 24 significant bits of a QPN.
const QPNMask = 0x00ffffff

// Well-known QPNs (IBA 3.5.2): QP0 is the SMI, QP1 the GSI (CM MADs on
// RoCE), and 0xFFFFFF is the multicast QPN.
const (
	QPNSMI       QPN = 0
	QPNGSI       QPN = 1
	QPNMulticast QPN = 0xffffff
)

// Valid reports whether q fits in 24 bits.
func (q QPN) Valid() bool { return uint32(q)&^QPNMask == 0 }

// String formats the QPN as Wireshark does (0x%06x).
func (q QPN) String() string { return fmt.Sprintf("0x%06x", uint32(q)) }
