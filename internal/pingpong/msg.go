package pingpong

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
)

// MsgSize is the size of the exchange message:
// sizeof "0000:000000:000000:00000000000000000000000000000000".
const MsgSize = 52

// ErrGarbled is wrapped by the errors for messages that do not parse.
var ErrGarbled = errors.New("pingpong: garbled message")

// Dest is struct pingpong_dest: what the peer needs to connect its QP.
type Dest struct {
	LID uint16
	QPN uint32 // 24 bits
	PSN uint32 // 24 bits
	GID [16]byte
}

// Marshal returns the 52-byte message. The GID goes in its wire form
// (gid_to_wire_gid): the 16 bytes in order as 32 hex digits.
func (d *Dest) Marshal() ([]byte, error) {
	if d.QPN > 0xffffff || d.PSN > 0xffffff {
		return nil, fmt.Errorf("pingpong: QPN %#x or PSN %#x above 24 bits", d.QPN, d.PSN)
	}
	b := fmt.Appendf(make([]byte, 0, MsgSize), "%04x:%06x:%06x:%s", d.LID, d.QPN, d.PSN, hex.EncodeToString(d.GID[:]))
	return append(b, 0), nil
}

// Parse parses the 52-byte message: four hex fields of the widths Marshal
// writes, NUL-terminated. (rc_pingpong parses it with sscanf "%x:%x:%x:%s",
// which accepts less; everything rc_pingpong sends is accepted.)
func Parse(b []byte) (Dest, error) {
	var d Dest
	if len(b) != MsgSize || b[MsgSize-1] != 0 {
		return d, fmt.Errorf("%w: %q is not a %d-byte NUL-terminated message", ErrGarbled, b, MsgSize)
	}
	s := b[:MsgSize-1]
	if s[4] != ':' || s[11] != ':' || s[18] != ':' {
		return d, fmt.Errorf("%w: %q is not LID:QPN:PSN:GID", ErrGarbled, s)
	}
	var f [3]uint32
	for i, r := range [3][2]int{{0, 4}, {5, 11}, {12, 18}} {
		var v uint32
		for _, c := range s[r[0]:r[1]] {
			x, ok := unhex(c)
			if !ok {
				return d, fmt.Errorf("%w: %q: field %d is not hex", ErrGarbled, s, i)
			}
			v = v<<4 | uint32(x)
		}
		f[i] = v
	}
	if _, err := hex.Decode(d.GID[:], s[19:]); err != nil {
		return d, fmt.Errorf("%w: %q: GID is not 32 hex digits", ErrGarbled, s)
	}
	d.LID, d.QPN, d.PSN = uint16(f[0]), f[1], f[2]
	return d, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// String formats d as rc_pingpong prints an address.
func (d Dest) String() string {
	return fmt.Sprintf("LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %v", d.LID, d.QPN, d.PSN, netip.AddrFrom16(d.GID))
}
