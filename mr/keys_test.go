package mr_test

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/mr"
)

// smallSpace is a deterministic Rand that yields 32-bit values in
// [1, space], so that the table keeps drawing keys that are live or
// quarantined and must reject them.
type smallSpace struct {
	rng   *rand.Rand
	space uint32
}

func (s *smallSpace) Read(p []byte) (int, error) {
	n := 0
	for ; n+4 <= len(p); n += 4 {
		binary.LittleEndian.PutUint32(p[n:], 1+s.rng.Uint32N(s.space))
	}
	return n, nil
}

// TestD6_KeyUniquenessAndReuseWindow registers and deregisters regions with
// about 1000 live at any time: no new key equals a live key, and no key is
// reissued within mr.ReuseWindow registrations of being freed.
func TestD6_KeyUniquenessAndReuseWindow(t *testing.T) {
	const live = 1000
	tests := []struct {
		name  string
		rand  func() *smallSpace
		n     int
		reuse bool // the key space is small enough that keys must come back
	}{
		{name: "crypto/rand", n: 1_000_000},
		{name: "2^18 key space", rand: func() *smallSpace {
			return &smallSpace{rng: rand.New(rand.NewPCG(7, 7)), space: 1 << 18}
		}, n: 3 * mr.ReuseWindow, reuse: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.n
			if raceEnabled || testing.Short() {
				n = max(n/10, 3*mr.ReuseWindow)
			}
			seen := map[mr.Key]int{} // small key space only: last time freed
			cfg := mr.TableConfig{}
			if tc.rand != nil {
				cfg.Rand = tc.rand()
			}
			tbl, err := mr.NewTable(cfg)
			require.NoError(t, err)
			pd := tbl.AllocPD()
			buf := make([]byte, 8)

			fifo := make([]*mr.Region, 0, live+1)
			liveKeys := make(map[mr.Key]struct{}, live+1)
			// Keys freed within the last ReuseWindow registrations, with the
			// registration count when each was freed; older ones may return.
			type freed struct {
				key mr.Key
				at  int
			}
			var window []freed
			freedAt := make(map[mr.Key]int)
			dupLive, early, reissued := 0, 0, 0
			minGap := int(^uint(0) >> 1)
			for i := 1; i <= n; i++ {
				for len(window) > 0 && i-window[0].at > mr.ReuseWindow {
					if freedAt[window[0].key] == window[0].at {
						delete(freedAt, window[0].key)
					}
					window = window[1:]
				}
				r, err := tbl.Register(pd, mr.RegisterConfig{Buf: buf, IOVA: 0x1000})
				if err != nil {
					t.Fatalf("registration %d: %v", i, err)
				}
				k := r.RKey()
				if k == 0 {
					t.Fatalf("registration %d: key 0", i)
				}
				if _, ok := liveKeys[k]; ok {
					dupLive++
				}
				if f, ok := freedAt[k]; ok {
					early++
					t.Errorf("key %v freed at registration %d reissued at %d", k, f, i)
				}
				if tc.reuse && seen[k] != 0 {
					reissued++
					minGap = min(minGap, i-seen[k])
				}
				liveKeys[k] = struct{}{}
				fifo = append(fifo, r)
				if len(fifo) > live {
					old := fifo[0]
					fifo = fifo[1:]
					if err := tbl.Deregister(old); err != nil {
						t.Fatal(err)
					}
					delete(liveKeys, old.RKey())
					freedAt[old.RKey()] = i
					window = append(window, freed{old.RKey(), i})
					if tc.reuse {
						seen[old.RKey()] = i
					}
				}
			}
			assert.Zero(t, dupLive, "duplicate live keys")
			assert.Zero(t, early, "keys reissued within %d registrations", mr.ReuseWindow)
			assert.Equal(t, live, tbl.Len())
			if tc.reuse {
				assert.Positive(t, reissued, "the quarantine releases keys")
				assert.Greater(t, minGap, mr.ReuseWindow)
			}
			t.Logf("%d registrations, %d keys reissued after the window (min gap %d)", n, reissued, minGap)
		})
	}
}

