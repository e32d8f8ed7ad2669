package roce

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The timeout is rounded up to the next 4.096 µs × 2^n (IBA 9.7.6.1.3).
func TestTimeoutCode(t *testing.T) {
	tests := []struct {
		t    time.Duration
		want uint8
	}{
		{0, 14},
		{NoTimeout, 0},
		{1, 1},
		{8192 * time.Nanosecond, 1},
		{8193 * time.Nanosecond, 2},
		{time.Millisecond, 8}, // 1.048576 ms
		{DefaultTimeout, 14},
		{DefaultTimeout - 1, 14},
		{DefaultTimeout + 1, 15},
		{MaxTimeout, 31},
	}
	for _, tc := range tests {
		got, err := timeoutCode(tc.t)
		require.NoError(t, err, "%v", tc.t)
		assert.Equal(t, tc.want, got, "%v", tc.t)
	}
	for code := uint8(1); code <= 31; code++ {
		got, err := timeoutCode(4096 * time.Nanosecond << code)
		require.NoError(t, err)
		assert.Equal(t, code, got, "an exact code maps to itself")
	}
	for _, bad := range []time.Duration{-2, MaxTimeout + 1} {
		_, err := timeoutCode(bad)
		assert.ErrorIs(t, err, ErrInvalidArg, "%v", bad)
	}
}

func TestRetries(t *testing.T) {
	tests := []struct {
		r    Retries
		want uint8
	}{{DefaultRetries, 7}, {NoRetries, 0}, {1, 1}, {6, 6}, {InfiniteRNRRetries, 7}}
	for _, tc := range tests {
		got, err := tc.r.count()
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "%d", tc.r)
	}
	for _, bad := range []Retries{-2, 8} {
		_, err := bad.count()
		assert.ErrorIs(t, err, ErrInvalidArg, "%d", bad)
	}
}

func TestECNCodepoint(t *testing.T) {
	for e, want := range map[ECN]uint8{NotECT: 0, ECT1: 1, ECT0: 2, CE: 3} {
		got, ok := e.Codepoint()
		assert.True(t, ok, "%v", e)
		assert.Equal(t, want, got, "%v", e)
	}
	for _, e := range []ECN{ECNDefault, CE + 1} {
		_, ok := e.Codepoint()
		assert.False(t, ok, "%v", e)
	}
	assert.Equal(t, "Not-ECT", NotECT.String())
	assert.Equal(t, "default", ECNDefault.String())
	assert.Equal(t, "ECN(5)", (CE + 1).String())
}
