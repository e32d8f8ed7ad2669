package reth_test

import (
	"fmt"

	"github.com/goroce/goroce/reth"
)

func ExampleHeader() {
	h := make(reth.Header, reth.Size)
	h.Encode(&reth.Fields{VA: 0x7f8e3b588000, RKey: 0x6ac, DMALength: 65536})
	fmt.Printf("% x\n", []byte(h))

	v, err := reth.Parse(h)
	if err != nil {
		panic(err)
	}
	fmt.Printf("va=%#x rkey=%#x len=%d\n", v.VA(), v.RKey(), v.DMALength())
	// Output:
	// 00 00 7f 8e 3b 58 80 00 00 00 06 ac 00 01 00 00
	// va=0x7f8e3b588000 rkey=0x6ac len=65536
}
