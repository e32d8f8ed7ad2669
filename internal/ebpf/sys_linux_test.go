package ebpf_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/goroce/goroce/internal/ebpf"
)

func requireRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: bpf(2) map and program commands")
	}
}

// TestMapRoundTrip stores and reads array map values, and opens the map
// again by its ID as another process would.
func TestMapRoundTrip(t *testing.T) {
	requireRoot(t)
	m, err := ebpf.CreateArrayMap("goroce_test", 16, 3)
	require.NoError(t, err)
	defer m.Close()
	v := bytes.Repeat([]byte{0xab}, 16)
	require.NoError(t, m.Update(2, v))
	info, err := m.Info()
	require.NoError(t, err)
	assert.Equal(t, "goroce_test", info.Name)
	assert.Equal(t, uint32(16), info.ValueSize)
	assert.Equal(t, uint32(3), info.MaxEntries)

	m2, err := ebpf.MapFromID(info.ID)
	require.NoError(t, err)
	defer m2.Close()
	got := make([]byte, 16)
	require.NoError(t, m2.Lookup(2, got))
	assert.Equal(t, v, got)
	require.NoError(t, m2.Lookup(0, got))
	assert.Equal(t, make([]byte, 16), got, "entries start zero")
	assert.Error(t, m2.Lookup(3, got), "past the last entry")
	assert.Error(t, m.Update(0, v[:8]), "a value of the wrong size")
}

// TestVerifierError loads a program that returns R0 without setting it:
// the verifier refuses it and its log says why.
func TestVerifierError(t *testing.T) {
	requireRoot(t)
	var a ebpf.Asm
	a.Exit()
	prog, err := a.Assemble()
	require.NoError(t, err)
	_, err = ebpf.LoadProgram(ebpf.SchedCLS, "goroce_bad", "Proprietary", prog)
	var verr *ebpf.VerifierError
	require.True(t, errors.As(err, &verr), "got %v", err)
	assert.True(t, strings.Contains(verr.Log, "R0"), "log: %s", verr.Log)
}

// TestTestRun loads a classifier that returns skb->len and runs it on a
// 60-byte frame.
func TestTestRun(t *testing.T) {
	requireRoot(t)
	var a ebpf.Asm
	a.Load(ebpf.W, ebpf.R0, ebpf.R1, 0)
	a.Exit()
	prog, err := a.Assemble()
	require.NoError(t, err)
	p, err := ebpf.LoadProgram(ebpf.SchedCLS, "goroce_len", "Proprietary", prog)
	require.NoError(t, err)
	defer p.Close()
	frame := make([]byte, 60)
	frame[12], frame[13] = 0x08, 0x00
	ret, out, err := p.TestRun(frame)
	require.NoError(t, err)
	assert.Equal(t, uint32(60), ret)
	assert.Equal(t, frame, out)
}

// TestXSKMapAndXDP creates an XSKMAP and loads an XDP program as
// link/afxdp does (expected attach type XDP, multi-buffer frames), then
// runs it on a frame: it passes it.
func TestXSKMapAndXDP(t *testing.T) {
	requireRoot(t)
	m, err := ebpf.CreateMap(ebpf.XSKMap, "goroce_xsks", 4, 2)
	require.NoError(t, err)
	defer m.Close()
	info, err := m.Info()
	require.NoError(t, err)
	assert.Equal(t, uint32(unix.BPF_MAP_TYPE_XSKMAP), info.Type)
	assert.Equal(t, uint32(2), info.MaxEntries)
	assert.Error(t, m.Update(0, []byte{1, 2, 3, 4}), "not a socket")

	var a ebpf.Asm
	a.Mov(ebpf.R0, ebpf.XDPPass)
	a.Exit()
	prog, err := a.Assemble()
	require.NoError(t, err)
	p, err := ebpf.Load(ebpf.ProgramSpec{Type: ebpf.XDP, Name: "goroce_pass", License: "MIT", Insns: prog,
		AttachType: ebpf.AttachXDP, Flags: unix.BPF_F_XDP_HAS_FRAGS})
	require.NoError(t, err)
	defer p.Close()
	ret, _, err := p.TestRun(make([]byte, 64))
	require.NoError(t, err)
	assert.Equal(t, uint32(ebpf.XDPPass), ret)
	_, err = p.Attach(1<<30, ebpf.AttachXDP, 0)
	assert.Error(t, err, "no such interface")
}
