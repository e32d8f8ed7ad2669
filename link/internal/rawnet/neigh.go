//go:build linux

package rawnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrUnresolved is returned (wrapped) by Resolver.Lookup when the next hop
// of a destination answered neither the kernel's neighbour table nor the
// resolver's own ARP requests / neighbour solicitations.
var ErrUnresolved = errors.New("rawnet: next-hop MAC address unresolved")

// ResolverConfig configures NewResolver.
type ResolverConfig struct {
	Netlink *Netlink
	Iface   Iface
	Local   netip.Addr
	// Owned says the kernel has Local configured and so answers ARP / ND
	// for it; otherwise the resolver answers for Local itself.
	Owned bool
	// Timeout bounds one resolution (three requests spread over it);
	// default 1 s. After a failure the destination is not retried for
	// another Timeout (Lookup fails fast meanwhile).
	Timeout time.Duration
	// Reachable is how long a resolved MAC is used before it is confirmed
	// again (default 30 s, the kernel's base_reachable_time). A MAC that
	// is not confirmed within Timeout after that is forgotten.
	Reachable time.Duration
	Logger    *slog.Logger
}

// maxNeighbors bounds the cache: entries are only created by Lookup (for
// destinations the device sends to), never by received traffic.
const maxNeighbors = 4096

// Resolver maps destination IP addresses to the MAC of their next hop: the
// kernel's neighbour table first (rtnetlink), then its own ARP requests
// (IPv4) or neighbour solicitations (IPv6) on the interface. Its goroutine
// also answers ARP requests and solicitations for Local when the kernel
// does not own it, and confirms cached entries every Reachable.
type Resolver struct {
	cfg ResolverConfig
	v6  bool
	fd  int
	f   *os.File
	rc  syscall.RawConn

	mu  sync.Mutex
	m   map[netip.Addr]*nentry
	gen atomic.Uint64

	closed atomic.Bool
	wg     sync.WaitGroup

	// Counters.
	Answered, Requested, Confirmed Counter
}

type nentry struct {
	nexthop     netip.Addr
	mac         [6]byte
	valid       bool
	confirmed   time.Time
	asked       time.Time // last refresh request
	failedUntil time.Time
	wait        chan struct{} // closed when the MAC is learned
}

// NewResolver opens the ARP (IPv4) or ICMPv6 (IPv6) packet socket on the
// interface and starts the resolver's goroutine. It needs CAP_NET_RAW.
func NewResolver(cfg ResolverConfig) (*Resolver, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Second
	}
	if cfg.Reachable <= 0 {
		cfg.Reachable = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Resolver{cfg: cfg, v6: cfg.Local.Is6(), m: map[netip.Addr]*nentry{}}
	proto := uint16(EthTypeARP)
	if r.v6 {
		proto = EthTypeIPv6
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, int(Htons(proto)))
	if err != nil {
		return nil, SocketError("AF_PACKET socket for ARP/ND", err)
	}
	if r.v6 {
		// Only ICMPv6 neighbour solicitations and advertisements.
		prog := []unix.SockFilter{
			{Code: bpfLdB, K: EthLen + 6},                 // next header
			{Code: bpfJeqK, Jt: 0, Jf: 4, K: ProtoICMPv6}, //
			{Code: bpfLdB, K: EthLen + IPv6Len},           // ICMPv6 type
			{Code: bpfJeqK, Jt: 1, Jf: 0, K: 135},         //
			{Code: bpfJeqK, Jt: 0, Jf: 1, K: 136},         //
			{Code: bpfRetK, K: 0xffff},
			{Code: bpfRetK, K: 0},
		}
		if err := AttachFilter(fd, prog); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: Htons(proto), Ifindex: cfg.Iface.Index}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("rawnet: bind ARP/ND socket to %s: %w", cfg.Iface.Name, err)
	}
	if r.v6 && !cfg.Owned {
		// Receive solicitations to Local's solicited-node group on NICs
		// that filter multicast.
		mr := unix.PacketMreq{Ifindex: int32(cfg.Iface.Index), Type: unix.PACKET_MR_MULTICAST, Alen: 6}
		m := solicitedMAC(cfg.Local)
		copy(mr.Address[:], m[:])
		if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mr); err != nil {
			cfg.Logger.Warn("rawnet: cannot join solicited-node group", "err", err)
		}
	}
	r.fd = fd
	r.f = os.NewFile(uintptr(fd), "rawnet-neigh")
	if r.rc, err = r.f.SyscallConn(); err != nil {
		r.f.Close()
		return nil, err
	}
	r.wg.Add(1)
	go r.loop()
	return r, nil
}

