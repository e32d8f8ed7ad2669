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

	"github.com/goroce/goroce/roce"
)

func main() {
	a := must(roce.Open(roce.Config{Addr: netip.MustParseAddrPort("127.0.0.1:4791")}))
	defer a.Close()
	b := must(roce.Open(roce.Config{Addr: netip.MustParseAddrPort("127.0.0.2:4791")}))
	defer b.Close()
	qa, qb := must(a.CreateQP(roce.QPConfig{})), must(b.CreateQP(roce.QPConfig{}))
	// Least privilege: SEND needs no remote access (it lands in a posted
	// receive), so neither QP enables any (the zero Access would grant all).
	check(qa.Connect(qb.Info(), roce.ConnectOptions{Access: roce.NoRemoteAccess}))
	check(qb.Connect(qa.Info(), roce.ConnectOptions{Access: roce.NoRemoteAccess}))

	inbox := make([]byte, 3*4096)
	imr := must(b.RegisterMR(nil, inbox, roce.LocalWrite))
	for i := 0; i < 3; i++ { // a receive must be posted before the SEND arrives (else RNR)
		check(qb.PostRecv(&roce.RecvWR{WRID: uint64(100 + i), SGL: []roce.SGE{imr.SGE(i*4096, 4096)}}))
	}
	msgs := []string{"hello", "from goroce", "over RoCEv2"}
	out := []byte(msgs[0] + msgs[1] + msgs[2])
	omr := must(a.RegisterMR(nil, out, 0))
	off := 0
	for i, m := range msgs {
		wr := roce.SendWR{WRID: uint64(i), Opcode: roce.WRSend, Flags: roce.SendSignaled,
			SGL: []roce.SGE{omr.SGE(off, len(m))}}
		if i == len(msgs)-1 {
			wr.Opcode, wr.Imm = roce.WRSendWithImm, 0xfeed
		}
		check(qa.PostSend(&wr))
		off += len(m)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wcs := make([]roce.Completion, 3)
	for got := 0; got < 3; {
		got += must(qb.RecvCQ().Wait(ctx, wcs[got:]))
	}
	for _, wc := range wcs {
		check(wc.Err())
		slot := int(wc.WRID-100) * 4096
		fmt.Printf("recv wr %d: %q", wc.WRID, inbox[slot:slot+int(wc.ByteLen)])
		if wc.Flags&roce.WCWithImm != 0 {
			fmt.Printf(" imm=%#x", wc.Imm)
		}
		fmt.Println()
	}
	// The sender's completions.
	for got := 0; got < 3; {
		got += must(qa.SendCQ().Wait(ctx, wcs[got:]))
	}
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
