package pcapng_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/pcapng"
	"github.com/goroce/goroce/internal/testutil/capgolden"
)

// root is the repository root, relative to this package.
const root = "../.."

// fieldsOf renders a capture held in memory with the golden columns of
// the tshark emulation (testdata/tshark/FIELDS).
func fieldsOf(t *testing.T, data []byte) (string, error) {
	t.Helper()
	return capgolden.Render(t, data, capgolden.Fields(t, filepath.Join(root, "testdata/tshark/FIELDS")))
}

// TestPcapngWriterRoundTrip writes a golden capture's frames as pcapng
// and reads them back: same bytes, lengths, timestamps (to the
// nanosecond) and link type, and the same decode.
func TestPcapngWriterRoundTrip(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(root, "testdata/pcaps/rc_imm.pcap"))
	require.NoError(t, err)
	rd, err := capture.NewReader(bytes.NewReader(src))
	require.NoError(t, err)
	var (
		out    bytes.Buffer
		frames []capture.Frame
		fr     capture.Frame
	)
	pw, err := pcapng.NewWriter(&out, pcapng.Section{Hardware: "amd64", OS: "linux", Application: "goroce cap"})
	require.NoError(t, err)
	id, err := pw.AddInterface(pcapng.Interface{Name: "veth0", LinkType: capture.LinkEthernet, SnapLen: 262144, Filter: "udp port 4791", OS: "linux"})
	require.NoError(t, err)
	for {
		err := rd.Next(&fr)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		c := fr
		c.Data = bytes.Clone(fr.Data)
		c.Time = c.Time.Add(123 * time.Nanosecond) // finer than the source's µs
		if len(frames) == 3 {
			c.OrigLen = len(c.Data) + 100 // as cut by a snap length
		}
		frames = append(frames, c)
		require.NoError(t, pw.WriteFrame(id, &c))
	}
	require.NotEmpty(t, frames)
	end := frames[len(frames)-1].Time
	require.NoError(t, pw.WriteStats(id, pcapng.Stats{Received: uint64(len(frames) + 2), Dropped: 2, End: end}))

	back, err := capture.NewReader(bytes.NewReader(out.Bytes()))
	require.NoError(t, err)
	for i, want := range frames {
		require.NoError(t, back.Next(&fr), "frame %d", i+1)
		assert.Equal(t, i+1, fr.Number)
		assert.Equal(t, want.Data, fr.Data, "frame %d", i+1)
		assert.Equal(t, want.OrigLen, fr.OrigLen, "frame %d", i+1)
		assert.True(t, want.Time.Equal(fr.Time), "frame %d: %v != %v", i+1, fr.Time, want.Time)
		assert.Equal(t, capture.LinkEthernet, fr.LinkType)
	}
	assert.ErrorIs(t, back.Next(&fr), io.EOF)

	// The section, the interface block and the statistics, as gopacket
	// (an independent reader) reads them.
	ng, err := pcapgo.NewNgReader(bytes.NewReader(out.Bytes()), pcapgo.DefaultNgReaderOptions)
	require.NoError(t, err)
	for {
		if _, _, err := ng.ReadPacketData(); err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
	}
	assert.Equal(t, "goroce cap", ng.SectionInfo().Application)
	assert.Equal(t, "amd64", ng.SectionInfo().Hardware)
	iface, err := ng.Interface(0)
	require.NoError(t, err)
	assert.Equal(t, "veth0", iface.Name)
	assert.Equal(t, "udp port 4791", iface.Filter)
	assert.Equal(t, "linux", iface.OS)
	assert.Equal(t, uint32(262144), iface.SnapLength)
	assert.Equal(t, uint64(2), iface.Statistics.PacketsDropped)
	assert.Equal(t, uint64(len(frames)+2), iface.Statistics.PacketsReceived)
	assert.True(t, frames[0].Time.Equal(iface.Statistics.StartTime), "the start defaults to the first frame")
	assert.True(t, end.Equal(iface.Statistics.EndTime))

	// The same golden fields as the source file.
	want, err := fieldsOf(t, src)
	require.NoError(t, err)
	got, err := fieldsOf(t, out.Bytes())
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// TestPcapngWriterErrors refuses a frame of another link type and
// packets or statistics of an interface that was not added.
func TestPcapngWriterErrors(t *testing.T) {
	pw, err := pcapng.NewWriter(io.Discard, pcapng.Section{})
	require.NoError(t, err)
	assert.ErrorIs(t, pw.WritePacket(pcapng.Packet{Data: []byte{1}}), pcapng.ErrUnknownInterface)
	id, err := pw.AddInterface(pcapng.Interface{Name: "x", LinkType: capture.LinkEthernet})
	require.NoError(t, err)
	err = pw.WriteFrame(id, &capture.Frame{Number: 1, LinkType: capture.LinkRaw, Data: []byte{0x45}})
	assert.ErrorIs(t, err, pcapng.ErrLinkType)
	assert.ErrorIs(t, pw.WritePacket(pcapng.Packet{Interface: 1}), pcapng.ErrUnknownInterface)
	assert.ErrorIs(t, pw.WriteStats(-1, pcapng.Stats{}), pcapng.ErrUnknownInterface)
	_, err = pw.AddInterface(pcapng.Interface{SnapLen: -1})
	assert.Error(t, err)

	// A filter longer than one option holds is refused: its 16-bit length
	// was written modulo 65536 while all its bytes followed, and the file
	// read back as cut short. The longest that fits reads back whole.
	var buf bytes.Buffer
	pw, err = pcapng.NewWriter(&buf, pcapng.Section{})
	require.NoError(t, err)
	_, err = pw.AddInterface(pcapng.Interface{Name: "long", LinkType: capture.LinkEthernet, Filter: strings.Repeat("a", 70000)})
	assert.ErrorContains(t, err, "does not fit")
	id, err = pw.AddInterface(pcapng.Interface{Name: "max", LinkType: capture.LinkEthernet, Filter: strings.Repeat("b", 65534)})
	require.NoError(t, err)
	require.NoError(t, pw.WritePacket(pcapng.Packet{Interface: id, Data: []byte{1, 2, 3}}))
	r, err := capture.NewReader(&buf)
	require.NoError(t, err)
	var f capture.Frame
	require.NoError(t, r.Next(&f))
	assert.Equal(t, []byte{1, 2, 3}, f.Data)
}

