package roce_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/link/mem"
	"github.com/goroce/goroce/roce"
)

// TestDialSetupError: DialConfig.Setup's error ends Dial ("An error ends Dial
// with it"). Found in review: the error was assigned to a shadowed err.
func TestDialSetupError(t *testing.T) {
	n := mem.NewNetwork()
	dd := openCM(t, n, "10.0.0.1:4791", roce.Config{})
	ld := openCM(t, n, "10.0.0.2:4791", roce.Config{})
	l, err := ld.Listen(7174, roce.ListenConfig{})
	require.NoError(t, err)
	defer l.Close()
	boom := errors.New("setup failed")
	c, err := dd.Dial(ctxT(t, 10*time.Second), netip.MustParseAddrPort("10.0.0.2:7174"),
		roce.DialConfig{Setup: func(*roce.QP) error { return boom }})
	if c != nil {
		c.Close()
	}
	require.ErrorIs(t, err, boom, "Dial ignored Setup's error")
}

// TestListenerClosedWhilePending: a connection that becomes established after
// its Listener closed is disconnected by the CM and its QP destroyed (nobody
// holds the Conn). Found in review: the QP leaked until the device closed
// and kept counting against MaxQPs.
func TestListenerClosedWhilePending(t *testing.T) {
	n := mem.NewNetwork()
	dd := openCM(t, n, "10.0.0.1:4791", roce.Config{})
	ld := openCM(t, n, "10.0.0.2:4791", roce.Config{MaxQPs: 2}) // QP1 + one
	var l *roce.Listener
	inSetup := make(chan struct{})
	closed := make(chan struct{})
	l, err := ld.Listen(7174, roce.ListenConfig{Setup: func(*roce.QP) error {
		close(inSetup)
		time.Sleep(50 * time.Millisecond) // Close now waits for the CM lock
		return nil
	}})
	require.NoError(t, err)
	go func() { <-inSetup; l.Close(); close(closed) }()
	c, err := dd.Dial(ctxT(t, 10*time.Second), netip.MustParseAddrPort("10.0.0.2:7174"), roce.DialConfig{})
	<-closed
	if err == nil {
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("dialer not disconnected")
		}
		c.Close()
	}
	t.Logf("dial: %v", err)
	var q *roce.QP
	deadline := time.Now().Add(3 * time.Second)
	for {
		q, err = ld.CreateQP(roce.QPConfig{})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, err, "the abandoned passive QP still counts")
	q.Destroy()
}
