package rawnet

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRoCEAddr(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"port 0 means 4791", "10.0.0.1:0", "10.0.0.1:4791"},
		{"port kept", "10.0.0.1:5000", "10.0.0.1:5000"},
		{"v4-mapped unmapped", "[::ffff:10.0.0.1]:0", "10.0.0.1:4791"},
		{"v6 kept", "[fd00::1]:7", "[fd00::1]:7"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, netip.MustParseAddrPort(tc.want), RoCEAddr(netip.MustParseAddrPort(tc.in)))
		})
	}
}
