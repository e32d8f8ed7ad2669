package pingpong

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/perf"
	"github.com/goroce/goroce/internal/perftest"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/link/impair"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// QKey is ud_pingpong's Q_Key, the QP's own and the one each SEND carries.
const QKey = 0x11111111

// Config describes one ibv_rc_pingpong, ibv_uc_pingpong or ibv_ud_pingpong
// run. Zero values are that tool's defaults.
type Config struct {
	// Type is the transport, and so the tool goroce plays: qp.TypeRC (the
	// zero value picks it, rc_pingpong), qp.TypeUC (uc_pingpong: the same
	// exchange and loop over a UC QP, no ACKs, so a lost packet stalls the
	// run) or qp.TypeUD (ud_pingpong: a UD QP with Q_Key QKey, SENDs to an
	// address handle of the peer's QPN, Size at most MTU, receive buffers
	// of Size+40 bytes whose first 40 are the GRH area).
	Type qp.Type
	// Server waits for the client on Port; otherwise Peer is the server.
	Server bool
	Peer   string
	Port   int    // -p (default perftest.Port, as ibv_rc_pingpong)
	Listen string // the server's listening address (default all)
	Size   int    // -s (4096; ud_pingpong's 2048 for UD)
	Iters  int    // -n (1000)
	MTU    qp.MTU // -m (1024): rc_pingpong sets it on each side, unnegotiated; for UD the port MTU, which bounds Size
	// Check fills each message with a pattern that changes with every
	// message and checks that each received message carries the peer's
	// (goroce's), with the byte count expected (Size, plus the GRH area
	// for UD) and the payload after the GRH area for UD. Only a goroce peer
	// sends the pattern.
	Check   bool
	RxDepth int // -r (500)
	// Timeout bounds each step of the exchange, connecting, and any stretch
	// of the ping-pong without a completion (default 30 s).
	Timeout time.Duration
	// Out receives rc_pingpong's report; nil discards it.
	Out io.Writer
	// Stats, if set, receives one line of device counters at the end
	// (perf.WriteStats), even when the run fails.
	Stats io.Writer
	// RoCEPort is the UDP port of both devices (default 4791; tests of two
	// goroce processes on one host pick another).
	RoCEPort uint16
	// Impair, if set, impairs the device's link both ways (not the TCP
	// exchange); Result.Impair then says what the peer did about it.
	Impair *impair.Config
	// ImpairOut, if set with Impair, receives that report as a block
	// (perf.WritePeerReport) at the end, even when the run fails.
	ImpairOut io.Writer
}

// Result is what rc_pingpong prints: bytes moved both ways, iterations,
// elapsed time.
type Result struct {
	Bytes   int64
	Iters   int
	Seconds float64
	// Impair is what the peer did about the impaired path (Config.Impair).
	Impair *perf.PeerReport
}

// Mbps returns the rate as rc_pingpong prints it (Mbit/sec).
func (r Result) Mbps() float64 { return float64(r.Bytes) * 8 / r.Seconds / 1e6 }

// USecPerIter returns the time of one iteration in microseconds.
func (r Result) USecPerIter() float64 { return r.Seconds * 1e6 / float64(r.Iters) }

