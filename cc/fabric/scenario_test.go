package fabric_test

import (
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/cc/fabric"
)

var long = flag.Bool("long", false, "run the scenario matrix over 10 seeds (also GOROCE_LONG=1)")

func longMode() bool { return *long || os.Getenv("GOROCE_LONG") == "1" }

// seeds returns the seeds each scenario runs with: 3 by default (doc/dcqcn.md
// §5.1 "every scenario run with ≥ 3 seeds"), 10 in long mode.
func seeds() []uint64 {
	if longMode() {
		return []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	}
	return []uint64{1, 2, 3}
}

// TestScenarios runs S1–S6 of doc/dcqcn.md §5.3 under both profiles over
// several seeds, requires every judged figure to pass on every seed, and
// logs each figure's median and worst seed.
func TestScenarios(t *testing.T) {
	if raceEnabled {
		t.Skip("scenario matrix skipped under -race")
	}
	for _, p := range []cc.Profile{cc.ProfileP, cc.ProfileM} {
		for _, sc := range fabric.Scenarios() {
			t.Run(p.String()+"/"+sc.ID, func(t *testing.T) {
				t.Parallel()
				start := time.Now()
				var runs [][]fabric.Figure
				for _, seed := range seeds() {
					r, figs, err := sc.Run(p, seed)
					require.NoError(t, err)
					assert.Empty(t, r.Violations, "seed %d", seed)
					for _, f := range figs {
						assert.True(t, f.Pass(), "seed %d: %s = %v, want %s", seed, f.Key, f.Value, threshold(f))
					}
					runs = append(runs, figs)
				}
				t.Logf("%s profile %s, %d seeds in %v:\n%s", sc.ID, p, len(runs), time.Since(start).Round(time.Millisecond), summarize(runs, seeds()))
			})
		}
	}
}

func threshold(f fabric.Figure) string {
	switch f.Cmp {
	case fabric.AtLeast:
		return fmt.Sprintf("≥ %g", f.Limit)
	case fabric.AtMost:
		return fmt.Sprintf("≤ %g", f.Limit)
	}
	return "report"
}

// summarize formats, per figure, the median over seeds and the worst seed
// (lowest for ≥ thresholds, highest otherwise).
func summarize(runs [][]fabric.Figure, seeds []uint64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %-15s %12s %12s %6s  %s\n", "figure", "median", "worst", "seed", "threshold")
	for i, f := range runs[0] {
		vals := make([]float64, len(runs))
		worst, ws := math.NaN(), seeds[0]
		for k, run := range runs {
			v := run[i].Value
			vals[k] = v
			if k == 0 || f.Worse(v, worst) {
				worst, ws = v, seeds[k]
			}
		}
		fmt.Fprintf(&b, "  %-15s %12.5g %12.5g %6d  %s\n", f.Key, fabric.Median(vals), worst, ws, threshold(f))
	}
	return b.String()
}

// TestScenarioIDs pins the scenario list to doc/dcqcn.md §5.3.
func TestScenarioIDs(t *testing.T) {
	var ids []string
	for _, s := range fabric.Scenarios() {
		ids = append(ids, s.ID)
		assert.NotEmpty(t, s.Title)
	}
	assert.Equal(t, []string{"S1", "S1b", "S1b-25G", "S2", "S3", "S4", "S5", "S6"}, ids)
	_, ok := fabric.LookupScenario("S9")
	assert.False(t, ok)
}
