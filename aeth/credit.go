package aeth

// CreditInvalid is the credit code of an ACK that reports no credit count
// (IBA 9.7.7.2): the responder does not take part in end-to-end flow
// control, and the requester may send as many messages as it likes. rxe
// sends it in every ACK (ACKUnlimited); hardware sends it from a QP with a
// shared receive queue, whose WQEs other QPs take too.
const CreditInvalid uint8 = 0x1f

// MaxCredits is the largest count a credit code stands for (code 0x1E).
const MaxCredits = 32768

// Credits returns the number of receive WQEs that an ACK's 5-bit credit
// code stands for (IBA 9.7.7.2, the credit count encoding): 0 to 4 for
// codes 0 to 4, then alternately 2^k and 3·2^(k-1), doubling every two
// codes, up to 32768 for 0x1E. It returns false for CreditInvalid.
func Credits(code uint8) (int, bool) {
	code &= 0x1f
	switch {
	case code == CreditInvalid:
		return 0, false
	case code < 2:
		return int(code), true
	}
	return (2 + int(code&1)) << (code/2 - 1), true
}

// CreditCode returns the code a responder with n receive WQEs available
// reports: the largest whose count does not exceed n, so that a requester
// never counts on a WQE that is not there (n above MaxCredits reports
// MaxCredits, a negative n 0). It never returns CreditInvalid.
func CreditCode(n int) uint8 {
	if n <= 0 {
		return 0
	}
	if n >= MaxCredits {
		return 0x1e
	}
	if n < 2 {
		return uint8(n)
	}
	// n lies in [2^k, 2^(k+1)): codes 2k and 2k+1 stand for 2^k and
	// 3·2^(k-1) (k ≥ 1).
	k := 0
	for n>>(k+1) != 0 {
		k++
	}
	code := uint8(2 * k)
	if n >= 3<<(k-1) {
		code++
	}
	return code
}
