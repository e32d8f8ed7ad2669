package flow

import (
	"errors"
	"io"
	"net/netip"
	"time"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/ext"
	"github.com/goroce/goroce/reth"
)

// Problem is a set of decoding problems of one packet: what it lacks for a
// full analysis. A packet with problems is still analysed as far as its
// bytes go.
type Problem uint8

//go:generate stringer -type=Problem -trimprefix=Problem -output=problem_string.go

// Decoding problems.
const (
	ProblemShortBTH   Problem = 1 << iota // fewer than 12 bytes after the UDP header
	ProblemHeadersCut                     // the extension headers were not captured whole
	ProblemTooShort                       // the UDP payload cannot hold the opcode's headers and an ICRC
	ProblemPad                            // the pad count exceeds the payload
	ProblemUnknownOp                      // an opcode the table does not know
)

// Packet is the flow analysis' view of one captured RoCEv2 packet: what
// capture.Packet decodes, flattened, with the payload length and the
// decoding problems worked out. Its slices alias the capture reader's
// buffer: a Packet is valid until the next Scanner.Next.
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
	// ICRC is the ICRC verdict (capture.Packet.ICRC).
	ICRC capture.ICRCStatus

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

// set fills p from a decoded frame. It reports false when the frame
// holds no RoCEv2 packet of its own (none at all, or only one quoted in
// an ICMP error).
func (p *Packet) set(cp *capture.Packet, fr *capture.Frame, rel time.Duration) bool {
	*p = Packet{Frame: fr.Number, Time: rel, WireLen: fr.WireLen(), PayloadLen: -1}
	if cp.Kind != capture.KindRoCE {
		return false
	}
	src, dst := cp.Src(), cp.Dst()
	p.Src, p.Dst, p.SrcPort, p.DstPort = src.Addr(), dst.Addr(), src.Port(), dst.Port()
	p.ECN, p.DSCP = cp.ECN(), cp.DSCP()
	p.VLAN = fr.LinkType == capture.LinkEthernet && cp.Tags > 0
	if cp.Tagged {
		p.Tagged, p.PCP, p.VLANID = true, cp.TCI.PCP(), cp.TCI.VID()
	}
	r := &cp.RoCE
	p.Transport, p.TransportLen, p.Cut, p.ICRC = r.Transport, cp.TransportLen, cp.Cut, cp.ICRC
	if r.BTH == nil {
		p.Problems |= ProblemShortBTH
		return true
	}
	p.BTH, p.Opcode = r.BTH, r.BTH.Opcode()
	in := r.Info
	if in == nil {
		p.Problems |= ProblemUnknownOp
		return true
	}
	p.Info = in
	// The views of the headers captured whole (capture.Packet's rule):
	// the others are missing when the frame was cut inside them.
	p.RETH, p.AETH, p.DETH, p.AtomicETH, p.AtomicAckETH = r.RETH, r.AETH, r.DETH, r.AtomicETH, r.AtomicAckETH
	if len(p.Transport) < in.HeaderLen {
		p.Problems |= ProblemHeadersCut
	}
	room := p.TransportLen - in.HeaderLen - bth.ICRCSize
	if room < 0 {
		p.Problems |= ProblemTooShort
		return true
	}
	pad := p.BTH.PadCount()
	if pad > room {
		p.Problems |= ProblemPad
		p.PayloadLen = room
		return true
	}
	p.PayloadLen = room - pad
	return true
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

// linkTypeName names the link types capture.Packet decodes.
func linkTypeName(l capture.LinkType) string {
	switch l {
	case capture.LinkNull:
		return "null"
	case capture.LinkEthernet:
		return "ethernet"
	case capture.LinkRaw:
		return "raw-ip"
	case capture.LinkLoop:
		return "loop"
	case capture.LinkLinuxSLL:
		return "linux-sll"
	case capture.LinkIPv4:
		return "ipv4"
	case capture.LinkIPv6:
		return "ipv6"
	case capture.LinkSLL2:
		return "linux-sll2"
	}
	return "other"
}

// Scanner reads a capture and yields its RoCEv2 packets, decoded with
// capture.Packet.Decode. It streams: memory does not grow with the
// capture. A Scanner is used from one goroutine.
type Scanner struct {
	src   capture.Source
	fr    capture.Frame
	cp    capture.Packet
	pkt   Packet
	first time.Time
	last  time.Duration
	stats CaptureStats
	err   error
	links [8]int // per known link type, folded into stats at Stats
	other int
	pause PauseStats
}

// NewScanner returns a Scanner over src: a file's capture.Reader, a live
// capture (capture/live.Handle) or any other frame source. src stays the
// caller's to close. Next stops at the first error from src that is not
// io.EOF; a live source's wait timeouts (os.ErrDeadlineExceeded) are
// errors too, so wrap a live source to retry them ("goroce cap -i" does,
// refreshing its table meanwhile).
func NewScanner(src capture.Source) *Scanner {
	return &Scanner{src: src}
}

// Next returns the next RoCEv2 packet, valid until the following call, or
// false at the end of the file or at a read error (see Err). Frames
// without a RoCEv2 packet are counted in Stats and skipped.
func (s *Scanner) Next() (*Packet, bool) {
	for s.err == nil {
		if err := s.src.Next(&s.fr); err != nil {
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
		_ = s.cp.Decode(&s.fr) // the flow analysis takes what it can of any packet: Packet.Problems
		if !s.pkt.set(&s.cp, &s.fr, rel) {
			switch s.cp.Kind {
			case capture.KindMACControl:
				s.pause.addPause(&s.cp.MACControl, s.fr.Number, rel)
			case capture.KindICMPError:
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

func (s *Scanner) countLink(l capture.LinkType) {
	switch l {
	case capture.LinkNull:
		s.links[0]++
	case capture.LinkEthernet:
		s.links[1]++
	case capture.LinkRaw:
		s.links[2]++
	case capture.LinkLoop:
		s.links[3]++
	case capture.LinkLinuxSLL:
		s.links[4]++
	case capture.LinkIPv4:
		s.links[5]++
	case capture.LinkIPv6:
		s.links[6]++
	case capture.LinkSLL2:
		s.links[7]++
	default:
		s.other++
	}
}

// Err returns the error that ended the scan: nil at a clean end of the
// capture, otherwise the Source's error, such as capture.ErrCutShort or
// capture.ErrCorrupt (wrapped) for a file that is cut short or damaged.
// The packets before it were delivered.
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
	for i, l := range []capture.LinkType{capture.LinkNull, capture.LinkEthernet, capture.LinkRaw, capture.LinkLoop,
		capture.LinkLinuxSLL, capture.LinkIPv4, capture.LinkIPv6, capture.LinkSLL2} {
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
