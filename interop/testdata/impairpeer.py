#!/usr/bin/env python3
"""RC peer of goroce's impaired-data cells (pyverbs, runs in an rxe guest).

Fed on stdin by the suite:  rxe bg -i interop/testdata/impairpeer.py ip -- python3 - [PORT]
goroce's link loses and reorders packets both ways (link/impair); rxe has to repair what it
sends and what it receives with its own retransmissions. The suite drives one operation per
connection, both ways, and compares SHA-256 of the data on both sides.
Data patterns are SHAKE-128 of a label (both sides compute them):

  pattern(label, n) = hashlib.shake_128(label.encode()).digest(n)

Hello (goroce -> peer): {"seed": S, "gid": "...", "mtu": M, "op": "write|read|send", "len": N,
                          "count": K, "qp": {"qpn","psn"}, "mr": {"addr","rkey","len"}}
  For "send" the peer posts K receives of N/K bytes into P before it answers.
Answer: {"gid", "mtu", "qp": {"qpn","psn"}, "P": {"addr","rkey","len"}}
  P (N bytes) is what goroce WRITEs into, READs (pattern "P"+S) or SENDs into.
Commands:
  check  goroce is done with its operation on P: for "send" wait for the K receives and check
         their lengths; return sha256 of P
  run    the peer's operation on goroce's buffer: WRITE N bytes of pattern "L"+S into it, READ N
         bytes of it, or SEND them in K messages (goroce posted K receives); return sha256 of what
         it wrote, read or sent
  bye    exit 0
"""
import hashlib, json, os, socket, sys, time

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 18518
DEV, GIDX = "rxe0", 1
DEPTH = 256
ACC = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ)


def pattern(label, n):
    return hashlib.shake_128(label.encode()).digest(n)


def sha(b):
    return hashlib.sha256(b).hexdigest()


def poll_n(cq, n, what, timeout=120):
    """Wait for n successful completions; return them."""
    end, out = time.time() + timeout, []
    while len(out) < n:
        if time.time() > end:
            raise RuntimeError("%s: %d of %d completions in %ds" % (what, len(out), n, timeout))
        k, wcs = cq.poll(num_entries=min(16, n - len(out)))
        for wc in wcs[:k]:
            if wc.status != e.IBV_WC_SUCCESS:
                raise RuntimeError("%s: completion %d status %d" % (what, len(out), wc.status))
            out.append(wc)
    return out


def main():
    ctx = d.Context(name=DEV)
    pd = PD(ctx)
    scq, rcq = CQ(ctx, 2 * DEPTH), CQ(ctx, 2 * DEPTH)
    q = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=scq, rcq=rcq, cap=QPCap(DEPTH, DEPTH, 1, 1)))
    psn = int.from_bytes(os.urandom(3), "big")
    active = ctx.query_port(1).active_mtu
    attr = QPAttr(port_num=1, path_mtu=active)
    attr.qp_access_flags = ACC
    q.to_init(attr)

    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", PORT))
    ls.listen(1)
    print("impairpeer: listening on %d" % PORT, flush=True)
    s, _ = ls.accept()
    f = s.makefile("rw")
    hello = json.loads(f.readline())
    seed, op, n, count = hello["seed"], hello["op"], hello["len"], hello["count"]
    msg = n // count
    P, L = MR(pd, n, ACC), MR(pd, n, ACC)
    if op == "read":
        P.write(pattern("P" + seed, n), n)
    else:
        P.write(bytes(n), n)
    if op == "send":
        for i in range(count):
            q.post_recv(RecvWR(i, 1, [SGE(P.buf + i * msg, msg, P.lkey)]))
    mtu = min(active, hello["mtu"])
    a = QPAttr(port_num=1, path_mtu=mtu)
    a.qp_access_flags = ACC
    a.dest_qp_num, a.rq_psn, a.sq_psn = hello["qp"]["qpn"], hello["qp"]["psn"], psn
    a.max_dest_rd_atomic = a.max_rd_atomic = 16
    # As datapeer.py and perftest: 67 ms ACK timeout, 7 retries, RNR retry for ever.
    a.min_rnr_timer, a.timeout, a.retry_cnt, a.rnr_retry = 12, 14, 7, 7
    a.ah_attr = AHAttr(is_global=1, port_num=1,
                       gr=GlobalRoute(dgid=GID(hello["gid"]), sgid_index=GIDX, hop_limit=64))
    q.to_rtr(a)
    q.to_rts(a)
    out = {"gid": str(ctx.query_gid(1, GIDX)), "mtu": mtu, "qp": {"qpn": q.qp_num, "psn": psn},
           "P": {"addr": P.buf, "rkey": P.rkey, "len": P.length}}
    f.write(json.dumps(out) + "\n"); f.flush()
    print("impairpeer: connected, op %s, %d bytes in %d, mtu enum %d, seed %s" % (op, n, count, mtu, seed), flush=True)

    hm = hello["mr"]
    while True:
        line = f.readline()
        if not line:
            sys.exit("impairpeer: goroce closed the connection")
        cmd = json.loads(line)
        c = cmd["cmd"]
        res = {"cmd": c}
        try:
            if c == "check":
                errs = []
                if op == "send":
                    for wc in poll_n(rcq, count, "receives"):
                        if wc.opcode != e.IBV_WC_RECV or wc.byte_len != msg:
                            errs.append("receive %d: opcode %d len %d" % (wc.wr_id, wc.opcode, wc.byte_len))
                res.update(ok=not errs, errors=errs, sha=sha(P.read(n, 0)))
            elif c == "run":
                t0 = time.time()
                if op == "write":
                    L.write(pattern("L" + seed, n), n)
                elif op == "send":
                    L.write(pattern("LS" + seed, n), n)
                else:
                    L.write(bytes(n), n)
                wop = {"write": e.IBV_WR_RDMA_WRITE, "read": e.IBV_WR_RDMA_READ, "send": e.IBV_WR_SEND}[op]
                k = count if op == "send" else 8
                part = n // k
                posted = 0
                done = 0
                # Keep at most 16 outstanding (READ: max_rd_atomic).
                while done < k:
                    while posted < k and posted - done < 16:
                        wr = SendWR(wr_id=posted, opcode=wop, num_sge=1,
                                    sg=[SGE(L.buf + posted * part, part, L.lkey)], send_flags=e.IBV_SEND_SIGNALED)
                        if op != "send":
                            wr.set_wr_rdma(hm["rkey"], hm["addr"] + posted * part)
                        q.post_send(wr)
                        posted += 1
                    done += len(poll_n(scq, 1, "peer %s" % op))
                res.update(ok=True, sha=sha(L.read(n, 0)), seconds=time.time() - t0)
            elif c == "bye":
                res["ok"] = True
                f.write(json.dumps(res) + "\n"); f.flush()
                print("impairpeer: bye", flush=True)
                return
            else:
                res.update(ok=False, errors=["unknown command"])
        except Exception as ex:  # report, keep serving
            res.update(ok=False, errors=[str(ex)])
        print("impairpeer: %s" % json.dumps(res), flush=True)
        f.write(json.dumps(res) + "\n"); f.flush()


if __name__ == "__main__":
    main()
