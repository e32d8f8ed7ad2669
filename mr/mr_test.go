package mr_test

import (
	"encoding/binary"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/mr"
)

const (
	rw  = mr.LocalWrite | mr.RemoteWrite
	all = mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead | mr.RemoteAtomic
)

func newTable(t testing.TB) *mr.Table {
	t.Helper()
	tbl, err := mr.NewTable(mr.TableConfig{})
	require.NoError(t, err)
	return tbl
}

func register(t testing.TB, tbl *mr.Table, pd *mr.PD, iova uint64, size int, access mr.AccessFlags) *mr.Region {
	t.Helper()
	r, err := tbl.Register(pd, mr.RegisterConfig{Buf: make([]byte, size), IOVA: iova, Access: access})
	require.NoError(t, err)
	return r
}

func TestAccessFlagsValues(t *testing.T) {
	// enum ibv_access_flags, libibverbs/verbs.h.
	assert.Equal(t, mr.AccessFlags(1), mr.LocalWrite)
	assert.Equal(t, mr.AccessFlags(2), mr.RemoteWrite)
	assert.Equal(t, mr.AccessFlags(4), mr.RemoteRead)
	assert.Equal(t, mr.AccessFlags(8), mr.RemoteAtomic)
	assert.Equal(t, mr.AccessFlags(16), mr.MWBind)
}

func TestAccessFlagsString(t *testing.T) {
	tests := []struct {
		a    mr.AccessFlags
		want string
	}{
		{0, "0"},
		{mr.LocalWrite, "LocalWrite"},
		{mr.LocalWrite | mr.RemoteRead, "LocalWrite|RemoteRead"},
		{all, "LocalWrite|RemoteWrite|RemoteRead|RemoteAtomic"},
		{mr.RemoteAtomic | 0x30, "RemoteAtomic|MWBind|0x20"},
		{0x40, "0x40"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.a.String())
		})
	}
	assert.True(t, all.Has(mr.RemoteRead|mr.RemoteWrite))
	assert.False(t, rw.Has(mr.RemoteRead))
	assert.True(t, rw.Has(0))
}

func TestKeyString(t *testing.T) {
	assert.Equal(t, "0x00000000", mr.Key(0).String())
	assert.Equal(t, "0x0000abcd", mr.Key(0xabcd).String())
	assert.Equal(t, "0xffffffff", mr.Key(math.MaxUint32).String())
}

func TestRegisterValidation(t *testing.T) {
	tbl := newTable(t)
	pd := tbl.AllocPD()
	other := newTable(t)
	buf := make([]byte, 64)
	tests := []struct {
		name string
		pd   *mr.PD
		cfg  mr.RegisterConfig
		want error
	}{
		{"nil PD", nil, mr.RegisterConfig{Buf: buf}, mr.ErrInvalidArg},
		{"PD of another table", other.AllocPD(), mr.RegisterConfig{Buf: buf}, mr.ErrWrongPD},
		{"empty buffer", pd, mr.RegisterConfig{Access: mr.LocalWrite}, mr.ErrInvalidArg},
		{"unknown access bit", pd, mr.RegisterConfig{Buf: buf, Access: 0x20}, mr.ErrInvalidArg},
		{"remote write without local write", pd, mr.RegisterConfig{Buf: buf, Access: mr.RemoteWrite}, mr.ErrInvalidArg},
		{"remote atomic without local write", pd, mr.RegisterConfig{Buf: buf, Access: mr.RemoteAtomic}, mr.ErrInvalidArg},
		{"zero based with IOVA", pd, mr.RegisterConfig{Buf: buf, ZeroBased: true, IOVA: 8}, mr.ErrInvalidArg},
		{"wraps past 2^64", pd, mr.RegisterConfig{Buf: buf, IOVA: math.MaxUint64 - 62}, mr.ErrInvalidArg},
		{"ends at 2^64", pd, mr.RegisterConfig{Buf: buf, IOVA: math.MaxUint64 - 63}, nil},
		{"remote read only", pd, mr.RegisterConfig{Buf: buf, Access: mr.RemoteRead}, nil},
		{"any PD works with NewPD", mr.NewPD(), mr.RegisterConfig{Buf: buf}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tbl.Register(tc.pd, tc.cfg)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				assert.Nil(t, r)
				return
			}
			require.NoError(t, err)
			assert.NotZero(t, r.LKey())
			assert.Equal(t, r.LKey(), r.RKey())
			assert.Equal(t, uint64(len(tc.cfg.Buf)), r.Len())
			assert.Equal(t, tc.cfg.Access, r.Access())
			assert.Same(t, tc.pd, r.PD())
			assert.True(t, r.Valid())
		})
	}
	assert.Equal(t, 0, other.Len())
}

