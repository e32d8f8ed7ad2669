package fabric

import "net/netip"

// The fabric's address plan. Leaf A's host i is 10.201.i.2 on its link
// 10.201.i.0/24 (the leaf is .1), leaf B's 10.202.i.2; the link from
// leaf A to spine k is 10.210.k.0/24 (leaf .1, spine .2), from spine k to
// leaf B 10.220.k.0/24 (spine .1, leaf .2); an Attach link is
// 10.230.0.0/30 (the attached namespace .1, leaf A .2).
//
// SideA returns the prefix of leaf A's hosts, 10.201.0.0/16.
func SideA() netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 201, 0, 0}), 16) }

// SideB returns the prefix of leaf B's hosts, 10.202.0.0/16.
func SideB() netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 202, 0, 0}), 16) }
