package mr

import (
	"fmt"

	"github.com/goroce/goroce/bth"
)

// WindowType is the type of a memory window, numbered like enum ibv_mw_type.
type WindowType uint8

// Memory window types (IBA 10.6.7.1).
const (
	// WindowType1 is bound by the ibv_bind_mw verb and belongs to its PD:
	// any QP of the PD may use it. Only another bind changes or unbinds it
	// (o10-36.2.2: never zero-based; o10-37.2.26: never invalidated).
	WindowType1 WindowType = 1 // IBV_MW_TYPE_1
	// WindowType2 is bound by a BIND_MW work request and is then associated
	// with that QP (type 2B): only that QP may access memory through it. It
	// is freed again by LOCAL_INV or a peer's SEND with invalidate.
	WindowType2 WindowType = 2 // IBV_MW_TYPE_2
)

// String returns "Type1" or "Type2".
func (t WindowType) String() string {
	switch t {
	case WindowType1:
		return "Type1"
	case WindowType2:
		return "Type2"
	}
	return fmt.Sprintf("WindowType(%d)", uint8(t))
}

// WindowState is the state of a memory window (rxe's enum rxe_mw_state,
// IBA 10.6.7.1).
type WindowState uint8

// Memory window states.
const (
	// WindowInvalid: deallocated.
	WindowInvalid WindowState = iota
	// WindowFree: a type 2 window not bound (after allocation and after an
	// invalidation).
	WindowFree
	// WindowValid: a type 1 window (bound or not) or a bound type 2 window.
	WindowValid
)

// String returns "Invalid", "Free" or "Valid".
func (s WindowState) String() string {
	switch s {
	case WindowInvalid:
		return "Invalid"
	case WindowFree:
		return "Free"
	case WindowValid:
		return "Valid"
	}
	return fmt.Sprintf("WindowState(%d)", uint8(s))
}

// Window is a memory window (MW, IBA 10.6.7): a remotely accessible view
// of part of a Region with its own rkey and access rights, rebound without
// registering memory again. Windows come from Table.AllocWindow.
//
// The rkey is index<<8 | key byte, as in rxe and in the verbs API: the
// index (24 random bits) is fixed at allocation and each bind may change
// the low byte (ibv_inc_rkey), so an rkey handed out for one binding stops
// working after the next. A Window's methods are safe for concurrent use;
// its mutable state is guarded by its table's lock.
type Window struct {
	typ   WindowType
	pd    *PD
	table *Table

	// Guarded by table.mu.
	key       Key
	promised  Key // the key the latest posted type 1 bind will install (NextBindKey); 0: none
	state     WindowState
	region    *Region // nil: not bound
	access    AccessFlags
	addr      uint64 // IOVA in region of the window's first byte
	length    uint64
	zeroBased bool
	qpn       bth.QPN // type 2: the QP the window is bound through
}

// Type returns the window's type.
func (w *Window) Type() WindowType { return w.typ }

// PD returns the window's protection domain.
func (w *Window) PD() *PD { return w.pd }

// RKey returns the window's current rkey: the one its last bind chose, or
// the allocation's.
func (w *Window) RKey() Key {
	w.table.mu.RLock()
	defer w.table.mu.RUnlock()
	return w.key
}

// NextBindKey returns the rkey a type 1 bind posted now will install: the
// window's key with its low byte incremented (ibv_inc_rkey), counted from
// the key the previous posted bind promised if that bind has not run yet.
// ibv_bind_mw updates mw->rkey when the bind is posted, not when it
// executes; without this, two binds queued behind a fence would promise the
// same key, and a peer holding the first binding's rkey could use the
// second binding.
func (w *Window) NextBindKey() Key {
	w.table.mu.Lock()
	defer w.table.mu.Unlock()
	base := w.key
	if w.promised != 0 {
		base = w.promised
	}
	w.promised = base&^0xff | (base+1)&0xff
	return w.promised
}

// State returns the window's state.
func (w *Window) State() WindowState {
	w.table.mu.RLock()
	defer w.table.mu.RUnlock()
	return w.state
}

// Bound returns the region the window is bound to, or nil.
func (w *Window) Bound() *Region {
	w.table.mu.RLock()
	defer w.table.mu.RUnlock()
	return w.region
}