func TestRegisterIOVA(t *testing.T) {
	tbl := newTable(t)
	pd := tbl.AllocPD()
	buf := make([]byte, 100)

	r, err := tbl.Register(pd, mr.RegisterConfig{Buf: buf, IOVA: 0x1234})
	require.NoError(t, err)
	assert.Equal(t, uint64(0x1234), r.IOVA())

	r, err = tbl.Register(pd, mr.RegisterConfig{Buf: buf, ZeroBased: true})
	require.NoError(t, err)
	assert.Zero(t, r.IOVA())

	seen := map[uint64]bool{}
	for range 100 {
		r, err = tbl.Register(pd, mr.RegisterConfig{Buf: buf})
		require.NoError(t, err)
		v := r.IOVA()
		assert.Zero(t, v%4096, "default IOVA %#x is page aligned", v)
		assert.GreaterOrEqual(t, v, uint64(1)<<32)
		assert.Less(t, v, uint64(1)<<32+1<<46)
		seen[v] = true
	}
	assert.Greater(t, len(seen), 90, "default IOVAs are random")
}

func TestRegionSGE(t *testing.T) {
	tbl := newTable(t)
	r, err := tbl.Register(tbl.AllocPD(), mr.RegisterConfig{Buf: make([]byte, 100), IOVA: 0x1000})
	require.NoError(t, err)
	tests := []struct {
		name   string
		off, n int
		want   mr.SGE
	}{
		{"whole", 0, 100, mr.SGE{Addr: 0x1000, Length: 100, LKey: r.LKey()}},
		{"middle", 10, 20, mr.SGE{Addr: 0x100a, Length: 20, LKey: r.LKey()}},
		{"empty at the end", 100, 0, mr.SGE{Addr: 0x1064, Length: 0, LKey: r.LKey()}},
		{"past the end", 90, 11, mr.SGE{Addr: 0x105a, Length: 11}},
		{"offset past the end", 101, 0, mr.SGE{Addr: 0x1065}},
		{"negative length", 0, -1, mr.SGE{Addr: 0x1000, Length: math.MaxUint32}},
		{"negative offset", -1, 1, mr.SGE{Addr: 0xfff, Length: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, r.SGE(tc.off, tc.n))
		})
	}
}

func TestMaxRegions(t *testing.T) {
	_, err := mr.NewTable(mr.TableConfig{MaxRegions: -1})
	require.ErrorIs(t, err, mr.ErrInvalidArg)

	tbl, err := mr.NewTable(mr.TableConfig{MaxRegions: 2})
	require.NoError(t, err)
	pd := tbl.AllocPD()
	a := register(t, tbl, pd, 0x1000, 8, 0)
	register(t, tbl, pd, 0x1000, 8, 0)
	_, err = tbl.Register(pd, mr.RegisterConfig{Buf: make([]byte, 8)})
	require.ErrorIs(t, err, mr.ErrTableFull)
	assert.Equal(t, 2, pd.Regions(), "a refused registration leaves the PD count alone")
	require.NoError(t, tbl.Deregister(a))
	register(t, tbl, pd, 0x1000, 8, 0)
	assert.Equal(t, 2, tbl.Len())
}

