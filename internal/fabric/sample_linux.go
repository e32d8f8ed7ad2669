//go:build linux

package fabric

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// sampleSnap is what a FlowSampler keeps of a frame: the headers up to
// the BTH (Ethernet 14, IPv4 up to 60, UDP 8, BTH 12).
const sampleSnap = 128

// FlowSampler watches which spine each flow takes: an AF_PACKET socket on
// the leaf's end of every leaf–spine link sees the RoCEv2 packets the
// leaf sends to that spine, one in Every of them at random, chosen by a
// classic BPF filter in the kernel (flowFilter), so that the sockets cost
// little even at the fabric's full rate. A flow that sticks to its path
// shows one spine; a flow of N packets is missed with probability about
// e^(−N/Every).
type FlowSampler struct {
	// Every is the sampling interval: one packet in Every is kept.
	Every int

	f     *Fabric
	socks []sampleSock
	stop  atomic.Bool
	wg    sync.WaitGroup
	mu    sync.Mutex
	flows map[flowKey]*FlowSample
}

type sampleSock struct {
	fd          int
	leaf, spine int
}

// SampleFlows starts a FlowSampler keeping one in every packets (1: all)
// on every leaf's links to the spines. Stop ends it.
func (f *Fabric) SampleFlows(every int) (*FlowSampler, error) {
	if every < 1 || every > 1<<20 {
		return nil, fmt.Errorf("%w: sampling every %d packets", ErrConfig, every)
	}
	prog, err := bpf.Assemble(flowFilter(sampleSnap, uint32(every), true))
	if err != nil {
		return nil, fmt.Errorf("fabric: flow filter: %w", err)
	}
	raw := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		raw[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	s := &FlowSampler{Every: every, f: f, flows: map[flowKey]*FlowSample{}}
	for l := range f.Leaves {
		for k := range f.Spines {
			u := f.Uplink(l, k)
			fd, err := openSampleSock(u.A.NS, u.A.Dev, raw)
			if err != nil {
				s.Stop()
				return nil, fmt.Errorf("fabric: sampling %s: %w", u.Name, err)
			}
			s.socks = append(s.socks, sampleSock{fd: fd, leaf: l, spine: k})
		}
	}
	for _, so := range s.socks {
		s.wg.Add(1)
		go s.loop(so)
	}
	return s, nil
}

// openSampleSock opens an AF_PACKET socket in ns bound to dev, with the
// filter attached before the bind so that nothing unfiltered is queued.
func openSampleSock(ns, dev string, filter []unix.SockFilter) (int, error) {
	fd := -1
	err := InNetns(ns, func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		proto := htons(unix.ETH_P_ALL)
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto)); err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		fp := unix.SockFprog{Len: uint16(len(filter)), Filter: unsafe.SliceData(filter)}
		if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fp); err != nil {
			return fmt.Errorf("SO_ATTACH_FILTER: %w", err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20); err != nil {
			return err
		}
		tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index})
	})
	if err != nil && fd >= 0 {
		unix.Close(fd)
		fd = -1
	}
	return fd, err
}

func (s *FlowSampler) loop(so sampleSock) {
	defer s.wg.Done()
	b := make([]byte, sampleSnap)
	flags := unix.MSG_TRUNC // n is the frame's whole length, b holds its head
	for {
		if flags&unix.MSG_DONTWAIT == 0 && s.stop.Load() {
			flags |= unix.MSG_DONTWAIT // stopping: read what is queued, then end
		}
		n, _, err := unix.Recvfrom(so.fd, b, flags)
		if err != nil || n <= 0 {
			if flags&unix.MSG_DONTWAIT != 0 && (err == unix.EAGAIN || err == unix.EWOULDBLOCK) {
				return
			}
			continue
		}
		p, ok := ParseFrame(b[:min(n, len(b))])
		if !ok {
			continue
		}
		k := flowKey{src: p.Src, dst: p.Dst, qpn: p.DestQP, leaf: so.leaf, spine: so.spine}
		s.mu.Lock()
		fs := s.flows[k]
		if fs == nil {
			fs = &FlowSample{Src: p.Src, Dst: p.Dst, DestQP: p.DestQP, Leaf: so.leaf, Spine: so.spine}
			s.flows[k] = fs
		}
		fs.Packets++
		fs.Bytes += uint64(n)
		s.mu.Unlock()
	}
}

// Stop ends the sampler, waits for its goroutines (which first read what
// their sockets hold) and returns what it saw, ordered by source,
// destination, QP and spine, and the packets the sockets dropped
// (accepted by the filter but not read in time). Packets still crossing
// the fabric when Stop is called may be missed.
func (s *FlowSampler) Stop() ([]FlowSample, uint64) {
	if s.stop.Swap(true) {
		return nil, 0
	}
	s.wg.Wait()
	var drops uint64
	for _, so := range s.socks {
		if st, err := unix.GetsockoptTpacketStats(so.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil {
			drops += uint64(st.Drops)
		}
		unix.Close(so.fd)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortSamples(s.flows), drops
}
