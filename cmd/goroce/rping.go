package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/perf"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

var rpingCommand = command{
	name:    "rping",
	summary: "librdmacm's rping: RDMA READ/WRITE ping-pong over the RDMA CM, as server (-s) or client (-c)",
	run:     runRping,
}

const (
	// rpingPort is rping's default port in rdma_cm's TCP port space.
	rpingPort = 7174
	// rpingInfoSize is the wire size of struct rping_rdma_info: buf
	// (__be64), rkey (__be32), size (__be32).
	rpingInfoSize = 16
	// rpingMinSize is rping's RPING_MIN_BUFSIZE: sizeof("2147483647") plus
	// sizeof("rdma-ping-%d: "), room for the largest ping number.
	rpingMinSize = 11 + 15
	// rpingMaxSize is RPING_BUFSIZE-1, the largest -S rping takes.
	rpingMaxSize = 64*1024 - 1
)

// rpingConfig is one rping run.
type rpingConfig struct {
	server   bool
	addr     netip.Addr // -a: the server's address (the server binds it)
	source   netip.Addr // -I: the client's address (default: the route's)
	port     uint16     // -p: rdma_cm port
	rocePort uint16     // UDP port of both devices (0: 4791)
	count    int        // -C: 0 means forever (the client)
	size     int        // -S
	verbose  bool       // -v
	validate bool       // -V
	mtu      qp.MTU     // 0: the interface's active MTU
	timeout  time.Duration
	stats    bool // --stats: the device's counters to err at the end
	out, err io.Writer
	// listening, if set, is called once the server listens (tests).
	listening func()
}

// rpingFlagGroups are the headings of goroce rping -h (doc/cli.md).
var rpingFlagGroups = []flagGroup{
	{"role and address (as rping's)", []string{"s", "c", "a", "I", "p"}},
	{"the pings", []string{"C", "S", "v", "V"}},
	{"goroce's own", []string{"m", "roce-port", "timeout", "stats"}},
	{"accepted for compatibility", []string{"d"}},
}

func runRping(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rping", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := rpingConfig{out: stdout, err: stderr, listening: rpingListening}
	var (
		server, client, debug bool
		addr, source          string
		port, roce, mtu       int
	)
	fs.BoolVar(&server, "s", false, "server side")
	fs.BoolVar(&client, "c", false, "client side")
	fs.StringVar(&addr, "a", "", "address: the server's (the server binds it; goroce needs one)")
	fs.StringVar(&source, "I", "", "source address to bind to for the client (default: the route's to -a)")
	fs.IntVar(&port, "p", rpingPort, "port (rdma_cm TCP port space)")
	fs.IntVar(&cfg.count, "C", 0, "ping count times (client; 0: forever)")
	fs.IntVar(&cfg.size, "S", 64, fmt.Sprintf("ping data size (%d to %d)", rpingMinSize, rpingMaxSize))
	fs.BoolVar(&cfg.verbose, "v", false, "display ping data to stdout")
	fs.BoolVar(&cfg.validate, "V", false, "validate ping data")
	fs.BoolVar(&debug, "d", false, "accepted for compatibility")
	fs.IntVar(&roce, "roce-port", 0, "UDP port of both devices (default 4791)")
	fs.IntVar(&mtu, "m", 0, "path MTU the client asks for: 256 … 4096 (default: the interface's active MTU)")
	fs.DurationVar(&cfg.timeout, "timeout", 30*time.Second, "limit for connecting and for each wait for the peer")
	fs.BoolVar(&cfg.stats, "stats", false, "print the device's counters to stderr at the end, as goroce perf --stats does")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: goroce rping -s [-vV] [-S size] [-C count] -a addr [-p port]")
		fmt.Fprintln(stderr, "       goroce rping -c [-vV] [-S size] [-C count] [-I addr] -a addr [-p port]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "librdmacm's rping: the client advertises a source buffer the server RDMA READs and a")
		fmt.Fprintln(stderr, "sink buffer it RDMA WRITEs back. Against rxe: rping -s|-c -v -C 10 -a ADDR.")
		printFlags(stderr, fs, rpingFlagGroups)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "goroce rping: "+format+"\n", a...)
		return 2
	}
	switch {
	case fs.NArg() > 0:
		return usageErr("unexpected arguments %q", fs.Args())
	case server == client:
		return usageErr("give one of -s (server) and -c (client)")
	case cfg.size < rpingMinSize || cfg.size > rpingMaxSize:
		return usageErr("Invalid size %d (valid range is %d to %d)", cfg.size, rpingMinSize, rpingMaxSize+1)
	case cfg.count < 0:
		return usageErr("Invalid count %d", cfg.count)
	case port <= 0 || port > 0xffff || roce < 0 || roce > 0xffff:
		return usageErr("invalid port")
	case addr == "":
		return usageErr("-a ADDR is needed (the server binds it; the client connects to it)")
	}
	cfg.server, cfg.port, cfg.rocePort = server, uint16(port), uint16(roce)
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return usageErr("-a: %v", err)
	}
	cfg.addr = a.Unmap()
	if source != "" {
		s, err := netip.ParseAddr(source)
		if err != nil {
			return usageErr("-I: %v", err)
		}
		cfg.source = s.Unmap()
	}
	if mtu != 0 {
		m, ok := qp.MTUFromBytes(mtu)
		if !ok {
			return usageErr("invalid MTU %d (256, 512, 1024, 2048 or 4096)", mtu)
		}
		cfg.mtu = m
	}
	return interruptible(stderr, func(ctx context.Context) int {
		if err := rping(ctx, &cfg); err != nil {
			if ctx.Err() == nil { // not interrupted: interruptible reports that
				side := "client"
				if cfg.server {
					side = "server"
				}
				fmt.Fprintf(stderr, "goroce rping: %s failed: %v\n", side, err)
			}
			return 1
		}
		return 0
	})
}

