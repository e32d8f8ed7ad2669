package cm

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net/netip"
)

// GUID is a 64-bit globally unique identifier (IBA 4.1.1): a CA's node
// GUID, which the CM sends as Local CA GUID in REQ and REP and as the ARI
// of a REJ with reason Timeout, and which the kernel's CM keys its
// duplicate and stale-connection checks on (cm_insert_remote_id,
// cm_insert_remote_qpn: remote comm ID or remote QPN, with the remote CA
// GUID).
type GUID uint64

// String formats the GUID as ibv_devinfo prints node_guid:
// "5054:00ff:fe77:0002".
func (g GUID) String() string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", uint16(g>>48), uint16(g>>32), uint16(g>>16), uint16(g))
}

// GUIDFromMAC returns the node GUID rxe gives a device on a netdev with
// this MAC (rxe_register_device, through addrconf_addr_eui48): the
// modified EUI-64 of the MAC, its three first bytes, FF:FE, its three
// last bytes, with the universal/local bit (0x02 of the first byte)
// flipped. MAC 52:54:00:77:00:02 gives 5054:00ff:fe77:0002. It reports
// false for a MAC that is not 6 bytes or is all zero (the loopback
// device's), which gives no usable GUID.
func GUIDFromMAC(mac []byte) (GUID, bool) {
	if len(mac) != 6 || [6]byte(mac) == [6]byte{} {
		return 0, false
	}
	var b [8]byte
	copy(b[0:3], mac[0:3])
	b[3], b[4] = 0xff, 0xfe
	copy(b[5:8], mac[3:6])
	b[0] ^= 0x02
	return GUID(binary.BigEndian.Uint64(b[:])), true
}

// GUIDFromAddr returns a node GUID for a device with no MAC of its own
// (the loopback interface, an address no interface owns, an in-memory
// link): a stable, non-zero, locally administered EUI-64 derived from the
// device's address and UDP port. The first byte is 0x02 (the U/L bit set:
// locally administered; the group bit clear); the other seven are the
// first seven bytes of the FNV-1a 64 hash of the 16-byte address (IPv4
// mapped) and the port, big endian. So devices on 127.0.0.1 and 127.0.0.2,
// or on one address with two ports, get different GUIDs, the same ones
// every run.
func GUIDFromAddr(a netip.AddrPort) GUID {
	h := fnv.New64a()
	ip := a.Addr().As16()
	h.Write(ip[:])
	h.Write(binary.BigEndian.AppendUint16(nil, a.Port()))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], h.Sum64())
	copy(b[1:], b[:7])
	b[0] = 0x02
	return GUID(binary.BigEndian.Uint64(b[:]))
}
