package roce

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goroce/goroce/cm"
)

// TestSIDRReplyOutcome: how a SIDR_REP (or its absence) ends a DialUD, as
// cma_sidr_rep_handler decides it: a non-success status is a *SIDRError,
// a Q_Key other than the UDP port space's ErrQKeyMismatch, no reply
// ErrUnreachable; a reply for no waiting DialUD is ignored.
func TestSIDRReplyOutcome(t *testing.T) {
	tests := []struct {
		name string
		e    cm.Event
		want error
	}{
		{"success", cm.Event{Kind: cm.EventSIDRReply, QKey: cm.UDPQKey}, nil},
		{"unsupported", cm.Event{Kind: cm.EventSIDRReply, SIDRStatus: cm.SIDRUnsupported}, ErrRejected},
		{"other Q_Key", cm.Event{Kind: cm.EventSIDRReply, QKey: 0x11111111}, ErrQKeyMismatch},
		{"unanswered", cm.Event{Kind: cm.EventUnreachable}, ErrUnreachable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &cmState{udDials: map[cm.CommID]*udDial{}}
			dl := &udDial{ready: make(chan struct{})}
			s.udDials[7] = dl
			tc.e.ID = 7
			tc.e.QP.RemoteQPN = 0x123
			s.onSIDRReply(&tc.e)
			select {
			case <-dl.ready:
			default:
				t.Fatal("the DialUD still waits")
			}
			assert.Empty(t, s.udDials)
			if tc.want == nil {
				assert.NoError(t, dl.err)
				assert.EqualValues(t, 0x123, dl.qpn)
				assert.EqualValues(t, cm.UDPQKey, dl.qkey)
				return
			}
			assert.ErrorIs(t, dl.err, tc.want)
			var se *SIDRError
			assert.Equal(t, tc.want == ErrRejected, errors.As(dl.err, &se))
		})
	}
	s := &cmState{udDials: map[cm.CommID]*udDial{}}
	s.onSIDRReply(&cm.Event{Kind: cm.EventSIDRReply, ID: 9}) // no DialUD: no panic, nothing kept
	assert.Empty(t, s.udDials)
}
