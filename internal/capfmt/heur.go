package capfmt

import (
	"encoding/binary"
	"slices"
)

// heurID names one heuristic sub-dissector of tshark's
// "infiniband.payload" list.
type heurID uint8

const (
	heurSMC heurID = iota
	heurSMBDirect
	heurRPCoRDMA
	heurNVMeRDMA
	heurLNet
	heurISER
	heurEtherType
	heurEoIB
	heurSDP
	heurFCoIB
	numHeur
)

// heurList is the heuristic list in trial order. tshark 4.0's
// dissector_try_heuristic moves a heuristic that claims a packet to the
// front of the list ("bubble the matched entry to the top for faster search
// next time"), so the order is state that carries from packet to packet:
// once EtherType encapsulation has claimed one payload, it is tried before
// RPC-over-RDMA for every later one.
type heurList struct {
	order [numHeur]heurID
	init  bool
}

// list returns the current order, the tshark -G heuristic-decodes order at
// the start of a file.
func (h *heurList) list() *[numHeur]heurID {
	if !h.init {
		h.order = [numHeur]heurID{heurSMC, heurSMBDirect, heurRPCoRDMA, heurNVMeRDMA, heurLNet,
			heurISER, heurEtherType, heurEoIB, heurSDP, heurFCoIB}
		h.init = true
	}
	return &h.order
}

// claimed moves the heuristic at index i to the front.
func (h *heurList) claimed(i int) {
	id := h.order[i]
	copy(h.order[1:i+1], h.order[:i])
	h.order[0] = id
}

// payloadHeuristics emulates dissector_try_heuristic on the enabled
// heuristics of "infiniband.payload". Modelled: smc, smb_direct and lnet
// (they claim payloads by magic numbers), RPC-over-RDMA (it throws on RC
// SENDs shorter than 16 bytes, which drops the ICRC, and reassembles SEND
// messages), EtherType encapsulation (infiniband.payload and a second IP
// layer) and Mellanox EoIB (an inner Ethernet frame on UD). nvme-rdma, iser
// and infiniband_sdp need a CM conversation for their service ID and fcoib
// needs FC SOF/EOF codes; they are treated as never matching (see doc.go).
// It returns false when tshark throws.
func (d *Decoder) payloadHeuristics(st *ibState, pl tvb) bool {
	order := d.heur.list()
	for i, id := range order {
		var claimed, ok bool
		switch id {
		case heurSMC:
			claimed, ok = smcHeur(pl)
		case heurSMBDirect:
			claimed, ok = false, true
			switch st.opcode {
			case 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x16, 0x17:
				claimed, ok = isSMBDirect(pl)
			}
		case heurRPCoRDMA:
			claimed, ok = d.rpcHeur(st, pl)
		case heurLNet:
			claimed, ok = len(pl.B) >= 4 && binary.LittleEndian.Uint32(pl.B) == lnetIBMagic, true
		case heurEtherType:
			claimed, ok = d.ethOverIB(st, pl)
		case heurEoIB:
			claimed, ok = d.eoib(st, pl)
		default:
			claimed, ok = false, true
		}
		if !ok {
			return false // the exception leaves the list untouched
		}
		if claimed {
			d.heur.claimed(i)
			return true
		}
	}
	return true
}

// lnetIBMagic starts every Lustre o2iblnd message (LNET_PROTO_IB_MAGIC).
const lnetIBMagic = 0x0be91b91

// rpcHeur emulates dissect_rpcrdma_ib_heur for the SEND opcodes; the RDMA
// WRITE/READ reassembly it also does only matters after an RPC-over-RDMA
// call set up chunk lists, which goroce does not track.
func (d *Decoder) rpcHeur(st *ibState, pl tvb) (claimed, ok bool) {
	switch st.opcode {
	case 0x04, 0x17: // RC SEND ONLY (with Invalidate)
		return isRPCoRDMA(pl.B, pl.Rep)
	case 0x00, 0x01: // RC SEND FIRST, MIDDLE
		d.rpc.add(st, pl, false)
	case 0x02, 0x16: // RC SEND LAST (with Invalidate)
		msg, rep := d.rpc.add(st, pl, true)
		if rep < 0 {
			return false, true
		}
		return isRPCoRDMA(msg, rep)
	}
	return false, true
}

