#!/usr/bin/env python3
"""UD, UC and rdma_cm peer for goroce's interop suite (pyverbs + librdmacm, in an rxe guest).

Fed on stdin by the suite:  rxe bg -i interop/testdata/verbspeer.py vp -- python3 - [PORT]
It listens on TCP PORT (default 18518); goroce connects and drives, one JSON line per command and
one JSON line per answer (two for the commands marked "two answers"). Data patterns are
SHAKE-128 of a label, as datapeer.py: pattern(label, n) = hashlib.shake_128(label.encode()).digest(n).

Verbs (pyverbs):
  hello         {"gid"}: goroce's GID; answer the guest's GID and active MTU enum
  ud_setup      {"qkey"}: a UD QP with that Q_Key, 8 receives of 40 + 4096 bytes posted
  ud_send       {"qpn", "qkey", "msgs": [{"label", "len"}]}: UD SENDs to goroce's QP through an
                AH with a GRH (hop limit "ttl", traffic class "tclass"); wait for each send completion
  ud_recv       {"labels": [{"label", "len"}], "timeout"}: poll that many receives; for each the
                status, byte_len, src_qp, wc_flags, the 40-byte GRH area (hex) and whether the data
                after it is the pattern
  ud_none       {"secs"}: poll the UD receive CQ that long; answer how many completions came and
                the port's qkey_viol_cntr (ud_setup answers it too)
  uc_setup      {"qpn", "psn", "mtu"}: a UC QP connected to goroce's, a 64 KiB MR with remote
                write, 4 receives posted; answer its QPN, PSN, address and rkey
  uc_write_imm  {"rkey", "addr", "label", "len", "imm"}: UC RDMA WRITE WITH IMM into goroce
  uc_check      {"label", "len", "imm", "off"}: poll one receive; check IBV_WC_RECV_RDMA_WITH_IMM,
                the immediate, byte_len and the data at "off" of the MR
rdma_cm (librdmacm through ctypes: pyverbs 44's CMID has no reject and no event private data):
  cm_reject     {"port", "pd"}: listen; answer {"listening"}; reject the next connect request
                with private data "pd" (hex) [two answers: the second has the REQ's private data]
  cm_connect    {"port", "pd"}: connect to goroce (no QP: qp_num given in the conn param) with
                private data "pd"; answer the event (REJECTED: status and private data; or
                CONNECT_RESPONSE, then rdma_establish and ESTABLISHED)
  cm_accept     {"port"}: listen; answer {"listening"}; accept the next request (no QP) and
                wait for ESTABLISHED [two answers]
  cm_disconnect rdma_disconnect the connection; wait for DISCONNECTED
  cm_wait       {"event", "timeout"}: wait for that event on the connection; on DISCONNECTED,
                rdma_disconnect (which sends the DREP), as rdma_cm programs do
  bye           exit 0
"""
import ctypes, hashlib, json, os, select, socket, struct, sys, time

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 18518
DEV, GIDX = "rxe0", 1
GRH, SLOT = 40, 40 + 4096
KB64 = 64 << 10


def pattern(label, n):
    return hashlib.shake_128(label.encode()).digest(n)


def poll(cq, what, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        n, wcs = cq.poll()
        if n:
            return wcs[0]
        time.sleep(0.001)
    raise RuntimeError("%s: no completion in %ds" % (what, timeout))


# ---- librdmacm through ctypes ----

cm = ctypes.CDLL("librdmacm.so.1", use_errno=True)
RDMA_PS_TCP = 0x0106
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
for f in ("rdma_listen", "rdma_resolve_route", "rdma_disconnect", "rdma_destroy_id", "rdma_establish"):
    getattr(cm, f).argtypes = [ctypes.c_void_p] + ([ctypes.c_int] if f in ("rdma_listen", "rdma_resolve_route") else [])
cm.rdma_create_id.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int]
cm.rdma_bind_addr.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
cm.rdma_resolve_addr.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
cm.rdma_connect.argtypes = [ctypes.c_void_p, ctypes.POINTER(ConnParam)]
cm.rdma_accept.argtypes = [ctypes.c_void_p, ctypes.POINTER(ConnParam)]
cm.rdma_reject.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint8]


