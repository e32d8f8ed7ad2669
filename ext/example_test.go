package ext_test

import (
	"fmt"

	"github.com/goroce/goroce/ext"
)

// The DETH of a UD SEND carries the Q_Key and the sender's QP.
func ExampleDETH() {
	b := []byte{0x11, 0x11, 0x11, 0x11, 0x00, 0x00, 0x00, 0x13}
	d, err := ext.ParseDETH(b)
	if err != nil {
		panic(err)
	}
	fmt.Printf("qkey=%#x srcqp=%#x\n", d.QKey(), d.SrcQP())
	// Output: qkey=0x11111111 srcqp=0x13
}

// An AtomicETH is built from its Fields form.
func ExampleAtomicETH_Encode() {
	h := make(ext.AtomicETH, ext.AtomicETHSize)
	h.Encode(&ext.AtomicETHFields{VA: 0x1000, RKey: 0xb63, SwapData: 1})
	fmt.Printf("%+v\n", h.Fields())
	// Output: {VA:4096 RKey:2915 SwapData:1 CompareData:0}
}

func ExampleImmDt() {
	h, err := ext.ParseImmDt([]byte{0x11, 0x22, 0x33, 0x44})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%#x\n", h.Imm())
	// Output: 0x11223344
}
