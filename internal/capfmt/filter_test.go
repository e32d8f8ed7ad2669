package capfmt_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/capfmt"
)

// matching returns the frame numbers of pkts that pass filter.
func matching(t *testing.T, pkts []capfmt.Packet, filter string) []int {
	t.Helper()
	f, err := capfmt.CompileFilter(filter)
	require.NoError(t, err, filter)
	out := []int{}
	for i := range pkts {
		if f.Match(&pkts[i]) {
			out = append(out, pkts[i].Number)
		}
	}
	return out
}

// TestFilterSemantics checks display filters against the frame lists
// tshark 4.0.17 selects (FORMATS.md §7, and runs of tshark -Y on the same
// files).
func TestFilterSemantics(t *testing.T) {
	rcImm := decodeFile(t, filepath.Join(root, "testdata/pcaps/rc_imm.pcap"))
	probeIP := decodeFile(t, filepath.Join(root, "testdata/tshark/probe/probe_ip.pcap"))
	tests := []struct {
		name   string
		pkts   []capfmt.Packet
		filter string
		want   []int
	}{
		{"protocol", rcImm, "infiniband", []int{10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}},
		{"roce alias", rcImm, "roce", []int{10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}},
		{"eq decimal", rcImm, "infiniband.bth.opcode == 17", []int{11, 15, 17, 19, 23}},
		{"eq hex", rcImm, "infiniband.bth.opcode == 0x11", []int{11, 15, 17, 19, 23}},
		{"eq octal", rcImm, "infiniband.bth.opcode == 021", []int{11, 15, 17, 19, 23}},
		{"eq word", rcImm, "infiniband.bth.opcode eq 17", []int{11, 15, 17, 19, 23}},
		{"eq octal 017", rcImm, "infiniband.bth.opcode == 017", []int{}},
		{"ne", rcImm, "infiniband.bth.opcode != 17", []int{10, 12, 13, 14, 16, 18, 20, 21, 22}},
		{"range", rcImm, "infiniband.bth.opcode > 10 && infiniband.bth.opcode < 17", []int{10, 16}},
		{"in", rcImm, "infiniband.bth.opcode in {5, 9}", []int{14, 18}},
		{"presence", rcImm, "infiniband.aeth", []int{11, 15, 17, 19, 23}},
		{"not presence", rcImm, "!infiniband.aeth && infiniband", []int{10, 12, 13, 14, 16, 18, 20, 21, 22}},
		{"words", rcImm, "not infiniband.aeth and infiniband", []int{10, 12, 13, 14, 16, 18, 20, 21, 22}},
		{"bool true", rcImm, "infiniband.bth.a == true", []int{10, 14, 16, 18, 22}},
		{"qpn forms", rcImm, "infiniband.bth.destqp == 0x00001f && infiniband.bth.destqp == 31", []int{10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}},
		{"bytes colon", rcImm, "infiniband.immdt == 11:22:33:44", []int{10}},
		{"bytes plain", rcImm, "infiniband.immdt == 11223344", []int{10}},
		{"bytes string", rcImm, `infiniband.immdt == "\x11\x22\x33\x44"`, []int{10}},
		{"slice", rcImm, "infiniband.bth[0] == 0x11", []int{11, 15, 17, 19, 23}},
		{"icrc good", rcImm, "roce.icrc.status == good", []int{10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}},
		{"icrc bad", rcImm, "roce.icrc.status == \"bad\"", []int{}},
		{"parens", rcImm, "(infiniband.bth.opcode == 17 || infiniband.bth.opcode == 11) && frame.number < 12", []int{10, 11}},
		{"time", rcImm, "frame.time_relative < 0.0288", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"any ip.src", probeIP, "ip.src == 10.77.0.2", []int{10}},
		{"all-ne", probeIP, "ip.src != 10.77.0.3 && infiniband", []int{}},
		{"any-ne", probeIP, "ip.src ~= 10.77.0.3 && infiniband", []int{10, 14}},
		{"all quantifier", probeIP, "all ip.src == 10.77.0.3 && infiniband.bth.opcode == 4", []int{1, 2, 3, 4, 5, 9, 13, 16, 21, 22, 23}},
		{"cidr", probeIP, "ip.src == 192.0.2.0/24", []int{14}},
		{"ipv6", probeIP, "ipv6.src == fd00:4d::3", []int{6, 7}},
		{"mapped", probeIP, "ipv6.src == ::ffff:10.77.0.3", []int{8}},
		{"ecn", probeIP, "ip.dsfield.ecn == 3", []int{4}},
		{"reserved byte", probeIP, "infiniband.reserved == 40", []int{11, 12}},
		{"reserved two bytes", probeIP, "infiniband.reserved == 40:00", []int{}},
		{"negative time", probeIP, "frame.time_relative < 0", []int{22}},
		{"udp port", probeIP, "udp.srcport == 0", []int{11}},
		{"empty", rcImm, "", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, matching(t, tc.pkts, tc.filter))
		})
	}
}

// TestFilterErrors checks that bad filters fail to compile with a message.
func TestFilterErrors(t *testing.T) {
	for _, src := range []string{
		"rroce",
		"infiniband.bth.opcode == 300",
		"infiniband.bth.opcode == RC",
		"infiniband.bth.nosuch == 1",
		"infiniband.bth.opcode == 17 &&",
		"infiniband.bth.opcode in {5 9}",
		"infiniband.bth.opcode = 4",
		"(infiniband",
		"ip.src == 1.2.3",
		"ip == 1",
		"roce.icrc.status == maybe",
		`infiniband.immdt == "unterminated`,
		"infiniband.bth.opcode[0] == 1",
		"frame.number ==",
		"&& infiniband",
		"infiniband )",
		"infiniband.bth.psn == 0x1000000",
	} {
		_, err := capfmt.CompileFilter(src)
		assert.ErrorIs(t, err, capfmt.ErrFilter, src)
	}
}
