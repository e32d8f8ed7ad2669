package qp_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
)

func TestAttrMaskString(t *testing.T) {
	tests := []struct {
		m    qp.AttrMask
		want string
	}{
		{0, "0"},
		{qp.AttrState | qp.AttrPathMTU | qp.AttrDestQPN, "State|PathMTU|DestQPN"},
		{qp.AttrAV, "AV"},
		{qp.AttrMaxDestRdAtomic | qp.AttrSQPSN, "SQPSN|MaxDestRdAtomic"},
		{qp.AttrDestQPN | 1<<21, "DestQPN|0x200000"},
		{1 << 31, "0x80000000"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, tc.m.String())
	}
	// Every named bit is named: bits 0 to 20 are the ibv_qp_attr_mask values.
	for b := qp.AttrState; b <= qp.AttrDestQPN; b <<= 1 {
		assert.NotContains(t, b.String(), "0x", "bit %#x", uint32(b))
	}
}

// One sentinel answers errors.Is for an invalid argument whichever package
// found it.
func TestInvalidArgShared(t *testing.T) {
	for _, err := range []error{qp.ErrInvalidAttr, qp.ErrInvalidConfig, mr.ErrInvalidArg, cq.ErrInvalidArg} {
		assert.True(t, errors.Is(err, qp.ErrInvalidArg), "%v", err)
	}
	_, err := qp.New(qp.Config{})
	assert.ErrorIs(t, err, qp.ErrInvalidConfig)
	assert.ErrorIs(t, err, mr.ErrInvalidArg)
	assert.NotErrorIs(t, qp.ErrInvalidState, qp.ErrInvalidArg)
}
