package aeth_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/aeth"
)

// TestCredits checks the credit count encoding (IBA 9.7.7.2) code by
// code: the values are the spec's table, as rdmavt's credit_table has
// them too.
func TestCredits(t *testing.T) {
	want := []int{0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768,
		1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768}
	require.Len(t, want, 31)
	for code, n := range want {
		t.Run(fmt.Sprintf("%#02x", code), func(t *testing.T) {
			got, ok := aeth.Credits(uint8(code))
			assert.True(t, ok)
			assert.Equal(t, n, got)
			assert.Equal(t, uint8(code), aeth.CreditCode(n), "the code of its own count")
		})
	}
	n, ok := aeth.Credits(aeth.CreditInvalid)
	assert.False(t, ok, "0x1F reports no count")
	assert.Zero(t, n)
	assert.Equal(t, aeth.MaxCredits, want[30])
	assert.Equal(t, aeth.ACKUnlimited, aeth.ACK(aeth.CreditInvalid))
}

// TestCreditCodeRoundsDown checks, for every count up to past the largest,
// that the code reported never stands for more WQEs than there are and
// that the next code would: a requester may count on every credit it is
// given, and is given as many as the encoding can say.
func TestCreditCodeRoundsDown(t *testing.T) {
	for n := -1; n <= aeth.MaxCredits+100; n++ {
		code := aeth.CreditCode(n)
		require.Less(t, code, aeth.CreditInvalid, "n=%d", n)
		got, ok := aeth.Credits(code)
		require.True(t, ok)
		require.LessOrEqual(t, got, max(n, 0), "n=%d code %#x", n, code)
		if code < 0x1e {
			next, _ := aeth.Credits(code + 1)
			require.Greater(t, next, n, "n=%d: code %#x is not the largest that fits", n, code)
		}
	}
}

func ExampleCreditCode() {
	for _, n := range []int{0, 5, 128, 500, 100000} {
		code := aeth.CreditCode(n)
		c, _ := aeth.Credits(code)
		fmt.Printf("%d WQEs: %v, counts as %d\n", n, aeth.ACK(code), c)
	}
	// Output:
	// 0 WQEs: ACK(credit=0), counts as 0
	// 5 WQEs: ACK(credit=4), counts as 4
	// 128 WQEs: ACK(credit=14), counts as 128
	// 500 WQEs: ACK(credit=17), counts as 384
	// 100000 WQEs: ACK(credit=30), counts as 32768
}