def check(ret, what):
    if ret != 0:
        raise RuntimeError("%s: %s" % (what, os.strerror(ctypes.get_errno())))


def sockaddr(ip, port):
    return ctypes.create_string_buffer(struct.pack("<H", socket.AF_INET) + struct.pack(">H", port) +
                                       socket.inet_aton(ip) + bytes(8), 16)


class CM:
    def __init__(self):
        self.ch = cm.rdma_create_event_channel()
        if not self.ch:
            raise RuntimeError("rdma_create_event_channel failed")
        self.fd = ctypes.cast(self.ch, ctypes.POINTER(ctypes.c_int))[0]  # struct rdma_event_channel { int fd; }
        self.ids = []

    def new_id(self):
        i = ctypes.c_void_p()
        check(cm.rdma_create_id(self.ch, ctypes.byref(i), None, RDMA_PS_TCP), "rdma_create_id")
        self.ids.append(i.value)
        return i.value

    def event(self, timeout=60):
        """Next event: (name, status, private data bytes, the event's cm_id)."""
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            raise RuntimeError("no rdma_cm event in %ds" % timeout)
        ev = ctypes.POINTER(Event)()
        check(cm.rdma_get_cm_event(self.ch, ctypes.byref(ev)), "rdma_get_cm_event")
        x = ev.contents
        name = EV[x.event] if x.event < len(EV) else str(x.event)
        pd = ctypes.string_at(x.conn.private_data, x.conn.private_data_len) if x.conn.private_data else b""
        out = (name, x.status, pd, x.id)
        cm.rdma_ack_cm_event(ev)
        return out

    def expect(self, want, timeout=60):
        name, status, pd, cid = self.event(timeout)
        if name != want:
            raise RuntimeError("rdma_cm event %s (status %d), want %s" % (name, status, want))
        return status, pd, cid

    def listen(self, port):
        lid = self.new_id()
        check(cm.rdma_bind_addr(lid, sockaddr("0.0.0.0", port)), "rdma_bind_addr")
        check(cm.rdma_listen(lid, 4), "rdma_listen")
        return lid

    def connect(self, addr, port, pd):
        cid = self.new_id()
        check(cm.rdma_resolve_addr(cid, None, sockaddr(addr, port), 5000), "rdma_resolve_addr")
        self.expect("ADDR_RESOLVED")
        check(cm.rdma_resolve_route(cid, 5000), "rdma_resolve_route")
        self.expect("ROUTE_RESOLVED")
        buf = ctypes.create_string_buffer(pd, max(len(pd), 1))
        p = param(buf, len(pd))
        check(cm.rdma_connect(cid, ctypes.byref(p)), "rdma_connect")
        return cid


def param(buf=None, n=0):
    # No QP on the cm_id: the REQ/REP carry this QPN (ucma_copy_conn_param_to_kern), a fresh one
    # each time: a REQ from a QPN whose last connection is still in time-wait is refused as stale.
    return ConnParam(private_data=ctypes.cast(buf, ctypes.c_void_p) if buf is not None else None,
                     private_data_len=n, responder_resources=1, initiator_depth=1, retry_count=7,
                     rnr_retry_count=7, qp_num=int.from_bytes(os.urandom(3), "big") | 1)


