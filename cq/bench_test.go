package cq_test

import (
	"context"
	"testing"

	"github.com/goroce/goroce/cq"
)

func BenchmarkPushPoll(b *testing.B) {
	for _, batch := range []int{1, 16} {
		b.Run(map[int]string{1: "batch1", 16: "batch16"}[batch], func(b *testing.B) {
			c := newCQ(b, 256)
			dst := make([]cq.Completion, batch)
			comp := cq.Completion{WRID: 1, Opcode: cq.OpRDMAWrite, ByteLen: 4096, QPN: 0x11}
			b.ReportAllocs()
			for b.Loop() {
				for range batch {
					if err := c.Push(comp); err != nil {
						b.Fatal(err)
					}
				}
				if c.Poll(dst) != batch {
					b.Fatal("short poll")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/completion")
		})
	}
}

// BenchmarkPushWait measures a producer and a blocked consumer on separate
// goroutines.
func BenchmarkPushWait(b *testing.B) {
	c := newCQ(b, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		dst := make([]cq.Completion, 64)
		for {
			if _, err := c.Wait(context.Background(), dst); err != nil {
				return
			}
		}
	}()
	comp := cq.Completion{WRID: 1}
	b.ReportAllocs()
	for b.Loop() {
		for c.Push(comp) != nil {
		}
	}
	b.StopTimer()
	_ = c.Close()
	<-done
}
