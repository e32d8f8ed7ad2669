package cm_test

import (
	"encoding/binary"
	"encoding/hex"
	"math/bits"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/internal/testutil"
)

// rping's comm IDs (testdata/pcaps/rping.pcap): ours are random, so the
// test writes these over the ones the Manager chose before comparing.
const (
	rpingClientID cm.CommID = 0x286b329e
	rpingServerID cm.CommID = 0xf31980e2
)

// setIDs overwrites a MAD's local and remote comm IDs (and, for a message
// its sender starts, the TID derived from the local one) with rping's.
func setIDs(mad []byte, local, remote cm.CommID, ownTID bool) []byte {
	b := append([]byte(nil), mad...)
	binary.BigEndian.PutUint32(b[24:], uint32(local))
	if remote != 0 {
		binary.BigEndian.PutUint32(b[28:], uint32(remote))
	}
	if ownTID {
		cm.MAD(b).SetTID(2<<32 | uint64(bits.ReverseBytes32(uint32(local))))
	}
	return b
}

// TestRpingAsTheKernel replays rping's CM exchange through two Managers
// set up as rxe and rdma_cm were, and checks that every MAD they build is
// byte-identical to the one Linux sent (comm IDs aside, which are random).
func TestRpingAsTheKernel(t *testing.T) {
	caps := map[cm.AttrID][]byte{}
	for _, c := range captureMADs(t, "rping.pcap") {
		caps[cm.MAD(c.mad).AttrID()] = c.mad
	}
	require.Len(t, caps, 5)
	clock := testutil.NewClock()
	now := clock.Now()
	client, err := cm.New(cm.Config{LocalCAGUID: 0x505400fffe770003, TIDHigh: 2})
	require.NoError(t, err)
	server, err := cm.New(cm.Config{LocalCAGUID: 0x505400fffe770002, TIDHigh: 2})
	require.NoError(t, err)
	require.NoError(t, server.Listen(sid))

	// REQ: rping -c -a 10.77.0.2 (port 7174; the client's rdma_cm port 0x8dd9).
	cp := connectParams()
	cp.PrivateData = make([]byte, cm.IPHeaderSize)
	cm.IPHeader(cp.PrivateData).Encode(&cm.IPHeaderFields{SrcPort: 0x8dd9, SrcAddr: addrA, DstAddr: addrB})
	cid, o, err := client.Connect(now, cp)
	require.NoError(t, err)
	require.Len(t, o.Send, 1)
	assert.Equal(t, addrB, o.Send[0].Peer)
	assert.Equal(t, hex.EncodeToString(caps[cm.AttrREQ]), hex.EncodeToString(setIDs(o.Send[0].MAD, rpingClientID, 0, true)), "REQ")

	// REP: the server accepts the captured REQ.
	o = server.Receive(now, addrA, caps[cm.AttrREQ])
	require.Len(t, o.Events, 1)
	srvID := o.Events[0].ID
	assert.Equal(t, cm.REQ(caps[cm.AttrREQ]).PrivateData(), o.Events[0].PrivateData)
	_, o, err = server.Accept(now, srvID, &cm.AcceptParams{QPN: 0x1c, StartingPSN: 0x8a4257,
		ResponderResources: 1, InitiatorDepth: 1, RNRRetryCount: 7})
	require.NoError(t, err)
	require.Len(t, o.Send, 1)
	assert.Equal(t, hex.EncodeToString(caps[cm.AttrREP]), hex.EncodeToString(setIDs(o.Send[0].MAD, rpingServerID, rpingClientID, false)), "REP")

	// RTU: the client gets the captured REP (addressed to its comm ID).
	o = client.Receive(now, addrB, setIDs(caps[cm.AttrREP], rpingServerID, cid, false))
	require.Len(t, o.Send, 1)
	assert.Equal(t, hex.EncodeToString(caps[cm.AttrRTU]), hex.EncodeToString(setIDs(o.Send[0].MAD, rpingClientID, rpingServerID, true)), "RTU")

	// DREQ: the client disconnects.
	o, err = client.Disconnect(now.Add(time.Second), cid, nil)
	require.NoError(t, err)
	require.Len(t, o.Send, 1)
	assert.Equal(t, hex.EncodeToString(caps[cm.AttrDREQ]), hex.EncodeToString(setIDs(o.Send[0].MAD, rpingClientID, rpingServerID, true)), "DREQ")

	// DREP: the server answers the captured DREQ (after its RTU).
	o = server.Receive(now, addrA, setIDs(caps[cm.AttrRTU], rpingClientID, srvID, false))
	require.Len(t, o.Events, 1)
	o = server.Receive(now, addrA, setIDs(caps[cm.AttrDREQ], rpingClientID, srvID, false))
	require.Len(t, o.Send, 1)
	assert.Equal(t, hex.EncodeToString(caps[cm.AttrDREP]), hex.EncodeToString(setIDs(o.Send[0].MAD, rpingServerID, rpingClientID, false)), "DREP")
}
