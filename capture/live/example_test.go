package live_test

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/net/bpf"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/live"
)

// ExampleFilter runs the kernel filter in a user-space BPF VM: a PAUSE
// frame is kept whole up to the snap length, an ARP frame is dropped.
func ExampleFilter() {
	vm, err := bpf.NewVM(live.Filter(256))
	if err != nil {
		panic(err)
	}
	pause := make([]byte, 60)
	copy(pause, []byte{0x01, 0x80, 0xc2, 0, 0, 1, 2, 0, 0, 0, 0, 1, 0x88, 0x08, 0x00, 0x01})
	arp := make([]byte, 60)
	copy(arp[12:], []byte{0x08, 0x06})
	for _, f := range [][]byte{pause, arp} {
		n, _ := vm.Run(f)
		fmt.Println(n)
	}
	// Output:
	// 256
	// 0
}

// ExampleOpen captures ten frames on eth0 (root or CAP_NET_RAW needed).
func ExampleOpen() {
	h, err := live.Open("eth0", live.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer h.Close()
	var f capture.Frame
	for n := 0; n < 10; {
		err := h.Next(&f)
		switch {
		case errors.Is(err, live.ErrTimeout):
			continue // nothing yet: a chance to refresh a display
		case errors.Is(err, io.EOF):
			return // Stop was called
		case err != nil:
			fmt.Fprintln(os.Stderr, err)
			return
		}
		fmt.Println(f.Number, len(f.Data))
		n++
	}
	st, _ := h.Stats()
	fmt.Printf("%d packets captured, %d dropped\n", st.Captured, st.Dropped)
}
