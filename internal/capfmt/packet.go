package capfmt

import (
	"io"
	"iter"
	"time"

	"github.com/goroce/goroce/capture"
)

// Frame is a capture record as package capture reads it; the Decoder
// decodes it as tshark would.
type Frame = capture.Frame

// LinkType is a pcap link-layer header type (capture.LinkType).
type LinkType = capture.LinkType

// The link types the decoder understands (package capture's).
const (
	LinkNull     = capture.LinkNull
	LinkEthernet = capture.LinkEthernet
	LinkRaw      = capture.LinkRaw
	LinkLoop     = capture.LinkLoop
	LinkLinuxSLL = capture.LinkLinuxSLL
	LinkIPv4     = capture.LinkIPv4
	LinkIPv6     = capture.LinkIPv6
	LinkSLL2     = capture.LinkSLL2
)

// NewReader is capture.NewReader: the reader of the files the decoder
// reads, kept here for the tests that use the tshark emulation alone.
func NewReader(r io.Reader) (*capture.Reader, error) { return capture.NewReader(r) }

// Item is one field occurrence of a decoded packet. Packet.Items lists them
// in the order of tshark's protocol tree (depth first), which is the order
// in which tshark -T fields joins repeated fields.
type Item struct {
	// Field says what the item is.
	Field Field
	// Depth is the item's level in the protocol tree; protocols of the
	// outermost packet are at depth 0.
	Depth uint8
	// Value holds integer, boolean and time values (see Field's kind):
	// integers as is, booleans as 0/1, frame.time_relative as int64
	// nanoseconds, roce.icrc.status as 1 good / 0 bad.
	Value uint64
	// Bytes holds byte-string and address values. It aliases the frame's
	// data: copy it before the next Reader.Next.
	Bytes []byte
}

// Packet is a decoded frame: tshark-compatible field items plus views of
// the RoCEv2 layer for callers that want to run goroce's own codecs over
// it. Every slice aliases the Frame's Data, so a Packet is valid until the
// frame's buffer is reused. One Packet can be reused for every frame of a
// file; Decoder.Decode resets it.
type Packet struct {
	// Number is frame.number.
	Number int
	// Time is the frame's capture timestamp.
	Time time.Time
	// Items are the decoded fields in tree order.
	Items []Item

	// RoCE reports that the packet has an InfiniBand layer (what tshark's
	// display filter "infiniband" matches): a UDP datagram to or from port
	// 4791, even one too short for a BTH.
	RoCE bool
	// IPHeader and UDPHeader are the headers around the first RoCEv2
	// transport packet (IPv4 with options, or the 40-byte IPv6 header),
	// and Transport is that UDP payload: BTH to ICRC, as far as captured.
	// They are nil without a RoCE layer.
	IPHeader, UDPHeader, Transport []byte
	// ICRCChecked reports that the ICRC could be verified (the whole
	// transport packet, at least a BTH and an ICRC, was captured), and
	// ICRCGood whether it matched.
	ICRCChecked, ICRCGood bool

	// for the text summary
	ipProto uint8  // protocol number of the outermost IP header
	l4      []byte // its payload
	cmAttr  string // CM message name of a CM MAD
}

// reset clears p for reuse, keeping the item buffer.
func (p *Packet) reset() {
	items := p.Items[:0]
	*p = Packet{Items: items}
}

// Lookup returns the first occurrence of f.
func (p *Packet) Lookup(f Field) (Item, bool) {
	for i := range p.Items {
		if p.Items[i].Field == f {
			return p.Items[i], true
		}
	}
	return Item{}, false
}

// All iterates over every occurrence of f in tree order.
func (p *Packet) All(f Field) iter.Seq[Item] {
	return func(yield func(Item) bool) {
		for i := range p.Items {
			if p.Items[i].Field == f && !yield(p.Items[i]) {
				return
			}
		}
	}
}

// Has reports whether f occurs in p (for a protocol: whether the protocol
// is present).
func (p *Packet) Has(f Field) bool {
	for i := range p.Items {
		if p.Items[i].Field == f {
			return true
		}
	}
	return false
}
