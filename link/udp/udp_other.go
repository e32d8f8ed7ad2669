//go:build !linux

package udp

import (
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/link"
)

// Link is a RoCEv2 transport over one kernel UDP socket; it is implemented
// on Linux only.
type Link struct{}

// Open returns an error matching link.ErrNotSupported outside Linux.
func Open(cfg Config) (*Link, error) {
	return nil, fmt.Errorf("udp: sendmmsg/UDP_SEGMENT transport needs Linux: %w", link.ErrNotSupported)
}

// Send is not supported outside Linux.
func (l *Link) Send(dgs []link.Datagram) (int, error) { return 0, link.ErrNotSupported }

// Recv is not supported outside Linux.
func (l *Link) Recv(dgs []link.Datagram) (int, error) { return 0, link.ErrNotSupported }

// LocalAddr returns the zero AddrPort outside Linux.
func (l *Link) LocalAddr() netip.AddrPort { return netip.AddrPort{} }

// Close does nothing outside Linux.
func (l *Link) Close() error { return nil }

// Stats returns zero counters outside Linux.
func (l *Link) Stats() link.Stats { return link.Stats{} }

// Info returns zero values outside Linux.
func (l *Link) Info() Info { return Info{} }

// PlanIPID sets every IPID to 0 outside Linux.
func (l *Link) PlanIPID(dgs []link.Datagram) {
	for i := range dgs {
		dgs[i].IPID = 0
	}
}

// Gathers reports false outside Linux.
func (l *Link) Gathers() bool { return false }

// SourcePort returns want outside Linux (there is no link to send from).
func (l *Link) SourcePort(want uint16) uint16 { return want }

// SourcePorts returns 0 outside Linux.
func (l *Link) SourcePorts() int { return 0 }

// GrowRcvBuf is not supported outside Linux.
func (l *Link) GrowRcvBuf(n int) (int, error) { return 0, link.ErrNotSupported }
