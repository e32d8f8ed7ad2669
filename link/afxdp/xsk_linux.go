//go:build linux

package afxdp

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring is one of the four single-producer / single-consumer rings an XDP
// socket shares with the kernel. The producer and consumer indices live in
// the mapped memory and are only ever accessed with sync/atomic: the
// producer writes descriptors, then stores the producer index; the consumer
// loads the producer index, reads the descriptors, then stores the
// consumer index (the kernel pairs these with smp_load_acquire /
// smp_store_release, libxdp's xsk.h with the same). Go's atomics are
// sequentially consistent, which is at least that strong on every
// architecture. The cached copies avoid touching the shared cache line for
// every descriptor. A ring is used by one goroutine on our side.
type ring struct {
	mem      []byte
	producer *uint32
	consumer *uint32
	flags    *uint32
	desc     unsafe.Pointer
	mask     uint32
	size     uint32

	cachedProd uint32
	cachedCons uint32
}

func mapRing(fd int, off unix.XDPRingOffset, pgoff int64, entries uint32, descSize uintptr) (ring, error) {
	n := int(off.Desc) + int(entries)*int(descSize)
	mem, err := unix.Mmap(fd, pgoff, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return ring{}, fmt.Errorf("afxdp: mmap ring: %w", err)
	}
	r := ring{
		mem:      mem,
		producer: (*uint32)(unsafe.Pointer(&mem[off.Producer])),
		consumer: (*uint32)(unsafe.Pointer(&mem[off.Consumer])),
		flags:    (*uint32)(unsafe.Pointer(&mem[off.Flags])),
		desc:     unsafe.Pointer(&mem[off.Desc]),
		mask:     entries - 1,
		size:     entries,
	}
	r.cachedProd = atomic.LoadUint32(r.producer)
	r.cachedCons = atomic.LoadUint32(r.consumer)
	return r, nil
}

func (r *ring) unmap() {
	if r.mem != nil {
		unix.Munmap(r.mem)
		r.mem = nil
	}
}

// needWakeup reports the kernel's XDP_RING_NEED_WAKEUP flag.
func (r *ring) needWakeup() bool {
	return atomic.LoadUint32(r.flags)&unix.XDP_RING_NEED_WAKEUP != 0
}

// Producer side (fill and TX rings; the kernel consumes).

// free returns how many entries the producer may write (at least want if
// possible: it refreshes the cached consumer index only when needed).
func (r *ring) free(want uint32) uint32 {
	f := r.size - (r.cachedProd - r.cachedCons)
	if f >= want {
		return f
	}
	r.cachedCons = atomic.LoadUint32(r.consumer)
	return r.size - (r.cachedProd - r.cachedCons)
}

// submit publishes the entries written since the last submit.
func (r *ring) submit() { atomic.StoreUint32(r.producer, r.cachedProd) }

// Consumer side (RX and completion rings; the kernel produces).

// avail returns how many entries wait to be consumed.
func (r *ring) avail() uint32 {
	n := r.cachedProd - r.cachedCons
	if n == 0 {
		r.cachedProd = atomic.LoadUint32(r.producer)
		n = r.cachedProd - r.cachedCons
	}
	return n
}

// release hands consumed entries back.
func (r *ring) release() { atomic.StoreUint32(r.consumer, r.cachedCons) }

// pending reports whether the kernel has entries it has not consumed yet
// (producer side).
func (r *ring) pending() bool { return atomic.LoadUint32(r.consumer) != r.cachedProd }

// addr returns the u64 slot i of a fill or completion ring.
func (r *ring) addr(i uint32) *uint64 {
	return (*uint64)(unsafe.Add(r.desc, uintptr(i&r.mask)*8))
}

// xdesc returns the descriptor slot i of an RX or TX ring.
func (r *ring) xdesc(i uint32) *unix.XDPDesc {
	return (*unix.XDPDesc)(unsafe.Add(r.desc, uintptr(i&r.mask)*unsafe.Sizeof(unix.XDPDesc{})))
}

// setsockoptPtr is setsockopt(2) with a pointer argument, for the structs
// golang.org/x/sys/unix has no setter for.
func setsockoptPtr(fd, level, opt int, p unsafe.Pointer, n uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), n, 0)
	if e != 0 {
		return e
	}
	return nil
}

func getsockoptPtr(fd, level, opt int, p unsafe.Pointer, n uintptr) error {
	l := uint32(n)
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return e
	}
	return nil
}
