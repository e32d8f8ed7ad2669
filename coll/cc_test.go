package coll_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cc"
	"github.com/goroce/goroce/coll"
	"github.com/goroce/goroce/roce"
)

// TestConfigCC: Config.CC reaches every QP of the job: a reaction point
// at the line rate it names, or none when it is off.
func TestConfigCC(t *testing.T) {
	rp := cc.ProfileP.Config()
	rp.LineRate = 250 * cc.Mbps
	rp.MinRate = rp.LineRate / 100
	tests := []struct {
		name string
		cc   roce.CCConfig
		rate cc.Bitrate
	}{
		{"default", roce.CCConfig{}, cc.ProfileP.Config().LineRate},
		{"line 250 Mb/s", roce.CCConfig{RP: &rp}, 250 * cc.Mbps},
		{"off", roce.CCConfig{DisableRP: true, DisableNP: true}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			comms := startJob(t, 2, func(c *coll.Config) { c.CC = tc.cc; c.QPsPerConn = 2 })
			for _, c := range comms {
				conns := c.Conns()
				require.NotEmpty(t, conns)
				for _, ci := range conns {
					for _, q := range ci.QPs {
						assert.Equal(t, tc.rate, q.QP.CC().Rate, "rank %d QP %#x", c.Rank(), q.QPN)
					}
				}
			}
		})
	}
}