// maxIndexDraws bounds the search for an unused window index.
const maxIndexDraws = 64

// AllocWindow allocates a memory window of pd, like ibv_alloc_mw: a type 1
// window starts Valid and unbound, a type 2 window Free (rxe_alloc_mw).
func (t *Table) AllocWindow(pd *PD, typ WindowType) (*Window, error) {
	if pd == nil || typ != WindowType1 && typ != WindowType2 {
		return nil, fmt.Errorf("%w: window of type %v in PD %p", ErrInvalidArg, typ, pd)
	}
	if pd.table != nil && pd.table != t {
		return nil, ErrWrongPD
	}
	if err := pd.hold(); err != nil {
		return nil, err
	}
	w := &Window{typ: typ, pd: pd, table: t, state: WindowFree}
	if typ == WindowType1 {
		w.state = WindowValid
	}
	t.mu.Lock()
	err := t.insertWindowLocked(w)
	t.mu.Unlock()
	if err != nil {
		pd.release()
		return nil, err
	}
	return w, nil
}

// insertWindowLocked draws an index none of whose 256 keys is a region's.
func (t *Table) insertWindowLocked(w *Window) error {
	if t.live+len(t.wins) >= t.max {
		return ErrTableFull
	}
draw:
	for range maxIndexDraws {
		k, err := t.src.next()
		if err != nil {
			return fmt.Errorf("mr: reading key: %w", err)
		}
		idx := k >> 8
		if idx == 0 {
			continue
		}
		if _, used := t.wins[idx]; used {
			continue
		}
		for b := range Key(256) {
			if _, used := t.keys[idx<<8|b]; used {
				continue draw
			}
		}
		w.key = k
		t.wins[idx] = w
		return nil
	}
	return fmt.Errorf("%w: no unused window index in %d draws", ErrTableFull, maxIndexDraws)
}

// DeallocWindow deallocates w, like ibv_dealloc_mw: it is unbound, its
// rkey stops working at once and w becomes Invalid. It returns
// ErrWindowState if w was already deallocated.
func (t *Table) DeallocWindow(w *Window) error {
	if w == nil || w.table != t {
		return ErrInvalidArg
	}
	t.mu.Lock()
	if w.state == WindowInvalid {
		t.mu.Unlock()
		return ErrWindowState
	}
	w.unbindLocked()
	w.state = WindowInvalid
	delete(t.wins, w.key>>8)
	t.mu.Unlock()
	w.pd.release()
	return nil
}

func (w *Window) unbindLocked() {
	if w.region != nil {
		w.region.windows.Add(-1)
	}
	w.region, w.access, w.addr, w.length, w.zeroBased, w.qpn = nil, 0, 0, 0, false, 0
}

// BindConfig describes a bind of a memory window (struct ibv_mw_bind_info
// plus the new rkey of a type 2 bind).
type BindConfig struct {
	// Region is the region to bind to; nil, or Length 0, unbinds a type 1
	// window (a type 2 window cannot be bound so, o10-37.2.40).
	Region *Region
	// Addr and Length give the part of Region the window covers, Addr as
	// an IOVA of the region. For a zero-based window peers address it from
	// 0; otherwise with the region's own addresses.
	Addr, Length uint64
	// Access is the window's remote rights: RemoteRead, RemoteWrite and
	// RemoteAtomic only.
	Access AccessFlags
	// ZeroBased makes peers address the window from 0
	// (IBV_ACCESS_ZERO_BASED); type 2 only (o10-36.2.2).
	ZeroBased bool
	// RKey is the window's rkey after the bind. Only its low byte may
	// differ from the current one (rxe_check_bind_mw); zero keeps the
	// current key.
	RKey Key
}

