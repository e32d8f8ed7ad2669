package roce_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// TestShrinkResourcesWithRepliesQueued: SQD→SQD may set MaxDestRdAtomic,
// which reallocates the responder's resource ring, while READ replies are
// still queued. Found in review: a queued reply kept its index into the old
// ring, and a smaller ring made the engine goroutine index out of range
// (a crash of the process). The replies now go out without it.
func TestShrinkResourcesWithRepliesQueued(t *testing.T) {
	n := mem.NewNetwork()
	a := openMWSide(t, n.Attach(netip.MustParseAddrPort("10.0.0.1:4791")))
	b := openMWSide(t, n.Attach(netip.MustParseAddrPort("10.0.0.2:4791")))
	defer a.dev.Close()
	defer b.dev.Close()
	if err := a.qp.Connect(b.qp.Info(), roce.ConnectOptions{}); err != nil {
		t.Fatal(err)
	}
	// b's replies are paced slowly, so they stay queued.
	if err := b.qp.Connect(a.qp.Info(), roce.ConnectOptions{MaxRate: 2e6}); err != nil {
		t.Fatal(err)
	}
	abuf := make([]byte, 65536)
	amr, _ := a.dev.RegisterMR(a.pd, abuf, mr.LocalWrite)
	bbuf := make([]byte, 65536)
	bmr, _ := b.dev.RegisterMR(b.pd, bbuf, mr.LocalWrite|mr.RemoteRead)
	for i := 0; i < 2; i++ {
		wr := qp.SendWR{WRID: uint64(i), Opcode: qp.WRRDMARead, Flags: qp.SendSignaled,
			SGL: []qp.SGE{amr.SGE(i*32768, 32768)}, RemoteAddr: bmr.IOVA() + uint64(i*32768), RKey: bmr.RKey()}
		if err := a.qp.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	t.Logf("before SQD: a completions %d, b sent %d, b cc %+v", a.scq.Len(), b.dev.Stats().TxPackets.Load(), b.qp.CC())
	if err := b.qp.Modify(&qp.Attr{State: qp.StateSQD}, qp.AttrState); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.Modify(&qp.Attr{State: qp.StateSQD, MaxDestRdAtomic: 1}, qp.AttrState|qp.AttrMaxDestRdAtomic); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the engine sends the queued replies
	t.Logf("after: a completions %d, b sent %d, b state %v", a.scq.Len(), b.dev.Stats().TxPackets.Load(), b.qp.State())
}