// ethOverIB emulates dissect_eth_over_ib: bytes 0–1 an EtherType tshark has
// a dissector for, bytes 2–3 zero.
func (d *Decoder) ethOverIB(st *ibState, pl tvb) (claimed, ok bool) {
	if pl.Rep < 4 {
		return false, true
	}
	if !pl.Has(0, 4) {
		return false, false
	}
	et := binary.BigEndian.Uint16(pl.B)
	if binary.BigEndian.Uint16(pl.B[2:]) != 0 || !knownEtherType(et) {
		return false, true
	}
	if pl.Rep == 4 && rejectsEmpty(et) {
		// Nothing follows the 4 bytes (a 2-byte payload and its pad, as in
		// ib_write_lat's default WRITEs): most dissectors throw, but these
		// return 0 for an empty tvb, so dissector_try_uint reports "not
		// found" and the payload goes on to the data dissector, ICRC kept
		// (testdata/ethertype_empty.*).
		return false, true
	}
	from := len(d.items)
	found := d.etherType(et, pl.From(4), st.depth-1) // exceptions are caught
	st.deferred(from, len(d.items))
	if !found { // the IPv6 dissector rejects a version other than 6
		return false, true
	}
	// The payload item is 6 bytes short (tshark subtracts the 6-byte IB
	// CRC length), -1 meaning "to the end".
	n := pl.Rep - 6
	if n == -1 {
		n = len(pl.B)
	}
	if !pl.Has(0, n) {
		return false, false
	}
	d.emit(IBPayload, st.depth, 0, pl.B[:n:n])
	d.emit(IBReserved, st.depth+1, 0, pl.B[2:4:4])
	return true, true
}

// eoib emulates dissect_mellanox_eoib: UD only, first nibble 0xC, then an
// Ethernet frame after the 4-byte EoIB header (shown as data when it is a
// segment of a larger frame).
func (d *Decoder) eoib(st *ibState, pl tvb) (claimed, ok bool) {
	if st.opcode>>5 != 3 {
		return false, true
	}
	if !pl.Has(0, 1) {
		return false, false
	}
	if pl.B[0]&0xf0 != 0xc0 || pl.Rep < 4 {
		return false, true
	}
	if !pl.Has(0, 4) {
		return false, false
	}
	if binary.BigEndian.Uint16(pl.B)&eoibSegmentMask != 0 {
		return true, true
	}
	from := len(d.items)
	ok = d.ethernet(pl.From(4), st.depth-1)
	st.deferred(from, len(d.items))
	if d.inErr > 0 {
		// In an ICMP error packet call_dissector catches the Ethernet
		// dissector's exception.
		ok = true
	}
	return ok, ok
}

// smcHeur emulates dissect_smcr_infiniband_heur (SMC-R LLC messages):
// claimed reports an SMC message, !ok an exception. A v2 LLC type makes it
// read a 16-bit length at offset 1, which throws on a 2-byte payload. A
// claimed message is then dissected, which throws when the message's own
// counts reach past the payload (smcNeed); ordinary RDMA data hits this: an
// interop run's random 1024-byte WRITE MIDDLE began 25 04 00 (REQUEST ADD
// LINK v2, length 1024) and announced 83 GIDs.
func smcHeur(pl tvb) (claimed, ok bool) {
	claimed, ok = smcClaims(pl)
	if claimed && smcNeed(pl.B) > len(pl.B) {
		return true, false
	}
	return claimed, ok
}

