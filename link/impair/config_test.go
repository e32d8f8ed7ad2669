package impair

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	both := func(d Direction) Config { return Config{Tx: d, Rx: d} }
	tests := []struct {
		name string
		spec string
		want Config
		err  string // substring of the error; "" for none
	}{
		{name: "empty", spec: "", want: Config{}},
		{name: "issue example", spec: "loss=1%,dup=0.5%,reorder=1%,corrupt=0.1%,seed=7",
			want: func() Config {
				c := both(Direction{Loss: 0.01, Dup: 0.005, Reorder: 0.01, Corrupt: 0.001})
				c.Seed = 7
				return c
			}()},
		{name: "fraction", spec: "loss=0.02", want: both(Direction{Loss: 0.02})},
		{name: "reorder depth", spec: "reorder=2%:5", want: both(Direction{Reorder: 0.02, ReorderDepth: 5})},
		{name: "gilbert-elliott", spec: "ge=1%:20%", want: both(Direction{GilbertElliott: GilbertElliott{PGB: 0.01, PBG: 0.2}})},
		{name: "gilbert-elliott lossbad", spec: "ge=1%:20%:50%", want: both(Direction{GilbertElliott: GilbertElliott{PGB: 0.01, PBG: 0.2, LossBad: 0.5}})},
		{name: "burst", spec: "burst=0.1%:8", want: both(Direction{Burst: Burst{Start: 0.001, Len: 8}})},
		{name: "tx only", spec: "loss=1%,dir=tx", want: Config{Tx: Direction{Loss: 0.01}}},
		{name: "rx only", spec: "dir=rx,loss=1%", want: Config{Rx: Direction{Loss: 0.01}}},
		{name: "hold", spec: "reorder=1%,hold=5ms", want: func() Config {
			c := both(Direction{Reorder: 0.01})
			c.HoldMax = 5 * time.Millisecond
			return c
		}()},
		{name: "spaces and empty items", spec: " loss=1% ,, dup=1%", want: both(Direction{Loss: 0.01, Dup: 0.01})},
		{name: "hex seed", spec: "seed=0x10", want: Config{Seed: 16}},

		{name: "no value", spec: "loss", err: `"loss" is not key=value`},
		{name: "empty value", spec: "loss=", err: `"loss=" is not key=value`},
		{name: "unknown key", spec: "jitter=1ms", err: `unknown key "jitter"`},
		{name: "not a number", spec: "loss=abc", err: `loss=abc: "abc" is not a probability`},
		{name: "over 100%", spec: "loss=101%", err: `"101%" is not in [0, 1]`},
		{name: "over 1", spec: "dup=2", err: `"2" is not in [0, 1]`},
		{name: "negative", spec: "corrupt=-1%", err: `is not in [0, 1]`},
		{name: "NaN", spec: "loss=NaN", err: `is not a probability`},
		{name: "twice", spec: "loss=1%,loss=2%", err: `"loss" given twice`},
		{name: "bad dir", spec: "dir=up", err: "want tx, rx or both"},
		{name: "bad seed", spec: "seed=-1", err: "seed=-1"},
		{name: "ge one part", spec: "ge=1%", err: "want PGB:PBG[:LOSSBAD]"},
		{name: "ge zero PBG", spec: "ge=1%:0", err: "must be above 0"},
		{name: "burst no len", spec: "burst=1%", err: "want P:LEN"},
		{name: "burst zero len", spec: "burst=1%:0", err: "burst length"},
		{name: "reorder bad depth", spec: "reorder=1%:x", err: "reorder depth"},
		{name: "hold too long", spec: "hold=1h", err: "at most 1s"},
		{name: "hold not a duration", spec: "hold=5", err: "hold=5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.spec)
			if tc.err != "" {
				require.Error(t, err)
				assert.True(t, errors.Is(err, ErrSpec), "%v wraps ErrSpec", err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestDirectionString(t *testing.T) {
	c, err := Parse("loss=1%,dup=0.5%,reorder=1%:3,corrupt=0.1%,ge=1%:20%,burst=0.1%:8,dir=tx,seed=3")
	require.NoError(t, err)
	assert.Equal(t, "loss=1%,ge=1%:20%,burst=0.1%:8,dup=0.5%,reorder=1%:3,corrupt=0.1%", c.Tx.String())
	assert.Equal(t, "none", c.Rx.String())
	back, err := Parse(c.Tx.String() + ",dir=tx,seed=3")
	require.NoError(t, err)
	assert.Equal(t, c, back)
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := New(nil, Config{Rx: Direction{Loss: 1.5}})
	assert.ErrorIs(t, err, ErrSpec)
	_, err = New(nil, Config{Tx: Direction{GilbertElliott: GilbertElliott{PGB: 0.1}}})
	assert.ErrorIs(t, err, ErrSpec)
}
