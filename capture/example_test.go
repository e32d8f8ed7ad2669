package capture_test

import (
	"errors"
	"fmt"
	"io"

	"github.com/goroce/goroce/capture"
)

// Example reads the capture of an ibv_rc_pingpong run and prints the
// first RoCEv2 packets: addresses, opcode, destination QP, PSN and the
// ICRC verdict.
func Example() {
	r, err := capture.Open("../testdata/pcaps/rc_pingpong.pcap")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	var (
		f capture.Frame
		p capture.Packet
	)
	for n := 0; n < 4; {
		err := r.Next(&f)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		if err := p.Decode(&f); err != nil {
			continue // not RoCEv2 (the TCP exchange of QP numbers), or malformed
		}
		h := p.RoCE.BTH
		fmt.Printf("%d %v -> %v %v QP %v PSN %d ICRC %v\n", f.Number, p.Src(), p.Dst(), h.Opcode(), h.DestQP(), h.PSN(), p.ICRC)
		n++
	}
	// Output:
	// 12 10.77.0.3:49441 -> 10.77.0.2:4791 RC_SEND_ONLY QP 0x000011 PSN 7743099 ICRC Good
	// 13 10.77.0.2:49441 -> 10.77.0.3:4791 RC_ACKNOWLEDGE QP 0x000011 PSN 7743099 ICRC Good
	// 14 10.77.0.2:49441 -> 10.77.0.3:4791 RC_SEND_ONLY QP 0x000011 PSN 11467765 ICRC Good
	// 15 10.77.0.3:49441 -> 10.77.0.2:4791 RC_ACKNOWLEDGE QP 0x000011 PSN 11467765 ICRC Good
}
