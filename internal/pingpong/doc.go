// Package pingpong speaks the out-of-band exchange of rdma-core's
// ibv_rc_pingpong, ibv_uc_pingpong and ibv_ud_pingpong and runs their SEND
// ping-pong on a goroce device (Config.Type: RC, UC or UD), as server or
// client, so that goroce and libibverbs/examples/{rc,uc,ud}_pingpong.c
// (v44) can be each other's peer.
//
// The exchange (TCP port perftest.Port, 18515, as perftest's), the same in
// all three: the client writes its 52-byte message "LID:QPN:PSN:GID"
// (sprintf "%04x:%06x:%06x:%s" of the wire GID, NUL included); the server
// reads it, moves its QP to RTR and RTS (ud_pingpong: and makes its
// address handle), writes its own message; the client writes "done" and
// its NUL; both close. The client then sends the first SEND; each side
// sends its next message once its previous SEND and a RECV completed.
//
// UC is RC's ping-pong over a UC QP: no ACKs, so a lost packet loses its
// message and the run stalls until Config.Timeout. UD sends each message
// as one datagram (Size at most the MTU) with Q_Key QKey to an address
// handle of the peer's QPN; its receive buffers have 40 bytes more, the
// GRH area, before the payload.
package pingpong
