package capflow

import (
	"encoding/binary"
	"errors"
	"io"
	"net/netip"
	"time"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/ext"
	"github.com/goroce/goroce/internal/capfmt"
	"github.com/goroce/goroce/reth"
)

// ICRCState is the verdict on a packet's ICRC.
type ICRCState uint8

// ICRC verdicts.
const (
	ICRCUnchecked ICRCState = iota // not the whole packet was captured
	ICRCGood                       // the ICRC matches
	ICRCBad                        // the ICRC does not match
)

// Problem is a set of decoding problems of one packet: what it lacks for a
// full analysis. A packet with problems is still analysed as far as its
// bytes go.
type Problem uint8

// Decoding problems.
const (
	ProblemShortBTH   Problem = 1 << iota // fewer than 12 bytes after the UDP header
	ProblemHeadersCut                     // the extension headers were not captured whole
	ProblemTooShort                       // the UDP payload cannot hold the opcode's headers and an ICRC
	ProblemPad                            // the pad count exceeds the payload
	ProblemUnknownOp                      // an opcode the table does not know
)

// Packet is the RoCEv2 view of one captured frame. Its slices alias the
// capture reader's buffer: a Packet is valid until the next Scanner.Next.
type Packet struct {
	// Frame is frame.number (1-based).
	Frame int
	// Time is the capture time relative to the first frame of the file.
	Time time.Duration
	// Src and Dst are the IP addresses, SrcPort and DstPort the UDP ports.
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	// ECN holds the two ECN bits of the IP header (3 = CE).
	ECN uint8
	// WireLen is the frame's length on the wire (frame.len).
	WireLen int
	// VLAN reports an 802.1Q/802.1ad tag in front of the IP header.
	VLAN bool
	// Tagged reports an 802.1Q tag with its TCI (vlan.priority in
	// tshark); PCP and VLANID are those of the first such tag, the one a
	// switch queues the frame by (IEEE 802.1Q 6.9.3).
	Tagged bool
	PCP    uint8
	VLANID uint16
	// DSCP is the IP header's DSCP: the upper 6 bits of the IPv4 TOS or
	// the IPv6 traffic class.
	DSCP uint8

	// Transport is the UDP payload as captured: BTH up to the ICRC, or
	// less when the snap length cut the frame.
	Transport []byte
	// TransportLen is the UDP payload's length on the wire (from the UDP
	// length field), never less than len(Transport).
	TransportLen int
	// Cut reports that the frame was cut by the snap length inside the
	// transport packet.
	Cut bool
	// ICRC is the ICRC verdict (capfmt verifies it with rocev2.ComputeICRC).
	ICRC ICRCState

	// BTH is nil when fewer than 12 bytes were captured.
	BTH    bth.Header
	Opcode bth.Opcode
	// Info is the opcode's table row, nil for an unknown opcode.
	Info *bth.Info
	// Extension headers, nil when absent or not captured.
	RETH         reth.Header
	AETH         aeth.Header
	DETH         ext.DETH
	AtomicETH    ext.AtomicETH
	AtomicAckETH ext.AtomicAckETH
	// PayloadLen is the payload length without the pad, from the length on
	// the wire; -1 when unknown (no table row, or too short).
	PayloadLen int
	// Problems lists what the packet lacks.
	Problems Problem
}

// Requester reports a request (SEND, WRITE, READ request, atomics, FLUSH,
// ATOMIC WRITE).
func (p *Packet) Requester() bool { return p.Info != nil && p.Info.Mask&bth.MaskRequest != 0 }

// Responder reports a response (ACK/NAK, READ response, ATOMIC ACK).
func (p *Packet) Responder() bool { return p.Info != nil && p.Info.Mask&bth.MaskResponse != 0 }

// CNP reports a RoCEv2 congestion notification packet.
func (p *Packet) CNP() bool { return p.Info != nil && p.Info.Mask&bth.MaskCNP != 0 }

// PSN returns the BTH PSN (0 without a BTH).
func (p *Packet) PSN() bth.PSN {
	if p.BTH == nil {
		return 0
	}
	return p.BTH.PSN()
}

