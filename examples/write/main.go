// Command write is the README's library example: two devices in one
// process on 127.0.0.1 and 127.0.0.2 (UDP 4791), one RC queue pair each,
// and an RDMA WRITE from a memory region of one into a memory region of the
// other. TestREADME keeps the README's copy and this file identical.
//
//	go run ./examples/write
package main

import (
	"context"
	"fmt"
	"log"
	"net/netip"

	"github.com/goroce/goroce/roce"
)

func main() {
	a := must(roce.Open(roce.Config{Addr: netip.MustParseAddrPort("127.0.0.1:4791")}))
	defer a.Close()
	b := must(roce.Open(roce.Config{Addr: netip.MustParseAddrPort("127.0.0.2:4791")}))
	defer b.Close()
	qa, qb := must(a.CreateQP(roce.QPConfig{})), must(b.CreateQP(roce.QPConfig{}))

	src, dst := []byte("hello, RDMA"), make([]byte, 11)
	smr := must(a.RegisterMR(nil, src, 0))
	dmr := must(b.RegisterMR(nil, dst, roce.LocalWrite|roce.RemoteWrite))

	// Real programs exchange Info (address, QPN, first PSN) over TCP or the
	// RDMA CM (Device.Dial). Each QP allows its peer only what it needs.
	check(qa.Connect(qb.Info(), roce.ConnectOptions{Access: roce.NoRemoteAccess}))
	check(qb.Connect(qa.Info(), roce.ConnectOptions{Access: roce.RemoteWrite}))

	check(qa.PostSend(&roce.SendWR{Opcode: roce.WRRDMAWrite, Flags: roce.SendSignaled,
		SGL: []roce.SGE{smr.SGE(0, len(src))}, RemoteAddr: dmr.IOVA(), RKey: dmr.RKey()}))
	wc := make([]roce.Completion, 1) // a failed WRITE completes too, with an error status
	must(qa.SendCQ().Wait(context.Background(), wc))
	check(wc[0].Err())
	fmt.Printf("b's memory now holds %q\n", dst)
}

func must[T any](v T, err error) T {
	check(err)
	return v
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