// smcClaims is the heuristic's test itself.
func smcClaims(pl tvb) (claimed, ok bool) {
	if len(pl.B) < 2 {
		return false, true
	}
	b0, b1 := pl.B[0], pl.B[1]
	v1 := b1 == 0x2c && (b0 >= 0x01 && b0 <= 0x09 || b0 == 0xfe)
	v2 := b0 >= 0x21 && b0 <= 0x22 || b0 >= 0x24 && b0 <= 0x27 || b0 == 0x29
	if v1 == v2 {
		return false, true
	}
	var n int
	if v1 {
		n = int(b1)
	} else {
		if len(pl.B) < 3 {
			return false, false
		}
		n = int(binary.BigEndian.Uint16(pl.B[1:]))
	}
	return n == pl.Rep, true
}

// smcNeed is how many payload bytes dissect_smcr_infiniband reads for the
// claimed LLC message in b (tshark 4.0): fixed fields from offset 3 on, then
// per-type lists whose counts it takes from the message without checking
// them against its length. When a count byte itself is missing it returns
// more than len(b). Checked against tshark 4.0.17 by
// testdata/tshark/probe/probe_smc.pcap.
func smcNeed(b []byte) int {
	get := func(o int) int { // a byte the dissector reads to size what follows
		if o >= len(b) {
			return -1
		}
		return int(b[o])
	}
	miss := len(b) + 1
	resp := get(3) // the response flag, read for every type but RMBE control
	if resp < 0 && b[0] != 0xfe {
		return miss
	}
	isResp := resp >= 0 && resp&0x80 != 0
	switch b[0] {
	case 0x01, 0x21: // CONFIRM LINK: flags, MAC, GID, QPN, link number, user ID, max links
		return 35
	case 0x02, 0x22: // ADD LINK; a v2 request adds a target GID and 16 bytes per rkey
		if b[0] == 0x02 || isResp {
			return 36
		}
		hi, lo := get(70), get(71)
		if hi < 0 || lo < 0 {
			return miss
		}
		return 72 + 16*(hi<<8|lo)
	case 0x03: // ADD LINK CONTINUATION: up to two rkey pairs of 16 bytes
		n := get(5)
		switch {
		case n < 0:
			return miss
		case n == 0:
			return 6
		case n == 1:
			return 22
		}
		return 38
	case 0x04, 0x24: // DELETE LINK: flags, link number, reason code
		return 9
	case 0x06, 0x26: // CONFIRM RKEY: an rkey and address, then at most two 13-byte entries
		n := get(4)
		if n < 0 {
			return miss
		}
		return 17 + 13*min(n, 2)
	case 0x08: // CONFIRM RKEY CONTINUATION: at most three 13-byte entries
		n := get(4)
		if n < 0 {
			return miss
		}
		return 5 + 13*min(n, 3)
	case 0x09, 0x29: // DELETE RKEY: 4 bytes per rkey; a v2 response counts at byte 5, at most 8
		n := get(4)
		if b[0] == 0x29 && isResp {
			n = min(get(5), 8)
		}
		if n < 0 {
			return miss
		}
		return 8 + 4*n
	case 0x25: // REQUEST ADD LINK v2: 16 bytes per GID, counted at byte 24
		n := get(24)
		if n < 0 {
			return miss
		}
		return 28 + 16*n
	case 0xfe: // RMBE control: sequence number, alert token, cursors, two flag bytes
		return 26
	}
	return 4 // TEST LINK and the v1 types without a dissector: the response flag
}

