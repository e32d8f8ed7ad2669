package flow

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// textListed bounds each event list in the text output.
const textListed = 20

// WriteJSON writes res as one indented JSON document.
func WriteJSON(w io.Writer, res *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(res)
}

// Notes returns one line per capture-level problem: what was read but
// could not be analysed, for "goroce cap flows" and the report.
func Notes(cs CaptureStats, overflow int64) []string {
	var n []string
	if cs.Error != "" {
		n = append(n, "the file ends early: "+cs.Error+" (the frames before it are analysed)")
	}
	if cs.SnapCut > 0 {
		n = append(n, fmt.Sprintf("%d RoCEv2 frames cut by the snap length (sizes from the UDP length; ICRC not checked)", cs.SnapCut))
	}
	if cs.Malformed > 0 {
		n = append(n, fmt.Sprintf("%d RoCEv2 frames malformed (short BTH, unknown opcode, pad overflow or too short for their headers)", cs.Malformed))
	}
	if cs.ICMPQuoted > 0 {
		n = append(n, fmt.Sprintf("%d ICMP errors quoting a RoCEv2 packet (not counted as traffic)", cs.ICMPQuoted))
	}
	if cs.VLAN > 0 {
		n = append(n, fmt.Sprintf("%d RoCEv2 frames VLAN-tagged", cs.VLAN))
	}
	if len(cs.LinkTypes) > 1 {
		var l []string
		for k, v := range cs.LinkTypes {
			l = append(l, fmt.Sprintf("%s %d", k, v))
		}
		sort.Strings(l)
		n = append(n, "several link types: "+strings.Join(l, ", "))
	}
	if overflow > 0 {
		n = append(n, fmt.Sprintf("%d packets of directions past the analysis cap, counted only", overflow))
	}
	return n
}

// Name names the direction: "10.77.0.3 -> 10.77.0.2 QP 0x000015", with
// the source QP too when the capture shows it.
func (d *Dir) Name() string {
	s := fmt.Sprintf("%s -> %s QP 0x%06x", d.Src, d.Dst, d.DestQP)
	if d.SrcQP != nil {
		s = fmt.Sprintf("%s QP 0x%06x -> %s QP 0x%06x", d.Src, *d.SrcQP, d.Dst, d.DestQP)
	}
	return s
}

// Title names a connection by its endpoints: each address with the QPN
// that packets to it carry.
func (c *Conn) Title() string {
	a := c.Dirs[0]
	if len(c.Dirs) == 2 {
		b := c.Dirs[1]
		return fmt.Sprintf("%s %s (QP 0x%06x) <-> %s (QP 0x%06x)", c.Transport, a.Src, b.DestQP, a.Dst, a.DestQP)
	}
	if a.SrcQP != nil {
		return fmt.Sprintf("%s %s (QP 0x%06x) -> %s (QP 0x%06x), one direction", c.Transport, a.Src, *a.SrcQP, a.Dst, a.DestQP)
	}
	return fmt.Sprintf("%s %s -> %s (QP 0x%06x), one direction", c.Transport, a.Src, a.Dst, a.DestQP)
}

// Rate formats a bit rate.
func Rate(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.2f Gb/s", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.2f Mb/s", bps/1e6)
	case bps >= 1e3:
		return fmt.Sprintf("%.2f kb/s", bps/1e3)
	}
	return fmt.Sprintf("%.0f b/s", bps)
}

