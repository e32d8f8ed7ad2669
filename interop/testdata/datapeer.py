#!/usr/bin/env python3
"""Data-verifying RC peer for goroce's interop suite (pyverbs, runs in an rxe guest).

Fed on stdin by the suite:  rxe bg -i interop/testdata/datapeer.py dp -- python3 - [PORT]
It listens on TCP PORT (default 18517); goroce connects and drives, one JSON line per command,
one JSON line per answer. Data patterns are SHAKE-128 of a label (both sides compute them):

  pattern(label, n) = hashlib.shake_128(label.encode()).digest(n)

Hello (goroce -> peer): {"seed": S, "gid": "...", "mtu": M, "qps": [{"qpn","psn"} x 3],
                          "mr": {"addr","rkey","len"}, "word": {"addr","rkey"}}
Answer: {"gid", "mtu", "qps": [...], "A": {...}, "B": {...}, "T": {...}, "W": {..., "value"}}
  QP 0 carries the data tests, QP 1 and QP 2 the two wrong-rkey tests (they end in ERR);
  QP 3, 4 and 5 the memory-window and SEND WITH INVALIDATE tests (they end in ERR too);
  QP 6, 7 and 8 SEND to three goroce QPs that share one SRQ (srq_sends).
  A (4 MiB) receives goroce's WRITE; B (4 MiB, pattern "B"+S) is what goroce READs;
  T (64 KiB) receives goroce's WRITE WITH IMM; W is an 8-byte word for goroce's atomics.
Commands:
  check_in      goroce has WRITten A, READ B, SENT, SENT WITH IMM and WRITten WITH IMM into T:
                check the three receive completions and their data; return sha256 of A and B
  atomic_check  return W and whether it equals "want"
  guest_ops     do WRITE, READ, SEND, SEND WITH IMM, WRITE WITH IMM, FETCH_ADD, CMP_SWAP
                against goroce's buffer and word; return what was read and the atomics' results
  qp_state      return the state of QP "qp"
  bad_write     WRITE on QP 2 with goroce's "rkey" (a wrong one): return the completion status
  mw_bind       register M (MW_BIND), bind a type 2 MW on 8 KiB of it with a BIND_MW WR on QP 3,
                post a receive on QP 3 and QP 5; return the window and T's rkey (a user MR)
  mw_check      goroce WROTE "MW"+S through the window and sent a SEND WITH INVALIDATE of its
                rkey on QP 3: check the receive (IBV_WC_WITH_INV, the rkey, "MI"+S) and the data
  recv_status   poll one receive completion, any status; return it and QP "qp"'s state
  mw_guest_ops  on QP 4, through goroce's type 2 window "rkey" (zero-based, "len" bytes): WRITE,
                READ back, SEND WITH INVALIDATE of it, SEND WITH INVALIDATE of goroce's region
                "fr_rkey", then WRITE again with the window's rkey: return the statuses
  srq_sends     on each QP of "qps", "n" SENDs WITH IMM, posted round robin across the QPs
                before any is polled: message j of QP i is "lens"[(i+j) % len] bytes of
                pattern("Q<i>.<j>"+S), immediate i<<8|j; return when all completed
  bye           exit 0
"""
import hashlib, json, os, socket, sys, time

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.mr import MR, MW, MWBindInfo
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 18517
DEV, GIDX = "rxe0", 1
MB4, KB64 = 4 << 20, 64 << 10
SLOT = 8192  # receive slots in R
ACC = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ |
       e.IBV_ACCESS_REMOTE_ATOMIC)
W0 = 0x1122334455667788


def pattern(label, n):
    return hashlib.shake_128(label.encode()).digest(n)


def sha(b):
    return hashlib.sha256(b).hexdigest()


def poll(cq, what, timeout=60, want_ok=True):
    end = time.time() + timeout
    while time.time() < end:
        n, wcs = cq.poll()
        if n:
            wc = wcs[0]
            if want_ok and wc.status != e.IBV_WC_SUCCESS:
                raise RuntimeError("%s: completion status %d" % (what, wc.status))
            return wc
    raise RuntimeError("%s: no completion in %ds" % (what, timeout))


