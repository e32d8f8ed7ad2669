package roce_test

import (
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/roce"
)

// Build an RDMA WRITE as rxe sends it and parse it back.
func Example() {
	e := roce.Encap{
		Ethernet: true,
		Src:      netip.MustParseAddrPort("10.77.0.3:49593"),
		Dst:      netip.MustParseAddrPort("10.77.0.2:4791"),
	}
	f := roce.Fields{BTH: bth.Fields{
		Opcode: bth.RCRDMAWriteOnly, PKey: roce.DefaultPKey, DestQP: 0x15, AckReq: true, PSN: 3955192,
	}}
	f.RETH.VA, f.RETH.RKey, f.RETH.DMALength = 0x7f8e3b588000, 0x6ac, 5

	buf := make([]byte, 128)
	n, err := e.Build(buf, &f, []byte("hello"))
	if err != nil {
		panic(err)
	}

	var p roce.Packet // reusable; its views alias buf
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
	// ICRC: roce: ICRC mismatch
}

// A UDP socket delivers only the transport part; the ICRC is then checked
// against the headers the sender's kernel wrote (see PseudoHeaders).
func ExamplePacket_ParseTransport() {
	f := roce.Fields{BTH: bth.Fields{Opcode: bth.RCAcknowledge, PKey: 0xffff, DestQP: 0x11, PSN: 41}}
	f.AETH.Syndrome, f.AETH.MSN = 0x1f, 7
	buf := make([]byte, 64)
	n, err := roce.BuildTransport(buf, &f, nil)
	if err != nil {
		panic(err)
	}
	var p roce.Packet
	if err := p.ParseTransport(buf[:n]); err != nil {
		panic(err)
	}
	fmt.Println(n, p.Opcode(), p.AETH.Syndrome(), p.AETH.MSN())
	// Output: 20 RC_ACKNOWLEDGE ACK(credit=31) 7
}
