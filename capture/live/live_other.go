//go:build !linux

package live

import (
	"fmt"
	"io"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/pcapng"
)

// Handle is a live capture on one interface; on this system Open always
// fails with ErrNotSupported.
type Handle struct{}

// Open returns ErrNotSupported: AF_PACKET is Linux only.
func Open(iface string, cfg Config) (*Handle, error) {
	return nil, fmt.Errorf("%w: AF_PACKET capture needs Linux", ErrNotSupported)
}

// Next returns io.EOF.
func (h *Handle) Next(f *capture.Frame) error { return io.EOF }

// Interface returns the pcapng description of a capture on no
// interface.
func (h *Handle) Interface() pcapng.Interface { return pcapngInterface("", DefaultSnapLen) }

// Stop does nothing.
func (h *Handle) Stop() {}

// Stats returns zero counters.
func (h *Handle) Stats() (Stats, error) { return Stats{}, nil }

// Close does nothing.
func (h *Handle) Close() error { return nil }
