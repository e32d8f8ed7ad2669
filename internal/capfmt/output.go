package capfmt

import (
	"encoding/binary"
	"io"
	"strconv"
	"time"
	"unicode/utf8"
)

// JSONWriter writes packets like tshark -T json: an array of objects with
// "_index", "_type", "_score" and "_source": {"layers": …}. With fields
// given, layers is flat and maps each present field to an array of all its
// occurrences, exactly as tshark -T json -e prints it. Without fields it
// is the protocol tree of this package's items: protocols are objects, a
// field with children is followed by "<name>_tree", and byte strings are
// colon-separated (tshark's full tree has many more fields).
type JSONWriter struct {
	w      io.Writer
	fields []Field
	n      int
	buf    []byte
	tz     *time.Location
}

// NewJSONWriter returns a JSONWriter for the given fields (nil for the
// tree layout). The "_index" date uses loc, as tshark uses the local time
// zone; nil means time.Local.
func NewJSONWriter(w io.Writer, fields []Field, loc *time.Location) *JSONWriter {
	if loc == nil {
		loc = time.Local
	}
	return &JSONWriter{w: w, fields: append([]Field(nil), fields...), tz: loc}
}

// Write writes one packet.
func (jw *JSONWriter) Write(p *Packet) error {
	b := jw.buf[:0]
	if jw.n == 0 {
		b = append(b, "[\n"...)
	} else {
		b = append(b, ",\n"...)
	}
	jw.n++
	b = append(b, "  {\n    \"_index\": \"packets-"...)
	b = p.Time.In(jw.tz).AppendFormat(b, "2006-01-02")
	b = append(b, "\",\n    \"_type\": \"doc\",\n    \"_score\": null,\n    \"_source\": {\n      \"layers\": {\n"...)
	if len(jw.fields) > 0 {
		b = jw.flat(b, p)
	} else {
		b = jw.tree(b, p)
	}
	b = append(b, "      }\n    }\n  }"...)
	jw.buf = b
	_, err := jw.w.Write(b)
	return err
}

// Close ends the array; call it once after the last packet.
func (jw *JSONWriter) Close() error {
	end := "\n]\n"
	if jw.n == 0 {
		end = "[]\n"
	}
	_, err := io.WriteString(jw.w, end)
	return err
}

func (jw *JSONWriter) flat(b []byte, p *Packet) []byte {
	first := true
	for _, f := range jw.fields {
		n := 0
		for i := range p.Items {
			it := &p.Items[i]
			if it.Field != f || f.IsProtocol() {
				continue
			}
			if n == 0 {
				if !first {
					b = append(b, ",\n"...)
				}
				first = false
				b = append(b, "        \""...)
				b = append(b, f.String()...)
				b = append(b, "\": [\n"...)
			} else {
				b = append(b, ",\n"...)
			}
			n++
			b = append(b, "          \""...)
			b = appendJSONString(b, AppendValue(nil, it))
			b = append(b, '"')
		}
		if n > 0 {
			b = append(b, "\n        ]"...)
		}
	}
	if !first {
		b = append(b, '\n')
	}
	return b
}

// tree writes the items as nested objects, using the depths: the items
// after one that are deeper than it are its children.
func (jw *JSONWriter) tree(b []byte, p *Packet) []byte {
	if len(p.Items) == 0 {
		return b
	}
	b, _ = jsonLevel(b, p.Items, 0, -1, 8)
	return append(b, '\n')
}

// jsonLevel writes the items from i on that are deeper than parent, and
// returns the index after them.
func jsonLevel(b []byte, items []Item, i, parent, indent int) ([]byte, int) {
	first := true
	for i < len(items) && int(items[i].Depth) > parent {
		it := &items[i]
		if !first {
			b = append(b, ",\n"...)
		}
		first = false
		hasKids := i+1 < len(items) && items[i+1].Depth > it.Depth
		b = appendIndent(b, indent)
		b = append(b, '"')
		b = append(b, it.Field.String()...)
		if it.Field.IsProtocol() {
			b = append(b, "\": {"...)
			i++
			if hasKids {
				b = append(b, '\n')
				b, i = jsonLevel(b, items, i, int(it.Depth), indent+2)
				b = append(b, '\n')
				b = appendIndent(b, indent)
			}
			b = append(b, '}')
			continue
		}
		b = append(b, "\": \""...)
		b = appendJSONString(b, appendTreeValue(nil, it))
		b = append(b, '"')
		i++
		if hasKids {
			b = append(b, ",\n"...)
			b = appendIndent(b, indent)
			b = append(b, '"')
			b = append(b, it.Field.String()...)
			b = append(b, "_tree\": {\n"...)
			b, i = jsonLevel(b, items, i, int(it.Depth), indent+2)
			b = append(b, '\n')
			b = appendIndent(b, indent)
			b = append(b, '}')
		}
	}
	return b, i
}

