package svgplot_test

import (
	"fmt"

	"github.com/goroce/goroce/internal/svgplot"
)

func ExampleTicks() {
	for _, v := range svgplot.Ticks(0, 100, 5) {
		fmt.Print(svgplot.Trim(fmt.Sprintf("%.2f", v)), " ")
	}
	fmt.Println()
	// Output: 0 20 40 60 80 100
}
