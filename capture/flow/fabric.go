package flow

import (
	"encoding/json"
	"net/netip"
	"slices"
	"time"

	"github.com/goroce/goroce/capture"
)

// maxTuples bounds the 5-tuples listed per host pair; past it
// HostPair.FiveTuples is a lower bound (HostPair.TuplesCapped).
const maxTuples = 1024

// HostPair is what a leaf-spine fabric sees of the traffic between two
// addresses: switches spread RoCEv2 over equal-cost paths by a hash of the
// 5-tuple (source and destination IP, UDP, source and destination port),
// and the UDP source port is the only part of it that differs between the
// QPs of one pair. FiveTuples is therefore the ECMP entropy the pair
// offers: 1 per direction means every QP of the pair takes one path.
type HostPair struct {
	// A and B are the addresses, A the lower one.
	A netip.Addr `json:"a"`
	B netip.Addr `json:"b"`
	// FirstFrame is the frame of the pair's first RoCEv2 packet.
	FirstFrame int `json:"first_frame"`
	// Connections lists the IDs of the connections between A and B.
	Connections []int `json:"connections"`
	// FiveTuples counts the distinct 5-tuples of the pair's RoCEv2
	// packets, both ways.
	FiveTuples int `json:"five_tuples"`
	// TuplesCapped reports more 5-tuples than maxTuples: FiveTuples is
	// then a lower bound.
	TuplesCapped bool `json:"tuples_capped,omitempty"`
	// Tuples lists the 5-tuples in the order of their first packet.
	Tuples []Tuple `json:"tuples"`

	idx map[tupleKey]int
}

// Tuple is one 5-tuple (the protocol is always UDP) with its traffic.
type Tuple struct {
	Src     netip.Addr `json:"src"`
	Dst     netip.Addr `json:"dst"`
	SrcPort uint16     `json:"udp_src_port"`
	DstPort uint16     `json:"udp_dst_port"`
	Packets int64      `json:"packets"`
	// DestQPs lists the distinct BTH destination QPNs seen on the tuple
	// (at most 16): more than one means QPs share the path.
	DestQPs []uint32 `json:"dest_qps"`
}

type tupleKey struct {
	src, dst     netip.Addr
	sport, dport uint16
}

// pairOf orders two addresses into a host pair key.
func pairOf(x, y netip.Addr) [2]netip.Addr {
	if y.Less(x) {
		x, y = y, x
	}
	return [2]netip.Addr{x, y}
}

// addTuple counts p on its host pair's 5-tuple.
func (a *Analyzer) addTuple(p *Packet) {
	k := pairOf(p.Src, p.Dst)
	hp := a.pairs[k]
	if hp == nil {
		hp = &HostPair{A: k[0], B: k[1], FirstFrame: p.Frame, idx: map[tupleKey]int{}}
		a.pairs[k] = hp
		a.pairOrder = append(a.pairOrder, hp)
	}
	tk := tupleKey{p.Src, p.Dst, p.SrcPort, p.DstPort}
	i, ok := hp.idx[tk]
	if !ok {
		if len(hp.Tuples) >= maxTuples {
			hp.TuplesCapped = true
			return
		}
		i = len(hp.Tuples)
		hp.idx[tk] = i
		hp.Tuples = append(hp.Tuples, Tuple{Src: p.Src, Dst: p.Dst, SrcPort: p.SrcPort, DstPort: p.DstPort})
	}
	t := &hp.Tuples[i]
	t.Packets++
	if q := uint32(p.BTH.DestQP()); len(t.DestQPs) < maxPorts && !slices.Contains(t.DestQPs, q) {
		t.DestQPs = append(t.DestQPs, q)
	}
}

// hostPairs finishes the host pairs once the connections are numbered.
func (a *Analyzer) hostPairs(conns []*Conn) []*HostPair {
	for _, c := range conns {
		d := c.Dirs[0]
		if hp := a.pairs[pairOf(d.Src, d.Dst)]; hp != nil {
			hp.Connections = append(hp.Connections, c.ID)
		}
	}
	for _, hp := range a.pairOrder {
		hp.FiveTuples = len(hp.Tuples)
		if hp.Connections == nil {
			hp.Connections = []int{}
		}
	}
	return a.pairOrder
}