// isSMBDirect emulates is_smb_direct (SMB Direct over RDMA).
func isSMBDirect(pl tvb) (claimed, ok bool) {
	n := pl.Rep
	if n < 20 {
		return false, true
	}
	b := pl.B
	le16 := func(o int) (uint16, bool) {
		if o+2 > len(b) {
			return 0, false
		}
		return binary.LittleEndian.Uint16(b[o:]), true
	}
	le32 := func(o int) (uint32, bool) {
		if o+4 > len(b) {
			return 0, false
		}
		return binary.LittleEndian.Uint32(b[o:]), true
	}
	var w [4]uint16
	for i := range w {
		v, ok := le16(2 * i)
		if !ok {
			return false, false
		}
		w[i] = v
	}
	if n == 32 && w[0] == 0x0100 && w[1] == 0x0100 && w[2] == 0x0100 && w[3] == 0 {
		return true, true // negotiate response
	}
	negReq := w[0] == 0x0100 && w[1] == 0x0100 && w[2] == 0
	data := w[0] <= 255 && w[1] <= 255 && w[2] <= 1 && w[3] == 0
	if n == 20 {
		for _, o := range [...]int{8, 12, 16} {
			v, ok := le32(o)
			if !ok {
				return false, false
			}
			if v != 0 {
				data = false
			}
		}
		if negReq && !data || data {
			return true, true
		}
	}
	if n <= 24 {
		return false, true
	}
	off, ok1 := le32(12)
	if !ok1 {
		return false, false
	}
	if off != 24 {
		return false, true
	}
	ln, ok2 := le32(16)
	if !ok2 {
		return false, false
	}
	if ln == 0 {
		return false, true
	}
	pad, ok3 := le32(20)
	if !ok3 {
		return false, false
	}
	return pad == 0 && data, true
}

// eoibSegmentMask covers the "more segments" flag and the segment offset
// of the Mellanox EoIB header; a segmented frame is shown as data.
const eoibSegmentMask = 0x003f

// RPC-over-RDMA message types and header sizes (packet-rpcrdma.c).
const (
	rdmaMsg        = 0
	rdmaNoMsg      = 1
	rdmaMsgP       = 2
	rdmaDone       = 3
	rdmaError      = 4
	rpcrdmaHdrSize = 16
	rpcrdmaMsgSize = rpcrdmaHdrSize + 12
	rpcrdmaMsgPSz  = rpcrdmaMsgSize + 8
)

// isRPCoRDMA emulates packet_is_rpcordma on a message whose first len(b)
// bytes were captured and whose length is rep. It reads the XID and the
// message type before it checks the length, which is why SENDs shorter
// than 16 bytes throw (ok false). accept reports a message tshark hands to
// the RPC-over-RDMA dissector.
func isRPCoRDMA(b []byte, rep int) (accept, ok bool) {
	if len(b) < 16 {
		return false, false
	}
	xid := binary.BigEndian.Uint32(b)
	msgType := binary.BigEndian.Uint32(b[12:])
	if rep < rpcrdmaHdrSize {
		return false, true
	}
	var off int
	switch msgType {
	case rdmaMsg:
		if rep < rpcrdmaMsgSize {
			return false, true
		}
		off = rpcrdmaHdrSize
	case rdmaMsgP:
		if rep < rpcrdmaMsgPSz {
			return false, true
		}
		off = rpcrdmaHdrSize + 8
	case rdmaNoMsg, rdmaDone, rdmaError:
		return true, true
	default:
		return false, true
	}
	size, ok := chunkListsSize(b, uint(rep), uint(off))
	if !ok {
		return false, false
	}
	if size == 0 {
		return false, true
	}
	off += int(size)
	if off+4 > rep {
		return false, true
	}
	if off+4 > len(b) {
		return false, false
	}
	return binary.BigEndian.Uint32(b[off:]) == xid, true
}

// ntohl reads a big-endian uint32 at off, reporting false where tshark
// would throw.
func ntohl(b []byte, off uint) (uint32, bool) {
	if off > uint(len(b)) || uint(len(b))-off < 4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(b[off:]), true
}

// chunkListsSize is get_chunk_lists_size: the read list, the write list and
// the reply chunk, each returning 0 when it runs past max.
func chunkListsSize(b []byte, max, off uint) (uint, bool) {
	start := off
	for _, f := range [...]func([]byte, uint, uint) (uint, bool){readListSize, writeListSize, replyChunkSize} {
		n, ok := f(b, max, off)
		if !ok || n == 0 {
			return 0, ok
		}
		off += n
	}
	return off - start, true
}

