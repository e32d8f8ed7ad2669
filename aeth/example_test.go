package aeth_test

import (
	"fmt"

	"github.com/goroce/goroce/aeth"
)

func ExampleSyndrome() {
	for _, b := range [][]byte{
		{0x1f, 0x00, 0x00, 0x01}, // what rxe sends for an ACK
		{0x2e, 0x00, 0x00, 0x02}, // RNR NAK, timer code 14
		{0x60, 0x00, 0x00, 0x02}, // NAK: PSN sequence error
	} {
		h, err := aeth.Parse(b)
		if err != nil {
			panic(err)
		}
		s := h.Syndrome()
		fmt.Println(s, "MSN", h.MSN())
		if s.IsRNR() {
			fmt.Println("  retry after", aeth.RNRDelay(s.Timer()))
		}
	}
	// Output:
	// ACK(credit=31) MSN 1
	// RNR-NAK(timer=14) MSN 2
	//   retry after 1.28ms
	// NAK(PSN sequence error) MSN 2
}
