package roce

import "github.com/goroce/goroce/mr"

// MRs returns the device's memory-region table, for tests that look
// regions and keys up as the transport does.
func (d *Device) MRs() *mr.Table { return d.mrs }
