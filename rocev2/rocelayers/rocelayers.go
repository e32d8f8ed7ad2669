package rocelayers

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/ext"
	"github.com/goroce/goroce/reth"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// Layer type numbers, in gopacket's range for application types (1000–1999,
// array-indexed). 1791 echoes UDP port 4791. They are plain values: nothing
// is registered with gopacket before Register.
const (
	LayerTypeBTH          = gopacket.LayerType(1791 + iota) // Base Transport Header
	LayerTypeRETH                                           // RDMA Extended Transport Header
	LayerTypeAETH                                           // ACK Extended Transport Header
	LayerTypeImmDt                                          // Immediate Data
	LayerTypeIETH                                           // Invalidate Extended Transport Header
	LayerTypeDETH                                           // Datagram Extended Transport Header
	LayerTypeAtomicETH                                      // Atomic Extended Transport Header
	LayerTypeAtomicAckETH                                   // Atomic Acknowledge Extended Transport Header
	LayerTypeFETH                                           // Flush Extended Transport Header
	LayerTypeCNPPad                                         // the 16 reserved bytes of a RoCEv2 CNP
	LayerTypeIBPayload                                      // payload, pad and ICRC
)

// layerInfo names each layer type and, for the extension headers, gives
// the opcode-table bit that marks its presence.
var layerInfo = [...]struct {
	typ  gopacket.LayerType
	name string
	mask bth.HeaderMask
}{
	{LayerTypeBTH, "BTH", 0},
	{LayerTypeRETH, "RETH", bth.MaskRETH},
	{LayerTypeAETH, "AETH", bth.MaskAETH},
	{LayerTypeImmDt, "ImmDt", bth.MaskImmDt},
	{LayerTypeIETH, "IETH", bth.MaskIETH},
	{LayerTypeDETH, "DETH", bth.MaskDETH},
	{LayerTypeAtomicETH, "AtomicETH", bth.MaskAtomicETH},
	{LayerTypeAtomicAckETH, "AtomicAckETH", bth.MaskAtomicAckETH},
	{LayerTypeFETH, "FETH", bth.MaskFETH},
	{LayerTypeCNPPad, "CNPPad", bth.MaskCNPPad},
	{LayerTypeIBPayload, "IBPayload", 0},
}

var registerOnce sync.Once

// Register registers the layer types of this package with gopacket (names
// and decoders) and binds UDP destination port 4791 to LayerTypeBTH
// (layers.RegisterUDPPortLayerType). It is idempotent. It writes gopacket's
// global tables without locking, so call it once at start-up, before any
// goroutine decodes packets. It panics if another package has registered
// one of the layer type numbers 1791–1801.
func Register() {
	registerOnce.Do(func() {
		for _, l := range layerInfo {
			dec := gopacket.DecodeFunc(decodeAlone)
			if l.typ == LayerTypeBTH {
				dec = gopacket.DecodeFunc(decodeTransport)
			}
			gopacket.RegisterLayerType(int(l.typ), gopacket.LayerTypeMetadata{Name: l.name, Decoder: dec})
		}
		layers.RegisterUDPPortLayerType(rocev2.UDPPort, LayerTypeBTH)
	})
}

var (
	errNotLinked = errors.New("rocelayers: layer not linked to a BTH; decode through Transport")
	errAlone     = errors.New("rocelayers: RoCEv2 transport headers decode only from LayerTypeBTH")
)

// decodeAlone is the gopacket decoder of every layer type but the BTH: the
// headers after the BTH cannot be decoded without it.
func decodeAlone([]byte, gopacket.PacketBuilder) error { return errAlone }

// decodeTransport is the gopacket decoder of LayerTypeBTH: it decodes the
// whole transport packet and adds one layer per header, then the payload as
// the application layer.
func decodeTransport(data []byte, p gopacket.PacketBuilder) error {
	t := NewTransport()
	var l gopacket.DecodingLayer = &t.BTH
	for {
		if err := l.DecodeFromBytes(data, p); err != nil {
			return err
		}
		p.AddLayer(l.(gopacket.Layer))
		next := l.NextLayerType()
		if next == gopacket.LayerTypeZero {
			p.SetApplicationLayer(&t.Payload)
			return nil
		}
		data = l.LayerPayload()
		l = t.layer(next)
	}
}

