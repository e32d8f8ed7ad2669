package testutil

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPattern(t *testing.T) {
	a, b := Pattern(1, 1000), Pattern(1, 1000)
	require.Equal(t, a, b, "Pattern is not deterministic")
	require.NotEqual(t, a, Pattern(2, 1000), "Pattern ignores the seed")
	for _, n := range []int{0, 1, 7, 8, 9, 999} {
		assert.Equal(t, a[:n], Pattern(1, n), "Pattern(1, %d) is not a prefix of Pattern(1, 1000)", n)
	}
	assert.LessOrEqual(t, bytes.Count(a, []byte{0}), 20, "Pattern looks far from random")
}

func TestFirstDiff(t *testing.T) {
	big := Pattern(3, 1<<16)
	mod := bytes.Clone(big)
	mod[40_000] ^= 1
	tests := []struct {
		a, b []byte
		want int
	}{
		{nil, nil, -1},
		{[]byte{}, nil, -1},
		{[]byte{1, 2}, []byte{1, 2}, -1},
		{[]byte{1, 2}, []byte{1, 3}, 1},
		{[]byte{1, 2}, []byte{1, 2, 3}, 2},
		{[]byte{1, 2, 3}, []byte{1}, 1},
		{big, big, -1},
		{big, mod, 40_000},
		{big[:9], mod[:9], -1},
	}
	for i, tc := range tests {
		assert.Equal(t, tc.want, FirstDiff(tc.a, tc.b), "case %d", i)
	}
}

// recorder is a testing.TB that records instead of failing.
type recorder struct {
	testing.TB
	name     string
	logs     []string
	failed   bool
	fatal    bool
	cleanups []func()
}

func (r *recorder) Helper()                        {}
func (r *recorder) Name() string                   { return r.name }
func (r *recorder) Failed() bool                   { return r.failed }
func (r *recorder) Cleanup(f func())               { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Logf(format string, a ...any)   { r.logs = append(r.logs, fmt.Sprintf(format, a...)) }
func (r *recorder) Errorf(format string, a ...any) { r.failed = true; r.Logf(format, a...) }
func (r *recorder) Fatalf(format string, a ...any) {
	r.fatal = true
	r.Errorf(format, a...)
}

func (r *recorder) finish() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

func TestRequireSameBytes(t *testing.T) {
	want := Pattern(4, 4096)
	r := &recorder{TB: t}
	RequireSameBytes(r, want, bytes.Clone(want))
	require.False(t, r.failed, "equal buffers reported: %v", r.logs)
	got := bytes.Clone(want)
	got[1234] ^= 0x80
	RequireSameBytes(r, want, got)
	require.True(t, r.fatal)
	assert.Contains(t, r.logs[0], "offset 1234 (0x4d2)")
	r = &recorder{TB: t}
	RequireSameBytes(r, want, want[:100])
	require.True(t, r.fatal)
	assert.Contains(t, r.logs[0], "offset 100 ")
	assert.Contains(t, r.logs[0], "len(got) = 100")
}

func TestSHA256(t *testing.T) {
	// FIPS 180-2 test vector.
	assert.Equal(t, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
		fmt.Sprintf("%x", SHA256([]byte("abc"))))
}

func TestPerftestRow(t *testing.T) {
	out := "---\n #bytes     #iterations    BW peak[Gb/sec]\n 65536      100           9.5\n---\n"
	head, f := PerftestRow(out)
	assert.Contains(t, head, "#iterations")
	assert.Equal(t, []string{"65536", "100", "9.5"}, f)
	head, f = PerftestRow("no report")
	assert.Empty(t, head)
	assert.Empty(t, f)
}
