//go:build rxe && linux

package interop

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// wire is what a capture showed.
type wire struct {
	goroce     int // RoCE packets goroce sent
	roce       int // RoCE packets in all
	rpcordma   int // goroce SENDs tshark marks malformed for its RPC-over-RDMA bug (allowed)
	ethertype  int // goroce packets tshark's EtherType-in-payload heuristic breaks on (allowed)
	smc        int // goroce payloads tshark's SMC-R heuristic takes for a too-long LLC message (allowed)
	eoib       int // goroce UD payloads tshark's EoIB heuristic takes for a too-short Ethernet frame (allowed)
	maxPayload int // the largest RoCE payload, either way
}

// icrcLine is icrc_check.py's verdict: "FILE: N RoCEv2 packets, N ICRC ok, N bad".
var icrcLine = regexp.MustCompile(`(\d+) RoCEv2 packets, (\d+) ICRC ok, (\d+) bad`)

// expert severities of tshark (_ws.expert.severity): PI_ERROR.
const severityError = 0x00800000

// checkWire applies the suite's wire hygiene to a capture:
//
//   - every RoCE packet goroce sent decodes in tshark as InfiniBand with no
//     malformed or expert-error item, except for three heuristics of tshark
//     4.0 that throw on ordinary payloads, each accounted exactly
//     (testdata/tshark/FORMATS.md): the RPC-over-RDMA one (§4.4) marks an RC
//     SEND ONLY (with invalidate) of fewer than 16 payload bytes, or an RC
//     SEND LAST (with invalidate) ending a message of fewer than 16 bytes,
//     "[Malformed Packet: RPCoRDMA]"; the EtherType one (§4.6) takes a
//     payload whose bytes 2–3 are zero and whose bytes 0–1 name a known
//     EtherType for an encapsulated frame, and a short one ends
//     "[Malformed Packet: Ethertype]" (ib_write_lat's 2-byte WRITEs
//     00 xx + 2 pad bytes, xx the iteration: 0x0060.. are CRTP's); the
//     SMC-R one (§4.4) takes random data whose first bytes read as an LLC
//     header with the payload's length, and throws when the message's own
//     counts run past it ("[Malformed Packet: SMC]", about 4e-7 per packet);
//     and the Mellanox EoIB one takes a UD SEND payload whose first nibble
//     is 0xC and whose segment bits are clear for an EoIB header, and a
//     short one ends "[Malformed Packet: Ethernet]" (a 1-byte UD SEND of a
//     random byte, 1 in 16);
//   - every RoCE packet, either way, passes ../shared/rxe/lib/icrc_check.py;
//   - goroce cap -T fields prints what tshark prints for the FIELDS list.
func (h *harness) checkWire(pcap string) (wire, error) { return h.checkWireFrom(pcap, hostIP) }

