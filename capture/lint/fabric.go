package lint

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/capture/flow"
)

// SetPauses gives the linter the capture's MAC Control statistics
// (flow.CaptureStats.Pauses, nil without pause frames), which
// PFC-PRIORITY needs; call it before Finish. Without it PFC-PRIORITY stays
// silent, as for a capture without PFC frames.
func (l *Checker) SetPauses(ps *flow.PauseStats) { l.pauses = ps }

// checkFabric records what the fabric rules need from one packet and
// checks CNP-DSCP.
func (l *Checker) checkFabric(p *flow.Packet, d *flow.Dir, s *dirState) {
	if !s.portOK {
		s.port, s.portAt, s.portOK = p.SrcPort, place(p, d), true
	} else if p.SrcPort != s.port {
		s.manyPorts = true
	}
	if !p.CNP() {
		s.dscp, s.dscpOK = p.DSCP, true
		if p.Tagged && p.PCP < 8 {
			u := &l.prio[p.PCP]
			if u.packets == 0 {
				u.at = place(p, d)
			}
			u.packets++
		}
		return
	}
	// A CNP goes to the QP whose packets were marked: it travels the
	// other way from them, in the direction of that QP's peer.
	if s.cnpReported {
		return
	}
	rev := d.Partner()
	if rev == nil {
		return
	}
	rs := l.dirs[rev]
	if rs == nil || !rs.dscpOK || rs.dscp != p.DSCP {
		return
	}
	s.cnpReported = true
	l.report(p, d, RuleCNPDSCP, "CNP to QP 0x%06x with DSCP %d, the DSCP of the packets it throttles (%s): it queues behind them (ConnectX sends CNPs with cnp_dscp, 48 by default)",
		d.DestQP, p.DSCP, rev.Name())
}

// finishSharedTuples reports, per host pair and UDP source port, RC
// directions of one orientation with different destination QPNs whose
// every packet came from that port.
func (l *Checker) finishSharedTuples() {
	type key struct {
		src, dst netip.Addr
		port     uint16
	}
	groups := map[key][]*flow.Dir{}
	var keys []key
	for d, s := range l.dirs {
		if !s.portOK || s.manyPorts || !s.classOK || s.class != bth.TransportRC {
			continue
		}
		k := key{d.Src, d.Dst, s.port}
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], d)
	}
	type finding struct {
		at   where
		dirs []*flow.Dir
		port uint16
		pair [2]netip.Addr
	}
	done := map[[2]netip.Addr]map[uint16]bool{}
	var out []finding
	for _, k := range keys {
		g := groups[k]
		if len(g) < 2 {
			continue
		}
		pair := [2]netip.Addr{k.src, k.dst}
		if k.dst.Less(k.src) {
			pair = [2]netip.Addr{k.dst, k.src}
		}
		if done[pair] == nil {
			done[pair] = map[uint16]bool{}
		}
		rev := groups[key{k.dst, k.src, k.port}]
		if done[pair][k.port] {
			continue // reported with the other orientation
		}
		done[pair][k.port] = true
		all := append(slices.Clone(g), rev...)
		slices.SortFunc(all, func(a, b *flow.Dir) int { return a.FirstFrame - b.FirstFrame })
		// The finding sits at the first packet of the second QP to use
		// the port in one orientation: the packet that made them share it.
		slices.SortFunc(g, func(a, b *flow.Dir) int { return a.FirstFrame - b.FirstFrame })
		if len(rev) >= 2 {
			slices.SortFunc(rev, func(a, b *flow.Dir) int { return a.FirstFrame - b.FirstFrame })
			if rev[1].FirstFrame < g[1].FirstFrame {
				g = rev
			}
		}
		out = append(out, finding{at: l.dirs[g[1]].portAt, dirs: all, port: k.port, pair: pair})
	}
	slices.SortFunc(out, func(a, b finding) int { return a.at.frame - b.at.frame })
	for _, f := range out {
		var names []string
		for _, d := range f.dirs {
			names = append(names, d.Name())
		}
		l.reportAt(f.at, RuleSharedTuple, "RC QPs between %s and %s send every packet from UDP source port %d (%s): the QPs of each direction share one 5-tuple, so ECMP puts them on one path",
			f.pair[0], f.pair[1], f.port, strings.Join(names, "; "))
	}
}

// finishPFC reports RoCE traffic on a priority that no PFC frame of the
// capture enabled, when some PFC frame enabled others.
func (l *Checker) finishPFC() {
	mask := l.pauses.EnabledMask()
	if mask == 0 {
		return
	}
	var on []string
	for c := range 8 {
		if mask&(1<<c) != 0 {
			on = append(on, fmt.Sprint(c))
		}
	}
	for c := range uint8(8) {
		u := l.prio[c]
		if u.packets == 0 || l.pauses.Lossless(c) {
			continue
		}
		l.reportAt(u.at, RulePFCPriority, "%d RoCEv2 packets on 802.1Q priority %d, which no PFC frame enabled (the capture's PFC frames enable priority %s): that priority is not lossless",
			u.packets, c, strings.Join(on, ", "))
	}
}
