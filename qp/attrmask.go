package qp

import "strconv"

// attrNames are the AttrMask bit names, indexed by bit number: the constant
// names without their Attr prefix.
var attrNames = [...]string{
	"State", "CurState", "EnSQDAsyncNtfy", "AccessFlags", "PKeyIndex", "Port", "QKey", "AV",
	"PathMTU", "Timeout", "RetryCnt", "RNRRetry", "RQPSN", "MaxQPRdAtomic", "AltPath",
	"MinRNRTimer", "SQPSN", "MaxDestRdAtomic", "PathMigState", "Cap", "DestQPN",
}

// String returns the set bits as names joined by "|", in bit order, for
// example "State|PathMTU|DestQPN"; the empty mask is "0" and unknown bits
// are shown in hex.
func (m AttrMask) String() string {
	if m == 0 {
		return "0"
	}
	var b []byte
	for i, n := range attrNames {
		if m&(1<<i) == 0 {
			continue
		}
		if len(b) > 0 {
			b = append(b, '|')
		}
		b = append(b, n...)
	}
	if rest := m >> len(attrNames) << len(attrNames); rest != 0 {
		if len(b) > 0 {
			b = append(b, '|')
		}
		b = append(b, "0x"...)
		b = strconv.AppendUint(b, uint64(rest), 16)
	}
	return string(b)
}
