package pcapng

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/goroce/goroce/capture"
)

// Errors of the Writer. Check them with errors.Is.
var (
	// ErrUnknownInterface: a packet or statistics block names an
	// interface that AddInterface did not return.
	ErrUnknownInterface = errors.New("pcapng: unknown interface")
	// ErrLinkType: WriteFrame was given a frame whose link type differs
	// from its interface's.
	ErrLinkType = errors.New("pcapng: frame link type differs from the interface's")
	// ErrTooLong: a block would exceed the format's 32-bit length.
	ErrTooLong = errors.New("pcapng: block too long")
)

// Block types, option codes and constants of the pcapng format
// (draft-ietf-opsawg-pcapng: §4.1 Section Header, §4.2 Interface
// Description, §4.3 Enhanced Packet, §4.6 Interface Statistics), written
// little-endian.
const (
	blockSection   = 0x0A0D0D0A
	blockInterface = 0x00000001
	blockEnhanced  = 0x00000006
	blockStats     = 0x00000005
	byteOrderMagic = 0x1A2B3C4D

	optEnd         = 0
	optSHBHardware = 2  // shb_hardware
	optSHBOS       = 3  // shb_os
	optSHBUserAppl = 4  // shb_userappl
	optIfName      = 2  // if_name
	optIfTsresol   = 9  // if_tsresol
	optIfFilter    = 11 // if_filter
	optIfOS        = 12 // if_os
	optEPBFlags    = 2  // epb_flags
	optISBStart    = 2  // isb_starttime
	optISBEnd      = 3  // isb_endtime
	optISBIfRecv   = 4  // isb_ifrecv
	optISBIfDrop   = 5  // isb_ifdrop

	// tsresol9 is if_tsresol 9: timestamps count nanoseconds.
	tsresol9 = 9

	// packetHeaderLen is the length of an Enhanced Packet Block before
	// the packet's bytes; packetTrailerLen the most it has after them
	// (the padding to 4 bytes aside): epb_flags, the end of options and
	// the block's length repeated.
	packetHeaderLen  = 28
	packetTrailerLen = 16
)

// Section describes the file: the options of its Section Header Block.
// Empty strings are left out.
type Section struct {
	// Hardware is shb_hardware, e.g. runtime.GOARCH.
	Hardware string
	// OS is shb_os, e.g. runtime.GOOS.
	OS string
	// Application is shb_userappl, the program that wrote the file.
	Application string
}

// Interface describes one capture interface: its Interface Description
// Block. Timestamps are always in nanoseconds (if_tsresol 9).
type Interface struct {
	// Name is if_name, e.g. "eth0".
	Name string
	// LinkType is the link type of every frame of the interface.
	LinkType capture.LinkType
	// SnapLen is the capture's snap length, 0 for none. The Writer does
	// not cut frames to it: the caller does (and says so in OrigLen).
	SnapLen int
	// Filter is if_filter, the capture filter in tcpdump syntax.
	Filter string
	// OS is if_os, the system the capture ran on.
	OS string
}

// Direction says which way a packet went, as epb_flags records it.
type Direction uint8

//go:generate stringer -type=Direction -trimprefix=Dir -output=direction_string.go

// Directions.
const (
	// DirUnknown writes no epb_flags.
	DirUnknown Direction = iota
	// DirInbound is a packet the interface received.
	DirInbound
	// DirOutbound is a packet the interface sent.
	DirOutbound
)

// Packet is one packet for WritePacket and AppendPacket.
type Packet struct {
	// Interface is the ID AddInterface returned.
	Interface int
	// Time is the capture timestamp, written to the nanosecond.
	Time time.Time
	// Data holds the captured bytes.
	Data []byte
	// OrigLen is the packet's length on the wire; len(Data) when it is
	// smaller.
	OrigLen int
	// Dir is the packet's direction.
	Dir Direction
}

// Stats are the counters of an Interface Statistics Block, as dumpcap
// writes one at the end of a capture.
type Stats struct {
	// Start and End are isb_starttime and isb_endtime; a zero Start is
	// the time of the interface's first packet, a zero End the time of
	// its last. End is also the block's own timestamp.
	Start, End time.Time
	// Received is isb_ifrecv, the packets the interface received (dropped
	// ones included); Dropped is isb_ifdrop, those it dropped for want of
	// buffer space.
	Received, Dropped uint64
}

