package live

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
	ErrNotSupported = errors.New("live: live capture not supported")
	// ErrNoInterface: the interface does not exist (in the calling
	// thread's network namespace).
	ErrNoInterface = errors.New("no such network interface")
	// ErrLinkType: the interface is not Ethernet.
	ErrLinkType = errors.New("live: interface link type not supported (Ethernet only)")
	// ErrTimeout is returned by Next when no frame arrived within
	// Config.Wait. It matches os.ErrDeadlineExceeded, as capture.Source
	// documents.
	ErrTimeout = fmt.Errorf("live: no frame within the wait: %w", os.ErrDeadlineExceeded)
)

// Config configures Open. The zero value is usable: dumpcap's defaults.
type Config struct {
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

// pcapngInterface returns the pcapng interface description of a capture
// on the interface name with snap length snap.
func pcapngInterface(name string, snap int) pcapng.Interface {
	return pcapng.Interface{Name: name, LinkType: capture.LinkEthernet, SnapLen: snap, Filter: FilterExpr, OS: runtime.GOOS}
}

var _ capture.Source = (*Handle)(nil)
