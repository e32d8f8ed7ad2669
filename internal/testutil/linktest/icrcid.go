//go:build linux

package linktest

import (
	"bytes"
	"testing"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/reth"
	"github.com/goroce/goroce/roce"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/wire"
)

// CraftedPeer is a hand-made RoCEv2 requester on a link that puts the
// caller's IPv4 ID in the header (a raw binding, link/mem): it sends RDMA
// WRITE ONLY packets to one QP of a device on another link, each with an
// ICRC computed over an ID that may differ from the header's (issue 17,
// defect 1). It never reads its link; the device's ACKs are left there.
type CraftedPeer struct {
	L   link.Link
	Dev *roce.Device
	QP  *roce.QP
	MR  *mr.Region
	Buf []byte
	PSN bth.PSN
}

// NewCraftedPeer opens a device on dev (closed at cleanup) with one QP
// connected to a peer QP at peer's address, and an MR the peer may write.
func NewCraftedPeer(t testing.TB, peer, dev link.Link) *CraftedPeer {
	t.Helper()
	d, err := roce.Open(roce.Config{Link: dev, DestPort: peer.LocalAddr().Port()})
	if err != nil {
		t.Fatalf("roce.Open: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	p := &CraftedPeer{L: peer, Dev: d, Buf: make([]byte, 4096), PSN: 100}
	pd := d.AllocPD()
	c, err := d.CreateCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	if p.QP, err = d.CreateQP(roce.QPConfig{PD: pd, SendCQ: c, RecvCQ: c}); err != nil {
		t.Fatal(err)
	}
	if p.MR, err = d.RegisterMR(pd, p.Buf, mr.LocalWrite|mr.RemoteWrite); err != nil {
		t.Fatal(err)
	}
	info := roce.Info{Addr: peer.LocalAddr().Addr(), QPN: 0x1234, PSN: p.PSN}
	if err := p.QP.Connect(info, roce.ConnectOptions{}); err != nil {
		t.Fatal(err)
	}
	return p
}

// Write sends an 8-byte WRITE of pattern b at offset off with the next PSN,
// the IPv4 ID hdrID in its header and its ICRC computed over icrcID, waits
// until the device has processed it, and reports whether the data was
// written (the PSN then advances).
func (p *CraftedPeer) Write(t testing.TB, hdrID, icrcID uint16, off int, b byte) bool {
	t.Helper()
	f := wire.Fields{
		BTH:  bth.Fields{Opcode: bth.RCRDMAWriteOnly, PKey: rocev2.DefaultPKey, DestQP: p.QP.QPN(), AckReq: true, PSN: p.PSN},
		RETH: reth.Fields{VA: p.MR.IOVA() + uint64(off), RKey: uint32(p.MR.RKey()), DMALength: 8},
	}
	pkt := make([]byte, 128)
	n, err := wire.Build(pkt, &f, bytes.Repeat([]byte{b}, 8))
	if err != nil {
		t.Fatal(err)
	}
	pkt = pkt[:n]
	src, dst := p.L.LocalAddr(), p.Dev.LocalAddr()
	var ph [rocev2.PseudoHeaderLen]byte
	ip, u := rocev2.PseudoHeaders(&ph, src, dst, icrcID, n)
	rocev2.PutICRC(pkt[n-bth.ICRCSize:], rocev2.ComputeICRC(ip, u, pkt[:n-bth.ICRCSize]))
	st := p.Dev.Stats()
	before := st.RxPackets.Load()
	if k, err := p.L.Send([]link.Datagram{{Buf: pkt, Src: src, Dst: dst, IPID: hdrID}}); k != 1 {
		t.Fatalf("send: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for st.RxPackets.Load() == before {
		if time.Now().After(deadline) {
			t.Fatalf("the device received nothing")
		}
		time.Sleep(time.Millisecond)
	}
	// The engine lock: the packet's processing is done. The region's lock
	// orders this read before the device's later writes.
	p.QP.State()
	got := make([]byte, 8)
	if err := p.MR.ReadAt(got, p.MR.IOVA()+uint64(off)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, pkt[bth.Size+reth.Size:][:8]) {
		return false
	}
	p.PSN = p.PSN.Add(1)
	return true
}

// CheckExactICRCID runs the crafted packets of issue 17, defect 1 on a
// link that sees the IPv4 ID: a packet whose ICRC covers its header's ID is
// written; one whose ICRC covers another ID (one step away, which ID
// recovery would accept) is dropped and counted as a bad ICRC, the ID never
// recovered.
func CheckExactICRCID(t *testing.T, peer, dev link.Link) {
	p := NewCraftedPeer(t, peer, dev)
	st := p.Dev.Stats()
	for i, id := range []uint16{0xa354, 0xa355, 0, 0xffff} {
		if !p.Write(t, id, id, 8*i, byte(i+1)) {
			t.Fatalf("packet %d: ICRC over its header's ID %#04x not accepted", i, id)
		}
	}
	for i, ids := range [][2]uint16{{0xa356, 0xa357}, {0xa356, 0xa355}, {0xa356, 0}, {0, 0xa356}, {0xa356, 0x2356}} {
		if p.Write(t, ids[0], ids[1], 64, byte(0x80+i)) {
			t.Fatalf("header ID %#04x, ICRC over %#04x: written", ids[0], ids[1])
		}
	}
	if got := p.QP.Counters().Load(qp.CounterBadICRC); got != 5 {
		t.Errorf("QP BadICRC = %d, want 5", got)
	}
	if st.BadICRC.Load() != 5 || st.ICRCIDFixups.Load() != 0 || st.ICRCIDOutOfWindow.Load() != 0 || st.ICRCIDReseeds.Load() != 0 {
		t.Errorf("device: BadICRC %d (want 5), ICRCIDFixups %d, ICRCIDOutOfWindow %d, ICRCIDReseeds %d (want 0)",
			st.BadICRC.Load(), st.ICRCIDFixups.Load(), st.ICRCIDOutOfWindow.Load(), st.ICRCIDReseeds.Load())
	}
	if !p.Write(t, 0xa356, 0xa356, 64, 9) {
		t.Fatal("the next good packet is not accepted")
	}
}
