package capfmt

import (
	"encoding/binary"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/rocev2"
)

// ibSeq is the header sequence tshark 4.0's find_next_header_sequence
// assigns to an opcode. It differs from goroce's own opcode table (package
// bth) on purpose: tshark does not know FLUSH, ATOMIC WRITE or CNP, reads
// opcodes 0x40–0x5F as DC (RD headers after a 20-byte BTH), and has a few
// bugs (RD ACKNOWLEDGE without its RDETH) that the goldens pin.
type ibSeq uint8

const (
	seqVendor ibSeq = iota // unknown: everything after the BTH is "vendor" data
	seqPayld
	seqImmdtPayld
	seqRethPayld
	seqRethImmdtPayld
	seqReth // READ REQUEST: RETH, then the payload path anyway
	seqAethPayld
	seqAeth
	seqAethAtomicAck
	seqAtomicETH
	seqIethPayld
	seqDethPayld
	seqDethImmdtPayld
	seqRdethDethPayld
	seqRdethDethImmdtPayld
	seqRdethDethRethPayld
	seqRdethDethRethImmdtPayld
	seqRdethDethReth
	seqRdethAethPayld
	seqRdethPayld
	seqRdethAeth // tshark parses only the AETH here
	seqRdethAethAtomicAck
	seqRdethDethAtomicETH
	seqDCCETH
)

// ibSeqs is tshark 4.0's opcode → header sequence table (the opCode_*
// arrays of packet-infiniband.c); opcodes not listed are seqVendor, and
// 0x55 is decided by the DC connect bit.
var ibSeqs = [256]ibSeq{
	0x00: seqPayld, 0x01: seqPayld, 0x02: seqPayld, 0x04: seqPayld, 0x07: seqPayld,
	0x08: seqPayld, 0x0E: seqPayld,
	0x20: seqPayld, 0x21: seqPayld, 0x22: seqPayld, 0x24: seqPayld, 0x27: seqPayld, 0x28: seqPayld,
	0x03: seqImmdtPayld, 0x05: seqImmdtPayld, 0x09: seqImmdtPayld,
	0x23: seqImmdtPayld, 0x25: seqImmdtPayld, 0x29: seqImmdtPayld,
	0x06: seqRethPayld, 0x0A: seqRethPayld, 0x26: seqRethPayld, 0x2A: seqRethPayld,
	0x0B: seqRethImmdtPayld, 0x2B: seqRethImmdtPayld,
	0x0C: seqReth,
	0x0D: seqAethPayld, 0x0F: seqAethPayld, 0x10: seqAethPayld,
	0x11: seqAeth,
	0x12: seqAethAtomicAck,
	0x13: seqAtomicETH, 0x14: seqAtomicETH,
	0x16: seqIethPayld, 0x17: seqIethPayld,
	0x64: seqDethPayld,
	0x65: seqDethImmdtPayld,
	0x40: seqRdethDethPayld, 0x41: seqRdethDethPayld, 0x42: seqRdethDethPayld,
	0x44: seqRdethDethPayld, 0x47: seqRdethDethPayld, 0x48: seqRdethDethPayld,
	0x43: seqRdethDethImmdtPayld, 0x45: seqRdethDethImmdtPayld, 0x49: seqRdethDethImmdtPayld,
	0x46: seqRdethDethRethPayld, 0x4A: seqRdethDethRethPayld,
	0x4B: seqRdethDethRethImmdtPayld,
	0x4C: seqRdethDethReth,
	0x4D: seqRdethAethPayld, 0x4F: seqRdethAethPayld, 0x50: seqRdethAethPayld,
	0x4E: seqRdethPayld,
	0x51: seqRdethAeth,
	0x52: seqRdethAethAtomicAck,
	0x53: seqRdethDethAtomicETH, 0x54: seqRdethDethAtomicETH,
}

// hdrKind is one extension header as tshark parses it.
type hdrKind uint8

const (
	hdrNone hdrKind = iota
	hdrRDETH
	hdrDETH
	hdrRETH
	hdrImmDt
	hdrAETH
	hdrAtomicAck
	hdrAtomicETH
	hdrIETH
	hdrDCCETH // skipped, no items
)

// hdrSizes are the sizes tshark subtracts from packetLength.
var hdrSizes = [...]uint16{hdrRDETH: 4, hdrDETH: 8, hdrRETH: 16, hdrImmDt: 4, hdrAETH: 4,
	hdrAtomicAck: 8, hdrAtomicETH: 28, hdrIETH: 4, hdrDCCETH: 16}

