package roce

import (
	"fmt"

	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
)

// AllocMW allocates a memory window of pd (ibv_alloc_mw; IBA 10.6.7). A
// type 1 window is bound with QP.BindMW, a type 2 window with a BIND_MW
// work request (WRBindMW) on a QP of pd, through which alone peers may
// then use it.
func (d *Device) AllocMW(pd *PD, typ MWType) (*MW, error) {
	return d.mrs.AllocWindow(pd, typ)
}

// DeallocMW deallocates a memory window (ibv_dealloc_mw): its rkey stops
// working at once.
func (d *Device) DeallocMW(w *MW) error { return d.mrs.DeallocWindow(w) }

// BindMW binds a type 1 memory window through the QP, as ibv_bind_mw does:
// it posts a BIND_MW work request whose new rkey is the window's key with
// its low byte incremented (ibv_inc_rkey) — counted from the key of the
// previous bind if that one is still queued — and returns that rkey,
// which peers may use once the request completes (WCBindMW) and until
// the next bind. cfg.RKey is ignored. A bind the IBA forbids (see
// mr.Table.Bind) completes with IBV_WC_MW_BIND_ERR and moves the QP to ERR,
// as in rxe. Type 2 windows are bound with a WRBindMW request instead,
// choosing their own key byte.
func (h *QP) BindMW(w *MW, wrid uint64, flags SendFlags, cfg MWBindConfig) (Key, error) {
	if w == nil || w.Type() != mr.WindowType1 {
		return 0, fmt.Errorf("%w: ibv_bind_mw binds type 1 windows", ErrInvalidArg)
	}
	cfg.RKey = w.NextBindKey() // counted from earlier binds still queued
	wr := qp.SendWR{WRID: wrid, Opcode: qp.WRBindMW, Flags: flags, BindMW: qp.BindMW{Window: w, BindConfig: cfg}}
	if err := h.PostSend(&wr); err != nil {
		return 0, err
	}
	return cfg.RKey, nil
}

// IncRKey returns k with its low 8 bits, the part of a memory window's
// rkey a bind may change, incremented modulo 256 (ibv_inc_rkey).
func IncRKey(k Key) Key { return k&^0xff | (k+1)&0xff }
