package lint_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/lint"
	"github.com/goroce/goroce/rocev2"
)

// frame is one record of a capture held in memory.
type frame struct {
	fr   capture.Frame
	data []byte
}

// loadCapture reads a capture into memory (copies of every record).
func loadCapture(t *testing.T, name string) []frame {
	t.Helper()
	rd, err := capture.Open(filepath.Join(root, "testdata/pcaps", name))
	require.NoError(t, err)
	defer rd.Close()
	var out []frame
	for {
		var fr capture.Frame
		err := rd.Next(&fr)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, frame{fr: fr, data: bytes.Clone(fr.Data)})
	}
}

// lintFrames lints frames written as a capture file.
func lintFrames(t *testing.T, frames []frame) []lint.Finding {
	t.Helper()
	rd, err := capture.NewReader(bytes.NewReader(writeCapture(t, frames)))
	require.NoError(t, err)
	fs, _, err := lint.Lint(rd)
	require.NoError(t, err)
	return fs
}

// writeCapture writes frames as a pcap (Ethernet, nanosecond timestamps).
func writeCapture(t *testing.T, frames []frame) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := pcapgo.NewWriterNanos(&buf)
	require.NoError(t, w.WriteFileHeader(65536, layers.LinkTypeEthernet))
	for _, f := range frames {
		ci := gopacket.CaptureInfo{Timestamp: f.fr.Time, CaptureLength: len(f.data), Length: len(f.data)}
		require.NoError(t, w.WritePacket(ci, f.data))
	}
	return buf.Bytes()
}

// roceView locates the IPv4, UDP and transport parts of an Ethernet frame
// without VLAN tags, as the golden captures are.
type roceView struct {
	ip, udp, t []byte
}

func view(t *testing.T, b []byte) roceView {
	t.Helper()
	require.Equal(t, uint16(0x0800), binary.BigEndian.Uint16(b[12:]), "IPv4 frame")
	ihl := int(b[14]&0x0f) * 4
	ip := b[14 : 14+ihl]
	udp := b[14+ihl : 14+ihl+8]
	ulen := int(binary.BigEndian.Uint16(udp[4:]))
	return roceView{ip: ip, udp: udp, t: b[14+ihl+8 : 14+ihl+ulen]}
}

