//go:build rxe && linux

package interop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/goroce/goroce/coll"
	"github.com/goroce/goroce/internal/collcheck"
	"github.com/goroce/goroce/qp"
)

// The rxe-rank job (issue 26 part 4): goroce ranks 0 and 1 in netns roce0,
// rank 0 on the harness's host address (it serves the rendezvous), rank 1
// on collIP2, an address the cell adds to the bridge (each rank needs a UDP
// 4791 of its own); rank 2 is testdata/collpeer.py in guest 1, a pyverbs
// rank on rxe that speaks doc/coll.md.
const (
	collIP2  = "10.77.0.101"
	collPort = 18519 // the rendezvous, on 10.77.0.1
	collSize = 3
	rxeRank  = 2
)

// collCall is one collective of a cell's plan: every rank runs the same
// list, in order.
type collCall struct {
	kind  coll.Kind
	count int // float32 elements per rank
	seed  uint64
}

// collJob is a cell's job shape: what every rank's Config shares.
type collJob struct {
	kind     coll.Kind
	channels int
	qps      int
	split    bool
	steps    int
	chunk    int
	order    []int // nil: 0, 1, 2
	counts   []int
}

// runColl runs the rxe-rank cells (-cells 'coll rxe-rank'): a job of
// three ranks, two goroce ranks (coll.Join in this process) and one
// pyverbs rank on rxe, forced to the ring, with internal/collcheck's data
// (inputs from rank, seed and index whose sums are exact in any order), so
// that every rank counts #wrong alike; each cell asserts:
//
//   - #wrong 0 on every rank for every call (both goroce ranks here, the
//     rxe rank by its own count in collpeer.py's result);
//   - the traffic went through rxe: rxe's sent_pkts and rcvd_pkts grew by
//     exactly the RoCE packets the capture holds from and to the guest,
//     goroce's QPs towards the rxe rank sent exactly the packets the
//     capture holds from each goroce address to the guest, and both goroce
//     ranks exchanged data (RDMA WRITE WITH IMMEDIATE) and clear-to-sends
//     (RDMA WRITE) with it each way the ring runs; split messages' empty
//     parts went both ways as zero-length WRITE WITH IMMEDIATEs;
//   - the suite's wire checks (tshark, ICRC, goroce cap = tshark) for the
//     packets of both goroce addresses.
//
// all_reduce runs the natural ring order with 2 QPs per connection round
// robin; all_gather the order 0, 2, 1 (the rxe rank then sends to goroce
// rank 1 and receives from rank 0, the other way round) with each message
// split over 2 QPs, whose parts of a 1-element message include empty
// WRITE WITH IMMEDIATEs. Both use 2 channels, 4 steps, 16 KiB chunks: the
// sizes from 1 element to 256 KiB take one and two channels, several ring
// loops and FIFO wrap-arounds, and the last size runs twice (the programs
// reused, the sequence numbers going on). goroce's QPs wait impairTimeout
// for rxe's ACKs, for the reason given there (the default 67 ms gave 11 to
// 44 needless retransmissions per cell at load 10).
func runColl(t *testing.T, mtu int) {
	jobs := []collJob{
		{kind: coll.KindAllReduce, channels: 2, qps: 2, steps: 4, chunk: 16 << 10,
			counts: []int{1, 1025, 24577, 65536, 65536}},
		{kind: coll.KindAllGather, channels: 2, qps: 2, split: true, steps: 4, chunk: 16 << 10, order: []int{0, 2, 1},
			counts: []int{1, 1000, 8193, 32768, 32768}},
	}
	for _, j := range jobs {
		name := fmt.Sprintf("coll rxe-rank %v mtu=%d", j.kind, mtu)
		if !selected(name) {
			continue
		}
		h.timed(t, shortName(name), name, func() (string, error) {
			return h.collCell(j, mtu, name)
		})
	}
}

// collRank is what a goroce rank of the job did.
type collRank struct {
	rank    int
	wrong   []int64
	toRxe   []*qp.Counters // its QPs towards the rxe rank
	retrans uint64
	err     error
}

