#!/usr/bin/env python3
"""rdma_cm peer for goroce's hostile-CM cells (librdmacm through ctypes, in an rxe guest).

Fed on stdin by the suite:  rxe bg -i interop/testdata/cmpeer.py cmpeer -- python3 - MODE ARGS

  listen ADDR RCPORT UDPORT  rdma_listen on ADDR:RCPORT in RDMA_PS_TCP (RC) and on ADDR:UDPORT in
                             RDMA_PS_UDP (UD), bound to ADDR as rping -a binds; accept every RC
                             connect request (no QP: the REP carries a random qp_num), reject UD ones
  connect ADDR PORT N        rdma_connect N RC cm_ids to ADDR:PORT (no QP), one after the other;
                             on CONNECT_RESPONSE rdma_establish (the RTU)

Either way it then serves events until killed: DISCONNECTED is answered with rdma_disconnect (the
DREP), and an id is destroyed only once the kernel's CM has finished with it (REJECTED,
UNREACHABLE, CONNECT_ERROR, TIMEWAIT_EXIT), so that the script itself never sends a REJ or DREQ
the hostile peer did not cause. One line per event: "cmpeer: EVENT status=S id=ID".
"""
import ctypes, os, select, socket, struct, sys, time

cm = ctypes.CDLL("librdmacm.so.1", use_errno=True)
RDMA_PS_TCP, RDMA_PS_UDP = 0x0106, 0x0111
EV = ["ADDR_RESOLVED", "ADDR_ERROR", "ROUTE_RESOLVED", "ROUTE_ERROR", "CONNECT_REQUEST",
      "CONNECT_RESPONSE", "CONNECT_ERROR", "UNREACHABLE", "REJECTED", "ESTABLISHED",
      "DISCONNECTED", "DEVICE_REMOVAL", "MULTICAST_JOIN", "MULTICAST_ERROR", "ADDR_CHANGE",
      "TIMEWAIT_EXIT"]


class ConnParam(ctypes.Structure):  # struct rdma_conn_param
    _fields_ = [("private_data", ctypes.c_void_p), ("private_data_len", ctypes.c_uint8),
                ("responder_resources", ctypes.c_uint8), ("initiator_depth", ctypes.c_uint8),
                ("flow_control", ctypes.c_uint8), ("retry_count", ctypes.c_uint8),
                ("rnr_retry_count", ctypes.c_uint8), ("srq", ctypes.c_uint8), ("qp_num", ctypes.c_uint32)]


class Event(ctypes.Structure):  # struct rdma_cm_event (param.conn; the union is larger)
    _fields_ = [("id", ctypes.c_void_p), ("listen_id", ctypes.c_void_p), ("event", ctypes.c_int),
                ("status", ctypes.c_int), ("conn", ConnParam), ("pad", ctypes.c_uint8 * 64)]


cm.rdma_create_event_channel.restype = ctypes.c_void_p
cm.rdma_get_cm_event.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.POINTER(Event))]
cm.rdma_ack_cm_event.argtypes = [ctypes.POINTER(Event)]
for f in ("rdma_disconnect", "rdma_destroy_id", "rdma_establish"):
    getattr(cm, f).argtypes = [ctypes.c_void_p]
cm.rdma_listen.argtypes = [ctypes.c_void_p, ctypes.c_int]
cm.rdma_resolve_route.argtypes = [ctypes.c_void_p, ctypes.c_int]
cm.rdma_create_id.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int]
cm.rdma_bind_addr.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
cm.rdma_resolve_addr.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
cm.rdma_connect.argtypes = [ctypes.c_void_p, ctypes.POINTER(ConnParam)]
cm.rdma_accept.argtypes = [ctypes.c_void_p, ctypes.POINTER(ConnParam)]
cm.rdma_reject.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint8]


def say(s):
    print("cmpeer: %s" % s, flush=True)