// Writer writes a pcapng stream: one section, then interfaces, packets
// and statistics in any order. It does not buffer: each block goes to
// the underlying writer in one Write call, so a block is never split
// between two writes; give it a bufio.Writer for a file, and flush that.
// After a write error the stream is incomplete. A Writer is used from one
// goroutine; WritePacket and AppendPacket do not allocate once the
// Writer's block buffer has grown to the largest packet.
type Writer struct {
	w     io.Writer
	buf   []byte
	links []capture.LinkType
	first []time.Time // per interface: the first packet's time
	last  []time.Time // and the last one's
}

// NewWriter writes the Section Header Block of s to w and returns the
// Writer for the rest of the section.
func NewWriter(w io.Writer, s Section) (*Writer, error) {
	pw := &Writer{w: w}
	b := pw.begin(blockSection)
	b = binary.LittleEndian.AppendUint32(b, byteOrderMagic)
	b = binary.LittleEndian.AppendUint16(b, 1) // major version
	b = binary.LittleEndian.AppendUint16(b, 0) // minor version
	b = binary.LittleEndian.AppendUint64(b, math.MaxUint64)
	b = appendString(b, optSHBHardware, s.Hardware)
	b = appendString(b, optSHBOS, s.OS)
	b = appendString(b, optSHBUserAppl, s.Application)
	b = appendOption(b, optEnd, nil)
	if err := pw.end(b); err != nil {
		return nil, fmt.Errorf("pcapng: section header: %w", err)
	}
	return pw, nil
}

// AddInterface writes the Interface Description Block of i and returns
// the interface's ID for Packet.Interface: 0 for the first one, then 1,
// 2 and so on.
func (w *Writer) AddInterface(i Interface) (int, error) {
	if i.SnapLen < 0 || uint64(i.SnapLen) > math.MaxUint32 || i.LinkType > math.MaxUint16 {
		return 0, fmt.Errorf("pcapng: interface %q: snap length %d or link type %d out of range", i.Name, i.SnapLen, i.LinkType)
	}
	if len(i.Filter) > math.MaxUint16-1 {
		// if_filter is one option: a type byte and the filter, in a 16-bit
		// length (pcapng §4.2). Cut, it would be another filter.
		return 0, fmt.Errorf("pcapng: interface %q: a filter of %d bytes does not fit an option (at most %d)", i.Name, len(i.Filter), math.MaxUint16-1)
	}
	b := w.begin(blockInterface)
	b = binary.LittleEndian.AppendUint16(b, uint16(i.LinkType))
	b = binary.LittleEndian.AppendUint16(b, 0) // reserved
	b = binary.LittleEndian.AppendUint32(b, uint32(i.SnapLen))
	b = appendString(b, optIfName, i.Name)
	if i.Filter != "" {
		// The first byte says the filter is a libpcap filter string.
		b = appendOption(b, optIfFilter, append([]byte{0}, i.Filter...))
	}
	b = appendString(b, optIfOS, i.OS)
	b = appendOption(b, optIfTsresol, []byte{tsresol9})
	b = appendOption(b, optEnd, nil)
	if err := w.end(b); err != nil {
		return 0, fmt.Errorf("pcapng: interface %q: %w", i.Name, err)
	}
	w.links = append(w.links, i.LinkType)
	w.first = append(w.first, time.Time{})
	w.last = append(w.last, time.Time{})
	return len(w.links) - 1, nil
}

// WritePacket writes p as an Enhanced Packet Block.
func (w *Writer) WritePacket(p Packet) error {
	b, err := w.AppendPacket(w.buf[:0], p)
	if err != nil {
		return err
	}
	w.buf = b
	_, err = w.w.Write(b)
	return err
}

// WriteFrame writes a frame read from a capture (a capture.Reader or a
// live capture) as a packet of interface id, which must have the frame's
// link type (ErrLinkType).
func (w *Writer) WriteFrame(id int, f *capture.Frame) error {
	if id >= 0 && id < len(w.links) && f.LinkType != w.links[id] {
		return fmt.Errorf("pcapng: frame %d: %w (%d, not %d)", f.Number, ErrLinkType, f.LinkType, w.links[id])
	}
	return w.WritePacket(Packet{Interface: id, Time: f.Time, Data: f.Data, OrigLen: f.OrigLen})
}