// collPeerResult is collpeer.py's result line.
type collPeerResult struct {
	Rank  int `json:"rank"`
	Calls []struct {
		Kind     string  `json:"kind"`
		Count    int     `json:"count"`
		Channels int     `json:"channels"`
		Ops      int     `json:"ops"`
		Wrong    int64   `json:"wrong"`
		Secs     float64 `json:"secs"`
	} `json:"calls"`
	Stats    map[string]int    `json:"stats"`
	Counters map[string]uint64 `json:"counters"`
}

// collCell runs one rxe-rank cell.
func (h *harness) collCell(j collJob, mtu int, name string) (string, error) {
	file := strings.NewReplacer(" ", "_", "=", "").Replace(name)
	if out, err := run(time.Minute, "ip", "netns", "exec", netns, "ip", "addr", "replace", collIP2+"/24", "dev", bridge); err != nil {
		return "", fmt.Errorf("adding %s to %s: %v: %s", collIP2, bridge, err, out)
	}
	defer run(time.Minute, "ip", "netns", "exec", netns, "ip", "addr", "del", collIP2+"/24", "dev", bridge)

	seed := uint64(time.Now().UnixNano()) % 1_000_000
	var plan []collCall
	var planArg []string
	for i, c := range j.counts {
		cl := collCall{kind: j.kind, count: c, seed: seed + uint64(i)}
		plan = append(plan, cl)
		planArg = append(planArg, fmt.Sprintf("%v:%d:%d", cl.kind, cl.count, cl.seed))
	}
	jobID := fmt.Sprintf("rxe-rank-%v-%d", j.kind, seed)
	rdzv := fmt.Sprintf("%s:%d", hostIP, collPort)
	const timeout = 90 * time.Second

	t0 := time.Now()
	var marks []string
	mark := func(what string) { marks = append(marks, fmt.Sprintf("%s at %.1f s", what, time.Since(t0).Seconds())) }
	capt, err := h.startCapture(file)
	if err != nil {
		return "", err
	}
	args := []string{"python3", "-", "--rdzv", rdzv, "--rank", strconv.Itoa(rxeRank), "--size", strconv.Itoa(collSize),
		"--job", jobID, "--addr", guestIP, "--channels", strconv.Itoa(j.channels), "--qps", strconv.Itoa(j.qps),
		"--steps", strconv.Itoa(j.steps), "--chunk", strconv.Itoa(j.chunk), "--mtu", strconv.Itoa(mtu),
		"--plan", strings.Join(planArg, ","), "--timeout", strconv.Itoa(int(timeout.Seconds()))}
	if j.split {
		args = append(args, "--split")
	}
	if j.order != nil {
		var o []string
		for _, r := range j.order {
			o = append(o, strconv.Itoa(r))
		}
		args = append(args, "--order", strings.Join(o, ","))
	}
	if err := h.guestBg("cp", filepath.Join(h.root, "interop", "testdata", "collpeer.py"), args...); err != nil {
		capt.stop()
		return "", err
	}
	mark("collpeer.py started")
	mtuEnum, _ := qp.MTUFromBytes(mtu)
	cfg := coll.Config{Size: collSize, Rendezvous: rdzv, JobID: jobID, Timeout: timeout,
		Channels: j.channels, QPsPerConn: j.qps, Split: j.split, Steps: j.steps, Chunk: j.chunk,
		RankOrder: j.order, Algorithm: coll.AlgoRing, MTU: mtuEnum, QPTimeout: impairTimeout}
	ranks := make([]collRank, 2)
	var wg sync.WaitGroup
	for r, ip := range []string{hostIP, collIP2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cfg
			c.Rank, c.Addr = r, netip.AddrPortFrom(netip.MustParseAddr(ip), 4791)
			ranks[r] = collRank{rank: r}
			ranks[r].err = inNetns(netns, func() error { return collRun(c, plan, &ranks[r]) })
		}()
	}
	wg.Wait()
	mark("goroce ranks done")
	var runErr error
	for _, r := range ranks {
		if r.err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("goroce rank %d: %w", r.rank, r.err))
		}
	}
	var pout string
	var perr error
	if runErr != nil {
		pout = h.guestKill("cp")
	} else {
		pout, perr = h.guestWait("cp", timeout)
	}
	mark("collpeer.py done")
	capt.stop()
	writeLog(h.out, file+".log", fmt.Sprintf("--- goroce ranks\n%v\n%+v\n%s\n--- collpeer.py\n%s\n--- tcpdump\n%s",
		runErr, ranks, strings.Join(marks, ", "), pout, capt.stderr()))
	if runErr != nil {
		return "", fmt.Errorf("%v\n--- collpeer.py:\n%s", runErr, tail(pout, 15))
	}
	if perr != nil {
		return "", fmt.Errorf("collpeer.py: %v\n%s", perr, tail(pout, 15))
	}
	res, err := collPeerResultOf(pout)
	if err != nil {
		return "", err
	}

	// #wrong 0 on every rank, every call.
	var errs []error
	for _, r := range ranks {
		for i, w := range r.wrong {
			if w != 0 {
				errs = append(errs, fmt.Errorf("goroce rank %d: %v of %d elements (seed %d): #wrong %d", r.rank, plan[i].kind, plan[i].count, plan[i].seed, w))
			}
		}
	}
	if len(res.Calls) != len(plan) {
		errs = append(errs, fmt.Errorf("the rxe rank ran %d calls, want %d", len(res.Calls), len(plan)))
	}
	ops := 0
	for i, c := range res.Calls {
		ops += c.Ops
		if c.Wrong != 0 || i < len(plan) && (c.Count != plan[i].count || c.Kind != plan[i].kind.String()) {
			errs = append(errs, fmt.Errorf("the rxe rank's call %d: %s of %d elements: #wrong %d", i, c.Kind, c.Count, c.Wrong))
		}
	}

	// The traffic went through rxe, and each side's count is the capture's.
	const writeImmOnly, writeImmLast, writeOnly = 0x0b, 0x09, 0x0a
	pk, err := rocePackets(capt.path)
	if err != nil {
		return "", err
	}
	flows := map[[2]string]map[byte]int{}
	total := map[[2]string]int{}
	empty := map[string]int{} // zero-length WRITE WITH IMMEDIATEs by sender
	for _, p := range pk {
		if p.opcode == writeImmOnly && p.payload == 0 {
			empty[p.src]++
		}
		k := [2]string{p.src, p.dst}
		if flows[k] == nil {
			flows[k] = map[byte]int{}
		}
		flows[k][p.opcode]++
		total[k]++
	}
	fromGuest := total[[2]string{guestIP, hostIP}] + total[[2]string{guestIP, collIP2}]
	toGuest := total[[2]string{hostIP, guestIP}] + total[[2]string{collIP2, guestIP}]
	if sent := res.Counters["sent_pkts"]; sent != uint64(fromGuest) {
		errs = append(errs, fmt.Errorf("rxe's sent_pkts grew by %d, the capture holds %d RoCE packets from the guest (tcpdump: %s)",
			sent, fromGuest, strings.TrimSpace(capt.stderr())))
	}
	if rcvd := res.Counters["rcvd_pkts"]; rcvd != uint64(toGuest) {
		errs = append(errs, fmt.Errorf("rxe's rcvd_pkts grew by %d, the capture holds %d RoCE packets to the guest (tcpdump: %s)",
			rcvd, toGuest, strings.TrimSpace(capt.stderr())))
	}
	for i, ip := range []string{hostIP, collIP2} {
		var sent uint64
		for _, c := range ranks[i].toRxe {
			sent += c.Load(qp.CounterSentPkts)
		}
		if n := total[[2]string{ip, guestIP}]; uint64(n) != sent {
			errs = append(errs, fmt.Errorf("goroce rank %d's QPs towards the rxe rank sent %d packets, the capture holds %d from %s to the guest", i, sent, n, ip))
		}
	}
	// Along the ring (position p sends to p+1), each goroce rank that sends
	// to the rxe rank sends data and receives clear-to-sends, and the one
	// it receives from the reverse.
	ring := j.order
	if ring == nil {
		ring = []int{0, 1, 2}
	}
	pos := func(r int) int {
		for i, x := range ring {
			if x == r {
				return i
			}
		}
		return -1
	}
	ips := []string{hostIP, collIP2, guestIP}
	toRxe := ring[(pos(rxeRank)+collSize-1)%collSize]
	fromRxe := ring[(pos(rxeRank)+1)%collSize]
	data := func(src, dst string) int {
		f := flows[[2]string{src, dst}]
		return f[writeImmOnly] + f[writeImmLast]
	}
	cts := func(src, dst string) int { return flows[[2]string{src, dst}][writeOnly] }
	for _, c := range []struct {
		what     string
		src, dst string
		n        int
	}{
		{"data (WRITE WITH IMMEDIATE)", ips[toRxe], guestIP, data(ips[toRxe], guestIP)},
		{"clear-to-sends (WRITE)", guestIP, ips[toRxe], cts(guestIP, ips[toRxe])},
		{"data (WRITE WITH IMMEDIATE)", guestIP, ips[fromRxe], data(guestIP, ips[fromRxe])},
		{"clear-to-sends (WRITE)", ips[fromRxe], guestIP, cts(ips[fromRxe], guestIP)},
	} {
		if c.n == 0 {
			errs = append(errs, fmt.Errorf("no %s from %s to %s in the capture", c.what, c.src, c.dst))
		}
	}
	emptyNote := ""
	if j.split {
		// The 1-element call's message is 4 bytes: part 0 carries it, part
		// 1 is empty, on every connection that carries it.
		if empty[guestIP] == 0 || empty[hostIP]+empty[collIP2] == 0 || empty[guestIP] < res.Stats["empty_parts"] {
			errs = append(errs, fmt.Errorf("zero-length WRITE WITH IMMEDIATEs in the capture: from rxe %d (collpeer.py posted %d), from goroce %d",
				empty[guestIP], res.Stats["empty_parts"], empty[hostIP]+empty[collIP2]))
		}
		emptyNote = fmt.Sprintf(", empty parts rxe→goroce %d, goroce→rxe %d", empty[guestIP], empty[hostIP]+empty[collIP2])
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	w, err := h.checkWireFrom(capt.path, hostIP, collIP2)
	if err != nil {
		return "", err
	}
	var retrans uint64
	for _, r := range ranks {
		retrans += r.retrans
	}
	shape := fmt.Sprintf("%d channels × %d QPs", j.channels, j.qps)
	if j.split {
		shape += " split"
	}
	if j.order != nil {
		shape += fmt.Sprintf(", ring %v", j.order)
	}
	return fmt.Sprintf("3 ranks (goroce %s and %s, rxe %s), ring, %s, %d calls of %v float32, %d ops at the rxe rank: #wrong 0 on every rank; "+
		"rxe sent %d packets, received %d (both = capture); rxe→goroce %d data + %d CTS WRITEs, goroce→rxe %d data + %d CTS%s; goroce retransmitted %d "+
		"[%d RoCE packets, %d from goroce, ICRC ok, tshark ok%s, goroce cap = tshark]",
		hostIP, collIP2, guestIP, shape, len(plan), j.counts, ops,
		res.Counters["sent_pkts"], res.Counters["rcvd_pkts"],
		data(guestIP, ips[fromRxe]), cts(guestIP, ips[toRxe]), data(ips[toRxe], guestIP), cts(ips[fromRxe], guestIP), emptyNote, retrans,
		w.roce, w.goroce, rpcNote(w)), nil
}

