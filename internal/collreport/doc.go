// Package collreport renders the HTML report of a collective run on a
// namespace fabric (goroce coll -np N --fabric NAME --report FILE.html):
// the bus bandwidth against size (out-of-place and in place), the load on
// each link drawn as a leaf-spine picture, each uplink's throughput over
// time with the timed runs marked, the ECN, CNP and retransmission counts,
// and the connections that carried the data with each QP's source port
// and spine.
//
// The page is self-contained: inline CSS and SVG, no script and no
// external reference, so it opens anywhere and can be mailed or archived;
// it is also well-formed XML. goroce coll builds the Report from its
// ranks' files and the fabric's counters; this package only draws it.
package collreport