// TestC1_AccessFlags: a READ, WRITE or ATOMIC needs the matching right.
func TestC1_AccessFlags(t *testing.T) {
	tbl := newTable(t)
	pd := tbl.AllocPD()
	tests := []struct {
		name   string
		access mr.AccessFlags
		need   mr.AccessFlags
		want   error
	}{
		{"write without RemoteWrite", mr.LocalWrite | mr.RemoteRead | mr.RemoteAtomic, mr.RemoteWrite, mr.ErrAccessDenied},
		{"read without RemoteRead", rw | mr.RemoteAtomic, mr.RemoteRead, mr.ErrAccessDenied},
		{"atomic without RemoteAtomic", rw | mr.RemoteRead, mr.RemoteAtomic, mr.ErrAccessDenied},
		{"local-only region refuses a remote key", mr.LocalWrite, 0, mr.ErrAccessDenied},
		{"write", rw, mr.RemoteWrite, nil},
		{"read", mr.RemoteRead, mr.RemoteRead, nil},
		{"atomic", mr.LocalWrite | mr.RemoteAtomic, mr.RemoteAtomic, nil},
		{"read and write", all, mr.RemoteRead | mr.RemoteWrite, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := register(t, tbl, pd, 0x1000, 64, tc.access)
			got, err := tbl.LookupRemote(pd, r.RKey(), 0x1000, 8, tc.need)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			assert.Same(t, r, got)
		})
	}

	t.Run("local lookup", func(t *testing.T) {
		r := register(t, tbl, pd, 0x1000, 64, 0)
		_, err := tbl.LookupLocal(pd, r.LKey(), 0x1000, 64, 0)
		require.NoError(t, err, "a send buffer needs no rights")
		_, err = tbl.LookupLocal(pd, r.LKey(), 0x1000, 64, mr.LocalWrite)
		require.ErrorIs(t, err, mr.ErrAccessDenied, "a receive buffer needs LocalWrite")
	})
}

// TestC2_Bounds: the exact fit succeeds, one byte more on either side fails.
func TestC2_Bounds(t *testing.T) {
	tbl := newTable(t)
	pd := tbl.AllocPD()
	r := register(t, tbl, pd, 0x1000, 4096, all)
	tests := []struct {
		name   string
		va     uint64
		length uint64
		ok     bool
	}{
		{"exact fit", 0x1000, 4096, true},
		{"last byte", 0x1fff, 1, true},
		{"first byte", 0x1000, 1, true},
		{"one past the end", 0x1001, 4096, false},
		{"last byte plus one", 0x1fff, 2, false},
		{"start minus one", 0x0fff, 1, false},
		{"start minus one, full length", 0x0fff, 4096, false},
		{"length plus one", 0x1000, 4097, false},
		{"just past the end", 0x2000, 1, false},
		{"zero length at start", 0x1000, 0, true},
		{"zero length at end", 0x2000, 0, true},
		{"zero length past the end", 0x2001, 0, false},
		{"zero length before start", 0x0fff, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tbl.LookupRemote(pd, r.RKey(), tc.va, tc.length, mr.RemoteRead)
			_, lerr := tbl.LookupLocal(pd, r.LKey(), tc.va, tc.length, 0)
			cerr := r.CheckRange(tc.va, tc.length)
			if tc.ok {
				assert.NoError(t, err)
				assert.NoError(t, lerr)
				assert.NoError(t, cerr)
			} else {
				assert.ErrorIs(t, err, mr.ErrOutOfRange)
				assert.ErrorIs(t, lerr, mr.ErrOutOfRange)
				assert.ErrorIs(t, cerr, mr.ErrOutOfRange)
			}
			if tc.length <= 64 {
				p := make([]byte, tc.length)
				rerr, werr := r.ReadAt(p, tc.va), r.WriteAt(p, tc.va)
				if tc.ok {
					assert.NoError(t, rerr)
					assert.NoError(t, werr)
				} else {
					assert.ErrorIs(t, rerr, mr.ErrOutOfRange)
					assert.ErrorIs(t, werr, mr.ErrOutOfRange)
				}
			}
		})
	}
}

