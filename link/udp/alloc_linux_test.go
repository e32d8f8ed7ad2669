//go:build linux

package udp

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/link"
)

// TestZeroAllocs pins Send and Recv at zero heap allocations per call (and
// so per datagram), in every GSO/GRO mode, IPv4 and IPv6, with ECN control
// messages and the ChecksumAuto toggle in play.
func TestZeroAllocs(t *testing.T) {
	testZeroAllocs(t, false)
}

// TestZeroAllocsGathered is TestZeroAllocs with link.Datagram's two-part
// form (header, payload and ICRC in separate iovecs) on the send side.
func TestZeroAllocsGathered(t *testing.T) {
	testZeroAllocs(t, true)
}

func testZeroAllocs(t *testing.T, gathered bool) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, f := range families {
		for _, m := range modes {
			t.Run(f.name+"/"+m.name, func(t *testing.T) {
				tx := open(t, f.a, Config{DisableGSO: m.noGSO, DisableGRO: m.noGRO})
				rx := open(t, f.b, Config{DisableGSO: m.noGSO, DisableGRO: m.noGRO})
				sizes := make([]int, 64)
				for i := range sizes {
					sizes[i] = 1068
				}
				sizes[63] = 100
				dgs := mkDgs(sizes, rx.LocalAddr(), 0)
				for i := 32; i < 48; i++ {
					dgs[i].ECN = link.CE
				}
				if gathered {
					gatherDgs(dgs)
				}
				tx.PlanIPID(dgs)
				single := mkDgs([]int{80}, rx.LocalAddr(), 99)
				in := make([]link.Datagram, 64)
				for i := range in {
					in[i].Buf = make([]byte, 2048)
				}
				recv := rx.Recv
				roundTrip := func() {
					if _, err := tx.Send(dgs); err != nil {
						panic(err)
					}
					if _, err := tx.Send(single); err != nil { // checksum toggle
						panic(err)
					}
					for got := 0; got < len(dgs)+1; {
						for i := range in {
							in[i].Buf = in[i].Buf[:cap(in[i].Buf)]
						}
						n, err := recv(in)
						if err != nil {
							panic(err)
						}
						got += n
					}
				}
				roundTrip() // warm up
				require.Zero(t, testing.AllocsPerRun(50, roundTrip), "allocs per 65-datagram round trip")
				recv = rx.RecvLend
				roundTrip()
				require.Zero(t, testing.AllocsPerRun(50, roundTrip), "allocs per 65-datagram round trip, lent")
				require.Zero(t, testing.AllocsPerRun(50, func() { tx.PlanIPID(dgs) }))
			})
		}
	}
}
