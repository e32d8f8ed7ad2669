package fabric

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// statsOf builds a snapshot of a 2-leaf, 2-spine fabric with one host per
// leaf whose every counter is base plus a per-link offset.
func statsOf(t *testing.T, base uint64, at time.Time) *Stats {
	f, err := Plan(Config{Name: "demo", Spines: 2, Rate: Gbit})
	require.NoError(t, err)
	s := &Stats{Fabric: f.Name, Time: at}
	for i, l := range f.Links {
		end := func(e End, k uint64) EndStats {
			es := EndStats{NS: e.NS, Dev: e.Dev, TxBytes: base * k * 1000, TxPackets: base * k, Drops: base * k / 10, Backlog: k}
			if e.Slot >= 0 {
				es.ECN = &ECNStats{Packets: base * k, Marks: base, MaxBacklog: 7 * k}
			}
			return es
		}
		s.Links = append(s.Links, LinkStats{Name: l.Name, Kind: l.Kind, Leaf: l.Leaf, Spine: l.Spine, Host: l.Host,
			A: end(l.A, uint64(i+1)), B: end(l.B, uint64(i+2))})
	}
	s.sumSpines(len(f.Spines))
	return s
}

func TestStatsSub(t *testing.T) {
	t0 := time.Unix(100, 0)
	a, b := statsOf(t, 10, t0), statsOf(t, 30, t0.Add(2*time.Second))
	d, err := b.Sub(a)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, d.Span)
	// Link l0-s1 is link 1: A counters are 2·base, B 3·base.
	l, ok := d.Link("l0-s1")
	require.True(t, ok)
	assert.Equal(t, uint64(20*2), l.A.TxPackets)
	assert.Equal(t, uint64(20*3*1000), l.B.TxBytes)
	assert.Equal(t, uint64(2), l.A.Backlog, "a gauge keeps the later value")
	assert.Equal(t, uint64(20), l.A.ECN.Marks)
	assert.Equal(t, uint64(14), l.A.ECN.MaxBacklog, "a gauge keeps the later value")
	assert.Equal(t, uint64(30), b.Links[1].A.ECN.Marks, "Sub leaves its operands alone")

	// Spine 1 carries links l0-s1 (index 1) and l1-s1 (index 3).
	assert.Equal(t, SpineStats{Spine: 1, UpBytes: 20 * (2 + 4) * 1000, UpPackets: 20 * (2 + 4),
		DownBytes: 20 * (3 + 5) * 1000, DownPackets: 20 * (3 + 5)}, d.Spines[1])
	p, by := d.LeafToSpine(1)
	assert.Equal(t, []uint64{20 * 3, 20 * 4}, p)
	assert.Equal(t, []uint64{20 * 3 * 1000, 20 * 4 * 1000}, by)
	assert.Equal(t, []uint64{20 * (2 + 4) * 1000, 20 * (3 + 5) * 1000}, d.SpineBytes())

	// Marks: every marked end (both ends of 4 uplinks, no host end: no host
	// rate); drops: every leaf end and the spines' ends, not the hosts'
	// NICs (links 4 and 5, B ends 6·2 and 7·2).
	marks, drops := d.Marks()
	assert.Equal(t, uint64(8*20), marks)
	var want uint64
	for i := range 6 {
		want += uint64(20 * (i + 1) / 10)
		if i < 4 {
			want += uint64(20 * (i + 2) / 10)
		}
	}
	assert.Equal(t, want, drops)

	other := statsOf(t, 1, t0)
	other.Fabric = "else"
	_, err = b.Sub(other)
	assert.Error(t, err)

	var sb strings.Builder
	d.WriteTable(&sb)
	assert.Contains(t, sb.String(), "spine bytes max/mean 1.14")
	assert.Regexp(t, `(?m)^l1-h1\s+host\s+\|\s+120000\s+120\s+12\s+-\s+\|`, sb.String())
}

func TestBalance(t *testing.T) {
	total, maxN, mean, ratio, idles := Balance([]uint64{10, 30, 0, 40}, 5)
	assert.Equal(t, uint64(80), total)
	assert.Equal(t, uint64(40), maxN)
	assert.Equal(t, 20.0, mean)
	assert.Equal(t, 2.0, ratio)
	assert.Equal(t, 1, idles)
	_, _, _, ratio, _ = Balance(nil, 0)
	assert.Zero(t, ratio)
}
