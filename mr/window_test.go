package mr_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/mr"
)

const bindable = all | mr.MWBind

func TestWindowType1Lifecycle(t *testing.T) {
	tbl := newTable(t)
	pd := tbl.AllocPD()
	r := register(t, tbl, pd, 0x10000, 4096, bindable)
	w, err := tbl.AllocWindow(pd, mr.WindowType1)
	require.NoError(t, err)
	assert.Equal(t, mr.WindowValid, w.State(), "rxe_alloc_mw: type 1 starts valid")
	assert.Nil(t, w.Bound())
	k0 := w.RKey()
	next := k0&^0xff | (k0+1)&0xff // ibv_inc_rkey: the key byte wraps within the index

	// Unbound: the rkey reaches nothing.
	_, _, err = tbl.ResolveRemote(pd, 1, k0, 0x10000, 8, mr.RemoteRead)
	assert.ErrorIs(t, err, mr.ErrInvalidated)

	k1, err := tbl.Bind(w, pd, 1, mr.BindConfig{Region: r, Addr: 0x10100, Length: 0x100,
		Access: mr.RemoteRead | mr.RemoteWrite, RKey: next})
	require.NoError(t, err)
	assert.Equal(t, next, k1)
	assert.Equal(t, k1, w.RKey())
	assert.Same(t, r, w.Bound())

	got, va, err := tbl.ResolveRemote(pd, 7, k1, 0x10180, 0x80, mr.RemoteWrite)
	require.NoError(t, err, "type 1: any QP of the PD")
	assert.Same(t, r, got)
	assert.Equal(t, uint64(0x10180), va)
	_, _, err = tbl.ResolveRemote(pd, 7, k0, 0x10180, 8, mr.RemoteWrite)
	assert.ErrorIs(t, err, mr.ErrInvalidKey, "the old key byte")

	// Rebind elsewhere; unbind with a zero length.
	_, err = tbl.Bind(w, pd, 1, mr.BindConfig{Region: r, Addr: 0x10000, Length: 16, Access: mr.RemoteRead})
	require.NoError(t, err)
	_, _, err = tbl.ResolveRemote(pd, 7, k1, 0x10180, 8, mr.RemoteRead)
	assert.ErrorIs(t, err, mr.ErrOutOfRange)
	assert.ErrorIs(t, tbl.Deregister(r), mr.ErrBusy, "rxe_dereg_mr: windows bound")
	assert.ErrorIs(t, tbl.Invalidate(pd, k1), mr.ErrNotInvalidatable, "o10-37.2.26")
	_, err = tbl.Bind(w, pd, 1, mr.BindConfig{})
	require.NoError(t, err)
	assert.Nil(t, w.Bound())
	require.NoError(t, tbl.Deregister(r))

	require.NoError(t, tbl.DeallocWindow(w))
	assert.Equal(t, mr.WindowInvalid, w.State())
	assert.ErrorIs(t, tbl.DeallocWindow(w), mr.ErrWindowState)
	_, err = tbl.Bind(w, pd, 1, mr.BindConfig{})
	assert.ErrorIs(t, err, mr.ErrWindowState)
	require.NoError(t, pd.Dealloc(), "the window no longer holds the PD")
}