// rpingListening, if set, is called when a server listens (tests start
// the client then).
var rpingListening func()

// errPeerGone reports that the peer disconnected (rping's DISCONNECTED
// state), which ends a run successfully, as in rping.
var errPeerGone = errors.New("peer disconnected")

// rpingInfo is struct rping_rdma_info, the advertisement each SEND carries.
type rpingInfo struct {
	addr uint64
	rkey roce.Key
	size uint32
}

func (in rpingInfo) encode(b []byte) {
	binary.BigEndian.PutUint64(b[0:8], in.addr)
	binary.BigEndian.PutUint32(b[8:12], uint32(in.rkey))
	binary.BigEndian.PutUint32(b[12:16], in.size)
}

func decodeRpingInfo(b []byte) rpingInfo {
	return rpingInfo{addr: binary.BigEndian.Uint64(b[0:8]), rkey: roce.Key(binary.BigEndian.Uint32(b[8:12])),
		size: binary.BigEndian.Uint32(b[12:16])}
}

// rpingSession holds one side's buffers, as rping's control block does:
// recv and send carry rping_rdma_info, rdma is the server's READ target
// and WRITE source and the client's sink, start the client's source.
type rpingSession struct {
	cfg                     *rpingConfig
	dev                     *roce.Device
	conn                    *roce.Conn
	recv, send, rdma, start []byte
	recvMR, sendMR          *roce.MR
	rdmaMR, startMR         *roce.MR
	wc                      [1]roce.Completion
}

func rping(ctx context.Context, cfg *rpingConfig) error {
	local := cfg.addr
	if !cfg.server {
		local = cfg.source
		if !local.IsValid() {
			var err error
			if local, err = routeSource(cfg.addr); err != nil {
				return err
			}
		}
	}
	dev, err := perf.OpenDevice(local, cfg.rocePort)
	if err != nil {
		return err
	}
	defer func() {
		dev.Close()
		if cfg.stats { // after Close: the count includes the disconnect
			perf.WriteStats(cfg.err, dev, nil)
		}
	}()
	s := &rpingSession{cfg: cfg, dev: dev, recv: make([]byte, rpingInfoSize), send: make([]byte, rpingInfoSize),
		rdma: make([]byte, cfg.size)}
	if s.recvMR, err = dev.RegisterMR(nil, s.recv, roce.LocalWrite); err != nil {
		return err
	}
	if s.sendMR, err = dev.RegisterMR(nil, s.send, 0); err != nil {
		return err
	}
	if cfg.server {
		// The server's buffer is written by the READ responses only.
		if s.rdmaMR, err = dev.RegisterMR(nil, s.rdma, roce.LocalWrite); err != nil {
			return err
		}
		return s.runServer(ctx)
	}
	s.start = make([]byte, cfg.size)
	if s.rdmaMR, err = dev.RegisterMR(nil, s.rdma, roce.LocalWrite|roce.RemoteWrite); err != nil {
		return err
	}
	if s.startMR, err = dev.RegisterMR(nil, s.start, roce.RemoteRead); err != nil {
		return err
	}
	return s.runClient(ctx)
}

