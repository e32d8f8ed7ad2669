// Package afxdp is a raw RoCEv2 transport over an AF_XDP socket: an XDP
// program redirects the frames for the link's address and UDP port to the
// socket's receive ring before the kernel's network stack sees them, and
// the link sends whole Ethernet frames from its own memory (the UMEM). It
// needs CAP_NET_RAW, CAP_BPF and CAP_NET_ADMIN.
//
// # XSK code
//
// The socket code is the project's own, over golang.org/x/sys/unix: a UMEM
// of Frames × FrameSize bytes (anonymous memory, half for receiving, half
// for sending) and four single-producer / single-consumer rings shared
// with the kernel (fill, completion, RX, TX). Their producer and consumer
// indices are only ever read and written with sync/atomic on the mapped
// memory — never plain loads and stores, which are correct only by the
// grace of x86's memory model (the defect doc/limits.md §4 found
// in github.com/slavc/xdp). The socket binds with XDP_USE_NEED_WAKEUP: the
// link calls sendto only when the kernel asks (in copy mode, always) and
// wakes the fill ring only when flagged.
//
// # The XDP program
//
// About 40 eBPF instructions, assembled in bpf_linux.go with goroce's own
// eBPF assembler and loader (internal/ebpf, which the fabric's ECN
// marker uses too) and loaded with bpf(2): untagged Ethernet frames carrying IPv4 (no options, not a
// fragment) or IPv6 (no extension headers) and UDP to the link's address
// and port go to the XSKMAP entry of their receive queue
// (bpf_redirect_map with XDP_PASS as the fallback); everything else —
// ARP, neighbour discovery, other traffic — passes to the kernel. With
// Config.Tag, ten more instructions also take such frames behind one
// 802.1Q tag (EtherType 0x8100) whose VLAN ID is Config.VLANID, any PCP
// or DEI; other VLAN IDs, stacked tags and 802.1ad pass. It is
// loaded with BPF_F_XDP_HAS_FRAGS so that multi-buffer frames may reach it
// (it reads only the headers in the first buffer). A hand-assembled
// program was preferred to github.com/cilium/ebpf: the program is tiny and
// fixed, assembling it costs no dependency (cilium/ebpf would pull a large
// module and its transitive requirements into every user of the project),
// and the three bpf(2) commands it needs (map create, program load, BPF
// link create) are a few lines over x/sys/unix, in internal/ebpf.
//
// The program is attached through a BPF link (BPF_LINK_CREATE, Linux 5.9),
// not with the netlink IFLA_XDP attribute: the kernel detaches it when the
// link's file descriptor is closed — by Close, or by the kernel when the
// process dies — so no XDP program is ever left on the interface, and the
// detach needs no mode flag (slavc/xdp's detach without the mode flag
// loops forever on a generic-mode program, doc/limits.md §4). ModeAuto tries
// the driver hook, then the generic one; a bridge has no driver hook, veth
// has one (the figures of doc/limits.md §4 compare both).
//
// # Copy mode, zero copy, multi-buffer
//
// In the driver hook the link first binds with XDP_ZEROCOPY and falls back
// to XDP_COPY where the driver offers no zero copy (veth and bridges have
// none); Info says what it got. A RoCE frame at path MTU 4096 is 4170
// bytes (4190 over IPv6) and does not fit one UMEM frame: the kernel caps
// the frame size at 4096 in aligned mode, and a received frame starts 256
// bytes (XDP_PACKET_HEADROOM) into it. The link therefore binds with
// XDP_USE_SG (Linux 6.6) and sends and receives such frames as two
// descriptors chained with XDP_PKT_CONTD; received multi-buffer frames are
// reassembled in a scratch buffer. With NoMultiBuffer, or on a kernel that
// refuses XDP_USE_SG, the largest frame is FrameSize − 256 = 3840 bytes,
// so the QPs on the link must use path MTU 2048 (Info.MaxFrame says which;
// Send refuses larger frames with ErrTooBig and the kernel drops larger
// received frames, counted in Drops.RxDropped).
//
// # Frames, next hop, the kernel's view
//
// Frames are built as link/afpacket builds them (a per-destination header
// template from rocev2.Encap; UDP checksum 0, DF, the datagram's ECN and
// IPv4 ID), and Recv reports the real IPv4 ID with IPIDKnown. Next-hop MACs
// come from the kernel's neighbour table or the link's own ARP / neighbour
// solicitation, and the link answers ARP / ND for an address the kernel
// does not own (through an AF_PACKET socket: the program passes those
// frames on). Redirected frames never reach the kernel's IP stack, so the
// kernel sends no ICMP port unreachable for them; when the address is
// configured on the interface, a guard UDP socket (see link/afpacket)
// still covers frames that arrive on another queue. Only one afxdp link
// can use an interface at a time (one XDP program per interface).
//
// # 802.1Q tags
//
// With Config.Tag every frame is sent with a tag carrying Config.VLANID and
// each Datagram's Priority as its PCP (the header template is
// link/afpacket's), and Recv reports a received tag's PCP as
// Datagram.Priority (0 for an untagged frame). The program matches the tag
// in the frame's bytes, so it must be there when XDP runs. On veth it is
// when the sender wrote it into the frame (link/afpacket, afxdp, a raw
// socket): the kernel moves a tag into the skb's metadata (skb_vlan_untag)
// only after the generic hook, and the driver hook sees the frame's bytes
// as they were sent (both checked by TestTagged on Linux 6.18). A tag
// that travels as metadata instead — put there by a sender's VLAN device
// with transmit VLAN offload (veth keeps skb->vlan_tci across the pair) or
// by a NIC's receive VLAN offload — is invisible to the program in both
// hooks on Linux 6.18: the frame looks untagged, is taken whatever its VLAN
// ID, and Recv reports PCP 0 (TestTagInMetadata pushes such a tag with a
// tc program and checks this). On a NIC, turn receive VLAN offload off
// (ethtool -K DEV rxvlan off); a VLAN device's sender should turn transmit
// VLAN offload off on the veth below it (txvlan off). Reading a metadata
// tag needs the bpf_xdp_metadata_rx_vlan_tag kfunc (Linux 6.8, driver
// hook and device-bound programs only), which the hand-assembled program
// does not use.
//
// # Bad input
//
// What the program passes never reaches the link. What it redirects is
// classified again (rawnet.Classify) and counted by reason in Drops if
// malformed (a length field beyond the frame, ...) or larger than the
// caller's buffer; frames are never read past their descriptors. A full
// ring or an empty fill ring makes the kernel drop and count
// (XDP_STATISTICS, in Drops); it is not an error.
//
// # Goroutines and buffers
//
// Send and Recv may run concurrently (each serialized with itself). Recv
// waits in the Go netpoller (after polling the RX ring for Config.BusyPoll
// if set); Send never blocks for long: when the kernel holds every send
// frame it reclaims completions and yields, and gives up with ErrStalled
// after a second. Send copies dgs[i].Buf into the UMEM;
// Recv copies each payload out of it. Neither allocates per packet. The
// link owns one goroutine (the ARP/ND resolver), which Close stops and
// joins.
package afxdp
