//go:build linux

package fabric

import (
	"fmt"
	"time"
)

// Stats reads the fabric's counters now: every link end's interface and
// root qdisc counters (by netlink inside each namespace) and the markers'
// counters (from the marker map, found by its ID). The namespaces are read
// one after the other; Stats.Time is the middle of the reading and
// Stats.Read its length.
func (f *Fabric) Stats() (*Stats, error) {
	start := time.Now()
	type nsCounters struct {
		links  map[string]devCounters
		qdiscs map[int32]qdiscCounters
	}
	byNS := map[string]nsCounters{}
	for _, l := range f.Links {
		for _, e := range []End{l.A, l.B} {
			if _, ok := byNS[e.NS]; ok {
				continue
			}
			var c nsCounters
			err := InNetns(e.NS, func() error {
				conn, err := nlOpen()
				if err != nil {
					return err
				}
				defer conn.close()
				if c.links, err = conn.links(); err != nil {
					return err
				}
				c.qdiscs, err = conn.rootQdiscs()
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("fabric: counters of %s: %w", e.NS, err)
			}
			byNS[e.NS] = c
		}
	}
	var ecn [][]byte
	if f.MarkerMapID != 0 {
		m, err := f.openMarkerMap()
		if err != nil {
			return nil, err
		}
		for i := range f.MarkerSlots {
			v := make([]byte, slotSize)
			if err := m.Lookup(uint32(i), v); err != nil {
				m.Close()
				return nil, err
			}
			ecn = append(ecn, v)
		}
		m.Close()
	}
	read := time.Since(start)
	s := &Stats{Fabric: f.Name, Time: start.Add(read / 2), Read: read}
	for _, l := range f.Links {
		ls := LinkStats{Name: l.Name, Kind: l.Kind, Leaf: l.Leaf, Spine: l.Spine, Host: l.Host}
		for i, e := range []End{l.A, l.B} {
			c := byNS[e.NS]
			d, ok := c.links[e.Dev]
			if !ok {
				return nil, fmt.Errorf("fabric: no interface %s in %s", e.Dev, e.NS)
			}
			q := c.qdiscs[d.index]
			es := EndStats{NS: e.NS, Dev: e.Dev, TxBytes: d.txBytes, TxPackets: d.txPackets, RxBytes: d.rxBytes, RxPackets: d.rxPackets,
				Drops: uint64(q.drops), Overlimits: uint64(q.overlimits), Backlog: uint64(q.backlog)}
			if e.Slot >= 0 && e.Slot < len(ecn) {
				x := decodeECN(ecn[e.Slot], newMarkerParams(e.Slot, l.Rate, f.Config.ECN.Gamma, 0, 0).bytesPerNanos)
				es.ECN = &x
			}
			if i == 0 {
				ls.A = es
			} else {
				ls.B = es
			}
		}
		s.Links = append(s.Links, ls)
	}
	s.sumSpines(len(f.Spines))
	return s, nil
}