// seqSpecs lists, per header sequence, the headers tshark parses in order
// and whether parse_PAYLOAD follows (the case labels of the switch in
// dissect_infiniband_common, including RD ACKNOWLEDGE's missing RDETH).
var seqSpecs = [...]struct {
	hdrs    [4]hdrKind
	payload bool
}{
	seqPayld:                   {payload: true},
	seqImmdtPayld:              {hdrs: [4]hdrKind{hdrImmDt}, payload: true},
	seqRethPayld:               {hdrs: [4]hdrKind{hdrRETH}, payload: true},
	seqRethImmdtPayld:          {hdrs: [4]hdrKind{hdrRETH, hdrImmDt}, payload: true},
	seqReth:                    {hdrs: [4]hdrKind{hdrRETH}, payload: true},
	seqAethPayld:               {hdrs: [4]hdrKind{hdrAETH}, payload: true},
	seqAeth:                    {hdrs: [4]hdrKind{hdrAETH}},
	seqAethAtomicAck:           {hdrs: [4]hdrKind{hdrAETH, hdrAtomicAck}},
	seqAtomicETH:               {hdrs: [4]hdrKind{hdrAtomicETH}},
	seqIethPayld:               {hdrs: [4]hdrKind{hdrIETH}, payload: true},
	seqDethPayld:               {hdrs: [4]hdrKind{hdrDETH}, payload: true},
	seqDethImmdtPayld:          {hdrs: [4]hdrKind{hdrDETH, hdrImmDt}, payload: true},
	seqRdethDethPayld:          {hdrs: [4]hdrKind{hdrRDETH, hdrDETH}, payload: true},
	seqRdethDethImmdtPayld:     {hdrs: [4]hdrKind{hdrRDETH, hdrDETH, hdrImmDt}, payload: true},
	seqRdethDethRethPayld:      {hdrs: [4]hdrKind{hdrRDETH, hdrDETH, hdrRETH}, payload: true},
	seqRdethDethRethImmdtPayld: {hdrs: [4]hdrKind{hdrRDETH, hdrDETH, hdrRETH, hdrImmDt}, payload: true},
	seqRdethDethReth:           {hdrs: [4]hdrKind{hdrRDETH, hdrDETH, hdrRETH}},
	seqRdethAethPayld:          {hdrs: [4]hdrKind{hdrRDETH, hdrAETH}, payload: true},
	seqRdethPayld:              {hdrs: [4]hdrKind{hdrRDETH}, payload: true},
	seqRdethAeth:               {hdrs: [4]hdrKind{hdrAETH}},
	seqRdethAethAtomicAck:      {hdrs: [4]hdrKind{hdrRDETH, hdrAETH, hdrAtomicAck}},
	seqRdethDethAtomicETH:      {hdrs: [4]hdrKind{hdrRDETH, hdrDETH, hdrAtomicETH}},
	seqDCCETH:                  {hdrs: [4]hdrKind{hdrDCCETH}, payload: true},
}

// ibHeader parses one extension header at *off, reporting false where
// tshark throws (the header was not captured whole).
func (d *Decoder) ibHeader(st *ibState, h hdrKind, off *int) bool {
	switch h {
	case hdrRDETH:
		return d.ibRDETH(st, off)
	case hdrDETH:
		return d.ibDETH(st, off)
	case hdrRETH:
		return d.ibRETH(st, off)
	case hdrImmDt:
		return d.ibTwice(st, off, IBImmDt)
	case hdrAETH:
		return d.ibAETH(st, off)
	case hdrAtomicAck:
		return d.ibAtomicAckETH(st, off)
	case hdrAtomicETH:
		return d.ibAtomicETH(st, off)
	case hdrIETH:
		return d.ibTwice(st, off, IBIETH)
	}
	return true
}

// ibCRCLen is the CRC length tshark reserves after a RoCEv2 payload.
const ibCRCLen = 4

// ibState carries what tshark keeps in pinfo and struct infinibandinfo
// while it dissects one InfiniBand packet.
type ibState struct {
	t        tvb
	depth    int    // depth of the header items (the infiniband item is depth-1)
	opcode   uint8  // BTH opcode
	psn      uint32 // BTH PSN
	srcport  uint32 // pinfo->srcport: DETH source QP, else 0xffffffff
	destport uint32 // pinfo->destport: BTH destination QP
	ipHdr    []byte
	// defers delimit items payload heuristics dissected into the
	// top-level tree; they move behind the InfiniBand subtree.
	defers  [4][2]int
	nDefers int
}

