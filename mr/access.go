package mr

import "strconv"

// AccessFlags is a set of access rights on a memory region. The bit values
// are those of enum ibv_access_flags in rdma-core's libibverbs/verbs.h, so a
// value can be carried to and from verbs-style APIs unchanged.
type AccessFlags uint32

const (
	// LocalWrite lets the local device write into the region: receive
	// buffers, READ response data, atomic results (IBV_ACCESS_LOCAL_WRITE).
	LocalWrite AccessFlags = 1 << 0
	// RemoteWrite lets a peer RDMA WRITE into the region
	// (IBV_ACCESS_REMOTE_WRITE).
	RemoteWrite AccessFlags = 1 << 1
	// RemoteRead lets a peer RDMA READ from the region
	// (IBV_ACCESS_REMOTE_READ).
	RemoteRead AccessFlags = 1 << 2
	// RemoteAtomic lets a peer run CMP_SWAP and FETCH_ADD on the region
	// (IBV_ACCESS_REMOTE_ATOMIC).
	RemoteAtomic AccessFlags = 1 << 3
	// MWBind lets memory windows be bound to the region (IBV_ACCESS_MW_BIND;
	// IBA C10-73). A window's remote rights are its own; the region needs
	// MWBind, and LocalWrite for a window with RemoteWrite or RemoteAtomic
	// (C10-74).
	MWBind AccessFlags = 1 << 4
)

const (
	remoteAccess = RemoteWrite | RemoteRead | RemoteAtomic
	validAccess  = LocalWrite | remoteAccess | MWBind
)

// Has reports whether a grants every right in need.
func (a AccessFlags) Has(need AccessFlags) bool { return a&need == need }

// String returns the set as names joined by "|", for example
// "LocalWrite|RemoteRead"; the empty set is "0" and unknown bits are shown in
// hex.
func (a AccessFlags) String() string {
	if a == 0 {
		return "0"
	}
	names := [...]string{"LocalWrite", "RemoteWrite", "RemoteRead", "RemoteAtomic", "MWBind"}
	var b []byte
	for i, n := range names {
		if a&(1<<i) == 0 {
			continue
		}
		if len(b) > 0 {
			b = append(b, '|')
		}
		b = append(b, n...)
	}
	if rest := a &^ validAccess; rest != 0 {
		if len(b) > 0 {
			b = append(b, '|')
		}
		b = append(b, "0x"...)
		b = strconv.AppendUint(b, uint64(rest), 16)
	}
	return string(b)
}

// Key is a memory key: the lkey that local work requests quote in their
// scatter/gather entries, or the rkey a peer quotes in a RETH or AtomicETH.
// Zero is never issued, so the zero Key means "no key".
type Key uint32

// String returns k as eight hex digits with a 0x prefix, for example
// "0x0000abcd".
func (k Key) String() string {
	const hex = "0123456789abcdef"
	var b [10]byte
	b[0], b[1] = '0', 'x'
	for i := 9; i >= 2; i-- {
		b[i] = hex[k&0xf]
		k >>= 4
	}
	return string(b[:])
}
