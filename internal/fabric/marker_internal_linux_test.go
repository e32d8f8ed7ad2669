package fabric

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/ebpf"
)

// frame returns an Ethernet/IPv4/UDP frame of n bytes with the given IP
// ECN codepoint and a valid header checksum.
func frame(n int, ecn byte) []byte {
	b := make([]byte, n)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:34]
	ip[0], ip[1] = 0x45, 26<<2|ecn
	binary.BigEndian.PutUint16(ip[2:], uint16(n-14))
	ip[8], ip[9] = 64, 17
	copy(ip[12:], []byte{10, 201, 0, 2, 10, 202, 0, 2})
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip))
	binary.BigEndian.PutUint16(b[34:], 50000)
	binary.BigEndian.PutUint16(b[36:], 4791)
	binary.BigEndian.PutUint16(b[38:], uint16(n-34))
	return b
}

func ipChecksum(h []byte) uint16 {
	var s uint32
	for i := 0; i < len(h); i += 2 {
		if i != 10 {
			s += uint32(binary.BigEndian.Uint16(h[i:]))
		}
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// loadMarker loads the marker for one port of rate r with the given
// threshold and buffer into a fresh one-slot map.
func loadMarker(t *testing.T, r Rate, gamma float64, threshold, buffer int) (*ebpf.Program, *ebpf.Map, markerParams) {
	t.Helper()
	if err := RequireRoot(); err != nil {
		t.Skipf("needs root: %v", err)
	}
	m, err := ebpf.CreateArrayMap("gf_test", slotSize, 1)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	p := newMarkerParams(0, r, gamma, threshold, buffer)
	prog, err := markerProgram(m.FD(), p)
	require.NoError(t, err)
	lp, err := ebpf.LoadProgram(ebpf.SchedCLS, "gf_test", markerLicense, prog)
	var verr *ebpf.VerifierError
	if errors.As(err, &verr) {
		t.Fatalf("%v", verr)
	}
	require.NoError(t, err)
	t.Cleanup(func() { lp.Close() })
	return lp, m, p
}

func slotStats(t *testing.T, m *ebpf.Map, p markerParams) ECNStats {
	t.Helper()
	v := make([]byte, slotSize)
	require.NoError(t, m.Lookup(0, v))
	return decodeECN(v, p.bytesPerNanos)
}

// TestMarkerProgram runs the marker in the kernel on test packets
// (BPF_PROG_TEST_RUN), one after the other, at a rate so low that the
// time the runs take does not matter: at 1 kbit/s (γ = 1) a 1000-byte
// frame is 8 s of service, so packet i finds i × 8 s of backlog, less the
// time since the first run (milliseconds; the outcome changes only past
// 4 s). With the threshold at 40 500 bytes (324 s) packets 0–40 find it
// below, 41 on above; with a 100 kB buffer (800 s) packets 101 on find the
// virtual queue full and do not join it. ECT(0) and ECT(1) packets above the
// threshold leave CE with a valid IPv4 checksum; Not-ECT packets are never
// changed; packets already CE count as marks.
func TestMarkerProgram(t *testing.T) {
	prog, m, p := loadMarker(t, Kbit, 1, 40_500, 100_000)
	codepoints := []byte{0b10, 0b01, 0b00, 0b11} // ECT(0), ECT(1), Not-ECT, CE in turn
	const n = 120
	var wantMarks uint64
	for i := range n {
		ecn := codepoints[i%4]
		in := frame(1000, ecn)
		ret, out, err := prog.TestRun(in)
		require.NoError(t, err)
		require.Equal(t, uint32(tcActOK), ret, "the marker lets every packet pass")
		require.Len(t, out, len(in))
		got := out[15] & 3
		above := i >= 41
		switch {
		case ecn == 0:
			assert.Equal(t, in, out, "packet %d: Not-ECT is never changed", i)
		case above:
			assert.Equal(t, byte(0b11), got, "packet %d (ECN %02b) above the threshold", i, ecn)
			assert.Equal(t, ipChecksum(out[14:34]), binary.BigEndian.Uint16(out[24:]), "packet %d: checksum after marking", i)
			assert.Equal(t, in[15]&^3, out[15]&^3, "packet %d: DSCP kept", i)
			wantMarks++
		default:
			assert.Equal(t, in, out, "packet %d (ECN %02b) below the threshold is not changed", i, ecn)
		}
	}
	st := slotStats(t, m, p)
	assert.Equal(t, uint64(n), st.Packets)
	assert.Equal(t, uint64(n*1000), st.Bytes)
	assert.Equal(t, uint64(n-41), st.Over, "packets that found the backlog above the threshold")
	assert.Equal(t, wantMarks, st.Marks)
	assert.Equal(t, uint64(n-101), st.Full, "packets that found the virtual queue full")
	assert.InDelta(t, 100_000, float64(st.MaxBacklog), 1000, "the largest backlog: the buffer")
}

// TestMarkerNoMarksBelowRate runs ECT(0) packets at 400 Gbit/s, the
// highest rate a fabric takes: a 1000-byte frame is 20 ns of service, far
// less than the time between two test runs, so every packet finds the
// virtual queue empty and none is marked.
func TestMarkerNoMarksBelowRate(t *testing.T) {
	prog, m, p := loadMarker(t, 400*Gbit, DefaultECNGamma, DefaultECNThreshold, DefaultBuffer)
	for i := range 500 {
		in := frame(1000, 0b10)
		_, out, err := prog.TestRun(in)
		require.NoError(t, err)
		require.Equal(t, in, out, "packet %d", i)
	}
	st := slotStats(t, m, p)
	assert.Equal(t, uint64(500), st.Packets)
	assert.Zero(t, st.Over)
	assert.Zero(t, st.Marks)
	assert.Less(t, st.MaxBacklog, uint64(2000), "at most a packet or two of backlog")
}