// collRun is one goroce rank: join, run the plan with collcheck's data,
// count #wrong per call, close. It runs inside netns roce0.
func collRun(cfg coll.Config, plan []collCall, out *collRank) error {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	c, err := coll.Join(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, ci := range c.Conns() {
		for _, q := range ci.QPs {
			if ci.Peer == rxeRank {
				out.toRxe = append(out.toRxe, q.QP.Counters())
			}
		}
	}
	const dt = coll.Float32
	me, n := cfg.Rank, cfg.Size
	for _, cl := range plan {
		esz := dt.Size()
		var send, recv, want []byte
		switch cl.kind {
		case coll.KindAllReduce:
			send, recv, want = make([]byte, cl.count*esz), make([]byte, cl.count*esz), make([]byte, cl.count*esz)
			collcheck.Input(send, dt, coll.Sum, n, me, cl.seed, 0)
			collcheck.Expected(want, dt, coll.Sum, n, cl.seed, 0)
		case coll.KindAllGather:
			send, recv, want = make([]byte, cl.count*esz), make([]byte, n*cl.count*esz), make([]byte, n*cl.count*esz)
			collcheck.Input(send, dt, coll.Sum, 1, 0, 33*cl.seed+uint64(me), 0)
			for b := range n {
				collcheck.Input(want[b*cl.count*esz:(b+1)*cl.count*esz], dt, coll.Sum, 1, 0, 33*cl.seed+uint64(b), 0)
			}
		default:
			return fmt.Errorf("plan: %v", cl.kind)
		}
		if err := c.Run(&coll.Request{Kind: cl.kind, Send: send, Recv: recv, Type: dt, Op: coll.Sum}); err != nil {
			return fmt.Errorf("%v of %d elements: %w", cl.kind, cl.count, err)
		}
		out.wrong = append(out.wrong, collcheck.Wrong(recv, want, dt))
	}
	var qs []*qp.Counters
	for _, ci := range c.Conns() {
		for _, q := range ci.QPs {
			qs = append(qs, q.QP.Counters())
		}
	}
	if err := c.Close(); err != nil {
		return fmt.Errorf("Close: %w", err)
	}
	for _, q := range qs {
		out.retrans += q.Load(qp.CounterRetransmittedPkts)
	}
	return nil
}

// collPeerResultOf finds collpeer.py's result line in its output.
func collPeerResultOf(out string) (*collPeerResult, error) {
	const tag = "collpeer: result "
	i := strings.LastIndex(out, tag)
	if i < 0 {
		return nil, fmt.Errorf("collpeer.py printed no result:\n%s", tail(out, 15))
	}
	line := out[i+len(tag):]
	if k := strings.IndexByte(line, '\n'); k >= 0 {
		line = line[:k]
	}
	var r collPeerResult
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return nil, fmt.Errorf("collpeer.py's result: %v", err)
	}
	return &r, nil
}

// rocePacket is a RoCEv2 packet's addresses, BTH opcode and, for an RC
// RDMA WRITE ONLY WITH IMMEDIATE, its payload length (-1 for others).
type rocePacket struct {
	src, dst string
	opcode   byte
	payload  int
}

// rocePackets returns the RoCEv2 packets of a capture.
func rocePackets(pcap string) ([]rocePacket, error) {
	f, err := os.Open(pcap)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		return nil, err
	}
	var out []rocePacket
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		pk := gopacket.NewPacket(data, r.LinkType(), gopacket.NoCopy)
		ip, _ := pk.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		u, _ := pk.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if ip == nil || u == nil || u.DstPort != 4791 || len(u.Payload) < 12 {
			continue
		}
		p := rocePacket{src: ip.SrcIP.String(), dst: ip.DstIP.String(), opcode: u.Payload[0], payload: -1}
		if p.opcode == 0x0b { // BTH 12, RETH 16, ImmDt 4, payload, pad, ICRC 4
			p.payload = len(u.Payload) - 12 - 16 - 4 - int(u.Payload[1]>>4&3) - 4
		}
		out = append(out, p)
	}
	return out, nil
}
