package testutil

import "time"

//go:generate stringer -type=DropReason -trimprefix=Drop
//go:generate stringer -type=EventKind -trimprefix=Event

// DropReason says which impairment dropped a packet. When several would
// have dropped the same packet, the first in the order of the constants
// below is recorded.
type DropReason uint8

// Drop reasons, in the order in which a [Link] checks them.
const (
	DropBlackhole      DropReason = iota // sent inside a [Blackhole] window
	DropIndex                            // listed in Impairment.DropList
	DropClass                            // matched Impairment.DropIf
	DropLoss                             // i.i.d. Impairment.Loss
	DropGilbertElliott                   // Impairment.GilbertElliott
	DropBurstLoss                        // Impairment.BurstLoss
	DropQueueFull                        // tail drop: Impairment.QueueLimit reached

	// NumDropReasons is the number of drop reasons; it sizes LinkStats.Dropped.
	NumDropReasons
)

// EventKind is the kind of an [Event].
type EventKind uint8

// Event kinds reported to Impairment.OnPacket.
const (
	EventSent       EventKind = iota // Link.Send was called; before any impairment
	EventDropped                     // the packet (or its duplicate) was dropped; see Event.Reason
	EventDuplicated                  // a duplicate copy was made
	EventReordered                   // the packet is held back (Impairment.Reorder)
	EventCorrupted                   // a copy had a byte flipped (Impairment.Corrupt)
	EventInjected                    // Link.Inject was called
	EventDelivered                   // the packet left the link through Link.Receive
)

// Event describes one step of one packet through a [Link]; see
// Impairment.OnPacket.
type Event struct {
	Kind EventKind
	// Time is the virtual time of the step: the Send or Inject time, or for
	// EventDelivered the scheduled delivery time (never after the Receive
	// time).
	Time time.Time
	// Index is the packet's 0-based Send index (the numbering DropList uses);
	// a duplicate has its original's index. Injected packets have index -1.
	Index int
	// Len is the packet length in bytes.
	Len int
	// Reason is set for EventDropped.
	Reason DropReason
	// Pkt aliases the packet bytes. It is valid only during the callback and
	// must not be modified or retained.
	Pkt []byte
}

// LinkStats counts what a [Link] did. Every packet is accounted for:
//
//	Sent - TotalDropped() + Duplicated + Injected == Delivered + Link.Pending()
type LinkStats struct {
	Sent       uint64                 // Link.Send calls
	Delivered  uint64                 // packets returned by Link.Receive (duplicates and injected included)
	Dropped    [NumDropReasons]uint64 // drops, indexed by DropReason
	Duplicated uint64                 // duplicate copies made
	Reordered  uint64                 // packets held back by Impairment.Reorder
	Corrupted  uint64                 // copies with a flipped byte
	Injected   uint64                 // Link.Inject calls
}

// TotalDropped returns the number of drops for all reasons.
func (s LinkStats) TotalDropped() uint64 {
	var n uint64
	for _, d := range s.Dropped {
		n += d
	}
	return n
}
