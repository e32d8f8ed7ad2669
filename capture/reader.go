package capture

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gopacket/gopacket/pcapgo"
)

// Errors of Reader. Check them with errors.Is.
var (
	// ErrNotCapture: the input is neither pcap nor pcapng.
	ErrNotCapture = errors.New("not a pcap or pcapng capture file")
	// ErrCutShort: the file ends in the middle of a record (tshark: "appears
	// to have been cut short in the middle of a packet").
	ErrCutShort = errors.New("capture file appears to have been cut short in the middle of a packet")
	// ErrCorrupt: a record is malformed (tshark: "appears to be damaged or
	// corrupt").
	ErrCorrupt = errors.New("capture file appears to be damaged or corrupt")
)

// Magic numbers of the formats the reader sniffs.
const (
	magicPcapUs    = 0xa1b2c3d4
	magicPcapNs    = 0xa1b23c4d
	magicPcapUsSw  = 0xd4c3b2a1
	magicPcapNsSw  = 0x4d3cb2a1
	magicPcapng    = 0x0a0d0d0a
	gzipMagic0     = 0x1f
	gzipMagic1     = 0x8b
	readBufferSize = 1 << 20
)

// Reader streams the records of a pcap or pcapng file (optionally gzip
// compressed) without reading the whole file: memory stays bounded by the
// largest record, because each Next reuses one buffer. It wraps
// gopacket's pcapgo readers, which need no cgo. A Reader is used from one
// goroutine.
type Reader struct {
	pcap   *pcapgo.Reader
	ng     *pcapgo.NgReader
	link   LinkType
	n      int
	nanos  bool
	closer io.Closer // the gzip decompressor, if any
	file   *os.File  // the file Open opened
}

// Open opens the capture file at path and reads its header (see
// NewReader). Close closes the file.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	rd, err := NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	rd.file = f
	return rd, nil
}

// NewReader sniffs the format of r (pcap with microsecond or nanosecond
// timestamps in either byte order, pcapng, or either of them gzipped) and
// reads the file header. It returns ErrNotCapture (wrapped) for anything
// else. The Reader reads r through a buffer of its own; r stays the
// caller's to close.
func NewReader(r io.Reader) (rd *Reader, err error) {
	defer func() {
		if p := recover(); p != nil { // a parser bug must not crash the tool
			rd, err = nil, fmt.Errorf("%w: %v", ErrCorrupt, p)
		}
	}()
	br := bufio.NewReaderSize(r, readBufferSize)
	rd = &Reader{}
	if m, _ := br.Peek(2); len(m) == 2 && m[0] == gzipMagic0 && m[1] == gzipMagic1 {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: bad gzip header: %v", ErrNotCapture, err)
		}
		rd.closer = zr
		br = bufio.NewReaderSize(zr, readBufferSize)
	}
	m, err := br.Peek(4)
	if err != nil {
		if len(m) == 0 {
			return nil, fmt.Errorf("%w: the file is empty", ErrNotCapture)
		}
		return nil, fmt.Errorf("%w: the file is too short", ErrNotCapture)
	}
	switch binary.LittleEndian.Uint32(m) {
	case magicPcapng:
		ng, err := pcapgo.NewNgReader(br, pcapgo.NgReaderOptions{WantMixedLinkType: true})
		if err != nil {
			return nil, headerError(err)
		}
		rd.ng = ng
		if iface, err := ng.Interface(0); err == nil {
			res := iface.Resolution().ToDuration()
			rd.nanos = res > 0 && res < time.Microsecond
		}
	case magicPcapUs, magicPcapNs, magicPcapUsSw, magicPcapNsSw:
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, headerError(err)
		}
		rd.pcap = pr
		rd.link = LinkType(pr.LinkType())
		m := binary.LittleEndian.Uint32(m)
		rd.nanos = m == magicPcapNs || m == magicPcapNsSw
	default:
		return nil, ErrNotCapture
	}
	return rd, nil
}

func headerError(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: the file header is cut short", ErrNotCapture)
	}
	return fmt.Errorf("%w: %v", ErrNotCapture, err)
}

// NanosecondTimestamps reports whether the file stores timestamps finer
// than microseconds (pcap's 0xa1b23c4d magic, or a pcapng interface's
// if_tsresol), which tshark's text output shows with nine decimals.
func (rd *Reader) NanosecondTimestamps() bool { return rd.nanos }

// Next reads the next record into f. f.Data aliases the Reader's buffer:
// it is valid until the following call. Next returns io.EOF at the end of
// the file, and ErrCutShort or ErrCorrupt (wrapped) for a damaged file;
// the records before the damage were delivered.
func (rd *Reader) Next(f *Frame) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrCorrupt, p)
		}
	}()
	var (
		data []byte
		link LinkType
	)
	if rd.ng != nil {
		d, ci, e := rd.ng.ZeroCopyReadPacketData()
		if e == nil {
			iface, ierr := rd.ng.Interface(ci.InterfaceIndex)
			if ierr != nil {
				return fmt.Errorf("%w: %v", ErrCorrupt, ierr)
			}
			link = LinkType(iface.LinkType)
			f.Time, f.OrigLen = ci.Timestamp, ci.Length
		}
		data, err = d, e
	} else {
		d, ci, e := rd.pcap.ZeroCopyReadPacketData()
		if e == nil {
			f.Time, f.OrigLen = ci.Timestamp, ci.Length
		}
		data, err = d, e
		link = rd.link
	}
	switch {
	case err == nil:
	case errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
		return io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		return ErrCutShort
	default:
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	rd.n++
	f.Number = rd.n
	f.LinkType = link
	f.Data = data
	if f.OrigLen < len(data) {
		f.OrigLen = len(data)
	}
	return nil
}

// Close releases the gzip decompressor, if any, and closes the file Open
// opened; it does not close the io.Reader given to NewReader.
func (rd *Reader) Close() error {
	var err error
	if rd.closer != nil {
		err = rd.closer.Close()
		rd.closer = nil
	}
	if rd.file != nil {
		err = errors.Join(err, rd.file.Close())
		rd.file = nil
	}
	return err
}
