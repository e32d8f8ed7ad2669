// Package pingpong speaks ibv_rc_pingpong's out-of-band exchange and runs
// its RC SEND ping-pong on a goroce device, as server or client, so that
// goroce and rdma-core's libibverbs/examples/rc_pingpong.c (v44) can be
// each other's peer.
//
// The exchange (TCP port perftest.Port, 18515, as perftest's): the client
// writes its 52-byte message "LID:QPN:PSN:GID" (sprintf
// "%04x:%06x:%06x:%s" of the wire GID, NUL included); the server reads
// it, moves its QP to RTR and RTS, writes its own message; the client
// writes "done" and its NUL; both close. The client then sends the first
// SEND; each side sends its next message once its previous SEND and a RECV
// completed.
package pingpong
