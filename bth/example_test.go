package bth_test

import (
	"fmt"

	"github.com/goroce/goroce/bth"
)

// A BTH is a view over the packet buffer: Parse checks the length once and
// the accessors and setters work in place.
func ExampleHeader() {
	pkt := []byte{
		0x06, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x15, 0x00, 0x3c, 0x59, 0xf8, // BTH
		0x00, 0x00, 0x7f, 0x8e, // start of the RETH
	}
	h, err := bth.Parse(pkt)
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Opcode(), h.DestQP(), h.PSN(), h.Opcode().HeaderLen())

	h.SetAckReq(true) // edits pkt in place
	fmt.Printf("%#02x %v\n", pkt[8], h.AckReq())
	// Output:
	// RC_RDMA_WRITE_FIRST 0x000015 3955192 28
	// 0x80 true
}

// Build a header from Fields.
func ExampleHeader_Encode() {
	f := bth.Fields{Opcode: bth.RCAcknowledge, PKey: 0xffff, DestQP: 0x12, PSN: 7}
	h := make(bth.Header, bth.Size)
	h.Encode(&f)
	fmt.Printf("% x\n", []byte(h))
	// Output:
	// 11 00 ff ff 00 00 00 12 00 00 00 07
}

// PSNs are 24-bit and compared modulo 2^24, as rxe's psn_compare does: 0
// follows 0xFFFFFF.
func ExamplePSN() {
	last := bth.PSN(0xffffff)
	next := last.Next()
	fmt.Println(next, next.After(last), next.Sub(last))
	fmt.Println(bth.PSN(10).Before(20), bth.PSN(20).Compare(20))
	// Output:
	// 0 true 1
	// true 0
}

// The opcode table describes every opcode's headers.
func ExampleOpcode_Lookup() {
	in, ok := bth.RCRDMAWriteOnlyWithImmediate.Lookup()
	fmt.Println(ok, in.Name, in.HeaderLen)
	off, _ := in.Offset(bth.MaskImmDt)
	fmt.Println("ImmDt at", off, "payload:", in.Mask.Has(bth.MaskPayload))
	_, ok = bth.Opcode(0x15).Lookup()
	fmt.Println(ok, bth.Opcode(0x15))
	// Output:
	// true RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE 32
	// ImmDt at 28 payload: true
	// false Opcode(0x15)
}