// checkWireFrom is checkWire for a capture in which goroce sent from each
// of the addresses goroce (a job of several goroce ranks).
func (h *harness) checkWireFrom(pcap string, goroce ...string) (wire, error) {
	var w wire
	out, err := run(2*time.Minute, "python3", filepath.Join(h.lib, "icrc_check.py"), pcap)
	if err != nil {
		return w, fmt.Errorf("icrc_check.py: %v: %s", err, out)
	}
	if m := icrcLine.FindStringSubmatch(out); m == nil || m[3] != "0" || m[1] == "0" {
		return w, fmt.Errorf("icrc_check.py: %s", strings.TrimSpace(out))
	}
	out, err = run(2*time.Minute, "tshark", "-r", pcap, "-n", "-Y", "udp.dstport == 4791", "-T", "fields",
		"-E", "separator=/t", "-e", "ip.src", "-e", "frame.number", "-e", "infiniband.bth.opcode",
		"-e", "infiniband.bth.destqp", "-e", "infiniband.bth.padcnt", "-e", "udp.length",
		"-e", "_ws.malformed", "-e", "_ws.expert.severity")
	if err != nil {
		return w, fmt.Errorf("tshark: %v: %s", err, tail(out, 3))
	}
	sendLen := map[string]int{} // bytes of the SEND in progress per destination QP
	var bad []string
	ethCandidates := map[string]string{} // frame → its tshark verdict, to check the payload
	smcCandidates := map[string]string{}
	eoibCandidates := map[string]string{}
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		c := strings.Split(l, "\t")
		if len(c) < 8 || c[0] == "" {
			continue
		}
		w.roce++
		op, err := strconv.Atoi(c[2])
		fromGoroce := slices.Contains(goroce, c[0])
		if err != nil {
			if fromGoroce {
				bad = append(bad, fmt.Sprintf("frame %s: not decoded as InfiniBand", c[1]))
			}
			continue
		}
		pad, _ := strconv.Atoi(c[4])
		ulen, _ := strconv.Atoi(c[5])
		payload := ulen - 8 - 12 - 4 - pad - extLen(op)
		w.maxPayload = max(w.maxPayload, payload)
		if !fromGoroce {
			continue
		}
		w.goroce++
		// The message length tshark's heuristic sees for a SEND LAST/ONLY.
		msg := -1
		switch op {
		case 0x00: // SEND FIRST
			sendLen[c[3]] = payload
		case 0x01: // SEND MIDDLE
			sendLen[c[3]] += payload
		case 0x02, 0x03, 0x16: // SEND LAST (with immediate, with invalidate)
			msg = sendLen[c[3]] + payload
			delete(sendLen, c[3])
		case 0x04, 0x05, 0x17:
			msg = payload
		}
		severe := false
		for _, s := range strings.Split(c[7], ",") {
			if v, err := strconv.Atoi(s); err == nil && v >= severityError {
				severe = true
			}
		}
		if c[6] == "" && !severe {
			continue
		}
		rpcBug := (op == 0x02 || op == 0x04 || op == 0x16 || op == 0x17) && msg >= 0 && msg < 16 &&
			strings.Contains(c[6], "RPCoRDMA")
		if rpcBug {
			w.rpcordma++
			continue
		}
		if strings.Contains(c[6], "[Malformed Packet: Ethertype]") {
			ethCandidates[c[1]] = fmt.Sprintf("frame %s (opcode %d): malformed %q", c[1], op, c[6])
			continue
		}
		if strings.Contains(c[6], "[Malformed Packet: SMC]") {
			smcCandidates[c[1]] = fmt.Sprintf("frame %s (opcode %d): malformed %q", c[1], op, c[6])
			continue
		}
		if (op == 0x64 || op == 0x65) && strings.Contains(c[6], "[Malformed Packet: Ethernet]") {
			eoibCandidates[c[1]] = fmt.Sprintf("frame %s (opcode %d): malformed %q", c[1], op, c[6])
			continue
		}
		bad = append(bad, fmt.Sprintf("frame %s (opcode %d): malformed %q, expert severity %q", c[1], op, c[6], c[7]))
	}
	for _, q := range []struct {
		frames  map[string]string
		trigger func([]byte) bool
		n       *int
	}{{ethCandidates, ethertypeTrigger, &w.ethertype}, {smcCandidates, smcTrigger, &w.smc},
		{eoibCandidates, eoibTrigger, &w.eoib}} {
		if len(q.frames) == 0 {
			continue
		}
		more, n, err := payloadQuirk(pcap, q.frames, q.trigger)
		if err != nil {
			return w, err
		}
		bad = append(bad, more...)
		*q.n = n
	}
	if len(bad) > 0 {
		if len(bad) > 5 {
			bad = append(bad[:5], fmt.Sprintf("… %d more", len(bad)-5))
		}
		return w, fmt.Errorf("tshark flags goroce's packets: %s", strings.Join(bad, "; "))
	}
	if w.goroce == 0 {
		return w, fmt.Errorf("no RoCE packet from goroce in %s", pcap)
	}
	// goroce cap against tshark on the FIELDS list.
	args := []string{"-r", pcap, "-Y", "infiniband", "-T", "fields", "-E", "header=y", "-E", "separator=/t",
		"-E", "occurrence=a", "-E", "aggregator=,", "-E", "quote=n"}
	for _, f := range h.fields {
		args = append(args, "-e", f)
	}
	ts, err := run(2*time.Minute, "tshark", append([]string{"-n"}, args...)...)
	if err != nil {
		return w, fmt.Errorf("tshark -T fields: %v", err)
	}
	gc, err := run(2*time.Minute, h.goroce, append([]string{"cap"}, args...)...)
	if err != nil {
		return w, fmt.Errorf("goroce cap: %v: %s", err, tail(gc, 3))
	}
	if ts != gc {
		tl, gl := strings.Split(ts, "\n"), strings.Split(gc, "\n")
		for i := 0; i < max(len(tl), len(gl)); i++ {
			var a, b string
			if i < len(tl) {
				a = tl[i]
			}
			if i < len(gl) {
				b = gl[i]
			}
			if a != b {
				return w, fmt.Errorf("goroce cap differs from tshark at line %d of %d:\n tshark: %q\n goroce: %q", i+1, len(tl), a, b)
			}
		}
	}
	return w, nil
}

