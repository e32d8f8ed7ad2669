package mr

import (
	"encoding/binary"
	"math"
	"sync"
	"sync/atomic"
)

// Region is a registered memory region (MR): a caller's buffer seen by peers
// at [IOVA, IOVA+Len), with access rights, keys and a PD. Regions come from
// Table.Register and are found again with Table.LookupRemote and
// Table.LookupLocal.
//
// All methods are safe for concurrent use. The identity fields (keys, IOVA,
// length, access, PD) never change. Memory is touched only through ReadAt,
// WriteAt, the atomics and pinned Slices, and never after Deregister returns:
// the copy methods hold the region's lock for the length of one copy
// (ReadAt shared; WriteAt and the atomics exclusive, so the race detector
// stays quiet when several QPs target one region) and Deregister takes it
// exclusively.
//
// As with any RDMA buffer, the application must not touch the registered
// memory while peers may be accessing it; IBA orders nothing between the CPU
// and remote accesses.
type Region struct {
	// Immutable after Register.
	iova   uint64
	size   uint64
	access AccessFlags
	key    Key
	pd     *PD
	table  *Table
	// zeroBased: windows cannot be bound to it (rxe_check_bind_mw).
	zeroBased bool
	// invalidatable: LOCAL_INV and SEND with invalidate may invalidate it.
	invalidatable bool

	invalidated atomic.Bool  // set once by Table.Invalidate
	windows     atomic.Int32 // windows bound to the region (rxe num_mw)

	mu       sync.RWMutex
	unpinned sync.Cond    // on &mu; Release signals Deregister
	valid    atomic.Bool  // stored only under mu.Lock
	buf      []byte       // guarded by mu; nil once Deregister returns
	pins     atomic.Int32 // outstanding Acquire calls
}

// SGE is a scatter/gather element: Length bytes at Addr within the memory
// region whose local key is LKey (ibv_sge). Work requests list them; build
// one with Region.SGE. It lives here, beside the keys it quotes, so that a
// Region can make one; package qp and roce name it too.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   Key
}

// SGE returns the scatter/gather element for the n bytes at offset off of
// the region: {Addr: IOVA()+off, Length: n, LKey: LKey()}. The range is
// checked as for any SGE when the work request runs; one that does not lie
// inside the region (off or n negative, off+n past Len, n above 2^32-1)
// gets the zero LKey, which names no region, so the work request fails its
// local protection check (cq.StatusLocProtErr) instead of touching other
// bytes.
func (r *Region) SGE(off, n int) SGE {
	if off < 0 || n < 0 || uint64(n) > math.MaxUint32 || uint64(off) > r.size || uint64(n) > r.size-uint64(off) {
		return SGE{Addr: r.iova + uint64(off), Length: uint32(n)}
	}
	return SGE{Addr: r.iova + uint64(off), Length: uint32(n), LKey: r.key}
}

// LKey returns the key local work requests use to name the region.
func (r *Region) LKey() Key { return r.key }

// RKey returns the key peers use to name the region.
func (r *Region) RKey() Key { return r.key }

// IOVA returns the address peers use for the region's first byte.
func (r *Region) IOVA() uint64 { return r.iova }

// Len returns the region's length in bytes.
func (r *Region) Len() uint64 { return r.size }

// Access returns the region's access rights.
func (r *Region) Access() AccessFlags { return r.access }

// PD returns the region's protection domain.
func (r *Region) PD() *PD { return r.pd }

// Valid reports whether the region is still registered. The answer can be
// stale as soon as it is returned; the accessors check again atomically.
func (r *Region) Valid() bool { return r.valid.Load() }

// Usable reports whether a lookup of key by protection domain pd for an
// access that needs need would find r now (Table.LookupLocal's and
// LookupRemote's checks but the range): r is registered under key, in
// pd, not invalidated, and grants need. A key names one live region at a
// time and a region's key never changes, so a caller that found r by key
// before may check it again with Usable instead of looking the key up
// (a QP's last region, qp's localRegion); like a lookup's result, the
// answer can be stale as soon as it is returned.
func (r *Region) Usable(pd *PD, key Key, need AccessFlags) bool {
	return key == r.key && r.valid.Load() && r.pd == pd && !r.invalidated.Load() && r.access.Has(need)
}

