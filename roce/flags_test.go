package roce_test

import "flag"

var long = flag.Bool("long", false, "run the long variants of the tests (also GOROCE_LONG=1)")
