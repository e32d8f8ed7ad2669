//go:build linux

package udp

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/link"
)

// BenchmarkLoopback streams datagrams of RoCE sizes (1024+44 and 4096+44:
// BTH 12 + RETH 16 + payload + ICRC 4 + slack) from 127.0.0.1 to 127.0.0.2
// in Sends of 64, with GSO and GRO on and off. One op is one Send of 64
// datagrams; SetBytes counts their UDP payload. The sender keeps at most
// window bytes in flight (credit from the receiver), so the rate is what
// the pair delivers without overrunning the receiver; rx-Mpps and rx-Gb/s
// are measured at the receiver, loss-% should stay 0. Compare with
// ../../../shared/ref/limits.md §1 (lo, 4156 B / 1084 B rows).
func BenchmarkLoopback(b *testing.B) {
	for _, size := range []int{1024 + 44, 4096 + 44} {
		for _, m := range modes {
			b.Run(fmt.Sprintf("size=%d/%s", size, m.name), func(b *testing.B) {
				benchStream(b, size, 64, m.noGSO, m.noGRO)
			})
		}
	}
}

func benchStream(b *testing.B, size, batch int, noGSO, noGRO bool) {
	cfg := Config{DisableGSO: noGSO, DisableGRO: noGRO}
	tx := open(b, lo4, cfg)
	rx := open(b, lo4b, cfg)
	const window = 2 << 20
	inflight := uint64(max(window/size, 2*batch))

	var got atomic.Uint64
	wake := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		dgs := make([]link.Datagram, 64)
		bufs := make([]byte, len(dgs)*size)
		for {
			for i := range dgs {
				dgs[i].Buf = bufs[i*size : (i+1)*size]
			}
			n, err := rx.Recv(dgs)
			if err != nil {
				return
			}
			got.Add(uint64(n))
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()

	dgs := make([]link.Datagram, batch)
	buf := make([]byte, size)
	for i := range dgs {
		dgs[i] = link.Datagram{Buf: buf, Dst: rx.LocalAddr()}
	}
	tx.PlanIPID(dgs)
	timer := time.NewTimer(time.Hour)
	var sent, lost uint64
	wait := func(limit uint64) {
		for sent-lost-got.Load() > limit {
			timer.Reset(100 * time.Millisecond)
			select {
			case <-wake:
			case <-timer.C:
				lost = sent - got.Load() // give up on what is missing
			}
			timer.Stop()
		}
	}
	b.SetBytes(int64(size * batch))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	t0 := time.Now()
	for i := 0; i < b.N; i++ {
		wait(inflight)
		n, err := tx.Send(dgs)
		if err != nil {
			b.Fatal(err)
		}
		sent += uint64(n)
	}
	wait(0)
	el := time.Since(t0).Seconds()
	cpu := cpuTime() - cpu0
	b.StopTimer()
	rx.Close()
	wg.Wait()
	r := got.Load()
	b.ReportMetric(float64(r)/el/1e6, "rx-Mpps")
	b.ReportMetric(float64(r)*float64(size)*8/el/1e9, "rx-Gb/s")
	b.ReportMetric(100*float64(sent-r)/float64(sent), "loss-%")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(r), "cpu-ns/dgram")
	if ri := rx.Info(); ri.GRO {
		b.ReportMetric(100*float64(ri.GROCopied)/float64(r), "copied-%")
	}
}

// cpuTime is the process's user+system CPU time. On loopback the kernel's
// receive path runs in the sender's system calls, so it is all counted:
// cpu-ns/dgram is the whole cost of moving a datagram, and unlike the rate
// it barely depends on what else the machine runs.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRecvDrain times Recv alone: each op first queues 1024
// datagrams on the receiving socket (timer stopped), then drains them with
// Recv calls of 64 slots. It isolates the receive path's cost per datagram
// (kernel copy-out, GRO split, user copy) from scheduling effects.
func BenchmarkRecvDrain(b *testing.B) {
	for _, size := range []int{1024 + 44, 4096 + 44} {
		for _, m := range modes {
			if m.noGRO && !m.noGSO {
				continue
			}
			b.Run(fmt.Sprintf("size=%d/%s", size, m.name), func(b *testing.B) {
				cfg := Config{DisableGSO: m.noGSO, DisableGRO: m.noGRO, RcvBuf: 64 << 20}
				tx := open(b, lo4, cfg)
				rx := open(b, lo4b, cfg)
				const burst = 1024
				out := make([]link.Datagram, burst)
				buf := make([]byte, size)
				for i := range out {
					out[i] = link.Datagram{Buf: buf, Dst: rx.LocalAddr()}
				}
				tx.PlanIPID(out)
				in := make([]link.Datagram, 64)
				bufs := make([]byte, len(in)*size)
				b.SetBytes(int64(size * burst))
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					if _, err := tx.Send(out); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					for got := 0; got < burst; {
						for i := range in {
							in[i].Buf = bufs[i*size : (i+1)*size]
						}
						n, err := rx.Recv(in)
						if err != nil {
							b.Fatal(err)
						}
						got += n
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*burst), "ns/dgram")
			})
		}
	}
}
