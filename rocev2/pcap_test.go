package rocev2_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/rocev2"
)

// pcapDir holds the golden captures of real rdma_rxe traffic; see its
// README.md for their source and what confirmed them.
const pcapDir = "../testdata/pcaps"

// capture is one golden pcap file, read whole.
type capture struct {
	name   string // file name without .pcap
	frames [][]byte
}

var (
	capturesOnce sync.Once
	captures     []capture
	capturesErr  error
)

// readCaptures reads every testdata/pcaps/*.pcap with pcapgo (no cgo), once
// per test binary. The frames are shared: tests must not modify them.
func readCaptures(tb testing.TB) []capture {
	tb.Helper()
	capturesOnce.Do(func() { captures, capturesErr = loadCaptures(pcapDir) })
	require.NoError(tb, capturesErr)
	require.NotEmpty(tb, captures)
	return captures
}

func loadCaptures(dir string) ([]capture, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.pcap"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var cs []capture
	for _, fn := range files {
		c, err := loadCapture(fn)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

func loadCapture(fn string) (capture, error) {
	c := capture{name: filepath.Base(fn[:len(fn)-len(".pcap")])}
	f, err := os.Open(fn)
	if err != nil {
		return c, err
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		return c, err
	}
	if r.LinkType() != layers.LinkTypeEthernet {
		return c, errors.New(fn + ": not an Ethernet capture")
	}
	for {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			return c, nil
		}
		if err != nil {
			return c, err
		}
		if ci.CaptureLength != ci.Length {
			return c, errors.New(fn + ": truncated by the snap length")
		}
		c.frames = append(c.frames, bytes.Clone(data))
	}
}

// roceFrames returns the RoCEv2 frames of every capture, as gopacket (an
// independent decoder) classifies them: UDP to port 4791.
func roceFrames(tb testing.TB) [][]byte {
	var out [][]byte
	for _, c := range readCaptures(tb) {
		for _, fr := range c.frames {
			if isRoCE(fr) {
				out = append(out, fr)
			}
		}
	}
	return out
}

// isRoCE reports whether gopacket decodes fr as UDP to port 4791.
func isRoCE(fr []byte) bool {
	p := gopacket.NewPacket(fr, layers.LayerTypeEthernet, gopacket.NoCopy)
	u, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
	return ok && u.DstPort == rocev2.UDPPort
}

// goldenCounts is the table of testdata/pcaps/README.md:
// per file, the number of packets, the number of RoCEv2 packets, and the BTH
// opcode counts tshark reported.
var goldenCounts = map[string]struct {
	total, roce int
	opcodes     map[bth.Opcode]int
}{
	"rc_pingpong":      {31, 20, map[bth.Opcode]int{4: 10, 17: 10}},
	"uc_pingpong":      {21, 10, map[bth.Opcode]int{36: 10}},
	"ud_pingpong":      {21, 10, map[bth.Opcode]int{100: 10}},
	"write_bw_s8":      {50, 10, map[bth.Opcode]int{10: 5, 17: 5}},
	"write_bw_s65536":  {330, 291, map[bth.Opcode]int{6: 4, 7: 278, 8: 4, 17: 5}},
	"read_bw_s8":       {49, 10, map[bth.Opcode]int{12: 5, 16: 5}},
	"read_bw_s65536":   {240, 200, map[bth.Opcode]int{12: 5, 13: 4, 14: 187, 15: 4}},
	"send_bw_s8":       {41, 10, map[bth.Opcode]int{4: 5, 17: 5}},
	"send_bw_s4096":    {54, 25, map[bth.Opcode]int{0: 5, 1: 10, 2: 5, 17: 5}},
	"atomic_fadd":      {49, 10, map[bth.Opcode]int{18: 5, 20: 5}},
	"atomic_cmp_swap":  {50, 10, map[bth.Opcode]int{18: 5, 19: 5}},
	"rping":            {41, 41, map[bth.Opcode]int{4: 12, 10: 3, 12: 3, 16: 3, 17: 15, 100: 5}},
	"write_bw_rdma_cm": {84, 84, map[bth.Opcode]int{4: 32, 10: 5, 17: 37, 100: 10}},
	"rc_imm":           {28, 14, map[bth.Opcode]int{0: 1, 1: 1, 3: 1, 5: 1, 6: 1, 7: 1, 9: 1, 11: 2, 17: 5}},
}

// TestGoldenPcaps parses every packet of the rxe captures: each RoCEv2
// packet parses, its ICRC verifies, and rebuilding it from the decoded
// fields gives the captured bytes; each other packet is rejected with
// ErrNotRoCE. The per-file counts must match the captures' README.
func TestGoldenPcaps(t *testing.T) {
	cs := readCaptures(t)
	require.Len(t, cs, len(goldenCounts), "one entry per pcap")
	buf := make([]byte, 9000)
	for _, c := range cs {
		t.Run(c.name, func(t *testing.T) {
			want, ok := goldenCounts[c.name]
			require.True(t, ok, "no expected counts for %s", c.name)
			assert.Len(t, c.frames, want.total, "packets")
			ops := map[bth.Opcode]int{}
			n := 0
			var p rocev2.Packet
			for i, fr := range c.frames {
				err := p.ParseFrame(fr)
				if !isRoCE(fr) {
					require.ErrorIs(t, err, rocev2.ErrNotRoCE, "frame %d", i+1)
					continue
				}
				n++
				require.NoError(t, err, "frame %d", i+1)
				require.NoError(t, p.VerifyICRC(), "frame %d", i+1)
				ops[p.Opcode()]++

				// Outer headers agree with gopacket.
				checkOuterWithGopacket(t, fr, &p)

				// Lengths add up.
				require.Equal(t, len(p.Transport),
					p.Info.HeaderLen+len(p.Payload)+len(p.Pad)+bth.ICRCSize, "frame %d", i+1)

				// Rebuild from the decoded fields.
				e := p.Encap()
				f := p.Fields()
				m, err := e.Build(buf, &f, p.Payload)
				require.NoError(t, err, "frame %d", i+1)
				ipEnd := len(p.Eth) + len(p.IP) + len(p.UDP) + len(p.Transport)
				require.Equal(t, fr[:ipEnd], buf[:m], "frame %d rebuilt", i+1)
			}
			assert.Equal(t, want.roce, n, "RoCEv2 packets")
			assert.Equal(t, want.opcodes, ops, "opcode counts")
		})
	}
}

func checkOuterWithGopacket(t *testing.T, fr []byte, p *rocev2.Packet) {
	t.Helper()
	gp := gopacket.NewPacket(fr, layers.LayerTypeEthernet, gopacket.NoCopy)
	ip, ok := gp.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	require.True(t, ok)
	u := gp.Layer(layers.LayerTypeUDP).(*layers.UDP)
	e := p.Encap()
	assert.Equal(t, ip.SrcIP.String(), e.Src.Addr().String())
	assert.Equal(t, ip.DstIP.String(), e.Dst.Addr().String())
	assert.Equal(t, uint16(u.SrcPort), e.Src.Port())
	assert.Equal(t, uint16(u.DstPort), e.Dst.Port())
	assert.Equal(t, ip.TOS, e.TOS)
	assert.Equal(t, ip.TTL, e.TTL)
	assert.Equal(t, ip.Id, e.ID)
	assert.Equal(t, []byte(u.Payload), []byte(p.Transport))
	assert.Equal(t, []byte(ip.Contents), []byte(p.IP))
	assert.Equal(t, []byte(u.Contents), []byte(p.UDP))
}

// TestGoldenRpingUD checks the rdma_cm MADs of rping.pcap: UD SEND ONLY to
// QP1 (the GSI) with a DETH carrying the well-known GSI Q_Key.
func TestGoldenRpingUD(t *testing.T) {
	var rping capture
	for _, c := range readCaptures(t) {
		if c.name == "rping" {
			rping = c
		}
	}
	require.NotEmpty(t, rping.frames)
	var p rocev2.Packet
	n := 0
	for _, fr := range rping.frames {
		require.NoError(t, p.ParseFrame(fr))
		if p.Opcode() != bth.UDSendOnly {
			continue
		}
		n++
		assert.Equal(t, bth.QPNGSI, p.BTH.DestQP())
		require.NotNil(t, p.DETH)
		assert.Equal(t, uint32(0x80010000), p.DETH.QKey(), "GSI Q_Key (IBA 9.6.1.1)")
		assert.Equal(t, uint32(1), p.DETH.SrcQP())
		assert.Len(t, p.Payload, 256, "a MAD is 256 bytes")
	}
	assert.Equal(t, 5, n)
}

// samplePerOpcode returns the first RoCEv2 frame of each (file, opcode)
// pair of the captures.
func samplePerOpcode(tb testing.TB) [][]byte {
	type key struct {
		file string
		op   bth.Opcode
	}
	seen := map[key]bool{}
	var out [][]byte
	var p rocev2.Packet
	for _, c := range readCaptures(tb) {
		for _, fr := range c.frames {
			if p.ParseFrame(fr) != nil {
				continue
			}
			k := key{c.name, p.Opcode()}
			if !seen[k] {
				seen[k] = true
				out = append(out, fr)
			}
		}
	}
	return out
}

// TestGoldenBitFlips flips every bit of the IP header, UDP header and
// transport of one packet per (file, opcode): a flip of a byte the ICRC
// covers gives a parse error or ErrBadICRC, never a valid packet and never
// a panic; a flip of a masked byte (TOS/ECN, TTL, IP checksum, UDP
// checksum, BTH FECN/BECN/Resv6) leaves the ICRC valid.
func TestGoldenBitFlips(t *testing.T) {
	frames := samplePerOpcode(t)
	require.GreaterOrEqual(t, len(frames), 30)
	var p rocev2.Packet
	for _, fr := range frames {
		require.NoError(t, p.ParseFrame(fr))
		ipOff := len(p.Eth)
		udpOff := ipOff + len(p.IP)
		bthOff := udpOff + len(p.UDP)
		end := bthOff + len(p.Transport)
		masked := map[int]bool{
			ipOff + 1: true, ipOff + 8: true, ipOff + 10: true, ipOff + 11: true,
			udpOff + 6: true, udpOff + 7: true,
			bthOff + 4: true,
		}
		b := bytes.Clone(fr[:end])
		for off := ipOff; off < end; off++ {
			for bit := range 8 {
				b[off] ^= 1 << bit
				err := p.ParseFrame(b)
				if masked[off] {
					require.NoError(t, err, "masked byte %d bit %d", off, bit)
					require.NoError(t, p.VerifyICRC(), "masked byte %d bit %d", off, bit)
				} else if err == nil {
					require.ErrorIs(t, p.VerifyICRC(), rocev2.ErrBadICRC, "covered byte %d bit %d", off, bit)
				}
				b[off] ^= 1 << bit
			}
		}
	}
}
