package roce_test

import (
	"context"
	"crypto/sha256"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/testutil"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// reseal re-computes a forwarded packet's ICRC for its new addresses (the
// proxy is a NAT that knows RoCE); a packet that arrived with a bad ICRC
// keeps a bad one.
func reseal(pkt []byte, oldSrc, oldDst, newSrc, newDst netip.AddrPort) bool {
	if len(pkt) < bth.Size+bth.ICRCSize {
		return false
	}
	var ph [48]byte
	body := pkt[:len(pkt)-4]
	ip, udp := roce.PseudoHeaders(&ph, oldSrc, oldDst, 0, len(pkt))
	got := roce.ComputeICRC(ip, udp, body)
	_, ok := roce.RecoverIPv4ID(got, roce.ReadICRC(pkt[len(pkt)-4:]), len(pkt))
	ip, udp = roce.PseudoHeaders(&ph, newSrc, newDst, 0, len(pkt))
	c := roce.ComputeICRC(ip, udp, body)
	if !ok {
		c = ^c
	}
	roce.PutICRC(pkt[len(pkt)-4:], c)
	return ok
}

// TestRealSocketReliability moves 1 GiB of RDMA WRITE and 256 MiB of READ
// between two devices on loopback UDP sockets through an impairing proxy
// (1% loss, 1% reorder, 0.5% duplication each way): the data arrives
// byte-exact (SHA-256) with exactly one successful CQE per WR.
func TestRealSocketReliability(t *testing.T) {
	if testing.Short() {
		t.Skip("real-socket transfer of 1.25 GiB; skipped with -short")
	}
	writeSize, readSize := 1<<30, 256<<20
	if os.Getenv("GOROCE_QUICK") != "" {
		writeSize, readSize = 64<<20, 16<<20
	}
	// Every address gets a free port (tests of several packages run at
	// once): the links first, then the proxy's fronts, then the devices,
	// each sending to the front that stands for its peer.
	ap := netip.MustParseAddrPort
	la, err := udp.Open(udp.Config{Addr: ap("127.0.0.1:0")})
	require.NoError(t, err)
	lb, err := udp.Open(udp.Config{Addr: ap("127.0.0.2:0")})
	require.NoError(t, err)
	imp := testutil.Impairment{Loss: 0.01, Dup: 0.005,
		Reorder: testutil.Reorder{Rate: 0.01, MinSlots: 1, MaxSlots: 8, HoldMax: 200 * time.Microsecond}}
	px, err := testutil.NewUDPProxy(testutil.ProxyConfig{A: la.LocalAddr(), B: lb.LocalAddr(),
		FrontA: ap("127.0.0.4:0"), FrontB: ap("127.0.0.3:0"),
		Seed: testutil.Seed(t), AB: imp, BA: imp, Reseal: reseal})
	require.NoError(t, err)
	defer px.Close()
	frontA, frontB := px.Fronts()

	open := func(l *udp.Link, destPort uint16) (*roce.Device, *mr.PD, *cq.CQ, *roce.QP) {
		d, err := roce.Open(roce.Config{Link: l, DestPort: destPort})
		require.NoError(t, err)
		pd := d.AllocPD()
		c, err := d.CreateCQ(1024)
		require.NoError(t, err)
		q, err := d.CreateQP(roce.QPConfig{PD: pd, SendCQ: c, RecvCQ: c})
		require.NoError(t, err)
		return d, pd, c, q
	}
	da, pda, cqa, qa := open(la, frontB.Port())
	defer da.Close()
	db, pdb, _, qb := open(lb, frontA.Port())
	defer db.Close()
	ia, ib := qa.Info(), qb.Info()
	ia.Addr, ib.Addr = frontA.Addr(), frontB.Addr()
	opts := roce.ConnectOptions{MTU: qp.MTU4096} // rdma-core's test defaults: timeout 14, retry_cnt 7
	require.NoError(t, qa.Connect(ib, opts))
	require.NoError(t, qb.Connect(ia, opts))

	const chunk = 64 << 20
	src := testutil.Pattern(7, chunk)
	dst := make([]byte, chunk)
	acc := mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead
	sm, err := da.RegisterMR(pda, src, acc)
	require.NoError(t, err)
	dm, err := db.RegisterMR(pdb, dst, acc)
	require.NoError(t, err)
	back := make([]byte, chunk)
	bm, err := da.RegisterMR(pda, back, acc)
	require.NoError(t, err)

	// run posts msg-byte WRs covering size bytes (the 64 MiB buffers are
	// reused round after round) and checks each round's data.
	run := func(op qp.WROpcode, size int) {
		const msg, depth = 1 << 20, 16
		posted, done := 0, 0
		n := size / msg
		wcs := make([]cq.Completion, 64)
		round := chunk / msg
		for done < n {
			for posted < n && posted-done < depth && posted/round == done/round {
				off := uint64(posted%round) * msg
				wr := qp.SendWR{WRID: uint64(posted), Opcode: op, Flags: qp.SendSignaled}
				if op == qp.WRRDMAWrite {
					wr.SGL = []qp.SGE{{Addr: sm.IOVA() + off, Length: msg, LKey: sm.LKey()}}
					wr.RemoteAddr, wr.RKey = dm.IOVA()+off, dm.RKey()
				} else {
					wr.SGL = []qp.SGE{{Addr: bm.IOVA() + off, Length: msg, LKey: bm.LKey()}}
					wr.RemoteAddr, wr.RKey = dm.IOVA()+off, dm.RKey()
				}
				require.NoError(t, qa.PostSend(&wr))
				posted++
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			k, err := cqa.Wait(ctx, wcs)
			cancel()
			require.NoError(t, err, "no completion for 30 s: posted %d done %d, A %+v B %+v", posted, done,
				qa.Counters().Snapshot(), qb.Counters().Snapshot())
			for _, wc := range wcs[:k] {
				require.Equal(t, cq.StatusSuccess, wc.Status, "wr %d: %v; A %+v; B %+v", wc.WRID, wc.Status, qa.Counters().Snapshot(), qb.Counters().Snapshot())
				require.Equal(t, uint64(done), wc.WRID, "one CQE per WR, in post order")
				require.Equal(t, uint32(msg), wc.ByteLen)
				done++
			}
			if done%round == 0 && done == posted {
				want := sha256.Sum256(src)
				got := dst
				if op == qp.WRRDMARead {
					got = back
				}
				require.Equal(t, want, sha256.Sum256(got), "round ending at WR %d", done)
				clear(got)
			}
		}
	}
	start := time.Now()
	run(qp.WRRDMAWrite, writeSize)
	tw := time.Since(start)
	copy(dst, src)
	start = time.Now()
	run(qp.WRRDMARead, readSize)
	tr := time.Since(start)
	ab, ba := px.Stats()
	t.Logf("WRITE %d MiB in %v (%.2f Gb/s), READ %d MiB in %v (%.2f Gb/s); proxy dropped %d/%d, duplicated %d/%d, reordered %d/%d",
		writeSize>>20, tw, float64(writeSize)*8/tw.Seconds()/1e9, readSize>>20, tr, float64(readSize)*8/tr.Seconds()/1e9,
		ab.TotalDropped(), ba.TotalDropped(), ab.Duplicated, ba.Duplicated, ab.Reordered, ba.Reordered)
	t.Logf("A %+v", qa.Counters().Snapshot())
	t.Logf("B %+v", qb.Counters().Snapshot())
	require.Positive(t, ab.TotalDropped()+ba.TotalDropped())
}