// Close stops the goroutine and closes the socket.
func (r *Resolver) Close() error {
	if !r.closed.CompareAndSwap(false, true) {
		return nil
	}
	err := r.f.Close() // wakes the goroutine's Read
	r.wg.Wait()
	return err
}

// Gen returns a number that changes whenever a cached MAC changes or is
// forgotten, so a sender may cache Lookup's answer until Gen differs.
func (r *Resolver) Gen() uint64 { return r.gen.Load() }

// Lookup returns the MAC to send frames for dst to, and the generation to
// cache it under. On a cache miss it asks the kernel's neighbour table and
// then the network, blocking up to Timeout.
func (r *Resolver) Lookup(dst netip.Addr) ([6]byte, uint64, error) {
	dst = dst.Unmap()
	gen := r.gen.Load()
	now := time.Now()
	r.mu.Lock()
	e := r.m[dst]
	if e != nil && e.valid {
		mac := e.mac
		r.mu.Unlock()
		return mac, gen, nil
	}
	if e != nil && now.Before(e.failedUntil) {
		r.mu.Unlock()
		return [6]byte{}, gen, fmt.Errorf("%w: %v (retry after %v)", ErrUnresolved, dst, e.failedUntil.Sub(now).Round(time.Millisecond))
	}
	r.mu.Unlock()

	nh := r.cfg.Netlink.NextHop(dst)
	if mac, ok := r.cfg.Netlink.Neighbor(r.cfg.Iface.Index, nh); ok {
		r.mu.Lock()
		e = r.entry(dst, nh)
		if e == nil {
			r.mu.Unlock()
			return [6]byte{}, gen, fmt.Errorf("%w: neighbour cache full", ErrUnresolved)
		}
		r.setLocked(e, mac, now)
		gen = r.gen.Load()
		r.mu.Unlock()
		return mac, gen, nil
	}
	r.mu.Lock()
	e = r.entry(dst, nh)
	if e == nil {
		r.mu.Unlock()
		return [6]byte{}, gen, fmt.Errorf("%w: neighbour cache full", ErrUnresolved)
	}
	if e.wait == nil {
		e.wait = make(chan struct{})
	}
	wait := e.wait
	r.mu.Unlock()
	t := time.NewTimer(r.cfg.Timeout / 3)
	defer t.Stop()
	for try := 0; try < 3; try++ {
		r.request(nh)
		select {
		case <-wait:
			r.mu.Lock()
			mac := e.mac
			gen = r.gen.Load()
			r.mu.Unlock()
			return mac, gen, nil
		case <-t.C:
			t.Reset(r.cfg.Timeout / 3)
		}
	}
	r.mu.Lock()
	e.failedUntil = time.Now().Add(r.cfg.Timeout)
	r.mu.Unlock()
	return [6]byte{}, gen, fmt.Errorf("%w: %v (next hop %v) did not answer on %s", ErrUnresolved, dst, nh, r.cfg.Iface.Name)
}

// entry returns the cache entry of dst, creating it; nil if the cache is
// full of valid entries.
func (r *Resolver) entry(dst, nh netip.Addr) *nentry {
	if e := r.m[dst]; e != nil {
		e.nexthop = nh
		return e
	}
	if len(r.m) >= maxNeighbors {
		for k, e := range r.m {
			if !e.valid && e.wait == nil {
				delete(r.m, k)
			}
		}
		if len(r.m) >= maxNeighbors {
			return nil
		}
	}
	e := &nentry{nexthop: nh}
	r.m[dst] = e
	return e
}

func (r *Resolver) setLocked(e *nentry, mac [6]byte, now time.Time) {
	if !e.valid || e.mac != mac {
		r.gen.Add(1)
	}
	e.mac, e.valid, e.confirmed, e.failedUntil = mac, true, now, time.Time{}
	if e.wait != nil {
		close(e.wait)
		e.wait = nil
	}
}

// learn records that ip is at mac, for the entries whose next hop is ip.
// Unknown addresses are ignored, so received traffic never grows the cache.
func (r *Resolver) learn(ip netip.Addr, mac [6]byte) {
	if !ip.IsValid() || ip.IsUnspecified() || mac == ([6]byte{}) || mac[0]&1 != 0 {
		return
	}
	now := time.Now()
	r.mu.Lock()
	for _, e := range r.m {
		if e.nexthop == ip {
			r.setLocked(e, mac, now)
			r.Confirmed.Add(1)
		}
	}
	r.mu.Unlock()
}

