package roce_test

import (
	"net/netip"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/roce"
)

// TestStatsSnapshot: Stats.Snapshot copies every counter of Stats into the
// field of the same name (a counter added to Stats and forgotten in the
// snapshot fails here).
func TestStatsSnapshot(t *testing.T) {
	var st roce.Stats
	sv := reflect.ValueOf(&st).Elem()
	want := map[string]uint64{}
	n := uint64(1)
	for i := range sv.NumField() {
		f := sv.Type().Field(i)
		switch v := sv.Field(i).Addr().Interface().(type) {
		case *atomic.Uint64:
			v.Store(n)
			want[f.Name] = n
			n++
		case *[4]atomic.Uint64:
			for k := range v {
				v[k].Store(n)
				want[f.Name+"["+string(rune('0'+k))+"]"] = n
				n++
			}
		default:
			t.Fatalf("Stats.%s is a %v: teach Snapshot and this test", f.Name, f.Type)
		}
	}
	snap := st.Snapshot()
	got := map[string]uint64{}
	gv := reflect.ValueOf(snap)
	for i := range gv.NumField() {
		f := gv.Type().Field(i)
		if f.Type.Kind() == reflect.Array {
			for k := range f.Type.Len() {
				got[f.Name+"["+string(rune('0'+k))+"]"] = gv.Field(i).Index(k).Uint()
			}
			continue
		}
		got[f.Name] = gv.Field(i).Uint()
	}
	assert.Equal(t, want, got)
}

// TestDeviceSnapshot: a snapshot lists the live QPs by QPN with their
// peer once connected and their counters; a destroyed QP leaves the list
// but its counters stay in QPTotals, as rxe's device-wide counters keep
// them.
func TestDeviceSnapshot(t *testing.T) {
	n := mem.NewNetwork()
	d, err := roce.Open(roce.Config{Link: n.Attach(netip.MustParseAddrPort("10.0.0.1:4791"))})
	require.NoError(t, err)
	defer d.Close()
	var qs []*roce.QP
	for range 3 {
		q, err := d.CreateQP(roce.QPConfig{})
		require.NoError(t, err)
		qs = append(qs, q)
	}
	peer := roce.Info{Addr: netip.MustParseAddr("10.0.0.2"), QPN: 77}
	require.NoError(t, qs[0].Connect(peer, roce.ConnectOptions{}))
	qs[1].Counters().Add(roce.CounterRkeyViolation, 5)
	qs[2].Counters().Add(roce.CounterRkeyViolation, 2)

	s := d.Snapshot()
	assert.Equal(t, d.LocalAddr(), s.Addr)
	require.Len(t, s.QPs, 3)
	for i := 1; i < len(s.QPs); i++ {
		assert.Less(t, s.QPs[i-1].QPN, s.QPs[i].QPN, "QPs by QPN")
	}
	for _, q := range s.QPs {
		switch q.QPN {
		case qs[0].QPN():
			assert.Equal(t, netip.AddrPortFrom(peer.Addr, 4791), q.Peer)
			assert.Equal(t, peer.QPN, q.PeerQPN)
		case qs[1].QPN():
			assert.False(t, q.Peer.IsValid(), "not connected")
			assert.Equal(t, uint64(5), q.Counters[roce.CounterRkeyViolation])
		}
	}
	assert.Equal(t, uint64(7), s.QPTotals[roce.CounterRkeyViolation])

	require.NoError(t, qs[1].Destroy())
	s = d.Snapshot()
	require.Len(t, s.QPs, 2)
	for _, q := range s.QPs {
		assert.NotEqual(t, qs[1].QPN(), q.QPN, "destroyed QP listed")
	}
	assert.Equal(t, uint64(7), s.QPTotals[roce.CounterRkeyViolation], "a destroyed QP's counts stay")
}
