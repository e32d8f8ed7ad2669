package main

import (
	"bytes"
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// repo is the module's root, for testdata and doc files.
const repo = "../.."

// runCmd runs the goroce CLI in-process.
func runCmd(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// freeUDPPort returns a UDP port free on both 127.0.0.1 and 127.0.0.2.
func freeUDPPort(t *testing.T) int {
	t.Helper()
	for range 50 {
		a, err := net.ListenPacket("udp", "127.0.0.1:0")
		require.NoError(t, err)
		p := a.LocalAddr().(*net.UDPAddr).Port
		b, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.2:%d", p))
		a.Close()
		if err == nil {
			b.Close()
			return p
		}
	}
	t.Fatal("no UDP port free on both 127.0.0.1 and 127.0.0.2")
	return 0
}

func TestHelp(t *testing.T) {
	code, out, _ := runCmd("help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "cap ")
	code, _, errOut := runCmd()
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "usage: goroce COMMAND")
}