// TestKeysSurviveBadRandom: a key source that fails surfaces as an error,
// and a degenerate one runs out of keys cleanly.
func TestKeysSurviveBadRandom(t *testing.T) {
	tbl, err := mr.NewTable(mr.TableConfig{Rand: failing{}})
	require.NoError(t, err)
	pd := mr.NewPD()
	_, err = tbl.Register(pd, mr.RegisterConfig{Buf: make([]byte, 8), IOVA: 1})
	require.ErrorIs(t, err, errBroken)
	assert.Equal(t, 0, pd.Regions())

	tbl, err = mr.NewTable(mr.TableConfig{Rand: &smallSpace{rng: rand.New(rand.NewPCG(1, 1)), space: 1}})
	require.NoError(t, err)
	r, err := tbl.Register(pd, mr.RegisterConfig{Buf: make([]byte, 8), IOVA: 1})
	require.NoError(t, err)
	assert.Equal(t, mr.Key(1), r.RKey())
	_, err = tbl.Register(pd, mr.RegisterConfig{Buf: make([]byte, 8), IOVA: 1})
	require.ErrorIs(t, err, mr.ErrTableFull)
	require.NoError(t, tbl.Deregister(r))
	_, err = tbl.Register(pd, mr.RegisterConfig{Buf: make([]byte, 8), IOVA: 1})
	require.ErrorIs(t, err, mr.ErrTableFull, "the only key is quarantined")
	assert.Equal(t, 0, pd.Regions())
}

var errBroken = errors.New("broken reader")

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errBroken }

// TestDeregisterVersusAccess races Deregister against every accessor. After
// Deregister returns no accessor may succeed, and the test then writes the
// buffer with plain stores, so the race detector reports any copy still in
// flight.
func TestDeregisterVersusAccess(t *testing.T) {
	iters := 200
	if raceEnabled {
		iters = 50
	}
	tbl := newTable(t)
	pd := tbl.AllocPD()
	for range iters {
		buf := make([]byte, 256)
		r, err := tbl.Register(pd, mr.RegisterConfig{Buf: buf, IOVA: 0x1000, Access: all})
		require.NoError(t, err)
		key := r.RKey()

		var gone atomic.Bool
		var late atomic.Int64 // successes that started after Deregister returned
		var ops atomic.Int64
		var wg sync.WaitGroup
		// Byte ranges: WriteAt/ReadAt [0,64), atomics at 64, Slice [128,192).
		accessors := []func() error{
			func() error { return r.ReadAt(make([]byte, 64), 0x1000) },
			func() error { return r.WriteAt([]byte("abcdefgh"), 0x1000) },
			func() error { _, err := r.FetchAndAdd(0x1040, 1); return err },
			func() error { _, err := r.CompareAndSwap(0x1040, 0, 1); return err },
			func() error {
				if err := r.Acquire(); err != nil {
					return err
				}
				defer r.Release()
				s, err := r.Slice(0x1080, 64)
				if err == nil {
					_ = s[63]
				}
				return err
			},
			func() error {
				got, err := tbl.LookupRemote(pd, key, 0x1000, 8, mr.RemoteRead)
				if err == nil {
					err = got.Recheck(key)
				}
				return err
			},
		}
		for _, f := range accessors {
			wg.Go(func() {
				for {
					after := gone.Load()
					err := f()
					ops.Add(1)
					if after {
						if err == nil {
							late.Add(1)
						}
						return
					}
					runtime.Gosched() // 2 CPUs: let Deregister in
				}
			})
		}
		for ops.Load() < 64 {
			runtime.Gosched()
		}
		require.NoError(t, tbl.Deregister(r))
		gone.Store(true)
		for i := range buf {
			buf[i] = 0xee
		}
		wg.Wait()
		require.Zero(t, late.Load(), "an access succeeded after Deregister returned")
		for i, b := range buf {
			require.Equal(t, byte(0xee), b, "byte %d written after Deregister returned", i)
		}
	}
	assert.Equal(t, 0, tbl.Len())
}

// TestConcurrentAtomics: FETCH_ADDs from several goroutines are atomic with
// respect to each other (IBV_ATOMIC_HCA).
func TestConcurrentAtomics(t *testing.T) {
	tbl := newTable(t)
	buf := make([]byte, 8)
	r, err := tbl.Register(tbl.AllocPD(), mr.RegisterConfig{Buf: buf, IOVA: 0x1000, Access: all})
	require.NoError(t, err)
	const workers, each = 4, 10_000
	seen := make([][]uint64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				orig, err := r.FetchAndAdd(0x1000, 1)
				if err != nil {
					panic(err)
				}
				seen[w] = append(seen[w], orig)
			}
		})
	}
	wg.Wait()
	got := make([]bool, workers*each)
	for _, s := range seen {
		for _, v := range s {
			require.False(t, got[v], "value %d returned twice", v)
			got[v] = true
		}
	}
	assert.Equal(t, uint64(workers*each), binary.LittleEndian.Uint64(buf))
}
