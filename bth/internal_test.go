package bth

import "testing"

// TestExtOrderMatchesMaskBits pins the layout Info.Offset relies on: the
// i-th extension header of extOrder has the presence bit 1<<i, and extMasks
// is exactly those bits.
func TestExtOrderMatchesMaskBits(t *testing.T) {
	var all HeaderMask
	for i, e := range extOrder {
		if e.mask != 1<<i {
			t.Errorf("extOrder[%d].mask = %#x, want %#x", i, uint32(e.mask), 1<<i)
		}
		all |= e.mask
	}
	if all != extMasks {
		t.Errorf("extMasks = %#x, extOrder has %#x", uint32(extMasks), uint32(all))
	}
}

// TestOffsetRejectsNonHeaderMasks checks that Offset answers only for a
// single extension-header bit.
func TestOffsetRejectsNonHeaderMasks(t *testing.T) {
	in, _ := RCRDMAWriteOnlyWithImmediate.Lookup()
	for _, m := range []HeaderMask{0, MaskRETH | MaskImmDt, MaskPayload, MaskFirst, MaskOnly, 1 << 31, MaskRETH | MaskPayload} {
		if o, ok := in.Offset(m); ok || o != 0 {
			t.Errorf("Offset(%#x) = %d, %v", uint32(m), o, ok)
		}
	}
	for _, c := range []struct {
		m   HeaderMask
		off int
	}{{MaskRETH, 12}, {MaskImmDt, 28}} {
		if o, ok := in.Offset(c.m); !ok || o != c.off {
			t.Errorf("Offset(%#x) = %d, %v; want %d", uint32(c.m), o, ok, c.off)
		}
	}
}