// Bind binds w as cfg says, on behalf of a QP of pd numbered qpn, as the
// BIND_MW work request does (rxe_bind_mw: rxe_check_bind_mw, then
// rxe_do_bind_mw), and returns the window's new rkey. Type 1 windows are
// bound so too: ibv_bind_mw posts a BIND_MW work request.
//
// It fails, changing nothing, with ErrWindowState (type 1 deallocated,
// o10-36.2.2; type 2 not Free, o10-37.2.30), ErrWrongPD (the QP's or the
// region's PD is not the window's, C10-72), ErrInvalidArg (a type 2
// bind without a region or length, o10-37.2.40; a zero-based type 1 bind,
// o10-36.2.2; rights other than remote ones; an rkey whose index is not the
// window's; a zero-based region), ErrAccessDenied (the region lacks MWBind,
// C10-73, or LocalWrite for a writable window, C10-74), ErrOutOfRange (the
// window does not lie inside the region, C10-75; rxe checks only the length
// of a zero-based window, this checks the range for both) or
// ErrDeregistered / ErrInvalidated (the region is gone).
func (t *Table) Bind(w *Window, pd *PD, qpn bth.QPN, cfg BindConfig) (Key, error) {
	if w == nil || w.table != t {
		return 0, ErrInvalidArg
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := w.checkBindLocked(pd, &cfg); err != nil {
		return 0, err
	}
	// rxe_do_bind_mw.
	w.unbindLocked()
	if cfg.RKey != 0 {
		delete(t.wins, w.key>>8)
		w.key = cfg.RKey
		t.wins[w.key>>8] = w
	}
	w.state = WindowValid
	if cfg.Region != nil && cfg.Length > 0 {
		cfg.Region.windows.Add(1)
		w.region, w.access, w.addr, w.length = cfg.Region, cfg.Access, cfg.Addr, cfg.Length
		w.zeroBased = cfg.ZeroBased
		if w.typ == WindowType2 {
			w.qpn = qpn
		}
	}
	return w.key, nil
}

// checkBindLocked is rxe_check_bind_mw.
func (w *Window) checkBindLocked(pd *PD, cfg *BindConfig) error {
	if cfg.RKey != 0 && cfg.RKey>>8 != w.key>>8 {
		return fmt.Errorf("%w: rkey %v is not a key of window %v", ErrInvalidArg, cfg.RKey, w.key)
	}
	if cfg.Access&^remoteAccess != 0 {
		return fmt.Errorf("%w: window access %v", ErrInvalidArg, cfg.Access)
	}
	bound := cfg.Region != nil && cfg.Length > 0
	switch w.typ {
	case WindowType1:
		if w.state != WindowValid {
			return ErrWindowState
		}
		if cfg.ZeroBased { // o10-36.2.2
			return fmt.Errorf("%w: zero-based type 1 window", ErrInvalidArg)
		}
	case WindowType2:
		if w.state != WindowFree { // o10-37.2.30
			return ErrWindowState
		}
		if pd != w.pd { // C10-72
			return ErrWrongPD
		}
		if !bound { // o10-37.2.40
			return fmt.Errorf("%w: type 2 bind without a region or length", ErrInvalidArg)
		}
	}
	if !bound {
		return nil
	}
	r := cfg.Region
	if r.table != w.table || r.pd != w.pd {
		return ErrWrongPD
	}
	if !r.valid.Load() {
		return ErrDeregistered
	}
	if r.invalidated.Load() {
		return ErrInvalidated
	}
	if r.zeroBased {
		return fmt.Errorf("%w: window on a zero-based region", ErrInvalidArg)
	}
	if !r.access.Has(MWBind) { // C10-73
		return ErrAccessDenied
	}
	if cfg.Access&(RemoteWrite|RemoteAtomic) != 0 && !r.access.Has(LocalWrite) { // C10-74
		return ErrAccessDenied
	}
	return r.CheckRange(cfg.Addr, cfg.Length) // C10-75
}

// Invalidate invalidates the region or type 2 window that key names, on
// behalf of a QP of pd, as LOCAL_INV (IBA 10.6.6) and the responder of a
// SEND with invalidate (IBA 9.4.1.1) do; rxe's rxe_invalidate_mr and
// rxe_invalidate_mw. A window becomes Free and unbound; a region answers
// every later lookup with ErrInvalidated.
//
// It fails, changing nothing, with ErrInvalidKey (no such key),
// ErrDeregistered, ErrWrongPD, ErrNotInvalidatable (a region registered
// without Invalidatable, or a type 1 window, o10-37.2.26), ErrBusy (a
// region with windows bound, as rxe_invalidate_mr refuses it) or
// ErrWindowState / ErrInvalidated (nothing bound to invalidate; rxe lets a
// Free type 2 window through, which is harmless there and refused here).
func (t *Table) Invalidate(pd *PD, key Key) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.keys[key]; ok {
		switch {
		case r == nil:
			return ErrDeregistered
		case r.pd != pd:
			return ErrWrongPD
		case !r.invalidatable:
			return ErrNotInvalidatable
		case r.windows.Load() > 0:
			return ErrBusy
		case !r.invalidated.CompareAndSwap(false, true):
			return ErrInvalidated
		}
		return nil
	}
	w := t.wins[key>>8]
	switch {
	case w == nil || w.key != key:
		return ErrInvalidKey
	case w.pd != pd:
		return ErrWrongPD
	case w.typ == WindowType1: // o10-37.2.26
		return ErrNotInvalidatable
	case w.state != WindowValid:
		return ErrWindowState
	}
	w.unbindLocked()
	w.state = WindowFree
	return nil
}