// PauseStats counts the MAC Control pause frames of a capture: 802.3x
// PAUSE (opcode 0x0001, IEEE 802.3 Annex 31B: the whole link stops) and
// PFC (opcode 0x0101, IEEE 802.1Qbb / 802.3 Annex 31D: a class-enable
// vector and one pause time per priority). A pause time is in quanta of
// 512 bit times; 0 resumes at once (XON).
type PauseStats struct {
	// Frames counts MAC Control frames with an opcode.
	Frames int `json:"frames"`
	// Pause and PFC count the 802.3x and PFC frames whole enough to act on
	// (PAUSE with its pause time, PFC with its eight quanta).
	Pause int `json:"pause_8023x"`
	PFC   int `json:"pfc"`
	// Other counts the rest: other opcodes and PAUSE or PFC frames cut short.
	Other int `json:"other"`
	// Enabled lists the priorities that some PFC frame's class-enable
	// vector names: the priorities the capture shows to be lossless.
	Enabled []int `json:"enabled_priorities"`
	// Link is the 802.3x PAUSE traffic (every priority), nil without any.
	Link *PriorityPauses `json:"link,omitempty"`
	// Priorities has one entry per priority that a PFC frame enabled, in
	// ascending order.
	Priorities []PriorityPauses `json:"priorities"`

	enabled uint8
	per     [8]PriorityPauses
	link    PriorityPauses
}

// PriorityPauses describes the pause requests for one priority (or the
// whole link).
type PriorityPauses struct {
	// Priority is the PFC priority 0-7; -1 for 802.3x PAUSE.
	Priority int `json:"priority"`
	// Pauses counts requests with a pause time above 0, Resumes those
	// with 0.
	Pauses  int64 `json:"pauses"`
	Resumes int64 `json:"resumes"`
	// Quanta sums the pause times asked for.
	Quanta int64 `json:"quanta"`
	// MaxQuanta is the longest pause time asked for.
	MaxQuanta uint16 `json:"max_quanta"`
	// FirstFrame and LastFrame are the first and last frames naming the
	// priority (pauses or resumes).
	FirstFrame int `json:"first_frame"`
	LastFrame  int `json:"last_frame"`
	// OverTime counts the pause requests (not resumes) over time.
	OverTime CountSeries `json:"over_time"`
}

// CountSeries is a Series of event counts; its JSON names the sums
// "count".
type CountSeries struct{ Series }

// MarshalJSON writes the bin width in seconds and the counts.
func (s CountSeries) MarshalJSON() ([]byte, error) {
	bins := s.Bins
	if bins == nil {
		bins = []float64{}
	}
	return json.Marshal(struct {
		Bin  float64   `json:"bin_s"`
		Bins []float64 `json:"count"`
	}{s.Width.Seconds(), bins})
}

// Lossless reports whether a PFC frame of the capture enabled priority
// prio (0-7).
func (ps *PauseStats) Lossless(prio uint8) bool {
	return ps != nil && prio < 8 && ps.enabled&(1<<prio) != 0
}

// EnabledMask returns the union of the PFC class-enable vectors (bit n
// for priority n); 0 when the capture has no PFC frame enabling a class.
func (ps *PauseStats) EnabledMask() uint8 {
	if ps == nil {
		return 0
	}
	return ps.enabled
}

func (pp *PriorityPauses) add(frame int, t time.Duration, quanta uint16) {
	if pp.FirstFrame == 0 {
		pp.FirstFrame = frame
	}
	pp.LastFrame = frame
	if quanta == 0 {
		pp.Resumes++
		return
	}
	pp.Pauses++
	pp.Quanta += int64(quanta)
	pp.MaxQuanta = max(pp.MaxQuanta, quanta)
	pp.OverTime.Add(t, 1)
}

// addPause counts a decoded MAC Control frame.
func (ps *PauseStats) addPause(m *capture.MACControl, frame int, t time.Duration) {
	ps.Frames++
	switch {
	case m.Opcode == capture.MACPause && m.Complete:
		ps.Pause++
		ps.link.Priority = -1
		ps.link.add(frame, t, m.PauseTime)
	case m.Opcode == capture.MACPFC && m.Complete:
		ps.PFC++
		for c := range 8 {
			if m.Enable&(1<<c) == 0 {
				continue
			}
			ps.enabled |= 1 << c
			ps.per[c].Priority = c
			ps.per[c].add(frame, t, m.Times[c])
		}
	default:
		ps.Other++
	}
}

// finish fills the exported lists.
func (ps *PauseStats) finish() {
	ps.Enabled = []int{}
	ps.Priorities = []PriorityPauses{}
	for c := range 8 {
		if ps.enabled&(1<<c) != 0 {
			ps.Enabled = append(ps.Enabled, c)
			ps.Priorities = append(ps.Priorities, ps.per[c])
		}
	}
	ps.Link = nil
	if ps.Pause > 0 {
		l := ps.link
		ps.Link = &l
	}
}