func (r *Resolver) loop() {
	defer r.wg.Done()
	buf := make([]byte, 2048)
	tick := r.cfg.Timeout / 3
	if tick > time.Second {
		tick = time.Second
	}
	for {
		r.f.SetReadDeadline(time.Now().Add(tick))
		n := 0
		var rerr error
		err := r.rc.Read(func(fd uintptr) bool {
			n, rerr = unix.Read(int(fd), buf)
			return rerr != unix.EAGAIN
		})
		if r.closed.Load() {
			return
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				r.maintain()
				continue
			}
			r.cfg.Logger.Warn("rawnet: ARP/ND socket", "err", err)
			return
		}
		if rerr == nil && n > 0 {
			if r.v6 {
				r.handleND(buf[:n])
			} else {
				r.handleARP(buf[:n])
			}
		}
	}
}

// maintain re-confirms entries older than Reachable and forgets those that
// stay unconfirmed for another Timeout.
func (r *Resolver) maintain() {
	now := time.Now()
	var ask []netip.Addr
	r.mu.Lock()
	for _, e := range r.m {
		if !e.valid {
			continue
		}
		age := now.Sub(e.confirmed)
		switch {
		case age > r.cfg.Reachable+r.cfg.Timeout:
			e.valid = false
			r.gen.Add(1)
		case age > r.cfg.Reachable && now.Sub(e.asked) > r.cfg.Timeout/3:
			e.asked = now
			ask = append(ask, e.nexthop)
		}
	}
	r.mu.Unlock()
	for _, a := range ask {
		// The kernel may have confirmed it meanwhile.
		if mac, ok := r.cfg.Netlink.Neighbor(r.cfg.Iface.Index, a); ok && r.cfg.Owned {
			r.learn(a, mac)
			continue
		}
		r.request(a)
	}
}

// ARP (RFC 826) over Ethernet for IPv4.
const arpLen = 28

func (r *Resolver) handleARP(b []byte) {
	if len(b) < EthLen+arpLen || binary.BigEndian.Uint16(b[12:]) != EthTypeARP {
		return
	}
	a := b[EthLen:]
	if binary.BigEndian.Uint16(a[0:]) != 1 || binary.BigEndian.Uint16(a[2:]) != EthTypeIPv4 || a[4] != 6 || a[5] != 4 {
		return
	}
	op := binary.BigEndian.Uint16(a[6:])
	var sha [6]byte
	copy(sha[:], a[8:14])
	spa := netip.AddrFrom4([4]byte(a[14:18]))
	tpa := netip.AddrFrom4([4]byte(a[24:28]))
	r.learn(spa, sha)
	if op == 1 && tpa == r.cfg.Local && !r.cfg.Owned {
		var f [EthLen + arpLen]byte
		r.arpFrame(f[:], 2, sha, spa)
		r.write(f[:])
		r.Answered.Add(1)
	}
}

// arpFrame writes an ARP message from Local: a request for tpa (to the
// broadcast address) or a reply to tha/tpa.
func (r *Resolver) arpFrame(f []byte, op uint16, tha [6]byte, tpa netip.Addr) {
	dst := [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	if op == 2 {
		dst = tha
	}
	copy(f[0:6], dst[:])
	copy(f[6:12], r.cfg.Iface.MAC[:])
	binary.BigEndian.PutUint16(f[12:], EthTypeARP)
	a := f[EthLen:]
	binary.BigEndian.PutUint16(a[0:], 1)
	binary.BigEndian.PutUint16(a[2:], EthTypeIPv4)
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:], op)
	copy(a[8:14], r.cfg.Iface.MAC[:])
	l := r.cfg.Local.As4()
	copy(a[14:18], l[:])
	if op == 2 {
		copy(a[18:24], tha[:])
	} else {
		clear(a[18:24])
	}
	t := tpa.As4()
	copy(a[24:28], t[:])
}

// request asks the network for nh's MAC.
func (r *Resolver) request(nh netip.Addr) {
	r.Requested.Add(1)
	if !r.v6 {
		var f [EthLen + arpLen]byte
		r.arpFrame(f[:], 1, [6]byte{}, nh)
		r.write(f[:])
		return
	}
	var f [EthLen + IPv6Len + 32]byte
	r.ndFrame(f[:], 135, solicitedMAC(nh), solicitedNode(nh), nh)
	r.write(f[:])
}