// ResolveRemote is LookupRemote for an rkey that may name a memory window
// as well as a region, for a QP of pd numbered qpn: it returns the region
// and the region IOVA that the peer's [va, va+length) maps to. For a window
// it checks what rxe_lookup_mw and check_rkey do: the key is the window's
// current one, the window is Valid, bound (non-zero length), of pd, bound
// through this QP if type 2, grants need, and the range lies inside the
// window (from 0 if zero-based, else at its IOVA); the address is then
// translated into the region. Errors are LookupRemote's sentinels plus
// ErrInvalidated. It does not allocate.
func (t *Table) ResolveRemote(pd *PD, qpn bth.QPN, rkey Key, va, length uint64, need AccessFlags) (*Region, uint64, error) {
	t.mu.RLock()
	_, isRegion := t.keys[rkey]
	w := t.wins[rkey>>8]
	var (
		r                   *Region
		access              AccessFlags
		addr, wlen          uint64
		zero, usable, keyOK bool
	)
	if !isRegion && w != nil && w.key == rkey {
		keyOK = true // read under the lock: Bind writes w.key
		r, access, addr, wlen, zero = w.region, w.access, w.addr, w.length, w.zeroBased
		usable = w.state == WindowValid && w.pd == pd && (w.typ == WindowType1 || w.qpn == qpn)
	}
	t.mu.RUnlock()
	if isRegion || w == nil {
		r, err := t.LookupRemote(pd, rkey, va, length, need)
		return r, va, err
	}
	switch {
	case !keyOK:
		return nil, 0, ErrInvalidKey
	case w.pd != pd:
		return nil, 0, ErrWrongPD
	case !usable:
		return nil, 0, ErrInvalidated
	case r == nil || wlen == 0:
		return nil, 0, ErrInvalidated
	case !access.Has(need) || access&remoteAccess == 0:
		return nil, 0, ErrAccessDenied
	}
	base := addr
	if zero {
		base = 0
	}
	if va < base || length > wlen || va-base > wlen-length {
		return nil, 0, ErrOutOfRange
	}
	if !r.valid.Load() {
		return nil, 0, ErrDeregistered
	}
	if r.invalidated.Load() {
		return nil, 0, ErrInvalidated
	}
	return r, addr + (va - base), nil
}

// RecheckRemote reports whether a READ that ResolveRemote(pd, qpn, rkey,
// va, length, RemoteRead) resolved to region r at IOVA xva may still be
// replayed (rxe_recheck_mr, for a duplicate READ): for a region's own key
// the region must be valid and not invalidated (Region.Recheck); for a
// window's key the whole resolution is redone, since the window may have
// been rebound with the same key (a bind with RKey 0 keeps it) to another
// range, shift or access, and must still give r and xva.
func (t *Table) RecheckRemote(pd *PD, qpn bth.QPN, r *Region, rkey Key, va, length, xva uint64) error {
	if r == nil {
		return ErrInvalidKey
	}
	if rkey == r.key {
		if r.invalidated.Load() {
			return ErrInvalidated
		}
		return r.Recheck(rkey)
	}
	r2, x2, err := t.ResolveRemote(pd, qpn, rkey, va, length, RemoteRead)
	switch {
	case err != nil:
		return err
	case r2 != r || x2 != xva:
		return ErrInvalidated // rebound elsewhere: not the memory the READ read
	}
	return nil
}