func readListSize(b []byte, max, off uint) (uint, bool) {
	start := off
	for {
		follows, ok := ntohl(b, off)
		if !ok {
			return 0, false
		}
		off += 4
		if off > max {
			return 0, true
		}
		if follows == 0 {
			return off - start, true
		}
		off += 20
		if off > max {
			return 0, true
		}
	}
}

func writeChunkSize(b []byte, max, off uint) (uint, bool) {
	// max_count uses tvb_reported_length_remaining(offset + 4), which is
	// 0 past the end.
	var maxCount uint
	if off+4 <= max {
		maxCount = (max - off - 4) / 16
	}
	count, ok := ntohl(b, off)
	if !ok {
		return 0, false
	}
	n := uint(count)
	if n > maxCount {
		n = maxCount
	}
	return 4 + n*16, true
}

func writeListSize(b []byte, max, off uint) (uint, bool) {
	start := off
	for {
		follows, ok := ntohl(b, off)
		if !ok {
			return 0, false
		}
		off += 4
		if off > max {
			return 0, true
		}
		if follows == 0 {
			return off - start, true
		}
		n, ok := writeChunkSize(b, max, off)
		if !ok {
			return 0, false
		}
		if max-off < n {
			return 0, true
		}
		off += n
	}
}

func replyChunkSize(b []byte, max, off uint) (uint, bool) {
	start := off
	follows, ok := ntohl(b, off)
	if !ok {
		return 0, false
	}
	off += 4
	if off > max {
		return 0, true
	}
	if follows != 0 {
		n, ok := writeChunkSize(b, max, off)
		if !ok {
			return 0, false
		}
		off += n
		if off > max {
			return 0, true
		}
	}
	return off - start, true
}

// rpcState emulates the SEND reassembly of tshark's RPC-over-RDMA
// heuristic: a SEND FIRST opens a message keyed by its PSN in the
// conversation (IP pair, destination QP); MIDDLE and LAST find the message
// with the largest first PSN not above theirs and add themselves as
// fragment number PSN − first PSN; a LAST completes the message when every
// fragment from 0 on is there. Only the first maxStored bytes of each
// message are kept: enough for the RPC-over-RDMA header checks.
type rpcState struct {
	convs map[rpcConvKey]*rpcConv
	frags map[rpcFragKey]*rpcFrags
	msgID uint32
	buf   []byte // reassembled message prefix of the current LAST
	// storedTotal bounds the fragment bytes kept for messages that never
	// complete (a lost SEND LAST), so memory stays bounded on any file.
	storedTotal int
}

// maxStored bytes of each message, and maxStoredTotal of all pending
// messages, are kept for the RPC-over-RDMA header checks; beyond them only
// lengths are tracked.
const (
	maxStored      = 64 << 10
	maxStoredTotal = 64 << 20
)

type rpcConvKey struct {
	a, b [16]byte // IP addresses, ordered
	qp   uint32
}

type rpcSend struct {
	psn uint32
	id  uint32
}

type rpcConv struct {
	sends []rpcSend // sorted by psn
}

type rpcFragKey struct {
	id  uint32
	src [16]byte // reassembly keys are directional
}

type rpcFrag struct {
	num  uint32
	n    int    // captured length
	data []byte // up to maxStored bytes
}

type rpcFrags struct {
	frags  []rpcFrag
	stored int // bytes of data kept
	last   uint32
	haveLn bool
}

// addrs returns the source and destination addresses of the IP header, as
// 16-byte values.
func addrs(ip []byte) (src, dst [16]byte) {
	switch {
	case len(ip) >= 40 && ip[0]>>4 == 6:
		copy(src[:], ip[8:24])
		copy(dst[:], ip[24:40])
	case len(ip) >= 20:
		copy(src[12:], ip[12:16])
		copy(dst[12:], ip[16:20])
	}
	return src, dst
}