// TestC3_Overflow: ranges whose end wraps 2^64 (CVE-2016-8636,
// CVE-2026-98365) and lengths past 2^31.
func TestC3_Overflow(t *testing.T) {
	tbl := newTable(t)
	pd := tbl.AllocPD()
	low := register(t, tbl, pd, 0x1000, 4096, all)
	top := register(t, tbl, pd, math.MaxUint64-4095, 4096, all) // ends exactly at 2^64
	tests := []struct {
		name   string
		r      *mr.Region
		va     uint64
		length uint64
		ok     bool
	}{
		{"low: va=2^64-8 len 8", low, 0xFFFFFFFFFFFFFFF8, 8, false},
		{"low: va=2^64-8 len 16", low, 0xFFFFFFFFFFFFFFF8, 16, false},
		{"low: va=2^64-1 len 2", low, math.MaxUint64, 2, false},
		{"low: len 2^31+1", low, 0x1000, 1<<31 + 1, false},
		{"low: len 2^64-1", low, 0x1000, math.MaxUint64, false},
		{"low: va+len wraps onto the region", low, math.MaxUint64 - 0x7ff, 0x2000, false},
		{"top: va=2^64-8 len 8 is the last word", top, 0xFFFFFFFFFFFFFFF8, 8, true},
		{"top: va=2^64-8 len 16", top, 0xFFFFFFFFFFFFFFF8, 16, false},
		{"top: va=2^64-1 len 1", top, math.MaxUint64, 1, true},
		{"top: va=2^64-1 len 2", top, math.MaxUint64, 2, false},
		{"top: exact fit", top, math.MaxUint64 - 4095, 4096, true},
		{"top: len 2^31+1", top, math.MaxUint64 - 4095, 1<<31 + 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tbl.LookupRemote(pd, tc.r.RKey(), tc.va, tc.length, mr.RemoteWrite)
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, mr.ErrOutOfRange)
			}
			if tc.length > 64 {
				return
			}
			p := make([]byte, tc.length)
			if tc.ok {
				assert.NoError(t, tc.r.ReadAt(p, tc.va))
			} else {
				assert.NotPanics(t, func() {
					assert.ErrorIs(t, tc.r.ReadAt(p, tc.va), mr.ErrOutOfRange)
					assert.ErrorIs(t, tc.r.WriteAt(p, tc.va), mr.ErrOutOfRange)
				})
			}
		})
	}
	// An atomic on the very last word of the address space.
	orig, err := top.FetchAndAdd(0xFFFFFFFFFFFFFFF8, 5)
	require.NoError(t, err)
	assert.Zero(t, orig)
	_, err = low.FetchAndAdd(0xFFFFFFFFFFFFFFF8, 5)
	assert.ErrorIs(t, err, mr.ErrOutOfRange)
}

// TestCheckRangeProperty compares CheckRange with a 128-bit reference on
// random and edge ranges.
func TestCheckRangeProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tbl := newTable(t)
	pd := tbl.AllocPD()
	regions := []*mr.Region{
		register(t, tbl, pd, 0, 1, 0),
		register(t, tbl, pd, 0x1000, 4096, 0),
		register(t, tbl, pd, math.MaxUint64-4095, 4096, 0),
		register(t, tbl, pd, math.MaxUint64, 1, 0),
	}
	edges := []uint64{0, 1, 7, 8, 4095, 4096, 4097, 1 << 31, 1<<31 + 1, 1 << 63, math.MaxUint64 - 8, math.MaxUint64 - 1, math.MaxUint64}
	pick := func(r *mr.Region) uint64 {
		switch rng.IntN(4) {
		case 0:
			return edges[rng.IntN(len(edges))]
		case 1:
			return r.IOVA() + edges[rng.IntN(len(edges))]
		case 2:
			return r.IOVA() - edges[rng.IntN(len(edges))]
		default:
			return rng.Uint64()
		}
	}
	for range 200_000 {
		r := regions[rng.IntN(len(regions))]
		va, length := pick(r), edges[rng.IntN(len(edges))]
		if rng.IntN(2) == 0 {
			length = rng.Uint64N(8192)
		}
		require.Equal(t, inRange128(r.IOVA(), r.Len(), va, length), r.CheckRange(va, length) == nil,
			"iova %#x len %d: va %#x length %d", r.IOVA(), r.Len(), va, length)
	}
}

