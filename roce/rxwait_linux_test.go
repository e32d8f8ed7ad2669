package roce_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestOnBatchRunToCompletionUDP: the run-to-completion ping-pong over
// loopback UDP, where the receive loop runs inside the link's pump and
// the function's PostSend sends from within it.
func TestOnBatchRunToCompletionUDP(t *testing.T) {
	p := newUDPPair(t, 4096)
	defer p.a.Close()
	defer p.b.Close()
	a := &side{dev: p.a, qp: p.qa, scq: p.cqa}
	calls := onBatchPingPong(t, a, p.ma, p.mb, 500)
	assert.GreaterOrEqual(t, calls, 500)
	assert.Equal(t, byte(500%256), readMR(t, p.mb)[63])
}