// deferred records that the items from index from on belong to the
// top-level tree.
func (st *ibState) deferred(from, to int) {
	if to > from && st.nDefers < len(st.defers) {
		st.defers[st.nDefers] = [2]int{from, to}
		st.nDefers++
	}
}

// infiniband emulates dissect_rroce: the UDP payload t starts at the BTH.
// Items go below an "infiniband" item at depth; the ICRC status (goroce's
// own field) closes the subtree.
func (d *Decoder) infiniband(t tvb, depth int, ipHdr, udpHdr []byte) {
	p := d.p
	outer := !p.RoCE
	if outer {
		p.RoCE = true
		p.IPHeader, p.UDPHeader, p.Transport = ipHdr, udpHdr, t.B
	}
	d.emit(ProtoInfiniband, depth, 0, nil)
	st := ibState{t: t, depth: depth + 1, ipHdr: ipHdr, srcport: 0xffffffff}
	d.ibBody(&st)

	// tshark's tree has the payload heuristics' protocols after the
	// InfiniBand protocol: move each deferred range behind the items
	// added since, last range first, keeping the order.
	end := len(d.items)
	for i := st.nDefers - 1; i >= 0; i-- {
		from, to := st.defers[i][0], st.defers[i][1]
		rotate(d.items[from:end], to-from)
		end -= to - from
	}
	d.icrc(t, ipHdr, udpHdr, depth+1, end, outer)
}

// icrc verifies the ICRC of a RoCEv2 transport packet when the whole of it
// was captured, records the result for the outermost RoCE layer, and
// inserts roce.icrc.status and roce.icrc.computed at index at.
func (d *Decoder) icrc(t tvb, ipHdr, udpHdr []byte, depth, at int, outer bool) {
	if d.cfg.SkipICRC || len(t.B) != t.Rep || len(t.B) < bth.Size+bth.ICRCSize || len(ipHdr) == 0 {
		return
	}
	n := len(t.B) - bth.ICRCSize
	computed := rocev2.ComputeICRC(ipHdr, udpHdr, t.B[:n])
	good := rocev2.ReadICRC(t.B[n:]) == computed
	if outer {
		d.p.ICRCChecked, d.p.ICRCGood = true, good
	}
	var wire [4]byte
	rocev2.PutICRC(wire[:], computed)
	status := uint64(0)
	if good {
		status = 1
	}
	d.insert(at, Item{Field: ICRCStatus, Depth: uint8(depth), Value: status},
		Item{Field: ICRCComputed, Depth: uint8(depth), Value: uint64(binary.BigEndian.Uint32(wire[:]))})
}

// insert puts two items at index at, shifting the rest.
func (d *Decoder) insert(at int, a, b Item) {
	items := append(d.items, a, b)
	copy(items[at+2:], items[at:len(items)-2])
	items[at], items[at+1] = a, b
	d.items = items
}

// rotate moves the first k items of s to its end, keeping both parts in
// order, without allocating.
func rotate(s []Item, k int) {
	reverse(s[:k])
	reverse(s[k:])
	reverse(s)
}

func reverse(s []Item) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