// AppendPacket appends p as an Enhanced Packet Block to dst and returns
// the extended slice, without writing it: for a caller that writes
// blocks into a buffer of its own (bufio.Writer.AvailableBuffer, or a
// batch). The block is PacketLen(len(p.Data), p.Dir) bytes long. The
// interface counts the packet for WriteStats' default times.
func (w *Writer) AppendPacket(dst []byte, p Packet) ([]byte, error) {
	if p.Interface < 0 || p.Interface >= len(w.links) {
		return dst, fmt.Errorf("pcapng: packet for interface %d of %d: %w", p.Interface, len(w.links), ErrUnknownInterface)
	}
	n := PacketLen(len(p.Data), p.Dir)
	if uint64(n) > math.MaxUint32 {
		return dst, fmt.Errorf("pcapng: packet of %d bytes: %w", len(p.Data), ErrTooLong)
	}
	if w.first[p.Interface].IsZero() {
		w.first[p.Interface] = p.Time
	}
	w.last[p.Interface] = p.Time
	ts := uint64(p.Time.UnixNano())
	orig := max(p.OrigLen, len(p.Data))
	b := binary.LittleEndian.AppendUint32(dst, blockEnhanced)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = binary.LittleEndian.AppendUint32(b, uint32(p.Interface))
	b = binary.LittleEndian.AppendUint32(b, uint32(ts>>32))
	b = binary.LittleEndian.AppendUint32(b, uint32(ts))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(p.Data)))
	b = binary.LittleEndian.AppendUint32(b, uint32(min(orig, math.MaxUint32)))
	b = append(b, p.Data...)
	b = append(b, make([]byte, pad(len(p.Data)))...) // extends b in place: no allocation
	if p.Dir != DirUnknown {
		b = binary.LittleEndian.AppendUint16(b, optEPBFlags)
		b = binary.LittleEndian.AppendUint16(b, 4)
		b = binary.LittleEndian.AppendUint32(b, uint32(p.Dir)) // bits 0-1: 01 inbound, 10 outbound
		b = binary.LittleEndian.AppendUint32(b, optEnd)        // code and length 0
	}
	return binary.LittleEndian.AppendUint32(b, uint32(n)), nil
}

// PacketLen returns the length of the Enhanced Packet Block of a packet
// of n captured bytes going dir.
func PacketLen(n int, dir Direction) int {
	l := packetHeaderLen + n + pad(n) + 4
	if dir != DirUnknown {
		l += packetTrailerLen - 4
	}
	return l
}

// WriteStats writes an Interface Statistics Block for interface id.
func (w *Writer) WriteStats(id int, s Stats) error {
	if id < 0 || id >= len(w.links) {
		return fmt.Errorf("pcapng: statistics for interface %d of %d: %w", id, len(w.links), ErrUnknownInterface)
	}
	if s.Start.IsZero() {
		s.Start = w.first[id]
	}
	if s.End.IsZero() {
		s.End = w.last[id]
	}
	b := w.begin(blockStats)
	b = binary.LittleEndian.AppendUint32(b, uint32(id))
	b = appendTime(b, s.End)
	if !s.Start.IsZero() {
		b = appendOption(b, optISBStart, appendTime(nil, s.Start))
	}
	if !s.End.IsZero() {
		b = appendOption(b, optISBEnd, appendTime(nil, s.End))
	}
	b = appendOption(b, optISBIfRecv, binary.LittleEndian.AppendUint64(nil, s.Received))
	b = appendOption(b, optISBIfDrop, binary.LittleEndian.AppendUint64(nil, s.Dropped))
	b = appendOption(b, optEnd, nil)
	return w.end(b)
}

// begin starts a block of type typ in the Writer's buffer, its length to
// be filled in by end.
func (w *Writer) begin(typ uint32) []byte {
	b := binary.LittleEndian.AppendUint32(w.buf[:0], typ)
	return binary.LittleEndian.AppendUint32(b, 0)
}

// end completes the block begun in b and writes it.
func (w *Writer) end(b []byte) error {
	n := len(b) + 4
	binary.LittleEndian.PutUint32(b[4:], uint32(n))
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	w.buf = b
	_, err := w.w.Write(b)
	return err
}

// pad returns the bytes that pad n to a multiple of 4.
func pad(n int) int { return -n & 3 }

// appendOption appends an option: code, length, the value padded to 4
// bytes.
func appendOption(b []byte, code uint16, v []byte) []byte {
	b = binary.LittleEndian.AppendUint16(b, code)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(v)))
	b = append(b, v...)
	return append(b, make([]byte, pad(len(v)))...)
}

// appendString appends a string option, nothing for an empty string.
// Strings longer than an option holds are cut.
func appendString(b []byte, code uint16, s string) []byte {
	if s == "" {
		return b
	}
	return appendOption(b, code, []byte(s[:min(len(s), math.MaxUint16-3)]))
}

// appendTime appends a timestamp in nanoseconds, upper 32 bits first.
func appendTime(b []byte, t time.Time) []byte {
	ts := uint64(t.UnixNano())
	if t.IsZero() {
		ts = 0
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(ts>>32))
	return binary.LittleEndian.AppendUint32(b, uint32(ts))
}