// routeSource returns the local address the kernel would send from to
// reach dst.
func routeSource(dst netip.Addr) (netip.Addr, error) {
	c, err := net.Dial("udp", netip.AddrPortFrom(dst, 4791).String())
	if err != nil {
		return netip.Addr{}, fmt.Errorf("no route to %v: %w", dst, err)
	}
	defer c.Close()
	return netip.MustParseAddrPort(c.LocalAddr().String()).Addr().Unmap(), nil
}

// postRecv posts the one receive rping keeps on its QP.
func (s *rpingSession) postRecv(q *roce.QP) error {
	return q.PostRecv(&roce.RecvWR{WRID: 1, SGL: []roce.SGE{s.recvMR.SGE(0, rpingInfoSize)}})
}

func (s *rpingSession) runServer(ctx context.Context) error {
	l, err := s.dev.Listen(s.cfg.port, roce.ListenConfig{Backlog: 1, Setup: s.postRecv})
	if err != nil {
		return err
	}
	if s.cfg.listening != nil {
		s.cfg.listening()
	}
	c, err := l.Accept(ctx)
	l.Close() // rping without -P serves one connection
	if err != nil {
		return err
	}
	s.conn = c
	defer c.Close()
	err = s.serve(ctx)
	if errors.Is(err, errPeerGone) {
		fmt.Fprintln(s.cfg.err, "server DISCONNECT EVENT...")
		return nil
	}
	return err
}

// serve is rping_test_server: per ping, the client's source advertisement,
// an RDMA READ of it, a go-ahead, the client's sink advertisement, an RDMA
// WRITE of the data back and a go-ahead, until the client disconnects.
func (s *rpingSession) serve(ctx context.Context) error {
	q := s.conn.QP()
	for {
		src, err := s.nextRecv(ctx, "RDMA_READ_ADV")
		if err != nil {
			return err
		}
		if src.size > uint32(len(s.rdma)) {
			return fmt.Errorf("client's buffer is %d bytes, larger than -S %d", src.size, len(s.rdma))
		}
		if err := q.PostSend(&roce.SendWR{WRID: 2, Opcode: roce.WRRDMARead, Flags: roce.SendSignaled,
			SGL: []roce.SGE{s.rdmaMR.SGE(0, int(src.size))}, RemoteAddr: src.addr, RKey: src.rkey}); err != nil {
			return err
		}
		if err := s.next(ctx, cq.OpRDMARead, "RDMA_READ_COMPLETE"); err != nil {
			return err
		}
		if s.cfg.verbose {
			fmt.Fprintf(s.cfg.out, "server ping data: %s\n", cstring(s.rdma))
		}
		if err := s.goAhead(q); err != nil {
			return err
		}
		sink, err := s.nextRecv(ctx, "RDMA_WRITE_ADV")
		if err != nil {
			return err
		}
		n := min(len(cstring(s.rdma))+1, len(s.rdma)) // strlen + 1, as rping
		if err := q.PostSend(&roce.SendWR{WRID: 3, Opcode: roce.WRRDMAWrite, Flags: roce.SendSignaled,
			SGL: []roce.SGE{s.rdmaMR.SGE(0, n)}, RemoteAddr: sink.addr, RKey: sink.rkey}); err != nil {
			return err
		}
		if err := s.next(ctx, cq.OpRDMAWrite, "RDMA_WRITE_COMPLETE"); err != nil {
			return err
		}
		if err := s.goAhead(q); err != nil {
			return err
		}
	}
}

// goAhead SENDs the server's rping_rdma_info, which rping never fills in:
// 16 zero bytes whose arrival is the message.
func (s *rpingSession) goAhead(q *roce.QP) error {
	return q.PostSend(&roce.SendWR{WRID: 4, Opcode: roce.WRSend, Flags: roce.SendSignaled,
		SGL: []roce.SGE{s.sendMR.SGE(0, rpingInfoSize)}})
}

// advertise SENDs buffer m's rping_rdma_info. The send buffer is reused
// at once: the peer answers a SEND only after it has arrived, and the
// answer is awaited before the next advertise.
func (s *rpingSession) advertise(q *roce.QP, m *roce.MR) error {
	rpingInfo{addr: m.IOVA(), rkey: m.RKey(), size: uint32(s.cfg.size)}.encode(s.send)
	return q.PostSend(&roce.SendWR{WRID: 5, Opcode: roce.WRSend, Flags: roce.SendSignaled,
		SGL: []roce.SGE{s.sendMR.SGE(0, rpingInfoSize)}})
}

