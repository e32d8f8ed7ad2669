package mr

import "sync"

// PD is a protection domain, as from ibv_alloc_pd. A region is usable
// only through a QP of the same PD: Table.LookupRemote and Table.LookupLocal
// compare the PD the caller passes (the QP's) with the region's and return
// ErrWrongPD when they differ.
//
// A PD is safe for concurrent use.
type PD struct {
	table *Table // nil: usable with any Table

	mu   sync.Mutex
	live int  // registered regions
	dead bool // Dealloc succeeded
}

// NewPD returns a protection domain that can register regions in any Table.
func NewPD() *PD { return &PD{} }

// Dealloc releases the PD, like ibv_dealloc_pd. It returns ErrBusy while
// regions are still registered in it and ErrDeallocated if it was already
// released. After Dealloc, Register refuses the PD.
func (pd *PD) Dealloc() error {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	switch {
	case pd.dead:
		return ErrDeallocated
	case pd.live > 0:
		return ErrBusy
	}
	pd.dead = true
	return nil
}

// Regions returns the number of regions registered in the PD.
func (pd *PD) Regions() int {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	return pd.live
}

// hold counts a new region, failing if the PD is gone.
func (pd *PD) hold() error {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.dead {
		return ErrDeallocated
	}
	pd.live++
	return nil
}

// release uncounts a region.
func (pd *PD) release() {
	pd.mu.Lock()
	pd.live--
	pd.mu.Unlock()
}