func TestWindowType2Lifecycle(t *testing.T) {
	tbl := newTable(t)
	pd := tbl.AllocPD()
	r := register(t, tbl, pd, 0x10000, 4096, bindable)
	w, err := tbl.AllocWindow(pd, mr.WindowType2)
	require.NoError(t, err)
	assert.Equal(t, mr.WindowFree, w.State())
	const qpn bth.QPN = 0x11

	k := w.RKey()&^0xff | 0x5a
	got, err := tbl.Bind(w, pd, qpn, mr.BindConfig{Region: r, Addr: 0x10800, Length: 0x800,
		Access: mr.RemoteWrite, ZeroBased: true, RKey: k})
	require.NoError(t, err)
	assert.Equal(t, k, got)
	assert.Equal(t, mr.WindowValid, w.State())

	// Zero-based: peers address it from 0.
	reg, va, err := tbl.ResolveRemote(pd, qpn, k, 0x10, 4, mr.RemoteWrite)
	require.NoError(t, err)
	assert.Same(t, r, reg)
	assert.Equal(t, uint64(0x10810), va)
	_, _, err = tbl.ResolveRemote(pd, qpn, k, 0x7fd, 4, mr.RemoteWrite)
	assert.ErrorIs(t, err, mr.ErrOutOfRange)
	_, _, err = tbl.ResolveRemote(pd, qpn, k, 0, 4, mr.RemoteRead)
	assert.ErrorIs(t, err, mr.ErrAccessDenied, "the window's rights, not the region's")
	_, _, err = tbl.ResolveRemote(pd, qpn+1, k, 0, 4, mr.RemoteWrite)
	assert.ErrorIs(t, err, mr.ErrInvalidated, "type 2B: only the QP it was bound through")
	_, _, err = tbl.ResolveRemote(tbl.AllocPD(), qpn, k, 0, 4, mr.RemoteWrite)
	assert.ErrorIs(t, err, mr.ErrWrongPD)

	_, err = tbl.Bind(w, pd, qpn, mr.BindConfig{Region: r, Addr: 0x10000, Length: 8, RKey: k + 1})
	assert.ErrorIs(t, err, mr.ErrWindowState, "o10-37.2.30: rebind needs an invalidate first")

	require.NoError(t, tbl.Invalidate(pd, k))
	assert.Equal(t, mr.WindowFree, w.State())
	_, _, err = tbl.ResolveRemote(pd, qpn, k, 0x10, 4, mr.RemoteWrite)
	assert.ErrorIs(t, err, mr.ErrInvalidated)
	assert.ErrorIs(t, tbl.Invalidate(pd, k), mr.ErrWindowState)
	assert.ErrorIs(t, tbl.Invalidate(pd, k^0xff), mr.ErrInvalidKey)

	_, err = tbl.Bind(w, pd, qpn, mr.BindConfig{Region: r, Addr: 0x10000, Length: 8, Access: mr.RemoteRead, RKey: k + 1})
	require.NoError(t, err)
	_, _, err = tbl.ResolveRemote(pd, qpn, k+1, 0x10000, 8, mr.RemoteRead)
	require.NoError(t, err)
	require.NoError(t, tbl.DeallocWindow(w))
	_, _, err = tbl.ResolveRemote(pd, qpn, k+1, 0x10000, 8, mr.RemoteRead)
	assert.ErrorIs(t, err, mr.ErrInvalidKey)
	require.NoError(t, tbl.Deregister(r), "dealloc unbound it")
}

