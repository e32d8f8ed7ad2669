package mr_test

import (
	"testing"

	"github.com/goroce/goroce/mr"
)

// benchTable returns a table with n live regions and one of them.
func benchTable(b *testing.B, n int) (*mr.Table, *mr.PD, *mr.Region) {
	tbl := newTable(b)
	pd := tbl.AllocPD()
	var r *mr.Region
	for range n {
		r = register(b, tbl, pd, 0x1000, 4096, all)
	}
	return tbl, pd, r
}

func BenchmarkLookupRemote(b *testing.B) {
	for _, n := range []int{1, 1000, 100_000} {
		b.Run(itoa(n)+"_regions", func(b *testing.B) {
			tbl, pd, r := benchTable(b, n)
			key := r.RKey()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tbl.LookupRemote(pd, key, 0x1100, 1024, mr.RemoteWrite); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("bad_key", func(b *testing.B) {
		tbl, pd, r := benchTable(b, 1000)
		key := r.RKey() ^ 0x5a5a
		b.ReportAllocs()
		for b.Loop() {
			if _, err := tbl.LookupRemote(pd, key, 0x1100, 1024, mr.RemoteWrite); err == nil {
				b.Fatal("found")
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		tbl, pd, r := benchTable(b, 1000)
		key := r.RKey()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := tbl.LookupRemote(pd, key, 0x1100, 1024, mr.RemoteWrite); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

func BenchmarkCheckRange(b *testing.B) {
	_, _, r := benchTable(b, 1)
	b.ReportAllocs()
	for b.Loop() {
		if r.CheckRange(0x1100, 1024) != nil {
			b.Fatal("out of range")
		}
	}
}

func BenchmarkReadAt(b *testing.B) {
	_, _, r := benchTable(b, 1)
	p := make([]byte, 1024)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if err := r.ReadAt(p, 0x1100); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriteAt(b *testing.B) {
	_, _, r := benchTable(b, 1)
	p := make([]byte, 1024)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if err := r.WriteAt(p, 0x1100); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFetchAndAdd(b *testing.B) {
	_, _, r := benchTable(b, 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.FetchAndAdd(0x1008, 1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPinSlice(b *testing.B) {
	_, _, r := benchTable(b, 1)
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Acquire(); err != nil {
			b.Fatal(err)
		}
		if _, err := r.Slice(0x1100, 1024); err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
}

func BenchmarkRegisterDeregister(b *testing.B) {
	tbl, pd, _ := benchTable(b, 1000)
	buf := make([]byte, 4096)
	b.ReportAllocs()
	for b.Loop() {
		r, err := tbl.Register(pd, mr.RegisterConfig{Buf: buf, IOVA: 0x1000, Access: all})
		if err != nil {
			b.Fatal(err)
		}
		if err := tbl.Deregister(r); err != nil {
			b.Fatal(err)
		}
	}
}

func itoa(n int) string {
	switch n {
	case 1:
		return "1"
	case 1000:
		return "1k"
	case 100_000:
		return "100k"
	}
	return "n"
}
