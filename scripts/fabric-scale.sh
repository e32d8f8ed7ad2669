#!/usr/bin/env bash
# Issue 26 part 6: 16 ranks on one machine (2 leaves × 8 hosts, 4 spines at
# RATE, ranks interleaved), every collective, 8 QPs per connection; prints
# each collective's #wrong, busbw, retransmissions and the memory per QP and
# join time from goroce coll --fabric's summary. Needs root.
#
#   sudo scripts/fabric-scale.sh
set -euo pipefail
GOROCE=${GOROCE:-goroce}
NAME=${NAME:-scale}
RATE=${RATE:-1gbit}
NP=${NP:-16}
SIZES=${SIZES:-"-b 64K -e 4M -f 8"}
OUT=${OUT:-$(mktemp -d /tmp/fabric-scale.XXXXXX)}
mkdir -p "$OUT"
trap '"$GOROCE" fabric down "$NAME" >/dev/null 2>&1 || true' EXIT
"$GOROCE" fabric down "$NAME" >/dev/null 2>&1 || true
"$GOROCE" fabric up --name "$NAME" --leaves 2 --hosts-per-leaf $(((NP + 1) / 2)) --spines 4 --rate "$RATE" >/dev/null
uptime
status=0
for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
	echo "+ $GOROCE coll $c -np $NP --fabric $NAME --placement interleaved --qps-per-conn 8 $SIZES -n 2 -w 1 --ceiling=false" >&2
	# shellcheck disable=SC2086
	if ! "$GOROCE" coll "$c" -np "$NP" --fabric "$NAME" --placement interleaved --qps-per-conn 8 $SIZES -n 2 -w 1 \
		--ceiling=false >"$OUT/$c.txt" 2>"$OUT/$c.err"; then
		echo "$c: failed (exit $?), see $OUT/$c.err"
		status=1
	fi
	printf '%-15s %s | %s | %s\n' "$c" "$(grep -m1 'Out of bounds' "$OUT/$c.txt")" "$(grep -m1 'Avg bus bandwidth' "$OUT/$c.txt")" \
		"$(grep -m1 'whole job' "$OUT/$c.txt" | sed 's/# goroce fabric: whole job: //')"
	grep -m1 'memory:' "$OUT/$c.txt" | sed 's/# goroce fabric: /    /'
done
uptime
echo "outputs: $OUT"
exit $status
