package cm_test

import (
	"encoding/hex"
	"io"
	"net/netip"
	"os"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cm"
	"github.com/goroce/goroce/ext"
)

// capMAD is one CM MAD from a capture: UD SEND ONLY to QP1.
type capMAD struct {
	frame    int
	src, dst netip.Addr
	mad      []byte
}

// captureMADs returns every MAD sent to QP1 in a capture of real rxe
// traffic (testdata/pcaps, see its README).
func captureMADs(t testing.TB, name string) []capMAD {
	t.Helper()
	f, err := os.Open("../testdata/pcaps/" + name)
	require.NoError(t, err)
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	require.NoError(t, err)
	var out []capMAD
	for n := 1; ; n++ {
		data, _, err := r.ReadPacketData()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.NoCopy)
		ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		udp, _ := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if ip == nil || udp == nil || udp.DstPort != 4791 {
			continue
		}
		pl := udp.Payload
		h, err := bth.Parse(pl)
		require.NoError(t, err)
		if h.Opcode() != bth.UDSendOnly || h.DestQP() != 1 {
			continue
		}
		d, err := ext.ParseDETH(pl[bth.Size:])
		require.NoError(t, err)
		assert.Equal(t, uint32(cm.QP1QKey), d.QKey(), "frame %d", n)
		assert.EqualValues(t, 1, d.SrcQP(), "frame %d", n)
		off := bth.Size + ext.DETHSize
		require.Len(t, pl, off+cm.MADSize+bth.ICRCSize, "frame %d", n)
		src, _ := netip.AddrFromSlice(ip.SrcIP)
		dst, _ := netip.AddrFromSlice(ip.DstIP)
		out = append(out, capMAD{frame: n, src: src, dst: dst, mad: pl[off : off+cm.MADSize]})
	}
}

// TestCaptureRoundTrip parses every CM MAD rdma_cm sent in the rxe
// captures and checks Encode(Fields(b)) == b byte for byte.
func TestCaptureRoundTrip(t *testing.T) {
	for _, name := range []string{"rping.pcap", "write_bw_rdma_cm.pcap"} {
		mads := captureMADs(t, name)
		require.NotEmpty(t, mads, name)
		seen := map[cm.AttrID]int{}
		for _, c := range mads {
			m, err := cm.Parse(c.mad)
			require.NoError(t, err)
			assert.EqualValues(t, cm.MethodSend, m.Method())
			seen[m.AttrID()]++
			buf := make([]byte, cm.MADSize)
			switch m.AttrID() {
			case cm.AttrREQ:
				r, err := cm.ParseREQ(c.mad)
				require.NoError(t, err)
				f := r.Fields()
				cm.REQ(buf).Encode(&f)
				// rdma_cm's REQ: the IP-CM service and header.
				assert.True(t, f.ServiceID.IsIP())
				assert.Equal(t, cm.PortSpaceTCP, f.ServiceID.PortSpace())
				ip, err := cm.ParseIPHeader(f.PrivateData)
				require.NoError(t, err)
				assert.Equal(t, c.src, ip.SrcAddr(), "frame %d", c.frame)
				assert.Equal(t, c.dst, ip.DstAddr(), "frame %d", c.frame)
				assert.Equal(t, c.src, f.PrimaryPath.LocalGID.Addr())
				assert.Equal(t, c.dst, f.PrimaryPath.RemoteGID.Addr())
				assert.EqualValues(t, cm.PermissiveLID, f.PrimaryPath.LocalLID)
				assert.Equal(t, cm.MTU1024, f.PathMTU)
				assert.EqualValues(t, cm.DefaultCMResponseTimeout, f.LocalCMResponseTimeout)
				assert.EqualValues(t, cm.DefaultMaxCMRetries, f.MaxCMRetries)
				assert.Equal(t, cm.ACKTimeout(cm.DefaultTargetACKDelay, cm.DefaultPacketLifeTime),
					f.PrimaryPath.LocalACKTimeout)
			case cm.AttrREP:
				r, err := cm.ParseREP(c.mad)
				require.NoError(t, err)
				f := r.Fields()
				cm.REP(buf).Encode(&f)
				assert.EqualValues(t, cm.DefaultTargetACKDelay, f.TargetACKDelay)
			case cm.AttrRTU:
				r, err := cm.ParseRTU(c.mad)
				require.NoError(t, err)
				f := r.Fields()
				cm.RTU(buf).Encode(&f)
			case cm.AttrDREQ:
				r, err := cm.ParseDREQ(c.mad)
				require.NoError(t, err)
				f := r.Fields()
				cm.DREQ(buf).Encode(&f)
			case cm.AttrDREP:
				r, err := cm.ParseDREP(c.mad)
				require.NoError(t, err)
				f := r.Fields()
				cm.DREP(buf).Encode(&f)
			default:
				t.Fatalf("%s frame %d: unexpected %v", name, c.frame, m.AttrID())
			}
			assert.Equal(t, hex.EncodeToString(c.mad), hex.EncodeToString(buf), "%s frame %d %v", name, c.frame, m.AttrID())
		}
		t.Logf("%s: %v", name, seen)
	}
}
