package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// shutdownGrace bounds how long a tool ended by SIGINT or SIGTERM takes
// to close its devices: the connection manager's DREQs and REJs leave at
// once (roce.Device.Close), and a Conn's Close waits for the DREP only
// this long before the process exits anyway.
const shutdownGrace = 2 * time.Second

// interruptible runs a long-running subcommand's body, run, with a context
// that the first SIGINT or SIGTERM cancels, as the kernel destroys an
// rdma_cm program's cm_ids when it is interrupted: run then closes its
// devices gracefully (its connections' peers get a DREQ, or a REJ for a
// connection still being set up) and returns. interruptible returns run's
// status when no signal came; after a signal it returns the status a shell
// expects of a program ended by it, 128 + the signal number (130 for
// SIGINT, 143 for SIGTERM), once run has returned or shutdownGrace has
// passed, whichever is first, and at once on a second signal. The caller
// exits with the status; run may still be running then.
//
// Every subcommand that waits on a peer uses it (rping, perf against a
// peer, pingpong); run must return promptly once ctx is done.
func interruptible(stderr io.Writer, run func(ctx context.Context) int) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	done := make(chan int, 1)
	go func() { done <- run(ctx) }()
	var sig os.Signal
	select {
	case rc := <-done:
		return rc
	case sig = <-sigs:
	}
	cancel()
	fmt.Fprintf(stderr, "goroce: %v: closing (again to exit at once)\n", sig)
	grace := time.NewTimer(shutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		fmt.Fprintf(stderr, "goroce: not closed after %v: exiting\n", shutdownGrace)
	case <-sigs:
	}
	return signalStatus(sig)
}

// signalStatus is the exit status of a program ended by sig: 128 plus its
// number.
func signalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}
