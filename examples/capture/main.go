// Command capture reads a RoCEv2 capture (pcap or pcapng, gzipped or not)
// with the public capture packages: it lists the RoCEv2 packets of the
// first frames, the connections the flow analysis finds, and the
// transport-rule findings of the linter.
//
//	go run ./examples/capture testdata/cap/impaired.pcap
//
// A program of its own module uses the same three imports.
package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/goroce/goroce/capture"
	"github.com/goroce/goroce/capture/flow"
	"github.com/goroce/goroce/capture/lint"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: capture FILE.pcap")
	}
	path := os.Args[1]

	// 1. Frame by frame: each frame decoded to a RoCEv2 packet.
	r, err := capture.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	var (
		f capture.Frame
		p capture.Packet
	)
	for shown := 0; shown < 5; {
		err := r.Next(&f)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			log.Fatal(err) // capture.ErrCutShort, capture.ErrCorrupt
		}
		if p.Decode(&f) != nil {
			continue // not RoCEv2 (p.Kind says what), cut or malformed
		}
		h := p.RoCE.BTH
		fmt.Printf("frame %d: %v -> %v %v QP %v PSN %d, ICRC %v\n",
			f.Number, p.Src().Addr(), p.Dst().Addr(), h.Opcode(), h.DestQP(), h.PSN(), p.ICRC)
		shown++
	}
	r.Close()

	// 2. The connections, from a second pass (flow.Scanner and
	// flow.Analyzer stream a live capture the same way).
	r, err = capture.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	res, err := flow.Analyze(r, flow.Config{})
	r.Close()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d frames, %d RoCEv2, %d connections\n", res.Capture.Frames, res.Capture.RoCE, len(res.Connections))
	for _, c := range res.Connections {
		fmt.Printf("connection %d: %s\n", c.ID, c.Title())
		for _, d := range c.Dirs {
			fmt.Printf("  %s: %d packets, %d bytes", d.Name(), d.Packets, d.Bytes)
			if q := d.Requests; q != nil {
				fmt.Printf(", %d retransmissions, %d Go-Back-N", q.Retransmissions, q.GoBackN)
			}
			if a := d.Responses; a != nil {
				fmt.Printf(", %d ACKs, %d NAKs", a.ACKs, a.NAKSeq+a.NAKOther)
			}
			fmt.Printf(", %d CE, %d bad ICRC\n", d.ECN.CE, d.ICRC.Bad)
		}
	}

	// 3. The linter's findings (it runs the flow analysis itself).
	r, err = capture.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	findings, _, err := lint.Lint(r)
	r.Close()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d findings\n", len(findings))
	for _, x := range findings {
		fmt.Printf("  frame %d: %s (%s): %s\n", x.Frame, x.Rule, x.Severity, x.Message)
	}
}
