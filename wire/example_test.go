package wire_test

import (
	"fmt"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/reth"
	"github.com/goroce/goroce/wire"
)

// Build an RDMA WRITE ONLY packet into a buffer and parse it back: the
// opcode table decides which headers follow the BTH (here the RETH), and
// the parsed Packet's views point into the same buffer.
func Example() {
	payload := []byte("hello")
	f := wire.Fields{
		BTH:  bth.Fields{Opcode: bth.RCRDMAWriteOnly, PKey: 0xffff, DestQP: 0x12, AckReq: true, PSN: 7},
		RETH: reth.Fields{VA: 0x1000, RKey: 0xabcd, DMALength: uint32(len(payload))},
	}
	buf := make([]byte, wire.TransportLen(f.BTH.Opcode, len(payload)))
	n, err := wire.Build(buf, &f, payload)
	if err != nil {
		panic(err)
	}

	var p wire.Packet
	if err := p.Parse(buf[:n]); err != nil {
		panic(err)
	}
	fmt.Printf("%d bytes: %v PSN %d rkey %#x, %d pad bytes, payload %q\n",
		n, p.Opcode(), p.BTH.PSN(), p.RETH.RKey(), len(p.Pad), p.Payload)
	// Output:
	// 40 bytes: RC_RDMA_WRITE_ONLY PSN 7 rkey 0xabcd, 3 pad bytes, payload "hello"
}
