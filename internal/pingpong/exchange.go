package pingpong

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// DefaultTimeout bounds each step of the exchange when none is given.
const DefaultTimeout = 30 * time.Second

// ErrTimeout and ErrPeerClosed are wrapped by the errors of a peer that is
// silent or goes away during the exchange.
var (
	ErrTimeout    = errors.New("pingpong: peer did not answer in time")
	ErrPeerClosed = errors.New("pingpong: peer closed the connection")
)

const done = "done\x00"

// ClientExchange plays the client side on c: it sends mine, reads the
// server's message and sends "done". The caller connects its QP afterwards.
func ClientExchange(c net.Conn, mine Dest, timeout time.Duration) (Dest, error) {
	msg, err := mine.Marshal()
	if err != nil {
		return Dest{}, err
	}
	if err := write(c, "our address", msg, timeout); err != nil {
		return Dest{}, err
	}
	in, err := read(c, "the server's address", MsgSize, timeout)
	if err != nil {
		return Dest{}, err
	}
	rem, err := Parse(in)
	if err != nil {
		return Dest{}, err
	}
	return rem, write(c, `"done"`, []byte(done), timeout)
}

// ServerExchange plays the server side on c: it reads the client's
// message, calls connect (which must move the QP to RTS: the client sends
// as soon as it has the answer), sends mine and waits for "done".
func ServerExchange(c net.Conn, mine Dest, connect func(Dest) error, timeout time.Duration) (Dest, error) {
	msg, err := mine.Marshal()
	if err != nil {
		return Dest{}, err
	}
	in, err := read(c, "the client's address", MsgSize, timeout)
	if err != nil {
		return Dest{}, err
	}
	rem, err := Parse(in)
	if err != nil {
		return Dest{}, err
	}
	if err := connect(rem); err != nil {
		return rem, err
	}
	if err := write(c, "our address", msg, timeout); err != nil {
		return rem, err
	}
	in, err = read(c, `"done"`, len(done), timeout)
	if err != nil {
		return rem, err
	}
	if string(in) != done {
		return rem, fmt.Errorf("%w: %q instead of \"done\"", ErrGarbled, in)
	}
	return rem, nil
}

func write(c net.Conn, what string, b []byte, timeout time.Duration) error {
	c.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.Write(b); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("%w: sending %s", ErrTimeout, what)
		}
		return fmt.Errorf("pingpong: sending %s: %w", what, err)
	}
	return nil
}

func read(c net.Conn, what string, n int, timeout time.Duration) ([]byte, error) {
	c.SetReadDeadline(time.Now().Add(timeout))
	b := make([]byte, n)
	k, err := io.ReadFull(c, b)
	switch {
	case err == nil:
		return b, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		if k > 0 {
			return nil, fmt.Errorf("%w: %d of the %d bytes of %s in %v (is the peer ibv_rc_pingpong?)", ErrTimeout, k, n, what, timeout)
		}
		return nil, fmt.Errorf("%w: no %s in %v", ErrTimeout, what, timeout)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		if k > 0 {
			return nil, fmt.Errorf("%w after %d of the %d bytes of %s (is the peer ibv_rc_pingpong?)", ErrPeerClosed, k, n, what)
		}
		return nil, fmt.Errorf("%w before sending %s (the peer exited: see its output)", ErrPeerClosed, what)
	}
	return nil, fmt.Errorf("pingpong: receiving %s: %w", what, err)
}
