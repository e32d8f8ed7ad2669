package fabric

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/bpf"
)

// TestFlowFilter runs the sampler's filter, without its ancillary loads
// (packet type, random), in golang.org/x/net/bpf's VM.
func TestFlowFilter(t *testing.T) {
	vm, err := bpf.NewVM(flowFilter(128, 1, false))
	require.NoError(t, err)
	udp := func(ihl int, dport uint16, frag uint16) []byte {
		b := make([]byte, 14+ihl*4+8+12)
		binary.BigEndian.PutUint16(b[12:], 0x0800)
		b[14] = 0x40 | byte(ihl)
		binary.BigEndian.PutUint16(b[14+6:], frag)
		b[14+9] = 17
		binary.BigEndian.PutUint16(b[14+ihl*4+2:], dport)
		return b
	}
	tcp := udp(5, 4791, 0)
	tcp[14+9] = 6
	ipv6 := udp(5, 4791, 0)
	binary.BigEndian.PutUint16(ipv6[12:], 0x86dd)
	tests := []struct {
		name  string
		frame []byte
		keep  int
	}{
		{"RoCEv2", udp(5, 4791, 0), 128},
		{"IP options", udp(7, 4791, 0), 128},
		{"don't fragment", udp(5, 4791, 0x4000), 128},
		{"other port", udp(5, 4792, 0), 0},
		{"later fragment", udp(5, 4791, 0x0010), 0},
		{"TCP", tcp, 0},
		{"IPv6", ipv6, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := vm.Run(tc.frame)
			require.NoError(t, err)
			assert.Equal(t, tc.keep, n)
		})
	}
	// With the packet type and sampling the program still assembles, and
	// every drop lands on the final "return 0".
	prog := flowFilter(128, 32, true)
	_, err = bpf.Assemble(prog)
	require.NoError(t, err)
	for i, in := range prog {
		if j, ok := in.(bpf.JumpIf); ok {
			assert.Equal(t, len(prog)-1, i+1+int(j.SkipTrue), "instruction %d", i)
		}
	}
}