// appendTreeValue is AppendValue with byte strings colon-separated, as in
// tshark's -T json tree.
func appendTreeValue(dst []byte, it *Item) []byte {
	if fieldInfos[it.Field].kind == kindBytes {
		return appendHex(dst, it.Bytes, ':')
	}
	return AppendValue(dst, it)
}

func appendIndent(b []byte, n int) []byte {
	for range n {
		b = append(b, ' ')
	}
	return b
}

// appendJSONString escapes s for a JSON string body.
func appendJSONString(b, s []byte) []byte {
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20 || r == utf8.RuneError && size == 1:
			b = append(b, `\u00`...)
			b = append(b, hexDigits[s[0]>>4], hexDigits[s[0]&0xf])
		default:
			b = append(b, s[:size]...)
		}
		s = s[size:]
	}
	return b
}

// TextWriter writes one summary line per packet, modelled on tshark's
// default output ("    1   0.000000    10.77.0.3 → 10.77.0.2    RRoCE 106
// RC Send First QP=0x000102 "), with the PSN and a bad ICRC added to the
// InfiniBand info. Non-RoCE packets get a shorter info than tshark's.
type TextWriter struct {
	w     io.Writer
	nanos bool
	buf   []byte
}

// NewTextWriter returns a TextWriter; nanos selects nine decimals for the
// time column (nanosecond captures) instead of six.
func NewTextWriter(w io.Writer, nanos bool) *TextWriter {
	return &TextWriter{w: w, nanos: nanos}
}

// Write writes one packet's line.
func (tw *TextWriter) Write(p *Packet) error {
	b := tw.buf[:0]
	b = padLeft(b, strconv.AppendInt(nil, int64(p.Number), 10), 5)
	b = append(b, ' ')
	var t []byte
	if it, ok := p.Lookup(FrameTimeRelative); ok {
		t = appendRelTime(nil, int64(it.Value))
		if !tw.nanos {
			t = t[:len(t)-3]
		}
	}
	b = padLeft(b, t, 10)
	b = append(b, ' ')

	var src, dst []byte
	for _, pair := range [...][2]Field{{IPSrc, IPDst}, {IPv6Src, IPv6Dst}} {
		if s, ok := p.Lookup(pair[0]); ok {
			src = AppendValue(nil, &s)
			if d, ok := p.Lookup(pair[1]); ok {
				dst = AppendValue(nil, &d)
			}
			break
		}
	}
	b = padLeft(b, src, 12)
	b = append(b, " → "...)
	b = append(b, dst...)
	for i := len(dst); i < 12; i++ {
		b = append(b, ' ')
	}
	b = append(b, ' ')
	b = tw.protoInfo(b, p)
	b = append(b, '\n')
	tw.buf = b
	_, err := tw.w.Write(b)
	return err
}

func padLeft(b, v []byte, w int) []byte {
	for i := len(v); i < w; i++ {
		b = append(b, ' ')
	}
	return append(b, v...)
}

// protoInfo appends the protocol, length and info columns.
func (tw *TextWriter) protoInfo(b []byte, p *Packet) []byte {
	length := uint64(0)
	if it, ok := p.Lookup(FrameLen); ok {
		length = it.Value
	}
	var proto string
	switch {
	case p.RoCE:
		proto = "RRoCE"
	case p.Has(ProtoMACC):
		proto = "MAC CTRL"
	case p.Has(ProtoUDP):
		proto = "UDP"
	case p.ipProto == 6:
		proto = "TCP"
	case p.Has(ProtoICMP):
		proto = "ICMP"
	case p.Has(ProtoICMPv6):
		proto = "ICMPv6"
	case p.Has(ProtoIPv6):
		proto = "IPv6"
	case p.Has(ProtoIP):
		proto = "IPv4"
	case p.Has(ProtoEth):
		proto = "Ethernet"
	default:
		proto = "Frame"
	}
	b = append(b, proto...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, length, 10)
	b = append(b, ' ')
	switch {
	case p.RoCE:
		b = tw.ibInfo(b, p)
	case proto == "MAC CTRL":
		b = maccInfo(b, p)
	case (proto == "UDP" || proto == "TCP") && len(p.l4) >= 4:
		b = strconv.AppendUint(b, uint64(binary.BigEndian.Uint16(p.l4)), 10)
		b = append(b, " → "...)
		b = strconv.AppendUint(b, uint64(binary.BigEndian.Uint16(p.l4[2:])), 10)
	}
	return b
}