def main():
    ctx = d.Context(name=DEV)
    pd = PD(ctx)
    scq, rcq = CQ(ctx, 64), CQ(ctx, 64)
    A, B, T = MR(pd, MB4, ACC), MR(pd, MB4, ACC), MR(pd, KB64, ACC)
    W, R, L = MR(pd, 64, ACC), MR(pd, 8 * SLOT, ACC), MR(pd, MB4, ACC)
    A.write(bytes(MB4), MB4)
    W.write(W0.to_bytes(8, "little"), 8)
    qps = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=scq, rcq=rcq, cap=QPCap(32, 32, 1, 1)))
           for _ in range(9)]
    psns = [int.from_bytes(os.urandom(3), "big") for _ in qps]
    active = ctx.query_port(1).active_mtu
    attr = QPAttr(port_num=1, path_mtu=active)
    attr.qp_access_flags = ACC
    for q in qps:
        q.to_init(attr)
    for i in range(4):  # SEND, SEND WITH IMM, WRITE WITH IMM, spare
        qps[0].post_recv(RecvWR(i, 1, [SGE(R.buf + i * SLOT, SLOT, R.lkey)]))

    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", PORT))
    ls.listen(1)
    print("datapeer: listening on %d" % PORT, flush=True)
    s, _ = ls.accept()
    f = s.makefile("rw")
    hello = json.loads(f.readline())
    seed = hello["seed"]
    B.write(pattern("B" + seed, MB4), MB4)
    mtu = min(active, hello["mtu"])
    for i, q in enumerate(qps):
        a = QPAttr(port_num=1, path_mtu=mtu)
        a.qp_access_flags = ACC
        a.dest_qp_num, a.rq_psn, a.sq_psn = hello["qps"][i]["qpn"], hello["qps"][i]["psn"], psns[i]
        a.max_dest_rd_atomic = a.max_rd_atomic = 16
        a.min_rnr_timer, a.timeout, a.retry_cnt, a.rnr_retry = 12, 14, 7, 7
        a.ah_attr = AHAttr(is_global=1, port_num=1,
                           gr=GlobalRoute(dgid=GID(hello["gid"]), sgid_index=GIDX, hop_limit=64))
        q.to_rtr(a)
        q.to_rts(a)
    mr = lambda m: {"addr": m.buf, "rkey": m.rkey, "len": m.length}
    out = {"gid": str(ctx.query_gid(1, GIDX)), "mtu": mtu,
           "qps": [{"qpn": q.qp_num, "psn": p} for q, p in zip(qps, psns)],
           "A": mr(A), "B": mr(B), "T": mr(T), "W": dict(mr(W), value=W0)}
    f.write(json.dumps(out) + "\n"); f.flush()
    print("datapeer: connected, mtu enum %d, seed %s" % (mtu, seed), flush=True)

    hm, hw = hello["mr"], hello["word"]
    while True:
        line = f.readline()
        if not line:
            sys.exit("datapeer: goroce closed the connection")
        cmd = json.loads(line)
        c = cmd["cmd"]
        res = {"cmd": c}
        try:
            if c == "check_in":
                errs = []
                for exp in cmd["recvs"]:
                    wc = poll(rcq, "receive " + exp["label"])
                    want_op = e.IBV_WC_RECV_RDMA_WITH_IMM if exp["write"] else e.IBV_WC_RECV
                    imm = socket.ntohl(wc.imm_data) if wc.wc_flags & e.IBV_WC_WITH_IMM else None
                    if wc.opcode != want_op or wc.byte_len != exp["len"] or imm != exp["imm"]:
                        errs.append("%s: opcode %d len %d imm %s" % (exp["label"], wc.opcode, wc.byte_len, imm))
                        continue
                    if exp["write"]:
                        got = T.read(exp["len"], exp["off"])
                    else:
                        got = R.read(exp["len"], wc.wr_id * SLOT)
                    if got != pattern(exp["label"], exp["len"]):
                        errs.append("%s: data differs" % exp["label"])
                res.update(ok=not errs, errors=errs, sha_A=sha(A.read(MB4, 0)), sha_B=sha(B.read(MB4, 0)))
            elif c == "atomic_check":
                v = int.from_bytes(W.read(8, 0), "little")
                res.update(value=v, ok=v == cmd["want"])
            elif c == "guest_ops":
                q = qps[0]
                n = cmd["len"]
                ops = []
                # WRITE n bytes of "GA"+seed at goroce's buffer + 0
                L.write(pattern("GA" + seed, n), n)
                wr = SendWR(wr_id=1, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(L.buf, n, L.lkey)],
                            send_flags=e.IBV_SEND_SIGNALED)
                wr.set_wr_rdma(hm["rkey"], hm["addr"])
                q.post_send(wr); poll(scq, "guest WRITE")
                # READ n bytes at goroce's buffer + n (goroce filled it with "HB"+seed)
                wr = SendWR(wr_id=2, opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[SGE(L.buf, n, L.lkey)],
                            send_flags=e.IBV_SEND_SIGNALED)
                wr.set_wr_rdma(hm["rkey"], hm["addr"] + n)
                q.post_send(wr); poll(scq, "guest READ")
                res["sha_read"] = sha(L.read(n, 0))
                res["read_ok"] = L.read(n, 0) == pattern("HB" + seed, n)
                # SEND 3000, SEND WITH IMM 100, WRITE WITH IMM 8192 at goroce's buffer + 2n
                for label, op, ln, imm, off in (("GS" + seed, e.IBV_WR_SEND, 3000, None, None),
                                                 ("GSI" + seed, e.IBV_WR_SEND_WITH_IMM, 100, 0xDEADBEEF, None),
                                                 ("GWI" + seed, e.IBV_WR_RDMA_WRITE_WITH_IMM, 8192, 0x12345678, 2 * n)):
                    L.write(pattern(label, ln), ln)
                    kw = {}
                    if imm is not None:
                        kw["imm_data"] = socket.htonl(imm)
                    wr = SendWR(wr_id=3, opcode=op, num_sge=1, sg=[SGE(L.buf, ln, L.lkey)],
                                send_flags=e.IBV_SEND_SIGNALED, **kw)
                    if off is not None:
                        wr.set_wr_rdma(hm["rkey"], hm["addr"] + off)
                    q.post_send(wr); poll(scq, "guest " + label)
                # FETCH_ADD 7, then CMP_SWAP(orig+7 -> 0x99) on goroce's word
                wr = SendWR(wr_id=4, opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD, num_sge=1, sg=[SGE(L.buf, 8, L.lkey)],
                            send_flags=e.IBV_SEND_SIGNALED)
                wr.set_wr_atomic(hw["rkey"], hw["addr"], 7, 0)
                q.post_send(wr); poll(scq, "guest FETCH_ADD")
                fadd = int.from_bytes(L.read(8, 0), "little")
                wr = SendWR(wr_id=5, opcode=e.IBV_WR_ATOMIC_CMP_AND_SWP, num_sge=1, sg=[SGE(L.buf, 8, L.lkey)],
                            send_flags=e.IBV_SEND_SIGNALED)
                wr.set_wr_atomic(hw["rkey"], hw["addr"], (fadd + 7) & (2**64 - 1), 0x99)
                q.post_send(wr); poll(scq, "guest CMP_SWAP")
                cas = int.from_bytes(L.read(8, 0), "little")
                res.update(ok=res["read_ok"], fadd_orig=fadd, cas_orig=cas)
            elif c == "srq_sends":
                lens, n, k = cmd["lens"], cmd["n"], 0
                for j in range(n):
                    for i in cmd["qps"]:
                        label, ln = "Q%d.%d" % (i, j) + seed, lens[(i + j) % len(lens)]
                        L.write(pattern(label, ln), ln, k * SLOT)
                        wr = SendWR(wr_id=100 + k, opcode=e.IBV_WR_SEND_WITH_IMM, num_sge=1,
                                    sg=[SGE(L.buf + k * SLOT, ln, L.lkey)], send_flags=e.IBV_SEND_SIGNALED,
                                    imm_data=socket.htonl(i << 8 | j))
                        qps[i].post_send(wr)
                        k += 1
                for m in range(k):
                    poll(scq, "guest SRQ SEND %d" % m)
                res.update(ok=True, sent=k)
            elif c == "qp_state":
                st = qps[cmd["qp"]].query(e.IBV_QP_STATE)[0].qp_state
                res.update(state=st, ok=True)
            elif c == "bad_write":
                L.write(pattern("bad", 64), 64)
                wr = SendWR(wr_id=6, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(L.buf, 64, L.lkey)],
                            send_flags=e.IBV_SEND_SIGNALED)
                wr.set_wr_rdma(cmd["rkey"], hm["addr"])
                qps[2].post_send(wr)
                wc = poll(scq, "guest bad WRITE", want_ok=False)
                st = qps[2].query(e.IBV_QP_STATE)[0].qp_state
                res.update(status=wc.status, state=st, ok=wc.status == e.IBV_WC_REM_ACCESS_ERR)
            elif c == "mw_bind":
                M = MR(pd, KB64, ACC | e.IBV_ACCESS_MW_BIND)
                M.write(bytes(KB64), KB64)
                mw = MW(pd, e.IBV_MW_TYPE_2)
                waddr = M.buf + 4096
                info = MWBindInfo(M, waddr, 8192, e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ)
                wr = SendWR(wr_id=7, opcode=e.IBV_WR_BIND_MW, num_sge=0, send_flags=e.IBV_SEND_SIGNALED)
                wr.set_bind_wr(mw, info)
                qps[3].post_send(wr)
                wc = poll(scq, "guest BIND_MW")
                mwkey = wr.rkey
                qps[3].post_recv(RecvWR(4, 1, [SGE(R.buf + 4 * SLOT, SLOT, R.lkey)]))
                qps[5].post_recv(RecvWR(5, 1, [SGE(R.buf + 5 * SLOT, SLOT, R.lkey)]))
                res.update(ok=wc.opcode == e.IBV_WC_BIND_MW, addr=waddr, rkey=mwkey, mr_rkey=M.rkey,
                           t_rkey=T.rkey, opcode=wc.opcode)
            elif c == "mw_check":
                wc = poll(rcq, "receive of the SEND WITH INVALIDATE", want_ok=False)
                errs = []
                # rxe copies the kernel's IB_WC_WITH_INVALIDATE (1 << 2) into the user CQE
                # (rxe_resp.c do_complete, uwc->wc_flags), where libibverbs reads it as
                # IBV_WC_IP_CSUM_OK; IBV_WC_WITH_INV is 1 << 3. Accept either.
                inv = (wc.wc_flags & (e.IBV_WC_WITH_INV | 4)) != 0
                if wc.status != e.IBV_WC_SUCCESS or not inv or wc.imm_data != mwkey or wc.byte_len != 100:
                    errs.append("receive: status %d flags %#x key %#x (window %#x) len %d" %
                                (wc.status, wc.wc_flags, wc.imm_data, mwkey, wc.byte_len))
                elif R.read(100, 4 * SLOT) != pattern("MI" + seed, 100):
                    errs.append("SEND WITH INVALIDATE data differ")
                if M.read(8192, 4096) != pattern("MW" + seed, 8192):
                    errs.append("the WRITE through the window differs")
                res.update(ok=not errs, errors=errs, flags=wc.wc_flags, key=wc.imm_data)
            elif c == "recv_status":
                wc = poll(rcq, "receive", want_ok=False)
                st = qps[cmd["qp"]].query(e.IBV_QP_STATE)[0].qp_state
                res.update(ok=True, status=wc.status, flags=wc.wc_flags, key=wc.imm_data, state=st)
            elif c == "mw_guest_ops":
                q, n, key = qps[4], cmd["len"], cmd["rkey"]
                st = {}
                L.write(pattern("GMW" + seed, n), n)
                wr = SendWR(wr_id=11, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(L.buf, n, L.lkey)],
                            send_flags=e.IBV_SEND_SIGNALED)
                wr.set_wr_rdma(key, 0)  # zero-based window
                q.post_send(wr); poll(scq, "guest WRITE through goroce's window")
                wr = SendWR(wr_id=12, opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[SGE(L.buf + n, n, L.lkey)],
                            send_flags=e.IBV_SEND_SIGNALED)
                wr.set_wr_rdma(key, 0)
                q.post_send(wr); poll(scq, "guest READ through goroce's window")
                st["read_ok"] = L.read(n, n) == pattern("GMW" + seed, n)
                # SEND WITH INVALIDATE: ibv_send_wr keeps invalidate_rkey in a union
                # with imm_data, which is all pyverbs' SendWR exposes.
                for label, ln, k in (("GMI" + seed, 100, key), ("GFI" + seed, 50, cmd["fr_rkey"])):
                    L.write(pattern(label, ln), ln)
                    wr = SendWR(wr_id=13, opcode=e.IBV_WR_SEND_WITH_INV, num_sge=1, sg=[SGE(L.buf, ln, L.lkey)],
                                send_flags=e.IBV_SEND_SIGNALED, imm_data=k)
                    q.post_send(wr); poll(scq, "guest SEND WITH INVALIDATE " + label)
                L.write(pattern("late", 64), 64)
                wr = SendWR(wr_id=14, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(L.buf, 64, L.lkey)],
                            send_flags=e.IBV_SEND_SIGNALED)
                wr.set_wr_rdma(key, 0)
                q.post_send(wr)
                wc = poll(scq, "guest WRITE through the invalidated window", want_ok=False)
                st["late_status"] = wc.status
                res.update(st, ok=st["read_ok"] and wc.status == e.IBV_WC_REM_ACCESS_ERR)
            elif c == "bye":
                res["ok"] = True
                f.write(json.dumps(res) + "\n"); f.flush()
                print("datapeer: bye", flush=True)
                return
            else:
                res.update(ok=False, errors=["unknown command"])
        except Exception as ex:  # report, keep serving
            res.update(ok=False, errors=[str(ex)])
        print("datapeer: %s" % json.dumps(res), flush=True)
        f.write(json.dumps(res) + "\n"); f.flush()


if __name__ == "__main__":
    main()
