//go:build linux

package ebpf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNotSupported matches the errors of bpf(2) calls that fail for want of
// privileges (CAP_BPF with CAP_NET_ADMIN, or root) or of kernel support.
var ErrNotSupported = errors.New("ebpf: not supported here")

// SysError is a failed bpf(2) command.
type SysError struct {
	Op  string // what was asked, e.g. "create map gf_demo"
	Err error  // the errno
}

var (
	_ error = (*SysError)(nil)
	_ error = (*VerifierError)(nil)
)

// Error says which command failed and why.
func (e *SysError) Error() string { return "ebpf: " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the errno.
func (e *SysError) Unwrap() error { return e.Err }

// Is matches ErrNotSupported for missing privileges (EPERM) and a kernel
// without the bpf system call (ENOSYS).
func (e *SysError) Is(target error) bool {
	return target == ErrNotSupported && (errors.Is(e.Err, unix.EPERM) || errors.Is(e.Err, unix.ENOSYS))
}

// VerifierError is a program the kernel's verifier refused, with its log.
type VerifierError struct {
	Err error  // the errno (EACCES or EINVAL)
	Log string // the verifier's log at level 1
}

// Error gives the errno and the verifier's log.
func (e *VerifierError) Error() string {
	return fmt.Sprintf("ebpf: the verifier refused the program: %v\nverifier log:\n%s", e.Err, e.Log)
}

// Unwrap returns the errno.
func (e *VerifierError) Unwrap() error { return e.Err }

// attr is a union bpf_attr buffer; each command's fields are written at
// their offsets (linux/bpf.h). 160 bytes cover every command used here.
type attr [20]uint64

func (a *attr) bytes() *[160]byte { return (*[160]byte)(unsafe.Pointer(a)) }

func (a *attr) u32(off int, v uint32) { binary.NativeEndian.PutUint32(a.bytes()[off:], v) }

func (a *attr) u64(off int, v uint64) { binary.NativeEndian.PutUint64(a.bytes()[off:], v) }

func (a *attr) get32(off int) uint32 { return binary.NativeEndian.Uint32(a.bytes()[off:]) }

// heapBytes is memory on the heap, made by heapBuf or heapCopy: the only
// memory whose address a bpf_attr may carry (ptr). The address is kept as
// an integer, and a variable on a goroutine's stack can move when the
// stack grows (in sys's prologue, before the kernel reads it), which the
// runtime corrects for pointers, not integers; heap objects do not move.
// The type makes passing a stack variable (a key, a caller's array) a
// compile error instead of a rare wrong read.
type heapBytes []byte

// ptr writes the address of b's first byte.
func (a *attr) ptr(off int, b heapBytes) { a.u64(off, uint64(uintptr(unsafe.Pointer(&b[0])))) }

// heapBuf returns n zero bytes on the heap; not inlined, so that the
// compiler cannot give the caller a stack array instead.
//
//go:noinline
func heapBuf(n int) heapBytes { return make(heapBytes, n) }

// heapCopy returns a copy of b on the heap.
func heapCopy(b []byte) heapBytes {
	h := heapBuf(len(b))
	copy(h, b)
	return h
}

// name writes an object name of at most 15 bytes (BPF_OBJ_NAME_LEN).
func (a *attr) name(off int, s string) {
	copy(a.bytes()[off:off+15], s)
}

func sys(cmd int, a *attr) (int, error) {
	r, _, e := unix.Syscall(unix.SYS_BPF, uintptr(cmd), uintptr(unsafe.Pointer(a)), unsafe.Sizeof(*a))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// validName reports whether s is a valid object name: at most 15 bytes of
// letters, digits, '_' and '.' (the kernel's bpf_obj_name_cpy).
func validName(s string) bool {
	if len(s) > 15 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// Map is a BPF map owned through a file descriptor.
type Map struct {
	fd        int
	valueSize int
}

// MapType is a map type (linux/bpf.h enum bpf_map_type).
type MapType uint32

// The map types goroce creates.
const (
	// ArrayMap is a BPF_MAP_TYPE_ARRAY: values indexed by a uint32, all
	// zero at first.
	ArrayMap MapType = unix.BPF_MAP_TYPE_ARRAY
	// XSKMap is a BPF_MAP_TYPE_XSKMAP: AF_XDP sockets (their file
	// descriptors, as uint32 values) by receive queue index, for
	// bpf_redirect_map (HelperRedirectMap).
	XSKMap MapType = unix.BPF_MAP_TYPE_XSKMAP
)

// CreateArrayMap creates an ArrayMap of entries values of valueSize bytes
// each, keyed by a uint32 index, all zero at first. The name (at most 15
// letters, digits, '_' or '.') shows in bpftool and in MapInfo.
func CreateArrayMap(name string, valueSize, entries int) (*Map, error) {
	return CreateMap(ArrayMap, name, valueSize, entries)
}

// CreateMap creates a map of type typ, keyed by a uint32, with entries
// values of valueSize bytes (4 for an XSKMap). The name is as for
// CreateArrayMap.
func CreateMap(typ MapType, name string, valueSize, entries int) (*Map, error) {
	if !validName(name) || valueSize <= 0 || entries <= 0 {
		return nil, fmt.Errorf("ebpf: map %q of %d × %d bytes: %w", name, entries, valueSize, unix.EINVAL)
	}
	var a attr
	a.u32(0, uint32(typ))
	a.u32(4, 4)
	a.u32(8, uint32(valueSize))
	a.u32(12, uint32(entries))
	a.name(28, name)
	fd, err := sys(unix.BPF_MAP_CREATE, &a)
	if err != nil {
		return nil, &SysError{Op: "create map " + name, Err: err}
	}
	return &Map{fd: fd, valueSize: valueSize}, nil
}

// MapFromID opens the map with the given ID (BPF_MAP_GET_FD_BY_ID, which
// needs CAP_SYS_ADMIN): another process's map, kept alive by the programs
// that use it.
func MapFromID(id uint32) (*Map, error) {
	var a attr
	a.u32(0, id)
	fd, err := sys(unix.BPF_MAP_GET_FD_BY_ID, &a)
	if err != nil {
		return nil, &SysError{Op: fmt.Sprintf("open map id %d", id), Err: err}
	}
	m := &Map{fd: fd}
	info, err := m.Info()
	if err != nil {
		m.Close()
		return nil, err
	}
	m.valueSize = int(info.ValueSize)
	return m, nil
}

// FD returns the map's file descriptor, valid until Close.
func (m *Map) FD() int { return m.fd }

// Close releases the descriptor; the map lives on while a program uses it.
func (m *Map) Close() error {
	if m.fd < 0 {
		return nil
	}
	err := unix.Close(m.fd)
	m.fd = -1
	return err
}

// MapInfo is what the kernel reports of a map (struct bpf_map_info).
type MapInfo struct {
	Type                           uint32
	ID                             uint32
	KeySize, ValueSize, MaxEntries uint32
	Name                           string
}

// Info returns the map's type, ID, sizes and name.
func (m *Map) Info() (MapInfo, error) {
	info := heapBuf(88)
	var a attr
	a.u32(0, uint32(m.fd))
	a.u32(4, uint32(len(info)))
	a.ptr(8, info)
	_, err := sys(unix.BPF_OBJ_GET_INFO_BY_FD, &a)
	runtime.KeepAlive(info)
	if err != nil {
		return MapInfo{}, &SysError{Op: "map info", Err: err}
	}
	u := func(off int) uint32 { return binary.NativeEndian.Uint32(info[off:]) }
	name, _, _ := bytes.Cut(info[24:40], []byte{0})
	return MapInfo{Type: u(0), ID: u(4), KeySize: u(8), ValueSize: u(12), MaxEntries: u(16), Name: string(name)}, nil
}

// Lookup copies the value at key into value, which must hold the map's
// value size.
func (m *Map) Lookup(key uint32, value []byte) error {
	if len(value) < m.valueSize {
		return fmt.Errorf("ebpf: lookup into %d bytes, the value is %d: %w", len(value), m.valueSize, unix.EINVAL)
	}
	k, v := heapBuf(4), heapBuf(m.valueSize)
	binary.NativeEndian.PutUint32(k, key)
	var a attr
	a.u32(0, uint32(m.fd))
	a.ptr(8, k)
	a.ptr(16, v)
	_, err := sys(unix.BPF_MAP_LOOKUP_ELEM, &a)
	runtime.KeepAlive(k)
	runtime.KeepAlive(v)
	if err != nil {
		return &SysError{Op: fmt.Sprintf("lookup key %d", key), Err: err}
	}
	copy(value, v)
	return nil
}

// Update stores value, of the map's value size, at key.
func (m *Map) Update(key uint32, value []byte) error {
	if len(value) != m.valueSize {
		return fmt.Errorf("ebpf: update with %d bytes, the value is %d: %w", len(value), m.valueSize, unix.EINVAL)
	}
	k, v := heapBuf(4), heapCopy(value)
	binary.NativeEndian.PutUint32(k, key)
	var a attr
	a.u32(0, uint32(m.fd))
	a.ptr(8, k)
	a.ptr(16, v)
	_, err := sys(unix.BPF_MAP_UPDATE_ELEM, &a)
	runtime.KeepAlive(k)
	runtime.KeepAlive(v)
	if err != nil {
		return &SysError{Op: fmt.Sprintf("update key %d", key), Err: err}
	}
	return nil
}

// ProgType is a program type (linux/bpf.h enum bpf_prog_type).
type ProgType uint32

// The program types goroce loads.
const (
	// SchedCLS is a tc classifier (cls_bpf), here run in direct-action
	// mode: its return value is the tc action (TC_ACT_OK = 0 lets the
	// packet pass).
	SchedCLS ProgType = unix.BPF_PROG_TYPE_SCHED_CLS
	// XDP runs on a frame at the driver (or the generic hook) before the
	// kernel allocates an skb; it returns an XDP action (XDPPass, or what
	// bpf_redirect_map returns).
	XDP ProgType = unix.BPF_PROG_TYPE_XDP
)

// XDPPass is the XDP action that hands the frame to the kernel's stack.
const XDPPass = 2

// AttachType is where a program is attached (linux/bpf.h enum
// bpf_attach_type): for a program that must know it at load time
// (ProgramSpec.AttachType) and for Attach.
type AttachType uint32

// The attach types goroce uses.
const (
	AttachXDP       AttachType = unix.BPF_XDP        // an interface's XDP hook
	AttachTCXEgress AttachType = unix.BPF_TCX_EGRESS // an interface's tc egress (tcx, Linux 6.6)
)

// Program is a loaded, verified program owned through a file descriptor.
type Program struct{ fd int }

// ProgramSpec is a program to load.
type ProgramSpec struct {
	Type ProgType
	// Name (at most 15 letters, digits, '_' or '.') shows in tc, ip link
	// and bpftool.
	Name string
	// License decides which helpers the program may call: GPL-only
	// helpers need a GPL-compatible one.
	License string
	Insns   []Insn
	// AttachType is the expected_attach_type, which some program types
	// must name at load time (AttachXDP for an XDP program that uses
	// Flags' BPF_F_XDP_HAS_FRAGS); 0 for none.
	AttachType AttachType
	// Flags are the prog_flags (BPF_F_XDP_HAS_FRAGS: the XDP program
	// accepts multi-buffer frames).
	Flags uint32
}

// LoadProgram loads prog as a program of type typ with the given name and
// license; see Load.
func LoadProgram(typ ProgType, name, license string, prog []Insn) (*Program, error) {
	return Load(ProgramSpec{Type: typ, Name: name, License: license, Insns: prog})
}

// Load loads and verifies a program. If the verifier refuses it, the load
// is repeated with its log and the error is a *VerifierError.
func Load(spec ProgramSpec) (*Program, error) {
	name, prog := spec.Name, spec.Insns
	if !validName(name) || len(prog) == 0 {
		return nil, fmt.Errorf("ebpf: program %q of %d instructions: %w", name, len(prog), unix.EINVAL)
	}
	code := heapCopy(Encode(prog))
	lic := heapCopy(append([]byte(spec.License), 0))
	load := func(log []byte) (int, error) {
		var a attr
		a.u32(0, uint32(spec.Type))
		a.u32(4, uint32(len(prog)))
		a.ptr(8, code)
		a.ptr(16, lic)
		if log != nil {
			a.u32(24, 1)
			a.u32(28, uint32(len(log)))
			a.ptr(32, log)
		}
		a.u32(44, spec.Flags)
		a.name(48, name)
		a.u32(68, uint32(spec.AttachType))
		fd, err := sys(unix.BPF_PROG_LOAD, &a)
		runtime.KeepAlive(code)
		runtime.KeepAlive(lic)
		runtime.KeepAlive(log)
		return fd, err
	}
	fd, err := load(nil)
	if err == nil {
		return &Program{fd: fd}, nil
	}
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EINVAL) {
		log := heapBuf(1 << 20)
		if fd, lerr := load(log); lerr == nil {
			return &Program{fd: fd}, nil // refused once, accepted with a log: take it
		}
		text, _, _ := bytes.Cut(log, []byte{0})
		if len(text) > 0 {
			return nil, &VerifierError{Err: err, Log: string(text)}
		}
	}
	return nil, &SysError{Op: "load program " + name, Err: err}
}

// FD returns the program's file descriptor, valid until Close.
func (p *Program) FD() int { return p.fd }

// Close releases the descriptor; the program lives on while something
// (a tc filter) holds it.
func (p *Program) Close() error {
	if p.fd < 0 {
		return nil
	}
	err := unix.Close(p.fd)
	p.fd = -1
	return err
}

// Link is a program attached through a BPF link (BPF_LINK_CREATE, Linux
// 5.9), owned through a file descriptor: closing it detaches the program,
// as does the process's exit, so the attachment never outlives its owner.
type Link struct{ fd int }

// Attach attaches the program to the interface with index ifindex at at,
// with the attach flags (for AttachXDP, XDP_FLAGS_SKB_MODE or
// XDP_FLAGS_DRV_MODE).
func (p *Program) Attach(ifindex int, at AttachType, flags uint32) (*Link, error) {
	var a attr
	a.u32(0, uint32(p.fd))
	a.u32(4, uint32(ifindex))
	a.u32(8, uint32(at))
	a.u32(12, flags)
	fd, err := sys(unix.BPF_LINK_CREATE, &a)
	if err != nil {
		return nil, &SysError{Op: fmt.Sprintf("attach to ifindex %d", ifindex), Err: err}
	}
	return &Link{fd: fd}, nil
}

// FD returns the link's file descriptor, valid until Close.
func (l *Link) FD() int { return l.fd }

// Close detaches the program.
func (l *Link) Close() error {
	if l.fd < 0 {
		return nil
	}
	err := unix.Close(l.fd)
	l.fd = -1
	return err
}

// TestRun runs the program once on a copy of packet (an Ethernet frame)
// in the kernel (BPF_PROG_TEST_RUN) and returns its return value and the
// packet as the program left it.
func (p *Program) TestRun(packet []byte) (uint32, []byte, error) {
	if len(packet) == 0 {
		return 0, nil, fmt.Errorf("ebpf: test run on an empty packet: %w", unix.EINVAL)
	}
	in, out := heapCopy(packet), heapBuf(len(packet)+256)
	var a attr
	a.u32(0, uint32(p.fd))
	a.u32(8, uint32(len(packet)))
	a.u32(12, uint32(len(out)))
	a.ptr(16, in)
	a.ptr(24, out)
	a.u32(32, 1)
	_, err := sys(unix.BPF_PROG_TEST_RUN, &a)
	runtime.KeepAlive(in)
	runtime.KeepAlive(out)
	if err != nil {
		return 0, nil, &SysError{Op: "test run", Err: err}
	}
	return a.get32(4), out[:min(int(a.get32(12)), len(out))], nil
}
