// Package pcapng writes pcapng files (draft-ietf-opsawg-pcapng): a
// section header, interface descriptions with nanosecond timestamps,
// enhanced packet blocks with their direction, and interface statistics,
// as dumpcap writes them. It is the one pcapng writer of the module:
// "goroce cap -i … -w FILE" tees a live capture through it, and package
// roce's self-capture (roce.CaptureConfig) writes a device's own traffic
// with it. Package capture reads the files back.
//
// The Writer holds no buffer of its own beyond one block: every block
// goes to the underlying io.Writer in a single Write, so wrap a file in a
// bufio.Writer (and flush it). AppendPacket builds a packet block into
// the caller's buffer instead, for writers that account for their
// buffered bytes themselves. Writing a packet does not allocate, and the
// package does not use gopacket.
package pcapng
