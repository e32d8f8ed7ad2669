package rocev2

// PutHeaders writes the outer headers e describes into buf[:e.HeaderLen()]
// for a transport packet of length tn that the caller places right after
// them, and returns the header length. Unlike Seal it leaves the transport
// packet alone, ICRC included: a capture of sent and received packets
// (roce's Config.Capture) rebuilds the headers the packet had on the wire
// around the ICRC the packet really carried. It does not allocate.
func (e *Encap) PutHeaders(buf []byte, tn int) (int, error) {
	hl := e.HeaderLen()
	if tn < 0 || len(buf) < hl {
		return 0, errNotEnoughSpace
	}
	e.writeOuter(buf[:hl], tn)
	return hl, nil
}