// add records a SEND FIRST/MIDDLE/LAST payload. For a LAST it returns the
// message tshark hands to packet_is_rpcordma: the reassembled message when
// this fragment completed it, else the packet's own payload; rep is -1 when
// too little of a reassembled message was kept to tell.
func (r *rpcState) add(st *ibState, pl tvb, last bool) ([]byte, int) {
	src, dst := addrs(st.ipHdr)
	key := rpcConvKey{a: src, b: dst, qp: st.destport}
	if string(key.a[:]) > string(key.b[:]) {
		key.a, key.b = key.b, key.a
	}
	if r.convs == nil {
		r.convs = make(map[rpcConvKey]*rpcConv)
		r.frags = make(map[rpcFragKey]*rpcFrags)
	}
	c := r.convs[key]
	if c == nil {
		c = &rpcConv{}
		r.convs[key] = c
	}
	var send rpcSend
	first := st.opcode == 0x00
	if first {
		r.msgID++
		if r.msgID == 0 {
			r.msgID++
		}
		send = rpcSend{psn: st.psn, id: r.msgID}
		i, found := slices.BinarySearchFunc(c.sends, st.psn, func(s rpcSend, p uint32) int { return cmpU32(s.psn, p) })
		if found {
			c.sends[i] = send
		} else {
			c.sends = slices.Insert(c.sends, i, send)
		}
	} else {
		i, found := slices.BinarySearchFunc(c.sends, st.psn, func(s rpcSend, p uint32) int { return cmpU32(s.psn, p) })
		if !found {
			if i == 0 {
				return pl.B, pl.Rep // no message: the packet stands alone
			}
			i--
		}
		send = c.sends[i]
	}
	num := st.psn - send.psn
	if int32(num) < 0 {
		return pl.B, pl.Rep
	}
	if len(pl.B) == 0 && last {
		return pl.B, pl.Rep // nothing added; the reassembly is not done
	}
	fk := rpcFragKey{id: send.id, src: src}
	fs := r.frags[fk]
	if fs == nil {
		fs = &rpcFrags{}
		r.frags[fk] = fs
	}
	fr := rpcFrag{num: num, n: len(pl.B)}
	if fs.stored < maxStored && r.storedTotal < maxStoredTotal {
		fr.data = append([]byte(nil), pl.B[:min(len(pl.B), maxStored-fs.stored)]...)
		fs.stored += len(fr.data)
		r.storedTotal += len(fr.data)
	}
	// A repeated fragment number keeps the first fragment's data (tshark
	// flags the overlap and reassembles from the first).
	if i, found := slices.BinarySearchFunc(fs.frags, num, func(f rpcFrag, n uint32) int { return cmpU32(f.num, n) }); !found {
		fs.frags = slices.Insert(fs.frags, i, fr)
	}
	if last && !fs.haveLn { // a later, different tail does not move the end
		fs.last, fs.haveLn = num, true
	}
	if !fs.haveLn || !last {
		return pl.B, pl.Rep
	}
	// Complete when fragments 0..last are all present (tshark counts the
	// run of consecutive numbers from 0 and compares it with the tail's).
	run := uint32(0)
	for _, f := range fs.frags {
		if f.num == run {
			run++
		}
	}
	if run <= fs.last {
		return pl.B, pl.Rep
	}
	delete(r.frags, fk) // a reassembled message leaves the table
	r.storedTotal -= fs.stored
	r.buf = r.buf[:0]
	// The message is every fragment, beyond the tail too: tshark's
	// defragmenter concatenates the whole (sorted) list.
	total, whole := 0, true
	for _, f := range fs.frags {
		total += f.n
		if whole {
			r.buf = append(r.buf, f.data...)
			whole = len(f.data) == f.n
		}
	}
	if !whole && len(r.buf) < rpcrdmaMsgPSz {
		// Not enough of the message was kept to run the checks: assume
		// the common case, a message that is not RPC-over-RDMA.
		return nil, -1
	}
	if !whole {
		// The header checks read the prefix; present it as the whole
		// message so that reads beyond it do not count as throws.
		return r.buf, len(r.buf)
	}
	return r.buf, total
}

