package ebpf_test

import (
	"encoding/hex"
	"fmt"

	"github.com/goroce/goroce/internal/ebpf"
)

// A tc classifier that lets every packet pass, except that it returns
// early for packets shorter than 64 bytes (skb->len is the first field of
// struct __sk_buff).
func ExampleAsm() {
	var a ebpf.Asm
	a.Load(ebpf.W, ebpf.R2, ebpf.R1, 0) // r2 = skb->len
	a.Mov(ebpf.R0, 0)                   // TC_ACT_OK
	a.Jump(ebpf.JLT, ebpf.R2, 64, "out")
	a.Mov(ebpf.R0, 0)
	a.Label("out")
	a.Exit()
	prog, err := a.Assemble()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, i := range prog {
		fmt.Println(hex.EncodeToString(i.Append(nil)))
	}
	// Output:
	// 6112000000000000
	// b700000000000000
	// a502010040000000
	// b700000000000000
	// 9500000000000000
}
