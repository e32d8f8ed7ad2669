package capfmt_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEtherTypeEmptyFrame: a payload that is an EtherType and two zero bytes
// and nothing more (ib_write_lat's default 2-byte WRITEs with their pad),
// for every EtherType tshark 4.0.17 dissects; found by the rxe interop
// suite (ib_write_lat, iteration 0x59: PPP Multiplexing). Goldens from
// testdata/make_ethertype_empty.py.
func TestEtherTypeEmptyFrame(t *testing.T) {
	fields := goldenFields(t)
	want, err := os.ReadFile("testdata/ethertype_empty.tshark.txt")
	require.NoError(t, err)
	got := render(t, "testdata/ethertype_empty.pcap", fields, true)
	if !bytes.Equal(got, want) {
		t.Fatalf("differs from tshark: first difference at %s", firstDiff(fields, got, want))
	}
}
