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

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// node is one side: a device, a protection domain, a CQ and a QP.
type node struct {
	dev *roce.Device
	pd  *mr.PD
	cq  *cq.CQ
	qp  *roce.QP
}

func open(addr string) (*node, error) {
	l, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort(addr)})
	if err != nil {
		return nil, err
	}
	dev, err := roce.Open(roce.Config{Link: l})
	if err != nil {
		return nil, err
	}
	n := &node{dev: dev, pd: dev.AllocPD()}
	if n.cq, err = dev.CreateCQ(64); err != nil {
		return nil, err
	}
	n.qp, err = dev.CreateQP(roce.QPConfig{PD: n.pd, SendCQ: n.cq, RecvCQ: n.cq})
	return n, err
}

func main() {
	a, err := open("127.0.0.1:4791")
	if err != nil {
		log.Fatal(err)
	}
	defer a.dev.Close()
	b, err := open("127.0.0.2:4791")
	if err != nil {
		log.Fatal(err)
	}
	defer b.dev.Close()

	// The target buffer, registered for remote writes on b.
	dst := make([]byte, 1<<20)
	dmr, err := b.dev.RegisterMR(b.pd, dst, mr.LocalWrite|mr.RemoteWrite)
	if err != nil {
		log.Fatal(err)
	}
	// The info each side sends the other out of band (TCP, a file, …):
	// address, QPN, first PSN, and for b the region a may write.
	ia, ib := a.qp.Info(), b.qp.Info()
	ib.VA, ib.RKey = dmr.IOVA(), dmr.RKey()
	// Least privilege: a QP enables only the remote operations its peer
	// uses (Access 0 would mean all; LocalWrite enables none). Anything
	// else is NAKed as an invalid request and ends the connection.
	if err := a.qp.Connect(ib, roce.ConnectOptions{Access: mr.LocalWrite}); err != nil {
		log.Fatal(err)
	}
	if err := b.qp.Connect(ia, roce.ConnectOptions{Access: mr.RemoteWrite}); err != nil {
		log.Fatal(err)
	}

	src := bytes.Repeat([]byte("goroce!"), len(dst)/7+1)[:len(dst)]
	smr, err := a.dev.RegisterMR(a.pd, src, 0)
	if err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	err = a.qp.PostSend(&qp.SendWR{WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
		SGL:        []qp.SGE{{Addr: smr.IOVA(), Length: uint32(len(src)), LKey: smr.LKey()}},
		RemoteAddr: ib.VA, RKey: ib.RKey})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wc := make([]cq.Completion, 1)
	if _, err := a.cq.Wait(ctx, wc); err != nil {
		log.Fatal(err)
	}
	if err := wc[0].Err(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("wrote %d bytes in %v; equal: %v\n", len(src), time.Since(start).Round(time.Microsecond), bytes.Equal(src, dst))
}
