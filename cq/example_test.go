package cq_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/goroce/goroce/cq"
)

// Example shows the engine side pushing completions and the application
// side draining them with Poll, then turning an error completion into a Go
// error.
func Example() {
	c, err := cq.New(cq.Config{Capacity: 16})
	if err != nil {
		panic(err)
	}

	// Engine: a WRITE completed, then a READ failed at the responder and the
	// work request behind it was flushed.
	_ = c.Push(cq.Completion{WRID: 1, Opcode: cq.OpRDMAWrite, ByteLen: 4096, QPN: 0x11})
	_ = c.Push(cq.Completion{WRID: 2, Status: cq.StatusRemAccessErr, QPN: 0x11})
	_ = c.Push(cq.Completion{WRID: 3, Status: cq.StatusWRFlushErr, QPN: 0x11})

	// Application.
	wc := make([]cq.Completion, 8)
	n := c.Poll(wc)
	for _, w := range wc[:n] {
		if err := w.Err(); err != nil {
			fmt.Println(w.WRID, err, errors.Is(err, cq.StatusRemAccessErr.Err()))
			continue
		}
		fmt.Println(w.WRID, w.Opcode, w.ByteLen)
	}
	// Output:
	// 1 IBV_WC_RDMA_WRITE 4096
	// 2 cq: remote access error (IBV_WC_REM_ACCESS_ERR) wr_id 0x2 qpn 0x11 true
	// 3 cq: Work Request Flushed Error (IBV_WC_WR_FLUSH_ERR) wr_id 0x3 qpn 0x11 false
}

// ExampleCQ_Wait blocks for a completion with a deadline.
func ExampleCQ_Wait() {
	c, err := cq.New(cq.Config{Capacity: 4})
	if err != nil {
		panic(err)
	}
	go func() {
		time.Sleep(time.Millisecond)
		_ = c.Push(cq.Completion{WRID: 42, Opcode: cq.OpRecv, ByteLen: 64, Flags: cq.FlagWithImm, Imm: 0xbeef})
	}()

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	wc := make([]cq.Completion, 4)
	n, err := c.Wait(ctx, wc)
	if err != nil {
		panic(err)
	}
	fmt.Println(n, wc[0].WRID, wc[0].Opcode, wc[0].Flags, fmt.Sprintf("%#x", wc[0].Imm))

	short, cancelShort := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancelShort()
	_, err = c.Wait(short, wc[:1])
	fmt.Println(err)
	// Output:
	// 1 42 IBV_WC_RECV IBV_WC_WITH_IMM 0xbeef
	// context deadline exceeded
}
