// Package metrics exports the counters of goroce devices (package roce)
// and their QPs for monitoring: in the Prometheus text exposition format
// 0.0.4 ([Exporter.ServeHTTP], [Exporter.WriteText]), as an expvar.Func
// ([Exporter.Expvar], [Exporter.PublishExpvar]), and as the lines of
// iproute2's `rdma statistic show` ([Exporter.WriteStatistic]), so that a
// run's counters can be diffed against rxe's.
//
// An [Exporter] reads each device's [roce.Device.Snapshot], a copy of its
// counters in plain values: reading costs the data path nothing, and a
// scrape takes no lock the data path takes. It is a package of its own so
// that a program that links roce does not link net/http and expvar.
//
// The text format is written here rather than with
// github.com/prometheus/client_golang: the counters already exist as
// atomics, so a client library would add a second copy of each (or a
// custom Collector doing what this package does) and a dependency tree,
// for no gain. The official parser (prometheus/common/expfmt) checks the
// output in the tests.
//
// Names: each metric is goroce_device_<name>_total or
// goroce_qp_<name>_total, where <name> is rxe's hw_counters name
// (sent_pkts, duplicate_request, …), ConnectX's congestion-control name
// (np_cnp_sent, np_ecn_marked_roce_packets, rp_cnp_handled,
// rp_cnp_ignored) or this project's, in the same style. The _total suffix
// is Prometheus's convention for counters; strip the prefix and the suffix
// to get the name that `rdma statistic show` prints (and WriteStatistic
// prints). doc/metrics.md in the repository has the table.
package metrics
