package capture

// Source yields the frames of a capture, one at a time: a *Reader over a
// file, a live capture (package capture/live's *Handle), or any other
// frame source. Code that reads through a Source (package capture/flow's
// Scanner, package capture/lint) treats all of them the same way.
//
// A Source is used from one goroutine.
type Source interface {
	// Next reads the next frame into f. f.Data is valid until the
	// following call. Next returns io.EOF at the end of the capture (the
	// end of the file, or a live capture that was stopped). A live source
	// returns an error that matches os.ErrDeadlineExceeded when no frame
	// arrived within its wait, so that the caller can refresh its output,
	// check its own stop conditions and call Next again.
	Next(f *Frame) error
}

var _ Source = (*Reader)(nil)
