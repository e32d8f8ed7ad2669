package roce

import (
	"net/netip"
	"time"
)

//go:generate stringer -type=ICRCIDRecovery -trimprefix=ICRCID -output=icrcidrecovery_string.go

// ICRCIDRecovery says how a device checks the ICRC of an IPv4 packet whose
// IPv4 identification its link does not see (link/udp; the raw bindings and
// link/mem report the ID, and it is always checked exactly there). The ICRC
// covers the ID (IBA A17.4.1), so such a packet is first checked with the
// link's guess (0 for a datagram that came alone, k for segment k of a GRO
// buffer: what Linux and goroce senders put there); this setting says what
// happens when the guess is wrong. See doc/icrc-id.md for the arithmetic.
type ICRCIDRecovery uint8

const (
	// ICRCIDWindow (the default) recovers the ID from the ICRC
	// (rocev2.RecoverIPv4ID) and accepts it only inside a window around
	// the next ID the peer's counter is expected to give (see idTracker):
	// a random error passes with probability about 2^-23.8 on a busy
	// peer, where an exact check gives 2^-32 and ICRCIDAny 2^-16.
	ICRCIDWindow ICRCIDRecovery = iota
	// ICRCIDOff never recovers: only the link's guess is tried, a full
	// 32-bit check. For peers known to send the ID the guess expects
	// (goroce, and Linux UDP sockets, which send DF datagrams with ID 0).
	ICRCIDOff
	// ICRCIDAny accepts any recovered ID, which leaves 16 of the 32 check
	// bits: the behaviour before the window, kept for peers whose IDs
	// follow no counter.
	ICRCIDAny
)

// The window of idTracker around a peer's __ip_select_ident counter
// (doc/icrc-id.md, "The window").
const (
	// idBehind is how far before the expected ID a packet may be (the
	// network or the sender's CPUs reordered it).
	idBehind = 32
	// idAhead is how far after the expected ID a packet may be, before
	// the allowance for elapsed time: packets lost, sent to another
	// device on our address, or delayed by jitter.
	idAhead = 256
	// idPerMillisecond widens the forward window by the most the kernel's
	// random delta can add per millisecond (HZ 1000).
	idPerMillisecond = 1
	// idStep is the largest step past the expected ID that moves the
	// window's anchor by itself; a packet further ahead only proposes an
	// anchor (idPeer.alt). idStep < idBehind, so that one packet over a
	// wrong ID cannot push the peer's next genuine IDs out of the window.
	idStep = 16
	// idResync is how many consecutive out-of-window packets, each within
	// the forward window of the one before, re-seed a peer's tracker (its
	// counter jumped: heavy loss, or traffic to another host sharing its
	// hash bucket). The last of them is accepted.
	idResync = 2
	// idPeers bounds the peers tracked; beyond it the least recently seen
	// is forgotten. Only sources a QP accepts reach the tracker.
	idPeers = 1024
)

// idPeer is what idTracker knows of one peer's ID counter.
type idPeer struct {
	addr   [4]byte
	next   uint16    // the anchor: the ID the peer's next packet is expected to carry
	at     time.Time // when next was set
	alt    uint16    // a proposed anchor: the ID after an accepted jump past idStep
	altAt  time.Time // when alt was set
	altOK  bool      // alt is set
	cand   uint16    // the next ID of a run of out-of-window packets
	candN  uint8     // how many packets that run has (0: none)
	candAt time.Time
}

// idTracker follows the IPv4 ID counter of each peer whose ICRCs needed
// the ID recovered, and accepts a recovered ID only inside a window around
// the counter's expected value:
//
//	[next − idBehind, next + idAhead + idPerMillisecond·ms since next was set]
//
// A new peer, or one silent long enough for the window to cover every ID,
// re-seeds the tracker from the ID it carries; so does a run of idResync
// out-of-window packets whose IDs follow each other (the counter jumped).
// The anchor (next) moves only on what genuine traffic supports: at most
// idStep at a time, or to a proposal (alt) that a second packet confirms.
// doc/icrc-id.md has the residual strength of each case and what a
// spoofer gains.
//
// The engine lock serialises every call. In steady state (peers known)
// accept does not allocate.
type idTracker struct {
	index map[[4]byte]int32
	peers []idPeer
}

// accept reports whether a packet from src whose ICRC says it carried the
// IPv4 ID id, received at now, is inside its peer's window, and updates
// the peer's counter. reseed reports that the peer's tracker was (re)started
// by this packet.
func (t *idTracker) accept(src netip.Addr, id uint16, now time.Time) (ok, reseed bool) {
	key := src.Unmap().As4()
	i, found := t.index[key]
	if !found {
		i = t.add(key)
		t.peers[i] = idPeer{addr: key, next: id + 1, at: now}
		return true, true
	}
	p := &t.peers[i]
	fwd := uint32(id - p.next)
	switch {
	case fwd <= idStep:
		// The counter's next ID, or close after it: the anchor follows.
		p.next, p.at, p.candN = id+1, now, 0
		return true, false
	case p.altOK && uint32(id-p.alt) <= aheadSince(p.altAt, now):
		// A second packet that follows an accepted jump: the counter did
		// jump (loss, the kernel's time step), the anchor moves there.
		p.next, p.at, p.altOK, p.candN = id+1, now, false, 0
		return true, false
	case fwd <= aheadSince(p.at, now):
		// Inside the window but past idStep: accepted, and proposed as the
		// anchor. The anchor itself stays, so that if this ID was wrong
		// the counter's next packets are still inside the window.
		p.alt, p.altAt, p.altOK, p.candN = id+1, now, true, 0
		return true, false
	}
	if back := uint32(p.next - id); back <= idBehind {
		return true, false
	}
	// Out of the window: start or extend a run.
	if p.candN > 0 && uint32(id-p.cand) <= aheadSince(p.candAt, now) {
		p.candN++
	} else {
		p.candN = 1
	}
	p.cand, p.candAt = id+1, now
	if p.candN >= idResync {
		p.next, p.at, p.altOK, p.candN = id+1, now, false, 0
		return true, true
	}
	return false, false
}

// aheadSince is the forward window, in IDs after next, for a packet at now
// when next was set at `at`: idAhead plus the elapsed milliseconds (one
// more for the jiffy under way), saturated at the whole ID space.
func aheadSince(at, now time.Time) uint32 {
	const all = 1<<16 - 1
	ms := now.Sub(at) / time.Millisecond
	if ms < 0 {
		ms = 0
	}
	if ms >= all {
		return all
	}
	return min(idAhead+idPerMillisecond*(uint32(ms)+1), all)
}

// add returns the slot for a new peer: a free one, or the least recently
// seen peer's.
func (t *idTracker) add(key [4]byte) int32 {
	if t.index == nil {
		t.index = make(map[[4]byte]int32)
	}
	if len(t.peers) < idPeers {
		t.peers = append(t.peers, idPeer{})
		i := int32(len(t.peers) - 1)
		t.index[key] = i
		return i
	}
	old := int32(0)
	for i := range t.peers {
		if t.peers[i].at.Before(t.peers[old].at) {
			old = int32(i)
		}
	}
	delete(t.index, t.peers[old].addr)
	t.index[key] = old
	return old
}