// ibBody is dissect_infiniband_common from the BTH on. Every early return
// is a place where tshark throws (the item did not fit in the captured
// bytes) and abandons the rest of the InfiniBand tree.
func (d *Decoder) ibBody(st *ibState) {
	t := st.t
	if !t.Has(0, 1) {
		return
	}
	b := t.B
	op := b[0]
	bthSize := bth.Size
	dctConnect := false
	if op>>5 == 2 { // DC: tshark reads 8 more BTH bytes
		if !t.Has(1, 1) {
			return
		}
		dctConnect = b[1]&0x80 == 0
		bthSize += 8
	}
	if !t.Has(0, bthSize) {
		return
	}
	h := bth.Header(b[:bth.Size:bth.Size])
	dep := st.depth
	d.emit(IBBTH, dep, 0, b[:bthSize:bthSize])
	d.emit(IBOpcode, dep+1, uint64(op), nil)
	d.emit(IBSolicitedEvent, dep+1, b2u(h.SolicitedEvent()), nil)
	d.emit(IBMigReq, dep+1, b2u(h.MigReq()), nil)
	d.emit(IBPadCount, dep+1, uint64(h.PadCount()), nil)
	d.emit(IBTVer, dep+1, uint64(h.TVer()), nil)
	d.emit(IBPKey, dep+1, uint64(h.PKey()), nil)
	d.emit(IBReserved, dep+1, 0, b[4:5:5])
	d.emit(IBDestQP, dep+1, uint64(h.DestQP()), nil)
	d.emit(IBAckReq, dep+1, b2u(h.AckReq()), nil)
	d.emit(IBReserved7, dep+1, uint64(h.Resv7()), nil)
	d.emit(IBPSN, dep+1, uint64(h.PSN()), nil)
	st.opcode, st.psn, st.destport = op, uint32(h.PSN()), uint32(h.DestQP())

	off := bthSize
	// packetLength is a guint16 in tshark; the wrap-around is part of the
	// behaviour (a short DC packet makes it huge and skips the payload).
	pktLen := uint16(t.Remaining(0)) - uint16(bthSize)
	seq := ibSeqs[op]
	if op == 0x55 {
		seq = seqPayld
		if dctConnect {
			seq = seqDCCETH
		}
	}
	if seq == seqVendor {
		// parse_VENDOR's rest-of-packet item leaves nothing for the CRC
		// search (tshark 4.0 never shows a CRC after vendor data).
		d.ibVendor(st, off)
		return
	}
	spec := &seqSpecs[seq]
	for _, h := range spec.hdrs {
		if h == hdrNone {
			break
		}
		if h == hdrDCCETH {
			off += 16 // parse_DCCETH skips the header without adding items
		} else if !d.ibHeader(st, h, &off) {
			return
		}
		pktLen -= hdrSizes[h]
	}
	if spec.payload {
		var ok bool
		if off, ok = d.ibPayload(st, off, int(pktLen)); !ok {
			return
		}
	}
	// The CRCs: whatever is left after the last parsed header decides.
	switch t.Remaining(off) {
	case 6:
		if !t.Has(off, 4) {
			return
		}
		d.emit(IBInvariantCRC, dep, uint64(binary.BigEndian.Uint32(b[off:])), nil)
		if !t.Has(off+4, 2) {
			return
		}
		d.emit(IBVariantCRC, dep, uint64(binary.BigEndian.Uint16(b[off+4:])), nil)
	case 4:
		if !t.Has(off, 4) {
			return
		}
		d.emit(IBInvariantCRC, dep, uint64(binary.BigEndian.Uint32(b[off:])), nil)
	case 2:
		if !t.Has(off, 2) {
			return
		}
		d.emit(IBVariantCRC, dep, uint64(binary.BigEndian.Uint16(b[off:])), nil)
	}
}

