package roce_test

import (
	"bytes"
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/roce"
)

// Capture a device's own traffic into a pcapng stream; Close writes
// what is queued and flushes it.
func ExampleCaptureConfig() {
	n := mem.NewNetwork()
	var file bytes.Buffer // an *os.File in practice
	d, err := roce.Open(roce.Config{
		Link:    n.Attach(netip.MustParseAddrPort("10.0.0.1:4791")),
		Capture: &roce.CaptureConfig{W: &file, Name: "rdma0"},
	})
	if err != nil {
		panic(err)
	}
	// … traffic …
	if err := d.Close(); err != nil {
		panic(err)
	}
	st := d.Stats()
	fmt.Printf("pcapng: %v, packets: %d, dropped: %d\n",
		bytes.HasPrefix(file.Bytes(), []byte{0x0a, 0x0d, 0x0d, 0x0a}), st.CapturePackets.Load(), st.CaptureDrops.Load())
	// Output: pcapng: true, packets: 0, dropped: 0
}
