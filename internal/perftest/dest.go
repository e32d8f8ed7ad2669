package perftest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
)

// Port is the default TCP port (-p) of the out-of-band exchange of
// perftest's tools and of libibverbs' ibv_rc_pingpong, which share it;
// goroce's perf and pingpong commands use this one constant.
const Port = 18515

// DestSize is the size of a key message on RoCE: 107 characters and the
// NUL ("%04x:%04x:%06x:%06x:%08x:%016llx:" + 16 × "%02x:" + "%08x:").
const DestSize = 108

// ErrGarbled is wrapped by the errors for messages that do not parse.
var ErrGarbled = errors.New("perftest: garbled message")

// Dest is perftest's struct pingpong_dest as its key message carries it
// over TCP: what the peer needs to connect one QP and reach its buffer.
type Dest struct {
	LID uint16
	// OutReads is the number of outstanding RDMA READs / atomics this side
	// accepts as responder: 1 for write and send tests, the device's
	// max_qp_rd_atom (128 on rxe) for read and atomic tests. The peer uses it
	// as its max_rd_atomic.
	OutReads uint16
	QPN      uint32 // 24 bits
	PSN      uint32 // 24 bits, the first PSN this side sends
	RKey     uint32 // of the buffer the peer may access (0 in send tests)
	VAddr    uint64 // that buffer's address
	GID      [16]byte
	SRQN     uint32 // XRC and DC only; 0
	// GIDIndex is the sender's GID index (-x); only the binary form of
	// the rdma_cm modes carries it, and perftest does not read it.
	GIDIndex uint32
}

// Addr returns the IP address of the GID: the IPv4 address of an
// IPv4-mapped GID (::ffff:a.b.c.d, the RoCEv2 GID rxe lists at index 1),
// the IPv6 address otherwise.
func (d *Dest) Addr() netip.Addr { return netip.AddrFrom16(d.GID).Unmap() }

// GIDFromAddr returns the RoCEv2 GID of an IP address: IPv4 addresses are
// IPv4-mapped.
func GIDFromAddr(a netip.Addr) [16]byte {
	if a.Is4() {
		a = netip.AddrFrom16(a.As16())
	}
	return a.As16()
}

// Marshal returns the key message: DestSize bytes, NUL-terminated. It fails
// if a field does not fit its width (QPN and PSN are 24-bit).
func (d *Dest) Marshal() ([]byte, error) {
	if d.QPN > 0xffffff || d.PSN > 0xffffff {
		return nil, fmt.Errorf("perftest: QPN %#x or PSN %#x above 24 bits", d.QPN, d.PSN)
	}
	b := make([]byte, 0, DestSize)
	b = fmt.Appendf(b, "%04x:%04x:%06x:%06x:%08x:%016x:", d.LID, d.OutReads, d.QPN, d.PSN, d.RKey, d.VAddr)
	for _, g := range d.GID {
		b = fmt.Appendf(b, "%02x:", g)
	}
	b = fmt.Appendf(b, "%08x:", d.SRQN)
	b = append(b, 0)
	if len(b) != DestSize {
		return nil, fmt.Errorf("perftest: key message of %d bytes", len(b))
	}
	return b, nil
}

// destWidths are the hex digits of the key message's fields: LID,
// out_reads, QPN, PSN, RKey, VAddr, the 16 GID bytes, SRQN.
var destWidths = [...]int{4, 4, 6, 6, 8, 16, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 8}

// ParseDest parses a key message. It is as strict as the format: exactly
// DestSize bytes, NUL-terminated, 23 colon-terminated lowercase or
// uppercase hex fields of the widths Marshal writes. (perftest's own
// parser, ethernet_read_keys, uses strtol and would accept less; nothing
// that perftest 4.5 sends is refused.)
func ParseDest(b []byte) (Dest, error) {
	var d Dest
	if len(b) != DestSize {
		return d, fmt.Errorf("%w: key message of %d bytes, want %d", ErrGarbled, len(b), DestSize)
	}
	if b[DestSize-1] != 0 {
		return d, fmt.Errorf("%w: key message not NUL-terminated: %q", ErrGarbled, b)
	}
	s := b[:DestSize-1]
	vals := make([]uint64, len(destWidths))
	off := 0
	for i, w := range destWidths {
		if off+w+1 > len(s) || s[off+w] != ':' {
			return d, fmt.Errorf("%w: key message field %d at offset %d: %q", ErrGarbled, i, off, b)
		}
		v, err := strconv.ParseUint(string(s[off:off+w]), 16, 64)
		if err != nil {
			return d, fmt.Errorf("%w: key message field %d %q: not hex", ErrGarbled, i, s[off:off+w])
		}
		vals[i] = v
		off += w + 1
	}
	if off != len(s) {
		return d, fmt.Errorf("%w: key message has %d trailing bytes", ErrGarbled, len(s)-off)
	}
	d.LID, d.OutReads = uint16(vals[0]), uint16(vals[1])
	d.QPN, d.PSN, d.RKey, d.VAddr = uint32(vals[2]), uint32(vals[3]), uint32(vals[4]), vals[5]
	for i := range 16 {
		d.GID[i] = byte(vals[6+i])
	}
	d.SRQN = uint32(vals[22])
	return d, nil
}