// Transport is the family of DecodingLayers of one RoCEv2 transport packet.
// The extension-header and payload layers are linked to the BTH, whose
// opcode says which header comes next; link them with NewTransport or
// DecodingLayers before decoding. One Transport decodes one packet at a
// time; reuse it for the next packet, as with any DecodingLayer.
type Transport struct {
	BTH          BTH
	RETH         RETH
	AETH         AETH
	ImmDt        ImmDt
	IETH         IETH
	DETH         DETH
	AtomicETH    AtomicETH
	AtomicAckETH AtomicAckETH
	FETH         FETH
	CNPPad       CNPPad
	Payload      Payload
}

// NewTransport returns a linked Transport.
func NewTransport() *Transport {
	t := new(Transport)
	t.link()
	return t
}

func (t *Transport) link() {
	b := &t.BTH
	t.RETH.bth, t.AETH.bth, t.ImmDt.bth, t.IETH.bth, t.DETH.bth = b, b, b, b, b
	t.AtomicETH.bth, t.AtomicAckETH.bth, t.FETH.bth, t.CNPPad.bth, t.Payload.bth = b, b, b, b, b
}

// DecodingLayers links the layers of t and returns them, BTH first, for
// gopacket.NewDecodingLayerParser or DecodingLayerParser.AddDecodingLayer.
func (t *Transport) DecodingLayers() []gopacket.DecodingLayer {
	t.link()
	return []gopacket.DecodingLayer{
		&t.BTH, &t.RETH, &t.AETH, &t.ImmDt, &t.IETH, &t.DETH,
		&t.AtomicETH, &t.AtomicAckETH, &t.FETH, &t.CNPPad, &t.Payload,
	}
}

func (t *Transport) layer(typ gopacket.LayerType) gopacket.DecodingLayer {
	switch typ {
	case LayerTypeRETH:
		return &t.RETH
	case LayerTypeAETH:
		return &t.AETH
	case LayerTypeImmDt:
		return &t.ImmDt
	case LayerTypeIETH:
		return &t.IETH
	case LayerTypeDETH:
		return &t.DETH
	case LayerTypeAtomicETH:
		return &t.AtomicETH
	case LayerTypeAtomicAckETH:
		return &t.AtomicAckETH
	case LayerTypeFETH:
		return &t.FETH
	case LayerTypeCNPPad:
		return &t.CNPPad
	case LayerTypeIBPayload:
		return &t.Payload
	}
	panic(fmt.Sprintf("rocelayers: no layer for %v", typ)) // programmer error: NextLayerType returns only the above
}

// nextLayer returns the layer that follows the header at offset off in a
// packet described by in: the extension header at the lowest offset above
// off, or the payload.
func nextLayer(in *bth.Info, off int) gopacket.LayerType {
	next, best := LayerTypeIBPayload, in.HeaderLen
	for _, l := range layerInfo {
		if l.mask == 0 {
			continue
		}
		if o, ok := in.Offset(l.mask); ok && o > off && o < best {
			next, best = l.typ, o
		}
	}
	return next
}

// BTH is the DecodingLayer of the Base Transport Header (IBA 9.2). It
// embeds the bth.Header view, so its accessors (Opcode, PSN, DestQP …)
// read the decoded header.
//
// DecodeFromBytes takes the whole transport packet (the UDP payload) and
// applies every check of rocev2.Packet.ParseTransport: a known opcode, TVer 0,
// room for the opcode's headers and the ICRC, a pad that fits.
type BTH struct {
	bth.Header
	layers.BaseLayer
	// Info is the opcode-table row of the decoded opcode.
	Info      *bth.Info
	transport []byte
}

// LayerType returns LayerTypeBTH.
func (b *BTH) LayerType() gopacket.LayerType { return LayerTypeBTH }

