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

// TestFilterL2 checks display filters on the 802.1Q and MAC Control fields
// against the frame lists tshark 4.0.17 -Y selects on the same probes
// (scripts/make-tshark-probes.py probe_macc, probe_vlan).
func TestFilterL2(t *testing.T) {
	macc := decodeFile(t, filepath.Join(root, "testdata/tshark/probe/probe_macc.pcap"))
	vlan := decodeFile(t, filepath.Join(root, "testdata/tshark/probe/probe_vlan.pcap"))
	seq := func(from, to int, skip ...int) []int {
		var out []int
	next:
		for i := from; i <= to; i++ {
			for _, s := range skip {
				if i == s {
					continue next
				}
			}
			out = append(out, i)
		}
		return out
	}
	tests := []struct {
		name   string
		pkts   []capfmt.Packet
		filter string
		want   []int
	}{
		// frames 13 and 14 have no whole opcode: tshark adds no macc item
		{"macc protocol", macc, "macc", seq(1, 38, 13, 14)},
		{"pfc opcode", macc, "macc.opcode==0x0101", []int{6, 7, 8, 9, 10, 11, 12, 17, 18, 19, 20, 21, 38}},
		{"pause opcode", macc, "macc.opcode == 1", []int{1, 2, 3, 4, 5, 15, 16, 37}},
		{"pause zero", macc, "macc.pause_time == 0", []int{1}},
		{"pause untagged", macc, "macc.pause_time > 0 && !vlan", []int{2, 3, 4, 5}},
		{"enable bit", macc, "macc.cbfc.enbv.c3 == 1", []int{6, 7, 8, 10, 11, 19, 20, 21, 38}},
		{"enable bit present", macc, "macc.cbfc.enbv.c3", []int{6, 7, 8, 9, 10, 11, 12, 19, 20, 21, 38}},
		{"enable bool", macc, "macc.cbfc.enbv.c7 == true", []int{8}},
		{"vector", macc, "macc.cbfc.enbv == 0x0008", []int{6, 10, 19, 20, 21, 38}},
		{"quanta", macc, "macc.cbfc.pause_time.c3 == 65535", []int{6}},
		{"quanta hex", macc, "macc.cbfc.pause_time.c3 == 0xffff", []int{6}},
		{"mpcp timestamp", macc, "macc.timestamp", []int{27, 28, 29, 30, 31, 33, 34, 35, 36}},
		{"mpcp flags", macc, "macc.reg.flags == 5", []int{29, 31, 33, 36}},
		{"no opcode", macc, "macc && !macc.opcode", []int{}},
		{"tagged pause", macc, "vlan.etype == 0x8808", []int{37, 38}},
		{"tagged pfc dei", macc, "vlan.dei == 1", []int{38}},
		// frames 11 and 12 lack a whole TCI: no vlan item
		{"vlan protocol", vlan, "vlan", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 14, 16}},
		{"pcp 3", vlan, "vlan.priority==3", []int{1, 4, 7, 8, 9, 13, 16}},
		{"pcp 3 every tag", vlan, "all vlan.priority == 3", []int{1, 4, 7, 8, 13, 16}},
		{"pcp 2 any tag", vlan, "vlan.priority == 2", []int{9, 14}},
		{"cnp on pcp 6", vlan, "vlan.priority == 6 && infiniband.bth.opcode == 0x81", []int{3}},
		{"vid", vlan, "vlan.id == 200", []int{2, 3, 10}},
		{"dei", vlan, "vlan.dei == 1", []int{4}},
		{"dscp", vlan, "ip.dsfield.dscp == 48", []int{2, 3}},
		{"length type", vlan, "vlan.len", []int{14}},
		{"cfi never", vlan, "vlan.cfi", []int{}},
		{"pfc between data", vlan, "macc.cbfc.enbv.c3 == 1", []int{15, 17}},
		// FT_UINT16 / FT_UINT8: tshark accepts values past the bitmask
		{"pcp 8", vlan, "vlan.priority == 8", []int{}},
		{"vid 4096", vlan, "vlan.id == 4096", []int{}},
		{"dscp 64", vlan, "ip.dsfield.dscp == 64", []int{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, matching(t, tc.pkts, tc.filter))
		})
	}
}
