package capfmt_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/goroce/goroce/internal/capfmt"
)

// fuzzFilter exercises the filter engine on every fuzzed packet.
var fuzzFilter, _ = capfmt.CompileFilter(`infiniband && (infiniband.bth.opcode in {4, 17} || ip.src != 10.77.0.3 || infiniband.reserved[0] == 40 || roce.icrc.status == bad || frame.time_relative > 0.5 || macc.cbfc.pause_time.c3 > 0 || vlan.priority == 3 || macc.cbfc.enbv.c6)`)

// decodeAll runs a capture file through the reader, the decoder, the
// filter and every writer, as "goroce cap" does, stopping at the first
// read error. It must never panic.
func decodeAll(data []byte, maxFrames int) {
	rd, err := capfmt.NewReader(bytes.NewReader(data))
	if err != nil {
		return
	}
	defer rd.Close()
	fields := capfmt.Fields()
	var cols []capfmt.Field
	for _, f := range fields {
		if !f.IsProtocol() {
			cols = append(cols, f)
		}
	}
	fw := capfmt.NewFieldsWriter(io.Discard, cols, capfmt.DefaultFieldsOptions())
	jw := capfmt.NewJSONWriter(io.Discard, nil, time.UTC)
	jf := capfmt.NewJSONWriter(io.Discard, cols, time.UTC)
	tw := capfmt.NewTextWriter(io.Discard, rd.NanosecondTimestamps())
	dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
	var (
		fr capfmt.Frame
		p  capfmt.Packet
	)
	for n := 0; n < maxFrames; n++ {
		if rd.Next(&fr) != nil {
			break
		}
		dec.Decode(&fr, &p)
		fuzzFilter.Match(&p)
		_ = fw.Write(&p)
		_ = jw.Write(&p)
		_ = jf.Write(&p)
		_ = tw.Write(&p)
	}
	_ = jw.Close()
}

// FuzzCapFile feeds whole capture files (seeded with the goldens, whole,
// truncated and with a corrupted byte) into the reader and decoder.
func FuzzCapFile(f *testing.F) {
	for _, g := range []string{"testdata/pcaps/*.pcap", "testdata/tshark/probe/*.pcap"} {
		m, _ := filepath.Glob(filepath.Join(root, g))
		for _, p := range m {
			data, err := os.ReadFile(p)
			if err != nil || len(data) > 64<<10 {
				continue
			}
			f.Add(data)
			f.Add(data[:len(data)/2])
			c := bytes.Clone(data)
			c[len(c)/3] ^= 0xff
			f.Add(c)
		}
	}
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x0d, 0x0d, 0x0a})
	f.Fuzz(func(t *testing.T, data []byte) {
		decodeAll(data, 1000)
	})
}

// FuzzDecodeFrame feeds single frames under every link type straight into
// the decoder: the fastest way to reach the dissectors' corners.
func FuzzDecodeFrame(f *testing.F) {
	frames := []capfmt.Frame{}
	for _, g := range []string{"testdata/tshark/probe/*.pcap", "testdata/pcaps/rc_imm.pcap", "testdata/pcaps/rping.pcap"} {
		m, _ := filepath.Glob(filepath.Join(root, g))
		for _, p := range m {
			frames = append(frames, loadFrames(f, p)...)
		}
	}
	for i, fr := range frames {
		if i%3 == 0 {
			f.Add(uint8(0), fr.Data, uint16(0))
		}
	}
	links := []capfmt.LinkType{capfmt.LinkEthernet, capfmt.LinkRaw, capfmt.LinkIPv4, capfmt.LinkIPv6,
		capfmt.LinkLinuxSLL, capfmt.LinkSLL2, capfmt.LinkNull, capfmt.LinkLoop}
	dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
	fw := capfmt.NewFieldsWriter(io.Discard, goldenFields(f), capfmt.DefaultFieldsOptions())
	var p capfmt.Packet
	f.Fuzz(func(t *testing.T, link uint8, data []byte, extra uint16) {
		fr := capfmt.Frame{Number: 1, LinkType: links[int(link)%len(links)], Data: data, OrigLen: len(data) + int(extra%64)}
		dec.Decode(&fr, &p)
		fuzzFilter.Match(&p)
		_ = fw.Write(&p)
	})
}
