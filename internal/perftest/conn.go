package perftest

import (
	"bytes"
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

// Messenger carries the exchange in perftest's rdma_cm mode (-R): each
// message is one SEND on the control connection's QP, which the peer
// receives whole (rdma_write_data, rdma_read_data; doc/oob.md §3.6).
type Messenger interface {
	// Send sends one message and returns once it completed.
	Send(b []byte) error
	// Recv waits at most d for the next message and returns it, valid
	// until the next call. A wait that ends without one returns an error
	// that matches os.ErrDeadlineExceeded; a connection the peer ended,
	// one that matches ErrPeerClosed.
	Recv(d time.Duration) ([]byte, error)
	// Close ends the connection.
	Close() error
}

// Conn is one perftest exchange: over TCP, or over the RDMA CM (a
// Messenger). It does the exchange primitives: fixed-size messages,
// client writes first, each step bounded in time. A Conn is used by one
// goroutine.
type Conn struct {
	nc   net.Conn
	m    Messenger
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

// NewCMConn runs the exchange over m, as perftest -R does: the key
// messages are binary (DestBinarySize bytes) and there is no closing
// "done".
func NewCMConn(m Messenger, role Role) *Conn { return &Conn{m: m, role: role} }

// CM reports whether the exchange runs over the RDMA CM (NewCMConn).
func (c *Conn) CM() bool { return c.m != nil }

// Role returns the side this Conn plays.
func (c *Conn) Role() Role { return c.role }

// NetConn returns the underlying TCP connection (nil over the RDMA CM).
func (c *Conn) NetConn() net.Conn { return c.nc }

// Close closes the connection.
func (c *Conn) Close() error {
	if c.m != nil {
		return c.m.Close()
	}
	return c.nc.Close()
}

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
	if c.m != nil {
		if err := c.m.Send(b); err != nil {
			return fmt.Errorf("perftest: sending %s: %w", what, err)
		}
		return nil
	}
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
	if c.m != nil {
		return c.recv(what, n)
	}
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

// recv is read over the RDMA CM: one message, of exactly n bytes.
func (c *Conn) recv(what string, n int) ([]byte, error) {
	limit := c.timeout()
	idleSince := time.Now()
	for {
		slice := min(time.Second, limit-time.Since(idleSince))
		if slice <= 0 {
			return nil, fmt.Errorf("%w: waited %v for %s", ErrTimeout, limit, what)
		}
		b, err := c.m.Recv(slice)
		switch {
		case err == nil:
			if len(b) != n {
				return nil, fmt.Errorf("%w: %s of %d bytes, want %d (is the peer the same tool and version, with -R?)",
					ErrGarbled, what, len(b), n)
			}
			return bytes.Clone(b), nil
		case errors.Is(err, os.ErrDeadlineExceeded):
			if c.Progress != nil && c.Progress() {
				idleSince = time.Now()
			}
		case errors.Is(err, ErrPeerClosed):
			return nil, fmt.Errorf("%w before sending %s (the peer exited: see its output)", ErrPeerClosed, what)
		default:
			return nil, fmt.Errorf("perftest: receiving %s: %w", what, err)
		}
	}
}

// Done sends perftest's final "done\0" and waits briefly for the peer's,
// which perftest never reads but sends. Over the RDMA CM it does nothing:
// ctx_close_connection sends "done" on TCP only.
func (c *Conn) Done() error {
	if c.m != nil {
		return nil
	}
	if err := c.write(`"done"`, []byte("done\x00")); err != nil {
		return err
	}
	c.nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var b [doneLen]byte
	io.ReadFull(c.nc, b[:])
	return nil
}