func b2u(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

func be24(b []byte) uint64 { return uint64(b[0])<<16 | uint64(b[1])<<8 | uint64(b[2]) }

// ibVendor is parse_VENDOR: a 4-byte item and a child covering the rest of
// the captured packet, both with the same field. The offset does not move.
func (d *Decoder) ibVendor(st *ibState, off int) {
	t := st.t
	if !t.Has(off, 4) {
		return
	}
	d.emit(IBVendor, st.depth, 0, t.B[off:off+4:off+4])
	d.emit(IBVendor, st.depth+1, 0, t.B[off:len(t.B):len(t.B)])
}

func (d *Decoder) ibRDETH(st *ibState, off *int) bool {
	t, o := st.t, *off
	if !t.Has(o, 4) {
		return false
	}
	d.emit(IBReserved, st.depth+1, 0, t.B[o:o+1:o+1])
	*off = o + 4
	return true
}

func (d *Decoder) ibDETH(st *ibState, off *int) bool {
	t, o := st.t, *off
	if !t.Has(o, 8) {
		return false
	}
	b := t.B[o : o+8 : o+8]
	d.emit(IBDETH, st.depth, 0, b)
	d.emit(IBQKey, st.depth+1, uint64(binary.BigEndian.Uint32(b)), nil)
	d.emit(IBReserved, st.depth+1, 0, b[4:5:5])
	src := be24(b[5:])
	d.emit(IBSrcQP, st.depth+1, src, nil)
	st.srcport = uint32(src)
	*off = o + 8
	return true
}

func (d *Decoder) ibRETH(st *ibState, off *int) bool {
	t, o := st.t, *off
	if !t.Has(o, 16) {
		return false
	}
	b := t.B[o : o+16 : o+16]
	d.emit(IBRETH, st.depth, 0, b)
	d.emit(IBVA, st.depth+1, binary.BigEndian.Uint64(b), nil)
	d.emit(IBRKey, st.depth+1, uint64(binary.BigEndian.Uint32(b[8:])), nil)
	d.emit(IBDMALen, st.depth+1, uint64(binary.BigEndian.Uint32(b[12:])), nil)
	*off = o + 16
	return true
}

// ibAtomicETH adds the AtomicETH; its VA and R_Key reuse the RETH fields'
// ids, as in tshark.
func (d *Decoder) ibAtomicETH(st *ibState, off *int) bool {
	t, o := st.t, *off
	if !t.Has(o, 28) {
		return false
	}
	b := t.B[o : o+28 : o+28]
	d.emit(IBAtomicETH, st.depth, 0, b)
	d.emit(IBVA, st.depth+1, binary.BigEndian.Uint64(b), nil)
	d.emit(IBRKey, st.depth+1, uint64(binary.BigEndian.Uint32(b[8:])), nil)
	d.emit(IBSwapData, st.depth+1, binary.BigEndian.Uint64(b[12:]), nil)
	d.emit(IBCompareData, st.depth+1, binary.BigEndian.Uint64(b[20:]), nil)
	*off = o + 28
	return true
}

func (d *Decoder) ibAETH(st *ibState, off *int) bool {
	t, o := st.t, *off
	if !t.Has(o, 4) {
		return false
	}
	b := t.B[o : o+4 : o+4]
	s := b[0]
	d.emit(IBAETH, st.depth, 0, b)
	d.emit(IBSyndrome, st.depth+1, uint64(s), nil)
	d.emit(IBSyndromeReserved, st.depth+2, uint64(s>>7), nil)
	kind := (s >> 5) & 3
	d.emit(IBSyndromeOpcode, st.depth+2, uint64(kind), nil)
	v := uint64(s & 0x1f)
	switch kind {
	case 0:
		d.emit(IBCreditCount, st.depth+2, v, nil)
	case 1:
		d.emit(IBTimer, st.depth+2, v, nil)
	case 2:
		d.emit(IBReservedValue, st.depth+2, v, nil)
	case 3:
		d.emit(IBErrorCode, st.depth+2, v, nil)
	}
	d.emit(IBMSN, st.depth+1, be24(b[1:]), nil)
	*off = o + 4
	return true
}

func (d *Decoder) ibAtomicAckETH(st *ibState, off *int) bool {
	t, o := st.t, *off
	if !t.Has(o, 8) {
		return false
	}
	b := t.B[o : o+8 : o+8]
	d.emit(IBAtomicAckETH, st.depth, 0, b)
	d.emit(IBOrigRemData, st.depth+1, binary.BigEndian.Uint64(b), nil)
	*off = o + 8
	return true
}

// ibTwice adds an ImmDt or IETH twice: parse_IMMDT and parse_IETH add the
// header item and a child with the same id.
func (d *Decoder) ibTwice(st *ibState, off *int, f Field) bool {
	t, o := st.t, *off
	if !t.Has(o, 4) {
		return false
	}
	b := t.B[o : o+4 : o+4]
	d.emit(f, st.depth, 0, b)
	d.emit(f, st.depth+1, 0, b)
	*off = o + 4
	return true
}

// ibPayload is parse_PAYLOAD. It returns the offset the CRC search starts
// from, and false when a sub-dissector threw.
func (d *Decoder) ibPayload(st *ibState, off, length int) (int, bool) {
	t := st.t
	if !t.Has(off, length) {
		return off, true // "Invalid Packet Length from LRH": nothing added
	}
	if st.srcport <= 1 || st.destport <= 1 {
		return d.mad(st, off)
	}
	rl := t.Remaining(off)
	if rl >= ibCRCLen {
		rl -= ibCRCLen
	}
	if !d.payloadHeuristics(st, t.Sub(off, rl)) {
		return off, false
	}
	return t.Rep - ibCRCLen, true
}

// MAD management classes (IBA 13.4.4) as packet-infiniband.c groups them.
const (
	madSubnLIDRouted     = 0x01
	madSubnAdmin         = 0x03
	madPerf              = 0x04
	madBaseboard         = 0x05
	madDevMgt            = 0x06
	madComMgt            = 0x07
	madSNMP              = 0x08
	madSubnDirectedRoute = 0x81
	madSize              = 256
	madDataOff           = 24
	madDataSize          = 232
)

// mad is the management-datagram branch of parse_PAYLOAD, taken when the
// destination QP or the DETH source QP is 0 or 1.
func (d *Decoder) mad(st *ibState, off int) (int, bool) {
	t := st.t
	if !t.Has(off+1, 1) {
		return off, false
	}
	mc := t.B[off+1]
	switch {
	case mc >= 0x09 && mc <= 0x0f, mc >= 0x30 && mc <= 0x4f, // vendor
		mc >= 0x10 && mc <= 0x2f: // application
		// These parsers write the caller's offset, which parse_PAYLOAD
		// then overwrites with the payload start: the CRC search starts
		// at the payload.
		d.madCommon(st, off)
		return off, true
	case mc == 0x00 || mc == 0x02 || (mc >= 0x50 && mc <= 0x80) || mc >= 0x82: // reserved
		if d.madCommon(st, off) && !t.Has(off+madDataOff, madSize) {
			return off, false
		}
		return off, true
	}
	if !d.madCommon(st, off) {
		return off, true
	}
	data := off + madDataOff
	res := func(o, n int) { d.emit(IBReserved, st.depth+1, 0, t.B[o:o+n:o+n]) }
	switch mc {
	case madComMgt:
		attr := binary.BigEndian.Uint16(t.B[off+16:])
		if d.p.cmAttr == "" {
			d.p.cmAttr = cmAttrName(attr)
		}
		// The CM message hangs below an item of hf_infiniband_smp_data.
		d.emit(IBSMPData, st.depth, 0, t.B[data:data+madDataSize:data+madDataSize])
		d.cm(st, attr, t.B[data:data+madDataSize:data+madDataSize])
	case madSubnLIDRouted:
		// Attribute bodies are not decoded (see doc.go).
		res(data+8, 32)
		res(data+104, 128)
	case madSubnDirectedRoute:
		res(data+12, 28)
	case madSubnAdmin:
		sa := data + 4
		switch t.B[data+1] { // RMPP type
		case 0, 1:
			sa = data + 12
		case 2: // ACK
			res(data+12, 220)
			sa = data + 12
		case 3, 4: // STOP, ABORT
			res(data+4, 4)
			res(data+8, 4)
			sa = data + 12
		}
		res(sa+10, 2)
		if sa+20+200 > len(t.B) {
			return off, false
		}
		return sa + 20 + 200, true
	}
	return off + madSize, true
}

// madCommon is parse_MAD_Common: nothing unless 256 bytes are captured,
// then the infiniband.mad item over the whole MAD and, below it, the
// common header (IBA 13.4.3), whose bytes 18–19 are an infiniband.reserved
// item, and the 232 data bytes.
func (d *Decoder) madCommon(st *ibState, off int) bool {
	t := st.t
	if !t.Has(off, madSize) {
		return false
	}
	b := t.B[off : off+madSize : off+madSize]
	dep := st.depth + 1
	d.emit(IBMAD, st.depth, 0, b)
	d.emit(IBMADBaseversion, dep, uint64(b[0]), nil)
	d.emit(IBMADMgmtclass, dep, uint64(b[1]), nil)
	d.emit(IBMADClassversion, dep, uint64(b[2]), nil)
	d.emit(IBMADMethod, dep, uint64(b[3]), nil)
	d.emit(IBMADStatus, dep, uint64(binary.BigEndian.Uint16(b[4:])), nil)
	d.emit(IBMADClassspecific, dep, uint64(binary.BigEndian.Uint16(b[6:])), nil)
	d.emit(IBMADTransactionid, dep, binary.BigEndian.Uint64(b[8:]), nil)
	d.emit(IBMADAttributeid, dep, uint64(binary.BigEndian.Uint16(b[16:])), nil)
	d.emit(IBReserved, dep, 0, b[18:20:20])
	d.emit(IBMADAttributemodifier, dep, uint64(binary.BigEndian.Uint32(b[20:])), nil)
	d.emit(IBMADData, dep, 0, b[madDataOff:])
	return true
}

// cmAttrName is tshark's CM_Attributes value string.
func cmAttrName(a uint16) string {
	switch a {
	case 0x0001:
		return "ClassPortInfo"
	case 0x0010:
		return "ConnectRequest"
	case 0x0011:
		return "MsgRcptAck"
	case 0x0012:
		return "ConnectReject"
	case 0x0013:
		return "ConnectReply"
	case 0x0014:
		return "ReadyToUse"
	case 0x0015:
		return "DisconnectRequest"
	case 0x0016:
		return "DisconnectReply"
	case 0x0017:
		return "ServiceIDResReq"
	case 0x0018:
		return "ServiceIDResReqResp"
	case 0x0019:
		return "LoadAlternatePath"
	case 0x001A:
		return "AlternatePathResponse"
	}
	return "(Unknown CM Attribute)"
}
