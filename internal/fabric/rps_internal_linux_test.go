package fabric

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCPUMask(t *testing.T) {
	tests := []struct {
		name string
		cpus []int
		n    int
		want string
	}{
		{"one", []int{0}, 1, "1"},
		{"two", []int{0, 1}, 2, "3"},
		{"sparse", []int{1, 3}, 64, "a"},
		{"32", []int{31}, 32, "80000000"},
		{"33", []int{0, 32}, 33, "1,00000001"},
		{"65", []int{64}, 128, "1,00000000,00000000"},
		{"none", nil, 8, "0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			set := map[int]bool{}
			for _, c := range tc.cpus {
				set[c] = true
			}
			assert.Equal(t, tc.want, cpuMask(func(i int) bool { return set[i] }, tc.n))
		})
	}
}
