package mr

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
)

const (
	// ReuseWindow is the number of registrations during which a freed key is
	// held back: a key deregistered when the table had made n registrations
	// is not issued again before registration n+ReuseWindow+1. A peer that
	// kept an old rkey therefore meets ErrDeregistered or ErrInvalidKey, not
	// another application buffer (matrix D6, doc/matrix.md §3).
	ReuseWindow = 1 << 16

	// DefaultMaxRegions is the region limit of a Table whose
	// TableConfig.MaxRegions is zero.
	DefaultMaxRegions = 1 << 20

	// maxKeyDraws bounds the search for an unused key. With 32-bit keys the
	// table would have to be billions of entries full for it to matter.
	maxKeyDraws = 64
)

// TableConfig configures a Table. The zero value is ready to use.
type TableConfig struct {
	// MaxRegions caps the number of live regions; 0 means
	// DefaultMaxRegions.
	MaxRegions int
	// Rand is the source of keys and default IOVAs; nil means crypto/rand.
	// Keys are the only secret guarding remote memory (ReDMArk, USENIX
	// Security 2021), so replace it only in tests.
	Rand io.Reader
}

// RegisterConfig describes a region to register.
type RegisterConfig struct {
	// Buf is the memory of the region; it must not be empty. The table
	// keeps it until Deregister and copies into and out of it on behalf of
	// peers; see Region for the rules on touching it meanwhile.
	Buf []byte
	// IOVA is the address a peer uses for Buf[0]. Zero selects a random
	// 4 KiB-aligned address in [2^32, 2^32+2^46), the stand-in for the
	// ASLR-randomised virtual address ibv_reg_mr would use; it gives a
	// peer that guessed an rkey nothing to aim at. Set ZeroBased for a real
	// zero.
	IOVA uint64
	// ZeroBased makes the IOVA zero, as IBV_ACCESS_ZERO_BASED does; IOVA must
	// then be zero too.
	ZeroBased bool
	// Access lists the rights granted. RemoteWrite and RemoteAtomic need
	// LocalWrite as well (ibv_reg_mr(3); ib_check_mr_access in the kernel).
	Access AccessFlags
	// Invalidatable lets LOCAL_INV and a peer's SEND with invalidate
	// invalidate the region (IBA 10.6.6, 9.4.1.1), as they can a
	// fast-registration MR (ib_alloc_mr, IB_MR_TYPE_MEM_REG). Without it
	// the region is like one from ibv_reg_mr, which rxe_invalidate_mr
	// refuses to invalidate. An invalidated region answers every lookup
	// with ErrInvalidated until it is deregistered.
	Invalidatable bool
}

// Table is the memory-region table of one device: it issues keys and maps
// them to regions. Lookups are one map access under a read lock and do not
// allocate.
//
// Keys are 32 bits from crypto/rand, never 0, never equal to a live key, and
// never reissued within ReuseWindow registrations after being freed (a FIFO
// quarantine, doc/rxe.md §8 and matrix D6, doc/matrix.md §3). rxe instead builds keys as
// pool index<<8 | one random byte, leaving about 8 bits to guess.
//
// A region's lkey and rkey are the same value, as in rxe. The lkey never
// leaves the host, so separating them would add no entropy against a remote
// guesser, and it saves a second map entry. A region without any Remote*
// right is refused by LookupRemote whatever key is presented. Callers should
// still use LKey and RKey as appropriate so that this can change.
//
// A Table is safe for concurrent use.
type Table struct {
	max int

	mu    sync.RWMutex
	keys  map[Key]*Region // live key → region; quarantined key → nil
	wins  map[Key]*Window // window index (rkey>>8) → window, window.go
	live  int
	seq   uint64   // registrations made so far
	freed keyQueue // quarantined keys, oldest first
	src   keySource
}

// NewTable returns an empty table.
func NewTable(cfg TableConfig) (*Table, error) {
	if cfg.MaxRegions < 0 {
		return nil, fmt.Errorf("%w: MaxRegions %d < 0", ErrInvalidArg, cfg.MaxRegions)
	}
	t := &Table{
		max:  cfg.MaxRegions,
		keys: make(map[Key]*Region),
		wins: make(map[Key]*Window),
	}
	if t.max == 0 {
		t.max = DefaultMaxRegions
	}
	t.src.r = cfg.Rand
	if t.src.r == nil {
		t.src.r = rand.Reader
	}
	t.src.off = len(t.src.buf)
	return t, nil
}

// AllocPD returns a protection domain bound to t: registering it in another
// Table fails with ErrWrongPD.
func (t *Table) AllocPD() *PD { return &PD{table: t} }

// Len returns the number of registered regions.
func (t *Table) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.live
}