// inRange128 is the reference: iova <= va and va+length <= iova+size, in
// 128-bit arithmetic.
func inRange128(iova, size, va, length uint64) bool {
	if va < iova {
		return false
	}
	endLo, endHi := bits.Add64(va, length, 0)
	limLo, limHi := bits.Add64(iova, size, 0)
	return endHi < limHi || endHi == limHi && endLo <= limLo
}

func FuzzCheckRange(f *testing.F) {
	f.Add(uint64(0x1000), uint64(4096), uint64(0xFFFFFFFFFFFFFFF8), uint64(8))
	f.Add(uint64(0x1000), uint64(4096), uint64(0xFFFFFFFFFFFFFFFF), uint64(2))
	f.Add(uint64(0x1000), uint64(4096), uint64(0x1000), uint64(1<<31+1))
	f.Add(uint64(math.MaxUint64-4095), uint64(4096), uint64(math.MaxUint64-7), uint64(8))
	tbl := newTable(f)
	pd := tbl.AllocPD()
	buf := make([]byte, 1<<16)
	f.Fuzz(func(t *testing.T, iova, size, va, length uint64) {
		size = size%uint64(len(buf)) + 1
		r, err := tbl.Register(pd, mr.RegisterConfig{Buf: buf[:size], IOVA: iova})
		if err != nil {
			require.ErrorIs(t, err, mr.ErrInvalidArg)
			return
		}
		defer func() { require.NoError(t, tbl.Deregister(r)) }()
		want := inRange128(r.IOVA(), size, va, length)
		require.Equal(t, want, r.CheckRange(va, length) == nil)
		if length <= 16 {
			err := r.ReadAt(make([]byte, length), va)
			if want {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, mr.ErrOutOfRange)
			}
		}
	})
}

// TestC4_WrongPD: an rkey of a region in another PD is refused.
func TestC4_WrongPD(t *testing.T) {
	tbl := newTable(t)
	pdA, pdB := tbl.AllocPD(), mr.NewPD()
	r := register(t, tbl, pdA, 0x1000, 64, all)
	_, err := tbl.LookupRemote(pdB, r.RKey(), 0x1000, 8, mr.RemoteRead)
	require.ErrorIs(t, err, mr.ErrWrongPD)
	_, err = tbl.LookupLocal(pdB, r.LKey(), 0x1000, 8, 0)
	require.ErrorIs(t, err, mr.ErrWrongPD)
	_, err = tbl.LookupRemote(nil, r.RKey(), 0x1000, 8, mr.RemoteRead)
	require.ErrorIs(t, err, mr.ErrWrongPD)
	_, err = tbl.LookupRemote(pdA, r.RKey(), 0x1000, 8, mr.RemoteRead)
	require.NoError(t, err)
}

func TestInvalidKey(t *testing.T) {
	tbl := newTable(t)
	pd := tbl.AllocPD()
	r := register(t, tbl, pd, 0x1000, 64, all)
	for _, k := range []mr.Key{0, r.RKey() ^ 1, r.RKey() + 0x100} {
		_, err := tbl.LookupRemote(pd, k, 0x1000, 8, mr.RemoteRead)
		assert.ErrorIs(t, err, mr.ErrInvalidKey, "key %v", k)
	}
	assert.ErrorIs(t, r.Recheck(r.RKey()^1), mr.ErrInvalidKey)
	assert.NoError(t, r.Recheck(r.RKey()))
}

