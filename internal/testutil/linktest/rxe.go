//go:build linux

package linktest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/link"
	"github.com/goroce/goroce/mr"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/roce"
)

// RxeNetns is the namespace the rxe harness (../shared/rxe) puts its
// bridge in; the host side of the bridge is RxeBridge with RxeHostAddr.
const (
	RxeNetns  = "roce0"
	RxeBridge = "rxebr0"
)

// RxeHostAddr is the host's address on the rxe bridge.
var RxeHostAddr = netip.MustParseAddr("10.77.0.1")

// Rxe returns the path of the rxe harness tool, skipping the test unless
// it exists and its guest 1 is running (the tests never start or stop
// guests: `rxe start` first). The tool is $RXE if set, as the interop
// suite sets it for the raw bindings' cells and .ci/run for the suite,
// else ../shared/rxe/rxe beside the module (a checkout elsewhere, such as
// a git worktree, sets RXE).
func Rxe(t testing.TB) string {
	t.Helper()
	RequireRoot(t)
	tool := os.Getenv("RXE")
	if tool == "" {
		dir, err := os.Getwd()
		if err != nil {
			t.Skip(err)
		}
		for ; dir != "/"; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				break
			}
		}
		tool = filepath.Join(dir, "..", "shared", "rxe", "rxe")
	}
	if _, err := os.Stat(tool); err != nil {
		t.Skip("no rxe harness at " + tool)
	}
	out, err := exec.Command(tool, "status").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "== guest 1") || !strings.Contains(string(out), "ACTIVE") {
		t.Skipf("rxe guests not running (run ../shared/rxe/rxe start): %s", out)
	}
	return tool
}

// RxeMTU returns the RoCE path MTU of the rxe bridge as the guests' rxe
// devices derive it from the netdev MTU: 4096 at a netdev MTU of 4096
// plus headers or more (the harness's "rxe mtu 9000"), else 1024.
func RxeMTU(t testing.TB) qp.MTU {
	t.Helper()
	out, err := exec.Command("ip", "-n", RxeNetns, "-o", "link", "show", RxeBridge).CombinedOutput()
	if err != nil {
		t.Fatalf("ip link show %s: %v\n%s", RxeBridge, err, out)
	}
	f := strings.Fields(string(out))
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "mtu" {
			if n, err := strconv.Atoi(f[i+1]); err == nil && n >= 4096+rxeHeaders {
				return qp.MTU4096
			}
			return qp.MTU1024
		}
	}
	t.Fatalf("no mtu in %q", out)
	return 0
}

// rxeHeaders is what a RoCEv2 packet adds to its payload on the netdev:
// IPv4, UDP, BTH, RETH and ICRC, rounded up as rxe's MTU table leaves room.
const rxeHeaders = 20 + 8 + 12 + 16 + 4

// rcImmPeer is the JSON line rc_imm.py exchanges.
type rcImmPeer struct {
	QPN  uint32 `json:"qpn"`
	PSN  uint32 `json:"psn"`
	GID  string `json:"gid"`
	RKey uint32 `json:"rkey"`
	Addr uint64 `json:"addr"`
}

func gidString(a netip.Addr) string {
	b := a.As16() // IPv4 addresses become ::ffff:a.b.c.d, their RoCEv2 GID
	var s []string
	for i := 0; i < 16; i += 2 {
		s = append(s, fmt.Sprintf("%02x%02x", b[i], b[i+1]))
	}
	return strings.Join(s, ":")
}

