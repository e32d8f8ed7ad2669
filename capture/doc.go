// Package capture reads RoCEv2 captures: pcap and pcapng files, gzipped
// or not, streamed frame by frame with bounded memory.
//
// A Reader (Open, NewReader) yields Frames; any other frame source, such
// as a live capture (package capture/live), is a Source as well. Package
// capture/pcapng writes frames back to a file, package capture/flow
// reconstructs the connections of a capture and package capture/lint
// checks them against the transport rules.
//
// # Buffer ownership
//
// A Frame's Data aliases the buffer of the Source that filled it and is
// valid until the Source's next Next: copy it (bytes.Clone) to keep it.
//
// # Errors
//
// NewReader returns ErrNotCapture (wrapped) for input that is neither
// pcap nor pcapng; Next returns io.EOF at the end of the file, ErrCutShort
// for a file that ends inside a record and ErrCorrupt for a damaged one,
// after delivering every record before the damage. Check them with
// errors.Is.
package capture
