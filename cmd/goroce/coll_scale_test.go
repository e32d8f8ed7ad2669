package main

import (
	"context"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/roce"
)

// BenchmarkCMConnect is the rate of RDMA CM connections one goroce device
// dials to another over UDP on loopback (REQ, REP, RTU through QP1, each
// side's QP created and moved to RTS), the figure issue 26 part 6 asks
// beside the memory per idle QP: conns/s, and with -benchmem the bytes a
// connection costs both devices (its two QPs, the CM's state and the
// accepted connection), held until the benchmark ends.
//
//	go test ./cmd/goroce -run '^$' -bench BenchmarkCMConnect -benchmem
func BenchmarkCMConnect(b *testing.B) {
	open := func(a string) *roce.Device {
		l, err := udp.Open(udp.Config{Addr: netip.MustParseAddrPort(a)})
		require.NoError(b, err)
		d, err := roce.Open(roce.Config{Link: l})
		require.NoError(b, err)
		b.Cleanup(func() { d.Close() })
		return d
	}
	server, client := open("127.26.0.2:4791"), open("127.26.0.1:4791")
	ln, err := server.Listen(7471, roce.ListenConfig{})
	require.NoError(b, err)
	b.Cleanup(func() { ln.Close() })
	accepted := make(chan *roce.Conn, 1024)
	go func() {
		for {
			c, err := ln.Accept(context.Background())
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var conns []*roce.Conn
	b.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for range b.N {
		c, err := client.Dial(ctx, ln.Addr(), roce.DialConfig{})
		require.NoError(b, err)
		conns = append(conns, c, <-accepted)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "conns/s")
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if after.HeapInuse > before.HeapInuse {
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/float64(2*b.N), "heap-B/QP")
	}
}
