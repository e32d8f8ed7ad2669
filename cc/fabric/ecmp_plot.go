package fabric

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
)

// modeColor gives each source-port mode one colour on every ECMP chart.
var modeColor = [...]string{"#d62728", "#1f77b4", "#2ca02c"}

func colorOf(m PortMode) string {
	if int(m) < len(modeColor) {
		return modeColor[m]
	}
	return palette[int(m)%len(palette)]
}

// WriteECMPHTML writes the ECMP sweep stats (one entry per mode and QP
// count, as [ECMPSim.Sweep] returns them) as one self-contained HTML page
// in the style of [WriteHTML]: a table of the figures, then three SVG
// charts — the collective's completion over the balanced ideal against
// the QPs per neighbour pair (median solid, worst dashed, the goal
// marked), the per-spine load max/mean likewise, and the load on each
// spine in the median seed of each mode at the largest QP count.
func WriteECMPHTML(w io.Writer, stats []ECMPStats, pg Page) error {
	bw := bufio.NewWriter(w)
	writeHead(bw, pg)
	e := html.EscapeString

	fmt.Fprint(bw, "<table>\n<tr><th>mode</th><th>QPs per pair</th><th>spine load max/mean median</th><th>worst</th>"+
		"<th>completion/ideal median</th><th>worst</th><th>seeds</th></tr>\n")
	for _, st := range stats {
		fmt.Fprintf(bw, "<tr><td class=\"k\">%s</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td></tr>\n",
			e(st.Mode.String()), st.QPs, fmtNum(round3(st.LoadMedian)), fmtNum(round3(st.LoadWorst)),
			fmtNum(round3(st.RatioMedian)), fmtNum(round3(st.RatioWorst)), len(st.Runs))
	}
	fmt.Fprint(bw, "</table>\n")

	var qps []int
	var modes []PortMode
	for _, st := range stats {
		if !slices.Contains(qps, st.QPs) {
			qps = append(qps, st.QPs)
		}
		if !slices.Contains(modes, st.Mode) {
			modes = append(modes, st.Mode)
		}
	}
	slices.Sort(qps)
	labels := make([]string, len(qps))
	for i, q := range qps {
		labels[i] = strconv.Itoa(q)
	}
	byQP := func(title, ylabel string, get func(ECMPStats) (med, worst float64), refs []ref) {
		c := chart{title: title, ylabel: ylabel, xlabel: "QPs per neighbour pair", xlabels: labels,
			xmin: -0.5, xmax: float64(len(qps)) - 0.5, ymin: 0, ymax: 1.5, refs: refs}
		for _, m := range modes {
			med := series{name: m.String() + " median", color: colorOf(m), dots: true}
			wst := series{name: m.String() + " worst", color: colorOf(m), dashed: true, dots: true}
			for _, st := range stats {
				if st.Mode != m {
					continue
				}
				a, b := get(st)
				x := float64(slices.Index(qps, st.QPs))
				med.x, med.y = append(med.x, x), append(med.y, a)
				wst.x, wst.y = append(wst.x, x), append(wst.y, b)
				c.ymax = max(c.ymax, a*1.1, b*1.1)
			}
			c.lines = append(c.lines, med, wst)
		}
		if len(c.lines) > 0 {
			c.write(bw)
		}
	}
	byQP("Collective completion / balanced ideal", "completion / ideal",
		func(st ECMPStats) (float64, float64) { return st.RatioMedian, st.RatioWorst },
		[]ref{{y: 1, label: "ideal"}, {y: 1.25, label: "goal 1.25 (kernel rule, 8 QPs)"}})
	byQP("Per-spine load max/mean (bytes through each spine)", "max / mean",
		func(st ECMPStats) (float64, float64) { return st.LoadMedian, st.LoadWorst },
		[]ref{{y: 1, label: "balanced"}})

	// Per-spine load of the median seed (by completion) at the largest QP
	// count, per mode.
	if len(qps) > 0 {
		top := qps[len(qps)-1]
		c := chart{title: "Load per spine, median seed, " + strconv.Itoa(top) + " QPs per pair",
			ylabel: "share of the mean", xlabel: "spine", ymin: 0, ymax: 2}
		for _, st := range stats {
			if st.QPs != top || len(st.Runs) == 0 {
				continue
			}
			runs := slices.Clone(st.Runs)
			slices.SortStableFunc(runs, func(a, b *ECMPResult) int { return cmpFloat(a.Ratio, b.Ratio) })
			r := runs[(len(runs)-1)/2]
			var total float64
			for _, b := range r.SpineLoad {
				total += b
			}
			if total == 0 {
				continue
			}
			mean := total / float64(len(r.SpineLoad))
			s := series{name: st.Mode.String() + " seed " + strconv.FormatUint(r.Config.Seed, 10), color: colorOf(st.Mode), dots: true}
			c.labelsFor(len(r.SpineLoad))
			for i, b := range r.SpineLoad {
				s.x, s.y = append(s.x, float64(i)), append(s.y, b/mean)
				c.ymax = max(c.ymax, b/mean*1.1)
			}
			c.lines = append(c.lines, s)
		}
		c.refs = []ref{{y: 1, label: "mean"}}
		if len(c.lines) > 0 {
			c.write(bw)
		}
	}
	fmt.Fprint(bw, "</body>\n</html>\n")
	return bw.Flush()
}

// labelsFor makes c's x axis categorical over 0…n−1.
func (c *chart) labelsFor(n int) {
	c.xlabels = make([]string, n)
	for i := range n {
		c.xlabels[i] = strconv.Itoa(i)
	}
	c.xmin, c.xmax = -0.5, float64(n)-0.5
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
