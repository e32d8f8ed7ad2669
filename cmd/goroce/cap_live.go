package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/live"
	"github.com/goroce/goroce/capture/pcapng"
)

// liveOptions are the live-capture flags of goroce cap, cap flows and
// cap lint, spelled as dumpcap and tshark spell them.
type liveOptions struct {
	iface     string
	autostop  stringList
	write     string
	snap      int
	noPromisc bool

	duration time.Duration // from -a duration:N
	packets  int           // from -a packets:N
}

// register adds the flags to fs. withCount adds -c (goroce cap has its
// own, which also applies to files).
func (o *liveOptions) register(fs *flag.FlagSet, count *int) {
	fs.StringVar(&o.iface, "i", "", "capture live on `IFACE` (AF_PACKET; needs root or CAP_NET_RAW); the kernel passes only RoCEv2 (UDP 4791) and MAC Control (PAUSE/PFC) frames")
	fs.Var(&o.autostop, "a", "live capture: stop on `COND`: duration:SECONDS or packets:N (repeatable, the first met ends it)")
	fs.StringVar(&o.write, "w", "", "live capture: write the captured frames to `FILE` as pcapng (- for stdout)")
	fs.IntVar(&o.snap, "s", live.DefaultSnapLen, "live capture: keep at most `SNAPLEN` bytes of each frame")
	fs.BoolVar(&o.noPromisc, "p", false, "live capture: don't put the interface into promiscuous mode")
	if count != nil {
		fs.IntVar(count, "c", 0, "live capture: stop after `N` packets")
	}
}

// check validates the flags; set reports whether a flag was given.
func (o *liveOptions) check(set func(string) bool) error {
	if o.iface == "" {
		for _, f := range []string{"a", "w", "s", "p"} {
			if set(f) {
				return fmt.Errorf("-%s applies to a live capture: give the interface with -i IFACE", f)
			}
		}
		return nil
	}
	if o.snap <= 0 {
		return fmt.Errorf("-s %d: the snap length must be positive", o.snap)
	}
	for _, a := range o.autostop {
		k, v, ok := strings.Cut(a, ":")
		if !ok {
			return fmt.Errorf("-a %q: use duration:SECONDS or packets:N", a)
		}
		switch k {
		case "duration":
			s, err := strconv.ParseFloat(v, 64)
			if err != nil || s <= 0 || s > 1e9 {
				return fmt.Errorf("-a %q: the duration must be a positive number of seconds", a)
			}
			d := time.Duration(s * float64(time.Second))
			if o.duration == 0 || d < o.duration {
				o.duration = d
			}
		case "packets":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return fmt.Errorf("-a %q: the packet count must be a positive integer", a)
			}
			if o.packets == 0 || n < o.packets {
				o.packets = n
			}
		case "filesize", "files", "interval":
			return fmt.Errorf("-a %s is not supported: use duration:SECONDS or packets:N", k)
		default:
			return fmt.Errorf("-a %q: unknown condition %q: use duration:SECONDS or packets:N", a, k)
		}
	}
	return nil
}

// liveCapture is an open live capture as a capture.Source: the handle, the
// pcapng file it tees the frames to, and its stop conditions (a packet
// count, a duration, SIGINT or SIGTERM). Its Next retries the handle's
// wait timeouts itself, calling tick, so readers see frames and io.EOF
// only. It is used from one goroutine; the signal watcher only calls
// Handle.Stop.
type liveCapture struct {
	iface string
	h     *live.Handle
	pw    *pcapng.Writer // writes into bw
	bw    *bufio.Writer
	file  *os.File // nil when writing to stdout
	wname string
	limit int
	start time.Time
	end   time.Time // zero: no duration

	sigStop   func()        // restores the signal handlers
	afterStop func() bool   // unregisters the watcher
	watched   chan struct{} // closed when the watcher has run
	stopped   bool          // Next has returned io.EOF

	// tick, when set, is called after each frame and each idle wait,
	// from Next.
	tick  func(now time.Time, idle bool)
	n     int        // frames returned
	err   error      // a capture or write error that ended the capture
	final live.Stats // the counters at Close
}

var _ capture.Source = (*liveCapture)(nil)

