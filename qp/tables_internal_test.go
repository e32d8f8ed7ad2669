package qp

// Table tests of the engine's internal tables: the state predicates, the
// opcode-by-position choice and the responder error table.

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStatePredicates(t *testing.T) {
	tests := []struct {
		s                                         State
		sends, receives, takesSendWR, takesRecvWR bool
	}{
		{StateReset, false, false, false, false},
		{StateInit, false, false, false, true},
		{StateRTR, false, true, false, true},
		{StateRTS, true, true, true, true},
		{StateSQD, true, true, true, true},
		{StateSQE, false, false, false, true},
		{StateErr, false, false, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.s.String(), func(t *testing.T) {
			assert.Equal(t, tc.sends, tc.s.sends(), "sends")
			assert.Equal(t, tc.receives, tc.s.receives(), "receives")
			assert.Equal(t, tc.takesSendWR, tc.s.takesSendWR(), "takesSendWR")
			assert.Equal(t, tc.takesRecvWR, tc.s.takesRecvWR(), "takesRecvWR")
		})
	}
}
