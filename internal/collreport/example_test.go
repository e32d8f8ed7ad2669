package collreport_test

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/goroce/goroce/internal/collreport"
)

// A report of two sizes of an all-reduce without a fabric: the bus
// bandwidth chart and the rows' table.
func ExampleWrite() {
	r := &collreport.Report{
		Title: "all_reduce, 4 ranks",
		Rows: []collreport.Row{
			{Bytes: 1 << 20, Type: "float", Op: "sum", Out: collreport.Half{TimeUs: 9000, BusBw: 0.17, Checked: true}, In: collreport.Half{TimeUs: 9100, BusBw: 0.17, Checked: true}},
			{Bytes: 4 << 20, Type: "float", Op: "sum", Out: collreport.Half{TimeUs: 30000, BusBw: 0.21, Checked: true}, In: collreport.Half{TimeUs: 31000, BusBw: 0.2, Checked: true}},
		},
	}
	var b bytes.Buffer
	if err := collreport.Write(&b, r); err != nil {
		fmt.Println(err)
		return
	}
	page := b.String()
	fmt.Println(strings.Count(page, "<svg"), strings.Contains(page, "<script"), strings.Contains(page, `class="chart busbw"`))
	// Output: 1 false true
}
