package main

import (
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/goroce/goroce/internal/collreport"
	"github.com/goroce/goroce/internal/fabric"
)

// writeCollReport writes run's HTML report to path (internal/collreport).
func writeCollReport(run *fabricRun, path string) error {
	r := run.reportModel()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := collreport.Write(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// reportModel turns what the run gathered into the report's model.
func (run *fabricRun) reportModel() *collreport.Report {
	r := &collreport.Report{Command: run.cmdline, Generated: time.Now()}
	f0 := run.rank0()
	title := "goroce coll"
	if f0 != nil && f0.Setup != nil {
		st := f0.Setup
		title = fmt.Sprintf("%s, %d ranks", st.Collective, st.Ranks)
		r.Notes = append(r.Notes, fmt.Sprintf("algorithm %s; %d channels × %d QPs per connection (%s); chunk %d B, %d in flight; UDP source ports %s; MTU %d; congestion control --cc %s; QP ACK timeout %v",
			st.Algorithm, st.Channels, st.QPsPerConn, map[bool]string{false: "whole messages round robin", true: "messages split"}[st.Split],
			st.Chunk, st.Steps, st.SourcePorts, st.MTU, run.cc, run.qpTimeout))
		for _, row := range f0.Rows {
			rr := collreport.Row{Bytes: int64(row.Size), Type: row.Type, Op: row.Redop}
			for i, h := range []*collreport.Half{&rr.Out, &rr.In} {
				x := row.Half[i]
				*h = collreport.Half{TimeUs: x.TimeUs, AlgBw: x.AlgBw, BusBw: x.BusBw, Wrong: x.Wrong, Checked: x.Check}
			}
			r.Rows = append(r.Rows, rr)
		}
		r.Figures = append(r.Figures, collreport.Figure{Name: "average busbw", Value: cG(st.AvgBusBw) + " GB/s", Note: "nccl-tests' footer: the mean over the rows and halves"})
	}
	if run.fab != nil {
		title += " on fabric " + run.fab.Name
		var pl []string
		for i, h := range run.hosts {
			pl = append(pl, fmt.Sprintf("%d:%s", i, h.Name))
		}
		r.Notes = append(r.Notes, fmt.Sprintf("ranks placed %s: %s; each QP's spine seen in one of %d packets on the uplinks",
			run.placement, strings.Join(pl, " "), run.every))
		r.Fabric = run.fabricModel()
		run.addFabricFigures(r)
	}
	if f0 != nil && f0.Error != "" {
		r.Notes = append(r.Notes, "rank 0 failed: "+f0.Error)
	}
	r.Title = title
	run.addCounters(r)
	run.addConns(r)
	return r
}

// loadWindows returns rank 0's timed runs of the largest size that have
// the fabric's counters, and their label; none if there are none.
func (run *fabricRun) loadWindows() ([]collWindow, string) {
	f0 := run.rank0()
	if f0 == nil {
		return nil, ""
	}
	largest := -1
	for _, w := range f0.Windows {
		if w.Fabric != nil {
			largest = max(largest, w.Size)
		}
	}
	var out []collWindow
	for _, w := range f0.Windows {
		if w.Fabric != nil && w.Size == largest {
			out = append(out, w)
		}
	}
	if len(out) == 0 {
		return nil, ""
	}
	return out, fmt.Sprintf("the timed runs of %d B (both halves)", largest)
}

// fabricModel draws the fabric: the hosts and their ranks, each link's
// load over the timed runs of the largest size (or the whole job), the
// uplinks' throughput over time.
func (run *fabricRun) fabricModel() *collreport.Fabric {
	fc := run.fab.Config
	m := &collreport.Fabric{Name: run.fab.Name, Leaves: fc.Leaves, Spines: fc.Spines, Rate: float64(fc.Rate), HostRate: float64(fc.HostRate),
		ThresholdBytes: fc.ECN.Threshold, BufferBytes: fc.Buffer, CongestionControl: run.cc, SampledOneInPacket: run.every}
	rankOf := map[string]int{}
	for r, h := range run.hosts {
		rankOf[h.Name] = r
	}
	for _, h := range run.fab.Hosts {
		r, ok := rankOf[h.Name]
		if !ok {
			r = -1
		}
		m.Hosts = append(m.Hosts, collreport.Host{Name: h.Name, Leaf: h.Leaf, Rank: r})
	}
	var stats []*fabric.Stats
	wins, label := run.loadWindows()
	for _, w := range wins {
		stats = append(stats, w.Fabric)
	}
	if len(stats) == 0 && run.whole != nil {
		stats, label = []*fabric.Stats{run.whole}, "the whole job"
	}
	m.LoadWindow = label
	for _, s := range stats {
		m.LoadSeconds += s.Span.Seconds()
	}
	for i, l := range run.fab.Links {
		if l.Kind == fabric.AttachLink {
			continue
		}
		ll := collreport.LinkLoad{Name: l.Name, Uplink: l.Kind == fabric.Uplink, Leaf: l.Leaf, Spine: l.Spine, Host: l.Host}
		for _, s := range stats {
			if i >= len(s.Links) {
				continue
			}
			x := s.Links[i]
			ll.AB.Bytes += x.A.TxBytes
			ll.BA.Bytes += x.B.TxBytes
			ll.AB.Drops += x.A.Drops
			ll.BA.Drops += x.B.Drops
			if x.A.ECN != nil {
				ll.AB.Marks += x.A.ECN.Marks
			}
			if x.B.ECN != nil {
				ll.BA.Marks += x.B.ECN.Marks
			}
		}
		ll.AB.Use, ll.BA.Use = math.NaN(), math.NaN()
		if l.Rate > 0 && m.LoadSeconds > 0 {
			ll.AB.Use = float64(ll.AB.Bytes) * 8 / (float64(l.Rate) * m.LoadSeconds)
			ll.BA.Use = float64(ll.BA.Bytes) * 8 / (float64(l.Rate) * m.LoadSeconds)
		}
		m.Links = append(m.Links, ll)
	}
	m.SpineBytes = make([]uint64, fc.Spines)
	for _, s := range stats {
		for k, b := range s.SpineBytes() {
			if k < len(m.SpineBytes) {
				m.SpineBytes[k] += b
			}
		}
	}
	_, _, _, m.SpineMaxMean, _ = fabric.Balance(m.SpineBytes, 0)
	// The uplinks' throughput between consecutive snapshots.
	for i := 1; i < len(run.series); i++ {
		m.Series.T = append(m.Series.T, run.series[i].Time.Sub(run.start).Seconds())
	}
	for i, l := range run.fab.Links {
		if l.Kind != fabric.Uplink {
			continue
		}
		sl := collreport.SeriesLink{Name: l.Name, Leaf: l.Leaf, Spine: l.Spine}
		for j := 1; j < len(run.series); j++ {
			a, b := run.series[j-1], run.series[j]
			dt := b.Time.Sub(a.Time).Seconds()
			ab, ba := math.NaN(), math.NaN()
			// An interval whose ends were read over more than a third of
			// it (a loaded machine delays the reading) is left out: its
			// counters may span a very different time.
			if dt > 0 && (a.Read+b.Read).Seconds()/2 <= dt/3 && i < len(a.Links) && i < len(b.Links) {
				ab = float64(b.Links[i].A.TxBytes-a.Links[i].A.TxBytes) * 8 / dt / 1e9
				ba = float64(b.Links[i].B.TxBytes-a.Links[i].B.TxBytes) * 8 / dt / 1e9
			}
			sl.AB, sl.BA = append(sl.AB, ab), append(sl.BA, ba)
		}
		m.Series.Links = append(m.Series.Links, sl)
	}
	if f0 := run.rank0(); f0 != nil {
		for _, w := range f0.Windows {
			half := "out-of-place"
			if w.InPlace {
				half = "in place"
			}
			m.Series.Spans = append(m.Series.Spans, collreport.Span{Start: w.Start.Sub(run.start).Seconds(), End: w.End.Sub(run.start).Seconds(),
				Label: fmt.Sprintf("%d B %s %s: busbw %s GB/s", w.Size, w.Type, half, cG(w.BusBw))})
		}
	}
	return m
}

// addFabricFigures adds the figures of the largest size: busbw, the ideal
// and the model's prediction for a ring all-reduce, the per-spine load
// and the busiest uplink.
func (run *fabricRun) addFabricFigures(r *collreport.Report) {
	row, ok := run.largestRow()
	if !ok {
		return
	}
	fig := func(name, value, note string) {
		r.Figures = append(r.Figures, collreport.Figure{Name: name, Value: value, Note: note})
	}
	fig(fmt.Sprintf("busbw at %d B", row.Size), cG(row.Half[0].BusBw)+" / "+cG(row.Half[1].BusBw)+" GB/s", "out-of-place / in place")
	if run.isRing() {
		if m, ok := run.model(row.Size); ok {
			fig("balanced ideal", cG(m.ideal)+" GB/s", fmt.Sprintf("the ring's cross-leaf bytes spread evenly over every spine, links at their rate × %.3f (the data packets' payload share)", m.efficiency))
			fig("measured / ideal", fmt.Sprintf("%.2f / %.2f", ratio(row.Half[0].BusBw, m.ideal), ratio(row.Half[1].BusBw, m.ideal)), "out-of-place / in place")
			fig("model's prediction", cG(m.predicted)+" GB/s", fmt.Sprintf("goroce sim ecmp's fluid model of this ring with the spines the QPs took (its per-spine max/mean %.2f; %d of %d cross-leaf flows unsampled)", m.loadMaxMean, m.unobserved, m.crossFlow))
			fig("measured / predicted", fmt.Sprintf("%.2f / %.2f", ratio(row.Half[0].BusBw, m.predicted), ratio(row.Half[1].BusBw, m.predicted)), "out-of-place / in place")
		}
	}
	if f0 := run.rank0(); f0 != nil {
		for _, w := range f0.Windows {
			if w.Size != row.Size || w.InPlace || w.Fabric == nil {
				continue
			}
			l := run.load(w.Fabric)
			fig("per-spine bytes max/mean", fmt.Sprintf("%.2f", l.maxMean), fmt.Sprintf("the out-of-place timed run of %d B", row.Size))
			fig("busiest uplink", fmt.Sprintf("%.2f of its rate", l.busiest), l.busiestAt+", the same run")
		}
	}
}

// addCounters adds the job's event counts.
func (run *fabricRun) addCounters(r *collreport.Report) {
	c := run.counters()
	add := func(name string, v uint64, note string, bad bool) {
		r.Counters = append(r.Counters, collreport.Counter{Name: name, Value: v, Note: note, Bad: bad})
	}
	add("packets sent", c.sent, fmt.Sprintf("by the job's %d QPs (requests and responses)", c.qps), false)
	add("retransmitted", c.retransmitted, "packets sent again by Go-Back-N", true)
	add("Go-Back-N", c.goBackN, "retries started (rxe's completer_retry_err)", true)
	add("NAK sequence errors", c.seqNAKs, "received: a packet of the QP's went missing", true)
	add("CNPs sent", c.cnpsSent, "by the receivers' notification points, for CE-marked packets", false)
	add("CNPs received", c.cnpsReceived, "by the senders' QPs", false)
	add("rate cuts", c.rateCuts, "the senders' reaction points' decreases", false)
	if run.whole != nil {
		marks, drops := run.whole.Marks()
		add("CE marks", marks, "the fabric's markers, whole job", false)
		add("tbf drops", drops, "the fabric's switch egresses, whole job", true)
	}
	if run.fab != nil {
		add("samples lost", run.sampleDrops, "packets the spine sampler's sockets could not keep", true)
	}
}

// addConns adds the connections that carried the data.
func (run *fabricRun) addConns(r *collreport.Report) {
	var busiest uint64
	sent := func(c collConnFile) (s uint64) {
		for _, q := range c.QPs {
			s += q.Sent
		}
		return s
	}
	for _, f := range run.files {
		if f != nil {
			for _, c := range f.Conns {
				busiest = max(busiest, sent(c))
			}
		}
	}
	host := func(r int) string {
		if r < len(run.hosts) {
			return run.hosts[r].Name
		}
		return "loopback"
	}
	for _, f := range run.files {
		if f == nil {
			continue
		}
		for _, c := range f.Conns {
			if s := sent(c); s == 0 || s*10 < busiest {
				continue
			}
			rc := collreport.Conn{From: f.Rank, To: c.Peer, FromHost: host(f.Rank), ToHost: host(c.Peer), Channel: c.Channel}
			for _, q := range c.QPs {
				sp := "?"
				if run.fab != nil {
					sp = run.spineLabel(f.Rank, c.Peer, q.PeerQPN)
				}
				rc.QPs = append(rc.QPs, collreport.QP{Index: q.Index, QPN: q.QPN, SourcePort: q.SourcePort, Spine: sp, Sent: q.Sent, Retransmitted: q.Retransmitted})
			}
			r.Conns = append(r.Conns, rc)
		}
	}
}
