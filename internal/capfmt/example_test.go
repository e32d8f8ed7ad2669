package capfmt_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/goroce/goroce/internal/capfmt"
)

// Example decodes a capture like
// goroce cap -r rc_pingpong.pcap -Y 'infiniband.bth.opcode == 17' -T fields -e …
func Example() {
	f, err := os.Open("../../testdata/pcaps/rc_pingpong.pcap")
	if err != nil {
		panic(err)
	}
	defer f.Close()
	rd, err := capfmt.NewReader(f)
	if err != nil {
		panic(err)
	}
	filter, err := capfmt.CompileFilter("infiniband.bth.opcode == 17 && frame.number < 20")
	if err != nil {
		panic(err)
	}
	var cols []capfmt.Field
	for _, name := range []string{"frame.number", "infiniband.bth.psn", "infiniband.aeth.msn", "roce.icrc.status"} {
		f, _ := capfmt.FieldByName(name)
		cols = append(cols, f)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	opt := capfmt.DefaultFieldsOptions()
	opt.Header = true
	fw := capfmt.NewFieldsWriter(out, cols, opt)
	_ = fw.WriteHeader()

	dec := capfmt.NewDecoder(capfmt.DecoderConfig{})
	var (
		fr capfmt.Frame
		p  capfmt.Packet
	)
	for {
		if err := rd.Next(&fr); err != nil {
			if !errors.Is(err, io.EOF) {
				fmt.Println(err)
			}
			break
		}
		dec.Decode(&fr, &p)
		if filter.Match(&p) {
			_ = fw.Write(&p)
		}
	}
	// Output:
	// frame.number	infiniband.bth.psn	infiniband.aeth.msn	roce.icrc.status
	// 13	7743099	1	good
	// 15	11467765	1	good
	// 17	7743100	2	good
	// 19	11467766	2	good
}
