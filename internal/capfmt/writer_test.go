package capfmt_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/capfmt"
)

// fieldsOf renders a capture held in memory with the golden columns.
func fieldsOf(t *testing.T, data []byte) (string, error) {
	t.Helper()
	rd, err := capfmt.NewReader(bytes.NewReader(data))
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	fw := capfmt.NewFieldsWriter(&out, goldenFields(t), capfmt.DefaultFieldsOptions())
	dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
	var (
		fr capfmt.Frame
		p  capfmt.Packet
	)
	for {
		err := rd.Next(&fr)
		if errors.Is(err, io.EOF) {
			return out.String(), nil
		}
		if err != nil {
			return out.String(), err
		}
		dec.Decode(&fr, &p)
		require.NoError(t, fw.Write(&p))
	}
}

// TestPcapngWriterRoundTrip writes a golden capture's frames as pcapng
// and reads them back: same bytes, lengths, timestamps (to the
// nanosecond) and link type, and the same decode.
func TestPcapngWriterRoundTrip(t *testing.T) {
	src, err := os.ReadFile("../../testdata/pcaps/rc_imm.pcap")
	require.NoError(t, err)
	rd, err := capfmt.NewReader(bytes.NewReader(src))
	require.NoError(t, err)
	var (
		out    bytes.Buffer
		frames []capfmt.Frame
		fr     capfmt.Frame
	)
	pw, err := capfmt.NewPcapngWriter(&out, capfmt.Interface{Name: "veth0", LinkType: capfmt.LinkEthernet, SnapLen: 262144, Filter: "udp port 4791"})
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
		require.NoError(t, pw.Write(&c))
	}
	require.NotEmpty(t, frames)
	end := frames[len(frames)-1].Time
	require.NoError(t, pw.WriteStats(uint64(len(frames)+2), 2, time.Time{}, end))
	require.NoError(t, pw.Flush())

	back, err := capfmt.NewReader(bytes.NewReader(out.Bytes()))
	require.NoError(t, err)
	for i, want := range frames {
		require.NoError(t, back.Next(&fr), "frame %d", i+1)
		assert.Equal(t, i+1, fr.Number)
		assert.Equal(t, want.Data, fr.Data, "frame %d", i+1)
		assert.Equal(t, want.OrigLen, fr.OrigLen, "frame %d", i+1)
		assert.True(t, want.Time.Equal(fr.Time), "frame %d: %v != %v", i+1, fr.Time, want.Time)
		assert.Equal(t, capfmt.LinkEthernet, fr.LinkType)
	}
	assert.ErrorIs(t, back.Next(&fr), io.EOF)

	// The interface block and the statistics, as gopacket reads them.
	ng, err := pcapgo.NewNgReader(bytes.NewReader(out.Bytes()), pcapgo.DefaultNgReaderOptions)
	require.NoError(t, err)
	for {
		if _, _, err := ng.ReadPacketData(); err != nil {
			break
		}
	}
	iface, err := ng.Interface(0)
	require.NoError(t, err)
	assert.Equal(t, "veth0", iface.Name)
	assert.Equal(t, "udp port 4791", iface.Filter)
	assert.Equal(t, uint32(262144), iface.SnapLength)
	assert.Equal(t, uint64(2), iface.Statistics.PacketsDropped)
	assert.Equal(t, uint64(len(frames)+2), iface.Statistics.PacketsReceived)

	// The same golden fields as the source file.
	want, err := fieldsOf(t, src)
	require.NoError(t, err)
	got, err := fieldsOf(t, out.Bytes())
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// TestPcapngWriterLinkType refuses a frame of another link type.
func TestPcapngWriterLinkType(t *testing.T) {
	pw, err := capfmt.NewPcapngWriter(io.Discard, capfmt.Interface{Name: "x", LinkType: capfmt.LinkEthernet})
	require.NoError(t, err)
	err = pw.Write(&capfmt.Frame{Number: 1, LinkType: capfmt.LinkRaw, Data: []byte{0x45}})
	assert.ErrorIs(t, err, capfmt.ErrMixedLinkType)
}
