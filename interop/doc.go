// Package interop is goroce's interoperability suite against real Linux
// soft-RoCE (rdma_rxe) peers: QEMU guests started by ../shared/rxe/rxe,
// reached from the host side of the network namespace roce0.
//
// It runs every perftest tool (ib_write_bw, ib_read_bw, ib_send_bw,
// ib_atomic_bw -A FETCH_AND_ADD and CMP_AND_SWAP, ib_write_lat,
// ib_read_lat, ib_send_lat) and ibv_rc_pingpong, ibv_uc_pingpong and
// ibv_ud_pingpong against the goroce CLI (goroce perf, goroce pingpong
// --transport rc|uc|ud), with goroce as server and as client, at RoCE MTU
// 1024 and 4096: 44 cells. Then a data-verifying test against a
// pyverbs peer (testdata/datapeer.py): 4 MiB WRITE and READ, SEND,
// SEND/WRITE with immediate both ways, FETCH_ADD and CMP_SWAP, compared by
// SHA-256 on both sides, and the wrong-rkey error path in both directions.
// Every test is captured on the bridge; every packet goroce sent must
// decode in tshark without error, pass ../shared/rxe/lib/icrc_check.py,
// and goroce cap must print what tshark prints.
//
// The rdma_cm cells connect through the connection manager (issue 16):
// ucmatose as server to roce.Device.Dial and as client of a roce Listener,
// 10 SENDs each way and the disconnect, a Dial to a port the guest
// does not listen on (REJ reason 8), and librdmacm's rping against goroce
// rping both ways (-C 10 -v, -V on the client: each ping an RDMA READ of
// the client's buffer and an RDMA WRITE back, both sides' -v lines
// compared); -cells rdma_cm runs them alone, -cells rping the rping ones.
// librdmacm's example programs run against the roce API called from the
// test: udaddy, which resolves a UD service in the UDP port space (SIDR)
// and sends 10 100-byte SENDs with immediate each way, against
// roce.Device.ListenUD and DialUD (the goroce client first resolves a port
// nobody listens on, which the guest's CM refuses with SIDR status 1); and
// rdma_server and rdma_client, one 16-byte inline SEND each way over an RC
// connection and the disconnect, against Listen and Dial. goroce checks
// what it receives (udaddy's immediate data is the sender's QPN, which the
// completion's source QP must match, and the GRH names the guest;
// rdma_server's and rdma_client's messages are their 16 zero bytes), the
// tools' output must end in success, and these cells are captured with
// the wire checks above; -cells 'udaddy|rdma_server|rdma_client' selects
// the 8.
//
// The pyverbs cells (-cells pyverbs-; testdata/verbspeer.py, pyverbs and
// librdmacm through ctypes in the guest) check UD SENDs both ways with each
// receiver's GRH area equal, byte for byte, to the IPv4 header captured on
// the bridge, and the source QPN; UD with a wrong Q_Key both ways (nothing
// completes, goroce counts qkey_violation); UC RDMA WRITE WITH IMMEDIATE
// both ways; rdma_cm rejects with private data both ways (reason 28 and the
// 148 bytes); and a DREQ from either side (goroce's Conn ends, its QP in
// ERR with its receives flushed; rdma_cm gets RDMA_CM_EVENT_DISCONNECTED).
// The hostile CM cells (-cells cm-hostile, MTU 1024 only) play a peer that
// breaks the protocol against an rdma_cm listener (ucmatose), through a
// link that edits or withholds goroce's MADs: a REQ with a reserved path
// MTU (the kernel: REJ 28, no REP), an RTU never sent (the kernel: its REP
// 1 + Max CM Retries times, then silence; goroce's later DREQ gets a DREP),
// and a Dial canceled with its REQ out (goroce: REJ Timeout with its CA
// GUID as ARI; the kernel sends no REP after it). The hostile-CM table of
// doc/cm.md §2 (issue 27) follows: 25 scenarios of internal/cmhostile
// whose crafted MADs go to the guest's kernel from a bare link on
// 10.77.0.1 while testdata/cmpeer.py listens or dials through librdmacm
// (roce's TestCMHostileTable runs the same against goroce), the node GUID
// (the guest's node_guid is the EUI-64 of its MAC and its REP's Local CA
// GUID; goroce's REQ carries rxebr0's), and goroce rping ended by SIGINT or
// SIGTERM (exit 130 or 143; the guest's rping reports the disconnect).
// -cells cm-hostile runs them all, -cells 'pyverbs-|cm-hostile' with the
// pyverbs cells.
//
// The perftest -R cells run ib_write_bw, ib_read_bw, ib_send_bw,
// ib_write_lat, ib_read_lat and ib_send_lat in perftest's rdma_cm mode
// (no TCP: the exchange over an RDMA CM control connection, the test QPs
// connected through the CM; doc/oob.md §3.6) against goroce perf -R, goroce
// as server and as client, at MTU 1024 and 4096 (24 cells), with the
// matrix's checks and wire hygiene (the CM MADs included); -cells
// perftest-R runs them alone, -cells 'perftest-R ib_.*_bw' the 12 bw ones.
//
// The collective cells (issue 26; -cells 'coll rxe-rank') run a job of
// three ranks: two goroce ranks (package coll in the test process, on
// 10.77.0.1, which serves the rendezvous, and on a second address the cell
// adds to the bridge) and testdata/collpeer.py in the guest, a pyverbs rank
// on rxe that speaks doc/coll.md's wire protocol (rendezvous frames,
// clear-to-send WRITEs into the sender's FIFO, data by RDMA WRITE WITH
// IMMEDIATE). all_reduce (float32 sum, 2 QPs per connection round robin)
// and all_gather (ring order 0, 2, 1, messages split over 2 QPs) on the
// ring, with internal/collcheck's data, at MTU 1024 and 4096: #wrong 0 on
// every rank, rxe's sent_pkts and rcvd_pkts and goroce's QP counters equal
// to the capture's counts, and the wire checks above for both goroce
// addresses.
//
// The tests need root, qemu and the harness; they carry the build tag rxe:
//
//	go test -tags rxe ./interop -v -timeout 30m
//
// Without root or qemu they skip with the reason. The guests are always
// stopped at the end (also on SIGINT/SIGTERM and shortly before the test
// timeout).
package interop