def main():
    ctx = d.Context(name=DEV)
    pd = PD(ctx)
    ucq, uscq, ccq, cscq = CQ(ctx, 64), CQ(ctx, 64), CQ(ctx, 64), CQ(ctx, 64)
    R = MR(pd, 8 * SLOT, e.IBV_ACCESS_LOCAL_WRITE)
    S = MR(pd, 8 * SLOT, e.IBV_ACCESS_LOCAL_WRITE)
    U = MR(pd, KB64, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
    active = ctx.query_port(1).active_mtu
    cms = CM()
    conn = {}
    udqp = ucqp = None
    ggid = None

    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", PORT))
    ls.listen(1)
    print("verbspeer: listening on %d" % PORT, flush=True)
    s, _ = ls.accept()
    f = s.makefile("rw")

    def answer(res):
        print("verbspeer: %s" % json.dumps(res), flush=True)
        f.write(json.dumps(res) + "\n")
        f.flush()

    while True:
        line = f.readline()
        if not line:
            sys.exit("verbspeer: goroce closed the connection")
        cmd = json.loads(line)
        c = cmd["cmd"]
        res = {"cmd": c, "ok": True}
        try:
            if c == "hello":
                ggid = cmd["gid"]
                res.update(gid=str(ctx.query_gid(1, GIDX)), mtu=active)
            elif c == "ud_setup":
                udqp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=uscq, rcq=ucq, cap=QPCap(16, 16, 1, 1)))
                a = QPAttr(port_num=1)
                a.qkey = cmd["qkey"]
                a.pkey_index = 0
                udqp.to_init(a)
                udqp.to_rtr(a)
                a.sq_psn = 0
                udqp.to_rts(a)
                for i in range(8):
                    udqp.post_recv(RecvWR(i, 1, [SGE(R.buf + i * SLOT, SLOT, R.lkey)]))
                res.update(qpn=udqp.qp_num, qkey=cmd["qkey"], qkey_viol_cntr=ctx.query_port(1).qkey_viol_cntr)
            elif c == "ud_send":
                gr = GlobalRoute(dgid=GID(ggid), sgid_index=GIDX, hop_limit=cmd.get("ttl", 64),
                                 traffic_class=cmd.get("tclass", 0))
                ah = AH(pd, attr=AHAttr(is_global=1, port_num=1, gr=gr))
                sts = []
                for k, m in enumerate(cmd["msgs"]):
                    S.write(pattern(m["label"], m["len"]), m["len"], k * SLOT)
                    wr = SendWR(wr_id=k, opcode=e.IBV_WR_SEND, num_sge=1,
                                sg=[SGE(S.buf + k * SLOT, m["len"], S.lkey)], send_flags=e.IBV_SEND_SIGNALED)
                    wr.set_wr_ud(ah, cmd["qpn"], cmd["qkey"])
                    udqp.post_send(wr)
                    sts.append(poll(uscq, "UD send %d" % k).status)
                res.update(ok=all(x == e.IBV_WC_SUCCESS for x in sts), status=sts)
            elif c == "ud_recv":
                got = []
                for m in cmd["labels"]:
                    wc = poll(ucq, "UD receive " + m["label"], cmd.get("timeout", 30))
                    k = wc.wr_id
                    data = R.read(m["len"], k * SLOT + GRH)
                    got.append({"status": wc.status, "byte_len": wc.byte_len, "src_qp": wc.src_qp,
                                "wc_flags": wc.wc_flags, "grh": R.read(GRH, k * SLOT).hex(),
                                "data_ok": data == pattern(m["label"], m["len"])})
                    udqp.post_recv(RecvWR(k, 1, [SGE(R.buf + k * SLOT, SLOT, R.lkey)]))
                res["recvs"] = got
            elif c == "ud_none":
                end, n = time.time() + cmd["secs"], 0
                while time.time() < end:
                    k, _ = ucq.poll()
                    n += k
                    time.sleep(0.01)
                res["completions"] = n
                res["qkey_viol_cntr"] = ctx.query_port(1).qkey_viol_cntr
            elif c == "uc_setup":
                ucqp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UC, scq=cscq, rcq=ccq, cap=QPCap(16, 16, 1, 1)))
                psn = int.from_bytes(os.urandom(3), "big")
                a = QPAttr(port_num=1, path_mtu=min(active, cmd["mtu"]))
                a.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
                ucqp.to_init(a)
                a.dest_qp_num, a.rq_psn, a.sq_psn = cmd["qpn"], cmd["psn"], psn
                a.ah_attr = AHAttr(is_global=1, port_num=1,
                                   gr=GlobalRoute(dgid=GID(ggid), sgid_index=GIDX, hop_limit=64))
                ucqp.to_rtr(a)
                ucqp.to_rts(a)
                U.write(bytes(KB64), KB64)
                for i in range(4):
                    ucqp.post_recv(RecvWR(100 + i, 1, [SGE(S.buf + i * SLOT, SLOT, S.lkey)]))
                res.update(qpn=ucqp.qp_num, psn=psn, addr=U.buf, rkey=U.rkey)
            elif c == "uc_write_imm":
                S.write(pattern(cmd["label"], cmd["len"]), cmd["len"], 4 * SLOT)
                wr = SendWR(wr_id=7, opcode=e.IBV_WR_RDMA_WRITE_WITH_IMM, num_sge=1,
                            sg=[SGE(S.buf + 4 * SLOT, cmd["len"], S.lkey)], send_flags=e.IBV_SEND_SIGNALED,
                            imm_data=socket.htonl(cmd["imm"]))
                wr.set_wr_rdma(cmd["rkey"], cmd["addr"])
                ucqp.post_send(wr)
                wc = poll(cscq, "UC WRITE WITH IMM")
                res.update(ok=wc.status == e.IBV_WC_SUCCESS, status=wc.status)
            elif c == "uc_check":
                wc = poll(ccq, "UC receive", cmd.get("timeout", 30))
                imm = socket.ntohl(wc.imm_data) if wc.wc_flags & e.IBV_WC_WITH_IMM else None
                data_ok = U.read(cmd["len"], cmd["off"]) == pattern(cmd["label"], cmd["len"])
                res.update(status=wc.status, opcode=wc.opcode, byte_len=wc.byte_len, imm=imm, data_ok=data_ok,
                           ok=(wc.status == e.IBV_WC_SUCCESS and wc.opcode == e.IBV_WC_RECV_RDMA_WITH_IMM and
                               imm == cmd["imm"] and wc.byte_len == cmd["len"] and data_ok))
            elif c == "cm_reject":
                lid = cms.listen(cmd["port"])
                answer({"cmd": c, "ok": True, "listening": True})
                _, reqpd, cid = cms.expect("CONNECT_REQUEST")
                pdb = bytes.fromhex(cmd["pd"])
                check(cm.rdma_reject(cid, pdb, len(pdb)), "rdma_reject")
                res.update(req_pd=reqpd.hex())
                cm.rdma_destroy_id(cid)
                cm.rdma_destroy_id(lid)
            elif c == "cm_connect":
                cid = cms.connect(cmd["addr"], cmd["port"], bytes.fromhex(cmd["pd"]))
                name, status, evpd, _ = cms.event()
                res.update(event=name, status=status, pd=evpd.hex())
                if name == "CONNECT_RESPONSE":
                    check(cm.rdma_establish(cid), "rdma_establish")
                    conn["id"] = cid
                    res["event"] = "ESTABLISHED"  # rdma_establish sent the RTU
                elif name == "REJECTED":
                    cm.rdma_destroy_id(cid)
            elif c == "cm_accept":
                lid = cms.listen(cmd["port"])
                answer({"cmd": c, "ok": True, "listening": True})
                _, reqpd, cid = cms.expect("CONNECT_REQUEST")
                p = param()
                check(cm.rdma_accept(cid, ctypes.byref(p)), "rdma_accept")
                cms.expect("ESTABLISHED")
                conn["id"], conn["listen"] = cid, lid
                res.update(req_pd=reqpd.hex())
            elif c == "cm_disconnect":
                t0 = time.time()
                check(cm.rdma_disconnect(conn["id"]), "rdma_disconnect")
                cms.expect("DISCONNECTED")
                res.update(secs=time.time() - t0)
            elif c == "cm_wait":
                t0 = time.time()
                name, status, _, _ = cms.event(cmd.get("timeout", 60))
                res.update(event=name, status=status, secs=time.time() - t0, ok=name == cmd["event"])
                if name == "DISCONNECTED" and "id" in conn:
                    # The kernel answers the peer's DREQ only when the consumer calls
                    # rdma_disconnect (ib_send_cm_dreq fails in DREQ_RCVD: ib_send_cm_drep).
                    check(cm.rdma_disconnect(conn["id"]), "rdma_disconnect")
            elif c == "bye":
                answer(res)
                print("verbspeer: bye", flush=True)
                return
            else:
                res.update(ok=False, errors=["unknown command"])
        except Exception as ex:  # report, keep serving
            res.update(ok=False, errors=[str(ex)])
        answer(res)


if __name__ == "__main__":
    main()
