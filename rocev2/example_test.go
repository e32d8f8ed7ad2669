package rocev2_test

import (
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// Build an RDMA WRITE as rxe sends it and parse it back.
func Example() {
	e := rocev2.Encap{
		Ethernet: true,
		Src:      netip.MustParseAddrPort("10.77.0.3:49593"),
		Dst:      netip.MustParseAddrPort("10.77.0.2:4791"),
	}
	f := wire.Fields{BTH: bth.Fields{
		Opcode: bth.RCRDMAWriteOnly, PKey: rocev2.DefaultPKey, DestQP: 0x15, AckReq: true, PSN: 3955192,
	}}
	f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = 0x7f8e3b588000, 0x6ac, 5

	buf := make([]byte, 128)
	n, err := e.Build(buf, &f, []byte("hello"))
	if err != nil {
		panic(err)
	}

	var p rocev2.Packet // reusable; its views alias buf
	if err := p.ParseFrame(buf[:n]); err != nil {
		panic(err)
	}
	fmt.Println(n, p.Opcode(), p.BTH.DestQP(), p.BTH.PSN(), p.BTH.PadCount())
	fmt.Printf("rkey=%#x len=%d payload=%q\n", p.RETH.RKey(), p.RETH.DMALength(), p.Payload)
	fmt.Println("ICRC:", p.VerifyICRC())

	buf[n-10] ^= 1 // corrupt one payload bit
	_ = p.ParseFrame(buf[:n])
	fmt.Println("ICRC:", p.VerifyICRC())
	// Output:
	// 82 RC_RDMA_WRITE_ONLY 0x000015 3955192 3
	// rkey=0x6ac len=5 payload="hello"
	// ICRC: <nil>
	// ICRC: rocev2: ICRC mismatch
}

// A UDP socket delivers only the transport part; the ICRC is then checked
// against the headers the sender's kernel wrote (see PseudoHeaders).
func ExamplePacket_ParseTransport() {
	f := wire.Fields{BTH: bth.Fields{Opcode: bth.RCAcknowledge, PKey: 0xffff, DestQP: 0x11, PSN: 41}}
	f.AETH.Syndrome, f.AETH.MSN = 0x1f, 7
	buf := make([]byte, 64)
	n, err := wire.Build(buf, &f, nil)
	if err != nil {
		panic(err)
	}
	var p rocev2.Packet
	if err := p.ParseTransport(buf[:n]); err != nil {
		panic(err)
	}
	fmt.Println(n, p.Opcode(), p.AETH.Syndrome(), p.AETH.MSN())
	// Output: 20 RC_ACKNOWLEDGE ACK(credit=31) 7
}