func TestWindowBindChecks(t *testing.T) {
	tbl := newTable(t)
	pd := tbl.AllocPD()
	other := tbl.AllocPD()
	bind := register(t, tbl, pd, 0x10000, 4096, bindable)
	noBind := register(t, tbl, pd, 0x20000, 4096, all)
	readOnly := register(t, tbl, pd, 0x30000, 4096, mr.RemoteRead|mr.MWBind)
	zb, err := tbl.Register(pd, mr.RegisterConfig{Buf: make([]byte, 64), ZeroBased: true, Access: bindable})
	require.NoError(t, err)
	foreign := register(t, tbl, other, 0x40000, 4096, bindable)

	tests := []struct {
		name string
		typ  mr.WindowType
		qpPD *mr.PD
		cfg  mr.BindConfig
		want error
	}{
		{"ok", mr.WindowType2, pd, mr.BindConfig{Region: bind, Addr: 0x10000, Length: 4096, Access: mr.RemoteWrite | mr.RemoteAtomic}, nil},
		{"C10-73 no MW_BIND", mr.WindowType2, pd, mr.BindConfig{Region: noBind, Addr: 0x20000, Length: 8, Access: mr.RemoteRead}, mr.ErrAccessDenied},
		{"C10-74 writable needs local write", mr.WindowType2, pd, mr.BindConfig{Region: readOnly, Addr: 0x30000, Length: 8, Access: mr.RemoteWrite}, mr.ErrAccessDenied},
		{"C10-74 readable ok", mr.WindowType2, pd, mr.BindConfig{Region: readOnly, Addr: 0x30000, Length: 8, Access: mr.RemoteRead}, nil},
		{"C10-75 beyond the region", mr.WindowType2, pd, mr.BindConfig{Region: bind, Addr: 0x10ff8, Length: 16, Access: mr.RemoteRead}, mr.ErrOutOfRange},
		{"C10-75 before the region", mr.WindowType2, pd, mr.BindConfig{Region: bind, Addr: 0xfff8, Length: 16, Access: mr.RemoteRead}, mr.ErrOutOfRange},
		{"C10-75 wrapping", mr.WindowType1, pd, mr.BindConfig{Region: bind, Addr: ^uint64(7), Length: 16, Access: mr.RemoteRead}, mr.ErrOutOfRange},
		{"C10-72 QP of another PD", mr.WindowType2, other, mr.BindConfig{Region: bind, Addr: 0x10000, Length: 8, Access: mr.RemoteRead}, mr.ErrWrongPD},
		{"region of another PD", mr.WindowType1, pd, mr.BindConfig{Region: foreign, Addr: 0x40000, Length: 8, Access: mr.RemoteRead}, mr.ErrWrongPD},
		{"o10-37.2.40 type 2 without length", mr.WindowType2, pd, mr.BindConfig{Region: bind, Addr: 0x10000, Access: mr.RemoteRead}, mr.ErrInvalidArg},
		{"o10-36.2.2 zero-based type 1", mr.WindowType1, pd, mr.BindConfig{Region: bind, Addr: 0x10000, Length: 8, ZeroBased: true}, mr.ErrInvalidArg},
		{"zero-based region", mr.WindowType2, pd, mr.BindConfig{Region: zb, Addr: 0, Length: 8, Access: mr.RemoteRead}, mr.ErrInvalidArg},
		{"local rights", mr.WindowType2, pd, mr.BindConfig{Region: bind, Addr: 0x10000, Length: 8, Access: mr.LocalWrite}, mr.ErrInvalidArg},
		{"another window's key", mr.WindowType2, pd, mr.BindConfig{Region: bind, Addr: 0x10000, Length: 8, Access: mr.RemoteRead, RKey: 0x100}, mr.ErrInvalidArg},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := tbl.AllocWindow(pd, tc.typ)
			require.NoError(t, err)
			defer func() { require.NoError(t, tbl.DeallocWindow(w)) }()
			before := w.RKey()
			_, err = tbl.Bind(w, tc.qpPD, 3, tc.cfg)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tc.want)
			assert.Nil(t, w.Bound(), "a failed bind changes nothing")
			assert.Equal(t, before, w.RKey())
		})
	}
}

func TestInvalidateRegion(t *testing.T) {
	tbl := newTable(t)
	pd := tbl.AllocPD()
	plain := register(t, tbl, pd, 0x10000, 64, all)
	assert.ErrorIs(t, tbl.Invalidate(pd, plain.RKey()), mr.ErrNotInvalidatable,
		"rxe_invalidate_mr: only a fast-registration MR")

	fr, err := tbl.Register(pd, mr.RegisterConfig{Buf: make([]byte, 64), IOVA: 0x20000, Access: all | mr.MWBind, Invalidatable: true})
	require.NoError(t, err)
	assert.ErrorIs(t, tbl.Invalidate(tbl.AllocPD(), fr.RKey()), mr.ErrWrongPD)
	w, err := tbl.AllocWindow(pd, mr.WindowType1)
	require.NoError(t, err)
	_, err = tbl.Bind(w, pd, 1, mr.BindConfig{Region: fr, Addr: 0x20000, Length: 8, Access: mr.RemoteRead})
	require.NoError(t, err)
	assert.ErrorIs(t, tbl.Invalidate(pd, fr.RKey()), mr.ErrBusy, "rxe: windows bound")
	_, err = tbl.Bind(w, pd, 1, mr.BindConfig{})
	require.NoError(t, err)

	require.NoError(t, tbl.Invalidate(pd, fr.RKey()))
	_, err = tbl.LookupRemote(pd, fr.RKey(), 0x20000, 8, mr.RemoteRead)
	assert.ErrorIs(t, err, mr.ErrInvalidated)
	_, err = tbl.LookupLocal(pd, fr.LKey(), 0x20000, 8, 0)
	assert.ErrorIs(t, err, mr.ErrInvalidated)
	assert.ErrorIs(t, tbl.RecheckRemote(pd, 1, fr, fr.RKey(), 0x20000, 8, 0x20000), mr.ErrInvalidated)
	assert.ErrorIs(t, tbl.Invalidate(pd, fr.RKey()), mr.ErrInvalidated)
	_, err = tbl.Bind(w, pd, 1, mr.BindConfig{Region: fr, Addr: 0x20000, Length: 8, Access: mr.RemoteRead})
	assert.ErrorIs(t, err, mr.ErrInvalidated)
	require.NoError(t, tbl.Deregister(fr))
	assert.ErrorIs(t, tbl.Invalidate(pd, fr.RKey()), mr.ErrDeregistered)
	assert.ErrorIs(t, tbl.Invalidate(pd, 0x12345678), mr.ErrInvalidKey)
}

