package roce

import (
	"fmt"
)

// Defaults of the CNPs' traffic class and priority.
const (
	// DefaultCNPDSCP is the DSCP of the CNPs the device sends unless
	// Config.CNPDSCP says otherwise: 48, ConnectX's cnp_dscp default, so
	// that switches queue congestion feedback apart from the data it is
	// about.
	DefaultCNPDSCP = 48
	// DefaultCNPPriority is the 802.1Q PCP of CNPs on raw links that tag
	// frames unless Config.CNPPriority says otherwise: 6, ConnectX's
	// cnp_802p_prio default.
	DefaultCNPPriority = 6
	// CodeZero asks for DSCP 0 or PCP 0 in a Config field where 0 means
	// the default.
	CodeZero = -1
)

// code resolves a Config DSCP or PCP field: 0 is def, CodeZero is 0,
// others are themselves within [0, max].
func code(v, def, max int, name string) (uint8, error) {
	switch {
	case v == 0:
		return uint8(def), nil
	case v == CodeZero:
		return 0, nil
	case v < 0 || v > max:
		return 0, fmt.Errorf("%w: %s %d is neither CodeZero nor 0 to %d", ErrInvalidArg, name, v, max)
	}
	return uint8(v), nil
}
