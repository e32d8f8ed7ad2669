//go:build linux

package fabric

import (
	"fmt"

	"github.com/goroce/goroce/internal/ebpf"
)

// markerLicense is the license string of the marker programs. The helpers
// they call (bpf_map_lookup_elem, bpf_ktime_get_ns, bpf_skb_ecn_set_ce)
// are not GPL-only, so the kernel accepts any string; the programs are
// goroce's own code, assembled here, and declare no GPL license.
const markerLicense = "Proprietary"

// mapName is the name of the fabric's marker map and programs.
func mapName(fabric string) string { return "gf_" + fabric }

// attachMarkers creates the marker's map, then loads one program per
// marked egress and attaches it to the interface's clsact egress hook as
// a direct-action cls_bpf filter. The filters hold the programs and the
// programs the map; this process's descriptors are closed at the end, so
// deleting the namespaces frees everything. The map's ID goes into the
// state, for Stats.
func (f *Fabric) attachMarkers() error {
	if f.MarkerSlots == 0 {
		return nil
	}
	c := f.Config
	m, err := ebpf.CreateArrayMap(mapName(f.Name), slotSize, f.MarkerSlots)
	if err != nil {
		return fmt.Errorf("fabric: marker map: %w", err)
	}
	defer m.Close()
	info, err := m.Info()
	if err != nil {
		return err
	}
	f.MarkerMapID = info.ID
	if err := f.save(); err != nil {
		return err
	}
	byNS := map[string][]struct {
		e End
		r Rate
	}{}
	var order []string
	for _, l := range f.Links {
		for _, e := range []End{l.A, l.B} {
			if e.Slot < 0 {
				continue
			}
			if _, ok := byNS[e.NS]; !ok {
				order = append(order, e.NS)
			}
			byNS[e.NS] = append(byNS[e.NS], struct {
				e End
				r Rate
			}{e, l.Rate})
		}
	}
	for _, ns := range order {
		err := InNetns(ns, func() error {
			conn, err := nlOpen()
			if err != nil {
				return err
			}
			defer conn.close()
			links, err := conn.links()
			if err != nil {
				return err
			}
			for _, x := range byNS[ns] {
				dev, ok := links[x.e.Dev]
				if !ok {
					return fmt.Errorf("fabric: marker: no interface %s in %s", x.e.Dev, ns)
				}
				prog, err := markerProgram(m.FD(), newMarkerParams(x.e.Slot, x.r, c.ECN.Gamma, c.ECN.Threshold, c.Buffer))
				if err != nil {
					return err
				}
				p, err := ebpf.LoadProgram(ebpf.SchedCLS, mapName(f.Name), markerLicense, prog)
				if err != nil {
					return fmt.Errorf("fabric: marker on %s in %s: %w", x.e.Dev, ns, err)
				}
				err = conn.addBPFFilter(int(dev.index), p.FD(), "goroce-ecn-"+x.e.Dev)
				p.Close()
				if err != nil {
					return fmt.Errorf("%w (in %s)", err, ns)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// openMarkerMap opens the fabric's marker map by its ID, checking that
// the ID still names this fabric's map (IDs are reused once a map is
// gone).
func (f *Fabric) openMarkerMap() (*ebpf.Map, error) {
	m, err := ebpf.MapFromID(f.MarkerMapID)
	if err != nil {
		return nil, fmt.Errorf("fabric: %s's marker map: %w", f.Name, err)
	}
	info, err := m.Info()
	if err != nil {
		m.Close()
		return nil, err
	}
	if info.Name != mapName(f.Name) || int(info.MaxEntries) != f.MarkerSlots || info.ValueSize != slotSize {
		m.Close()
		return nil, fmt.Errorf("fabric: map id %d is %q, not %s's marker map (was the fabric removed?)", f.MarkerMapID, info.Name, f.Name)
	}
	return m, nil
}