// maccInfo appends tshark's info column of a MAC Control frame (without
// the "[Malformed Packet]" tshark adds to a frame cut inside its opcode's
// fields).
func maccInfo(b []byte, p *Packet) []byte {
	op, ok := p.Lookup(MACCOpcode)
	if !ok {
		return b
	}
	switch op.Value {
	case maccPause:
		b = append(b, "Pause"...)
		if pt, ok := p.Lookup(MACCPauseTime); ok {
			b = append(b, ": pause_time: "...)
			b = strconv.AppendUint(b, pt.Value, 10)
			b = append(b, " quanta"...)
		}
		return b
	case maccPFC:
		return append(b, "Class Based Flow Control [CBFC] Pause"...)
	case maccGate:
		return append(b, "Gate"...)
	case maccReport:
		return append(b, "Report"...)
	case maccRegReq:
		return append(b, "Register Req"...)
	case maccReg:
		return append(b, "Register"...)
	case maccRegAck:
		return append(b, "Register Ack"...)
	}
	return append(b, "Unknown"...)
}

// ibInfo appends tshark's InfiniBand info column plus PSN and ICRC notes.
func (tw *TextWriter) ibInfo(b []byte, p *Packet) []byte {
	op, ok := p.Lookup(IBOpcode)
	if !ok {
		return b
	}
	if cm := p.cmAttr; cm != "" {
		b = append(b, "CM: "...)
		return append(b, cm...)
	}
	name := opcodeInfo[op.Value]
	if name == "" {
		name = "Unknown OpCode"
	}
	b = append(b, name...)
	if qp, ok := p.Lookup(IBDestQP); ok {
		b = append(b, "QP="...)
		b = AppendValue(b, &qp)
		b = append(b, ' ')
	}
	if psn, ok := p.Lookup(IBPSN); ok {
		b = append(b, "PSN="...)
		b = AppendValue(b, &psn)
	}
	if p.ICRCChecked && !p.ICRCGood {
		b = append(b, " [bad ICRC]"...)
	}
	return b
}

// opcodeInfo holds tshark 4.0's Info column text per opcode (OpCodeMap and
// DctOpCodeMap), trailing spaces and the missing one included.
var opcodeInfo = [256]string{
	0x00: "RC Send First ",
	0x01: "RC Send Middle ",
	0x02: "RC Send Last ",
	0x03: "RC Send Last Immediate ",
	0x04: "RC Send Only ",
	0x05: "RC Send Only Immediate ",
	0x06: "RC RDMA Write First ",
	0x07: "RC RDMA Write Middle ",
	0x08: "RC RDMA Write Last ",
	0x09: "RC RDMA Write Last Immediate ",
	0x0A: "RC RDMA Write Only ",
	0x0B: "RC RDMA Write Only Immediate ",
	0x0C: "RC RDMA Read Request ",
	0x0D: "RC RDMA Read Response First ",
	0x0E: "RC RDMA Read Response Middle ",
	0x0F: "RC RDMA Read Response Last ",
	0x10: "RC RDMA Read Response Only ",
	0x11: "RC Acknowledge ",
	0x12: "RC Atomic Acknowledge ",
	0x13: "RC Compare Swap ",
	0x14: "RC Fetch Add ",
	0x16: "RC Send Last Invalidate ",
	0x17: "RC Send Only Invalidate ",
	0x20: "UC Send First ",
	0x21: "UC Send Middle ",
	0x22: "UC Send Last ",
	0x23: "UC Send Last Immediate ",
	0x24: "UC Send Only ",
	0x25: "UC Send Only Immediate ",
	0x26: "UC RDMA Write First",
	0x27: "UC RDMA Write Middle ",
	0x28: "UC RDMA Write Last ",
	0x29: "UC RDMA Write Last Immediate ",
	0x2A: "UC RDMA Write Only ",
	0x2B: "UC RDMA Write Only Immediate ",
	0x40: "DC Send First ",
	0x41: "DC Send Middle ",
	0x42: "DC Send Last ",
	0x43: "DC Last Immediate ",
	0x44: "DC Send Only ",
	0x45: "DC Send Only Immediate ",
	0x46: "DC RDMA Write First ",
	0x47: "DC RDMA Write Middle ",
	0x48: "DC RDMA Write Last ",
	0x49: "DC RDMA Write Last Immediate ",
	0x4A: "DC RDMA Write Only ",
	0x4B: "DC RDMA Write Only Immediate ",
	0x4C: "DC RDMA Read Request ",
	0x4D: "DC RDMA Read Response First ",
	0x4E: "DC RDMA Read Response Middle ",
	0x4F: "DC RDMA Read Response Last ",
	0x50: "DC RDMA Read Response Only ",
	0x51: "DC Acknowledge ",
	0x52: "DC Atomic Acknowledge ",
	0x53: "DC Compare Swap ",
	0x54: "DC Fetch Add ",
	0x55: "DC Unknown Opcode ",
	0x64: "UD Send Only ",
	0x65: "UD Send Only Immediate ",
}
