package testutil

import "strings"

// PerftestRow returns the header line of a perftest-style report (the one
// with "#bytes") and the fields of the row under it, as the bw tools print
// them; both empty when out has no such header.
func PerftestRow(out string) (head string, fields []string) {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.Contains(l, "#bytes") && i+1 < len(lines) {
			head, fields = l, strings.Fields(lines[i+1])
		}
	}
	return head, fields
}