// WriteText writes res as the human-readable tables of "goroce cap flows".
func WriteText(w io.Writer, name string, res *Result) error {
	bw := bufio.NewWriter(w)
	cs := res.Capture
	fmt.Fprintf(bw, "capture %s: %d frames, %d RoCEv2, %d other, %d bytes, %.6f s\n", name, cs.Frames, cs.RoCE, cs.NonRoCE, cs.Bytes, cs.Duration)
	for _, n := range Notes(cs, res.OverflowPackets) {
		fmt.Fprintf(bw, "  note: %s\n", n)
	}
	if len(res.Connections) == 0 {
		fmt.Fprintln(bw, "no RoCEv2 connections")
	}
	for _, c := range res.Connections {
		fmt.Fprintf(bw, "\nconnection %d: %s", c.ID, c.Title())
		if c.PathMTU > 0 {
			fmt.Fprintf(bw, ", path MTU %d", c.PathMTU)
		}
		if c.PairedBy != "" {
			fmt.Fprintf(bw, ", paired by %s", c.PairedBy)
		}
		fmt.Fprintln(bw)
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "  direction\tpackets\tbytes\tframes\tseconds\tCE\tCNPs\tICRC bad\tgoodput\t")
		for _, d := range c.Dirs {
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%d-%d\t%.6f-%.6f\t%d\t%d\t%d\t%s\t\n", d.Name(), d.Packets, d.Bytes, d.FirstFrame, d.LastFrame,
				d.Start, d.End, d.ECN.CE, d.CNPs, d.ICRC.Bad, Rate(d.GoodputBps))
		}
		tw.Flush()
		for _, d := range c.Dirs {
			writeDir(bw, d)
		}
	}
	writeHostPairs(bw, res.HostPairs)
	writePauses(bw, cs.Pauses)
	return bw.Flush()
}

// writeHostPairs writes the 5-tuples of each host pair: the ECMP entropy
// that a fabric's switches can spread the pair's QPs with.
func writeHostPairs(w io.Writer, pairs []*HostPair) {
	for _, hp := range pairs {
		more := ""
		if hp.TuplesCapped {
			more = " or more"
		}
		fmt.Fprintf(w, "\nhost pair %s <-> %s: %d connections %s, %d distinct 5-tuples%s (ECMP entropy)\n",
			hp.A, hp.B, len(hp.Connections), connList(hp.Connections), hp.FiveTuples, more)
		for i, t := range hp.Tuples {
			if i == textListed {
				fmt.Fprintf(w, "    … %d more\n", len(hp.Tuples)-textListed)
				break
			}
			qps := make([]string, len(t.DestQPs))
			for j, q := range t.DestQPs {
				qps[j] = fmt.Sprintf("0x%06x", q)
			}
			fmt.Fprintf(w, "    %s -> %s UDP: %d packets, QP %s\n", netip.AddrPortFrom(t.Src, t.SrcPort),
				netip.AddrPortFrom(t.Dst, t.DstPort), t.Packets, strings.Join(qps, ", "))
		}
	}
}

func connList(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return "(" + strings.Join(s, ", ") + ")"
}