// extract fills p from a decoded capfmt packet. It reports false when the
// frame holds no RoCEv2 packet of its own (none at all, or only one quoted
// in an ICMP error).
func (p *Packet) extract(cp *capfmt.Packet, fr *capfmt.Frame, rel time.Duration) bool {
	*p = Packet{Frame: fr.Number, Time: rel, WireLen: max(fr.OrigLen, len(fr.Data)), PayloadLen: -1}
	if !cp.RoCE || len(cp.IPHeader) == 0 || len(cp.UDPHeader) < 8 {
		return false
	}
	if cp.Has(capfmt.ProtoICMP) || cp.Has(capfmt.ProtoICMPv6) {
		return false // the RoCE layer is the one an ICMP error quotes
	}
	ip := cp.IPHeader
	switch ip[0] >> 4 {
	case 4:
		if len(ip) < 20 {
			return false
		}
		p.Src, _ = netip.AddrFromSlice(ip[12:16])
		p.Dst, _ = netip.AddrFromSlice(ip[16:20])
		p.ECN = ip[1] & 3
		p.DSCP = ip[1] >> 2
	case 6:
		if len(ip) < 40 {
			return false
		}
		p.Src, _ = netip.AddrFromSlice(ip[8:24])
		p.Dst, _ = netip.AddrFromSlice(ip[24:40])
		p.ECN = (ip[1] >> 4) & 3
		p.DSCP = (ip[0]&0x0f)<<2 | ip[1]>>6
	default:
		return false
	}
	if fr.LinkType == capfmt.LinkEthernet && len(fr.Data) >= 14 {
		switch binary.BigEndian.Uint16(fr.Data[12:]) {
		case 0x8100, 0x88a8, 0x9100:
			p.VLAN = true
		}
	}
	if it, ok := cp.Lookup(capfmt.VLANPriority); ok {
		p.Tagged, p.PCP = true, uint8(it.Value)
		if id, ok := cp.Lookup(capfmt.VLANID); ok {
			p.VLANID = uint16(id.Value)
		}
	}
	udp := cp.UDPHeader
	p.SrcPort = binary.BigEndian.Uint16(udp[0:])
	p.DstPort = binary.BigEndian.Uint16(udp[2:])
	t := cp.Transport
	p.Transport = t
	p.TransportLen = len(t)
	if ulen := int(binary.BigEndian.Uint16(udp[4:])); fr.OrigLen > len(fr.Data) && ulen-8 > len(t) {
		p.TransportLen = ulen - 8
		p.Cut = true
	}
	switch {
	case cp.ICRCChecked && cp.ICRCGood:
		p.ICRC = ICRCGood
	case cp.ICRCChecked:
		p.ICRC = ICRCBad
	}
	p.parseTransport()
	return true
}

// parseTransport sets the header views from p.Transport and the payload
// length from p.TransportLen.
func (p *Packet) parseTransport() {
	t := p.Transport
	h, err := bth.Parse(t)
	if err != nil {
		p.Problems |= ProblemShortBTH
		return
	}
	p.BTH = h
	p.Opcode = h.Opcode()
	in, ok := p.Opcode.Lookup()
	if !ok {
		p.Problems |= ProblemUnknownOp
		return
	}
	p.Info = in
	view := func(m bth.HeaderMask, n int) []byte {
		o, ok := in.Offset(m)
		if !ok {
			return nil
		}
		if o+n > len(t) {
			p.Problems |= ProblemHeadersCut
			return nil
		}
		return t[o : o+n]
	}
	if b := view(bth.MaskRETH, reth.Size); b != nil {
		p.RETH, _ = reth.Parse(b)
	}
	if b := view(bth.MaskAETH, aeth.Size); b != nil {
		p.AETH, _ = aeth.Parse(b)
	}
	if b := view(bth.MaskDETH, ext.DETHSize); b != nil {
		p.DETH, _ = ext.ParseDETH(b)
	}
	if b := view(bth.MaskAtomicETH, ext.AtomicETHSize); b != nil {
		p.AtomicETH, _ = ext.ParseAtomicETH(b)
	}
	if b := view(bth.MaskAtomicAckETH, ext.AtomicAckETHSize); b != nil {
		p.AtomicAckETH, _ = ext.ParseAtomicAckETH(b)
	}
	if len(t) < in.HeaderLen {
		p.Problems |= ProblemHeadersCut
	}
	room := p.TransportLen - in.HeaderLen - bth.ICRCSize
	if room < 0 {
		p.Problems |= ProblemTooShort
		return
	}
	pad := h.PadCount()
	if pad > room {
		p.Problems |= ProblemPad
		p.PayloadLen = room
		return
	}
	p.PayloadLen = room - pad
}

