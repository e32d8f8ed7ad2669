//go:build !linux

package afpacket

import (
	"fmt"
	"net/netip"

	"github.com/goroce/goroce/link"
)

// Link is a RoCEv2 transport over an AF_PACKET socket; Linux only.
type Link struct{}

// Open returns an error matching link.ErrNotSupported outside Linux.
func Open(cfg Config) (*Link, error) {
	return nil, fmt.Errorf("afpacket: AF_PACKET needs Linux: %w", link.ErrNotSupported)
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

// MAC returns the zero address outside Linux.
func (l *Link) MAC() [6]byte { return [6]byte{} }

// Info returns zero values outside Linux.
func (l *Link) Info() Info { return Info{} }

// Drops returns zero counters outside Linux.
func (l *Link) Drops() Drops { return Drops{} }