func (c *Config) defaults() error {
	if c.Port == 0 {
		c.Port = perftest.Port
	}
	if c.Type == 0 {
		c.Type = qp.TypeRC
	}
	if c.Size == 0 {
		c.Size = 4096
		if c.Type == qp.TypeUD {
			c.Size = 2048
		}
	}
	if c.Iters == 0 {
		c.Iters = 1000
	}
	if c.MTU == 0 {
		c.MTU = qp.MTU1024
	}
	if c.RxDepth == 0 {
		c.RxDepth = 500
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	switch {
	case c.Type != qp.TypeRC && c.Type != qp.TypeUC && c.Type != qp.TypeUD:
		return fmt.Errorf("pingpong: transport %v (RC, UC or UD)", c.Type)
	case c.Type == qp.TypeUD && c.Size > c.MTU.Bytes():
		// ud_pingpong's check against the port's active MTU
		return fmt.Errorf("pingpong: requested size %d larger than the port MTU (%d): a UD message is one packet", c.Size, c.MTU.Bytes())
	case c.Type != qp.TypeRC && c.Impair != nil:
		return fmt.Errorf("pingpong: --impair needs RC: %v does not recover lost messages, so the ping-pong would stall", c.Type)
	case c.Size < 1 || c.Size > 1<<30:
		return fmt.Errorf("pingpong: size %d out of range", c.Size)
	case c.Iters < 1:
		return fmt.Errorf("pingpong: %d iterations", c.Iters)
	case c.RxDepth < 2 || c.RxDepth > 8192:
		return fmt.Errorf("pingpong: rx depth %d out of range", c.RxDepth)
	case !c.Server && c.Peer == "":
		return errors.New("pingpong: no server to connect to")
	}
	return nil
}

// Work request IDs, as rc_pingpong's.
const (
	recvWRID = 1
	sendWRID = 2
)

// Run runs one ping-pong against ibv_rc_pingpong, ibv_uc_pingpong or
// ibv_ud_pingpong (cfg.Type), or another goroce.
func Run(ctx context.Context, cfg Config) (res Result, err error) {
	if err := cfg.defaults(); err != nil {
		return Result{}, err
	}
	var nc net.Conn
	if cfg.Server {
		nc, err = perf.Accept(ctx, net.JoinHostPort(cfg.Listen, strconv.Itoa(cfg.Port)))
	} else {
		nc, err = perf.Dial(ctx, net.JoinHostPort(cfg.Peer, strconv.Itoa(cfg.Port)), cfg.Timeout)
	}
	if err != nil {
		return Result{}, err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()

	local := netip.MustParseAddrPort(nc.LocalAddr().String()).Addr().Unmap()
	info, err := perf.ActiveMTU(local)
	if err != nil {
		return Result{}, err
	}
	if _, err := perf.CheckMTU(cfg.MTU, info); err != nil {
		return Result{}, err
	}
	var im *perf.Impaired
	var open func(netip.AddrPort) (link.Link, error)
	if cfg.Impair != nil {
		im = &perf.Impaired{Config: *cfg.Impair}
		open = im.Opener(nil)
	}
	dev, err := perf.OpenDeviceLink(local, cfg.RoCEPort, open)
	if err != nil {
		return Result{}, err
	}
	var qps []*roce.QP
	var stall time.Duration
	defer func() {
		if im != nil {
			rep := perf.NewPeerReport(dev, qps, im.Link, stall)
			res.Impair = &rep
			if cfg.ImpairOut != nil {
				perf.WritePeerReport(cfg.ImpairOut, rep)
			}
		}
		dev.Close()
		if cfg.Stats != nil {
			perf.WriteStats(cfg.Stats, dev, qps)
		}
	}()
	cqe, err := dev.CreateCQ(cfg.RxDepth + 16)
	if err != nil {
		return Result{}, err
	}
	pd := dev.AllocPD()
	// The send buffer, then the receive buffer (for UD with the GRH area
	// first, as ud_pingpong's size+40).
	grh := 0
	if cfg.Type == qp.TypeUD {
		grh = qp.GRHLen
	}
	buf := make([]byte, 2*cfg.Size+grh)
	reg, err := dev.RegisterMR(pd, buf, mr.LocalWrite)
	if err != nil {
		return Result{}, err
	}
	q, err := dev.CreateQP(roce.QPConfig{PD: pd, SendCQ: cqe, RecvCQ: cqe, MaxSendWR: 16, MaxRecvWR: cfg.RxDepth,
		Type: cfg.Type, MTU: cfg.MTU})
	if err != nil {
		return Result{}, err
	}
	qps = append(qps, q)
	// The tools move their QP to INIT and post all their receives before
	// the exchange. ud_pingpong's INIT sets the Q_Key and its connect only
	// steps through RTR to RTS with the send PSN: Ready does all three
	// now, which the peer cannot tell apart (nothing arrives before it has
	// our address).
	if cfg.Type == qp.TypeUD {
		err = q.Ready(QKey)
	} else {
		err = q.Modify(&qp.Attr{State: qp.StateInit, AccessFlags: initAccess(cfg.Type)},
			qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags)
	}
	if err != nil {
		return Result{}, err
	}
	recv := &qp.RecvWR{WRID: recvWRID, SGL: []qp.SGE{reg.SGE(cfg.Size, cfg.Size+grh)}}
	for range cfg.RxDepth {
		if err := q.PostRecv(recv); err != nil {
			return Result{}, err
		}
	}
	inf := q.Info()
	mine := Dest{QPN: uint32(inf.QPN), PSN: uint32(inf.PSN), GID: perftest.GIDFromAddr(local)}
	fmt.Fprintf(cfg.Out, "  local address:  %v\n", mine)
	send := &qp.SendWR{WRID: sendWRID, Opcode: qp.WRSend, Flags: qp.SendSignaled,
		SGL: []qp.SGE{reg.SGE(0, cfg.Size)}}
	connect := func(rem Dest) error {
		addr, err := perftest.GIDAddr(rem.GID, "-g")
		if err != nil {
			return err
		}
		if cfg.Type == qp.TypeUD {
			send.UD = roce.AH{Addr: addr, QPN: bth.QPN(rem.QPN), QKey: QKey}.Dest()
			return nil
		}
		return connectQP(q, cfg.Type, rem, addr, cfg.MTU)
	}
	var rem Dest
	if cfg.Server {
		rem, err = ServerExchange(nc, mine, connect, cfg.Timeout)
	} else {
		if rem, err = ClientExchange(nc, mine, cfg.Timeout); err == nil {
			err = connect(rem)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		return Result{}, err
	}
	nc.Close()
	fmt.Fprintf(cfg.Out, "  remote address: %v\n", rem)

	res, err = pingPong(ctx, &cfg, q, cqe, buf, send, recv, &stall)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		return Result{}, perf.Explain(err, dev, cfg.MTU, info, "-g")
	}
	fmt.Fprintf(cfg.Out, "%d bytes in %.2f seconds = %.2f Mbit/sec\n", res.Bytes, res.Seconds, res.Mbps())
	fmt.Fprintf(cfg.Out, "%d iters in %.2f seconds = %.2f usec/iter\n", res.Iters, res.Seconds, res.USecPerIter())
	return res, nil
}

// initAccess is the access of the tools' INIT: rc_pingpong's
// IBV_ACCESS_LOCAL_WRITE, uc_pingpong's 0.
func initAccess(t qp.Type) mr.AccessFlags {
	if t == qp.TypeUC {
		return 0
	}
	return mr.LocalWrite
}

// connectQP is rc_pingpong's pp_connect_ctx from INIT: RTR with path MTU
// -m, max_dest_rd_atomic 1, min_rnr_timer 12; RTS with timeout 14,
// retry_cnt 7, rnr_retry 7, max_rd_atomic 1. For UC it is uc_pingpong's:
// RTR with path MTU, the peer's QPN and PSN and the address vector; RTS
// with the send PSN alone (UC has no acknowledgements to time or retry).
func connectQP(q *roce.QP, t qp.Type, rem Dest, addr netip.Addr, mtu qp.MTU) error {
	if t == qp.TypeUC {
		if err := q.Modify(&qp.Attr{State: qp.StateRTR, PathMTU: mtu, DestQPN: bth.QPN(rem.QPN), RQPSN: bth.PSN(rem.PSN),
			AV: qp.AddressVector{Remote: addr}},
			qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN); err != nil {
			return err
		}
		return q.Modify(&qp.Attr{State: qp.StateRTS, SQPSN: q.Info().PSN}, qp.AttrState|qp.AttrSQPSN)
	}
	if err := q.Modify(&qp.Attr{State: qp.StateRTR, PathMTU: mtu, DestQPN: bth.QPN(rem.QPN), RQPSN: bth.PSN(rem.PSN),
		MaxDestRdAtomic: 1, MinRNRTimer: 12, AV: qp.AddressVector{Remote: addr}},
		qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN|qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer); err != nil {
		return err
	}
	return q.Modify(&qp.Attr{State: qp.StateRTS, SQPSN: q.Info().PSN, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
		qp.AttrState|qp.AttrSQPSN|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|qp.AttrMaxQPRdAtomic)
}

// ErrCorrupt is wrapped by the error of a received message that is not
// the one the peer sent (Config.Check).
var ErrCorrupt = errors.New("pingpong: received message differs from the one sent")

// pattern fills b with message k's bytes (Config.Check).
func pattern(b []byte, k int) {
	for i := range b {
		b[i] = byte(k*31 + i*7 + 1)
	}
}

// checkRecv checks received message k (Config.Check): its byte count
// (the GRH area included for UD, as the completion counts it) and its
// payload, which for UD starts after the GRH area.
func checkRecv(cfg *Config, buf []byte, wc *cq.Completion, k int) error {
	grh := 0
	if cfg.Type == qp.TypeUD {
		grh = qp.GRHLen
	}
	if int(wc.ByteLen) != cfg.Size+grh {
		return fmt.Errorf("%w: message %d has %d bytes, want %d", ErrCorrupt, k, wc.ByteLen, cfg.Size+grh)
	}
	got := buf[cfg.Size+grh : 2*cfg.Size+grh]
	want := make([]byte, cfg.Size)
	pattern(want, k)
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("%w: message %d differs at byte %d (%#02x, want %#02x)", ErrCorrupt, k, i, got[i], want[i])
		}
	}
	return nil
}

// pingPong is the tools' main loop (the same in rc_, uc_ and
// ud_pingpong): the client sends first; each side sends its next message
// once its previous SEND and a RECV completed, and reposts receives when
// it is down to one. buf is the registered buffer: the message sent at
// its start, the one received after it.
// It keeps the longest gap between completions in *stall.
func pingPong(ctx context.Context, cfg *Config, q *roce.QP, c *cq.CQ, buf []byte, send *qp.SendWR, recv *qp.RecvWR, stall *time.Duration) (Result, error) {
	posted := 0
	post := func() error {
		if cfg.Check {
			pattern(buf[:cfg.Size], posted)
		}
		posted++
		return q.PostSend(send)
	}
	routs := cfg.RxDepth
	pending := recvWRID
	start := time.Now()
	if !cfg.Server {
		if err := post(); err != nil {
			return Result{}, err
		}
		pending |= sendWRID
	}
	scnt, rcnt := 0, 0
	wcs := make([]cq.Completion, 2)
	last := start
	for rcnt < cfg.Iters || scnt < cfg.Iters {
		wctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		n, err := c.Wait(wctx, wcs)
		cancel()
		now := time.Now()
		*stall = max(*stall, now.Sub(last))
		last = now
		if err != nil {
			if ctx.Err() != nil {
				return Result{}, ctx.Err()
			}
			hint := ""
			if cfg.Type != qp.TypeRC {
				hint = fmt.Sprintf("; %v does not recover a lost message", cfg.Type)
			}
			return Result{}, fmt.Errorf("pingpong: no completion for %v after %d sends and %d receives: the peer stopped (is it running, with the same -s and -n?)%s",
				cfg.Timeout, scnt, rcnt, hint)
		}
		for i := range wcs[:n] {
			wc := &wcs[i]
			if wc.Status != cq.StatusSuccess {
				return Result{}, fmt.Errorf("pingpong: after %d sends and %d receives: %w", scnt, rcnt, &perf.WCError{WC: *wc})
			}
			switch wc.WRID {
			case sendWRID:
				scnt++
			case recvWRID:
				if cfg.Check {
					if err := checkRecv(cfg, buf, wc, rcnt); err != nil {
						return Result{}, err
					}
				}
				if routs--; routs <= 1 {
					for ; routs < cfg.RxDepth; routs++ {
						if err := q.PostRecv(recv); err != nil {
							return Result{}, err
						}
					}
				}
				rcnt++
			}
			pending &^= int(wc.WRID)
			if scnt < cfg.Iters && pending == 0 {
				if err := post(); err != nil {
					return Result{}, err
				}
				pending = recvWRID | sendWRID
			}
		}
	}
	el := time.Since(start).Seconds()
	return Result{Bytes: int64(cfg.Size) * int64(cfg.Iters) * 2, Iters: cfg.Iters, Seconds: el}, nil
}
