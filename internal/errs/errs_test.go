package errs_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/goroce/goroce/internal/errs"
)

func TestNarrow(t *testing.T) {
	attr := errs.Narrow("qp: invalid attribute", errs.ErrInvalidArg)
	wrapped := fmt.Errorf("%w: path MTU 9", attr)
	if !errors.Is(wrapped, attr) || !errors.Is(wrapped, errs.ErrInvalidArg) {
		t.Fatalf("%v: does not match its sentinel and ErrInvalidArg", wrapped)
	}
	if errors.Is(wrapped, errs.ErrClosed) {
		t.Fatalf("%v matches ErrClosed", wrapped)
	}
	if got := attr.Error(); got != "qp: invalid attribute" {
		t.Fatalf("Error() = %q", got)
	}
}
