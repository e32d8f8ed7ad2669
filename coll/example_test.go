package coll_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync"

	"github.com/goroce/goroce/coll"
)

// Two ranks of a job in one process (a program would be one rank, its
// Config from coll.Discover): they meet through a shared directory, and
// each all-reduces its gradients.
func Example() {
	dir, err := os.MkdirTemp("", "coll-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	results := make([][]float32, 2)
	var wg sync.WaitGroup
	for rank := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := coll.Join(context.Background(), coll.Config{Rank: rank, Size: 2, Rendezvous: "file://" + dir, JobID: "example"})
			if err != nil {
				log.Fatal(err)
			}
			defer c.Close()
			grads := []float32{float32(rank + 1), 10}
			if err := coll.AllReduce(c, grads, grads, coll.Sum); err != nil {
				log.Fatal(err)
			}
			results[rank] = grads
		}()
	}
	wg.Wait()
	fmt.Println(results[0], results[1])
	// Output: [3 20] [3 20]
}
