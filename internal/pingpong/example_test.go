package pingpong_test

import (
	"fmt"

	"github.com/goroce/goroce/internal/pingpong"
)

// The server's message of pcaps/rc_pingpong.pcap.
func ExampleParse() {
	d, err := pingpong.Parse([]byte("0000:00001a:5de23d:00000000000000000000ffff0a4d0002\x00"))
	if err != nil {
		panic(err)
	}
	fmt.Println(d)
	b, _ := d.Marshal()
	fmt.Printf("%d bytes\n", len(b))
	// Output:
	// LID 0x0000, QPN 0x00001a, PSN 0x5de23d, GID ::ffff:10.77.0.2
	// 52 bytes
}
