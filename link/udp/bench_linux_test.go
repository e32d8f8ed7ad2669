//go:build linux

package udp

import (
	"encoding/binary"
	"fmt"
	"net"
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
// doc/limits.md §1 (lo, 4156 B / 1084 B rows).
//
// The "reference" rows move the same bytes the way doc/limits.md measured its
// best row (gso-tx + gro-rx): a net.UDPConn with the UDP_SEGMENT socket
// option writing one super-packet per call, and a UDP_GRO reader that only
// counts segments and never hands a datagram to anyone. They are the floor
// of kernel cost that link/udp's per-datagram delivery adds to.
func BenchmarkLoopback(b *testing.B) {
	for _, size := range []int{1024 + 44, 4096 + 44} {
		for _, m := range modes {
			b.Run(fmt.Sprintf("size=%d/%s", size, m.name), func(b *testing.B) {
				benchStream(b, size, 64, m.noGSO, m.noGRO)
			})
		}
		b.Run(fmt.Sprintf("size=%d/reference", size), func(b *testing.B) {
			benchReference(b, size)
		})
	}
}

// streamMeter is the credit window and the figures shared by the two
// stream benchmarks.
type streamMeter struct {
	got   atomic.Uint64
	wake  chan struct{}
	timer *time.Timer
	sent  uint64
	lost  uint64
	cpu0  time.Duration
	t0    time.Time
}

func newStreamMeter() *streamMeter {
	return &streamMeter{wake: make(chan struct{}, 1), timer: time.NewTimer(time.Hour)}
}

// received is called by the receiver.
func (s *streamMeter) received(n int) {
	s.got.Add(uint64(n))
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// wait blocks the sender while more than limit datagrams are in flight;
// after 100 ms without progress it writes the missing ones off as lost.
func (s *streamMeter) wait(limit uint64) {
	for s.sent-s.lost-s.got.Load() > limit {
		s.timer.Reset(100 * time.Millisecond)
		select {
		case <-s.wake:
		case <-s.timer.C:
			s.lost = s.sent - s.got.Load()
		}
		s.timer.Stop()
	}
}

func (s *streamMeter) start(b *testing.B) {
	b.ReportAllocs()
	b.ResetTimer()
	s.cpu0 = cpuTime()
	s.t0 = time.Now()
}

func (s *streamMeter) report(b *testing.B, size int) {
	s.wait(0)
	el := time.Since(s.t0).Seconds()
	cpu := cpuTime() - s.cpu0
	b.StopTimer()
	r := s.got.Load()
	b.ReportMetric(float64(r)/el/1e6, "rx-Mpps")
	b.ReportMetric(float64(r)*float64(size)*8/el/1e9, "rx-Gb/s")
	b.ReportMetric(100*float64(s.sent-r)/float64(s.sent), "loss-%")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(r), "cpu-ns/dgram")
}

func benchStream(b *testing.B, size, batch int, noGSO, noGRO bool) {
	cfg := Config{DisableGSO: noGSO, DisableGRO: noGRO}
	tx := open(b, lo4, cfg)
	rx := open(b, lo4b, cfg)
	s := newStreamMeter()
	inflight := uint64(max(streamWindow/size, 2*batch))
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
			s.received(n)
		}
	}()
	dgs := make([]link.Datagram, batch)
	buf := make([]byte, size)
	for i := range dgs {
		dgs[i] = link.Datagram{Buf: buf, Dst: rx.LocalAddr()}
	}
	tx.PlanIPID(dgs)
	b.SetBytes(int64(size * batch))
	s.start(b)
	for i := 0; i < b.N; i++ {
		s.wait(inflight)
		n, err := tx.Send(dgs)
		if err != nil {
			b.Fatal(err)
		}
		s.sent += uint64(n)
	}
	s.report(b, size)
	rx.Close()
	wg.Wait()
	if ri := rx.Info(); ri.GRO {
		b.ReportMetric(100*float64(ri.GROCopied)/float64(s.got.Load()), "copied-%")
	}
}

// streamWindow is the credit of the stream benchmarks, in bytes: well
// under the socket buffers, so the receiver is never overrun.
const streamWindow = 2 << 20

