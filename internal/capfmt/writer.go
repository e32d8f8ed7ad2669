package capfmt

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// ErrMixedLinkType is returned by PcapngWriter.Write for a frame whose
// link type differs from the interface's.
var ErrMixedLinkType = errors.New("frame link type differs from the interface's")

// Interface describes the one capture interface of a pcapng file: the
// Interface Description Block (pcapng draft §4.2).
type Interface struct {
	// Name is if_name, e.g. "eth0".
	Name string
	// LinkType is the link type of every frame.
	LinkType LinkType
	// SnapLen is the capture's snap length, 0 for none.
	SnapLen int
	// Filter is if_filter, the capture filter in tcpdump syntax.
	Filter string
}

// PcapngWriter writes frames to a pcapng file with one interface and
// nanosecond timestamps (if_tsresol 9), as dumpcap writes them; tshark and
// Reader read it back. It buffers: call Flush before closing the file.
// It is used from one goroutine.
type PcapngWriter struct {
	w     *pcapgo.NgWriter
	link  LinkType
	first time.Time
}

// NewPcapngWriter writes the section header and the interface description
// to w.
func NewPcapngWriter(w io.Writer, iface Interface) (*PcapngWriter, error) {
	ng, err := pcapgo.NewNgWriterInterface(w, pcapgo.NgInterface{
		Name:                iface.Name,
		OS:                  runtime.GOOS,
		Filter:              iface.Filter,
		LinkType:            layers.LinkType(iface.LinkType),
		SnapLength:          uint32(max(iface.SnapLen, 0)),
		TimestampResolution: 9,
	}, pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{
		Hardware:    runtime.GOARCH,
		OS:          runtime.GOOS,
		Application: "goroce cap",
	}})
	if err != nil {
		return nil, fmt.Errorf("capfmt: pcapng header: %w", err)
	}
	return &PcapngWriter{w: ng, link: iface.LinkType}, nil
}

// Write appends f as an Enhanced Packet Block. f.OrigLen below len(f.Data)
// is taken as len(f.Data).
func (pw *PcapngWriter) Write(f *Frame) error {
	if f.LinkType != pw.link {
		return fmt.Errorf("capfmt: frame %d: %w (%d, not %d)", f.Number, ErrMixedLinkType, f.LinkType, pw.link)
	}
	if pw.first.IsZero() {
		pw.first = f.Time
	}
	ci := gopacket.CaptureInfo{Timestamp: f.Time, CaptureLength: len(f.Data), Length: max(f.OrigLen, len(f.Data))}
	return pw.w.WritePacket(ci, f.Data)
}

// WriteStats appends an Interface Statistics Block with the packets the
// interface received and dropped (isb_ifrecv, isb_ifdrop), as dumpcap
// writes at the end of a capture; start is the first frame's time when
// zero.
func (pw *PcapngWriter) WriteStats(received, dropped uint64, start, end time.Time) error {
	if start.IsZero() {
		start = pw.first
	}
	st := pcapgo.NgInterfaceStatistics{
		LastUpdate:      end,
		StartTime:       start,
		EndTime:         end,
		PacketsReceived: received,
		PacketsDropped:  dropped,
	}
	return pw.w.WriteInterfaceStats(0, st)
}

// Flush writes the buffered blocks to the underlying writer.
func (pw *PcapngWriter) Flush() error { return pw.w.Flush() }
