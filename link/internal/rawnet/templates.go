//go:build linux

package rawnet

import "net/netip"

// maxTemplates bounds a Templates cache: a sender to more destinations
// starts over.
const maxTemplates = 1024

// Templates is a raw link's per-destination cache of header Templates,
// with the next-hop MAC of each resolved by a Resolver on first use. It
// belongs to the goroutine that sends (the link's send lock); the most
// recent destination is found without a map lookup.
type Templates struct {
	res      *Resolver
	srcMAC   [6]byte
	local    netip.AddrPort
	tos, ttl uint8
	tag      bool   // write an 802.1Q tag (SetTag)
	vid      uint16 // its VLAN ID

	m    map[netip.AddrPort]*Template
	gen  uint64 // the Resolver's Gen the cached MACs are from
	last *Template
}

// NewTemplates returns an empty cache of the headers of frames from
// srcMAC and local (address and default UDP source port) with the TOS
// (DSCP and default ECN) and TTL given, resolving next hops through res.
func NewTemplates(res *Resolver, srcMAC [6]byte, local netip.AddrPort, tos, ttl uint8) *Templates {
	return &Templates{res: res, srcMAC: srcMAC, local: local, tos: tos, ttl: ttl,
		m: make(map[netip.AddrPort]*Template)}
}

// SetTag makes the templates built from now on carry an IEEE 802.1Q tag
// with VLAN ID vid (Template.Tag); call it before the first Lookup.
func (c *Templates) SetTag(vid uint16) {
	c.tag, c.vid = true, vid
	clear(c.m)
	c.last = nil
}

// Lookup returns the template for dst (port 0 means 4791), resolving the
// next-hop MAC on first use, which may block up to the Resolver's timeout.
// The cache forgets every template when the Resolver's Gen changes (a MAC
// changed or was forgotten). A cached template does not allocate.
func (c *Templates) Lookup(dst netip.AddrPort) (*Template, error) {
	dst = RoCEAddr(dst)
	if g := c.res.Gen(); g != c.gen {
		clear(c.m) // a MAC changed or was forgotten
		c.gen, c.last = g, nil
	}
	if c.last != nil && c.last.Dst == dst {
		return c.last, nil
	}
	if tp := c.m[dst]; tp != nil {
		c.last = tp
		return tp, nil
	}
	mac, gen, err := c.res.Lookup(dst.Addr())
	if err != nil {
		return nil, err
	}
	tp, err := NewTemplate(c.srcMAC, mac, c.local, dst, c.tos, c.ttl)
	if err != nil {
		return nil, err
	}
	if c.tag {
		tp.Tag(c.vid)
	}
	if gen != c.gen {
		clear(c.m)
		c.gen = gen
	}
	if len(c.m) >= maxTemplates {
		clear(c.m)
	}
	c.m[dst] = &tp
	c.last = &tp
	return &tp, nil
}