// String formats d like perftest's "remote address" lines.
func (d Dest) String() string {
	return fmt.Sprintf("LID %04x QPN %#06x PSN %#06x RKey %#08x VAddr %#016x GID %v",
		d.LID, d.QPN, d.PSN, d.RKey, d.VAddr, netip.AddrFrom16(d.GID))
}

// DestBinarySize is the size of the binary key message of perftest's
// rdma_cm modes (-R, -z): struct pingpong_dest as laid out on 64-bit
// Linux, which rdma_write_keys SENDs (doc/oob.md §3.6).
const DestBinarySize = 56

// Offsets in the binary key message: int lid, int out_reads, int qpn, int
// psn, unsigned rkey, 4 bytes of padding, unsigned long long vaddr, the 16
// GID bytes, unsigned srqn, int gid_index; the integers big-endian
// (rdma_write_keys converts each with htobe32/htobe64).
const (
	offBinLID      = 0
	offBinOutReads = 4
	offBinQPN      = 8
	offBinPSN      = 12
	offBinRKey     = 16
	offBinVAddr    = 24
	offBinGID      = 32
	offBinSRQN     = 48
	offBinGIDIndex = 52
)

// MarshalBinary returns the binary key message (DestBinarySize bytes; the
// padding is zero). It fails if a field does not fit its width (QPN and
// PSN are 24-bit).
func (d *Dest) MarshalBinary() ([]byte, error) {
	if d.QPN > 0xffffff || d.PSN > 0xffffff {
		return nil, fmt.Errorf("perftest: QPN %#x or PSN %#x above 24 bits", d.QPN, d.PSN)
	}
	b := make([]byte, DestBinarySize)
	be := binary.BigEndian
	be.PutUint32(b[offBinLID:], uint32(d.LID))
	be.PutUint32(b[offBinOutReads:], uint32(d.OutReads))
	be.PutUint32(b[offBinQPN:], d.QPN)
	be.PutUint32(b[offBinPSN:], d.PSN)
	be.PutUint32(b[offBinRKey:], d.RKey)
	be.PutUint64(b[offBinVAddr:], d.VAddr)
	copy(b[offBinGID:], d.GID[:])
	be.PutUint32(b[offBinSRQN:], d.SRQN)
	be.PutUint32(b[offBinGIDIndex:], d.GIDIndex)
	return b, nil
}

// ParseDestBinary parses a binary key message: exactly DestBinarySize
// bytes. It reads what rdma_read_keys reads (LID, out_reads, QPN, PSN,
// RKey, VAddr, GID) plus SRQN and GIDIndex, and ignores the padding. A
// LID or out_reads above 16 bits, or a QPN or PSN above 24, is garbled.
func ParseDestBinary(b []byte) (Dest, error) {
	var d Dest
	if len(b) != DestBinarySize {
		return d, fmt.Errorf("%w: binary key message of %d bytes, want %d", ErrGarbled, len(b), DestBinarySize)
	}
	be := binary.BigEndian
	lid, out := be.Uint32(b[offBinLID:]), be.Uint32(b[offBinOutReads:])
	d.QPN, d.PSN = be.Uint32(b[offBinQPN:]), be.Uint32(b[offBinPSN:])
	if lid > 0xffff || out > 0xffff || d.QPN > 0xffffff || d.PSN > 0xffffff {
		return Dest{}, fmt.Errorf("%w: binary key message with LID %#x, out_reads %d, QPN %#x, PSN %#x", ErrGarbled, lid, out, d.QPN, d.PSN)
	}
	d.LID, d.OutReads = uint16(lid), uint16(out)
	d.RKey = be.Uint32(b[offBinRKey:])
	d.VAddr = be.Uint64(b[offBinVAddr:])
	copy(d.GID[:], b[offBinGID:offBinGID+16])
	d.SRQN = be.Uint32(b[offBinSRQN:])
	d.GIDIndex = be.Uint32(b[offBinGIDIndex:])
	return d, nil
}
