#!/bin/sh
# cap-compare.sh BIN OUTDIR [FILE...]: runs every capture mode of
# "goroce cap" (BIN) over every pcap/pcapng of the repository's testdata
# and over FILE... (extra captures), one output file per run with the exit
# status and stderr appended. Two trees' outputs compare with diff -r:
#
#	scripts/cap-compare.sh /tmp/goroce-old /tmp/out-old extra/*
#	scripts/cap-compare.sh /tmp/goroce-new /tmp/out-new extra/*
#	diff -r /tmp/out-old /tmp/out-new
#
# scripts/cap-stress-corpus.py writes such extra captures.
#
# The report's "generated on" time is masked; everything else must match
# byte for byte.
set -eu
bin=$1 out=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
fields() { for f in $(cat "$root/testdata/tshark/$1"); do printf -- '-e %s ' "$f"; done; }
F=$(fields FIELDS) FCM=$(fields FIELDS.cm) FL2=$(fields FIELDS.l2)
E="-E header=y -E separator=/t -E occurrence=a -E aggregator=, -E quote=n"
go() { # name args...: run one mode
	n=$1
	shift
	set +e
	"$bin" "$@" >"$out/$n" 2>"$out/$n.stderr"
	echo "exit $?" >>"$out/$n.stderr"
	set -e
}
files=$(find "$root/testdata" "$root/interop/testdata" "$root/internal" -name '*.pcap' -o -name '*.pcapng' | sort)
for f in $files "$@"; do
	b=$(echo "$f" | sed "s|^$root/||; s|/|_|g")
	go "$b.text" cap -r "$f"
	go "$b.T-text" cap -r "$f" -T text
	go "$b.Y-text" cap -r "$f" -Y infiniband
	# shellcheck disable=SC2086
	go "$b.fields" cap -r "$f" -Y infiniband -T fields $E $F
	# shellcheck disable=SC2086
	go "$b.fields-all" cap -r "$f" -T fields $E $F
	# shellcheck disable=SC2086
	go "$b.fields-cm" cap -r "$f" -T fields $E $FCM
	# shellcheck disable=SC2086
	go "$b.fields-l2" cap -r "$f" -T fields $E $FL2
	go "$b.fields-icrc" cap -r "$f" -T fields -e frame.number -e roce.icrc.status -e roce.icrc.computed
	go "$b.json" cap -r "$f" -T json
	# shellcheck disable=SC2086
	go "$b.json-e" cap -r "$f" -T json $F
	go "$b.flows" cap flows -r "$f"
	go "$b.flows-json" cap flows --json -r "$f"
	go "$b.lint" cap lint -r "$f"
	go "$b.lint-json" cap lint --json -r "$f"
	go "$b.report" cap report -r "$f" -o -
	sed -i 's/ on [0-9TZ:-]*\. Times/ on TIME. Times/' "$out/$b.report"
done
go rules cap lint -rules
go rules-json cap lint -rules --json
go G-fields cap -G fields
