package flow_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/flow"
	"github.com/goroce/goroce/capture/lint"
)

type rec struct {
	t    time.Time
	data []byte
}

func readRecords(t *testing.T, path string) []rec {
	t.Helper()
	rd, err := capture.Open(path)
	require.NoError(t, err)
	defer rd.Close()
	var out []rec
	for {
		var fr capture.Frame
		err := rd.Next(&fr)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		require.Equal(t, capture.LinkEthernet, fr.LinkType)
		out = append(out, rec{fr.Time, bytes.Clone(fr.Data)})
	}
}

// mixedPcapng rewrites an Ethernet capture as a pcapng with four
// interfaces, dealing the frames round-robin: Ethernet (every other frame
// with an 802.1Q tag), Linux cooked v1, Linux cooked v2 and raw IP; every
// seventh frame is cut to a 90-byte snap length. It returns the file and
// the number of frames cut.
func mixedPcapng(t *testing.T, recs []rec) ([]byte, int) {
	var buf bytes.Buffer
	intf := pcapgo.DefaultNgInterface
	intf.LinkType = layers.LinkTypeEthernet
	w, err := pcapgo.NewNgWriterInterface(&buf, intf, pcapgo.DefaultNgWriterOptions)
	require.NoError(t, err)
	for _, lt := range []layers.LinkType{layers.LinkTypeLinuxSLL, layers.LinkType(276), layers.LinkTypeRaw} {
		i := pcapgo.DefaultNgInterface
		i.LinkType = lt
		_, err := w.AddInterface(i)
		require.NoError(t, err)
	}
	cut := 0
	for k, r := range recs {
		eth := r.data
		et := eth[12:14]
		ip := eth[14:]
		var out []byte
		switch k % 4 {
		case 0:
			out = bytes.Clone(eth)
			if k%8 == 0 {
				out = append(append(append([]byte{}, eth[:12]...), 0x81, 0x00, 0x00, 0x07), eth[12:]...)
			}
		case 1: // SLL: packet type, ARPHRD_ETHER, address length, address, protocol
			h := make([]byte, 16)
			binary.BigEndian.PutUint16(h[2:], 1)
			binary.BigEndian.PutUint16(h[4:], 6)
			copy(h[6:], eth[6:12])
			copy(h[14:], et)
			out = append(h, ip...)
		case 2: // SLL2: protocol, reserved, ifindex, ARPHRD, packet type, address length, address
			h := make([]byte, 20)
			copy(h[0:], et)
			binary.BigEndian.PutUint32(h[4:], 3)
			binary.BigEndian.PutUint16(h[8:], 1)
			h[11] = 6
			copy(h[12:], eth[6:12])
			out = append(h, ip...)
		case 3:
			out = bytes.Clone(ip)
		}
		ci := gopacket.CaptureInfo{Timestamp: r.t, CaptureLength: len(out), Length: len(out), InterfaceIndex: k % 4}
		if k%7 == 3 && len(out) > 90 {
			ci.CaptureLength = 90
			out = out[:90]
			cut++
		}
		require.NoError(t, w.WritePacket(ci, out))
	}
	require.NoError(t, w.Flush())
	return buf.Bytes(), cut
}

// TestMixedLinkTypes checks that a capture spread over several interfaces
// and link types, with VLAN tags and snap-length cuts, gives the same
// flows as the plain Ethernet original, with the differences flagged.
func TestMixedLinkTypes(t *testing.T) {
	path := root + "/testdata/pcaps/write_bw_s65536.pcap"
	recs := readRecords(t, path)
	mixed, cut := mixedPcapng(t, recs)
	require.Positive(t, cut)
	want := analyzeFile(t, "testdata/pcaps/write_bw_s65536.pcap")
	got, err := analyzeBytes(t, mixed, flow.Config{})
	require.NoError(t, err)

	cs := got.Capture
	assert.Equal(t, want.Capture.Frames, cs.Frames)
	assert.Equal(t, want.Capture.RoCE, cs.RoCE, "every RoCEv2 frame found behind every link type")
	assert.Equal(t, want.Capture.NonRoCE, cs.NonRoCE)
	assert.Len(t, cs.LinkTypes, 4)
	assert.Positive(t, cs.VLAN)
	assert.Positive(t, cs.SnapCut)
	assert.Empty(t, cs.Error)
	assert.Contains(t, flow.Notes(cs, 0)[0], "snap length")

	require.Len(t, got.Connections, 1)
	require.Len(t, got.Connections[0].Dirs, 2)
	for i, d := range got.Connections[0].Dirs {
		w := want.Connections[0].Dirs[i]
		assert.Equal(t, w.Packets, d.Packets)
		assert.Equal(t, w.PayloadBytes, d.PayloadBytes, "payload sizes come from the UDP length, cut or not")
		assert.Equal(t, w.ICRC.Good, d.ICRC.Good+d.ICRC.Unchecked)
		assert.Zero(t, d.ICRC.Bad)
		assert.Equal(t, w.Requests, d.Requests)
		assert.Equal(t, w.Responses, d.Responses)
	}
	assert.Equal(t, want.Connections[0].PathMTU, got.Connections[0].PathMTU)

	// The linter sees the same clean traffic: a cut frame is no finding.
	rd, err := capture.NewReader(bytes.NewReader(mixed))
	require.NoError(t, err)
	fs, _, err := lint.Lint(rd)
	require.NoError(t, err)
	for _, f := range fs {
		t.Errorf("frame %d: %s: %s", f.Frame, f.Rule, f.Message)
	}
}

// TestTruncatedFile cuts a capture at every length: it must never panic,
// and must keep every packet before the cut, with the cut as the error.
func TestTruncatedFile(t *testing.T) {
	data, err := os.ReadFile(root + "/testdata/pcaps/rc_imm.pcap")
	require.NoError(t, err)
	full, err := analyzeBytes(t, data, flow.Config{})
	require.NoError(t, err)
	for n := 0; n < len(data); n += 7 {
		rd, err := capture.NewReader(bytes.NewReader(data[:n]))
		if err != nil {
			assert.Less(t, n, 24+16, "only a cut file header is an error")
			assert.ErrorIs(t, err, capture.ErrNotCapture)
			continue
		}
		res, err := flow.Analyze(rd, flow.Config{Points: true})
		if err != nil {
			assert.ErrorIs(t, err, capture.ErrCutShort)
			assert.Equal(t, err.Error(), res.Capture.Error)
		}
		assert.LessOrEqual(t, res.Capture.RoCE, full.Capture.RoCE)
	}
}