// CanDecode returns LayerTypeBTH.
func (b *BTH) CanDecode() gopacket.LayerClass { return LayerTypeBTH }

// Transport returns the whole transport packet the BTH was decoded from,
// BTH to ICRC: with the IP and UDP headers it gives the ICRC
// (rocev2.ComputeICRC over all but its last four bytes).
func (b *BTH) Transport() []byte { return b.transport }

// DecodeFromBytes decodes the BTH at the start of data, the transport packet.
func (b *BTH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*b = BTH{}
	var p rocev2.Packet
	if err := p.ParseTransport(data); err != nil {
		if errors.Is(err, wire.ErrTruncated) {
			df.SetTruncated()
		}
		return err
	}
	b.Header, b.Info, b.transport = p.BTH, p.Info, data
	b.Contents, b.Payload = data[:bth.Size:bth.Size], data[bth.Size:]
	return nil
}

// NextLayerType returns the first extension header of the opcode, or
// LayerTypeIBPayload.
func (b *BTH) NextLayerType() gopacket.LayerType {
	if b.Info == nil {
		return gopacket.LayerTypeZero
	}
	return nextLayer(b.Info, 0)
}

// extBase is the part every layer after the BTH shares: its bytes and the
// link to the BTH.
type extBase struct {
	layers.BaseLayer
	bth  *BTH
	next gopacket.LayerType
}

// decode checks the link and the length and slices data; it returns the
// header bytes.
func (e *extBase) decode(data []byte, df gopacket.DecodeFeedback, mask bth.HeaderMask, size int) ([]byte, error) {
	e.BaseLayer, e.next = layers.BaseLayer{}, gopacket.LayerTypeZero
	if e.bth == nil || e.bth.Info == nil {
		return nil, errNotLinked
	}
	off, ok := e.bth.Info.Offset(mask)
	if !ok {
		return nil, fmt.Errorf("rocelayers: %v carries no such header", e.bth.Opcode())
	}
	if len(data) < size {
		df.SetTruncated()
		return nil, wire.ErrTruncated
	}
	e.next = nextLayer(e.bth.Info, off)
	e.Contents, e.Payload = data[:size:size], data[size:]
	return e.Contents, nil
}

// NextLayerType returns the header that follows in the decoded packet's
// opcode, or LayerTypeIBPayload.
func (e *extBase) NextLayerType() gopacket.LayerType { return e.next }

// RETH is the DecodingLayer of the RDMA Extended Transport Header.
type RETH struct {
	reth.Header
	extBase
}

// LayerType returns LayerTypeRETH.
func (*RETH) LayerType() gopacket.LayerType { return LayerTypeRETH }

// CanDecode returns LayerTypeRETH.
func (*RETH) CanDecode() gopacket.LayerClass { return LayerTypeRETH }

// DecodeFromBytes decodes the RETH at the start of data.
func (l *RETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) (err error) {
	l.Header = nil
	b, err := l.decode(data, df, bth.MaskRETH, reth.Size)
	if err == nil {
		l.Header, err = reth.Parse(b)
	}
	return err
}

// AETH is the DecodingLayer of the ACK Extended Transport Header.
type AETH struct {
	aeth.Header
	extBase
}

// LayerType returns LayerTypeAETH.
func (*AETH) LayerType() gopacket.LayerType { return LayerTypeAETH }

// CanDecode returns LayerTypeAETH.
func (*AETH) CanDecode() gopacket.LayerClass { return LayerTypeAETH }

// DecodeFromBytes decodes the AETH at the start of data.
func (l *AETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) (err error) {
	l.Header = nil
	b, err := l.decode(data, df, bth.MaskAETH, aeth.Size)
	if err == nil {
		l.Header, err = aeth.Parse(b)
	}
	return err
}

// ImmDt is the DecodingLayer of the Immediate Data header.
type ImmDt struct {
	ext.ImmDt
	extBase
}

// LayerType returns LayerTypeImmDt.
func (*ImmDt) LayerType() gopacket.LayerType { return LayerTypeImmDt }

// CanDecode returns LayerTypeImmDt.
func (*ImmDt) CanDecode() gopacket.LayerClass { return LayerTypeImmDt }

