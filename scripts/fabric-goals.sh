#!/usr/bin/env bash
# Issue 26's goal table, measured in one run (doc/fabric.md "Collectives on
# the fabric"): 2 leaves × 4 hosts, 4 spines at RATE (default 1gbit), 8 ranks
# interleaved, a ring all_reduce of SIZE (default 64M) with 1 QP per
# connection, 8 QPs (the kernel's source-port rule) and 8 QPs with
# --sport fixed, alternated ROUNDS times; goroce sim ecmp's prediction for
# the same topology; and goroce fabric incast (3 → 1 through one marked
# uplink) with DCQCN on and off. Needs root. Prints the table; keeps every
# command's output in OUT.
#
#   sudo scripts/fabric-goals.sh                      # the issue's figures
#   RATE=100mbit SIZE=16M BUFFER=2MiB ROUNDS=2 sudo scripts/fabric-goals.sh
set -euo pipefail
GOROCE=${GOROCE:-goroce}
NAME=${NAME:-goals}
RATE=${RATE:-1gbit}
SIZE=${SIZE:-64M}
ITERS=${ITERS:-2}
ROUNDS=${ROUNDS:-1}
CHANNELS=${CHANNELS:-1}
BUFFER=${BUFFER:-512KiB}
OUT=${OUT:-$(mktemp -d /tmp/fabric-goals.XXXXXX)}
mkdir -p "$OUT"
cleanup() { "$GOROCE" fabric down "$NAME" "${NAME}i" >/dev/null 2>&1 || true; }
trap cleanup EXIT
cleanup

run() { echo "+ $*" >&2; "$@"; }
run "$GOROCE" fabric up --name "$NAME" --leaves 2 --hosts-per-leaf 4 --spines 4 --rate "$RATE" --buffer "$BUFFER" >/dev/null
uptime | tee "$OUT/uptime-start"
for r in $(seq 1 "$ROUNDS"); do
	for cfg in q1 q8 q8fixed; do
		args=(--qps-per-conn 1)
		case $cfg in
		q8) args=(--qps-per-conn 8) ;;
		q8fixed) args=(--qps-per-conn 8 --sport fixed) ;;
		esac
		run "$GOROCE" coll all_reduce -np 8 --fabric "$NAME" --placement interleaved -b "$SIZE" -e "$SIZE" \
			-n "$ITERS" -w 1 --algo ring --channels "$CHANNELS" --ceiling=false "${args[@]}" >"$OUT/$cfg-$r.txt" 2>"$OUT/$cfg-$r.err" || {
			echo "goroce coll ($cfg, round $r) failed: $OUT/$cfg-$r.err" >&2
			exit 1
		}
	done