// benchReference is doc/limits.md's gso-tx + gro-rx method under the same
// credit window: one op is 64 datagrams, sent as super-packets of as many
// segments as fit in 65000 bytes.
func benchReference(b *testing.B, size int) {
	rxc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)})
	if err != nil {
		b.Fatal(err)
	}
	defer rxc.Close()
	txc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer txc.Close()
	segs := 65000 / size
	setopt := func(c *net.UDPConn, opts ...[3]int) {
		rc, err := c.SyscallConn()
		if err != nil {
			b.Fatal(err)
		}
		rc.Control(func(fd uintptr) {
			for _, o := range opts {
				if err := unix.SetsockoptInt(int(fd), o[0], o[1], o[2]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	setopt(rxc, [3]int{unix.SOL_UDP, unix.UDP_GRO, 1}, [3]int{unix.SOL_SOCKET, unix.SO_RCVBUF, DefaultRcvBuf})
	setopt(txc, [3]int{unix.SOL_UDP, unix.UDP_SEGMENT, size}, [3]int{unix.SOL_SOCKET, unix.SO_SNDBUF, DefaultSndBuf})
	s := newStreamMeter()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 1<<16)
		oob := make([]byte, 64)
		for {
			n, oobn, _, _, err := rxc.ReadMsgUDP(buf, oob)
			if err != nil {
				return
			}
			seg := n
			if oobn >= unix.CmsgLen(4) {
				seg = int(binary.NativeEndian.Uint32(oob[unix.CmsgLen(0):]))
			}
			s.received((n + seg - 1) / seg)
		}
	}()
	super := make([]byte, segs*size)
	dst := rxc.LocalAddr().(*net.UDPAddr)
	b.SetBytes(int64(size * 64))
	s.start(b)
	for i := 0; i < b.N; i++ {
		for left := 64; left > 0; {
			k := min(left, segs)
			s.wait(uint64(max(streamWindow/size, 128)))
			if _, err := txc.WriteToUDP(super[:k*size], dst); err != nil {
				b.Fatal(err)
			}
			s.sent += uint64(k)
			left -= k
		}
	}
	s.report(b, size)
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

// BenchmarkPingPong measures round trips of 64-byte datagrams between two
// goroutines over loopback: ns/op is one round trip, one-way-ns half of
// it (doc/limits.md §5 "lo gor block"). The reference row does the same with
// net.UDPConn ReadFromUDPAddrPort / WriteToUDPAddrPort.
func BenchmarkPingPong(b *testing.B) {
	b.Run("link", func(b *testing.B) {
		a := open(b, lo4, Config{})
		c := open(b, lo4b, Config{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			dgs := []link.Datagram{{Buf: make([]byte, 2048)}}
			for {
				dgs[0].Buf = dgs[0].Buf[:cap(dgs[0].Buf)]
				if _, err := c.Recv(dgs); err != nil {
					return
				}
				dgs[0].Dst = dgs[0].Src
				if _, err := c.Send(dgs); err != nil {
					return
				}
			}
		}()
		out := []link.Datagram{{Buf: make([]byte, 64), Dst: c.LocalAddr()}}
		in := []link.Datagram{{Buf: make([]byte, 2048)}}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.Send(out); err != nil {
				b.Fatal(err)
			}
			in[0].Buf = in[0].Buf[:cap(in[0].Buf)]
			if _, err := a.Recv(in); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "one-way-ns")
		c.Close()
		wg.Wait()
	})
	b.Run("reference", func(b *testing.B) {
		a, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			b.Fatal(err)
		}
		defer a.Close()
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)})
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 2048)
			for {
				n, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					return
				}
				if _, err := c.WriteToUDPAddrPort(buf[:n], from); err != nil {
					return
				}
			}
		}()
		dst := c.LocalAddr().(*net.UDPAddr).AddrPort()
		out, in := make([]byte, 64), make([]byte, 2048)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.WriteToUDPAddrPort(out, dst); err != nil {
				b.Fatal(err)
			}
			if _, _, err := a.ReadFromUDPAddrPort(in); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "one-way-ns")
		c.Close()
		wg.Wait()
	})
}

// BenchmarkSendBurst measures Send alone for a burst of 64 RoCE-sized
// datagrams (GSO super-packets of up to 64 KiB) to a socket that is never read, whose
// kernel drops what overflows: "copied" has each whole datagram in one
// buffer, as after a copy out of a memory region; "gathered" has the
// header and ICRC in a small buffer and the payload in a 64 MiB region
// walked burst by burst (link.Datagram's two-part form, three iovecs per
// datagram); "copy+send" copies that payload into the packet buffers
// first, as the device did before it gathered. Same bytes on the wire.
func BenchmarkSendBurst(b *testing.B) {
	const (
		hdr    = 28
		pl     = 4096
		burst  = 64
		region = 64 << 20
	)
	for _, mode := range []string{"copied", "gathered", "copy+send"} {
		b.Run(mode, func(b *testing.B) {
			tx := open(b, lo4, Config{})
			rx := open(b, lo4b, Config{})
			mem := make([]byte, region)
			for i := range mem {
				mem[i] = byte(i)
			}
			dgs := make([]link.Datagram, burst)
			for i := range dgs {
				dgs[i] = link.Datagram{Dst: rx.LocalAddr()}
				if mode == "gathered" {
					dgs[i].Buf, dgs[i].PayloadAt = make([]byte, hdr+4), hdr
				} else {
					dgs[i].Buf = make([]byte, hdr+pl+4)
				}
			}
			off := 0
			b.SetBytes(burst * (hdr + pl + 4))
			b.ReportAllocs()
			for b.Loop() {
				for i := range dgs {
					src := mem[off : off+pl]
					switch mode {
					case "gathered":
						dgs[i].Payload = src
					case "copy+send":
						copy(dgs[i].Buf[hdr:], src)
					}
					off += pl
					if off+pl > region {
						off = 0
					}
				}
				tx.PlanIPID(dgs) // after Payload is set: the plan depends on the lengths, as in the device's flushTx
				if _, err := tx.Send(dgs); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if g, n := tx.Info().GSOSent, tx.Stats().SentPackets/burst; g != 5*n {
				b.Fatalf("%d super-packets for %d bursts, want 5 each (64 KiB)", g, n)
			}
		})
	}
}
