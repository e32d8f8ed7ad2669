package cc_test

import (
	"testing"
	"time"

	"github.com/goroce/goroce/cc"
)

func benchProfiles(b *testing.B, run func(b *testing.B, d *cc.DCQCN)) {
	for _, p := range []cc.Profile{cc.ProfileP, cc.ProfileM} {
		b.Run(p.String(), func(b *testing.B) {
			d, err := cc.New(p.Config())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			run(b, d)
		})
	}
}

// BenchmarkOnCNP measures a CNP every 50 µs (the NP's maximum rate at N =
// 50 µs), including the α and timer bookkeeping in between.
func BenchmarkOnCNP(b *testing.B) {
	benchProfiles(b, func(b *testing.B, d *cc.DCQCN) {
		now := t0
		for b.Loop() {
			now = now.Add(50 * time.Microsecond)
			d.OnCNP(now)
		}
	})
}

// BenchmarkOnTimeout measures the increase timer firing at its deadline,
// with a CNP every 20 firings so the limiter stays engaged.
func BenchmarkOnTimeout(b *testing.B) {
	benchProfiles(b, func(b *testing.B, d *cc.DCQCN) {
		now := t0
		d.OnCNP(now)
		i := 0
		for b.Loop() {
			dl, ok := d.Deadline()
			if !ok {
				dl = now.Add(time.Microsecond)
			}
			now = dl
			d.OnTimeout(now)
			if i++; i%20 == 0 {
				d.OnCNP(now)
			}
		}
	})
}

// BenchmarkOnPacketSent measures the per-packet path: 1024-B packets at
// 100 Gb/s (81.92 ns apart) with the limiter engaged.
func BenchmarkOnPacketSent(b *testing.B) {
	benchProfiles(b, func(b *testing.B, d *cc.DCQCN) {
		now := t0
		d.OnCNP(now)
		i := 0
		for b.Loop() {
			now = now.Add(82 * time.Nanosecond)
			d.OnPacketSent(now, 1024)
			if i++; i%1000 == 0 {
				d.OnCNP(now)
			}
		}
	})
}

func BenchmarkNPOnPacket(b *testing.B) {
	np, err := cc.NewNP(cc.ProfileP.NPConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	now := t0
	for b.Loop() {
		now = now.Add(82 * time.Nanosecond)
		np.OnPacket(now, true, true)
	}
}

func BenchmarkREDMark(b *testing.B) {
	r, err := cc.NewRED(cc.ProfileP.REDConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	q := 0
	for b.Loop() {
		q = (q + 1024) % 250_000
		r.Mark(q, 0.003)
	}
}