// writePauses writes the PAUSE and PFC frames per priority, with the
// pause requests over time.
func writePauses(w io.Writer, ps *PauseStats) {
	if ps == nil {
		return
	}
	fmt.Fprintf(w, "\npause frames: %d MAC Control (802.3x PAUSE %d, PFC %d, other %d)", ps.Frames, ps.Pause, ps.PFC, ps.Other)
	if len(ps.Enabled) > 0 {
		p := make([]string, len(ps.Enabled))
		for i, c := range ps.Enabled {
			p[i] = fmt.Sprint(c)
		}
		fmt.Fprintf(w, "; PFC enables priorities %s", strings.Join(p, ", "))
	}
	fmt.Fprintln(w)
	rows := ps.Priorities
	if ps.Link != nil {
		rows = append([]PriorityPauses{*ps.Link}, rows...)
	}
	if len(rows) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  priority\tpauses\tresumes\tquanta\tmax quanta\tframes\t")
	for _, r := range rows {
		name := fmt.Sprint(r.Priority)
		if r.Priority < 0 {
			name = "all (802.3x)"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%d-%d\t\n", name, r.Pauses, r.Resumes, r.Quanta, r.MaxQuanta, r.FirstFrame, r.LastFrame)
	}
	tw.Flush()
	for _, r := range rows {
		if r.Pauses == 0 {
			continue
		}
		name := fmt.Sprintf("priority %d", r.Priority)
		if r.Priority < 0 {
			name = "802.3x PAUSE"
		}
		fmt.Fprintf(w, "  %s pauses over time (%s bins): %s\n", name, r.OverTime.Width, binList(&r.OverTime.Series))
	}
}

// binList lists the non-empty bins of a count series as "start s ×n".
func binList(s *Series) string {
	var out []string
	for i, v := range s.Bins {
		if v == 0 {
			continue
		}
		if len(out) == textListed {
			out = append(out, "…")
			break
		}
		out = append(out, fmt.Sprintf("%.6f s ×%d", (time.Duration(i)*s.Width).Seconds(), int64(v)))
	}
	return strings.Join(out, ", ")
}

func writeDir(w io.Writer, d *Dir) {
	fmt.Fprintf(w, "  %s\n", d.Name())
	var ops []string
	for _, o := range d.Opcodes {
		ops = append(ops, fmt.Sprintf("%s %d (%d B)", o.Name, o.Packets, o.Bytes))
	}
	fmt.Fprintf(w, "    opcodes: %s\n", strings.Join(ops, ", "))
	if len(d.SrcPorts) > 0 {
		var p []string
		for _, x := range d.SrcPorts {
			p = append(p, fmt.Sprint(x))
		}
		fmt.Fprintf(w, "    UDP source ports: %s\n", strings.Join(p, ", "))
	}
	if d.ECN.ECT0+d.ECN.ECT1+d.ECN.CE > 0 {
		fmt.Fprintf(w, "    ECN: not-ECT %d, ECT(0) %d, ECT(1) %d, CE %d\n", d.ECN.NotECT, d.ECN.ECT0, d.ECN.ECT1, d.ECN.CE)
	}
	if d.ICRC.Bad > 0 || d.ICRC.Unchecked > 0 {
		fmt.Fprintf(w, "    ICRC: %d good, %d bad, %d not checked (cut)", d.ICRC.Good, d.ICRC.Bad, d.ICRC.Unchecked)
		if len(d.ICRC.BadFrames) > 0 {
			fmt.Fprintf(w, "; bad in frames %s", frames(d.ICRC.BadFrames))
		}
		fmt.Fprintln(w)
	}
	if line := goodputLine(d); line != "" {
		fmt.Fprintf(w, "    goodput over time: %s\n", line)
	}
	if r := d.Requests; r != nil {
		fmt.Fprintf(w, "    requests: %d packets, %d messages, PSN %d..%d (%d), gaps %d PSNs, gap fills %d, retransmissions %d, Go-Back-N %d\n",
			r.Packets, r.Messages, r.PSNFirst, r.PSNLast, r.PSNs, r.GapPSNs, r.Filled, r.Retransmissions, r.GoBackN)
		for i, g := range r.Gaps {
			if i == textListed {
				fmt.Fprintf(w, "      … %d more gap ranges (--json lists up to %d)\n", len(r.Gaps)-i, maxListed)
				break
			}
			fmt.Fprintf(w, "      gap: PSN %d..%d never seen\n", g.First, g.Last)
		}
		for i, e := range r.Episodes {
			if i == textListed {
				fmt.Fprintf(w, "      … %d more Go-Back-N episodes listed in --json\n", min(int64(len(r.Episodes)), r.GoBackN)-int64(i))
				break
			}
			fmt.Fprintf(w, "      Go-Back-N at frame %d (%.6f s): PSN %d back to %d, %d packets resent, trigger %s", e.Frame, e.Time, e.From, e.To, e.Packets, e.Trigger)
			if e.TriggerFrame > 0 {
				fmt.Fprintf(w, " (frame %d, %.1f µs before)", e.TriggerFrame, e.Delay)
			} else {
				fmt.Fprintf(w, " (%.1f µs after the previous request)", e.Delay)
			}
			fmt.Fprintln(w)
		}
	}
	if r := d.Responses; r != nil {
		c := r.Coalescing
		var h []string
		for i, n := range c.Hist {
			if n > 0 {
				h = append(h, fmt.Sprintf("%s:%d", CoalescingBuckets[i], n))
			}
		}
		fmt.Fprintf(w, "    responses: %d ACKs (%d duplicate), %.1f PSNs per ACK (max %d; %s), %d NAK-seq, %d other NAKs, %d RNR NAKs, %d READ responses, %d ATOMIC ACKs\n",
			r.ACKs, r.DupACKs, c.Mean, c.Max, strings.Join(h, " "), r.NAKSeq, r.NAKOther, r.RNR, r.ReadResponses, r.AtomicACKs)
		if r.MSN.Seen > 0 {
			fmt.Fprintf(w, "      MSN %d..%d (+%d over %d AETHs, %d decreases)\n", r.MSN.First, r.MSN.Last, r.MSN.Progress, r.MSN.Seen, r.MSN.Decreases)
		}
		if r.ReservedSyndromes > 0 {
			fmt.Fprintf(w, "      %d AETHs with a reserved syndrome\n", r.ReservedSyndromes)
		}
		for i, n := range r.NAKs {
			if i == textListed {
				fmt.Fprintf(w, "      … %d more NAKs listed in --json\n", len(r.NAKs)-i)
				break
			}
			fmt.Fprintf(w, "      NAK at frame %d (%.6f s): %s, PSN %d\n", n.Frame, n.Time, n.Syndrome, n.PSN)
		}
		for i, n := range r.RNRs {
			if i == textListed {
				fmt.Fprintf(w, "      … %d more RNR NAKs listed in --json\n", len(r.RNRs)-i)
				break
			}
			fmt.Fprintf(w, "      RNR NAK at frame %d (%.6f s): PSN %d, timer %d (%.0f µs)", n.Frame, n.Time, n.PSN, n.TimerCode, n.Timer)
			if n.RetryFrame > 0 {
				fmt.Fprintf(w, ", retried after %.1f µs (frame %d)", n.Wait, n.RetryFrame)
			} else {
				fmt.Fprint(w, ", no retry seen")
			}
			fmt.Fprintln(w)
		}
	}
	for _, x := range []struct {
		name string
		s    *OpStats
	}{{"READs", d.Reads}, {"ATOMICs", d.Atomics}} {
		if x.s == nil {
			continue
		}
		l := x.s.Latency
		fmt.Fprintf(w, "    %s: %d requests, %d answered, %d unanswered, %d retried", x.name, x.s.Requests, x.s.Answered, x.s.Unanswered, x.s.Retried)
		if l.Count > 0 {
			fmt.Fprintf(w, "; latency µs min %.1f p50 %.1f p90 %.1f p99 %.1f max %.1f mean %.1f", l.Min, l.P50, l.P90, l.P99, l.Max, l.Mean)
		}
		fmt.Fprintln(w)
	}
}

// goodputLine shows a direction's goodput in at most 12 equal bins from
// its first to its last packet, empty when it carried no data.
func goodputLine(d *Dir) string {
	g := &d.Goodput
	if g.Width == 0 || d.end <= d.start {
		return ""
	}
	w := g.Width
	for (d.end-d.start)/w >= 12 {
		w *= 2
	}
	start := d.start / w * w
	bins := g.Rebin(w, start, d.end+1)
	peak := 0.0
	for i, v := range bins {
		// The last bin ends with the last packet: rate over what it covers.
		span := w
		if i == len(bins)-1 {
			span = min(w, d.end+1-(start+time.Duration(i)*w))
		}
		bins[i] = v * 8 / span.Seconds()
		peak = max(peak, bins[i])
	}
	if peak == 0 {
		return ""
	}
	unit, div := "b/s", 1.0
	switch {
	case peak >= 1e9:
		unit, div = "Gb/s", 1e9
	case peak >= 1e6:
		unit, div = "Mb/s", 1e6
	case peak >= 1e3:
		unit, div = "kb/s", 1e3
	}
	var b strings.Builder
	for i, v := range bins {
		if i > 0 {
			b.WriteByte(' ')
		}
		if v == 0 {
			b.WriteByte('0')
			continue
		}
		fmt.Fprintf(&b, "%.1f", v/div)
	}
	return fmt.Sprintf("%s %s, bins of %v from %.6f s", b.String(), unit, w, start.Seconds())
}

// frames formats a frame list.
func frames(f []int) string {
	s := make([]string, len(f))
	for i, n := range f {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}
