package mr_test

import (
	"errors"
	"fmt"

	"github.com/goroce/goroce/mr"
)

// Example registers a buffer, lets a "peer" write and read it through its
// rkey as the responder would, and shows what the peer sees after
// deregistration.
func Example() {
	tbl, err := mr.NewTable(mr.TableConfig{})
	if err != nil {
		panic(err)
	}
	pd := tbl.AllocPD()
	buf := make([]byte, 64)
	r, err := tbl.Register(pd, mr.RegisterConfig{
		Buf:    buf,
		IOVA:   0x10000,
		Access: mr.LocalWrite | mr.RemoteWrite | mr.RemoteRead,
	})
	if err != nil {
		panic(err)
	}
	rkey := r.RKey() // sent to the peer with the IOVA

	// Responder, RDMA WRITE of 5 bytes at 0x10010.
	dst, err := tbl.LookupRemote(pd, rkey, 0x10010, 5, mr.RemoteWrite)
	if err != nil {
		panic(err)
	}
	if err := dst.WriteAt([]byte("hello"), 0x10010); err != nil {
		panic(err)
	}
	fmt.Printf("buffer: %q\n", buf[16:21])

	// Responder, RDMA READ running off the end of the region.
	_, err = tbl.LookupRemote(pd, rkey, 0x10030, 32, mr.RemoteRead)
	fmt.Println("read past end:", err)

	// Responder, ATOMIC on a region without RemoteAtomic.
	_, err = tbl.LookupRemote(pd, rkey, 0x10000, 8, mr.RemoteAtomic)
	fmt.Println("atomic:", err)

	if err := tbl.Deregister(r); err != nil {
		panic(err)
	}
	_, err = tbl.LookupRemote(pd, rkey, 0x10010, 5, mr.RemoteRead)
	fmt.Println("after dereg:", err, errors.Is(err, mr.ErrDeregistered))
	fmt.Println("stale region:", dst.ReadAt(make([]byte, 5), 0x10010))
	fmt.Println("dealloc PD:", pd.Dealloc())
	// Output:
	// buffer: "hello"
	// read past end: mr: access out of range
	// atomic: mr: access denied
	// after dereg: mr: region deregistered true
	// stale region: mr: region deregistered
	// dealloc PD: <nil>
}
