package link_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goroce/goroce/link"
)

// TestDatagramCopyTo checks the wire bytes of both datagram forms: Buf
// alone, and Payload spliced into Buf at PayloadAt (out-of-range PayloadAt
// reads as len(Buf)), with room to spare and truncated.
func TestDatagramCopyTo(t *testing.T) {
	tests := []struct {
		name string
		dg   link.Datagram
		want string
	}{
		{"plain", link.Datagram{Buf: []byte("hdr|icrc")}, "hdr|icrc"},
		{"two-part", link.Datagram{Buf: []byte("hdr|icrc"), Payload: []byte("DATA"), PayloadAt: 4}, "hdr|DATAicrc"},
		{"at start", link.Datagram{Buf: []byte("icrc"), Payload: []byte("DATA")}, "DATAicrc"},
		{"at end", link.Datagram{Buf: []byte("hdr|"), Payload: []byte("DATA"), PayloadAt: 4}, "hdr|DATA"},
		{"at past end", link.Datagram{Buf: []byte("hdr|"), Payload: []byte("DATA"), PayloadAt: 9}, "hdr|DATA"},
		{"at negative", link.Datagram{Buf: []byte("hdr|"), Payload: []byte("DATA"), PayloadAt: -1}, "hdr|DATA"},
		{"empty payload ignores at", link.Datagram{Buf: []byte("hdr|icrc"), PayloadAt: 2}, "hdr|icrc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, len(tc.want), tc.dg.Len())
			dst := make([]byte, 32)
			n := tc.dg.CopyTo(dst)
			assert.Equal(t, tc.want, string(dst[:n]))
			short := make([]byte, len(tc.want)-1)
			assert.Equal(t, len(short), tc.dg.CopyTo(short))
			assert.Equal(t, tc.want[:len(short)], string(short))
		})
	}
}

// TestDatagramCopyToAllocs pins CopyTo at zero allocations.
func TestDatagramCopyToAllocs(t *testing.T) {
	dg := link.Datagram{Buf: make([]byte, 32), Payload: make([]byte, 4096), PayloadAt: 28}
	dst := make([]byte, 4200)
	assert.Zero(t, testing.AllocsPerRun(100, func() { dg.CopyTo(dst) }))
}