def check(ret, what):
    if ret != 0:
        raise RuntimeError("%s: %s" % (what, os.strerror(ctypes.get_errno())))


def sockaddr(ip, port):
    return ctypes.create_string_buffer(struct.pack("<H", socket.AF_INET) + struct.pack(">H", port) +
                                       socket.inet_aton(ip) + bytes(8), 16)


def param():
    # No QP on the cm_id: the REQ/REP carry this QPN (ucma_copy_conn_param_to_kern).
    return ConnParam(responder_resources=1, initiator_depth=1, retry_count=7, rnr_retry_count=7,
                     qp_num=int.from_bytes(os.urandom(3), "big") | 1)


ch = cm.rdma_create_event_channel()
if not ch:
    raise RuntimeError("rdma_create_event_channel failed")
fd = ctypes.cast(ch, ctypes.POINTER(ctypes.c_int))[0]  # struct rdma_event_channel { int fd; }


def new_id(ps):
    i = ctypes.c_void_p()
    check(cm.rdma_create_id(ch, ctypes.byref(i), None, ps), "rdma_create_id")
    return i.value


def event(timeout):
    r, _, _ = select.select([fd], [], [], timeout)
    if not r:
        return None
    ev = ctypes.POINTER(Event)()
    check(cm.rdma_get_cm_event(ch, ctypes.byref(ev)), "rdma_get_cm_event")
    x = ev.contents
    out = (EV[x.event] if x.event < len(EV) else str(x.event), x.status, x.id, x.listen_id)
    cm.rdma_ack_cm_event(ev)
    return out


def expect(want):
    e = event(10)
    if e is None or e[0] != want:
        raise RuntimeError("rdma_cm event %s, want %s" % (e, want))
    return e


def main():
    mode = sys.argv[1]
    ud = set()
    if mode == "listen":
        addr, rc, udp = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        for ps, port in ((RDMA_PS_TCP, rc), (RDMA_PS_UDP, udp)):
            lid = new_id(ps)
            check(cm.rdma_bind_addr(lid, sockaddr(addr, port)), "rdma_bind_addr")
            check(cm.rdma_listen(lid, 64), "rdma_listen")
            if ps == RDMA_PS_UDP:
                ud.add(lid)
        say("listening on %s:%d (RC) and %s:%d (UD)" % (addr, rc, addr, udp))
    elif mode == "connect":
        addr, port, n = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        for k in range(n):
            cid = new_id(RDMA_PS_TCP)
            check(cm.rdma_resolve_addr(cid, None, sockaddr(addr, port), 5000), "rdma_resolve_addr")
            expect("ADDR_RESOLVED")
            check(cm.rdma_resolve_route(cid, 5000), "rdma_resolve_route")
            expect("ROUTE_RESOLVED")
            p = param()
            check(cm.rdma_connect(cid, ctypes.byref(p)), "rdma_connect")
            say("connect %d sent id=%x" % (k, cid))
            time.sleep(0.2)
    else:
        raise SystemExit("mode: listen or connect")
    while True:
        e = event(3600)
        if e is None:
            continue
        name, status, cid, lid = e
        say("%s status=%d id=%x" % (name, status, cid or 0))
        if name == "CONNECT_REQUEST":
            if lid in ud:
                cm.rdma_reject(cid, None, 0)
                continue
            p = param()
            if cm.rdma_accept(cid, ctypes.byref(p)) != 0:
                say("rdma_accept: %s" % os.strerror(ctypes.get_errno()))
        elif name == "CONNECT_RESPONSE":
            if cm.rdma_establish(cid) != 0:
                say("rdma_establish: %s" % os.strerror(ctypes.get_errno()))
        elif name == "DISCONNECTED":
            cm.rdma_disconnect(cid)
        elif name in ("REJECTED", "UNREACHABLE", "CONNECT_ERROR", "TIMEWAIT_EXIT"):
            cm.rdma_destroy_id(cid)


main()