// reseal recomputes the IPv4 checksum and the ICRC of a frame.
func reseal(t *testing.T, b []byte) {
	t.Helper()
	v := view(t, b)
	v.ip[10], v.ip[11] = 0, 0
	var sum uint32
	for i := 0; i < len(v.ip); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(v.ip[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(v.ip[10:], ^uint16(sum))
	n := len(v.t) - bth.ICRCSize
	rocev2.PutICRC(v.t[n:], rocev2.ComputeICRC(v.ip, v.udp, v.t[:n]))
}

// resize inserts (delta > 0, zero bytes) or removes bytes at offset off of
// the transport packet and fixes the IPv4 and UDP lengths.
func resize(t *testing.T, b []byte, off, delta int) []byte {
	t.Helper()
	v := view(t, b)
	start := len(b) - len(v.t) + off
	if len(b) > 14+int(binary.BigEndian.Uint16(v.ip[2:])) {
		t.Fatal("frames with Ethernet padding are not handled")
	}
	var out []byte
	if delta > 0 {
		out = append(append(append([]byte{}, b[:start]...), make([]byte, delta)...), b[start:]...)
	} else {
		out = append(append([]byte{}, b[:start]...), b[start-delta:]...)
	}
	ip := out[14 : 14+len(v.ip)] // the headers are before off: still in place
	udp := out[14+len(v.ip) : 14+len(v.ip)+8]
	binary.BigEndian.PutUint16(ip[2:], binary.BigEndian.Uint16(ip[2:])+uint16(delta))
	binary.BigEndian.PutUint16(udp[4:], binary.BigEndian.Uint16(udp[4:])+uint16(delta))
	return out
}

// findFrame returns the index of the frame with the given number.
func findFrame(t *testing.T, frames []frame, number int) int {
	t.Helper()
	for i := range frames {
		if frames[i].fr.Number == number {
			return i
		}
	}
	t.Fatalf("no frame %d", number)
	return -1
}

// framesByPSN returns the index of the RoCE frame with the given opcode and
// PSN.
func framesByPSN(t *testing.T, frames []frame, op bth.Opcode, psn bth.PSN) int {
	t.Helper()
	for i := range frames {
		b := frames[i].data
		if len(b) < 14+20+8+12 || binary.BigEndian.Uint16(b[12:]) != 0x0800 || b[23] != 17 {
			continue
		}
		v := view(t, b)
		if binary.BigEndian.Uint16(v.udp[2:]) != 4791 || len(v.t) < bth.Size {
			continue
		}
		h := bth.Header(v.t[:bth.Size])
		if h.Opcode() == op && h.PSN() == psn {
			return i
		}
	}
	t.Fatalf("no %v at PSN %d", op, psn)
	return -1
}

func bthOf(t *testing.T, b []byte) bth.Header {
	t.Helper()
	h, err := bth.Parse(view(t, b).t)
	require.NoError(t, err)
	return h
}

// TestMutations breaks each rule in a copy of a real rxe capture, one
// packet changed (and its ICRC resealed, except for the ICRC rule), and
// checks that the linter reports exactly that rule.
func TestMutations(t *testing.T) {
	tests := []struct {
		name    string
		capture string
		rule    lint.RuleID
		mutate  func(t *testing.T, frames []frame) // changes frames in place
		noSeal  bool
	}{
		{"tver", "write_bw_s8.pcap", lint.RuleTVer, func(t *testing.T, f []frame) {
			bthOf(t, f[findFrame(t, f, 22)].data).SetTVer(1)
		}, false},
		{"resv7", "write_bw_s8.pcap", lint.RuleReserved, func(t *testing.T, f []frame) {
			view(t, f[findFrame(t, f, 22)].data).t[8] |= 0x01
		}, false},
		{"pkey", "write_bw_s8.pcap", lint.RulePKey, func(t *testing.T, f []frame) {
			bthOf(t, f[findFrame(t, f, 22)].data).SetPKey(0x1234)
		}, false},
		{"udp-dport", "write_bw_s8.pcap", lint.RuleUDPPort, func(t *testing.T, f []frame) {
			u := view(t, f[findFrame(t, f, 22)].data).udp
			s, d := binary.BigEndian.Uint16(u[0:]), binary.BigEndian.Uint16(u[2:])
			binary.BigEndian.PutUint16(u[0:], d)
			binary.BigEndian.PutUint16(u[2:], s)
		}, false},
		{"icrc", "write_bw_s8.pcap", lint.RuleICRC, func(t *testing.T, f []frame) {
			v := view(t, f[findFrame(t, f, 22)].data)
			v.t[len(v.t)-5] ^= 0x40 // the last payload byte
		}, true},
		{"opcode-reserved", "write_bw_s8.pcap", lint.RuleOpcode, func(t *testing.T, f []frame) {
			bthOf(t, f[findFrame(t, f, 26)].data).SetOpcode(0x15)
		}, false},
		{"pad", "send_bw_s8.pcap", lint.RulePad, func(t *testing.T, f []frame) {
			i := findFrame(t, f, 23)
			f[i].data = resize(t, f[i].data, bth.Size, 1) // a 9-byte payload, pad count 0
		}, false},
		{"opcode-sequence", "send_bw_s4096.pcap", lint.RuleOpSeq, func(t *testing.T, f []frame) {
			bthOf(t, f[findFrame(t, f, 26)].data).SetOpcode(bth.RCSendMiddle) // a second message without FIRST
		}, false},
		{"mtu", "write_bw_s65536.pcap", lint.RuleMTU, func(t *testing.T, f []frame) {
			// Message 3 (PSN base+128..191) was captured whole: a MIDDLE
			// takes 4 bytes from its LAST, so the RETH length still adds up.
			const base = 3955192
			i := framesByPSN(t, f, bth.RCRDMAWriteMiddle, base+130)
			f[i].data = resize(t, f[i].data, bth.Size, 4)
			j := framesByPSN(t, f, bth.RCRDMAWriteLast, base+191)
			f[j].data = resize(t, f[j].data, bth.Size, -4)
		}, false},
		{"reth-length", "write_bw_s65536.pcap", lint.RuleRETHLen, func(t *testing.T, f []frame) {
			const base = 3955192
			v := view(t, f[framesByPSN(t, f, bth.RCRDMAWriteFirst, base+128)].data)
			binary.BigEndian.PutUint32(v.t[bth.Size+12:], 65536+1024)
		}, false},
		{"ackreq", "send_bw_s4096.pcap", lint.RuleAckReq, func(t *testing.T, f []frame) {
			bthOf(t, f[findFrame(t, f, 25)].data).SetAckReq(false)
		}, false},
		{"ack-window", "write_bw_s8.pcap", lint.RuleAckWindow, func(t *testing.T, f []frame) {
			h := bthOf(t, f[findFrame(t, f, 27)].data)
			h.SetPSN(h.PSN().Add(1000))
		}, false},
		{"msn", "write_bw_s8.pcap", lint.RuleMSN, func(t *testing.T, f []frame) {
			v := view(t, f[findFrame(t, f, 27)].data)
			v.t[bth.Size+3] = 1 // MSN 3 → 1, after MSN 2
		}, false},
		{"syndrome", "write_bw_s8.pcap", lint.RuleSyndrome, func(t *testing.T, f []frame) {
			view(t, f[findFrame(t, f, 27)].data).t[bth.Size] = 0x40
		}, false},
		{"read-response-count", "read_bw_s8.pcap", lint.RuleReadRespCount, func(t *testing.T, f []frame) {
			v := view(t, f[findFrame(t, f, 21)].data)
			binary.BigEndian.PutUint32(v.t[bth.Size+12:], 16) // READ 16 bytes, answered with 8
		}, false},
	}
	covered := map[lint.RuleID]bool{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			frames := loadCapture(t, tc.capture)
			before := make([][]byte, len(frames))
			for i := range frames {
				before[i] = bytes.Clone(frames[i].data)
			}
			tc.mutate(t, frames)
			changed := 0
			for i := range frames {
				if !bytes.Equal(before[i], frames[i].data) {
					changed++
					if !tc.noSeal {
						reseal(t, frames[i].data)
					}
				}
			}
			require.NotZero(t, changed, "the mutation changed nothing")
			fs := lintFrames(t, frames)
			require.NotEmpty(t, fs, "rule %s did not fire", tc.rule)
			for _, f := range fs {
				t.Logf("frame %d: %s: %s", f.Frame, f.Rule, f.Message)
				assert.Equal(t, tc.rule, f.Rule, "frame %d: %s", f.Frame, f.Message)
			}
			covered[tc.rule] = true
		})
	}
	for _, r := range lint.Rules {
		assert.True(t, covered[r.ID] || fabricRules[r.ID], "rule %s has no mutation test", r.ID)
	}
}
