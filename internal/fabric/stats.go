package fabric

import (
	"fmt"
	"io"
	"time"
)

// Stats is a snapshot of a fabric's counters: every link end's interface
// and qdisc counters and marker counters, and per spine the traffic it
// carried.
type Stats struct {
	Fabric string        `json:"fabric"`
	Time   time.Time     `json:"time"`
	Links  []LinkStats   `json:"links"`
	Spines []SpineStats  `json:"spines"`
	Span   time.Duration `json:"span_ns,omitempty"` // set by Sub: the time between the two snapshots
	// Read is how long the snapshot took to read (its counters were read
	// at some moment in [Time−Read/2, Time+Read/2]); Sub keeps the later
	// snapshot's.
	Read time.Duration `json:"read_ns,omitempty"`
}

// LinkStats are one link's counters; A is the leaf's end.
type LinkStats struct {
	Name  string   `json:"name"`
	Kind  LinkKind `json:"kind"`
	Leaf  int      `json:"leaf"`
	Spine int      `json:"spine"`
	Host  int      `json:"host"`
	A     EndStats `json:"a"`
	B     EndStats `json:"b"`
}

// EndStats are the counters of one interface: what it sent and received
// (the kernel's interface counters, so a GSO super-packet that stays
// whole on veth counts once), what its tbf dropped, and its marker's
// counters if it has one.
type EndStats struct {
	NS        string `json:"ns"`
	Dev       string `json:"dev"`
	TxBytes   uint64 `json:"tx_bytes"`
	TxPackets uint64 `json:"tx_packets"`
	RxBytes   uint64 `json:"rx_bytes"`
	RxPackets uint64 `json:"rx_packets"`
	// Drops and Overlimits are the root qdisc's (the tbf's, if the link
	// has a rate): packets dropped for want of buffer, and times the
	// rate held a packet back. Backlog is the bytes queued at the
	// snapshot (not a counter: Sub keeps the later value).
	Drops      uint64    `json:"drops"`
	Overlimits uint64    `json:"overlimits"`
	Backlog    uint64    `json:"backlog"`
	ECN        *ECNStats `json:"ecn,omitempty"`
}

// SpineStats is what one spine carried: Up is what the leaves sent it (tx
// at the leaves' ends of its links), Down what it sent on (tx at its own
// ends); they differ by what its egresses dropped.
type SpineStats struct {
	Spine       int    `json:"spine"`
	UpBytes     uint64 `json:"up_bytes"`
	UpPackets   uint64 `json:"up_packets"`
	DownBytes   uint64 `json:"down_bytes"`
	DownPackets uint64 `json:"down_packets"`
}

// sumSpines fills s.Spines from s.Links.
func (s *Stats) sumSpines(spines int) {
	s.Spines = make([]SpineStats, spines)
	for k := range s.Spines {
		s.Spines[k].Spine = k
	}
	for _, l := range s.Links {
		if l.Kind != Uplink {
			continue
		}
		sp := &s.Spines[l.Spine]
		sp.UpBytes += l.A.TxBytes
		sp.UpPackets += l.A.TxPackets
		sp.DownBytes += l.B.TxBytes
		sp.DownPackets += l.B.TxPackets
	}
}

// Sub returns s − prev counter by counter (prev an earlier snapshot of
// the same fabric); gauges (Backlog, ECN.MaxBacklog) keep s's values.
func (s *Stats) Sub(prev *Stats) (*Stats, error) {
	if prev.Fabric != s.Fabric || len(prev.Links) != len(s.Links) {
		return nil, fmt.Errorf("fabric: stats of %s and %s do not match", s.Fabric, prev.Fabric)
	}
	d := &Stats{Fabric: s.Fabric, Time: s.Time, Span: s.Time.Sub(prev.Time), Read: s.Read}
	for i, l := range s.Links {
		p := prev.Links[i]
		l.A, l.B = l.A.sub(p.A), l.B.sub(p.B)
		d.Links = append(d.Links, l)
	}
	d.sumSpines(len(s.Spines))
	return d, nil
}

