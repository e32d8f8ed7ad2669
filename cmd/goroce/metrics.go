package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/goroce/goroce/roce/metrics"
)

// serveMetrics serves e's metrics in the Prometheus text format at
// http://addr/metrics (goroce perf --metrics ADDR) until stop is called;
// stop shuts the server down and waits for it. The address actually bound
// (addr may have port 0) is printed to stderr.
func serveMetrics(addr string, e *metrics.Exporter, stderr io.Writer) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", e)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "goroce: metrics server: %v\n", err)
		}
	}()
	fmt.Fprintf(stderr, "goroce: serving metrics on http://%s/metrics\n", ln.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	}, nil
}
