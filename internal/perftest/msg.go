package perftest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/goroce/goroce/qp"
)

// Version is the version string perftest 4.5-0.17 exchanges ("6.06"), and
// MinVersion the oldest peer version it accepts.
const (
	Version    = "6.06"
	MinVersion = 5.70
	versionLen = 16 // char version[16]
)

// Fixed message sizes.
const (
	sysDataLen = 4 // each of cycle_buffer and cache_line_size, big-endian int
	mtuLen     = 2 // "%d" of enum ibv_mtu and its NUL
	reportLen  = 8 // each field of the results exchange
	doneLen    = 5 // "done" and its NUL
)

// The system data this side sends: the page size as cycle_buffer and the
// cache line size (perftest keeps the larger of each side's).
const (
	CycleBuffer   = 4096
	CacheLineSize = 64
)

// marshalVersion returns the 16-byte version message: the string,
// NUL-padded.
func marshalVersion(v string) []byte {
	b := make([]byte, versionLen)
	copy(b[:versionLen-1], v)
	return b
}

// parseVersion returns the peer's version string and its value as perftest
// reads it (atof), refusing peers older than MinVersion as perftest does.
func parseVersion(b []byte) (string, float64, error) {
	s := b
	if i := bytes.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	v, err := strconv.ParseFloat(string(s), 64)
	if err != nil || len(s) == 0 {
		return string(s), 0, fmt.Errorf("%w: version %q (is the peer perftest 4.5 on port %d?)", ErrGarbled, b, Port)
	}
	if v < MinVersion {
		return string(s), v, fmt.Errorf("perftest: peer version %q is older than %.2f (perftest 4.x)", s, MinVersion)
	}
	return string(s), v, nil
}

// marshalMTU returns the MTU message: the ibv_mtu enum in decimal and a NUL.
func marshalMTU(m qp.MTU) []byte { return []byte{'0' + byte(m), 0} }

// parseMTU parses the MTU message.
func parseMTU(b []byte) (qp.MTU, error) {
	if len(b) != mtuLen || b[1] != 0 || b[0] < '1' || b[0] > '5' {
		return 0, fmt.Errorf("%w: MTU message %q (want \"1\\0\" .. \"5\\0\")", ErrGarbled, b)
	}
	return qp.MTU(b[0] - '0'), nil
}

// Report is a bandwidth test's result as xchg_bw_reports sends it: the
// client's figures, which the server prints as the test's result. BWPeak
// and BWAvg are in the unit of the side that measured (MB/sec = 2^20
// bytes/s by default, Gb/sec = 10^9 bit/s with --report_gbits).
type Report struct {
	Size    uint64
	Iters   uint64
	BWPeak  float64
	BWAvg   float64
	MsgRate float64 // Mpps
}

// fields returns the five 8-byte big-endian messages of r.
func (r *Report) fields() [5][reportLen]byte {
	var f [5][reportLen]byte
	binary.BigEndian.PutUint64(f[0][:], r.Size)
	binary.BigEndian.PutUint64(f[1][:], r.Iters)
	binary.BigEndian.PutUint64(f[2][:], math.Float64bits(r.BWPeak))
	binary.BigEndian.PutUint64(f[3][:], math.Float64bits(r.BWAvg))
	binary.BigEndian.PutUint64(f[4][:], math.Float64bits(r.MsgRate))
	return f
}

// setField stores the i-th received 8-byte message into r.
func (r *Report) setField(i int, b []byte) {
	v := binary.BigEndian.Uint64(b)
	switch i {
	case 0:
		r.Size = v
	case 1:
		r.Iters = v
	case 2:
		r.BWPeak = math.Float64frombits(v)
	case 3:
		r.BWAvg = math.Float64frombits(v)
	case 4:
		r.MsgRate = math.Float64frombits(v)
	}
}
