package perf

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBaselineQuick runs a short Baseline over loopback (127.0.0.1 →
// 127.0.0.2) and checks the result is sane.
func TestBaselineQuick(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("link/udp needs Linux")
	}
	res, err := Baseline(context.Background(), BaselineConfig{
		Duration: 200 * time.Millisecond, Pings: 500, PingWarmup: 50, Plain: true,
	})
	require.NoError(t, err)
	t.Logf("blast %d B: %.2f Gb/s, %.3f Mpps, loss %.1f%%; one-way p50 %v p99 %v p999 %v",
		res.Size, res.Gbps, res.Mpps, 100*res.Loss, res.Latency.P50, res.Latency.P99, res.Latency.P999)
	assert.Greater(t, res.Received, uint64(0))
	assert.LessOrEqual(t, res.Received, res.Sent)
	assert.Greater(t, res.Gbps, 0.0)
	assert.Equal(t, 500, res.Latency.Samples)
	assert.Positive(t, res.Latency.P50)
	assert.LessOrEqual(t, res.Latency.P50, res.Latency.P99)
	assert.LessOrEqual(t, res.Latency.P99, res.Latency.P999)
	assert.Greater(t, res.Sender.GSOSent, uint64(0))
	assert.Greater(t, res.Receiver.GROReceived, uint64(0))
	t.Logf("plain blast: %.3f Mpps, loss %.1f%%", res.Plain.Mpps, 100*res.Plain.Loss)
	assert.Greater(t, res.Plain.Received, uint64(0))
	assert.LessOrEqual(t, res.Plain.Received, res.Plain.Sent)
	assert.Positive(t, res.Plain.Mpps)
}

// TestBaselineCancel: a cancelled context stops Baseline with its error.
func TestBaselineCancel(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("link/udp needs Linux")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := Baseline(ctx, BaselineConfig{Duration: time.Minute})
	require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
}

func TestOneWay(t *testing.T) {
	var rtts []time.Duration
	for i := 1000; i >= 1; i-- {
		rtts = append(rtts, time.Duration(i)*2*time.Microsecond)
	}
	l := oneWay(rtts)
	assert.Equal(t, Latency{Samples: 1000, Min: time.Microsecond, P50: 500 * time.Microsecond,
		P99: 990 * time.Microsecond, P999: 999 * time.Microsecond, Max: 1000 * time.Microsecond}, l)
	assert.Equal(t, Latency{}, oneWay(nil))
}
