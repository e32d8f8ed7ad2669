package capfmt

import (
	"net/netip"
	"strconv"
)

const hexDigits = "0123456789abcdef"

// AppendValue appends the value of it as tshark -T fields prints it
// (FORMATS.md §3): decimal integers, 0x-prefixed zero-padded hex for
// BASE_HEX fields, 0/1 for booleans, lowercase hex without separators for
// byte strings, dotted quads, RFC 5952 IPv6 and [-]s.nnnnnnnnn times.
// Protocol items append nothing.
func AppendValue(dst []byte, it *Item) []byte {
	if it.Field >= numFields {
		return dst
	}
	fi := &fieldInfos[it.Field]
	switch fi.kind {
	case kindUint:
		return strconv.AppendUint(dst, it.Value, 10)
	case kindHex:
		dst = append(dst, '0', 'x')
		for i := int(fi.digits) - 1; i >= 0; i-- {
			dst = append(dst, hexDigits[(it.Value>>(4*uint(i)))&0xf])
		}
		return dst
	case kindBool:
		if it.Value != 0 {
			return append(dst, '1')
		}
		return append(dst, '0')
	case kindBytes:
		if len(it.Bytes) == 0 {
			return append(dst, "<MISSING>"...) // tshark's text for a zero-length item
		}
		return appendHex(dst, it.Bytes, 0)
	case kindIPv4:
		if len(it.Bytes) != 4 {
			return dst
		}
		for i, b := range it.Bytes {
			if i > 0 {
				dst = append(dst, '.')
			}
			dst = strconv.AppendUint(dst, uint64(b), 10)
		}
		return dst
	case kindIPv6:
		a, ok := netip.AddrFromSlice(it.Bytes)
		if !ok {
			return dst
		}
		return a.AppendTo(dst)
	case kindRelTime:
		return appendRelTime(dst, int64(it.Value))
	case kindStatus:
		if it.Value != 0 {
			return append(dst, "good"...)
		}
		return append(dst, "bad"...)
	}
	return dst
}

// appendHex appends b as lowercase hex, with sep between bytes when it is
// not 0.
func appendHex(dst, b []byte, sep byte) []byte {
	for i, c := range b {
		if sep != 0 && i > 0 {
			dst = append(dst, sep)
		}
		dst = append(dst, hexDigits[c>>4], hexDigits[c&0xf])
	}
	return dst
}

// appendRelTime formats nanoseconds like tshark's FT_RELATIVE_TIME:
// [-]seconds.nanoseconds with nine digits.
func appendRelTime(dst []byte, ns int64) []byte {
	u := uint64(ns)
	if ns < 0 {
		dst = append(dst, '-')
		u = uint64(-ns)
	}
	dst = strconv.AppendUint(dst, u/1e9, 10)
	dst = append(dst, '.')
	frac := u % 1e9
	var tmp [9]byte
	for i := 8; i >= 0; i-- {
		tmp[i] = byte('0' + frac%10)
		frac /= 10
	}
	return append(dst, tmp[:]...)
}
