// Package live captures RoCEv2 traffic live from a network interface
// with an AF_PACKET socket, the way dumpcap does but without libpcap or
// cgo: "goroce cap -i IFACE" reads through it.
//
//	h, err := live.Open("eth0", live.Config{})  // needs CAP_NET_RAW
//	defer h.Close()
//	var f capture.Frame
//	for { err := h.Next(&f); … }   // ErrTimeout when idle, io.EOF after Stop
//
// A *Handle is a capture.Source, like a capture file's *capture.Reader,
// so capture.Packet.Decode, the flow analysis (capture/flow) and the
// linter (capture/lint) read a live interface and a file through one code
// path, and a pcapng.Writer records it (Handle.Interface describes it).
//
// # Filter and capture
//
// A classic BPF program (Filter) runs in the kernel and passes only RoCEv2
// (UDP port 4791 over IPv4 or IPv6, untagged or with one 802.1Q tag) and
// MAC Control frames (PAUSE, PFC): the rest of the interface's traffic
// never reaches user space. The socket is created with protocol 0, so it
// receives nothing until the filter is attached and it is bound to the
// interface: no unfiltered frame slips in between.
//
// Frames are read one per recvmsg(2) with their kernel timestamp
// (SO_TIMESTAMPNS) and their metadata (PACKET_AUXDATA): the original
// length, and a VLAN tag the NIC stripped, which is put back into the
// frame as libpcap does, so the capture shows the tag that was on the
// wire. A plain socket rather than a TPACKET_V3 ring: the ring's block
// timeout delays live printing, and a capture tool's rates do not need
// it. Drops are counted by the kernel (PACKET_STATISTICS) and reported by
// Stats.
//
// Only Ethernet interfaces (and the loopback, which Linux presents as
// Ethernet) are supported; others fail with ErrLinkType.
package live