// Register registers cfg.Buf as a region of pd, like ibv_reg_mr, and returns
// it with fresh keys.
func (t *Table) Register(pd *PD, cfg RegisterConfig) (*Region, error) {
	if pd == nil {
		return nil, fmt.Errorf("%w: nil PD", ErrInvalidArg)
	}
	if pd.table != nil && pd.table != t {
		return nil, ErrWrongPD
	}
	if cfg.Access&^validAccess != 0 {
		return nil, fmt.Errorf("%w: unknown access bits in %v", ErrInvalidArg, cfg.Access)
	}
	if cfg.Access&(RemoteWrite|RemoteAtomic) != 0 && cfg.Access&LocalWrite == 0 {
		return nil, fmt.Errorf("%w: access %v: RemoteWrite and RemoteAtomic need LocalWrite",
			ErrInvalidArg, cfg.Access)
	}
	size := uint64(len(cfg.Buf))
	if size == 0 {
		return nil, fmt.Errorf("%w: empty buffer", ErrInvalidArg)
	}
	if cfg.ZeroBased && cfg.IOVA != 0 {
		return nil, fmt.Errorf("%w: ZeroBased with IOVA %#x", ErrInvalidArg, cfg.IOVA)
	}
	// The region may end exactly at 2^64 but not wrap past it.
	if cfg.IOVA > ^uint64(0)-(size-1) {
		return nil, fmt.Errorf("%w: IOVA %#x + length %d wraps", ErrInvalidArg, cfg.IOVA, size)
	}
	if err := pd.hold(); err != nil {
		return nil, err
	}
	r := &Region{
		buf:    cfg.Buf,
		iova:   cfg.IOVA,
		size:   size,
		access: cfg.Access,
		pd:     pd,
		table:  t,

		zeroBased:     cfg.ZeroBased,
		invalidatable: cfg.Invalidatable,
	}
	r.unpinned.L = &r.mu
	r.valid.Store(true)

	t.mu.Lock()
	err := t.insertLocked(r, cfg.IOVA == 0 && !cfg.ZeroBased)
	t.mu.Unlock()
	if err != nil {
		pd.release()
		return nil, err
	}
	return r, nil
}

// insertLocked gives r its key (and IOVA if randomIOVA) and publishes it.
func (t *Table) insertLocked(r *Region, randomIOVA bool) error {
	if t.live+len(t.wins) >= t.max {
		return ErrTableFull
	}
	t.seq++
	// Release keys whose quarantine has lasted ReuseWindow registrations.
	for t.freed.len() > 0 {
		f := t.freed.front()
		if t.seq-f.seq <= ReuseWindow {
			break
		}
		t.freed.pop()
		delete(t.keys, f.key)
	}
	key, err := t.drawKeyLocked()
	if err != nil {
		return err
	}
	if randomIOVA {
		hi, err := t.src.next()
		if err != nil {
			return err
		}
		lo, err := t.src.next()
		if err != nil {
			return err
		}
		const span = 1 << 46
		r.iova = (1<<32 + (uint64(hi)<<32|uint64(lo))%span) &^ 0xfff
	}
	r.key = key
	t.keys[key] = r
	t.live++
	return nil
}

func (t *Table) drawKeyLocked() (Key, error) {
	for range maxKeyDraws {
		k, err := t.src.next()
		if err != nil {
			return 0, fmt.Errorf("mr: reading key: %w", err)
		}
		if k == 0 {
			continue
		}
		if _, used := t.keys[k]; used { // live or quarantined
			continue
		}
		if _, win := t.wins[k>>8]; win { // a window's key space
			continue
		}
		return k, nil
	}
	return 0, fmt.Errorf("%w: no unused key in %d draws", ErrTableFull, maxKeyDraws)
}

// Deregister removes r, like ibv_dereg_mr. First it makes r unusable: it
// waits for the ReadAt, WriteAt and atomics already running on r (each holds
// r for one copy) and from then on
//   - every Lookup of r's key fails with ErrDeregistered (or, after
//     ReuseWindow registrations, ErrInvalidKey);
//   - every access through r (ReadAt, WriteAt, the atomics, Acquire,
//     Recheck) fails with ErrDeregistered.
//
// Then it waits for the pins taken before that point to be released, and
// drops the table's reference to the buffer, which is the caller's again when
// Deregister returns. Pins last one packet, so the wait is short, and since
// no new pin can be taken it cannot be starved. Never call Deregister while
// holding a pin on r: it would wait for itself.
//
// Deregister returns ErrDeregistered, after the same waiting, if r was
// already deregistered, ErrInvalidArg if r is not from t, and ErrBusy,
// changing nothing, while memory windows are bound to r (rxe_dereg_mr
// refuses it so; unbind or invalidate them first).
func (t *Table) Deregister(r *Region) error {
	if r == nil || r.table != t {
		return ErrInvalidArg
	}
	r.mu.Lock()
	// Bind checks valid and counts windows under t.mu: both are read and
	// changed here under t.mu too, so a Bind and a Deregister of one region
	// never both succeed.
	t.mu.Lock()
	if r.windows.Load() > 0 {
		t.mu.Unlock()
		r.mu.Unlock()
		return ErrBusy
	}
	wasValid := r.valid.Load()
	if wasValid {
		r.valid.Store(false)
		t.keys[r.key] = nil // quarantined: still "used" for drawKeyLocked
		t.freed.push(freedKey{key: r.key, seq: t.seq})
		t.live--
	}
	t.mu.Unlock()
	for r.pins.Load() > 0 {
		r.unpinned.Wait() // releases r.mu while it sleeps
	}
	r.buf = nil
	r.mu.Unlock()
	if !wasValid {
		return ErrDeregistered
	}
	r.pd.release()
	return nil
}

