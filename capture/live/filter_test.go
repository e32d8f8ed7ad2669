package live_test

import (
	"encoding/binary"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/bpf"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/live"
	"github.com/goroce/goroce/rocev2"
)

const snap = 65535

// eth builds an Ethernet frame: MAC addresses, the tags (TPID, TCI pairs),
// the EtherType and the payload.
func eth(etherType uint16, payload []byte, tags ...uint16) []byte {
	b := []byte{0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1}
	for _, t := range tags {
		b = binary.BigEndian.AppendUint16(b, t)
	}
	b = binary.BigEndian.AppendUint16(b, etherType)
	return append(b, payload...)
}

// udp is a UDP header and an 16-byte payload (a BTH and an ICRC's worth).
func udp(sport, dport uint16) []byte {
	b := binary.BigEndian.AppendUint16(nil, sport)
	b = binary.BigEndian.AppendUint16(b, dport)
	b = binary.BigEndian.AppendUint16(b, 8+16)
	b = append(b, 0, 0)
	return append(b, make([]byte, 16)...)
}

// ipv4 is an IPv4 header with optLen bytes of options (a multiple of 4)
// and the given protocol and fragment field, then l4.
func ipv4(proto uint8, frag uint16, optLen int, l4 []byte) []byte {
	hl := 20 + optLen
	b := make([]byte, hl, hl+len(l4))
	b[0] = 0x40 | uint8(hl/4)
	binary.BigEndian.PutUint16(b[2:], uint16(hl+len(l4)))
	binary.BigEndian.PutUint16(b[6:], frag)
	b[8], b[9] = 64, proto
	copy(b[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	for i := 20; i < hl; i++ {
		b[i] = 1 // NOP options
	}
	return append(b, l4...)
}

// ipv6 is an IPv6 header with the given next header, then l4.
func ipv6(next uint8, l4 []byte) []byte {
	b := make([]byte, 40, 40+len(l4))
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], uint16(len(l4)))
	b[6], b[7] = next, 64
	b[8], b[39] = 0xfd, 1
	b[24], b[39] = 0xfd, 2
	return append(b, l4...)
}

// optionsLikePort is an IPv4 datagram between ports 1 and 2 whose 4 bytes
// of options read 4791, 4791: a filter that ignored the IHL would pass it.
func optionsLikePort() []byte {
	b := ipv4(17, 0, 4, udp(1, 2))
	copy(b[20:], []byte{0x12, 0xb7, 0x12, 0xb7})
	return b
}

// pause is an IEEE 802.3 Annex 31B PAUSE frame (opcode 1, quanta 0xffff)
// to the reserved multicast address.
func pause() []byte {
	b := eth(0x8808, append([]byte{0, 1, 0xff, 0xff}, make([]byte, 42)...))
	copy(b, []byte{0x01, 0x80, 0xc2, 0, 0, 1})
	return b
}