// openLive opens the capture described by o; count is -c (0 for none).
// stdout receives the pcapng with -w -.
func openLive(o *liveOptions, count int, stdout io.Writer) (*liveCapture, error) {
	h, err := live.Open(o.iface, live.Config{SnapLen: o.snap, NoPromisc: o.noPromisc})
	if err != nil {
		switch {
		case errors.Is(err, live.ErrNoInterface):
			return nil, fmt.Errorf("there is no interface %q here (list them with: ip link)", o.iface)
		case errors.Is(err, live.ErrNotSupported):
			return nil, fmt.Errorf("can't capture on %q: %v", o.iface, err)
		}
		return nil, fmt.Errorf("can't capture on %q: %v", o.iface, err)
	}
	c := &liveCapture{iface: o.iface, h: h, limit: count, start: time.Now()}
	if o.packets > 0 && (c.limit <= 0 || o.packets < c.limit) {
		c.limit = o.packets
	}
	if o.duration > 0 {
		c.end = c.start.Add(o.duration)
	}
	if o.write != "" {
		w := stdout
		c.wname = "standard output"
		if o.write != "-" {
			f, err := os.Create(o.write)
			if err != nil {
				h.Close()
				return nil, err
			}
			c.file, c.wname, w = f, o.write, f
		}
		c.bw = bufio.NewWriterSize(w, 1<<16)
		c.pw, err = pcapng.NewWriter(c.bw, pcapng.Section{Hardware: runtime.GOARCH, OS: runtime.GOOS, Application: "goroce cap"})
		if err == nil {
			_, err = c.pw.AddInterface(h.Interface())
		}
		if err != nil {
			c.closeFile()
			h.Close()
			return nil, fmt.Errorf("writing %s: %v", c.wname, err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	c.sigStop = stop
	c.watched = make(chan struct{})
	c.afterStop = context.AfterFunc(ctx, func() {
		h.Stop()
		close(c.watched)
	})
	return c, nil
}

// Next returns the next captured frame, or io.EOF when a stop condition
// is met (or the capture failed: see err).
func (c *liveCapture) Next(f *capture.Frame) error {
	for {
		now := time.Now()
		if c.stopped || (c.limit > 0 && c.n >= c.limit) || (!c.end.IsZero() && !now.Before(c.end)) {
			c.stopped = true
			return io.EOF
		}
		err := c.h.Next(f)
		now = time.Now()
		switch {
		case errors.Is(err, live.ErrTimeout):
			if c.tick != nil {
				c.tick(now, true)
			}
			continue
		case errors.Is(err, io.EOF):
			c.stopped = true
			return io.EOF
		case err != nil:
			c.err = err
			c.stopped = true
			return io.EOF
		}
		if c.pw != nil {
			if err := c.pw.WriteFrame(0, f); err != nil {
				c.err = fmt.Errorf("writing %s: %w", c.wname, err)
				c.stopped = true
				return io.EOF
			}
		}
		c.n++
		if c.tick != nil {
			c.tick(now, false)
		}
		return nil
	}
}

func (c *liveCapture) closeFile() {
	if c.file != nil {
		c.file.Close()
		c.file = nil
	}
}

// Close ends the capture: it stops watching the signals, writes the
// interface statistics and flushes and closes the pcapng file, and
// closes the socket. It returns the first error of the capture or of the
// file.
func (c *liveCapture) Close() error {
	if c.h == nil {
		return c.err
	}
	if !c.afterStop() {
		<-c.watched // the watcher ran or is running: let it finish with the handle
	}
	c.sigStop()
	st, serr := c.h.Stats()
	err := c.err
	if c.pw != nil {
		werr := c.pw.WriteStats(0, pcapng.Stats{Received: st.Received, Dropped: st.Dropped, End: time.Now()})
		werr = errors.Join(werr, c.bw.Flush())
		if c.file != nil {
			werr = errors.Join(werr, c.file.Close())
			c.file = nil
		}
		if werr != nil && err == nil {
			err = fmt.Errorf("writing %s: %w", c.wname, werr)
		}
	}
	herr := c.h.Close()
	c.final, _ = c.h.Stats() // a closed handle returns its last counters
	c.h = nil
	if err == nil {
		err = errors.Join(serr, herr)
	}
	c.err = err
	return err
}

// summary prints dumpcap's closing line: the frames captured and the
// frames the kernel dropped for want of buffer space. Call it after Close.
func (c *liveCapture) summary(w io.Writer) {
	fmt.Fprintf(w, "%d packets captured, %d dropped\n", c.n, c.final.Dropped)
}
