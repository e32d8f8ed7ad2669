package capture

import "time"

// LinkType is a pcap link-layer header type (LINKTYPE_* of tcpdump.org).
type LinkType uint32

//go:generate stringer -type=LinkType -trimprefix=Link -output=linktype_string.go

// Link types the decoder understands.
const (
	LinkNull     LinkType = 0   // BSD loopback: 4-byte host-order address family
	LinkEthernet LinkType = 1   // Ethernet II (with 802.1Q/802.1ad tags)
	LinkRaw      LinkType = 101 // raw IPv4 or IPv6
	LinkLoop     LinkType = 108 // OpenBSD loopback: 4-byte network-order address family
	LinkLinuxSLL LinkType = 113 // Linux cooked capture v1
	LinkIPv4     LinkType = 228 // raw IPv4
	LinkIPv6     LinkType = 229 // raw IPv6
	LinkSLL2     LinkType = 276 // Linux cooked capture v2
)

// Frame is one record of a capture. Data aliases the buffer of the
// Source that filled it: it is valid until the Source's next Next. Copy
// it (bytes.Clone) to keep it longer.
type Frame struct {
	// Number is the 1-based record index in the capture (frame.number).
	Number int
	// Time is the capture timestamp.
	Time time.Time
	// LinkType is the link-layer type of the record's interface.
	LinkType LinkType
	// Data holds the captured bytes.
	Data []byte
	// OrigLen is the length of the packet on the wire (frame.len); it is
	// larger than len(Data) when the capture was truncated by a snap length.
	OrigLen int
}

// WireLen returns the frame's length on the wire: OrigLen, or len(Data)
// when OrigLen is smaller (a record that understates it).
func (f *Frame) WireLen() int { return max(f.OrigLen, len(f.Data)) }
