package roce

import (
	"errors"

	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/internal/errs"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
)

// Errors of the device API.
var (
	// ErrClosed is returned by every verb of a Device after Close, and of
	// its QPs. It is goroce's one closed sentinel: a CQ's Wait that Close
	// ended returns an error that matches it.
	ErrClosed = errs.ErrClosed
	// ErrInvalidArg is goroce's one invalid-argument sentinel: every
	// layer that refuses an argument returns an error that matches it
	// (ErrInvalidAttr, ErrInvalidConfig and ErrMessageOverMTU are
	// narrower cases).
	ErrInvalidArg = errs.ErrInvalidArg
	// ErrTooManyQPs is returned by CreateQP beyond Config.MaxQPs, or when
	// no free QPN could be drawn.
	ErrTooManyQPs = errors.New("roce: too many QPs")
	// ErrNoSuchQP is returned by the verbs of a destroyed QP.
	ErrNoSuchQP = errors.New("roce: no such QP")
	// ErrNotAttached is returned for an object of another device, such as
	// QPConfig.SRQ.
	ErrNotAttached = errors.New("roce: object belongs to another device")
)

// Errors of the verbs, from the packages that return them (qp, mr, cm), so that a program tests them with errors.Is importing roce alone.
var (
	// ErrInvalidTransition is returned by QP.Modify (and Connect, Ready)
	// for a state change the IBA 10.3.1 table does not have.
	ErrInvalidTransition = qp.ErrInvalidTransition
	// ErrInvalidAttr is returned by QP.Modify for an attribute the
	// transition requires and lacks, or does not allow; it matches
	// ErrInvalidArg.
	ErrInvalidAttr = qp.ErrInvalidAttr
	// ErrInvalidState is returned by PostSend in RESET, INIT and RTR, by
	// PostRecv in RESET (IBA 10.3.1), and by the verbs of a destroyed SRQ.
	ErrInvalidState = qp.ErrInvalidState
	// ErrQueueFull is returned by PostSend and PostRecv when the work
	// queue holds its maximum (QPConfig.MaxSendWR, MaxRecvWR): the
	// back-pressure of a program that posts faster than it polls.
	ErrQueueFull = qp.ErrQueueFull
	// ErrTooManySGE is returned for a work request with more SGEs than
	// QPConfig.MaxSGE.
	ErrTooManySGE = qp.ErrTooManySGE
	// ErrInlineTooLong is returned for SendInline data beyond
	// QPConfig.MaxInline.
	ErrInlineTooLong = qp.ErrInlineTooLong
	// ErrUnsupportedOp is returned for an unknown work request opcode, or
	// one the QP's type does not carry (a READ on UC, an RDMA WRITE on UD).
	ErrUnsupportedOp = qp.ErrUnsupportedOp
	// ErrInvalidConfig is returned by CreateQP for a QPConfig out of
	// range; it matches ErrInvalidArg.
	ErrInvalidConfig = qp.ErrInvalidConfig
	// ErrMessageTooLong is returned for a message longer than 2^31 bytes.
	ErrMessageTooLong = qp.ErrMessageTooLong
	// ErrMessageOverMTU is returned for a UD send longer than the MTU (a
	// datagram is one packet); it matches ErrInvalidArg.
	ErrMessageOverMTU = qp.ErrMessageOverMTU
	// ErrBusy is returned by SRQ.Destroy while QPs use the SRQ (EBUSY).
	ErrBusy = qp.ErrBusy

	// ErrInvalidKey means no region or window holds the key, or the key
	// does not belong to the object it was checked against.
	ErrInvalidKey = mr.ErrInvalidKey
	// ErrDeregistered means the region, or the region the key named, has
	// been deregistered; treat it as ErrInvalidKey.
	ErrDeregistered = mr.ErrDeregistered
	// ErrWrongPD means the region or window belongs to another protection
	// domain.
	ErrWrongPD = mr.ErrWrongPD
	// ErrAccessDenied means the region lacks a requested access right.
	ErrAccessDenied = mr.ErrAccessDenied
	// ErrOutOfRange means an access does not lie inside the region.
	ErrOutOfRange = mr.ErrOutOfRange
	// ErrMisaligned means an atomic's address is not 8-byte aligned.
	ErrMisaligned = mr.ErrMisaligned
	// ErrInvalidated means the region or window was invalidated
	// (LOCAL_INV, SEND with invalidate) or, for a type 1 window, unbound.
	ErrInvalidated = mr.ErrInvalidated
	// ErrWindowState means a memory window is not in the state the
	// operation needs (binding a deallocated or bound type 2 window,
	// invalidating one that is not bound).
	ErrWindowState = mr.ErrWindowState
	// ErrNotInvalidatable means the key cannot be invalidated: a region
	// registered without MRConfig.Invalidatable, or a type 1 window.
	ErrNotInvalidatable = mr.ErrNotInvalidatable
	// ErrPDBusy is returned by PD.Dealloc while the PD has regions
	// (ibv_dealloc_pd's EBUSY).
	ErrPDBusy = mr.ErrBusy
	// ErrDeallocated means the protection domain was deallocated.
	ErrDeallocated = mr.ErrDeallocated
	// ErrTableFull means the device holds its maximum of memory regions
	// or windows, or no unused key could be drawn.
	ErrTableFull = mr.ErrTableFull

	// ErrServiceInUse is returned by Listen and ListenUD for a port that
	// is listened on already.
	ErrServiceInUse = cm.ErrServiceInUse
	// ErrPrivateData is returned by Dial and DialUD for private data
	// longer than the message holds.
	ErrPrivateData = cm.ErrPrivateData
)
