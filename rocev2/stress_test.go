package rocev2_test

import (
	"flag"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/goroce/goroce/bth"
	"github.com/goroce/goroce/rocev2"
)

var long = flag.Bool("long", false, "run the full 10,000,000-packet stress test (also GOROCE_LONG=1)")

// stressPackets returns how many packets TestStressParse feeds: 10,000,000
// with -long or GOROCE_LONG=1 (7–15 s on the shared 2-core build machine),
// 1,000,000 by default, 100,000 under -short or -race.
func stressPackets() int {
	switch {
	case *long || os.Getenv("GOROCE_LONG") == "1":
		return 10_000_000
	case testing.Short() || raceEnabled:
		return 100_000
	}
	return 1_000_000
}

// TestStressParse feeds a deterministic stream of hostile packets to the
// parsers: half are random transports (a random opcode 0–255 — or, half of
// those, a known one — random header bytes, random length 0–4200) for
// ParseTransport; half are real rxe frames with one to three random byte
// changes or truncations for ParseFrame. Nothing may panic, a packet that
// parses must satisfy the length invariant, and a mutated frame that parses
// is checked with VerifyICRC. The stream is seeded: a failure names the
// packet index, which reproduces it.
func TestStressParse(t *testing.T) {
	n := stressPackets()
	frames := roceFrames(t)
	known := bth.Opcodes()
	const maxLen = 4200
	noise := make([]byte, maxLen)
	r := rand.New(rand.NewPCG(0x60ce, 0x57e55))
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	scratch := make([]byte, 0, 9000)

	var (
		p                                 rocev2.Packet
		i                                 int
		cur                               []byte
		parsedT, parsedF, icrcOK, icrcBad int
	)
	defer func() {
		if v := recover(); v != nil {
			t.Fatalf("panic at packet %d (%x): %v", i, cur, v)
		}
	}()
	start := time.Now()
	for i = 0; i < n; i++ {
		if i&1 == 0 {
			// Random transport.
			l := r.IntN(maxLen + 1)
			b := noise[:l:l]
			for j := 0; j+8 <= min(l, 64); j += 8 {
				v := r.Uint64()
				b[j], b[j+1], b[j+2], b[j+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
				b[j+4], b[j+5], b[j+6], b[j+7] = byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
			}
			if l > 0 {
				v := r.Uint32()
				if v&1 == 0 {
					b[0] = byte(known[int(v>>8)%len(known)])
				} else {
					b[0] = byte(v >> 8)
				}
				if l > 1 && v&6 != 0 {
					b[1] &^= 0x0f // TVer 0, three times in four
				}
			}
			cur = b
			if p.ParseTransport(b) == nil {
				parsedT++
				if p.Info.HeaderLen+len(p.Payload)+len(p.Pad)+bth.ICRCSize != len(b) {
					t.Fatalf("packet %d: lengths do not add up (%x)", i, b)
				}
			}
			continue
		}
		// Near-valid: a real frame, mutated.
		fr := frames[r.IntN(len(frames))]
		b := append(scratch[:0], fr...)
		for range 1 + r.IntN(3) {
			if len(b) == 0 {
				break
			}
			v := r.Uint64()
			if v&7 == 0 {
				b = b[:int(v>>8)%len(b)] // truncate
			} else {
				b[int(v>>8)%len(b)] ^= byte(v>>40) | 1 // change a byte
			}
		}
		b = b[:len(b):len(b)]
		cur = b
		if p.ParseFrame(b) == nil {
			parsedF++
			if p.Info.HeaderLen+len(p.Payload)+len(p.Pad)+bth.ICRCSize != len(p.Transport) {
				t.Fatalf("packet %d: lengths do not add up (%x)", i, b)
			}
			switch err := p.VerifyICRC(); err {
			case nil:
				icrcOK++ // a masked or uncovered byte changed
			case rocev2.ErrBadICRC:
				icrcBad++
			default:
				t.Fatalf("packet %d: VerifyICRC: %v", i, err)
			}
		}
	}
	t.Logf("%d packets in %v: %d transports and %d frames parsed; ICRC ok %d, bad %d",
		n, time.Since(start).Round(time.Millisecond), parsedT, parsedF, icrcOK, icrcBad)
}