// Recheck reports whether rkey still names this live region, as rxe's
// rxe_recheck_mr does before a duplicate READ is replayed (doc/rxe.md
// §4): ErrDeregistered if the region is gone, ErrInvalidKey if rkey is not
// its key. Because keys are not reissued within ReuseWindow registrations, a
// replay that passes cannot reach a different buffer. The memory read itself
// (ReadAt, or Slice under a pin) checks validity again, so a Deregister that
// slips in after Recheck makes the read fail rather than touch freed memory.
func (r *Region) Recheck(rkey Key) error {
	if !r.valid.Load() {
		return ErrDeregistered
	}
	if rkey != r.key {
		return ErrInvalidKey
	}
	return nil
}

// CheckRange reports whether [va, va+length) lies inside the region,
// returning nil or ErrOutOfRange. The test never computes va+length:
//
//	va < iova || length > size || va-iova > size-length
//
// which is rxe's fixed mr_check_range (CVE-2016-8636 and its 2026
// regression). A zero length is in range for iova <= va <= iova+size.
func (r *Region) CheckRange(va, length uint64) error {
	if va < r.iova || length > r.size || va-r.iova > r.size-length {
		return ErrOutOfRange
	}
	return nil
}

// ReadAt copies len(p) bytes at address va out of the region into p. It
// returns ErrDeregistered or ErrOutOfRange and then copies nothing. Access
// rights are not checked here: they belong to the lookup that produced r.
// (ReadAt is not io.ReaderAt: va is an IOVA, not an offset.)
func (r *Region) ReadAt(p []byte, va uint64) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !r.valid.Load() {
		return ErrDeregistered
	}
	if err := r.CheckRange(va, uint64(len(p))); err != nil {
		return err
	}
	copy(p, r.buf[va-r.iova:])
	return nil
}

// WriteAt copies p into the region at address va. It returns
// ErrDeregistered or ErrOutOfRange and then copies nothing. Access rights are
// not checked here.
func (r *Region) WriteAt(p []byte, va uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.valid.Load() {
		return ErrDeregistered
	}
	if err := r.CheckRange(va, uint64(len(p))); err != nil {
		return err
	}
	copy(r.buf[va-r.iova:], p)
	return nil
}

