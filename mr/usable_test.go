package mr_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/mr"
)

// TestUsable checks that Region.Usable answers as a lookup of the key
// would, for each way a lookup fails: another key, another PD, a
// missing access right, an invalidated region, a deregistered one.
func TestUsable(t *testing.T) {
	tbl := newTable(t)
	pd, other := tbl.AllocPD(), tbl.AllocPD()
	r := register(t, tbl, pd, 0x1000, 4096, rw)
	inv, err := tbl.Register(pd, mr.RegisterConfig{Buf: make([]byte, 64), Access: all, Invalidatable: true})
	require.NoError(t, err)
	gone := register(t, tbl, pd, 0x9000, 64, rw)
	require.NoError(t, tbl.Invalidate(pd, inv.LKey()))
	require.NoError(t, tbl.Deregister(gone))
	tests := []struct {
		name string
		r    *mr.Region
		pd   *mr.PD
		key  mr.Key
		need mr.AccessFlags
		want bool
	}{
		{"its key, PD and access", r, pd, r.LKey(), mr.RemoteWrite, true},
		{"no access needed", r, pd, r.LKey(), 0, true},
		{"another key", r, pd, r.LKey() ^ 1, mr.RemoteWrite, false},
		{"another PD", r, other, r.LKey(), mr.RemoteWrite, false},
		{"an access it does not grant", r, pd, r.LKey(), mr.RemoteRead, false},
		{"invalidated", inv, pd, inv.LKey(), mr.RemoteWrite, false},
		{"deregistered", gone, pd, gone.LKey(), 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.r.Usable(tc.pd, tc.key, tc.need))
			_, err := tbl.LookupLocal(tc.pd, tc.key, tc.r.IOVA(), 1, tc.need)
			assert.Equal(t, tc.want, err == nil, "the table agrees: %v", err)
		})
	}
}
