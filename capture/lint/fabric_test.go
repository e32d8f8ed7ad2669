package lint_test

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/capture/lint"
)

// fabricRules are the rules TestFabricMutations covers (TestMutations
// covers the others).
var fabricRules = map[lint.RuleID]bool{
	lint.RuleSharedTuple: true,
	lint.RuleCNPDSCP:     true,
	lint.RulePFCPriority: true,
}

// isRoCEv4 reports an untagged Ethernet/IPv4/UDP frame to port 4791.
func isRoCEv4(b []byte) bool {
	return len(b) >= 14+20+8+bth.Size && binary.BigEndian.Uint16(b[12:]) == 0x0800 && b[23] == 17 &&
		binary.BigEndian.Uint16(b[14+int(b[14]&0x0f)*4+2:]) == 4791
}

// setSrcPort moves every IPv4/UDP frame from UDP source port from to to.
func setSrcPort(t *testing.T, f []frame, from, to uint16) {
	t.Helper()
	n := 0
	for i := range f {
		b := f[i].data
		if len(b) < 14+20+8 || binary.BigEndian.Uint16(b[12:]) != 0x0800 || b[23] != 17 {
			continue
		}
		u := view(t, b).udp
		if binary.BigEndian.Uint16(u) == from {
			binary.BigEndian.PutUint16(u, to)
			reseal(t, b)
			n++
		}
	}
	require.NotZero(t, n)
}

// cnpAfter inserts, after the frame at index i (an RC ACKNOWLEDGE), a CNP
// from the same sender to the same QP with the given IPv4 TOS: what the
// notification point of that connection would send when the requester's
// packets arrive CE-marked.
func cnpAfter(t *testing.T, f []frame, i int, tos byte) []frame {
	t.Helper()
	src := f[i]
	require.Equal(t, bth.RCAcknowledge, bthOf(t, src.data).Opcode())
	b := resize(t, bytes.Clone(src.data), bth.Size, bth.CNPPadSize-4) // AETH (4) → 16 reserved bytes
	v := view(t, b)
	clear(v.t[bth.Size : bth.Size+bth.CNPPadSize])
	h := bthOf(t, b)
	h.SetOpcode(0x81)
	h.SetBECN(true)
	h.SetPSN(0)
	v.ip[1] = tos
	reseal(t, b)
	cnp := frame{fr: src.fr, data: b}
	cnp.fr.Time = src.fr.Time.Add(time.Microsecond)
	return append(f[:i+1:i+1], append([]frame{cnp}, f[i+1:]...)...)
}

// tagAll puts an 802.1Q tag with the given PCP and VLAN ID on every RoCEv2
// frame (the ICRC does not cover the Ethernet header).
func tagAll(f []frame, pcp uint8, vid uint16) {
	for i := range f {
		b := f[i].data
		if !isRoCEv4(b) {
			continue
		}
		tag := binary.BigEndian.AppendUint16([]byte{0x81, 0x00}, uint16(pcp)<<13|vid)
		f[i].data = append(append(append([]byte{}, b[:12]...), tag...), b[12:]...)
	}
}

// pfcFirst prepends a PFC frame (MAC Control opcode 0x0101) that pauses
// the priorities of the class-enable vector for 0xffff quanta.
func pfcFirst(f []frame, enbv uint16) []frame {
	b := []byte{0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, 0x52, 0x54, 0x00, 0x77, 0x00, 0x03, 0x88, 0x08, 0x01, 0x01}
	b = binary.BigEndian.AppendUint16(b, enbv)
	for c := range 8 {
		q := uint16(0)
		if enbv&(1<<c) != 0 {
			q = 0xffff
		}
		b = binary.BigEndian.AppendUint16(b, q)
	}
	b = append(b, make([]byte, 60-len(b))...)
	p := frame{fr: f[0].fr, data: b}
	p.fr.Time = f[0].fr.Time.Add(-time.Microsecond)
	return append([]frame{p}, f...)
}

// TestFabricMutations changes clean rxe captures so that each fabric rule
// fires exactly once, and checks near misses that must stay clean.
func TestFabricMutations(t *testing.T) {
	tests := []struct {
		name    string
		capture string
		rule    lint.RuleID // "" for a near miss: no finding at all
		mutate  func(t *testing.T, f []frame) []frame
	}{
		// write_bw_rdma_cm has two RC QPs between 10.77.0.2 and 10.77.0.3
		// (0x1d from port 53583, 0x1e from 52366, both ways): give the
		// second the first one's port.
		{"shared-tuple", "write_bw_rdma_cm.pcap", lint.RuleSharedTuple, func(t *testing.T, f []frame) []frame {
			setSrcPort(t, f, 52366, 53583)
			return f
		}},
		// The CM's UD QP 1 on port 55410 is not an RC QP: sharing its port
		// is no finding.
		{"shared-tuple-ud", "write_bw_rdma_cm.pcap", "", func(t *testing.T, f []frame) []frame {
			setSrcPort(t, f, 52366, 55410)
			return f
		}},
		// A CNP to the requester, after frame 27's ACK, with DSCP 0: the
		// DSCP of the requester's data.
		{"cnp-dscp", "write_bw_s8.pcap", lint.RuleCNPDSCP, func(t *testing.T, f []frame) []frame {
			return cnpAfter(t, f, findFrame(t, f, 27), 0x00)
		}},
		{"cnp-dscp-48", "write_bw_s8.pcap", "", func(t *testing.T, f []frame) []frame {
			return cnpAfter(t, f, findFrame(t, f, 27), 48<<2)
		}},
		// Data on PCP 3 while the only PFC frame enables priority 4.
		{"pfc-priority", "write_bw_s8.pcap", lint.RulePFCPriority, func(t *testing.T, f []frame) []frame {
			tagAll(f, 3, 100)
			return pfcFirst(f, 1<<4)
		}},
		{"pfc-priority-3", "write_bw_s8.pcap", "", func(t *testing.T, f []frame) []frame {
			tagAll(f, 3, 100)
			return pfcFirst(f, 1<<3)
		}},
		{"pfc-priority-no-pfc", "write_bw_s8.pcap", "", func(t *testing.T, f []frame) []frame {
			tagAll(f, 3, 100) // no PFC frame: nothing tells which priorities are lossless
			return f
		}},
	}
	covered := map[lint.RuleID]bool{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			frames := tc.mutate(t, loadCapture(t, tc.capture))
			fs := lintFrames(t, frames)
			for _, f := range fs {
				t.Logf("frame %d: %s: %s", f.Frame, f.Rule, f.Message)
			}
			if tc.rule == "" {
				assert.Empty(t, fs)
				return
			}
			require.Len(t, fs, 1, "rule %s must fire exactly once", tc.rule)
			assert.Equal(t, tc.rule, fs[0].Rule)
			assert.Equal(t, lint.SeverityWarning, fs[0].Severity)
			covered[tc.rule] = true
		})
	}
	for id := range fabricRules {
		assert.True(t, covered[id], "rule %s has no mutation test", id)
	}
}
