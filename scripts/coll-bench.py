#!/usr/bin/python3
"""goroce coll against its peers, side by side: all-reduce of float32 sums with NP ranks on this
host, at 8 B, 1 MiB and 64 MiB, for

  goroce   goroce coll all_reduce -np NP (RoCEv2 over UDP on loopback, one process per rank)
  gloo     PyTorch torch.distributed, Gloo backend over TCP on loopback (NP processes)
  mpi-tcp  Open MPI MPI_Allreduce through mpi4py, TCP on loopback (--mca btl tcp,self)
  mpi-shm  the same over shared memory (Open MPI's default on one host)

in ROUNDS rounds, the peers alternated within each round, so that every figure of a round saw
the same load; the table gives the median over the rounds, nccl-tests' busbw (GB/s, 1e9 B/s,
factor 2(n-1)/n) and the time of the 8-byte all-reduce, then the ratios of doc/coll.md's goals:

  64 MiB busbw x NP / goroce's point-to-point ceiling (measured by goroce coll at its start)
  64 MiB busbw / gloo's,  1 MiB busbw / the best peer's,  8 B time / mpi-tcp's

With --counters it then measures, for goroce and mpi-tcp at 8 B and 1 MiB, what a call costs the
machine (perf stat over all ranks, the difference of two runs of different lengths, per call):
CPU time, system calls and context switches (each a process put to sleep and woken). On a host
whose ranks outnumber its CPUs the time of a small call is about its CPU time / the CPUs.

usage: scripts/coll-bench.py [--np 4] [--rounds 3] [--goroce PATH] [--peers gloo,mpi-tcp,mpi-shm]
       [--counters] [--json FILE] [-- extra goroce coll flags]
needs: /usr/bin/python3 with torch (python3-torch) and mpi4py + numpy (python3-mpi4py), mpirun;
perf (linux-perf) for --counters.
Root runs mpirun with --allow-run-as-root. Prints `uptime` before and after: state the load.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

SIZES = [8, 1 << 20, 64 << 20]

# The peers' programs: the same measurement in each (2 warm-up calls, then a timed loop of
# 5 calls for 16 MiB and above, 50 (Gloo) or 200 (MPI) below, the mean time; busbw with
# nccl-tests' all-reduce factor).
GLOO = r'''
import os, sys, time
import torch, torch.distributed as dist, torch.multiprocessing as mp
def run(rank, n, sizes, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=n)
    for s in sizes:
        t = torch.ones(max(s // 4, 1), dtype=torch.float32)
        for _ in range(2): dist.all_reduce(t)
        iters = 5 if s >= 1 << 24 else 50
        dist.barrier(); t0 = time.perf_counter()
        for _ in range(iters): dist.all_reduce(t)
        dt = (time.perf_counter() - t0) / iters
        if rank == 0:
            print("RESULT %d %.9f" % (s, dt), flush=True)
    dist.destroy_process_group()
if __name__ == "__main__":
    n = int(sys.argv[1]); port = int(sys.argv[2]); sizes = [int(x) for x in sys.argv[3:]]
    mp.spawn(run, args=(n, sizes, port), nprocs=n)
'''

MPI = r'''
import os, sys, time
import numpy as np
from mpi4py import MPI
c = MPI.COMM_WORLD; r = c.Get_rank()
for s in [int(x) for x in sys.argv[1:]]:
    a = np.ones(max(s // 4, 1), dtype=np.float32); b = np.empty_like(a)
    for _ in range(2): c.Allreduce(a, b, MPI.SUM)
    iters = int(os.environ.get("COLL_BENCH_ITERS", 0)) or (5 if s >= 1 << 24 else 200)
    c.Barrier(); t0 = time.perf_counter()
    for _ in range(iters): c.Allreduce(a, b, MPI.SUM)
    dt = c.allreduce((time.perf_counter() - t0) / iters, MPI.MAX)
    if r == 0:
        print("RESULT %d %.9f" % (s, dt), flush=True)
'''


def busbw(size, sec, n):
    return size / sec / 1e9 * 2 * (n - 1) / n


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def results(out):
    r = {}
    for line in out.splitlines():
        if line.startswith("RESULT "):
            _, s, t = line.split()
            r[int(s)] = float(t)
    return r


def run_goroce(args, extra):
    """One goroce coll run per size (-b = -e), --json; returns ({size: sec}, ceiling GB/s)."""
    times, ceiling = {}, None
    for s in SIZES:
        iters = "5" if s >= 1 << 24 else ("1000" if s <= 64 else "50")
        cmd = [args.goroce, "coll", "all_reduce", "-np", str(args.np), "-b", str(s), "-e", str(s),
               "-n", iters, "-w", "2", "-c", "0", "--json"] + extra
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            sys.exit("goroce coll failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr[-2000:]))
        d = json.loads(p.stdout)
        res = d["results"][0]["out_of_place"]
        times[s] = res["time"] / 1e6
        ceiling = d["goroce"]["ceiling_gbps"] or ceiling
    return times, ceiling


def run_gloo(args, tmp):
    prog = os.path.join(tmp, "gloo.py")
    with open(prog, "w") as f:
        f.write(GLOO)
    p = subprocess.run(["/usr/bin/python3", prog, str(args.np), str(free_port())] + [str(s) for s in SIZES],
                       capture_output=True, text=True, timeout=1200)
    if p.returncode != 0:
        sys.exit("gloo failed: " + p.stderr[-2000:])
    return results(p.stdout)


def mpi_cmd(args, tmp, tcp, sizes):
    prog = os.path.join(tmp, "mpi.py")
    with open(prog, "w") as f:
        f.write(MPI)
    cmd = ["mpirun", "--oversubscribe", "-np", str(args.np)]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    if tcp:
        cmd += ["--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo"]
    return cmd + ["/usr/bin/python3", prog] + [str(s) for s in sizes]


def run_mpi(args, tmp, tcp):
    cmd = mpi_cmd(args, tmp, tcp, SIZES)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if p.returncode != 0:
        sys.exit("mpirun failed: " + p.stderr[-2000:])
    return results(p.stdout)


COUNTERS = ["task-clock", "context-switches", "raw_syscalls:sys_enter"]


def perf_stat(cmd, env=None):
    """Runs cmd under perf stat (children included); returns {event: count}."""
    with tempfile.NamedTemporaryFile("r", suffix=".perf") as out:
        p = subprocess.run(["perf", "stat", "-x,", "-o", out.name, "-e", ",".join(COUNTERS), "--"] + cmd,
                           capture_output=True, text=True, timeout=1200, env=env)
        if p.returncode != 0:
            sys.exit("perf stat failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr[-2000:]))
        got = {}
        for line in out.read().splitlines():
            f = line.split(",")
            if len(f) > 2 and f[2] in COUNTERS and f[0].replace(".", "").isdigit():
                got[f[2]] = float(f[0])
        return got


def per_call(run, short, long, calls_per_iter):
    """The cost of one call: the difference of a run of long and one of short iterations."""
    a, b = run(short), run(long)
    n = (long - short) * calls_per_iter
    return {"cpu_us": (b["task-clock"] - a["task-clock"]) * 1e3 / n,  # task-clock is in ms
            "syscalls": (b["raw_syscalls:sys_enter"] - a["raw_syscalls:sys_enter"]) / n,
            "switches": (b["context-switches"] - a["context-switches"]) / n}


def counters(args, tmp):
    """Per-call CPU, system calls and context switches of goroce and mpi-tcp at 8 B and 1 MiB."""
    rows = {}
    for s, short, long in [(8, 1000, 5000), (1 << 20, 20, 100)]:
        def goroce(iters):
            return perf_stat([args.goroce, "coll", "all_reduce", "-np", str(args.np), "-b", str(s), "-e", str(s),
                              "-n", str(iters), "-w", "2", "-c", "0", "--ceiling=false"] + args.extra)

        def mpi(iters):
            return perf_stat(mpi_cmd(args, tmp, True, [s]), env=dict(os.environ, COLL_BENCH_ITERS=str(iters)))
        # goroce coll times each size out of place and in place: two calls per iteration.
        rows[("goroce", s)] = per_call(goroce, short, long, 2)
        rows[("mpi-tcp", s)] = per_call(mpi, short, long, 1)
    return rows


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--goroce", default=shutil.which("goroce") or "./goroce")
    ap.add_argument("--peers", default="gloo,mpi-tcp,mpi-shm")
    ap.add_argument("--counters", action="store_true", help="also measure CPU, system calls and context switches per call (perf stat)")
    ap.add_argument("--json", help="write every round's figures to FILE")
    ap.add_argument("extra", nargs="*", help="flags for goroce coll (after --)")
    args = ap.parse_args()
    peers = [p for p in args.peers.split(",") if p]
    print("# before: " + uptime(), flush=True)
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            rnd = {}
            order = ["goroce"] + peers
            order = order[r % len(order):] + order[:r % len(order)]  # rotate who goes first
            for who in order:
                if who == "goroce":
                    rnd["goroce"], rnd["ceiling"] = run_goroce(args, args.extra)
                elif who == "gloo":
                    rnd["gloo"] = run_gloo(args, tmp)
                elif who == "mpi-tcp":
                    rnd["mpi-tcp"] = run_mpi(args, tmp, True)
                elif who == "mpi-shm":
                    rnd["mpi-shm"] = run_mpi(args, tmp, False)
            rounds.append(rnd)
            print("# round %d: %s" % (r + 1, json.dumps(rnd)), flush=True)
        cost = counters(args, tmp) if args.counters else None
    print("# after: " + uptime())
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    n = args.np
    who_all = ["goroce"] + peers
    print()
    print("| peer (%d ranks) | 8 B time µs | 1 MiB busbw GB/s | 64 MiB busbw GB/s |" % n)
    print("|---|---|---|---|")
    fig = {}
    for w in who_all:
        t8 = med([rd[w][8] * 1e6 for rd in rounds])
        b1 = med([busbw(1 << 20, rd[w][1 << 20], n) for rd in rounds])
        b64 = med([busbw(64 << 20, rd[w][64 << 20], n) for rd in rounds])
        fig[w] = (t8, b1, b64)
        print("| %s | %.1f | %.3f | %.3f |" % (w, t8, b1, b64))
    ceil = med([rd["ceiling"] for rd in rounds if rd.get("ceiling")])
    print()
    print("goroce's ceiling (point-to-point, measured at start): %.3f GB/s" % ceil)
    print()
    print("| goal | per round | median | goal |")
    print("|---|---|---|---|")

    def per_round(f):
        return [f(rd) for rd in rounds]
    rows = [("64 MiB busbw × ranks / ceiling",
             per_round(lambda rd: busbw(64 << 20, rd["goroce"][64 << 20], n) * n / rd["ceiling"]), "≥ 0.8")]
    if "gloo" in peers:
        rows.append(("64 MiB busbw / Gloo's", per_round(lambda rd: rd["gloo"][64 << 20] / rd["goroce"][64 << 20]), "≥ 0.75"))
    if peers:
        rows.append(("1 MiB busbw / the best peer's",
                     per_round(lambda rd: min(rd[p][1 << 20] for p in peers if p != "mpi-shm" or len(peers) == 1) / rd["goroce"][1 << 20]), "≥ 1.0"))
    if "mpi-tcp" in peers:
        rows.append(("8 B time / Open MPI-TCP's", per_round(lambda rd: rd["goroce"][8] / rd["mpi-tcp"][8]), "≤ 1.0"))
    for name, vals, goal in rows:
        print("| %s | %s | %.2f | %s |" % (name, ", ".join("%.2f" % v for v in vals), med(vals), goal))
    if cost:
        print()
        print("| per call (all %d ranks) | CPU µs | system calls | context switches |" % n)
        print("|---|---|---|---|")
        for (w, s), c in sorted(cost.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            print("| %s %s | %.0f | %.1f | %.1f |" % (w, "8 B" if s == 8 else "1 MiB", c["cpu_us"], c["syscalls"], c["switches"]))
    if args.json:
        with open(args.json, "w") as f:
            doc = {"np": n, "rounds": rounds}
            if cost:
                doc["counters"] = {"%s/%d" % k: v for k, v in cost.items()}
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