func cmpU32(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// rejectsEmpty reports whether tshark 4.0.17's dissector for et returns 0
// (rejects) an empty tvb instead of throwing: measured for every entry of
// etherTypes with testdata/ethertype_empty.pcap.
func rejectsEmpty(et uint16) bool {
	switch et {
	case 0x0059, 0x00fd, 0x0842, 0x0baf, 0x2323, 0x3e3f, 0x8204, 0x886c, 0x8874, 0x887b, 0x8899,
		0x88ab, 0x88e1, 0x88f8, 0x8901, 0x8914, 0x891d, 0xaefe, 0xc0de, 0xc0df, 0xd00d:
		return true
	}
	return false
}

// knownEtherType reports whether tshark 4.0.17 has a dissector registered
// for et in its "ethertype" table (tshark -G decodes).
func knownEtherType(et uint16) bool {
	_, found := slices.BinarySearch(etherTypes[:], et)
	return found
}

// etherTypes lists the "ethertype" dissector table of tshark 4.0.17.
var etherTypes = [...]uint16{
	0x0059, 0x0061, 0x0065, 0x0067, 0x00fd, 0x0600, 0x0641, 0x0643, 0x0644, 0x0645,
	0x0712, 0x0713, 0x0800, 0x0806, 0x0842, 0x08f0, 0x08ff, 0x0bad, 0x0baf, 0x0c15,
	0x2001, 0x2065, 0x2067, 0x22e5, 0x22ea, 0x22f0, 0x22f1, 0x22f3, 0x22f4, 0x2323,
	0x2452, 0x3e3f, 0x4305, 0x4742, 0x6000, 0x6003, 0x6004, 0x6558, 0x8021, 0x8023,
	0x8035, 0x8038, 0x8057, 0x8059, 0x809a, 0x809b, 0x80d5, 0x80e1, 0x80f3, 0x80fd,
	0x80ff, 0x8100, 0x8102, 0x8103, 0x8133, 0x8137, 0x814c, 0x8181, 0x81fd, 0x8204,
	0x8207, 0x8281, 0x86dd, 0x872d, 0x8783, 0x8808, 0x8809, 0x8847, 0x8848, 0x8863,
	0x8864, 0x886c, 0x886d, 0x886f, 0x8870, 0x8874, 0x887b, 0x888e, 0x8892, 0x8899,
	0x889a, 0x889b, 0x88a1, 0x88a2, 0x88a4, 0x88a8, 0x88a9, 0x88ab, 0x88ae, 0x88b4,
	0x88b7, 0x88b8, 0x88ba, 0x88bb, 0x88c7, 0x88ca, 0x88cc, 0x88cd, 0x88d8, 0x88d9,
	0x88dc, 0x88de, 0x88e1, 0x88e3, 0x88e5, 0x88e7, 0x88ee, 0x88f5, 0x88f6, 0x88f7,
	0x88f8, 0x88fb, 0x8901, 0x8902, 0x8906, 0x8909, 0x890d, 0x8911, 0x8914, 0x8915,
	0x8917, 0x891d, 0x8926, 0x892d, 0x892f, 0x893a, 0x893f, 0x8940, 0x8942, 0x8947,
	0x894f, 0x8988, 0x8ffd, 0x9000, 0x9021, 0x9022, 0x9100, 0x9104, 0x99fe, 0xa0ed,
	0xaaaa, 0xabcd, 0xaefe, 0xb4e3, 0xbbbb, 0xc021, 0xc023, 0xc029, 0xc02b, 0xc02d,
	0xc0de, 0xc0df, 0xc223, 0xcafe, 0xd00d, 0xd28b, 0xe555, 0xf052, 0xf1c1, 0xfcfc,
}
