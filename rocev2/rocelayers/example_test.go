package rocelayers_test

import (
	"fmt"
	"net/netip"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/rocelayers"
	"github.com/goroce/goroce/wire"
)

// Decode a RoCEv2 RDMA WRITE with a DecodingLayerParser.
func Example() {
	// A packet to decode: an RDMA WRITE ONLY built with package rocev2.
	e := rocev2.Encap{Ethernet: true, Src: netip.MustParseAddrPort("10.77.0.3:49593"), Dst: netip.MustParseAddrPort("10.77.0.2:4791")}
	f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCRDMAWriteOnly, PKey: 0xffff, DestQP: 0x15, PSN: 7}}
	f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = 0x1000, 0x6ac, 5
	buf := make([]byte, 128)
	n, _ := e.Build(buf, &f, []byte("hello"))

	rocelayers.Register() // binds UDP port 4791 to LayerTypeBTH
	var (
		eth layers.Ethernet
		ip4 layers.IPv4
		udp layers.UDP
		tr  rocelayers.Transport
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet,
		append([]gopacket.DecodingLayer{&eth, &ip4, &udp}, tr.DecodingLayers()...)...)
	var decoded []gopacket.LayerType
	if err := parser.DecodeLayers(buf[:n], &decoded); err != nil {
		panic(err)
	}
	fmt.Println(decoded)
	fmt.Println(tr.BTH.Opcode(), tr.BTH.DestQP(), tr.BTH.PSN())
	fmt.Printf("va=%#x rkey=%#x len=%d payload=%q\n", tr.RETH.VA(), tr.RETH.RKey(), tr.RETH.DMALength(), tr.Payload.Data)
	// Output:
	// [Ethernet IPv4 UDP BTH RETH IBPayload]
	// RC_RDMA_WRITE_ONLY 0x000015 7
	// va=0x1000 rkey=0x6ac len=5 payload="hello"
}