// Neighbour discovery (RFC 4861) for IPv6.
func (r *Resolver) handleND(b []byte) {
	if len(b) < EthLen+IPv6Len+24 || binary.BigEndian.Uint16(b[12:]) != EthTypeIPv6 {
		return
	}
	ip := b[EthLen:]
	plen := int(binary.BigEndian.Uint16(ip[4:]))
	if ip[6] != ProtoICMPv6 || ip[7] != 255 || plen < 24 || IPv6Len+plen > len(ip) {
		return // RFC 4861 7.1.1: hop limit 255
	}
	icmp := ip[IPv6Len : IPv6Len+plen]
	src := netip.AddrFrom16([16]byte(ip[8:24]))
	target := netip.AddrFrom16([16]byte(icmp[8:24]))
	var ll [6]byte
	haveLL := false
	for o := icmp[24:]; len(o) >= 8; {
		l := int(o[1]) * 8
		if l == 0 || l > len(o) {
			break
		}
		if (o[0] == 1 || o[0] == 2) && l >= 8 {
			copy(ll[:], o[2:8])
			haveLL = true
		}
		o = o[l:]
	}
	switch icmp[0] {
	case 135: // solicitation
		if haveLL {
			r.learn(src, ll)
		}
		if target != r.cfg.Local || r.cfg.Owned {
			return
		}
		var smac [6]byte
		copy(smac[:], b[6:12])
		dst := src
		if src.IsUnspecified() {
			dst = netip.MustParseAddr("ff02::1") // RFC 4861 7.2.4: DAD → all-nodes
			smac = [6]byte{0x33, 0x33, 0, 0, 0, 1}
		}
		var f [EthLen + IPv6Len + 32]byte
		r.ndFrame(f[:], 136, smac, dst, r.cfg.Local)
		r.write(f[:])
		r.Answered.Add(1)
	case 136: // advertisement
		if haveLL {
			r.learn(target, ll)
		}
	}
}

// ndFrame writes a solicitation (typ 135, for target, with our source
// link-layer option) or an advertisement (typ 136, solicited + override,
// with our target link-layer option).
func (r *Resolver) ndFrame(f []byte, typ uint8, dmac [6]byte, dst, target netip.Addr) {
	copy(f[0:6], dmac[:])
	copy(f[6:12], r.cfg.Iface.MAC[:])
	binary.BigEndian.PutUint16(f[12:], EthTypeIPv6)
	ip := f[EthLen:]
	binary.BigEndian.PutUint32(ip[0:], 6<<28)
	binary.BigEndian.PutUint16(ip[4:], 32)
	ip[6], ip[7] = ProtoICMPv6, 255
	s, d := r.cfg.Local.As16(), dst.As16()
	copy(ip[8:24], s[:])
	copy(ip[24:40], d[:])
	icmp := ip[IPv6Len : IPv6Len+32]
	clear(icmp)
	icmp[0] = typ
	opt := uint8(1)
	if typ == 136 {
		binary.BigEndian.PutUint32(icmp[4:], 0x60000000) // S, O
		opt = 2
	}
	t := target.As16()
	copy(icmp[8:24], t[:])
	icmp[24], icmp[25] = opt, 1
	copy(icmp[26:32], r.cfg.Iface.MAC[:])
	binary.BigEndian.PutUint16(icmp[2:], icmpv6Checksum(ip[8:24], ip[24:40], icmp))
}

func icmpv6Checksum(src, dst, msg []byte) uint16 {
	var s uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			s += uint32(b[i])<<8 | uint32(b[i+1])
		}
		if len(b)%2 == 1 {
			s += uint32(b[len(b)-1]) << 8
		}
	}
	add(src)
	add(dst)
	s += uint32(len(msg))
	s += ProtoICMPv6
	add(msg)
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

func solicitedNode(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom16([16]byte{0xff, 0x02, 10: 0, 11: 1, 12: 0xff, 13: b[13], 14: b[14], 15: b[15]})
}

func solicitedMAC(a netip.Addr) [6]byte {
	b := a.As16()
	return [6]byte{0x33, 0x33, 0xff, b[13], b[14], b[15]}
}

func (r *Resolver) write(f []byte) {
	// Best effort: a full socket buffer loses one request, retried later.
	r.rc.Write(func(fd uintptr) bool {
		_, err := unix.Write(int(fd), f)
		return err != unix.EAGAIN
	})
}
