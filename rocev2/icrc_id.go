package rocev2

import "sync"

// The ICRC covers the IPv4 identification field (IBA A17.4.1; rxe once
// broke interop by not setting tot_len first, doc/rxe.md §7), but a UDP
// socket never reports the ID a packet arrived with. Linux senders use 0 for
// unconnected DF datagrams; rxe picks one per packet. Because a CRC is
// linear over GF(2), the difference between the received ICRC and the one
// computed with ID 0 depends only on the ID and on how many bytes follow it:
//
//	got ⊕ want = Z^n(R(id))
//
// where R maps the two ID bytes to a CRC register and Z shifts a register
// through one zero byte. RecoverIPv4ID inverts Z^n and R. A packet whose
// difference has no such preimage was corrupted; one that has is accepted,
// which leaves 32 − 16 = 16 check bits for IPv4 packets of foreign senders
// on the UDP path (raw transports see the real ID and keep all 32). The
// device therefore accepts a recovered ID only inside a window around the
// sender's ID counter (roce.ICRCIDRecovery; doc/icrc-id.md has the
// arithmetic).

type gf2mat [32]uint32 // column i is the image of bit i

func (m *gf2mat) apply(v uint32) uint32 {
	var r uint32
	for i := 0; v != 0; i, v = i+1, v>>1 {
		if v&1 != 0 {
			r ^= m[i]
		}
	}
	return r
}

func (m *gf2mat) mul(b *gf2mat) gf2mat { // m ∘ b
	var r gf2mat
	for i := range r {
		r[i] = m.apply(b[i])
	}
	return r
}

type idSolver struct {
	unshift [16]gf2mat // Z^-(2^k)
	rows    [16]uint8  // bits of R(id) that determine id
	inv     [16]uint16 // inverse of R restricted to those bits: column i = id bits giving row-bit i
	r       [16]uint32 // R(e_i)
}

var (
	solverOnce sync.Once
	solver     *idSolver
)

func rawUpdate(reg uint32, b byte) uint32 {
	return crcTable[byte(reg)^b] ^ reg>>8
}

func buildSolver() *idSolver {
	s := &idSolver{}
	// Z: one zero byte through the reflected register.
	var z gf2mat
	for i := range z {
		z[i] = rawUpdate(1<<i, 0)
	}
	zinv, ok := invert(z)
	if !ok {
		panic("rocev2: CRC shift is not invertible") // unreachable: P(0) = 1
	}
	s.unshift[0] = zinv
	for k := 1; k < len(s.unshift); k++ {
		s.unshift[k] = s.unshift[k-1].mul(&s.unshift[k-1])
	}
	// R: the two ID bytes (big-endian) from a zero register.
	for i := 0; i < 16; i++ {
		id := uint16(1) << i
		reg := rawUpdate(0, byte(id>>8))
		reg = rawUpdate(reg, byte(id))
		s.r[i] = reg
	}
	// Pick 16 bit positions of R's image where R is invertible, by Gaussian
	// elimination over the 16 columns.
	type row struct {
		coef uint16 // coefficients of id bits
		pos  uint8
	}
	var rows []row
	for b := 0; b < 32; b++ {
		var coef uint16
		for i := 0; i < 16; i++ {
			if s.r[i]>>b&1 != 0 {
				coef |= 1 << i
			}
		}
		rows = append(rows, row{coef, uint8(b)})
	}
	// Reduce to an identity on 16 chosen rows, tracking combinations.
	type aug struct {
		coef uint16
		comb uint32 // which original rows (by index in chosen) were combined
	}
	var chosen []row
	var basis []aug
	for _, r := range rows {
		a := aug{coef: r.coef, comb: 1 << len(chosen)}
		for _, bv := range basis {
			if a.coef&lowBit(bv.coef) != 0 {
				a.coef ^= bv.coef
				a.comb ^= bv.comb
			}
		}
		if a.coef == 0 {
			continue
		}
		chosen = append(chosen, r)
		for j := range basis {
			if basis[j].coef&lowBit(a.coef) != 0 {
				basis[j].coef ^= a.coef
				basis[j].comb ^= a.comb
			}
		}
		basis = append(basis, a)
		if len(chosen) == 16 {
			break
		}
	}
	if len(chosen) != 16 {
		panic("rocev2: ID map is not injective") // unreachable for CRC-32
	}
	// Each basis vector now has a single pivot bit; id bit p = XOR of the
	// chosen rows' values selected by comb.
	for i, c := range chosen {
		s.rows[i] = c.pos
	}
	for _, bv := range basis {
		p := bitIndex(bv.coef)
		var m uint16
		for j := 0; j < 16; j++ {
			if bv.comb>>j&1 != 0 {
				m |= 1 << j
			}
		}
		s.inv[p] = m
	}
	return s
}

