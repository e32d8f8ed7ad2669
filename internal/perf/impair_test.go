package perf

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/perftest"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/impair"
	"github.com/goroce/goroce/link/udp"
	"github.com/goroce/goroce/qp"
)

// TestRunImpaired: loopback WRITE, READ and SEND over a path that loses
// and reorders 1% of the packets both ways complete, with the data
// verified, and the report says what the peer did.
func TestRunImpaired(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	_, port := freePorts(t)
	imp, err := impair.Parse("loss=1%,reorder=1%,seed=11")
	require.NoError(t, err)
	for _, op := range []Op{OpWrite, OpRead, OpSend} {
		for _, mtu := range []qp.MTU{qp.MTU1024, qp.MTU4096} {
			t.Run(fmt.Sprintf("%s_mtu%d", op, mtu.Bytes()), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				cfg := Config{Op: op, Size: 32 << 10, Iters: 100, MTU: mtu, TxDepth: 8, Impair: &imp, Verify: true,
					Addrs:    [2]netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port), netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), port)},
					OpenLink: func(a netip.AddrPort) (link.Link, error) { return udp.Open(udp.Config{Addr: a}) }}
				res, err := Run(ctx, cfg)
				require.NoError(t, err)
				assert.True(t, res.Verified)
				assert.Equal(t, 100, res.Iters)
				require.NotNil(t, res.Impair)
				r := res.Impair
				assert.NotZero(t, r.Link.Tx.Packets)
				assert.NotZero(t, r.Link.Tx.Dropped+r.Link.Rx.Dropped, "%+v", r.Link)
				assert.NotZero(t, r.Retransmitted+r.DuplicateResponses, "losses were repaired")
				assert.Positive(t, r.LongestStall)
				assert.Zero(t, r.BadICRC)
				var b bytes.Buffer
				WritePeerReport(&b, *r)
				assert.Contains(t, b.String(), "Impairment         : tx loss=1%,reorder=1%")
				assert.Contains(t, b.String(), "Longest stall")
			})
		}
	}
}

// TestRunVerifyCatchesBadData: the data check fails when the target does
// not hold the source's data (the check is not vacuous).
func TestRunVerifyCatchesBadData(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	cfg, a, b := loopbackEndpoints(t, 4096)
	fillPattern(a.mr, "a")
	fillPattern(b.mr, "b")
	err := verify(cfg, a, b, 4096)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "differ from the source")
}

// TestRemoteImpaired: goroce against goroce through the perftest
// exchange, both roles impaired, as `goroce perf --impair … --server` and
// `goroce perf --impair … SERVER` run it.
func TestRemoteImpaired(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	imp, err := impair.Parse("loss=1%,reorder=1%,dup=0.5%,corrupt=0.1%,seed=5")
	require.NoError(t, err)
	for _, verb := range []perftest.Verb{perftest.Write, perftest.Read, perftest.Send} {
		t.Run(verb.String(), func(t *testing.T) {
			var so, co bytes.Buffer
			cfg := RemoteConfig{Tool: perftest.Tool{Verb: verb}, Size: 16384, Iters: 200, TxDepth: 16, RxDepth: 256,
				Impair: &imp}
			srv, cli := cfg, cfg
			srv.ImpairOut, cli.ImpairOut = &so, &co
			_, cres, _, _ := runPairWith(t, srv, cli)
			require.NotEmpty(t, cres)
			require.NotNil(t, cres[len(cres)-1].Impair)
			assert.NotZero(t, cres[len(cres)-1].Impair.Link.Tx.Packets)
			assert.Contains(t, so.String(), "The peer           :")
			assert.Contains(t, co.String(), "The peer           :")
		})
	}
}
