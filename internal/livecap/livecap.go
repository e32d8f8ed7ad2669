package livecap

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/pcapng"
)

// Defaults of Config.
const (
	// DefaultSnapLen is dumpcap's default snap length.
	DefaultSnapLen = 262144
	// DefaultWait is how long Next waits for a frame before it returns
	// ErrTimeout.
	DefaultWait = 100 * time.Millisecond
	// DefaultBuffer is the socket receive buffer, dumpcap's default.
	DefaultBuffer = 2 << 20
)

// Errors of Open and Next. Check them with errors.Is.
var (
	// ErrNotSupported: live capture is not available on this system, or
	// the process lacks CAP_NET_RAW.
	ErrNotSupported = errors.New("livecap: live capture not supported")
	// ErrNoInterface: the interface does not exist (in the calling
	// thread's network namespace).
	ErrNoInterface = errors.New("no such network interface")
	// ErrLinkType: the interface is not Ethernet.
	ErrLinkType = errors.New("livecap: interface link type not supported (Ethernet only)")
	// ErrTimeout is returned by Next when no frame arrived within
	// Config.Wait. It matches os.ErrDeadlineExceeded, as capture.Source
	// documents.
	ErrTimeout = fmt.Errorf("livecap: no frame within the wait: %w", os.ErrDeadlineExceeded)
)

// Config configures Open. Only Interface is required.
type Config struct {
	// Interface is the name of the interface to capture on.
	Interface string
	// SnapLen caps the bytes kept of each frame; DefaultSnapLen when 0.
	SnapLen int
	// NoPromisc leaves the interface out of promiscuous mode (dumpcap -p).
	NoPromisc bool
	// Wait bounds how long Next blocks without a frame; DefaultWait when 0.
	Wait time.Duration
	// Buffer is the socket receive buffer in bytes; DefaultBuffer when 0.
	Buffer int
}

// Stats are the capture's counters.
type Stats struct {
	// Captured counts the frames Next returned.
	Captured uint64
	// Received counts the frames the kernel passed the filter, dropped
	// ones included (tp_packets).
	Received uint64
	// Dropped counts the frames the kernel dropped because the socket's
	// buffer was full (tp_drops): dumpcap's "dropped".
	Dropped uint64
}

// Interface returns the pcapng interface description of a capture on
// the given interface with the snap length Open uses for snap.
func Interface(name string, snap int) pcapng.Interface {
	if snap <= 0 || snap > DefaultSnapLen {
		snap = DefaultSnapLen // Open caps it the same way
	}
	return pcapng.Interface{Name: name, LinkType: capture.LinkEthernet, SnapLen: snap, Filter: FilterExpr, OS: runtime.GOOS}
}

var _ capture.Source = (*Handle)(nil)