func TestWindowKeysDisjointFromRegions(t *testing.T) {
	tbl := newTable(t)
	pd := tbl.AllocPD()
	var ws []*mr.Window
	for range 64 {
		w, err := tbl.AllocWindow(pd, mr.WindowType2)
		require.NoError(t, err)
		ws = append(ws, w)
	}
	for range 256 {
		r := register(t, tbl, pd, 0, 8, all)
		for _, w := range ws {
			require.NotEqual(t, w.RKey()>>8, r.RKey()>>8, "a region key inside a window's key space")
		}
	}
	assert.Equal(t, 256, tbl.Len(), "Len counts regions only")
}

func TestRecheckRemoteWindow(t *testing.T) {
	tbl := newTable(t)
	pd := tbl.AllocPD()
	r := register(t, tbl, pd, 0x10000, 64, bindable)
	w, err := tbl.AllocWindow(pd, mr.WindowType2)
	require.NoError(t, err)
	k, err := tbl.Bind(w, pd, 5, mr.BindConfig{Region: r, Addr: 0x10000, Length: 64, Access: mr.RemoteRead})
	require.NoError(t, err)
	require.NoError(t, tbl.RecheckRemote(pd, 5, r, k, 0x10000, 64, 0x10000))
	require.NoError(t, tbl.RecheckRemote(pd, 5, r, r.RKey(), 0x10000, 64, 0x10000))
	require.NoError(t, tbl.Invalidate(pd, k))
	assert.ErrorIs(t, tbl.RecheckRemote(pd, 5, r, k, 0x10000, 64, 0x10000), mr.ErrInvalidated, "a replay after the invalidation")
}

// TestRecheckRemoteAfterRebind: RecheckRemote (before a duplicate READ is
// replayed with the translation saved at its first execution) refuses a
// window whose key is unchanged but which a rebind moved and made
// write-only (Bind with RKey 0 keeps the key). Found in review: it once
// checked only the key, state and region.
func TestRecheckRemoteAfterRebind(t *testing.T) {
	tbl := newTable(t)
	pd := tbl.AllocPD()
	r := register(t, tbl, pd, 0x10000, 4096, bindable)
	w, err := tbl.AllocWindow(pd, mr.WindowType1)
	if err != nil {
		t.Fatal(err)
	}
	k, err := tbl.Bind(w, pd, 1, mr.BindConfig{Region: r, Addr: 0x10000, Length: 64, Access: mr.RemoteRead})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tbl.ResolveRemote(pd, 1, k, 0x10000, 64, mr.RemoteRead); err != nil {
		t.Fatal(err)
	}
	// Rebind elsewhere, write-only, same key.
	if k2, err := tbl.Bind(w, pd, 1, mr.BindConfig{Region: r, Addr: 0x10800, Length: 64, Access: mr.RemoteWrite}); err != nil || k2 != k {
		t.Fatal(k2, err)
	}
	if _, _, err := tbl.ResolveRemote(pd, 1, k, 0x10000, 64, mr.RemoteRead); err == nil {
		t.Fatal("fresh READ should fail")
	}
	if err := tbl.RecheckRemote(pd, 1, r, k, 0x10000, 64, 0x10000); err == nil {
		t.Fatal("RecheckRemote passes: a duplicate READ would be replayed from 0x10000 with no RemoteRead on the window")
	}
}