// TestC5_AfterDeregister: after Deregister the key, and every earlier
// *Region, is dead.
func TestC5_AfterDeregister(t *testing.T) {
	tbl := newTable(t)
	pd := tbl.AllocPD()
	buf := []byte("0123456789abcdef")
	r, err := tbl.Register(pd, mr.RegisterConfig{Buf: buf, IOVA: 0x1000, Access: all})
	require.NoError(t, err)
	key := r.RKey()

	// A READ is in its replay window: it looked the region up earlier.
	replay, err := tbl.LookupRemote(pd, key, 0x1000, 16, mr.RemoteRead)
	require.NoError(t, err)
	require.NoError(t, replay.Recheck(key))

	require.NoError(t, tbl.Deregister(r))
	assert.False(t, r.Valid())
	assert.Equal(t, 0, pd.Regions())
	assert.Equal(t, 0, tbl.Len())

	_, err = tbl.LookupRemote(pd, key, 0x1000, 16, mr.RemoteRead)
	assert.ErrorIs(t, err, mr.ErrDeregistered)
	_, err = tbl.LookupLocal(pd, key, 0x1000, 16, 0)
	assert.ErrorIs(t, err, mr.ErrDeregistered)

	p := make([]byte, 16)
	assert.ErrorIs(t, replay.Recheck(key), mr.ErrDeregistered)
	assert.ErrorIs(t, replay.ReadAt(p, 0x1000), mr.ErrDeregistered)
	assert.Equal(t, make([]byte, 16), p, "nothing was read")
	assert.ErrorIs(t, replay.WriteAt([]byte("XXXX"), 0x1000), mr.ErrDeregistered)
	assert.Equal(t, "0123456789abcdef", string(buf), "nothing was written")
	_, err = replay.CompareAndSwap(0x1000, 0, 1)
	assert.ErrorIs(t, err, mr.ErrDeregistered)
	_, err = replay.FetchAndAdd(0x1008, 1)
	assert.ErrorIs(t, err, mr.ErrDeregistered)
	assert.ErrorIs(t, replay.Acquire(), mr.ErrDeregistered)
	assert.ErrorIs(t, tbl.Deregister(r), mr.ErrDeregistered)

	// After the quarantine the key is simply unknown.
	for range mr.ReuseWindow + 1 {
		require.NoError(t, tbl.Deregister(register(t, tbl, pd, 0x1000, 1, 0)))
	}
	_, err = tbl.LookupRemote(pd, key, 0x1000, 16, mr.RemoteRead)
	assert.ErrorIs(t, err, mr.ErrInvalidKey)
}

func TestDeregisterForeign(t *testing.T) {
	a, b := newTable(t), newTable(t)
	r := register(t, a, a.AllocPD(), 0x1000, 8, 0)
	assert.ErrorIs(t, b.Deregister(r), mr.ErrInvalidArg)
	assert.ErrorIs(t, b.Deregister(nil), mr.ErrInvalidArg)
	assert.True(t, r.Valid())
}

func TestPDDealloc(t *testing.T) {
	tbl := newTable(t)
	pd := tbl.AllocPD()
	r := register(t, tbl, pd, 0x1000, 8, 0)
	assert.Equal(t, 1, pd.Regions())
	require.ErrorIs(t, pd.Dealloc(), mr.ErrBusy, "E6: a PD with a live MR is not freed")
	require.NoError(t, tbl.Deregister(r))
	require.NoError(t, pd.Dealloc())
	require.ErrorIs(t, pd.Dealloc(), mr.ErrDeallocated)
	_, err := tbl.Register(pd, mr.RegisterConfig{Buf: make([]byte, 8)})
	require.ErrorIs(t, err, mr.ErrDeallocated)
	assert.Equal(t, 0, tbl.Len())
}

func TestReadWriteAt(t *testing.T) {
	tbl := newTable(t)
	buf := make([]byte, 32)
	r, err := tbl.Register(tbl.AllocPD(), mr.RegisterConfig{Buf: buf, IOVA: 0x4000, Access: rw})
	require.NoError(t, err)
	require.NoError(t, r.WriteAt([]byte("hello"), 0x4010))
	assert.Equal(t, "hello", string(buf[16:21]))
	p := make([]byte, 5)
	require.NoError(t, r.ReadAt(p, 0x4010))
	assert.Equal(t, "hello", string(p))
	require.NoError(t, r.ReadAt(nil, 0x4020), "zero length at the end")
}

