//go:build !linux

package livecap

import (
	"fmt"
	"io"

	"github.com/goroce/goroce/internal/capfmt"
)

// Handle is a live capture on one interface; on this system Open always
// fails with ErrNotSupported.
type Handle struct{}

// Open returns ErrNotSupported: AF_PACKET is Linux only.
func Open(cfg Config) (*Handle, error) {
	return nil, fmt.Errorf("%w: AF_PACKET capture needs Linux", ErrNotSupported)
}

// Next returns io.EOF.
func (h *Handle) Next(f *capfmt.Frame) error { return io.EOF }

// Stop does nothing.
func (h *Handle) Stop() {}

// Stats returns zero counters.
func (h *Handle) Stats() (Stats, error) { return Stats{}, nil }

// Close does nothing.
func (h *Handle) Close() error { return nil }
