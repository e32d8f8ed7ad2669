package mr_test

import (
	"sync"
	"testing"

	"github.com/goroce/goroce/mr"
)

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

// TestDeregisterRacesBind: Deregister and Bind on one region from two
// goroutines never both succeed (a window bound to a deregistered region).
// Found in review: Deregister read the bound-window count outside the
// table lock that Bind updates it under.
func TestDeregisterRacesBind(t *testing.T) {
	for i := 0; i < 2000; i++ {
		tbl := newTable(t)
		pd := tbl.AllocPD()
		r := register(t, tbl, pd, 0x10000, 4096, bindable)
		w, _ := tbl.AllocWindow(pd, mr.WindowType1)
		var wg sync.WaitGroup
		var bindErr, deregErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, bindErr = tbl.Bind(w, pd, 1, mr.BindConfig{Region: r, Addr: 0x10000, Length: 64, Access: mr.RemoteRead})
		}()
		go func() { defer wg.Done(); deregErr = tbl.Deregister(r) }()
		wg.Wait()
		if bindErr == nil && deregErr == nil {
			t.Fatalf("iteration %d: both Bind and Deregister succeeded: window %v bound to a deregistered region", i, w.Bound() != nil)
		}
	}
}
