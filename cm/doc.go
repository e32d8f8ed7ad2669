// Package cm is the InfiniBand Communication Manager (IBA chapter 12) as
// rdma_cm uses it over RoCEv2: the CM MAD codec and a sans-IO connection
// state machine.
//
// CM messages are 256-byte management datagrams (MADs, IBA 13.4) sent as
// UD SEND ONLY to the GSI queue pair (QP1, Q_Key 0x80010000). The codec
// is a set of zero-copy views over one MAD buffer, following the house
// style of the header packages: [MAD] is the 24-byte common header and
// [REQ], [REP], [RTU], [REJ], [MRA], [DREQ], [DREP], [SIDRREQ] and
// [SIDRREP] are views of a whole MAD whose accessors read the 232-byte
// CM data that follows the header. Each has a Fields struct with Encode
// for building and Fields for tests and logs.
//
// The IP-based CM Service (IBA Annex A11) that rdma_cm speaks on RoCE is
// covered by [ServiceID] (port space and port) and [IPHeader], the
// 36-byte cma_hdr that starts the REQ private data.
//
// [Manager] is the connection state machine (IBA 12.9, as Linux
// drivers/infiniband/core/cm.c implements it). It never sleeps, reads a
// socket or starts a goroutine: it takes the current time and a received
// MAD or an API call, and returns the MADs to send and the events to
// deliver, plus a deadline for its retransmission and time-wait timers.
// The caller (the device layer) moves MADs to and from QP1 and applies the
// [QPParams] carried by events to its queue pairs.
package cm
