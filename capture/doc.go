// Package capture reads RoCEv2 captures: pcap and pcapng files, gzipped
// or not, streamed frame by frame with bounded memory, each frame decoded
// to a rocev2.Packet with what the link layer says about it.
//
//	r, err := capture.Open("x.pcap")   // or NewReader(io.Reader), or a live capture
//	var f capture.Frame
//	var p capture.Packet
//	for r.Next(&f) == nil {
//		if p.Decode(&f) == nil {
//			// p.RoCE: BTH, extension headers, payload (package rocev2/wire views)
//			// p.Src(), p.Dst(), p.DSCP(), p.ECN(), p.TCI.PCP(), p.ICRC
//		}
//	}
//
// A Reader (Open, NewReader) yields Frames; any other frame source, such
// as a live capture (package capture/live), is a Source as well. Package
// capture/pcapng writes frames to a file, package capture/flow
// reconstructs the connections of a capture and package capture/lint
// checks them against the transport rules.
//
// # Decoding
//
// Packet.Decode finds the RoCEv2 packet of a frame behind Ethernet (with
// any VLAN tags), Linux cooked captures, raw IP and the BSD loopback link
// types, over IPv4 or IPv6, exactly where tshark 4.0 finds one, and so
// where "goroce cap" (whose tshark emulation is tested against this
// package frame by frame) shows one. It records the first 802.1Q tag's
// priority and VLAN ID, checks the ICRC when the transport packet was
// captured whole (ICRCStatus), and decodes the fields of 802.3x PAUSE and
// PFC frames (MACControl). A frame the snap length cut keeps the views of
// the headers it holds whole, and its length on the wire (Packet.Cut,
// Packet.TransportLen): header-only captures (tcpdump -s 128) are
// analysed like whole ones.
//
// # Buffer ownership
//
// A Frame's Data aliases the buffer of the Source that filled it, and a
// Packet's views alias the Frame's Data: both are valid until the
// Source's next Next. Copy what you keep (bytes.Clone, or the Fields
// methods of the header views).
//
// # Errors
//
// NewReader returns ErrNotCapture (wrapped) for input that is neither
// pcap nor pcapng; Next returns io.EOF at the end of the file, ErrCutShort
// for a file that ends inside a record and ErrCorrupt for a damaged one,
// after delivering every record before the damage. Decode returns
// ErrNotRoCE, ErrCut or a transport error of package wire. Check them
// with errors.Is. Nothing here panics on any input. Packet.Decode does
// not allocate, nor does Reader.Next on pcap files (plain or gzipped);
// on pcapng it allocates one small object for each packet block that
// carries options (epb_flags, as a device's own capture writes: the
// direction), in gopacket's pcapng reader.
package capture
