package mr_test

import (
	"sync"
	"testing"

	"github.com/goroce/goroce/mr"
)

// TestResolveRemoteKeyRace (run with -race): ResolveRemote and Bind on one
// window from two goroutines. Found in review: ResolveRemote read the
// window's key after releasing the table lock that Bind writes it under.
func TestResolveRemoteKeyRace(t *testing.T) {
	tbl := newTable(t)
	pd := tbl.AllocPD()
	r := register(t, tbl, pd, 0x10000, 4096, bindable)
	w, _ := tbl.AllocWindow(pd, mr.WindowType1)
	k := w.RKey()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 2000; i++ {
			tbl.Bind(w, pd, 1, mr.BindConfig{Region: r, Addr: 0x10000, Length: 64, Access: mr.RemoteRead, RKey: k&^0xff | mr.Key(i)&0xff})
		}
	}()
	for i := 0; i < 2000; i++ {
		tbl.ResolveRemote(pd, 1, k&^0xff|mr.Key(i+7)&0xff, 0x10000, 8, mr.RemoteRead)
	}
	wg.Wait()
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
