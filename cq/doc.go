// Package cq holds goroce's completions: the Completion record, the Status,
// Opcode and Flags enums numbered exactly as rdma-core's ibv_wc_status,
// ibv_wc_opcode and ibv_wc_flags, and CQ, a bounded completion queue.
//
// The engine (package qp) pushes one Completion per signalled work request,
// and one per failed or flushed request whether signalled or not (IBA
// 10.7.3.1: "if a completion error occurs, a Work Completion will always be
// generated"). The application drains the queue with Poll (non-blocking),
// Wait (blocking, context-aware) or Notify plus Poll (for event loops).
// The driver that makes a CQ may give it a Hook (Config.Hook), which is
// told of each push and of each goroutine that blocks in Wait.
//
// Statuses convert to Go errors with Status.Err or Completion.Err; the
// resulting *StatusError matches with errors.Is on the status alone:
//
//	if errors.Is(c.Err(), cq.StatusRemAccessErr.Err()) { ... }
//
// The package imports no other goroce package.
package cq
