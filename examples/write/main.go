// Command write is the smallest goroce program: two devices in one process
// on 127.0.0.1 and 127.0.0.2 (UDP 4791), one RC queue pair each, and an RDMA
// WRITE of 1 MiB from one memory region into the other.
//
//	go run ./examples/write
package main

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/goroce/goroce/roce"
)

func main() {
	// A device opens its UDP socket itself; a QP gets the device's default
	// protection domain and a completion queue of its own.
	a := must(roce.Open(roce.Config{Addr: netip.MustParseAddrPort("127.0.0.1:4791")}))
	defer a.Close()
	b := must(roce.Open(roce.Config{Addr: netip.MustParseAddrPort("127.0.0.2:4791")}))
	defer b.Close()
	qa, qb := must(a.CreateQP(roce.QPConfig{})), must(b.CreateQP(roce.QPConfig{}))

	dst := make([]byte, 1<<20) // the target buffer, registered for remote writes on b
	dmr := must(b.RegisterMR(nil, dst, roce.LocalWrite|roce.RemoteWrite))
	src := bytes.Repeat([]byte("goroce!"), len(dst)/7+1)[:len(dst)]
	smr := must(a.RegisterMR(nil, src, 0))

	// The info each side sends the other out of band (TCP, a file, …):
	// address, QPN, first PSN, and for b the region a may write.
	ib := qb.Info()
	ib.VA, ib.RKey = dmr.IOVA(), dmr.RKey()
	// Least privilege: a QP enables only the remote operations its peer
	// uses (NoRemoteAccess enables none; the zero Access would grant all).
	// Anything else is NAKed as an invalid request and ends the connection.
	check(qa.Connect(ib, roce.ConnectOptions{Access: roce.NoRemoteAccess}))
	check(qb.Connect(qa.Info(), roce.ConnectOptions{Access: roce.RemoteWrite}))

	start := time.Now()
	check(qa.PostSend(&roce.SendWR{WRID: 1, Opcode: roce.WRRDMAWrite, Flags: roce.SendSignaled,
		SGL: []roce.SGE{smr.SGE(0, len(src))}, RemoteAddr: ib.VA, RKey: ib.RKey}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wc := make([]roce.Completion, 1)
	must(qa.SendCQ().Wait(ctx, wc))
	check(wc[0].Err())
	fmt.Printf("wrote %d bytes in %v; equal: %v\n", len(src), time.Since(start).Round(time.Microsecond), bytes.Equal(src, dst))
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
