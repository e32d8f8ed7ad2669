package perftest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// Role is which side of the exchange this program plays.
type Role uint8

// Roles. The client is the side given the server's name; it writes first.
const (
	Client Role = iota
	Server
)

// String names the role.
func (r Role) String() string {
	if r == Server {
		return "server"
	}
	return "client"
}

// DefaultTimeout bounds each step of the exchange when Conn.Timeout is 0.
const DefaultTimeout = 30 * time.Second

// ErrTimeout is wrapped by the errors of steps the peer did not answer in
// time; ErrPeerClosed by those cut short because the peer closed the
// connection.
var (
	ErrTimeout    = errors.New("perftest: peer did not answer in time")
	ErrPeerClosed = errors.New("perftest: peer closed the connection")
)

// Conn is one perftest TCP connection. It does the exchange primitives:
// fixed-size messages, client writes first, each step bounded in time.
// A Conn is used by one goroutine.
type Conn struct {
	nc   net.Conn
	role Role
	// Timeout bounds each step (DefaultTimeout if 0): the peer's message
	// must arrive within it, unless Progress says the RDMA test is moving.
	Timeout time.Duration
	// Progress, if set, reports whether RDMA traffic moved since its last
	// call. While it returns true a wait for the peer's next message is not
	// timed out: the peer is busy running the test, not dead.
	Progress func() bool
}

// NewConn wraps an established connection.
func NewConn(nc net.Conn, role Role) *Conn { return &Conn{nc: nc, role: role} }

// Role returns the side this Conn plays.
func (c *Conn) Role() Role { return c.role }

// NetConn returns the underlying connection.
func (c *Conn) NetConn() net.Conn { return c.nc }

// Close closes the connection.
func (c *Conn) Close() error { return c.nc.Close() }

func (c *Conn) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

// Exchange sends out and receives n bytes, in the order of c's role (the
// client writes first). what names the message in errors.
func (c *Conn) Exchange(what string, out []byte, n int) ([]byte, error) {
	if c.role == Client {
		if err := c.write(what, out); err != nil {
			return nil, err
		}
		return c.read(what, n)
	}
	in, err := c.read(what, n)
	if err != nil {
		return nil, err
	}
	return in, c.write(what, out)
}

func (c *Conn) write(what string, b []byte) error {
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.timeout())); err != nil {
		return err
	}
	if _, err := c.nc.Write(b); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("%w: sending %s for %v", ErrTimeout, what, c.timeout())
		}
		return fmt.Errorf("perftest: sending %s: %w", what, err)
	}
	return nil
}

// read reads exactly n bytes. The wait is cut into slices of at most a
// second so that Progress can keep a long test alive.
func (c *Conn) read(what string, n int) ([]byte, error) {
	b := make([]byte, n)
	got := 0
	limit := c.timeout()
	idleSince := time.Now()
	for got < n {
		slice := min(time.Second, limit-time.Since(idleSince))
		if slice <= 0 {
			if got > 0 {
				return nil, fmt.Errorf("%w: %s: %d of %d bytes in %v (a short or garbled exchange: is the peer the same tool?)",
					ErrTimeout, what, got, n, limit)
			}
			return nil, fmt.Errorf("%w: waited %v for %s", ErrTimeout, limit, what)
		}
		if err := c.nc.SetReadDeadline(time.Now().Add(slice)); err != nil {
			return nil, err
		}
		k, err := c.nc.Read(b[got:])
		got += k
		if k > 0 {
			idleSince = time.Now()
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			if c.Progress != nil && c.Progress() {
				idleSince = time.Now()
			}
		case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
			if got > 0 {
				return nil, fmt.Errorf("%w after %d of the %d bytes of %s (a short exchange: is the peer the same tool and version?)",
					ErrPeerClosed, got, n, what)
			}
			return nil, fmt.Errorf("%w before sending %s (the peer exited: see its output)", ErrPeerClosed, what)
		default:
			return nil, fmt.Errorf("perftest: receiving %s: %w", what, err)
		}
	}
	return b, nil
}

// Done sends perftest's final "done\0" and waits briefly for the peer's,
// which perftest never reads but sends.
func (c *Conn) Done() error {
	if err := c.write(`"done"`, []byte("done\x00")); err != nil {
		return err
	}
	c.nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var b [doneLen]byte
	io.ReadFull(c.nc, b[:])
	return nil
}
