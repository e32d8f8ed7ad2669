package main

import (
	"bytes"
	"strings"
	"sync"
)

// syncBuffer is a bytes.Buffer for a command running in another
// goroutine; ready is closed once the output contains mark (a zero
// syncBuffer has no mark).
type syncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	mark  string
	ready chan struct{}
	once  sync.Once
}

func newSyncBuffer(mark string) *syncBuffer {
	return &syncBuffer{mark: mark, ready: make(chan struct{})}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	if s.mark != "" && strings.Contains(s.b.String(), s.mark) {
		s.once.Do(func() { close(s.ready) })
	}
	return n, err
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
