package mr

import (
	"errors"

	"github.com/goroce/goroce/internal/errs"
)

// Lookup and access errors. A responder maps every one of ErrInvalidKey,
// ErrDeregistered, ErrWrongPD, ErrAccessDenied and ErrOutOfRange to NAK Remote
// Access Error (IBV_WC_REM_ACCESS_ERR at the requester); the local side maps
// them to IBV_WC_LOC_PROT_ERR. They are returned unwrapped from the hot paths,
// so comparing with errors.Is costs nothing and allocates nothing.
var (
	// ErrInvalidKey means no region holds the key, or the key does not
	// belong to the region it was checked against.
	ErrInvalidKey = errors.New("mr: invalid key")
	// ErrDeregistered means the region, or the region the key named, has been
	// deregistered. Treat it as ErrInvalidKey; it only helps diagnosis.
	ErrDeregistered = errors.New("mr: region deregistered")
	// ErrWrongPD means the region belongs to another protection domain.
	ErrWrongPD = errors.New("mr: protection domain mismatch")
	// ErrAccessDenied means the region lacks a requested access right.
	ErrAccessDenied = errors.New("mr: access denied")
	// ErrOutOfRange means the access does not lie inside the region.
	ErrOutOfRange = errors.New("mr: access out of range")
	// ErrMisaligned means an atomic's address is not 8-byte aligned.
	ErrMisaligned = errors.New("mr: atomic address not 8-byte aligned")
	// ErrInvalidated means the region or window the key named was
	// invalidated (LOCAL_INV, SEND with invalidate, IBA 10.6.6, 10.6.7.2.4)
	// or, for a type 1 window, unbound. Treat it as ErrInvalidKey.
	ErrInvalidated = errors.New("mr: key invalidated")
)

// Memory window and invalidation errors (IBA 10.6.6, 10.6.7). A requester
// reports a failed bind as IBV_WC_MW_BIND_ERR and a failed LOCAL_INV as
// IBV_WC_LOC_QP_OP_ERR, as rxe's rxe_do_local_ops does.
var (
	// ErrWindowState means the window is not in the state the operation
	// needs: binding a type 1 window that was deallocated, a type 2 window
	// that is not free (o10-37.2.30), or invalidating a window that is not
	// bound.
	ErrWindowState = errors.New("mr: memory window in the wrong state")
	// ErrNotInvalidatable means the key cannot be invalidated: a region
	// registered without RegisterConfig.Invalidatable (rxe_invalidate_mr
	// refuses every MR but a fast-registration one), or a type 1 window
	// (o10-37.2.26: only binding changes a type 1 window).
	ErrNotInvalidatable = errors.New("mr: key cannot be invalidated")
)

// Resource errors.
var (
	// ErrBusy means a PD still has registered regions (Dealloc refuses it,
	// like ibv_dealloc_pd's EBUSY).
	ErrBusy = errors.New("mr: busy")
	// ErrNotPinned means Slice was called on a region nobody has pinned.
	ErrNotPinned = errors.New("mr: region not pinned")
	// ErrDeallocated means the protection domain has been deallocated.
	ErrDeallocated = errors.New("mr: protection domain deallocated")
	// ErrTableFull means the table holds its maximum number of regions, or no
	// unused key could be drawn.
	ErrTableFull = errors.New("mr: table full")
	// ErrInvalidArg means a configuration or argument is malformed. It is
	// the one invalid-argument sentinel of goroce: roce, cq and qp export
	// the same value, so errors.Is matches it whichever package failed.
	ErrInvalidArg = errs.ErrInvalidArg
)