// CaptureStats describes the capture file as a whole: what was read and
// what could not be analysed.
type CaptureStats struct {
	// Frames is the number of records read.
	Frames int `json:"frames"`
	// RoCE counts frames with a RoCEv2 packet of their own.
	RoCE int `json:"roce"`
	// NonRoCE counts frames without one (TCP out-of-band exchanges, ARP …).
	NonRoCE int `json:"non_roce"`
	// ICMPQuoted counts ICMP errors that quote a RoCEv2 packet; they are
	// not analysed as traffic.
	ICMPQuoted int `json:"icmp_quoted,omitempty"`
	// VLAN counts RoCEv2 frames with a VLAN tag.
	VLAN int `json:"vlan_tagged,omitempty"`
	// Pauses describes the MAC Control (PAUSE, PFC) frames, nil without
	// any.
	Pauses *PauseStats `json:"pauses,omitempty"`
	// SnapCut counts RoCEv2 frames cut by the snap length.
	SnapCut int `json:"snaplen_cut,omitempty"`
	// Malformed counts RoCEv2 frames with decoding problems (short BTH,
	// unknown opcode, pad overflow, too short for the opcode's headers).
	Malformed int `json:"malformed,omitempty"`
	// LinkTypes counts frames per pcap link type name.
	LinkTypes map[string]int `json:"link_types,omitempty"`
	// Bytes sums the frames' lengths on the wire.
	Bytes int64 `json:"bytes"`
	// Duration is the time from the first to the last frame, in seconds.
	Duration float64 `json:"duration_s"`
	// Error is the reason the file could not be read to its end (a file
	// cut short or damaged), empty when it was read whole.
	Error string `json:"error,omitempty"`
}

// linkTypeName names the link types capfmt decodes.
func linkTypeName(l capfmt.LinkType) string {
	switch l {
	case capfmt.LinkNull:
		return "null"
	case capfmt.LinkEthernet:
		return "ethernet"
	case capfmt.LinkRaw:
		return "raw-ip"
	case capfmt.LinkLoop:
		return "loop"
	case capfmt.LinkLinuxSLL:
		return "linux-sll"
	case capfmt.LinkIPv4:
		return "ipv4"
	case capfmt.LinkIPv6:
		return "ipv6"
	case capfmt.LinkSLL2:
		return "linux-sll2"
	}
	return "other"
}

// Scanner reads a capture file and yields its RoCEv2 packets, with capfmt's
// reader and decoder underneath. It streams: memory does not grow with the
// file. A Scanner is used from one goroutine.
type Scanner struct {
	rd    capture.Source
	file  *capture.Reader // rd when the Scanner opened it, closed by Close
	dec   *capfmt.Decoder
	fr    capfmt.Frame
	cp    capfmt.Packet
	pkt   Packet
	first time.Time
	last  time.Duration
	stats CaptureStats
	err   error
	links [8]int // per known link type, folded into stats at Stats
	other int
	pause PauseStats
}

// NewScanner reads the file header of a pcap or pcapng file (optionally
// gzipped). Its error wraps capfmt.ErrNotCapture for other input.
func NewScanner(r io.Reader) (*Scanner, error) {
	rd, err := capfmt.NewReader(r)
	if err != nil {
		return nil, err
	}
	return &Scanner{rd: rd, file: rd, dec: capfmt.NewDecoder(capfmt.DecoderConfig{})}, nil
}

