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

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

func open(addr string) (*roce.Device, *mr.PD, *cq.CQ, *roce.QP) {
	l, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort(addr)})
	if err != nil {
		log.Fatal(err)
	}
	dev, err := roce.Open(roce.Config{Link: l})
	if err != nil {
		log.Fatal(err)
	}
	pd := dev.AllocPD()
	c, err := dev.CreateCQ(64)
	if err != nil {
		log.Fatal(err)
	}
	q, err := dev.CreateQP(roce.QPConfig{PD: pd, SendCQ: c, RecvCQ: c})
	if err != nil {
		log.Fatal(err)
	}
	return dev, pd, c, q
}

func main() {
	da, pda, cqa, qa := open("127.0.0.1:4791")
	defer da.Close()
	db, pdb, _, qb := open("127.0.0.2:4791")
	defer db.Close()

	counter := make([]byte, 8) // 8-byte aligned word, host byte order
	cmr, err := db.RegisterMR(pdb, counter, mr.LocalWrite|mr.RemoteAtomic)
	if err != nil {
		log.Fatal(err)
	}
	results := make([]byte, 8*11)
	rmr, err := da.RegisterMR(pda, results, mr.LocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	// Least privilege: a QP enables only the remote operations its peer
	// uses (Access 0 would mean all; LocalWrite enables none). Anything
	// else is NAKed as an invalid request and ends the connection.
	if err := qa.Connect(qb.Info(), roce.ConnectOptions{Access: mr.LocalWrite}); err != nil {
		log.Fatal(err)
	}
	if err := qb.Connect(qa.Info(), roce.ConnectOptions{Access: mr.RemoteAtomic}); err != nil {
		log.Fatal(err)
	}
	post := func(i int, op qp.WROpcode, cmpAdd, swap uint64) {
		err := qa.PostSend(&qp.SendWR{WRID: uint64(i), Opcode: op, Flags: qp.SendSignaled,
			SGL:        []qp.SGE{{Addr: rmr.IOVA() + uint64(8*i), Length: 8, LKey: rmr.LKey()}},
			RemoteAddr: cmr.IOVA(), RKey: cmr.RKey(), CompareAdd: cmpAdd, Swap: swap})
		if err != nil {
			log.Fatal(err)
		}
	}
	for i := 0; i < 10; i++ {
		post(i, qp.WRAtomicFetchAdd, 5, 0)
	}
	post(10, qp.WRAtomicCmpAndSwp, 50, 1000) // succeeds only if the counter is 50
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wcs := make([]cq.Completion, 11)
	for got := 0; got < 11; {
		n, err := cqa.Wait(ctx, wcs[got:])
		if err != nil {
			log.Fatal(err)
		}
		got += n
	}
	for _, wc := range wcs {
		if err := wc.Err(); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%v #%d returned %d\n", wc.Opcode, wc.WRID, binary.LittleEndian.Uint64(results[8*wc.WRID:]))
	}
	fmt.Printf("counter now %d\n", binary.LittleEndian.Uint64(counter))
}
