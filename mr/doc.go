// Package mr implements memory registration for goroce: protection domains
// (PD), memory regions (Region) and the per-device key table (Table) that the
// responder consults for every RDMA READ, WRITE and ATOMIC, and the requester
// for every local scatter/gather entry.
//
// It follows rdma_rxe's rxe_mr.c with the known weaknesses removed
// (doc/rxe.md §8, §9):
//
//   - keys are 32 random bits from crypto/rand, looked up in a map, never 0,
//     never equal to a live key and never reissued within ReuseWindow
//     registrations (rxe: sequential pool index<<8 | one random byte);
//   - the bounds check never computes va+length (CVE-2016-8636 and its 2026
//     regression, va = 0xFFFFFFFFFFFFFFF8 with length 8);
//   - a region cannot be read or written after Deregister returns, even
//     through a *Region obtained earlier, and a replayed READ can Recheck its
//     rkey (rxe_recheck_mr).
//
// Lookups, range checks, copies and atomics do not allocate and return bare
// sentinel errors (ErrInvalidKey, ErrDeregistered, ErrWrongPD,
// ErrAccessDenied, ErrOutOfRange, ErrMisaligned) for errors.Is.
//
// Memory windows (Window, IBA 10.6.7) of type 1 and 2 are bound to part of
// a region with their own rkey and rights (Table.Bind) and resolved on the
// responder path with Table.ResolveRemote; Table.Invalidate is LOCAL_INV
// and the responder's half of SEND with invalidate (rxe_mw.c,
// rxe_invalidate_mr). The package imports no other goroce package but bth,
// for the QPN a type 2 window is bound through.
package mr
