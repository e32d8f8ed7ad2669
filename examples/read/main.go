// Command read shows an RDMA READ: device a reads 1 MiB out of a memory
// region of device b, which does nothing but register it.
//
//	go run ./examples/read
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
	a := must(roce.Open(roce.Config{Addr: netip.MustParseAddrPort("127.0.0.1:4791")}))
	defer a.Close()
	b := must(roce.Open(roce.Config{Addr: netip.MustParseAddrPort("127.0.0.2:4791")}))
	defer b.Close()
	qa, qb := must(a.CreateQP(roce.QPConfig{})), must(b.CreateQP(roce.QPConfig{}))

	remote := bytes.Repeat([]byte{0xc0, 0xff, 0xee}, 1<<20/3+1)[:1<<20]
	rmr := must(b.RegisterMR(nil, remote, roce.RemoteRead))
	local := make([]byte, len(remote))
	lmr := must(a.RegisterMR(nil, local, roce.LocalWrite)) // READ data lands here

	ib := qb.Info()
	ib.VA, ib.RKey = rmr.IOVA(), rmr.RKey()
	// Least privilege: a QP enables only the remote operations its peer
	// uses (NoRemoteAccess enables none; the zero Access would grant all).
	// Anything else is NAKed as an invalid request and ends the connection.
	check(qa.Connect(ib, roce.ConnectOptions{Access: roce.NoRemoteAccess}))
	check(qb.Connect(qa.Info(), roce.ConnectOptions{Access: roce.RemoteRead}))
	check(qa.PostSend(&roce.SendWR{WRID: 7, Opcode: roce.WRRDMARead, Flags: roce.SendSignaled,
		SGL: []roce.SGE{lmr.SGE(0, len(local))}, RemoteAddr: ib.VA, RKey: ib.RKey}))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wc := make([]roce.Completion, 1)
	must(qa.SendCQ().Wait(ctx, wc))
	check(wc[0].Err())
	fmt.Printf("read %d bytes (%v); equal: %v\n", wc[0].ByteLen, wc[0].Opcode, bytes.Equal(local, remote))
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
