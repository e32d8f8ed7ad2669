#!/usr/bin/env python3
"""A rank of a goroce collective job on another verbs stack (pyverbs, in an rxe guest).

Fed on stdin by the suite:  rxe bg -i interop/testdata/collpeer.py cp -- python3 - ARGS
It speaks doc/coll.md: the rendezvous and control plane of §2 over TCP to rank 0 (hello,
table, QPs, route, ready, go, bye, abort), and the data plane of §3 over its own RC QPs, Channels
connections of QPsPerConn QPs to every other rank: a FIFO the peers write their clear-to-sends
into, clear-to-send WRITEs into theirs, data by RDMA WRITE WITH IMMEDIATE (round robin or split
over a connection's QPs), receives kept posted. It runs the ring programs of §4 for all_reduce
(float32 sum) and all_gather, with the inputs of goroce's internal/collcheck (every element a
function of rank, seed and index whose sums are exact in any order), and counts #wrong as
nccl-tests does: elements of the output that differ in any bit from the expected value.

Arguments:
  --rdzv HOST:PORT    rank 0's rendezvous        --rank R --size N --job ID
  --addr A            this rank's data-plane address (its RoCEv2 GID is ::ffff:A)
  --channels C --qps Q --steps S --chunk BYTES [--split] [--order r0,r1,...]
  --mtu M             the RoCE path MTU in bytes (1024 or 4096); must be the port's active MTU
  --plan K:COUNT:SEED,...   the calls, in order: K is all_reduce or all_gather, COUNT the
                      elements per rank (float32), SEED the check data's seed
  --timeout SECS      the rendezvous's and every call's time without progress (default 60)

Output: one line per call, then "collpeer: result {JSON}": the calls with their #wrong,
the rxe device's hw_counters before and after, this rank's QPs. Exit status 0 when every call
ran (whatever its #wrong: the suite judges), 1 on any failure, which it also reports to rank 0
as an abort frame so that the goroce ranks learn it at once.
"""
import argparse, json, operator, os, select, socket, struct, sys, time
from array import array

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

DEV, GIDX, PORT = "rxe0", 1, 1
COUNTERS = "/sys/class/infiniband/%s/ports/%d/hw_counters" % (DEV, PORT)

# ---- doc/coll.md §2: rendezvous frames (big-endian) ----

MAGIC, VERSION = b"GRCL", 1
HELLO, TABLE, QPS, ROUTE, READY, GO, BYE, ABORT, REFUSE = range(1, 10)
MAX_PAYLOAD, MAX_STRING = 64 << 20, 1024


class Failure(Exception):
    pass


def pstr(s):
    b = s.encode()[:MAX_STRING]
    return struct.pack(">H", len(b)) + b


def paddr(ip, port):
    return bytes(10) + b"\xff\xff" + socket.inet_aton(ip) + struct.pack(">H", port)


class Reader:
    def __init__(self, b):
        self.b, self.off = b, 0

    def take(self, n):
        if self.off + n > len(self.b):
            raise Failure("malformed frame: truncated payload")
        v = self.b[self.off:self.off + n]
        self.off += n
        return v

    def u8(self):
        return self.take(1)[0]

    def u16(self):
        return struct.unpack(">H", self.take(2))[0]

    def u32(self):
        return struct.unpack(">I", self.take(4))[0]

    def u64(self):
        return struct.unpack(">Q", self.take(8))[0]

    def str(self):
        n = self.u16()
        if n > MAX_STRING:
            raise Failure("malformed frame: %d-byte string" % n)
        return self.take(n).decode(errors="replace")

    def addr(self):
        a = self.take(16)
        port = self.u16()
        if a[:12] != bytes(10) + b"\xff\xff":
            raise Failure("an IPv6 data-plane address: this participant speaks IPv4 only")
        return socket.inet_ntoa(a[12:]), port

    def done(self):
        if self.off != len(self.b):
            raise Failure("malformed frame: %d trailing bytes" % (len(self.b) - self.off))


class Hello:
    """One rank's hello (doc/coll.md §2), as sent and as repeated in rank 0's table."""

    def encode(self):
        return (pstr(self.job) + struct.pack(">IIII", self.size, self.rank, self.local_rank, self.pid) +
                pstr(self.host) + paddr(self.ip, self.port) + struct.pack(">QI", self.fifo_va, self.fifo_rkey) +
                struct.pack(">HHHI", *self.shape[:4]) + bytes([self.shape[4]]) + struct.pack(">I", self.shape[5]))

    @staticmethod
    def read(r):
        h = Hello()
        h.job = r.str()
        h.size, h.rank, h.local_rank, h.pid = r.u32(), r.u32(), r.u32(), r.u32()
        h.host = r.str()
        h.ip, h.port = r.addr()
        h.fifo_va, h.fifo_rkey = r.u64(), r.u32()
        ch, q, st, ck = r.u16(), r.u16(), r.u16(), r.u32()
        split = r.u8()
        if split > 1:
            raise Failure("malformed frame: split flag %d" % split)
        h.shape = (ch, q, st, ck, split, r.u32())
        return h


