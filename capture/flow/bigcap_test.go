package flow_test

import (
	"bufio"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/capture/flow"
	"github.com/goroce/goroce/rocev2"
)

var (
	bigCap  = flag.String("bigcap", "", "write a large capture to this path (TestMakeBigCapture); never commit it")
	bigSize = flag.Int64("bigsize", 1<<30, "size of the -bigcap capture in bytes")
)

// TestMakeBigCapture writes a large capture for the memory and speed
// measurements of "goroce cap" (see the package README): the RoCEv2 frames
// of two real rxe captures (a 64 KiB RDMA WRITE stream and a 64 KiB RDMA
// READ stream) replicated until the file reaches -bigsize, each copy with
// its PSNs and MSNs moved on by one copy's span and its timestamps by one
// copy's duration, the ICRC resealed. Only with -bigcap.
//
//	go test ./capture/flow -run TestMakeBigCapture -bigcap=/tmp/big.pcap
func TestMakeBigCapture(t *testing.T) {
	if *bigCap == "" {
		t.Skip("give -bigcap PATH")
	}
	type block struct {
		recs         []rec
		span         uint32 // PSNs one copy takes
		msns         uint32
		dur          time.Duration
		first        time.Time
		psnLo, psnHi bth.PSN
	}
	var blocks []*block
	for _, name := range []string{"write_bw_s65536.pcap", "read_bw_s65536.pcap"} {
		b := &block{}
		for _, r := range readRecords(t, root+"/testdata/pcaps/"+name) {
			var p rocev2.Packet
			if p.ParseFrame(r.data) != nil {
				continue
			}
			if len(b.recs) == 0 {
				b.first, b.psnLo, b.psnHi = r.t, p.BTH.PSN(), p.BTH.PSN()
			}
			hi := p.BTH.PSN()
			if p.RETH != nil && p.Opcode() == bth.RCRDMAReadRequest {
				hi = hi.Add(uint32(flow.ReadSpan(p.RETH.DMALength(), 1024)) - 1)
			}
			if hi.After(b.psnHi) {
				b.psnHi = hi
			}
			if p.AETH != nil {
				b.msns = max(b.msns, p.AETH.MSN())
			}
			b.dur = r.t.Sub(b.first)
			b.recs = append(b.recs, r)
		}
		b.span = b.psnHi.Sub(b.psnLo) + 1
		b.dur += 100 * time.Microsecond
		blocks = append(blocks, b)
	}
	f, err := os.Create(*bigCap)
	require.NoError(t, err)
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	w := pcapgo.NewWriterNanos(bw)
	require.NoError(t, w.WriteFileHeader(65536, layers.LinkTypeEthernet))
	var (
		written int64 = 24
		now           = time.Unix(1_800_000_000, 0)
		buf     []byte
		p       rocev2.Packet
		frames  int
	)
	for k := uint32(0); written < *bigSize; k++ {
		for _, b := range blocks {
			for _, r := range b.recs {
				buf = append(buf[:0], r.data...)
				require.NoError(t, p.ParseFrame(buf))
				p.BTH.SetPSN(p.BTH.PSN().Add(k * b.span))
				if p.AETH != nil {
					p.AETH.SetMSN(p.AETH.MSN() + k*b.msns)
				}
				rocev2.PutICRC(p.ICRC, rocev2.ComputeICRC(p.IP, p.UDP, p.Body()))
				ts := now.Add(r.t.Sub(b.first))
				require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(buf), Length: len(buf)}, buf))
				written += 16 + int64(len(buf))
				frames++
			}
			now = now.Add(b.dur)
		}
	}
	require.NoError(t, bw.Flush())
	t.Logf("%s: %d frames, %d bytes", *bigCap, frames, written)
}
