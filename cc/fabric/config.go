package fabric

import (
	"errors"
	"fmt"
	"time"

	"github.com/goroce/goroce/cc"
)

// ErrInvalidConfig is wrapped by every error [Run] returns for a bad
// [Config]; errors from the cc constructors are joined unchanged, so
// cc.ErrInvalidConfig matches those too.
var ErrInvalidConfig = errors.New("fabric: invalid config")

// Config describes one simulation run. Zero durations and sizes take the
// defaults named on each field (doc/dcqcn.md §5.1).
type Config struct {
	// Seed seeds the run's PRNG (RED draws). Runs with equal Configs are
	// identical.
	Seed uint64
	// Duration is the simulated time. Required.
	Duration time.Duration

	// RP, NP and RED configure every flow's reaction point, every flow's
	// notification point and the bottleneck's marking curve. Each sender
	// NIC runs at RP.LineRate.
	RP  cc.Config
	NP  cc.NPConfig
	RED cc.REDConfig

	// Bottleneck is the switch egress rate toward the receiver. Required.
	Bottleneck cc.Bitrate
	// Delay is the propagation delay of the switch–receiver link (default
	// 1 µs).
	Delay time.Duration
	// Flows lists the senders, one flow each. At least one.
	Flows []Flow

	// PacketSize is the frame size on the wire in bytes (default 1024).
	PacketSize int
	// Buffer is the switch buffer in bytes; a packet that does not fit is
	// dropped (default 16 MB, doc/dcqcn.md §5.1).
	Buffer int
	// PFC configures priority flow control; the zero value disables it.
	PFC PFC
	// CNPDelay is added to the reverse propagation delay of every CNP, for
	// the NP's generation time (default 0).
	CNPDelay time.Duration
	// PacerBurst is the pacer's bucket depth in bytes (default 4 packets).
	PacerBurst int

	// Bin is the resolution of the per-flow delivered-bytes record
	// (default 100 µs). Metrics windows are rounded to it.
	Bin time.Duration
	// Sample is the interval of the rate and queue time series (default
	// Duration/2000, at least Bin/100).
	Sample time.Duration
	// Window is the interval [Window[0], Window[1]) over which the queue
	// distribution (Q99, Qmax) is recorded (default the whole run).
	Window [2]time.Duration
	// SettleLevel is the queue length whose last crossing defines Tsettle
	// (default 2·RED.Kmax, doc/dcqcn.md §5.2).
	SettleLevel int
}

// Flow is one sender host with one always-backlogged flow.
type Flow struct {
	// Delay is the propagation delay of the host–switch link (default
	// 1 µs). The base RTT is 2·(Delay + Config.Delay) plus serialisation.
	Delay time.Duration
	// Start is when the flow starts sending, at its cc rate (line rate
	// for a new flow).
	Start time.Duration
	// Stop is when it stops; 0 means never.
	Stop time.Duration
}

// PFC configures IEEE 802.1Qbb-style pause on the switch ingress ports: a
// port whose bytes in the buffer exceed XOff sends PAUSE to its host,
// which stops starting packets until a RESUME, sent when the port's bytes
// drop to XOn or below. Pause frames take the link's propagation delay.
type PFC struct {
	// Enabled turns PFC on.
	Enabled bool
	// XOff and XOn are per-ingress-port thresholds in bytes, XOn < XOff.
	XOff, XOn int
}

func (c *Config) withDefaults() Config {
	d := *c
	d.Flows = append([]Flow(nil), c.Flows...)
	if d.Delay == 0 {
		d.Delay = time.Microsecond
	}
	for i := range d.Flows {
		if d.Flows[i].Delay == 0 {
			d.Flows[i].Delay = time.Microsecond
		}
	}
	if d.PacketSize == 0 {
		d.PacketSize = 1024
	}
	if d.Buffer == 0 {
		d.Buffer = 16_000_000
	}
	if d.PacerBurst == 0 {
		d.PacerBurst = 4 * d.PacketSize
	}
	if d.Bin == 0 {
		d.Bin = 100 * time.Microsecond
	}
	if d.Sample == 0 {
		d.Sample = max(d.Duration/2000, d.Bin/100, time.Nanosecond)
	}
	if d.Window == [2]time.Duration{} {
		d.Window = [2]time.Duration{0, d.Duration}
	}
	if d.SettleLevel == 0 {
		d.SettleLevel = 2 * d.RED.Kmax
	}
	return d
}

func (c *Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.Duration <= 0 {
		bad("Duration = %v, want > 0", c.Duration)
	}
	if !(c.Bottleneck > 0) || float64(c.Bottleneck) > 1e15 {
		bad("Bottleneck = %v, want a positive rate", float64(c.Bottleneck))
	}
	if len(c.Flows) == 0 {
		bad("no flows")
	}
	for i, f := range c.Flows {
		if f.Delay < 0 || f.Start < 0 || f.Stop < 0 || (f.Stop != 0 && f.Stop <= f.Start) {
			bad("flow %d: Delay %v, Start %v, Stop %v", i, f.Delay, f.Start, f.Stop)
		}
	}
	if c.Delay < 0 || c.CNPDelay < 0 {
		bad("negative delay (Delay %v, CNPDelay %v)", c.Delay, c.CNPDelay)
	}
	if c.PacketSize < 64 || c.PacketSize > 1<<16 {
		bad("PacketSize = %d, want 64..65536", c.PacketSize)
	}
	if c.Buffer < c.PacketSize {
		bad("Buffer = %d B, smaller than a packet", c.Buffer)
	}
	if c.PacerBurst < c.PacketSize {
		bad("PacerBurst = %d B, smaller than a packet", c.PacerBurst)
	}
	if c.Bin <= 0 || c.Sample <= 0 {
		bad("Bin %v and Sample %v must be positive", c.Bin, c.Sample)
	}
	if c.Window[0] < 0 || c.Window[1] <= c.Window[0] || c.Window[1] > c.Duration {
		bad("Window %v outside [0, Duration]", c.Window)
	}
	if c.PFC.Enabled && (c.PFC.XOn < 0 || c.PFC.XOff <= c.PFC.XOn) {
		bad("PFC XOff %d must exceed XOn %d ≥ 0", c.PFC.XOff, c.PFC.XOn)
	}
	if c.SettleLevel < 0 {
		bad("SettleLevel = %d", c.SettleLevel)
	}
	if c.RP.AlphaMode == cc.AlphaPaper && c.NP.Interval > 0 && c.RP.AlphaPeriod <= c.NP.Interval {
		// doc/dcqcn.md §1.3: K must exceed N, or α decays between two CNPs of
		// a flow that is still congested.
		bad("α period K = %v must exceed the CNP interval N = %v", c.RP.AlphaPeriod, c.NP.Interval)
	}
	if err := c.RP.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.NP.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.RED.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
