package pcapng_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/pcapng"
)

// Example copies the RoCEv2 packets of a capture whose ICRC is good into
// a pcapng file (here in memory) and reads the copy back.
func Example() {
	r, err := capture.Open("../../testdata/cap/impaired.pcap")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	var out bytes.Buffer
	w, err := pcapng.NewWriter(&out, pcapng.Section{Application: "example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	id, err := w.AddInterface(pcapng.Interface{Name: "impaired", LinkType: capture.LinkEthernet})
	if err != nil {
		fmt.Println(err)
		return
	}
	var (
		f       capture.Frame
		p       capture.Packet
		n, kept int
	)
	for r.Next(&f) == nil {
		n++
		if p.Decode(&f) == nil && p.ICRC == capture.ICRCGood {
			if err := w.WriteFrame(id, &f); err != nil {
				fmt.Println(err)
				return
			}
			kept++
		}
	}
	fmt.Printf("%d frames read, %d written\n", n, kept)

	back, err := capture.NewReader(&out)
	if err != nil {
		fmt.Println(err)
		return
	}
	n = 0
	for {
		err := back.Next(&f)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		n++
	}
	fmt.Printf("%d frames read back\n", n)
	// Output:
	// 93 frames read, 91 written
	// 91 frames read back
}