func lowBit(x uint16) uint16 { return x & -x }

func bitIndex(x uint16) int {
	for i := 0; i < 16; i++ {
		if x == 1<<i {
			return i
		}
	}
	return -1
}

// invert inverts a 32×32 GF(2) matrix.
func invert(m gf2mat) (gf2mat, bool) {
	// Work on rows: row r of m has bit c set when column c has bit r.
	var a, inv [32]uint32
	for r := 0; r < 32; r++ {
		for c := 0; c < 32; c++ {
			if m[c]>>r&1 != 0 {
				a[r] |= 1 << c
			}
		}
		inv[r] = 1 << r
	}
	for c := 0; c < 32; c++ {
		p := -1
		for r := c; r < 32; r++ {
			if a[r]>>c&1 != 0 {
				p = r
				break
			}
		}
		if p < 0 {
			return gf2mat{}, false
		}
		a[c], a[p] = a[p], a[c]
		inv[c], inv[p] = inv[p], inv[c]
		for r := 0; r < 32; r++ {
			if r != c && a[r]>>c&1 != 0 {
				a[r] ^= a[c]
				inv[r] ^= inv[c]
			}
		}
	}
	var out gf2mat
	for c := 0; c < 32; c++ {
		for r := 0; r < 32; r++ {
			if inv[r]>>c&1 != 0 {
				out[c] |= 1 << r
			}
		}
	}
	return out, true
}

// RecoverIPv4ID finds the IPv4 identification that makes a packet's ICRC
// right, given got — the ICRC computed with ID 0 (PseudoHeaders with ipID 0)
// — want — the ICRC the packet carries — and the transport length (BTH to
// ICRC inclusive). It returns false when no ID explains the difference: the
// packet was corrupted. It does not allocate. Computed with a guessed ID g
// instead of 0, got leads to g XOR the ID (the difference is linear in the
// ID bits), which is how the device uses it after a wrong guess.
func RecoverIPv4ID(got, want uint32, transportLen int) (uint16, bool) {
	if got == want {
		return 0, true
	}
	solverOnce.Do(func() { solver = buildSolver() })
	s := solver
	// Bytes after the ID in the covered data: 8 (masked LRH) + 20 (IPv4) +
	// 8 (UDP) + transport without ICRC, minus the 14 bytes up to the ID's end.
	n := transportLen + 18
	v := got ^ want
	for k := 0; n != 0 && k < len(s.unshift); k, n = k+1, n>>1 {
		if n&1 != 0 {
			v = s.unshift[k].apply(v)
		}
	}
	if n != 0 {
		return 0, false
	}
	var id uint16
	for p := 0; p < 16; p++ {
		var bit uint16
		m := s.inv[p]
		for j := 0; j < 16; j++ {
			if m>>j&1 != 0 {
				bit ^= uint16(v>>s.rows[j]) & 1
			}
		}
		id |= bit << p
	}
	// Check the whole image, not only the 16 rows used to solve.
	var img uint32
	for i := 0; i < 16; i++ {
		if id>>i&1 != 0 {
			img ^= s.r[i]
		}
	}
	return id, img == v
}