// ethertypeTrigger is what makes tshark's EtherType heuristic take a
// payload: at least 4 bytes, bytes 2 and 3 zero.
func ethertypeTrigger(p []byte) bool { return len(p) >= 4 && p[2] == 0 && p[3] == 0 }

// smcTrigger is what makes tshark's SMC-R heuristic take a payload: an LLC
// v1 type with byte 1 = 44 = the length, or a v2 type with bytes 1-2
// (big-endian) = the length. Whether the dissector then throws depends on
// the message's counts; goroce cap reproduces that, the comparison with
// tshark below checks it.
func smcTrigger(p []byte) bool {
	if len(p) < 3 {
		return false
	}
	switch t := p[0]; {
	case t >= 0x01 && t <= 0x09 || t == 0xfe:
		return p[1] == 44 && len(p) == 44
	case t == 0x21 || t == 0x22 || t >= 0x24 && t <= 0x27 || t == 0x29:
		return int(p[1])<<8|int(p[2]) == len(p)
	}
	return false
}

// eoibTrigger is what makes tshark 4.0's Mellanox EoIB heuristic take a UD
// SEND payload (pad included) and throw: a first nibble of 0xC (the EoIB
// signature and version 0), neither the "more segments" flag nor a segment
// offset in the low six bits of the second byte (a segment is shown as
// data), and too few bytes after the 4-byte EoIB header for the Ethernet
// frame it then dissects. Found on tshark 4.0 here with UD SEND ONLY
// payloads of every first, second, third and fourth byte and every length
// from 4 to 40: 4 to 16 bytes throw, 17 and more do not (capfmt's eoib
// models the same heuristic for goroce cap).
func eoibTrigger(p []byte) bool {
	return len(p) >= 4 && len(p) <= 16 && p[0]&0xf0 == 0xc0 && p[1]&0x3f == 0
}

// payloadQuirk checks that the frames tshark broke with one of its payload
// heuristics have what triggers it in their transport payload (pad
// included, ICRC excluded). It returns the frames that do not, and how
// many do.
func payloadQuirk(pcap string, frames map[string]string, trigger func([]byte) bool) ([]string, int, error) {
	var nums []string
	for f := range frames {
		nums = append(nums, f)
	}
	out, err := run(2*time.Minute, "tshark", "-r", pcap, "-n", "-Y", "frame.number in {"+strings.Join(nums, " ")+"}",
		"-T", "fields", "-E", "separator=/t", "-e", "frame.number", "-e", "infiniband.bth.opcode", "-e", "udp.payload")
	if err != nil {
		return nil, 0, fmt.Errorf("tshark: %v: %s", err, tail(out, 3))
	}
	var bad []string
	ok := 0
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		c := strings.Split(l, "\t")
		if len(c) < 3 {
			continue
		}
		op, _ := strconv.Atoi(c[1])
		b, err := hex.DecodeString(c[2])
		start := 12 + extLen(op)
		if err == nil && len(b) >= start+4 && trigger(b[start:len(b)-4]) {
			ok++
			delete(frames, c[0])
		}
	}
	for _, v := range frames {
		bad = append(bad, v)
	}
	return bad, ok, nil
}

// extLen is the length of the extension headers of an RC, UC or UD opcode.
func extLen(op int) int {
	switch op {
	case 0x64: // UD SEND ONLY: DETH
		return 8
	case 0x65: // UD SEND ONLY with immediate: DETH + ImmDt
		return 12
	}
	if op >= 0x20 && op < 0x40 {
		op -= 0x20 // UC's opcodes are RC's plus 0x20, with the same extension headers
	}
	switch op {
	case 0x06, 0x0a, 0x0c: // RETH
		return 16
	case 0x0b: // RETH + ImmDt
		return 20
	case 0x03, 0x05, 0x09, 0x16, 0x17: // ImmDt or IETH
		return 4
	case 0x0d, 0x0f, 0x10, 0x11: // AETH
		return 4
	case 0x12: // AETH + AtomicAckETH
		return 12
	case 0x13, 0x14: // AtomicETH
		return 28
	}
	return 0
}

// run runs a host command and returns its standard output (standard error
// too when it fails).
func run(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}