// DecodeFromBytes decodes the ImmDt at the start of data.
func (l *ImmDt) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) (err error) {
	l.ImmDt = nil
	b, err := l.decode(data, df, bth.MaskImmDt, ext.ImmDtSize)
	if err == nil {
		l.ImmDt, err = ext.ParseImmDt(b)
	}
	return err
}

// IETH is the DecodingLayer of the Invalidate Extended Transport Header.
type IETH struct {
	ext.IETH
	extBase
}

// LayerType returns LayerTypeIETH.
func (*IETH) LayerType() gopacket.LayerType { return LayerTypeIETH }

// CanDecode returns LayerTypeIETH.
func (*IETH) CanDecode() gopacket.LayerClass { return LayerTypeIETH }

// DecodeFromBytes decodes the IETH at the start of data.
func (l *IETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) (err error) {
	l.IETH = nil
	b, err := l.decode(data, df, bth.MaskIETH, ext.IETHSize)
	if err == nil {
		l.IETH, err = ext.ParseIETH(b)
	}
	return err
}

// DETH is the DecodingLayer of the Datagram Extended Transport Header.
type DETH struct {
	ext.DETH
	extBase
}

// LayerType returns LayerTypeDETH.
func (*DETH) LayerType() gopacket.LayerType { return LayerTypeDETH }

// CanDecode returns LayerTypeDETH.
func (*DETH) CanDecode() gopacket.LayerClass { return LayerTypeDETH }

// DecodeFromBytes decodes the DETH at the start of data.
func (l *DETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) (err error) {
	l.DETH = nil
	b, err := l.decode(data, df, bth.MaskDETH, ext.DETHSize)
	if err == nil {
		l.DETH, err = ext.ParseDETH(b)
	}
	return err
}

// AtomicETH is the DecodingLayer of the Atomic Extended Transport Header.
type AtomicETH struct {
	ext.AtomicETH
	extBase
}

// LayerType returns LayerTypeAtomicETH.
func (*AtomicETH) LayerType() gopacket.LayerType { return LayerTypeAtomicETH }

// CanDecode returns LayerTypeAtomicETH.
func (*AtomicETH) CanDecode() gopacket.LayerClass { return LayerTypeAtomicETH }

// DecodeFromBytes decodes the AtomicETH at the start of data.
func (l *AtomicETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) (err error) {
	l.AtomicETH = nil
	b, err := l.decode(data, df, bth.MaskAtomicETH, ext.AtomicETHSize)
	if err == nil {
		l.AtomicETH, err = ext.ParseAtomicETH(b)
	}
	return err
}

// AtomicAckETH is the DecodingLayer of the Atomic Acknowledge Extended
// Transport Header.
type AtomicAckETH struct {
	ext.AtomicAckETH
	extBase
}

// LayerType returns LayerTypeAtomicAckETH.
func (*AtomicAckETH) LayerType() gopacket.LayerType { return LayerTypeAtomicAckETH }

// CanDecode returns LayerTypeAtomicAckETH.
func (*AtomicAckETH) CanDecode() gopacket.LayerClass { return LayerTypeAtomicAckETH }

// DecodeFromBytes decodes the AtomicAckETH at the start of data.
func (l *AtomicAckETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) (err error) {
	l.AtomicAckETH = nil
	b, err := l.decode(data, df, bth.MaskAtomicAckETH, ext.AtomicAckETHSize)
	if err == nil {
		l.AtomicAckETH, err = ext.ParseAtomicAckETH(b)
	}
	return err
}

// FETH is the DecodingLayer of the Flush Extended Transport Header.
type FETH struct {
	ext.FETH
	extBase
}

// LayerType returns LayerTypeFETH.
func (*FETH) LayerType() gopacket.LayerType { return LayerTypeFETH }

// CanDecode returns LayerTypeFETH.
func (*FETH) CanDecode() gopacket.LayerClass { return LayerTypeFETH }