// pfc is an IEEE 802.1Qbb priority flow control frame (opcode 0x0101).
func pfc() []byte {
	return eth(0x8808, append([]byte{1, 1, 0, 0x08, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, make([]byte, 32)...))
}

func runFilter(t *testing.T, vm *bpf.VM, frame []byte) int {
	t.Helper()
	n, err := vm.Run(frame)
	require.NoError(t, err)
	return n
}

func newVM(t *testing.T) *bpf.VM {
	t.Helper()
	vm, err := bpf.NewVM(live.Filter(snap))
	require.NoError(t, err)
	return vm
}

// TestFilter runs the kernel filter in golang.org/x/net/bpf's VM (an
// interpreter written independently of the program) over crafted frames.
func TestFilter(t *testing.T) {
	const port = rocev2.UDPPort
	tests := []struct {
		name   string
		frame  []byte
		accept bool
	}{
		{"IPv4 to 4791", eth(0x0800, ipv4(17, 0x4000, 0, udp(49152, port))), true},
		{"IPv4 from 4791", eth(0x0800, ipv4(17, 0, 0, udp(port, 49152))), true},
		{"IPv4 with options", eth(0x0800, ipv4(17, 0, 8, udp(49152, port))), true},
		{"IPv4 first fragment", eth(0x0800, ipv4(17, 0x2000, 0, udp(49152, port))), true},
		{"IPv4 later fragment", eth(0x0800, ipv4(17, 0x2010, 0, udp(49152, port))), false},
		{"IPv4 other port", eth(0x0800, ipv4(17, 0, 0, udp(49152, 4792))), false},
		{"IPv4 TCP to 4791", eth(0x0800, ipv4(6, 0, 0, udp(49152, port))), false},
		{"IPv4 options look like the port", eth(0x0800, optionsLikePort()), false},
		{"IPv6 to 4791", eth(0x86dd, ipv6(17, udp(49152, port))), true},
		{"IPv6 from 4791", eth(0x86dd, ipv6(17, udp(port, 1))), true},
		{"IPv6 other port", eth(0x86dd, ipv6(17, udp(1, 2))), false},
		{"IPv6 TCP", eth(0x86dd, ipv6(6, udp(49152, port))), false},
		{"IPv6 extension header", eth(0x86dd, ipv6(0, udp(49152, port))), false},
		{"VLAN IPv4 to 4791", eth(0x0800, ipv4(17, 0, 0, udp(49152, port)), 0x8100, 0x0064), true},
		{"VLAN IPv6 to 4791", eth(0x86dd, ipv6(17, udp(49152, port)), 0x8100, 0xe064), true},
		{"VLAN IPv4 other port", eth(0x0800, ipv4(17, 0, 0, udp(49152, 80)), 0x8100, 0x0064), false},
		{"VLAN ARP", eth(0x0806, make([]byte, 28), 0x8100, 0x0064), false},
		{"VLAN MAC Control", eth(0x8808, make([]byte, 46), 0x8100, 0x0064), false},
		{"QinQ", eth(0x0800, ipv4(17, 0, 0, udp(49152, port)), 0x88a8, 1, 0x8100, 2), false},
		{"two 802.1Q tags", eth(0x0800, ipv4(17, 0, 0, udp(49152, port)), 0x8100, 1, 0x8100, 2), false},
		{"PAUSE", pause(), true},
		{"PFC", pfc(), true},
		{"ARP", eth(0x0806, make([]byte, 28)), false},
		{"LLDP", eth(0x88cc, make([]byte, 46)), false},
		{"empty", nil, false},
		{"MAC addresses only", make([]byte, 12), false},
		{"IPv4 cut before the ports", eth(0x0800, ipv4(17, 0, 0, nil)), false},
		{"IPv6 cut before the ports", eth(0x86dd, ipv6(17, nil)), false},
		{"VLAN cut in the tag", eth(0x8100, []byte{0}), false},
	}
	vm := newVM(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := 0
			if tc.accept {
				want = snap
			}
			assert.Equal(t, want, runFilter(t, vm, tc.frame))
		})
	}
}

// TestFilterAgreesWithDecoder checks the filter against package
// capture's decoder (Packet.Decode, which finds RoCEv2 where tshark and
// goroce cap do) on every frame of the golden captures: it passes exactly
// the frames whose outermost UDP datagram is RoCEv2.
func TestFilterAgreesWithDecoder(t *testing.T) {
	files, err := filepath.Glob("../../testdata/pcaps/*.pcap")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	vm := newVM(t)
	var (
		fr   capture.Frame
		p    capture.Packet
		seen [2]int
	)
	for _, name := range files {
		rd, err := capture.Open(name)
		require.NoError(t, err)
		for {
			err := rd.Next(&fr)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			if fr.LinkType != capture.LinkEthernet {
				continue
			}
			_ = p.Decode(&fr)
			want := p.Kind == capture.KindRoCE
			got := runFilter(t, vm, fr.Data) > 0
			assert.Equal(t, want, got, "%s frame %d", filepath.Base(name), fr.Number)
			seen[b2i(got)]++
		}
		require.NoError(t, rd.Close())
	}
	assert.Positive(t, seen[0], "frames dropped")
	assert.Positive(t, seen[1], "frames accepted")
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestFilterSnap checks that the accept verdict is the snap length: the
// kernel keeps that many bytes of the frame.
func TestFilterSnap(t *testing.T) {
	vm, err := bpf.NewVM(live.Filter(96))
	require.NoError(t, err)
	assert.Equal(t, 96, runFilter(t, vm, pause()))
}
