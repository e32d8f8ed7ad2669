// Package flow reconstructs the RoCEv2 connections of a capture:
// directions, pairing, PSN streams with gaps, retransmissions and
// Go-Back-N episodes, ACK coalescing, NAKs and RNR NAKs, READ and ATOMIC
// latency, ECN marks and CNPs, ICRC failures, the ECMP 5-tuples of each
// host pair and the PAUSE/PFC frames. It is the analysis behind "goroce
// cap flows" and the data of "goroce cap report".
//
//	r, _ := capture.Open("x.pcap")
//	res, err := flow.Analyze(r, flow.Config{})  // or Scanner + Analyzer, streaming
//	for _, c := range res.Connections { … c.Dirs[0].Requests.Retransmissions … }
//
// # Pipeline
//
//	capture.Source (a file's Reader, a live capture)
//	Scanner    → Packet: the RoCEv2 view of one frame (capture.Packet.Decode)
//	Analyzer   → connections, per-direction statistics (Result)
//
// The Scanner decodes each frame with package capture (file formats, link
// types, VLAN tags, IP options, snap-length cuts, the ICRC verdict) and
// adds what a flow analysis needs: the payload length computed from the
// UDP length, so a frame cut by a snap length still counts its real size,
// and the decoding problems of each packet. Analyzer.Add returns the
// packet's direction, which package capture/lint checks it in; the
// Directions' Live counters can be read between two Adds (a live table).
//
// # Connections and directions
//
// A direction is the packets from one IP address to another with one
// destination QPN (and, for UD, one DETH source QP). The source UDP port
// is not part of the key: rxe changes it at modify_qp (rxe_modify_qp;
// doc/rxe.md §10 item 6). Two opposite directions form a connection when
// the pairing is evident: the same UDP source port (rxe derives it symmetrically from
// both QPNs), for UD the DETH source QP, or a response whose PSN falls in
// the other direction's request window. A direction carries requests of
// its source (SEND, WRITE, READ, ATOMIC) and responses to the other side's
// requests (ACK, NAK, READ responses, ATOMIC ACK), so an RC connection
// holds two request streams, one per requester.
//
// # Fabric view
//
// Result.HostPairs groups the packets by pair of addresses and lists the
// distinct 5-tuples of each pair: the ECMP entropy a leaf-spine fabric can
// spread the pair's QPs with (one tuple per direction means one path for
// every QP). CaptureStats.Pauses counts the MAC Control frames the decoder
// finds: 802.3x PAUSE for the whole link and PFC per priority, with the
// pause requests over time and the priorities the PFC frames enable.
// Packet carries the first 802.1Q tag's PCP and VLAN ID and the IP DSCP.
//
// # Bounded memory
//
// Everything is streamed: per direction the state is a fixed set of
// counters, adaptive time series (at most MaxBins bins, merged by doubling
// the bin width), and samples kept by uniform decimation (at most a fixed
// number per kind, halving the sampling rate when full). Gap lists, event
// lists and pending READ/ATOMIC tables are capped, with totals kept exact.
// The number of directions is capped too (Config.MaxDirections); packets of
// directions past the cap are counted, not analysed.
//
// Times are relative to the first frame of the capture, as tshark's
// frame.time_relative.
package flow