// LookupRemote finds the region a peer's rkey names and checks it the way rxe's
// check_rkey does through lookup_mr and mr_check_range (doc/rxe.md §3
// step 7): the key names a live region, the region belongs to pd (the QP's PD),
// it grants some remote right and every right in need, and [va, va+length) lies
// inside it. It returns the first failure as a bare sentinel: ErrInvalidKey,
// ErrDeregistered, ErrWrongPD, ErrAccessDenied or ErrOutOfRange.
//
// A zero length passes the range check when iova <= va <= iova+len. rxe's
// responder does not look up the rkey of a zero-length READ or WRITE at all
// ("A zero-byte op is not required to set an addr or rkey"); that choice
// belongs to the responder (matrix C9, doc/matrix.md §3), not to the table.
//
// The region may be deregistered right after LookupRemote returns; the
// accessors recheck, so a stale result can fail but never touches freed
// memory. LookupRemote does not allocate.
func (t *Table) LookupRemote(pd *PD, rkey Key, va, length uint64, need AccessFlags) (*Region, error) {
	r, err := t.lookup(pd, rkey, need)
	if err != nil {
		return nil, err
	}
	if r.access&remoteAccess == 0 {
		return nil, ErrAccessDenied
	}
	if err := r.CheckRange(va, length); err != nil {
		return nil, err
	}
	return r, nil
}

// LookupLocal finds the region a local scatter/gather entry's lkey names and
// checks it as LookupRemote does, except that the region need not grant any
// remote right; need is typically 0 for data to send and LocalWrite for
// receive buffers. It does not allocate.
func (t *Table) LookupLocal(pd *PD, lkey Key, addr, length uint64, need AccessFlags) (*Region, error) {
	r, err := t.lookup(pd, lkey, need)
	if err != nil {
		return nil, err
	}
	if err := r.CheckRange(addr, length); err != nil {
		return nil, err
	}
	return r, nil
}

func (t *Table) lookup(pd *PD, key Key, need AccessFlags) (*Region, error) {
	t.mu.RLock()
	r, ok := t.keys[key]
	t.mu.RUnlock()
	switch {
	case r != nil:
	case ok:
		return nil, ErrDeregistered
	default:
		return nil, ErrInvalidKey
	}
	if r.pd != pd {
		return nil, ErrWrongPD
	}
	if r.invalidated.Load() {
		return nil, ErrInvalidated
	}
	if !r.access.Has(need) {
		return nil, ErrAccessDenied
	}
	return r, nil
}

// keySource hands out 32-bit values from a random reader, 64 at a time.
type keySource struct {
	r   io.Reader
	buf [256]byte
	off int
}

func (s *keySource) next() (Key, error) {
	if s.off+4 > len(s.buf) {
		if _, err := io.ReadFull(s.r, s.buf[:]); err != nil {
			return 0, err
		}
		s.off = 0
	}
	b := s.buf[s.off : s.off+4]
	k := Key(binary.LittleEndian.Uint32(b))
	clear(b) // issued key material does not linger in the buffer
	s.off += 4
	return k, nil
}

// freedKey is a quarantined key and the registration count when it was
// freed.
type freedKey struct {
	key Key
	seq uint64
}

// keyQueue is a growable FIFO ring of freed keys. Its length is bounded by
// the number of keys freed during the last ReuseWindow registrations, hence
// by ReuseWindow plus the largest number of regions ever live.
type keyQueue struct {
	buf  []freedKey
	head int
	n    int
}

func (q *keyQueue) len() int        { return q.n }
func (q *keyQueue) front() freedKey { return q.buf[q.head] }

func (q *keyQueue) pop() {
	q.head++
	if q.head == len(q.buf) {
		q.head = 0
	}
	q.n--
}

func (q *keyQueue) push(f freedKey) {
	if q.n == len(q.buf) {
		nb := make([]freedKey, max(64, 2*len(q.buf)))
		k := copy(nb, q.buf[q.head:])
		copy(nb[k:], q.buf[:q.head])
		q.buf, q.head = nb, 0
	}
	i := q.head + q.n
	if i >= len(q.buf) {
		i -= len(q.buf)
	}
	q.buf[i] = f
	q.n++
}
