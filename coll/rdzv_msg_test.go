package coll

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleHello(rank int) hello {
	return hello{JobID: "job-1", Size: 4, Rank: rank, LocalRank: rank % 2, Pid: 1000 + rank, Host: "host-a",
		Addr: netip.MustParseAddrPort("127.100.0.1:4791"), FIFOVA: 0x7f0000001000, FIFORKey: 0x1234,
		Shape: shape{Channels: 2, QPsPerConn: 4, Steps: 8, Chunk: 131072, Split: true, OrderHash: 0xdeadbeef}}
}

// sampleFrames returns one valid frame of every type.
func sampleFrames() [][]byte {
	h := sampleHello(1)
	table := []hello{sampleHello(0), sampleHello(1)}
	qps := []qpEntry{{Peer: 2, Channel: 1, Index: 3, QPN: 0x123456, PSN: 0xabcdef}, {Peer: 0, QPN: 17}}
	return [][]byte{
		appendFrame(nil, msgHello, h.append(nil)),
		appendFrame(nil, msgTable, appendTable(nil, table)),
		appendFrame(nil, msgQPs, appendQPs(nil, qps)),
		appendFrame(nil, msgRoute, appendQPs(nil, qps[:1])),
		appendFrame(nil, msgReady, nil),
		appendFrame(nil, msgGo, nil),
		appendFrame(nil, msgBye, nil),
		appendFrame(nil, msgAbort, appendAbort(nil, abortMsg{Rank: 3, Reporter: 1, Reason: "died"})),
		appendFrame(nil, msgRefuse, appendStr(nil, "job mismatch")),
	}
}

func TestFrameRoundTrip(t *testing.T) {
	for _, b := range sampleFrames() {
		f, err := decodeFrame(b)
		require.NoError(t, err)
		got, err := readFrame(bytes.NewReader(b))
		require.NoError(t, err)
		assert.Equal(t, f.typ, got.typ)
		assert.Equal(t, f.payload, got.payload)
		require.NoError(t, roundTrip(f), "type %d", f.typ)
	}
	h := sampleHello(2)
	got, err := decodeHello(h.append(nil))
	require.NoError(t, err)
	assert.Equal(t, h, got)
}

// roundTrip decodes f's payload by its type and checks that encoding it
// again gives the same bytes.
func roundTrip(f frame) error {
	var again []byte
	switch f.typ {
	case msgHello:
		h, err := decodeHello(f.payload)
		if err != nil {
			return err
		}
		again = h.append(nil)
	case msgTable:
		t, err := decodeTable(f.payload)
		if err != nil {
			return err
		}
		again = appendTable(nil, t)
	case msgQPs, msgRoute:
		q, err := decodeQPs(f.payload)
		if err != nil {
			return err
		}
		again = appendQPs(nil, q)
	case msgAbort:
		a, err := decodeAbort(f.payload)
		if err != nil {
			return err
		}
		again = appendAbort(nil, a)
	case msgRefuse:
		s, err := decodeRefuse(f.payload)
		if err != nil {
			return err
		}
		again = appendStr(nil, s)
	default:
		again = f.payload
	}
	if !bytes.Equal(again, f.payload) {
		return errors.New("re-encoding differs")
	}
	return nil
}

func TestFrameRefusals(t *testing.T) {
	good := sampleFrames()[0]
	tests := []struct {
		name string
		b    []byte
	}{
		{"short header", good[:5]},
		{"magic", append([]byte("HTTP"), good[4:]...)},
		{"version", func() []byte { b := bytes.Clone(good); b[4] = 9; return b }()},
		{"type", func() []byte { b := bytes.Clone(good); b[5] = 0x42; return b }()},
		{"length", func() []byte { b := bytes.Clone(good); b[8] = 0xFF; return b }()},
		{"truncated payload", good[:len(good)-1]},
	}
	for _, tc := range tests {
		_, err := decodeFrame(tc.b)
		assert.ErrorIs(t, err, ErrBadFrame, tc.name)
	}
	// Payloads that lie about their counts.
	_, err := decodeTable([]byte{0xFF, 0xFF, 0xFF, 0xFF})
	assert.ErrorIs(t, err, ErrBadFrame)
	_, err = decodeQPs([]byte{0, 0, 0, 2, 1, 2, 3})
	assert.ErrorIs(t, err, ErrBadFrame)
	_, err = decodeQPs(appendQPs(nil, []qpEntry{{Peer: 1, QPN: 0}}))
	assert.ErrorIs(t, err, ErrBadFrame, "QPN 0")
	h0 := sampleHello(0)
	_, err = decodeHello(append(h0.append(nil), 0))
	assert.ErrorIs(t, err, ErrBadFrame, "trailing byte")
	// A huge declared payload is refused before anything is allocated.
	_, err = readFrame(bytes.NewReader(append([]byte("GRCL\x01\x01\x00\x00"), 0x7F, 0xFF, 0xFF, 0xFF)))
	assert.ErrorIs(t, err, ErrBadFrame)
}

// FuzzFrame feeds arbitrary bytes to the rendezvous decoders: they never
// panic, never allocate past the frame's own size, and whatever they
// accept re-encodes to the same bytes.
func FuzzFrame(f *testing.F) {
	for _, b := range sampleFrames() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := decodeFrame(b)
		if err != nil {
			return
		}
		// Every decoder on every payload: none may panic.
		decodeHello(fr.payload)
		decodeTable(fr.payload)
		decodeQPs(fr.payload)
		decodeAbort(fr.payload)
		decodeRefuse(fr.payload)
		if err := roundTrip(fr); err != nil && !errors.Is(err, ErrBadFrame) {
			t.Fatalf("type %d: %v", fr.typ, err)
		}
	})
}
