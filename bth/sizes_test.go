package bth_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goroce/goroce/aeth"
	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/ext"
	"github.com/goroce/goroce/reth"
)

// TestExtensionSizes cross-checks the header sizes the opcode table uses
// (constants in bth, so bth imports no other codec) against the codec
// packages that own the headers.
func TestExtensionSizes(t *testing.T) {
	tests := []struct {
		name     string
		bth, pkg int
		iba      int
	}{
		{"RETH", bth.RETHSize, reth.Size, 16},
		{"AETH", bth.AETHSize, aeth.Size, 4},
		{"ImmDt", bth.ImmDtSize, ext.ImmDtSize, 4},
		{"IETH", bth.IETHSize, ext.IETHSize, 4},
		{"DETH", bth.DETHSize, ext.DETHSize, 8},
		{"AtomicETH", bth.AtomicETHSize, ext.AtomicETHSize, 28},
		{"AtomicAckETH", bth.AtomicAckETHSize, ext.AtomicAckETHSize, 8},
		{"FETH", bth.FETHSize, ext.FETHSize, 4},
		{"BTH", bth.Size, bth.Size, 12},
		{"ICRC", bth.ICRCSize, bth.ICRCSize, 4},
		{"CNP pad", bth.CNPPadSize, bth.CNPPadSize, 16},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.pkg, tc.bth)
			assert.Equal(t, tc.iba, tc.bth)
		})
	}
}
