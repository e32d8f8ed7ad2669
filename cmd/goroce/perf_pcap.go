package main

import (
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sync"

	"github.com/goroce/goroce/internal/perf"
	"github.com/goroce/goroce/roce"
)

// perfPcapQueueLen is the capture queue of each captured perf device:
// deeper than roce's default, since a perf run is one long burst.
const perfPcapQueueLen = 4096

// perfPcap is perf's --pcap: the loopback devices' own capture
// (roce.Config.Capture) into one pcapng file, an interface per device.
type perfPcap struct {
	path string
	side string

	f    *os.File
	w    *errWriter
	file *roce.CaptureFile
	mu   sync.Mutex
	devs []*roce.Device
}

func (p *perfPcap) flags(fs *flag.FlagSet) {
	fs.StringVar(&p.path, "pcap", "", "loopback: write the packets a device sends and receives to `FILE` (pcapng, as sealed: real IPv4 IDs, ECN, ICRC)")
	fs.StringVar(&p.side, "pcap-side", "local", "device --pcap captures: local (the requester), remote, or both (one interface each; every packet then appears twice, so lint one side)")
}

// errWriter remembers the first error of the file it writes to, so that
// a failed capture is reported although the devices' Close errors are not
// returned by perf.Run.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	n, err := e.w.Write(b)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
}

// setup opens the file and makes cfg capture the chosen devices; it does
// nothing without --pcap.
func (p *perfPcap) setup(cfg *perf.Config) error {
	if p.path == "" {
		return nil
	}
	var capture [2]bool
	switch p.side {
	case "local":
		capture[0] = true
	case "remote":
		capture[1] = true
	case "both":
		capture = [2]bool{true, true}
	default:
		return fmt.Errorf("--pcap-side %q: local, remote or both", p.side)
	}
	f, err := os.Create(p.path)
	if err != nil {
		return err
	}
	p.f, p.w = f, &errWriter{w: f}
	if p.file, err = roce.NewCaptureFile(p.w); err != nil {
		f.Close()
		return err
	}
	addrs := cfg.Addrs
	names := [2]string{"local", "remote"}
	cfg.Configure = func(addr netip.AddrPort, c *roce.Config) {
		for i, a := range addrs {
			if a == addr && capture[i] {
				c.Capture = &roce.CaptureConfig{File: p.file, Name: names[i] + " " + addr.String(), QueueLen: perfPcapQueueLen}
			}
		}
	}
	cfg.Opened = func(addr netip.AddrPort, d *roce.Device) {
		for i, a := range addrs {
			if a == addr && capture[i] {
				p.mu.Lock()
				p.devs = append(p.devs, d)
				p.mu.Unlock()
			}
		}
	}
	return nil
}

// finish flushes and closes the file (the devices are closed) and prints
// what the capture wrote and dropped to w.
func (p *perfPcap) finish(w io.Writer) error {
	if p.f == nil {
		return nil
	}
	err := p.file.Flush()
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	if p.w.err != nil {
		err = p.w.err
	}
	var written, dropped uint64
	for _, d := range p.devs {
		written += d.Stats().CapturePackets.Load()
		dropped += d.Stats().CaptureDrops.Load()
	}
	fmt.Fprintf(w, "goroce perf: capture: %d packets written to %s, %d dropped (writer too slow)\n", written, p.path, dropped)
	if err != nil {
		return fmt.Errorf("--pcap %s: %w", p.path, err)
	}
	return nil
}
