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

	remote := bytes.Repeat([]byte{0xc0, 0xff, 0xee}, 1<<20/3+1)[:1<<20]
	rmr, err := db.RegisterMR(pdb, remote, mr.RemoteRead)
	if err != nil {
		log.Fatal(err)
	}
	local := make([]byte, len(remote))
	lmr, err := da.RegisterMR(pda, local, mr.LocalWrite) // READ data lands here
	if err != nil {
		log.Fatal(err)
	}
	ia, ib := qa.Info(), qb.Info()
	ib.VA, ib.RKey = rmr.IOVA(), rmr.RKey()
	// Least privilege: a QP enables only the remote operations its peer
	// uses (Access 0 would mean all; LocalWrite enables none). Anything
	// else is NAKed as an invalid request and ends the connection.
	if err := qa.Connect(ib, roce.ConnectOptions{Access: mr.LocalWrite}); err != nil {
		log.Fatal(err)
	}
	if err := qb.Connect(ia, roce.ConnectOptions{Access: mr.RemoteRead}); err != nil {
		log.Fatal(err)
	}
	err = qa.PostSend(&qp.SendWR{WRID: 7, Opcode: qp.WRRDMARead, Flags: qp.SendSignaled,
		SGL:        []qp.SGE{{Addr: lmr.IOVA(), Length: uint32(len(local)), LKey: lmr.LKey()}},
		RemoteAddr: ib.VA, RKey: ib.RKey})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wc := make([]cq.Completion, 1)
	if _, err := cqa.Wait(ctx, wc); err != nil {
		log.Fatal(err)
	}
	if err := wc[0].Err(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("read %d bytes (%v); equal: %v\n", wc[0].ByteLen, wc[0].Opcode, bytes.Equal(local, remote))
}