def gid_of(ip):
    """The RoCEv2 GID of an IPv4 address, ::ffff:a.b.c.d, in the 8-group form pyverbs parses."""
    b = bytes(10) + b"\xff\xff" + socket.inet_aton(ip)
    return ":".join(b[i:i + 2].hex() for i in range(0, 16, 2))


def fnv1a32(b):
    h = 0x811C9DC5
    for c in b:
        h = ((h ^ c) * 0x01000193) & 0xFFFFFFFF
    return h


class Control:
    """The TCP connection to rank 0: the rendezvous, then the control plane."""

    def __init__(self, addr, deadline):
        host, port = addr.rsplit(":", 1)
        wait = 0.01
        while True:
            try:
                self.s = socket.create_connection((host, int(port)), timeout=5)
                break
            except OSError as ex:
                if time.time() + wait > deadline:
                    raise Failure("rank 0 did not serve the rendezvous at %s: %s" % (addr, ex))
                time.sleep(wait)
                wait = min(2 * wait, 0.25)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.eof = False

    def send(self, typ, payload=b""):
        self.s.settimeout(10)
        self.s.sendall(MAGIC + bytes([VERSION, typ, 0, 0]) + struct.pack(">I", len(payload)) + payload)

    def _exact(self, n):
        b = b""
        while len(b) < n:
            x = self.s.recv(n - len(b))
            if not x:
                self.eof = True
                raise Failure("rank 0 closed the control connection")
            b += x
        return b

    def read(self, timeout):
        self.s.settimeout(max(timeout, 0.001))
        try:
            h = self._exact(12)
            if h[:4] != MAGIC or h[4] != VERSION or not HELLO <= h[5] <= REFUSE:
                raise Failure("malformed frame header %s" % h.hex())
            n = struct.unpack(">I", h[8:])[0]
            if n > MAX_PAYLOAD:
                raise Failure("malformed frame: %d-byte payload" % n)
            return h[5], self._exact(n)
        except socket.timeout:
            raise Failure("rank 0 sent nothing for %.0f s" % timeout)

    def expect(self, want, stage, timeout):
        typ, p = self.read(timeout)
        if typ == want:
            return p
        if typ == REFUSE:
            r = Reader(p)
            raise Failure("rank 0 ended the %s: %s" % (stage, r.str()))
        if typ == ABORT:
            raise Failure("the job failed during the %s: %s" % (stage, abort_text(p)))
        raise Failure("frame type %d during the %s, want %d" % (typ, stage, want))

    def poll(self, timeout):
        """Between data-plane steps: an abort relayed by rank 0, or its end, fails this rank."""
        r, _, _ = select.select([self.s], [], [], timeout)
        if not r:
            return
        typ, p = self.read(1)
        if typ == ABORT:
            raise Failure("the job failed: %s" % abort_text(p))
        raise Failure("frame type %d from rank 0 during a collective" % typ)

    def abort(self, rank, reason):
        try:
            self.send(ABORT, struct.pack(">II", rank, rank) + pstr(reason))
        except OSError:
            pass


def abort_text(p):
    r = Reader(p)
    rank, reporter = r.u32(), r.u32()
    return "rank %d failed (reported by rank %d): %s" % (rank, reporter, r.str())


# ---- internal/collcheck: inputs from (rank, seed, index), exact in any order ----

M64 = (1 << 64) - 1