func (s *rpingSession) runClient(ctx context.Context) error {
	mtu := s.cfg.mtu
	if info, err := perf.ActiveMTU(s.dev.LocalAddr().Addr()); err == nil {
		if mtu, err = perf.CheckMTU(s.cfg.mtu, info); err != nil {
			return err
		}
	} else if mtu == 0 {
		mtu = qp.MTU1024
	}
	dctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	c, err := s.dev.Dial(dctx, netip.AddrPortFrom(s.cfg.addr, s.cfg.port), roce.DialConfig{
		Access: roce.RemoteRead | roce.RemoteWrite, MTU: mtu, Setup: s.postRecv})
	cancel()
	if err != nil {
		return fmt.Errorf("connect error: %w", err)
	}
	s.conn = c
	err = s.ping(ctx)
	if errors.Is(err, errPeerGone) {
		err = nil
	}
	if cerr := c.Close(); err == nil && cerr != nil {
		return cerr
	}
	if err == nil {
		fmt.Fprintln(s.cfg.err, "client DISCONNECT EVENT...")
	}
	return err
}

// ping is rping_test_client.
func (s *rpingSession) ping(ctx context.Context) error {
	q := s.conn.QP()
	first := byte('A')
	for i := 0; s.cfg.count == 0 || i < s.cfg.count; i++ {
		rpingPattern(s.start, i, first)
		if first++; first > 'z' {
			first = 'A'
		}
		if err := s.advertise(q, s.startMR); err != nil {
			return err
		}
		if _, err := s.nextRecv(ctx, "RDMA_WRITE_ADV"); err != nil {
			return err
		}
		if err := s.advertise(q, s.rdmaMR); err != nil {
			return err
		}
		if _, err := s.nextRecv(ctx, "RDMA_WRITE_COMPLETE"); err != nil {
			return err
		}
		if s.cfg.validate && !bytes.Equal(s.start, s.rdma) {
			return errors.New("data mismatch")
		}
		if s.cfg.verbose {
			fmt.Fprintf(s.cfg.out, "ping data: %s\n", cstring(s.rdma))
		}
	}
	return nil
}

// rpingPattern fills b as rping's client does for ping i: "rdma-ping-i: ",
// then letters from first on, 'A' to 'z' over and over (ASCII 65 to 122,
// punctuation between the cases included), and a NUL in the last byte.
func rpingPattern(b []byte, i int, first byte) {
	n := copy(b, "rdma-ping-"+strconv.Itoa(i)+": ")
	for c := first; n < len(b); n++ {
		b[n] = c
		if c++; c > 'z' {
			c = 'A'
		}
	}
	b[len(b)-1] = 0
}

// cstring is b up to its first NUL, as %s prints a C string.
func cstring(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// nextRecv waits for the peer's next SEND (rping's sem_wait for the
// state want) and returns the rping_rdma_info it carried.
func (s *rpingSession) nextRecv(ctx context.Context, want string) (rpingInfo, error) {
	if err := s.next(ctx, cq.OpRecv, want); err != nil {
		return rpingInfo{}, err
	}
	return decodeRpingInfo(s.recv), nil
}

// next waits for the completion of kind op, rping's cq handler: SEND
// completions pass, a receive is checked for rping_rdma_info's size and
// its buffer posted again before the caller looks at the data (the peer's
// next SEND follows only the caller's answer), a flush or the connection's
// end is errPeerGone.
func (s *rpingSession) next(ctx context.Context, op cq.Opcode, want string) error {
	q := s.conn.QP()
	for {
		wctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
		_, err := s.waitOne(wctx)
		cancel()
		if err != nil {
			select {
			case <-s.conn.Done():
				return errPeerGone
			default:
			}
			return fmt.Errorf("wait for %s: %w", want, err)
		}
		wc := &s.wc[0]
		if wc.Status == cq.StatusWRFlushErr {
			return errPeerGone
		}
		if err := wc.Err(); err != nil {
			return fmt.Errorf("cq completion failed: %w", err)
		}
		switch wc.Opcode {
		case cq.OpSend:
			continue
		case cq.OpRecv:
			if wc.ByteLen != rpingInfoSize {
				return fmt.Errorf("received bogus data, size %d", wc.ByteLen)
			}
			if err := s.postRecv(q); err != nil {
				return err
			}
		}
		if wc.Opcode != op {
			return fmt.Errorf("wait for %s: got a %v completion", want, wc.Opcode)
		}
		return nil
	}
}

// waitOne waits for one completion on the QP's CQ (send and receive share
// it, as in rping), giving up when the connection ends.
func (s *rpingSession) waitOne(ctx context.Context) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.conn.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	return s.conn.QP().RecvCQ().Wait(ctx, s.wc[:])
}
