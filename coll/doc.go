// Package coll runs collectives — all-reduce, reduce-scatter, all-gather,
// broadcast, reduce, all-to-all, send and receive — between processes over
// goroce's RoCEv2 devices, on the wire as NCCL's network transport puts
// them: RC QPs, a receiver-driven clear-to-send written inline into the
// sender's FIFO, data by RDMA WRITE WITH IMMEDIATE. Any Linux host can
// then put an AI-training fabric's traffic on a switch, without a GPU, an
// RDMA NIC or MPI.
//
// # A job
//
// Join makes one rank of a job of Size ranks: it opens a roce.Device on
// the rank's own address, meets the other ranks at a rendezvous served by
// rank 0 over TCP (or a shared directory, file://DIR), and connects
// Config.Channels connections of Config.QPsPerConn QPs to every peer.
// Discover finds rank, size and rendezvous (a Launch) in the environment that
// torchrun, Open MPI, MPICH or Slurm give a process (or GOROCE_RANK,
// GOROCE_WORLD_SIZE and GOROCE_RDZV):
//
//	l, err := coll.Discover(coll.Launch{}, os.LookupEnv)
//	c, err := coll.Join(ctx, l.Config())
//	defer c.Close()
//	err = coll.AllReduce(c, grads, grads, coll.Sum)
//
// Every rank calls the same collectives in the same order with matching
// sizes. A rank that dies ends every other rank's call with a *RankError
// that names it, at once (its control connection to rank 0 closes) or,
// for a rank that hangs, after Config.Timeout without progress.
//
// # Algorithms
//
// All-reduce runs as NCCL's ring, its double binary tree or
// halving-doubling (AlgoRing, AlgoTree, AlgoHD); Comm.Choose picks by size
// (halving-doubling for small messages, where the number of sequential
// steps decides, the ring for large ones). Data is split over the
// channels, and on each channel into messages of at most Config.Chunk
// bytes, Config.Steps of them in flight per connection.
//
// # Types
//
// The typed functions take slices of int8, uint8, int32, uint32, int64,
// uint64, Half (float16), float32, float64 and BF16 (bfloat16); Run takes
// bytes and a DataType. Reductions are sum, prod, min, max and avg.
//
// doc/coll.md in the repository describes the wire protocol (the FIFO
// element, the immediate, the order of operations), so that a program on
// another verbs stack can take part in a job.
package coll