// CompareAndSwap performs an RDMA CMP_SWAP on the 8-byte word at va: if it
// equals cmp it is replaced by swap. It returns the word's original value.
//
// The word is read and written little-endian. RDMA atomics act on host
// memory in the host's byte order (rxe does *(u64 *)vaddr); the wire carries
// operands and results big-endian in the AtomicETH and AtomicAckETH, and the
// codecs convert them. Fixing little-endian, the order of x86-64 and arm64,
// keeps the bytes a peer READs back identical to what a C program on such a
// host would store, and the package portable.
//
// Atomics on one region are serialised by its lock, which gives
// IBV_ATOMIC_HCA semantics: atomic with respect to every other atomic through
// this device, not with respect to the CPU. It returns ErrMisaligned if va is
// not a multiple of 8 (IBA requires natural alignment; matrix C7, doc/matrix.md §3),
// ErrDeregistered or ErrOutOfRange.
func (r *Region) CompareAndSwap(va, cmp, swap uint64) (orig uint64, err error) {
	if va%8 != 0 {
		return 0, ErrMisaligned
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	w, err := r.wordLocked(va)
	if err != nil {
		return 0, err
	}
	orig = binary.LittleEndian.Uint64(w)
	if orig == cmp {
		binary.LittleEndian.PutUint64(w, swap)
	}
	return orig, nil
}

// FetchAndAdd performs an RDMA FETCH_ADD on the 8-byte word at va, adding add
// modulo 2^64, and returns the word's original value. Byte order, atomicity
// and errors are as for CompareAndSwap.
func (r *Region) FetchAndAdd(va, add uint64) (orig uint64, err error) {
	if va%8 != 0 {
		return 0, ErrMisaligned
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	w, err := r.wordLocked(va)
	if err != nil {
		return 0, err
	}
	orig = binary.LittleEndian.Uint64(w)
	binary.LittleEndian.PutUint64(w, orig+add)
	return orig, nil
}

func (r *Region) wordLocked(va uint64) ([]byte, error) {
	if !r.valid.Load() {
		return nil, ErrDeregistered
	}
	if err := r.CheckRange(va, 8); err != nil {
		return nil, err
	}
	off := va - r.iova
	return r.buf[off : off+8 : off+8], nil
}

// Acquire pins the region: until the matching Release, slices from Slice
// stay backed by registered memory, and Deregister, though it invalidates the
// region at once, does not return. It returns ErrDeregistered if the region
// is gone or going. A pin is a counter, so any goroutine may pin and pins
// nest. Hold one for the span of one packet (build, send or scatter), never
// across a wait, and never call Deregister while holding one.
func (r *Region) Acquire() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !r.valid.Load() {
		return ErrDeregistered
	}
	r.pins.Add(1)
	return nil
}

// Pin is Acquire and Slice in one step, for a packet sent from the region
// without copying (link.Datagram's two-part form): it pins the region and
// returns its memory at [va, va+length); the sender reads it while it
// sends the packet, then calls Release. It refuses an invalidated region
// as well as a deregistered one, so that a packet built after LOCAL_INV or
// a SEND with invalidate (IBA 10.6.6) cannot read it, and a retransmission
// that pins again rereads the region with the same checks. It returns
// ErrDeregistered, ErrInvalidated or ErrOutOfRange and then pins nothing.
// The slice's capacity is capped at length. It does not allocate.
func (r *Region) Pin(va, length uint64) ([]byte, error) {
	if err := r.CheckRange(va, length); err != nil {
		return nil, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !r.valid.Load() {
		return nil, ErrDeregistered
	}
	if r.invalidated.Load() {
		return nil, ErrInvalidated
	}
	r.pins.Add(1)
	off := va - r.iova
	return r.buf[off : off+length : off+length], nil
}

// ReadLock holds off WriteAt and the atomics (but not Deregister's wait for
// pins) while a zero-copy reader reads slices of the region it pinned: the
// device's sender holds it from computing a packet's ICRC over the slice
// until the link has sent it, so the bytes sent are the bytes the ICRC
// covers, as with a copy made under the lock (ReadAt). A goroutine must
// not take it twice on one region (sync.RWMutex) and must take several
// regions' locks only where no other goroutine does the same.
func (r *Region) ReadLock() { r.mu.RLock() }

// ReadUnlock releases ReadLock.
func (r *Region) ReadUnlock() { r.mu.RUnlock() }

// Release drops a pin taken by Acquire or Pin. Releasing more than was acquired is
// a programmer error and panics.
func (r *Region) Release() {
	n := r.pins.Add(-1)
	if n < 0 {
		panic("mr: Region.Release without Acquire")
	}
	if n == 0 && !r.valid.Load() {
		// A Deregister may be waiting. Either it stored valid=false before
		// this load, and is waiting or about to see pins == 0, or this
		// branch is not taken and it sees pins == 0 itself.
		r.mu.Lock()
		r.unpinned.Broadcast()
		r.mu.Unlock()
	}
}

// Slice returns the region's memory at [va, va+length) without copying, for
// the engine's zero-copy paths. The caller must hold a pin (Slice returns
// ErrNotPinned if nobody does) and may use the slice only until it releases
// that pin; after Release the memory may be deregistered and handed back to
// the application at any time. A pin holder's Slice keeps working while a
// Deregister waits for it. Writes through the slice are not serialised with
// WriteAt or the atomics. The slice's capacity is capped at length. It returns
// ErrOutOfRange if the range does not fit and does not allocate.
func (r *Region) Slice(va, length uint64) ([]byte, error) {
	if r.pins.Load() <= 0 {
		return nil, ErrNotPinned
	}
	if err := r.CheckRange(va, length); err != nil {
		return nil, err
	}
	r.mu.RLock()
	b := r.buf
	r.mu.RUnlock()
	if b == nil { // only if the pin counted above was someone else's and ended
		return nil, ErrDeregistered
	}
	off := va - r.iova
	return b[off : off+length : off+length], nil
}