// RcImm runs the harness's rc_imm.py server in guest 1 and plays its
// client over l (opened in RxeNetns on RxeBridge for RxeHostAddr): RDMA
// WRITE WITH IMM of 8, 3000 and 0 bytes and SEND WITH IMM of 8 and 3000
// bytes at path MTU 1024, which the server checks (opcode, immediate,
// length, data) and answers "ok".
func RcImm(t *testing.T, tool string, l link.Link) {
	t.Helper()
	script := filepath.Join(filepath.Dir(tool), "lib", "rc_imm.py")
	if out, err := exec.Command(tool, "bg", "-g", "1", "-i", script, "goroce-imm", "--", "python3", "-", "server").CombinedOutput(); err != nil {
		t.Fatalf("rxe bg: %v\n%s", err, out)
	}
	waited := false
	defer func() {
		if !waited {
			out, _ := exec.Command(tool, "kill", "-g", "1", "goroce-imm").CombinedOutput()
			t.Logf("guest server killed:\n%s", out)
		}
	}()
	guest := netip.MustParseAddr("10.77.0.2")

	d, err := roce.Open(roce.Config{Link: l})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pd := d.AllocPD()
	c, _ := d.CreateCQ(64)
	q, err := d.CreateQP(roce.QPConfig{PD: pd, SendCQ: c, RecvCQ: c})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 65536)
	m, err := d.RegisterMR(pd, buf, mr.LocalWrite|mr.RemoteWrite|mr.RemoteRead)
	if err != nil {
		t.Fatal(err)
	}

	var conn net.Conn
	err = InNetns(RxeNetns, func() error {
		deadline := time.Now().Add(60 * time.Second)
		for {
			var err error
			conn, err = net.DialTimeout("tcp", netip.AddrPortFrom(guest, 18516).String(), 5*time.Second)
			if err == nil || time.Now().After(deadline) {
				return err
			}
			time.Sleep(300 * time.Millisecond)
		}
	})
	if err != nil {
		t.Fatalf("connect to rc_imm.py in guest 1: %v", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(90 * time.Second))
	rd := bufio.NewReader(conn)
	info := q.Info()
	me, _ := json.Marshal(rcImmPeer{QPN: uint32(info.QPN), PSN: uint32(info.PSN), GID: gidString(RxeHostAddr), RKey: uint32(m.RKey()), Addr: m.IOVA()})
	conn.Write(append(me, '\n'))
	line, err := rd.ReadBytes('\n')
	if err != nil {
		t.Fatalf("rc_imm exchange: %v", err)
	}
	var peer rcImmPeer
	if err := json.Unmarshal(line, &peer); err != nil {
		t.Fatalf("rc_imm exchange %q: %v", line, err)
	}
	t.Logf("guest QP %#x PSN %#x rkey %#x", peer.QPN, peer.PSN, peer.RKey)
	// rxe's path MTU follows its netdev's MTU (1500 → 1024, 9000 → 4096),
	// and rxe rejects a MIDDLE packet shorter than its path MTU
	// (rxe_resp.c check_length): use the same.
	err = q.Connect(roce.Info{Addr: guest, QPN: bthQPN(peer.QPN), PSN: bthPSN(peer.PSN)}, roce.ConnectOptions{MTU: RxeMTU(t), Timeout: roce.DefaultTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rd.ReadString('\n'); err != nil { // "go"
		t.Fatalf("waiting for go: %v", err)
	}
	ops := []struct {
		op  qp.WROpcode
		n   int
		off int64 // -1: SEND
		imm uint32
	}{
		{qp.WRRDMAWriteWithImm, 8, 0, 0x11223344},
		{qp.WRRDMAWriteWithImm, 3000, 4096, 0x55667788},
		{qp.WRRDMAWriteWithImm, 0, 0, 0x0badf00d},
		{qp.WRSendWithImm, 8, -1, 0xcafebabe},
		{qp.WRSendWithImm, 3000, -1, 0xdeadbeef},
	}
	for i, o := range ops {
		for k := 0; k < o.n; k++ {
			buf[k] = byte(i + k)
		}
		wr := qp.SendWR{WRID: uint64(i), Opcode: o.op, Flags: qp.SendSignaled, Imm: o.imm,
			SGL: []qp.SGE{m.SGE(0, o.n)}}
		if o.off >= 0 {
			wr.RemoteAddr, wr.RKey = peer.Addr+uint64(o.off), mr.Key(peer.RKey)
		}
		if err := q.PostSend(&wr); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var wc [1]cq.Completion
		n, err := c.Wait(ctx, wc[:])
		cancel()
		if err != nil || n != 1 || wc[0].Status != cq.StatusSuccess {
			t.Fatalf("op %d: completion %+v %v (device %+v)", i, wc[0], err, d.Stats())
		}
	}
	res, err := rd.ReadString('\n')
	if err != nil {
		t.Fatalf("rc_imm verdict: %v", err)
	}
	out, werr := exec.Command(tool, "wait", "-g", "1", "-t", "30", "goroce-imm").CombinedOutput()
	waited = true
	t.Logf("guest server:\n%s", bytes.TrimSpace(out))
	if strings.TrimSpace(res) != "ok" || werr != nil {
		t.Fatalf("rc_imm.py server says %q (%v)", strings.TrimSpace(res), werr)
	}
	st := d.Stats()
	if st.BadICRC.Load() != 0 || st.ICRCIDFixups.Load() != 0 {
		t.Errorf("bad ICRC %d, IP-ID fixups %d: a raw link must report the real IPv4 ID", st.BadICRC.Load(), st.ICRCIDFixups.Load())
	}
}

func bthQPN(v uint32) bth.QPN { return bth.QPN(v & bth.QPNMask) }
func bthPSN(v uint32) bth.PSN { return bth.PSN(v & bth.PSNMask) }