def mix(x):  # splitmix64's finaliser
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def values(nranks, inputs, count):
    """collcheck.Value(Float32, Sum, nranks, rank, seed, i) for i < count, for each (rank, seed)
    of inputs: integers in [-m, m], m = min(2^24 / nranks, 100). The index's hash is shared by
    the inputs, and the second hash inline (this runs under emulation)."""
    m = min(max(1, (1 << 24) // nranks), 100)
    w = 2 * m + 1
    keys = [seed ^ mix(r + 1) for r, seed in inputs]
    out = [[0] * count for _ in inputs]
    for i in range(count):
        mi = mix(((i << 20) & M64) ^ 0x5BD1E995)
        for j, k in enumerate(keys):
            x = ((k ^ mi) + 0x9E3779B97F4A7C15) & M64
            x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
            x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
            out[j][i] = (x ^ (x >> 31)) % w - m
    return out


def f32(vals):
    return array("f", vals).tobytes()


def wrong(got, want, esz=4):
    """collcheck.Wrong: elements that differ in any bit."""
    n = sum(1 for i in range(0, min(len(got), len(want)) - esz + 1, esz) if got[i:i + esz] != want[i:i + esz])
    return n + abs(len(got) - len(want)) // esz


def reduce_sum(a, b):
    x, y = array("f"), array("f")
    x.frombytes(a)
    y.frombytes(b)
    # float64 sums rounded to float32 are float32's correctly rounded sums.
    return array("f", map(operator.add, x, y)).tobytes()


# ---- doc/coll.md §3: connections ----

CTS = 32  # a FIFO element: addr u64, rkey u32, size u32, seq u64, reserved u64, little-endian
K_DATA, K_CTS, K_RECV = 1, 2, 3
SPLIT_ALIGN = 128
MIN_CHANNEL_BYTES = 32 << 10


def ceil_div(a, b):
    return -(-a // b)


def wrid(kind, conn, low):
    return kind << 62 | conn << 40 | (low & ((1 << 40) - 1))


class Conn:
    """This rank and one peer on one channel: QPsPerConn RC QPs, both directions."""

    def __init__(self, job, peer, ch, h):
        self.job, self.peer, self.ch = job, peer, ch
        S = job.steps
        self.idx = peer * job.channels + ch
        self.ip = h.ip
        self.qps, self.peer_qpn, self.peer_psn, self.psn = [], [None] * job.nqp, [0] * job.nqp, []
        self.out = []  # signalled WRs outstanding per QP
        self.qpi = {}  # QPN -> index
        # The peer's FIFO elements for this rank's clear-to-sends, and this rank's for the peer's.
        self.rem_fifo = h.fifo_va + (job.rank * job.channels + ch) * S * CTS
        self.rem_rkey = h.fifo_rkey
        self.fifo_off = self.idx * S * CTS
        self.cts_off = self.idx * S * CTS
        self.tx_mr = self.rx_mr = None
        self.tx_produced = self.tx_posted = self.tx_done = 0
        self.tx_len, self.tx_pend = [0] * S, [0] * S
        self.rx_consumed = self.rx_cts = 0
        self.rx_parts, self.rx_len = [0] * S, [0] * S
        self.sent = self.received = 0

    def connect(self):
        j = self.job
        for i, q in enumerate(self.qps):
            a = QPAttr(port_num=PORT, path_mtu=j.mtu_enum)
            a.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
            a.pkey_index = 0
            q.to_init(a)
            a.dest_qp_num, a.rq_psn, a.sq_psn = self.peer_qpn[i], self.peer_psn[i], self.psn[i]
            a.max_dest_rd_atomic, a.max_rd_atomic = 1, 1
            a.min_rnr_timer, a.timeout, a.retry_cnt, a.rnr_retry = 12, 14, 7, 7
            a.ah_attr = AHAttr(is_global=1, port_num=PORT,
                               gr=GlobalRoute(dgid=GID(gid_of(self.ip)), sgid_index=GIDX, hop_limit=64))
            q.to_rtr(a)
            q.to_rts(a)
            for _ in range(j.per_qp):
                q.post_recv(self.job.recv_wr(self.idx, i))

    def ensure_tx(self):
        if self.tx_mr is None:
            self.tx_mr = MR(self.job.pd, self.job.steps * self.job.chunk, e.IBV_ACCESS_LOCAL_WRITE)

    def ensure_rx(self):
        if self.rx_mr is None:
            self.rx_mr = MR(self.job.pd, self.job.steps * self.job.chunk,
                            e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)

    def tx_free(self):
        return self.tx_produced - self.tx_done < self.job.steps

    def rx_ready(self):
        return self.rx_consumed < self.rx_cts and self.rx_parts[self.rx_consumed % self.job.steps] == self.job.parts

    def rx_take(self, n):
        s = self.rx_consumed % self.job.steps
        if self.rx_len[s] != n:
            raise Failure("rank %d sent %d bytes as message %d on channel %d, this rank expected %d" %
                          (self.peer, self.rx_len[s], self.rx_consumed + 1, self.ch, n))
        return self.rx_mr.read(n, s * self.job.chunk) if n else b""

    def consume(self):
        s = self.rx_consumed % self.job.steps
        self.rx_parts[s] = self.rx_len[s] = 0
        self.rx_consumed += 1
        self.received += 1

    def stage(self, val):
        s = self.tx_produced % self.job.steps
        if val:
            self.tx_mr.write(val, len(val), s * self.job.chunk)
        self.tx_len[s] = len(val)
        self.tx_produced += 1

    def post(self, qi, wr):
        q = self.qps[qi]
        q.post_send(wr)
        self.out[qi] += 1

    def post_cts(self):
        """Offer every free slot at once (any policy works for the sender, doc/coll.md §3.2):
        one WRITE per run of consecutive elements that does not wrap past the FIFO's end."""
        j, S = self.job, self.job.steps
        moved = False
        while self.rx_cts < self.rx_consumed + S:
            if self.out[0] >= j.max_send_wr:
                return moved
            s, run, el = self.rx_cts % S, 0, b""
            while self.rx_cts < self.rx_consumed + S and (run == 0 or self.rx_cts % S != 0):
                t = self.rx_cts % S
                el += struct.pack("<QIIQQ", self.rx_mr.buf + t * j.chunk, self.rx_mr.rkey, j.chunk, self.rx_cts + 1, 0)
                self.rx_cts += 1
                run += 1
            j.cts_mr.write(el, len(el), self.cts_off + s * CTS)
            wr = SendWR(wr_id=wrid(K_CTS, self.idx, self.rx_cts - 1), opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                        sg=[SGE(j.cts_mr.buf + self.cts_off + s * CTS, len(el), j.cts_mr.lkey)],
                        send_flags=e.IBV_SEND_SIGNALED)
            wr.set_wr_rdma(self.rem_rkey, self.rem_fifo + s * CTS)
            self.post(0, wr)
            j.stats["cts_writes"] += 1
            moved = True
        return moved

    def try_post(self):
        """Post the staged messages whose clear-to-send is in the FIFO, in order."""
        j, S = self.job, self.job.steps
        moved = False
        while self.tx_posted < self.tx_produced:
            s = self.tx_posted % S
            seq = self.tx_posted + 1
            # seq first: an element is whole once its seq, written last, matches (doc/coll.md §3.2).
            if struct.unpack("<Q", j.fifo.read(8, self.fifo_off + s * CTS + 16))[0] != seq:
                return moved  # not offered yet
            addr, rkey, room = struct.unpack("<QII", j.fifo.read(16, self.fifo_off + s * CTS))
            n = self.tx_len[s]
            if n > room:
                raise Failure("rank %d offered %d bytes for message %d on channel %d, this rank sends %d" %
                              (self.peer, room, seq, self.ch, n))
            if j.parts == 1:
                parts = [((seq - 1) % j.nqp, 0, n)]
            else:
                p = ceil_div(ceil_div(n, j.parts), SPLIT_ALIGN) * SPLIT_ALIGN
                parts = [(i, min(i * p, n), min((i + 1) * p, n)) for i in range(j.parts)]
            if any(self.out[qi] >= j.max_send_wr for qi, _, _ in parts):
                return moved
            off = s * j.chunk
            for qi, lo, hi in parts:
                # pyverbs wants an SGE in every WR: an empty part has one of length 0.
                wr = SendWR(wr_id=wrid(K_DATA, self.idx, seq - 1), opcode=e.IBV_WR_RDMA_WRITE_WITH_IMM, num_sge=1,
                            sg=[SGE(self.tx_mr.buf + off + lo, hi - lo, self.tx_mr.lkey)], send_flags=e.IBV_SEND_SIGNALED,
                            imm_data=socket.htonl(seq & 0xFFFFFFFF))
                wr.set_wr_rdma(rkey, addr + lo)
                self.post(qi, wr)
                j.stats["data_writes"] += 1
                if hi == lo:
                    j.stats["empty_parts"] += 1
            self.tx_pend[s] = j.parts
            self.tx_posted += 1
            self.sent += 1
            moved = True
        return moved

    def on_recv(self, qi, wc):
        j = self.job
        if wc.opcode != e.IBV_WC_RECV_RDMA_WITH_IMM or not wc.wc_flags & e.IBV_WC_WITH_IMM:
            raise Failure("rank %d: receive completion opcode %d flags %#x on channel %d, want RECV_RDMA_WITH_IMM" %
                          (self.peer, wc.opcode, wc.wc_flags, self.ch))
        imm = socket.ntohl(wc.imm_data)
        # The full sequence number: the one in the window of offered slots whose low 32 bits are imm.
        k = self.rx_consumed + (((imm - 1) - self.rx_consumed) & 0xFFFFFFFF)
        if k >= self.rx_cts:
            raise Failure("rank %d wrote message %d on channel %d, this rank offered %d ... %d" %
                          (self.peer, imm, self.ch, self.rx_consumed + 1, self.rx_cts))
        s = k % j.steps
        self.rx_parts[s] += 1
        self.rx_len[s] += wc.byte_len
        if self.rx_parts[s] > j.parts:
            raise Failure("rank %d sent %d parts of message %d on channel %d" % (self.peer, self.rx_parts[s], k + 1, self.ch))
        self.qps[qi].post_recv(self.job.recv_wr(self.idx, qi))

    def on_send(self, k):
        S = self.job.steps
        s = k % S
        if self.tx_pend[s] > 0:
            self.tx_pend[s] -= 1
        while self.tx_done < self.tx_posted and self.tx_pend[self.tx_done % S] == 0:
            self.tx_done += 1


# ---- doc/coll.md §4: the ring programs ----

class Op:
    """One step: reduce the messages from rx with the input at src (or copy the one there is),
    write it to the output at dst, send it to tx. Offsets and n in bytes; -1 for none."""
    __slots__ = ("n", "src", "dst", "rx", "tx")

    def __init__(self, n, src, dst, rx, tx):
        self.n, self.src, self.dst, self.rx, self.tx = n, src, dst, rx, tx


class Job:
    def __init__(self, a):
        self.a = a
        self.rank, self.size = a.rank, a.size
        self.channels, self.nqp, self.steps, self.chunk = a.channels, a.qps, a.steps, a.chunk
        self.split = 1 if a.split else 0
        self.parts = self.nqp if a.split else 1
        self.per_qp = 2 * self.steps + 2  # receives kept posted per QP, as goroce
        self.max_send_wr = 4 * self.steps + 16
        self.ring = [int(x) for x in a.order.split(",")] if a.order else list(range(self.size))
        if sorted(self.ring) != list(range(self.size)):
            raise Failure("--order %s is not a permutation of 0 ... %d" % (a.order, self.size - 1))
        self.pos = self.ring.index(self.rank)
        order = "".join("%d," % r for r in self.ring).encode() if a.order else b""
        self.shape = (self.channels, self.nqp, self.steps, self.chunk, self.split, fnv1a32(order))
        self.stats = {"data_writes": 0, "cts_writes": 0, "empty_parts": 0, "recv_completions": 0}

    # -- setup --

    def open(self):
        self.ctx = d.Context(name=DEV)
        self.pd = PD(self.ctx)
        gid = str(self.ctx.query_gid(PORT, GIDX))
        if gid != gid_of(self.a.addr):
            raise Failure("rxe0's GID %d is %s, not the RoCEv2 GID of --addr %s" % (GIDX, gid, self.a.addr))
        port = self.ctx.query_port(PORT)
        self.mtu_enum = port.active_mtu
        if 128 << self.mtu_enum != self.a.mtu:
            raise Failure("rxe0's active MTU is %d bytes, the job wants %d" % (128 << self.mtu_enum, self.a.mtu))
        nconn = self.size * self.channels
        self.fifo = MR(self.pd, nconn * self.steps * CTS, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
        self.fifo.write(bytes(nconn * self.steps * CTS), nconn * self.steps * CTS, 0)
        self.cts_mr = MR(self.pd, nconn * self.steps * CTS, e.IBV_ACCESS_LOCAL_WRITE)
        nq = (self.size - 1) * self.channels * self.nqp
        self.rcq = CQ(self.ctx, nq * self.per_qp + 64)
        self.scq = CQ(self.ctx, nq * self.max_send_wr + 64)

    def join(self):
        a = self.a
        deadline = time.time() + a.timeout
        self.ctl = Control(a.rdzv, deadline)
        me = Hello()
        me.job, me.size, me.rank, me.local_rank, me.pid = a.job, self.size, self.rank, 0, os.getpid()
        me.host, me.ip, me.port = socket.gethostname(), a.addr, 4791
        me.fifo_va, me.fifo_rkey, me.shape = self.fifo.buf, self.fifo.rkey, self.shape
        self.ctl.send(HELLO, me.encode())
        r = Reader(self.ctl.expect(TABLE, "rendezvous", a.timeout + 2))
        n = r.u32()
        table = []
        for i in range(n):
            h = Hello.read(r)
            if h.rank != i:
                raise Failure("malformed table: entry %d is rank %d" % (i, h.rank))
            table.append(h)
        r.done()
        if n != self.size or table[self.rank].pid != me.pid or table[self.rank].ip != me.ip:
            raise Failure("the table of %d ranks does not hold this rank as it said hello" % n)
        for h in table:
            if h.shape != self.shape:
                raise Failure("rank %d has shape %s, this rank %s" % (h.rank, h.shape, self.shape))
        self.table = table

        # QPs per peer, channel and index; their numbers to rank 0; the peers' back.
        self.conns = [None] * (self.size * self.channels)
        mine = []
        for p in range(self.size):
            if p == self.rank:
                continue
            for ch in range(self.channels):
                cn = Conn(self, p, ch, table[p])
                for i in range(self.nqp):
                    q = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.scq, rcq=self.rcq,
                                               cap=QPCap(self.max_send_wr, self.per_qp, 1, 1)))
                    psn = int.from_bytes(os.urandom(3), "big")
                    cn.qps.append(q)
                    cn.psn.append(psn)
                    cn.out.append(0)
                    cn.qpi[q.qp_num] = i
                    mine.append(struct.pack(">IHHII", p, ch, i, q.qp_num, psn))
                self.conns[cn.idx] = cn
        self.ctl.send(QPS, struct.pack(">I", len(mine)) + b"".join(mine))
        r = Reader(self.ctl.expect(ROUTE, "connection exchange", a.timeout + 2))
        n = r.u32()
        for _ in range(n):
            peer, ch, i, qpn, psn = r.u32(), r.u16(), r.u16(), r.u32(), r.u32()
            if peer >= self.size or peer == self.rank or ch >= self.channels or i >= self.nqp or not 0 < qpn <= 0xFFFFFF:
                raise Failure("rank 0 routed QP %s" % ((peer, ch, i, qpn, psn),))
            cn = self.conns[peer * self.channels + ch]
            if cn.peer_qpn[i] is not None:
                raise Failure("rank 0 routed QP %s twice" % ((peer, ch, i),))
            cn.peer_qpn[i], cn.peer_psn[i] = qpn, psn
        r.done()
        if n != len(mine):
            raise Failure("rank 0 routed %d QPs, want %d" % (n, len(mine)))
        for cn in self.conns:
            if cn:
                cn.connect()
        self.ctl.send(READY)
        self.ctl.expect(GO, "connection barrier", a.timeout + 2)

    # -- programs --

    def recv_wr(self, conn, qi):
        """A receive for a WRITE WITH IMMEDIATE, which places no data through it: one empty SGE
        (pyverbs wants one)."""
        return RecvWR(wrid(K_RECV, conn, qi), 1, [SGE(self.cts_mr.buf, 0, self.cts_mr.lkey)])

    def conn_at(self, p, ch):
        n = self.size
        return self.conns[self.ring[p % n] * self.channels + ch]

    def build(self, kind, count):
        esz = 4
        n = self.size
        sl = max(1, self.chunk // esz)
        depth = max(1, self.steps // 2)
        total = count * esz * (n if kind == "all_gather" else 1)
        nch = max(1, min(self.channels, total // MIN_CHANNEL_BYTES))
        progs = []
        for ch in range(nch):
            lo, hi = count * ch // nch, count * (ch + 1) // nch
            ops = []

            def step(start, k, f):  # one op per message-sized piece; empty pieces are no op
                for o in range(start, start + k, sl):
                    m = min(sl, start + k - o)
                    if m > 0:
                        ops.append(f(o, m))

            me = self.pos
            nxt, prv = [self.conn_at(me + 1, ch)], [self.conn_at(me - 1, ch)]
            if kind == "all_reduce":
                cnt, loop = hi - lo, n * depth * sl
                for off in range(0, cnt, loop):
                    real = min(loop, cnt - off)
                    ck = ceil_div(real, n)

                    def chunk(j):
                        s = min(off + (j % n) * ck, off + real)
                        return lo + s, min(s + ck, off + real) - s

                    step(*chunk(me - 1), lambda o, m: Op(m * esz, o * esz, -1, [], nxt))
                    for s in range(2, n):
                        step(*chunk(me - s), lambda o, m: Op(m * esz, o * esz, -1, prv, nxt))
                    step(*chunk(me), lambda o, m: Op(m * esz, o * esz, o * esz, prv, nxt))
                    for s in range(1, n - 1):
                        step(*chunk(me - s), lambda o, m: Op(m * esz, -1, o * esz, prv, nxt))
                    step(*chunk(me + 1), lambda o, m: Op(m * esz, -1, o * esz, prv, []))
            elif kind == "all_gather":
                def block(p):
                    return self.ring[p % n] * count
                for off in range(lo, hi, depth * sl):
                    k = min(depth * sl, hi - off)
                    b = block(me)
                    step(off, k, lambda o, m, b=b: Op(m * esz, o * esz, (b + o) * esz, [], nxt))
                    for s in range(1, n - 1):
                        b = block(me - s)
                        step(off, k, lambda o, m, b=b: Op(m * esz, -1, (b + o) * esz, prv, nxt))
                    b = block(me - (n - 1))
                    step(off, k, lambda o, m, b=b: Op(m * esz, -1, (b + o) * esz, prv, []))
            else:
                raise Failure("collective %s: this participant runs all_reduce and all_gather" % kind)
            progs.append(ops)
        return progs

    def exec(self, o, inp, out):
        n = o.n
        rx = [cn.rx_take(n) for cn in o.rx]
        local = inp[o.src:o.src + n] if o.src >= 0 else None
        if not rx:
            val = bytes(local)
        elif local is None and len(rx) == 1:
            val = rx[0]
        else:
            val = local if local is not None else rx.pop(0)
            for r in rx:
                val = reduce_sum(val, r)
        if o.dst >= 0:
            out[o.dst:o.dst + n] = val
        for cn in o.tx:
            cn.stage(val)
        for cn in o.rx:
            cn.consume()

    # -- the progress loop --

    def completions(self):
        moved = False
        while True:
            k, wcs = self.rcq.poll(32)
            for wc in wcs[:k]:
                cn = self.conns[wc.wr_id >> 40 & ((1 << 22) - 1)]
                if wc.status != e.IBV_WC_SUCCESS:
                    raise Failure("rank %d broke its connection on channel %d: receive completion status %d" %
                                  (cn.peer, cn.ch, wc.status))
                cn.on_recv(wc.wr_id & ((1 << 40) - 1), wc)
                self.stats["recv_completions"] += 1
            moved = moved or k > 0
            if k < 32:
                break
        while True:
            k, wcs = self.scq.poll(32)
            for wc in wcs[:k]:
                cn = self.conns[wc.wr_id >> 40 & ((1 << 22) - 1)]
                kind = wc.wr_id >> 62
                if wc.status != e.IBV_WC_SUCCESS:
                    raise Failure("rank %d did not acknowledge %s on channel %d: completion status %d" %
                                  (cn.peer, "a WRITE" if kind == K_DATA else "a clear-to-send", cn.ch, wc.status))
                cn.out[cn.qpi[wc.qp_num]] -= 1
                if kind == K_DATA:
                    cn.on_send(wc.wr_id & ((1 << 40) - 1))
            moved = moved or k > 0
            if k < 32:
                break
        return moved

    def run(self, kind, count, seed):
        progs = self.build(kind, count)
        esz, n = 4, self.size
        if kind == "all_reduce":  # as goroce coll's check: every rank's input, and their sum
            v = values(n, [(r, seed) for r in range(n)], count)
            inp = bytearray(f32(v[self.rank]))
            want = f32(map(sum, zip(*v)))
            out = bytearray(count * esz)
        else:  # rank b's block: a one-rank input of seed 33·seed + b
            v = values(1, [(0, 33 * seed + b) for b in range(n)], count)
            inp = bytearray(f32(v[self.rank]))
            want = b"".join(f32(x) for x in v)
            out = bytearray(n * count * esz)
        rxq, txq = [], []
        for ops in progs:
            for o in ops:
                for cn in o.rx:
                    cn.ensure_rx()
                    if cn not in rxq:
                        rxq.append(cn)
                for cn in o.tx:
                    cn.ensure_tx()
                    if cn not in txq:
                        txq.append(cn)
        pcs = [0] * len(progs)
        t0 = last = time.time()
        spins = 0
        while True:
            moved = self.completions()
            for c, ops in enumerate(progs):
                while pcs[c] < len(ops):
                    o = ops[pcs[c]]
                    if not all(cn.rx_ready() for cn in o.rx) or not all(cn.tx_free() for cn in o.tx):
                        break
                    self.exec(o, inp, out)
                    pcs[c] += 1
                    moved = True
            for cn in txq:
                moved = cn.try_post() or moved
            for cn in rxq:
                moved = cn.post_cts() or moved
            if all(pcs[c] == len(ops) for c, ops in enumerate(progs)) and all(cn.tx_posted == cn.tx_produced for cn in txq):
                break
            now = time.time()
            if moved:
                last = now
                spins += 1
                if spins % 64 == 0:
                    self.ctl.poll(0)
                continue
            if now - last > self.a.timeout:
                raise Failure(self.stall(progs, pcs, txq))
            self.ctl.poll(0.0002)
        return {"kind": kind, "count": count, "seed": seed, "channels": len(progs),
                "ops": sum(len(ops) for ops in progs), "wrong": wrong(bytes(out), want),
                "secs": round(time.time() - t0, 3)}

    def stall(self, progs, pcs, txq):
        t = self.a.timeout
        for c, ops in enumerate(progs):
            if pcs[c] >= len(ops):
                continue
            o = ops[pcs[c]]
            for cn in o.rx:
                if not cn.rx_ready():
                    return "rank %d sent nothing for %d s: this rank waits for message %d (%d bytes) on channel %d" % (
                        cn.peer, t, cn.rx_consumed + 1, o.n, cn.ch)
            for cn in o.tx:
                if not cn.tx_free():
                    return "rank %d acknowledged nothing for %d s: this rank waits for message %d's WRITE on channel %d" % (
                        cn.peer, t, cn.tx_done + 1, cn.ch)
        for cn in txq:
            if cn.tx_posted < cn.tx_produced:
                return "rank %d offered no slot for %d s: this rank waits for its clear-to-send for message %d on channel %d" % (
                    cn.peer, t, cn.tx_posted + 1, cn.ch)
        return "no progress for %d s" % t

    def drain(self):
        """Wait until every posted WRITE is acknowledged (goroce's Close does the same)."""
        end = time.time() + self.a.timeout
        while any(cn and sum(cn.out) > 0 for cn in self.conns):
            if not self.completions():
                if time.time() > end:
                    raise Failure("WRITEs not acknowledged for %d s" % self.a.timeout)
                time.sleep(0.001)

    def close(self):
        self.ctl.send(BYE)
        end = time.time() + self.a.timeout
        try:
            while time.time() < end:
                typ, p = self.ctl.read(end - time.time())
                if typ == ABORT:
                    raise Failure("the job failed at its end: %s" % abort_text(p))
        except Failure:
            if not self.ctl.eof:
                raise


def counters():
    out = {}
    for name in sorted(os.listdir(COUNTERS)):
        try:
            with open(os.path.join(COUNTERS, name)) as f:
                out[name] = int(f.read().strip())
        except (OSError, ValueError):
            pass
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rdzv", required=True)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--job", default="")
    p.add_argument("--addr", required=True)
    p.add_argument("--channels", type=int, default=2)
    p.add_argument("--qps", type=int, default=1)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--chunk", type=int, default=128 << 10)
    p.add_argument("--split", action="store_true")
    p.add_argument("--order", default="")
    p.add_argument("--mtu", type=int, required=True)
    p.add_argument("--plan", required=True)
    p.add_argument("--timeout", type=float, default=60)
    a = p.parse_args()
    if sys.byteorder != "little":
        sys.exit("collpeer: the FIFO elements and float32 data are little-endian; this host is not")
    plan = []
    for c in a.plan.split(","):
        kind, count, seed = c.split(":")
        plan.append((kind, int(count), int(seed)))
    t0 = time.time()
    job = Job(a)
    before = counters()
    try:
        job.open()
        job.join()
        print("collpeer: rank %d of %d joined job %s in %.1f s: ring %s, %d channels x %d QPs%s, steps %d, chunk %d, MTU %d" %
              (job.rank, job.size, a.job, time.time() - t0, job.ring, job.channels, job.nqp, " (split)" if a.split else "",
               job.steps, job.chunk, a.mtu), flush=True)
        calls = []
        for kind, count, seed in plan:
            r = job.run(kind, count, seed)
            calls.append(r)
            print("collpeer: %s count %d seed %d: %d channel(s), %d ops, #wrong %d, %.3f s (at %.1f s)" %
                  (kind, count, seed, r["channels"], r["ops"], r["wrong"], r["secs"], time.time() - t0), flush=True)
        job.drain()
        job.close()
    except Exception as ex:
        reason = "%s: %s" % (type(ex).__name__, ex) if not isinstance(ex, Failure) else str(ex)
        print("collpeer: FAIL %s" % reason, flush=True)
        if getattr(job, "ctl", None):
            job.ctl.abort(job.rank, "collpeer (pyverbs on rxe): " + reason)
        raise
    after = counters()
    qps = [{"peer": cn.peer, "channel": cn.ch, "index": i, "qpn": q.qp_num, "peer_qpn": cn.peer_qpn[i],
            "sent": cn.sent, "received": cn.received}
           for cn in job.conns if cn for i, q in enumerate(cn.qps)]
    res = {"rank": job.rank, "calls": calls, "stats": job.stats, "qps": qps,
           "counters": {k: after.get(k, 0) - v for k, v in before.items()}}
    print("collpeer: result " + json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
