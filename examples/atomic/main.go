// Command atomic shows remote atomics: a counter word in b's memory that a
// increments with FETCH_AND_ADD and then sets with COMPARE_AND_SWAP. Each
// completion returns the value the word held before the operation.
//
//	go run ./examples/atomic
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/goroce/goroce/roce"
)

func main() {
	a := must(roce.Open(roce.Config{Addr: netip.MustParseAddrPort("127.0.0.1:4791")}))
	defer a.Close()
	b := must(roce.Open(roce.Config{Addr: netip.MustParseAddrPort("127.0.0.2:4791")}))
	defer b.Close()
	qa, qb := must(a.CreateQP(roce.QPConfig{})), must(b.CreateQP(roce.QPConfig{}))

	counter := make([]byte, 8) // 8-byte aligned word, host byte order
	cmr := must(b.RegisterMR(nil, counter, roce.LocalWrite|roce.RemoteAtomic))
	results := make([]byte, 8*11)
	rmr := must(a.RegisterMR(nil, results, roce.LocalWrite))
	// Least privilege: a QP enables only the remote operations its peer
	// uses (NoRemoteAccess enables none; the zero Access would grant all).
	// Anything else is NAKed as an invalid request and ends the connection.
	check(qa.Connect(qb.Info(), roce.ConnectOptions{Access: roce.NoRemoteAccess}))
	check(qb.Connect(qa.Info(), roce.ConnectOptions{Access: roce.RemoteAtomic}))

	post := func(i int, op roce.WROpcode, cmpAdd, swap uint64) {
		check(qa.PostSend(&roce.SendWR{WRID: uint64(i), Opcode: op, Flags: roce.SendSignaled,
			SGL:        []roce.SGE{rmr.SGE(8*i, 8)},
			RemoteAddr: cmr.IOVA(), RKey: cmr.RKey(), CompareAdd: cmpAdd, Swap: swap}))
	}
	for i := 0; i < 10; i++ {
		post(i, roce.WRAtomicFetchAdd, 5, 0)
	}
	post(10, roce.WRAtomicCmpAndSwp, 50, 1000) // succeeds only if the counter is 50

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wcs := make([]roce.Completion, 11)
	for got := 0; got < 11; {
		got += must(qa.SendCQ().Wait(ctx, wcs[got:]))
	}
	for _, wc := range wcs {
		check(wc.Err())
		fmt.Printf("%v #%d returned %d\n", wc.Opcode, wc.WRID, binary.LittleEndian.Uint64(results[8*wc.WRID:]))
	}
	fmt.Printf("counter now %d\n", binary.LittleEndian.Uint64(counter))
}

// must returns v, or exits if err is not nil.
func must[T any](v T, err error) T {
	check(err)
	return v
}

// check exits if err is not nil.
func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
