package impair_test

import (
	"fmt"
	"log"
	"net/netip"

	"github.com/goroce/goroce/link/impair"
	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/roce"
)

// A device whose link loses 1% and reorders 1% of the packets both ways,
// as `goroce perf --impair loss=1%,reorder=1%` sets it up.
func Example() {
	cfg, err := impair.Parse("loss=1%,reorder=1%,seed=7")
	if err != nil {
		log.Fatal(err)
	}
	l, err := impair.New(mem.NewNetwork().Attach(netip.MustParseAddrPort("10.0.0.1:4791")), cfg)
	if err != nil {
		log.Fatal(err)
	}
	dev, err := roce.Open(roce.Config{Link: l}) // Close closes l
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	fmt.Println(cfg)
	fmt.Println(l.Report().Tx.Dropped)
	// Output:
	// tx loss=1%,reorder=1%; rx loss=1%,reorder=1%; seed=7
	// 0
}