func (e EndStats) sub(p EndStats) EndStats {
	e.TxBytes -= p.TxBytes
	e.TxPackets -= p.TxPackets
	e.RxBytes -= p.RxBytes
	e.RxPackets -= p.RxPackets
	e.Drops -= p.Drops
	e.Overlimits -= p.Overlimits
	if e.ECN != nil && p.ECN != nil {
		x := *e.ECN
		x.Packets -= p.ECN.Packets
		x.Bytes -= p.ECN.Bytes
		x.Over -= p.ECN.Over
		x.Marks -= p.ECN.Marks
		x.Full -= p.ECN.Full
		e.ECN = &x
	}
	return e
}

// Link returns the counters of the link called name ("l0-s1").
func (s *Stats) Link(name string) (LinkStats, bool) {
	for _, l := range s.Links {
		if l.Name == name {
			return l, true
		}
	}
	return LinkStats{}, false
}

// LeafToSpine returns the packets and bytes leaf l sent to each spine.
func (s *Stats) LeafToSpine(l int) (packets, bytes []uint64) {
	for _, x := range s.Links {
		if x.Kind == Uplink && x.Leaf == l {
			packets, bytes = append(packets, x.A.TxPackets), append(bytes, x.A.TxBytes)
		}
	}
	return packets, bytes
}

// SpineBytes returns the bytes each spine sent on (SpineStats.DownBytes).
func (s *Stats) SpineBytes() []uint64 {
	out := make([]uint64, len(s.Spines))
	for k, sp := range s.Spines {
		out[k] = sp.DownBytes
	}
	return out
}

// Marks returns the CE marks of all markers, and the tbf drops of all
// rate-limited switch egresses.
func (s *Stats) Marks() (marks, drops uint64) {
	for _, l := range s.Links {
		for _, e := range []EndStats{l.A, l.B} {
			if e.ECN != nil {
				marks += e.ECN.Marks
			}
		}
		drops += l.A.Drops
		if l.Kind == Uplink {
			drops += l.B.Drops
		}
	}
	return marks, drops
}

// Balance returns the total of counts, the largest, the mean and max/mean,
// and how many are below idle (a spine that carried fewer packets than
// that counts as idle).
func Balance(counts []uint64, idle uint64) (total, maxN uint64, mean, ratio float64, idles int) {
	for _, c := range counts {
		total += c
		maxN = max(maxN, c)
		if c < idle {
			idles++
		}
	}
	if len(counts) == 0 || total == 0 {
		return total, maxN, 0, 0, idles
	}
	mean = float64(total) / float64(len(counts))
	return total, maxN, mean, float64(maxN) / mean, idles
}

// WriteTable writes s as a table: per link both ends' tx bytes and
// packets, tbf drops and CE marks, then per spine what it carried and
// max/mean over the spines.
func (s *Stats) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "%-9s %-6s | %14s %11s %8s %9s | %14s %11s %8s %9s\n",
		"link", "kind", "A→B bytes", "packets", "drops", "CE marks", "B→A bytes", "packets", "drops", "CE marks")
	marks := func(e EndStats) string {
		if e.ECN == nil {
			return "-"
		}
		return fmt.Sprint(e.ECN.Marks)
	}
	for _, l := range s.Links {
		fmt.Fprintf(w, "%-9s %-6s | %14d %11d %8d %9s | %14d %11d %8d %9s\n", l.Name, l.Kind,
			l.A.TxBytes, l.A.TxPackets, l.A.Drops, marks(l.A), l.B.TxBytes, l.B.TxPackets, l.B.Drops, marks(l.B))
	}
	if len(s.Spines) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%-6s %14s %11s %14s %11s\n", "spine", "in bytes", "packets", "out bytes", "packets")
	for _, sp := range s.Spines {
		fmt.Fprintf(w, "s%-5d %14d %11d %14d %11d\n", sp.Spine, sp.UpBytes, sp.UpPackets, sp.DownBytes, sp.DownPackets)
	}
	if _, _, _, ratio, _ := Balance(s.SpineBytes(), 0); ratio > 0 {
		fmt.Fprintf(w, "spine bytes max/mean %.2f\n", ratio)
	}
}