func TestAtomics(t *testing.T) {
	tbl := newTable(t)
	buf := make([]byte, 32)
	r, err := tbl.Register(tbl.AllocPD(), mr.RegisterConfig{Buf: buf, IOVA: 0x8000, Access: all})
	require.NoError(t, err)
	binary.LittleEndian.PutUint64(buf[8:], 41)

	orig, err := r.FetchAndAdd(0x8008, 1)
	require.NoError(t, err)
	assert.Equal(t, uint64(41), orig)
	assert.Equal(t, []byte{42, 0, 0, 0, 0, 0, 0, 0}, buf[8:16], "little-endian in memory")

	orig, err = r.FetchAndAdd(0x8008, math.MaxUint64) // -1
	require.NoError(t, err)
	assert.Equal(t, uint64(42), orig)
	assert.Equal(t, uint64(41), binary.LittleEndian.Uint64(buf[8:]))

	orig, err = r.CompareAndSwap(0x8008, 7, 99)
	require.NoError(t, err)
	assert.Equal(t, uint64(41), orig, "mismatch returns the original")
	assert.Equal(t, uint64(41), binary.LittleEndian.Uint64(buf[8:]), "and leaves it")

	orig, err = r.CompareAndSwap(0x8008, 41, 0x0102030405060708)
	require.NoError(t, err)
	assert.Equal(t, uint64(41), orig)
	assert.Equal(t, []byte{8, 7, 6, 5, 4, 3, 2, 1}, buf[8:16])

	for _, va := range []uint64{0x8001, 0x8004, 0x8007, 0x801c} {
		_, err = r.FetchAndAdd(va, 1)
		assert.ErrorIs(t, err, mr.ErrMisaligned, "va %#x", va)
		_, err = r.CompareAndSwap(va, 0, 1)
		assert.ErrorIs(t, err, mr.ErrMisaligned, "va %#x", va)
	}
	_, err = r.FetchAndAdd(0x8020, 1)
	assert.ErrorIs(t, err, mr.ErrOutOfRange)
	_, err = r.CompareAndSwap(0x7ff8, 0, 1)
	assert.ErrorIs(t, err, mr.ErrOutOfRange)
}

func TestPinAndSlice(t *testing.T) {
	tbl := newTable(t)
	buf := []byte("0123456789")
	r, err := tbl.Register(tbl.AllocPD(), mr.RegisterConfig{Buf: buf, IOVA: 0x100})
	require.NoError(t, err)

	_, err = r.Slice(0x100, 4)
	require.ErrorIs(t, err, mr.ErrNotPinned)

	require.NoError(t, r.Acquire())
	require.NoError(t, r.Acquire())
	s, err := r.Slice(0x102, 3)
	require.NoError(t, err)
	assert.Equal(t, "234", string(s))
	assert.Equal(t, 3, cap(s), "capacity is capped")
	_, err = r.Slice(0x108, 3)
	assert.ErrorIs(t, err, mr.ErrOutOfRange)

	done := make(chan error)
	go func() { done <- tbl.Deregister(r) }()
	require.Eventually(t, func() bool { return !r.Valid() }, time.Second, time.Millisecond,
		"Deregister invalidates at once")
	assert.ErrorIs(t, r.Acquire(), mr.ErrDeregistered, "no new pins")
	assert.ErrorIs(t, r.ReadAt(make([]byte, 1), 0x100), mr.ErrDeregistered)
	_, err = tbl.LookupLocal(r.PD(), r.LKey(), 0x100, 1, 0)
	assert.ErrorIs(t, err, mr.ErrDeregistered)
	s, err = r.Slice(0x100, 10)
	require.NoError(t, err, "a pin holder keeps its memory")
	assert.Equal(t, "0123456789", string(s))

	r.Release()
	select {
	case err := <-done:
		t.Fatalf("Deregister returned (%v) with a pin held", err)
	case <-time.After(20 * time.Millisecond):
	}
	r.Release()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Deregister did not return after the last Release")
	}
	assert.ErrorIs(t, tbl.Deregister(r), mr.ErrDeregistered)
	assert.Panics(t, r.Release)
}

