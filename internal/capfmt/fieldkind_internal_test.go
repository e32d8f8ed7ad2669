package capfmt

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestL2FieldKinds checks each FIELDS.l2 field's kind against its raw
// tshark -G fields registration (testdata/tshark/tshark-G-fields.FIELDS.l2.txt):
// FT_BOOLEAN prints 0/1, BASE_HEX 0x-padded hex, BASE_DEC decimal, and a
// filter accepts any value of the FT_UINTn width.
func TestL2FieldKinds(t *testing.T) {
	b, err := os.ReadFile("../../testdata/tshark/tshark-G-fields.FIELDS.l2.txt")
	require.NoError(t, err)
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		c := strings.Split(line, "\t")
		require.GreaterOrEqual(t, len(c), 7, line)
		name, typ, base := c[2], c[3], c[5]
		if !strings.HasPrefix(name, "vlan.") && !strings.HasPrefix(name, "macc.") && name != "ip.dsfield.dscp" {
			continue
		}
		n++
		f, ok := FieldByName(name)
		require.True(t, ok, name)
		fi := fieldInfos[f]
		switch {
		case typ == "FT_BOOLEAN":
			assert.Equal(t, kindBool, fi.kind, name)
		case base == "BASE_HEX":
			assert.Equal(t, kindHex, fi.kind, name)
			width := map[string]uint8{"FT_UINT8": 2, "FT_UINT16": 4, "FT_UINT32": 8}[typ]
			assert.Equal(t, width, fi.digits, name)
			assert.Equal(t, 4*width, fi.bits, name)
		case base == "BASE_DEC":
			assert.Equal(t, kindUint, fi.kind, name)
			width := map[string]uint8{"FT_UINT8": 8, "FT_UINT16": 16, "FT_UINT32": 32}[typ]
			assert.Equal(t, width, fi.bits, name)
		default:
			t.Errorf("%s: unexpected %s %s", name, typ, base)
		}
	}
	assert.Equal(t, 34, n, "vlan (6), macc (27), ip.dsfield.dscp")
}