// NewSourceScanner returns a Scanner over src: a file's capfmt.Reader or a
// live capture. src stays the caller's to close. The Scanner handles no
// wait timeouts: Next stops at the first error from src that is not
// io.EOF, so a live source must be wrapped to retry them (goroce cap does).
func NewSourceScanner(src capture.Source) *Scanner {
	return &Scanner{rd: src, dec: capfmt.NewDecoder(capfmt.DecoderConfig{})}
}

// Next returns the next RoCEv2 packet, valid until the following call, or
// false at the end of the file or at a read error (see Err). Frames
// without a RoCEv2 packet are counted in Stats and skipped.
func (s *Scanner) Next() (*Packet, bool) {
	for s.err == nil {
		if err := s.rd.Next(&s.fr); err != nil {
			if !errors.Is(err, io.EOF) {
				s.err = err
				s.stats.Error = err.Error()
			} else {
				s.err = io.EOF
			}
			return nil, false
		}
		s.stats.Frames++
		s.countLink(s.fr.LinkType)
		s.stats.Bytes += int64(max(s.fr.OrigLen, len(s.fr.Data)))
		if s.stats.Frames == 1 {
			s.first = s.fr.Time
		}
		rel := s.fr.Time.Sub(s.first)
		if rel > s.last {
			s.last = rel
		}
		s.dec.Decode(&s.fr, &s.cp)
		if !s.pkt.extract(&s.cp, &s.fr, rel) {
			if s.cp.Has(capfmt.ProtoMACC) {
				s.pause.addPause(&s.cp, s.fr.Number, rel)
			}
			if s.cp.RoCE {
				s.stats.ICMPQuoted++
			}
			s.stats.NonRoCE++
			continue
		}
		s.stats.RoCE++
		if s.pkt.VLAN {
			s.stats.VLAN++
		}
		if s.pkt.Cut {
			s.stats.SnapCut++
		}
		if s.pkt.Problems&^ProblemHeadersCut != 0 {
			s.stats.Malformed++
		}
		return &s.pkt, true
	}
	return nil, false
}

func (s *Scanner) countLink(l capfmt.LinkType) {
	switch l {
	case capfmt.LinkNull:
		s.links[0]++
	case capfmt.LinkEthernet:
		s.links[1]++
	case capfmt.LinkRaw:
		s.links[2]++
	case capfmt.LinkLoop:
		s.links[3]++
	case capfmt.LinkLinuxSLL:
		s.links[4]++
	case capfmt.LinkIPv4:
		s.links[5]++
	case capfmt.LinkIPv6:
		s.links[6]++
	case capfmt.LinkSLL2:
		s.links[7]++
	default:
		s.other++
	}
}

// Err returns the error that ended the scan: nil at a clean end of file,
// otherwise capfmt.ErrCutShort or capfmt.ErrCorrupt (wrapped) for a file
// that is cut short or damaged. The packets before it were delivered.
func (s *Scanner) Err() error {
	if errors.Is(s.err, io.EOF) {
		return nil
	}
	return s.err
}

// Stats returns the capture-level counters so far.
func (s *Scanner) Stats() CaptureStats {
	st := s.stats
	st.Duration = s.last.Seconds()
	if s.pause.Frames > 0 {
		ps := s.pause
		ps.finish()
		st.Pauses = &ps
	}
	st.LinkTypes = nil
	for i, l := range []capfmt.LinkType{capfmt.LinkNull, capfmt.LinkEthernet, capfmt.LinkRaw, capfmt.LinkLoop,
		capfmt.LinkLinuxSLL, capfmt.LinkIPv4, capfmt.LinkIPv6, capfmt.LinkSLL2} {
		if s.links[i] > 0 {
			if st.LinkTypes == nil {
				st.LinkTypes = map[string]int{}
			}
			st.LinkTypes[linkTypeName(l)] = s.links[i]
		}
	}
	if s.other > 0 {
		if st.LinkTypes == nil {
			st.LinkTypes = map[string]int{}
		}
		st.LinkTypes["other"] = s.other
	}
	return st
}

// Close releases the reader NewScanner opened (it does not close the
// underlying file); for NewSourceScanner it does nothing.
func (s *Scanner) Close() error {
	if s.file == nil {
		return nil
	}
	return s.file.Close()
}