// TestPin checks Pin: the slice it returns, that it holds Deregister off
// like Acquire, and that it refuses out-of-range, invalidated and
// deregistered regions without taking a pin.
func TestPin(t *testing.T) {
	tbl := newTable(t)
	pd := tbl.AllocPD()
	buf := []byte("0123456789")
	r, err := tbl.Register(pd, mr.RegisterConfig{Buf: buf, IOVA: 0x100, Invalidatable: true})
	require.NoError(t, err)

	s, err := r.Pin(0x103, 4)
	require.NoError(t, err)
	assert.Equal(t, "3456", string(s))
	assert.Equal(t, 4, cap(s), "capacity is capped")
	_, err = r.Slice(0x100, 1)
	assert.NoError(t, err, "Pin pins")
	r.Release()
	_, err = r.Slice(0x100, 1)
	assert.ErrorIs(t, err, mr.ErrNotPinned, "Release unpins")

	_, err = r.Pin(0x108, 3)
	assert.ErrorIs(t, err, mr.ErrOutOfRange)
	_, err = r.Slice(0x100, 1)
	assert.ErrorIs(t, err, mr.ErrNotPinned, "a failed Pin takes no pin")

	s, err = r.Pin(0x100, 10)
	require.NoError(t, err)
	done := make(chan error)
	go func() { done <- tbl.Deregister(r) }()
	require.Eventually(t, func() bool { return !r.Valid() }, time.Second, time.Millisecond)
	_, err = r.Pin(0x100, 1)
	assert.ErrorIs(t, err, mr.ErrDeregistered)
	assert.Equal(t, "0123456789", string(s), "the pin holder still reads registered memory")
	select {
	case err := <-done:
		t.Fatalf("Deregister returned (%v) with a pin held", err)
	case <-time.After(20 * time.Millisecond):
	}
	r.Release()
	require.NoError(t, <-done)

	r2, err := tbl.Register(pd, mr.RegisterConfig{Buf: buf, IOVA: 0x100, Invalidatable: true})
	require.NoError(t, err)
	require.NoError(t, tbl.Invalidate(pd, r2.LKey()))
	_, err = r2.Pin(0x100, 1)
	assert.ErrorIs(t, err, mr.ErrInvalidated)
	require.NoError(t, tbl.Deregister(r2), "a refused Pin left no pin behind")
}

// TestHotPathsDoNotAllocate pins lookups, checks, copies and atomics at zero
// allocations, errors included.
func TestHotPathsDoNotAllocate(t *testing.T) {
	tbl := newTable(t)
	pd := tbl.AllocPD()
	r := register(t, tbl, pd, 0x1000, 4096, all)
	dead := register(t, tbl, pd, 0x1000, 64, all)
	deadKey := dead.RKey()
	require.NoError(t, tbl.Deregister(dead))
	p := make([]byte, 1024)
	var sink error
	tests := []struct {
		name string
		f    func()
	}{
		{"LookupRemote", func() { _, sink = tbl.LookupRemote(pd, r.RKey(), 0x1000, 1024, mr.RemoteRead) }},
		{"LookupRemote bad key", func() { _, sink = tbl.LookupRemote(pd, r.RKey()^1, 0x1000, 1024, mr.RemoteRead) }},
		{"LookupRemote dead key", func() { _, sink = tbl.LookupRemote(pd, deadKey, 0x1000, 1, mr.RemoteRead) }},
		{"LookupRemote out of range", func() { _, sink = tbl.LookupRemote(pd, r.RKey(), 0xFFFFFFFFFFFFFFF8, 8, mr.RemoteRead) }},
		{"LookupLocal", func() { _, sink = tbl.LookupLocal(pd, r.LKey(), 0x1000, 1024, mr.LocalWrite) }},
		{"CheckRange", func() { sink = r.CheckRange(0x1000, 4096) }},
		{"Recheck", func() { sink = r.Recheck(r.RKey()) }},
		{"ReadAt", func() { sink = r.ReadAt(p, 0x1400) }},
		{"WriteAt", func() { sink = r.WriteAt(p, 0x1400) }},
		{"CompareAndSwap", func() { _, sink = r.CompareAndSwap(0x1008, 0, 1) }},
		{"FetchAndAdd", func() { _, sink = r.FetchAndAdd(0x1008, 1) }},
		{"Pin Release", func() {
			_, sink = r.Pin(0x1000, 1024)
			r.Release()
		}},
		{"Acquire Slice Release", func() {
			sink = r.Acquire()
			_, sink = r.Slice(0x1000, 1024)
			r.Release()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Zero(t, testing.AllocsPerRun(1000, tc.f))
		})
	}
	_ = sink
}
