// Command sendrecv shows two-sided messaging: b posts receive buffers, a
// SENDs three messages (the last with immediate data) and b's completions
// say how many bytes landed where.
//
//	go run ./examples/sendrecv
package main

import (
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
	db, pdb, cqb, qb := open("127.0.0.2:4791")
	defer db.Close()
	// Least privilege: SEND needs no remote access (it lands in a posted
	// receive), so neither QP enables any (Access 0 would mean all;
	// LocalWrite enables none).
	if err := qa.Connect(qb.Info(), roce.ConnectOptions{Access: mr.LocalWrite}); err != nil {
		log.Fatal(err)
	}
	if err := qb.Connect(qa.Info(), roce.ConnectOptions{Access: mr.LocalWrite}); err != nil {
		log.Fatal(err)
	}

	inbox := make([]byte, 3*4096)
	imr, err := db.RegisterMR(pdb, inbox, mr.LocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	for i := 0; i < 3; i++ { // a receive must be posted before the SEND arrives (else RNR)
		err := qb.PostRecv(&qp.RecvWR{WRID: uint64(100 + i),
			SGL: []qp.SGE{{Addr: imr.IOVA() + uint64(i*4096), Length: 4096, LKey: imr.LKey()}}})
		if err != nil {
			log.Fatal(err)
		}
	}
	msgs := []string{"hello", "from goroce", "over RoCEv2"}
	out := []byte(msgs[0] + msgs[1] + msgs[2])
	omr, err := da.RegisterMR(pda, out, 0)
	if err != nil {
		log.Fatal(err)
	}
	off := 0
	for i, m := range msgs {
		wr := qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, Flags: qp.SendSignaled,
			SGL: []qp.SGE{{Addr: omr.IOVA() + uint64(off), Length: uint32(len(m)), LKey: omr.LKey()}}}
		if i == len(msgs)-1 {
			wr.Opcode, wr.Imm = qp.WRSendWithImm, 0xfeed
		}
		if err := qa.PostSend(&wr); err != nil {
			log.Fatal(err)
		}
		off += len(m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wcs := make([]cq.Completion, 3)
	for got := 0; got < 3; {
		n, err := cqb.Wait(ctx, wcs[got:])
		if err != nil {
			log.Fatal(err)
		}
		got += n
	}
	for _, wc := range wcs {
		if err := wc.Err(); err != nil {
			log.Fatal(err)
		}
		slot := int(wc.WRID-100) * 4096
		fmt.Printf("recv wr %d: %q", wc.WRID, inbox[slot:slot+int(wc.ByteLen)])
		if wc.Flags&cq.FlagWithImm != 0 {
			fmt.Printf(" imm=%#x", wc.Imm)
		}
		fmt.Println()
	}
	// The sender's completions.
	for got := 0; got < 3; {
		n, err := cqa.Wait(ctx, wcs[got:])
		if err != nil {
			log.Fatal(err)
		}
		got += n
	}
}