// TestPcapngGolden pins the bytes of a small file: the section and
// interface blocks and the packet blocks (with epb_flags) that package
// roce wrote with its own writer before this package took over, so a
// device's capture files stay byte for byte the same. Layout:
//
//	SHB  0a0d0d0a len 44: magic 1a2b3c4d, v1.0, length -1, shb_userappl "goroce"
//	IDB  00000001 len 56: Ethernet, snaplen 65535, if_name, if_tsresol 9
//	EPB  00000006 len 52: iface 0, ts, caplen 5, len 5, data+pad, epb_flags outbound
//	EPB  00000006 len 48: iface 0, ts+1, caplen 4, len 14, data, epb_flags inbound
func TestPcapngGolden(t *testing.T) {
	const want = "0a0d0d0a2c0000004d3c2b1a01000000ffffffffffffffff04000600676f726f63650000000000002c000000" +
		"010000003800000001000000ffff000002001400676f726f63652031302e302e302e313a3437393109000100090000000000000038000000" +
		"060000003400000000000000fe9c971715cd853d0500000005000000010203040500000002000400020000000000000034000000" +
		"060000003000000000000000fe9c971716cd853d040000000e0000000908070602000400010000000000000030000000"
	var out bytes.Buffer
	pw, err := pcapng.NewWriter(&out, pcapng.Section{Application: "goroce"})
	require.NoError(t, err)
	id, err := pw.AddInterface(pcapng.Interface{Name: "goroce 10.0.0.1:4791", LinkType: capture.LinkEthernet, SnapLen: 65535})
	require.NoError(t, err)
	ts := time.Unix(0, 1700000000123456789)
	require.NoError(t, pw.WritePacket(pcapng.Packet{Interface: id, Time: ts, Data: []byte{1, 2, 3, 4, 5}, Dir: pcapng.DirOutbound}))
	var blk []byte
	blk, err = pw.AppendPacket(blk, pcapng.Packet{Interface: id, Time: ts.Add(1), Data: []byte{9, 8, 7, 6}, OrigLen: 14, Dir: pcapng.DirInbound})
	require.NoError(t, err)
	assert.Len(t, blk, pcapng.PacketLen(4, pcapng.DirInbound))
	out.Write(blk)
	assert.Equal(t, want, hex.EncodeToString(out.Bytes()))

	// Without a direction a packet block has no options.
	blk, err = pw.AppendPacket(blk[:0], pcapng.Packet{Interface: id, Time: ts, Data: []byte{1, 2, 3}})
	require.NoError(t, err)
	require.Len(t, blk, pcapng.PacketLen(3, pcapng.DirUnknown))
	assert.Equal(t, uint32(len(blk)), binary.LittleEndian.Uint32(blk[4:]))
	assert.Equal(t, uint32(len(blk)), binary.LittleEndian.Uint32(blk[len(blk)-4:]))
	assert.Equal(t, 28+3+1+4, len(blk))
}

// TestPcapngWriterAllocs pins WritePacket at zero allocations per packet
// once its block buffer has grown, through a bufio.Writer as a file
// would be written.
func TestPcapngWriterAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	bw := bufio.NewWriterSize(io.Discard, 1<<16)
	pw, err := pcapng.NewWriter(bw, pcapng.Section{Application: "test"})
	require.NoError(t, err)
	id, err := pw.AddInterface(pcapng.Interface{Name: "x", LinkType: capture.LinkEthernet})
	require.NoError(t, err)
	data := make([]byte, 4150)
	now := time.Now()
	require.NoError(t, pw.WritePacket(pcapng.Packet{Interface: id, Time: now, Data: data}))
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		p := pcapng.Packet{Interface: id, Time: now, Data: data[:64+i%4000], Dir: pcapng.Direction(1 + i%2)}
		if err := pw.WritePacket(p); err != nil {
			t.Fatal(err)
		}
		i++
	})
	assert.Zero(t, allocs)
	var blk []byte
	allocs = testing.AllocsPerRun(1000, func() {
		blk, _ = pw.AppendPacket(bw.AvailableBuffer(), pcapng.Packet{Interface: id, Time: now, Data: data[:100]})
		_, _ = bw.Write(blk)
	})
	assert.Zero(t, allocs)
}

// BenchmarkWritePacket measures writing a 4 KiB RoCEv2 frame through a
// bufio.Writer. ns/op is per packet.
func BenchmarkWritePacket(b *testing.B) {
	bw := bufio.NewWriterSize(io.Discard, 256<<10)
	pw, err := pcapng.NewWriter(bw, pcapng.Section{})
	require.NoError(b, err)
	id, err := pw.AddInterface(pcapng.Interface{LinkType: capture.LinkEthernet})
	require.NoError(b, err)
	p := pcapng.Packet{Interface: id, Time: time.Now(), Data: make([]byte, 4150), Dir: pcapng.DirOutbound}
	b.SetBytes(int64(len(p.Data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := pw.WritePacket(p); err != nil {
			b.Fatal(err)
		}
	}
}