done
uptime | tee "$OUT/uptime-coll"
"$GOROCE" fabric down "$NAME" >/dev/null
gbps=$("$GOROCE" fabric status --help >/dev/null 2>&1; python3 -c "
import re,sys
m=re.fullmatch(r'(\d+(?:\.\d+)?)(k|m|g)bit','$RATE'.lower()); print(float(m[1])*{'k':1e-6,'m':1e-3,'g':1}[m[2]])")
size_mb=$(python3 -c "
s='$SIZE'; u={'K':1/1024,'M':1,'G':1024}; print(float(s[:-1])*u[s[-1]] if s[-1] in u else int(s)/2**20)")
run "$GOROCE" sim ecmp --leaves 2 --hosts 4 --spines 4 --host-gbps "$(python3 -c "print(100*$gbps)")" --spine-gbps "$gbps" \
	--qps "$CHANNELS,$((8 * CHANNELS))" --mode all --placement interleaved --no-dcqcn --data-mb "$size_mb" --json >"$OUT/sim.json" || true

run "$GOROCE" fabric up --name "${NAME}i" --hosts-per-leaf 4 --spines 1 --rate 500mbit >/dev/null
run "$GOROCE" fabric incast "${NAME}i" --senders h0,h1,h2 --receiver h4 --dcqcn both --json >"$OUT/incast.json"
uptime | tee "$OUT/uptime-end"

python3 - "$OUT" "$ROUNDS" "$CHANNELS" <<'PY'
import json, re, statistics, sys
out, rounds, ch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def summary(path):
    s = open(path).read()
    m = re.search(r"all_reduce \d+ B \(ring\): busbw (\S+) / (\S+) GB/s \(out-of-place / in place\); balanced ideal (\S+) GB/s.*?prediction for the spines the QPs took (\S+) GB/s", s)
    runs = re.findall(r"(?m)^# +\d+ +(out|in) +[\d. ]+? +([\d.]+) +[\d.]+ +\S+ +\S+ +\d+ +\d+$", s)
    wrong = re.findall(r"(?m)^ +\d+ +\d+ +\S+ +\S+ +-?\d+ +\S+ +\S+ +\S+ +(\S+) +\S+ +\S+ +\S+ +(\S+)$", s)
    retr = re.search(r"sent (\d+) packets, retransmitted (\d+)", s)
    return dict(out=float(m[1]), inp=float(m[2]), ideal=float(m[3]), model=float(m[4]),
                maxmean=max(float(x[1]) for x in runs), wrong=wrong, sent=int(retr[1]), retr=int(retr[2]))
res = {c: [summary(f"{out}/{c}-{r}.txt") for r in range(1, rounds + 1)] for c in ("q1", "q8", "q8fixed")}
bw = lambda c: statistics.median(x["out"] for x in res[c])
sim = json.load(open(f"{out}/sim.json"))
comp = {(row["mode"], row["qps"]): row["completion_ideal_median"] for row in sim["rows"]}
ideal = res["q8"][0]["ideal"]
simq8 = ideal / comp[("kernel", 8 * ch)]
dec, txt, inc = json.JSONDecoder(), open(f"{out}/incast.json").read(), {}
i = 0
while True:
    while i < len(txt) and txt[i].isspace():
        i += 1
    if i >= len(txt):
        break
    o, i = dec.raw_decode(txt, i)
    inc["on" if o["dcqcn"] else "off"] = o
print(f"# rounds {rounds}, channels {ch}; busbw out-of-place, GB/s (median over rounds)")
for c in res:
    for i, x in enumerate(res[c]):
        print(f"# {c} round {i+1}: busbw {x['out']} / {x['inp']}, ideal {x['ideal']}, model (observed spines) {x['model']}, per-spine max/mean {x['maxmean']:.2f}, retransmitted {x['retr']}/{x['sent']}, #wrong {x['wrong']}")
print("| figure | goal | measured |")
print("|---|---|---|")
print(f"| busbw 8 QPs / 1 QP | ≥ 2.0 | {bw('q8')/bw('q1'):.2f} ({bw('q8'):.4g} / {bw('q1'):.4g} GB/s) |")
print(f"| busbw 8 QPs / balanced ideal | ≥ 0.8 | {bw('q8')/ideal:.2f} (ideal {ideal:.4g} GB/s) |")
print(f"| per-spine bytes max/mean, 8 QPs | ≤ 1.3 | {max(x['maxmean'] for x in res['q8']):.2f} (worst timed run) |")
print(f"| --sport fixed 8 QPs / 1 QP | ≈ 1 | {bw('q8fixed')/bw('q1'):.2f} ({bw('q8fixed'):.4g} GB/s) |")
print(f"| measured / goroce sim ecmp (kernel, {8*ch} QPs per pair, median of its seeds) | 0.85–1.15 | {bw('q8')/simq8:.2f} (sim {simq8:.4g} GB/s = ideal / {comp[('kernel', 8*ch)]}) |")
print(f"| measured / the model for the spines the QPs took (8 QPs) | 0.85–1.15 | {statistics.median(x['out']/x['model'] for x in res['q8']):.2f} |")
on, off = inc["on"], inc["off"]
r = on["drops"] / off["drops"] if off["drops"] else float("nan")
print(f"| incast 3 → 1 through one marked uplink (500 Mbit/s): tbf drops DCQCN on / off | ≤ 0.1 | {r:.3f} ({on['drops']} / {off['drops']}; CNPs {on['cnps_sent']} / {off['cnps_sent']}, retransmitted {on['retransmitted']} / {off['retransmitted']}) |")
PY
echo "outputs: $OUT"
