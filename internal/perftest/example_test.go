package perftest_test

import (
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/internal/perftest"
)

// The key message a perftest client sent in pcaps/write_bw_s8.pcap.
func ExampleParseDest() {
	msg := "0000:0001:00001d:9e7bf9:00000eea:0000559840165000:" +
		"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:03:00000000:\x00"
	d, err := perftest.ParseDest([]byte(msg))
	if err != nil {
		panic(err)
	}
	addr, _ := perftest.GIDAddr(d.GID, "-x")
	fmt.Printf("QPN %#x PSN %#x rkey %#x va %#x peer %v out_reads %d\n", d.QPN, d.PSN, d.RKey, d.VAddr, addr, d.OutReads)
	// Output: QPN 0x1d PSN 0x9e7bf9 rkey 0xeea va 0x559840165000 peer 10.77.0.3 out_reads 1
}

func ExampleDest_Marshal() {
	d := perftest.Dest{OutReads: 128, QPN: 0x123456, PSN: 0xabcdef, RKey: 0x42, VAddr: 0x1000,
		GID: perftest.GIDFromAddr(netip.MustParseAddr("10.77.0.1"))}
	b, _ := d.Marshal()
	fmt.Printf("%q (%d bytes)\n", b, len(b))
	// Output: "0000:0080:123456:abcdef:00000042:0000000000001000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:01:00000000:\x00" (108 bytes)
}

func ExampleParseTool() {
	t, _ := perftest.ParseTool("ib_read_lat")
	fmt.Println(t.Name(), t.Verb, t.Lat, t.ServerPassive())
	// Output: ib_read_lat read true true
}