// DecodeFromBytes decodes the FETH at the start of data.
func (l *FETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) (err error) {
	l.FETH = nil
	b, err := l.decode(data, df, bth.MaskFETH, ext.FETHSize)
	if err == nil {
		l.FETH, err = ext.ParseFETH(b)
	}
	return err
}

// CNPPad is the DecodingLayer of the 16 reserved bytes that follow the BTH
// of a RoCEv2 CNP (Annex A17.9.2); LayerContents returns them.
type CNPPad struct {
	extBase
}

// LayerType returns LayerTypeCNPPad.
func (*CNPPad) LayerType() gopacket.LayerType { return LayerTypeCNPPad }

// CanDecode returns LayerTypeCNPPad.
func (*CNPPad) CanDecode() gopacket.LayerClass { return LayerTypeCNPPad }

// DecodeFromBytes decodes the reserved bytes at the start of data.
func (l *CNPPad) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	_, err := l.decode(data, df, bth.MaskCNPPad, bth.CNPPadSize)
	return err
}

// Payload is the last layer of a transport packet: the payload, the pad
// that rounds it to four bytes, and the ICRC. It is the packet's
// gopacket.ApplicationLayer.
type Payload struct {
	// Data is the payload without the pad.
	Data []byte
	// Pad holds the BTH PadCnt pad bytes.
	Pad []byte
	// ICRC holds the four ICRC bytes in wire order (rocev2.ReadICRC).
	ICRC     []byte
	contents []byte
	bth      *BTH
}

// LayerType returns LayerTypeIBPayload.
func (*Payload) LayerType() gopacket.LayerType { return LayerTypeIBPayload }

// CanDecode returns LayerTypeIBPayload.
func (*Payload) CanDecode() gopacket.LayerClass { return LayerTypeIBPayload }

// NextLayerType returns gopacket.LayerTypeZero: nothing follows the ICRC.
func (*Payload) NextLayerType() gopacket.LayerType { return gopacket.LayerTypeZero }

// LayerContents returns the payload, pad and ICRC.
func (l *Payload) LayerContents() []byte { return l.contents }

// LayerPayload returns nil: the ICRC ends the packet.
func (*Payload) LayerPayload() []byte { return nil }

// Payload returns the payload without pad and ICRC.
func (l *Payload) Payload() []byte { return l.Data }

// DecodeFromBytes splits data, the bytes after the last header, into
// payload, pad and ICRC.
func (l *Payload) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*l = Payload{bth: l.bth}
	if l.bth == nil || l.bth.Info == nil {
		return errNotLinked
	}
	if len(data) < bth.ICRCSize {
		df.SetTruncated()
		return wire.ErrTruncated
	}
	end := len(data) - bth.ICRCSize
	pad := l.bth.PadCount()
	if pad > end {
		return wire.ErrBadPad
	}
	l.contents = data
	l.Data = data[: end-pad : end-pad]
	l.Pad = data[end-pad : end : end]
	l.ICRC = data[end:len(data):len(data)]
	return nil
}

// Interface checks: each layer type implements what gopacket expects.
var (
	_ gopacket.DecodingLayer    = (*BTH)(nil)
	_ gopacket.DecodingLayer    = (*RETH)(nil)
	_ gopacket.DecodingLayer    = (*AETH)(nil)
	_ gopacket.DecodingLayer    = (*ImmDt)(nil)
	_ gopacket.DecodingLayer    = (*IETH)(nil)
	_ gopacket.DecodingLayer    = (*DETH)(nil)
	_ gopacket.DecodingLayer    = (*AtomicETH)(nil)
	_ gopacket.DecodingLayer    = (*AtomicAckETH)(nil)
	_ gopacket.DecodingLayer    = (*FETH)(nil)
	_ gopacket.DecodingLayer    = (*CNPPad)(nil)
	_ gopacket.DecodingLayer    = (*Payload)(nil)
	_ gopacket.Layer            = (*BTH)(nil)
	_ gopacket.Layer            = (*RETH)(nil)
	_ gopacket.Layer            = (*CNPPad)(nil)
	_ gopacket.ApplicationLayer = (*Payload)(nil)
)
