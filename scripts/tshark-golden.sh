#!/usr/bin/env bash
# Regenerate the tshark golden outputs that `goroce cap -T fields` must reproduce byte for byte.
# Run by hand (not by CI) on a machine with tshark 4.0.x; commit what it writes:
#
#   testdata/tshark/FIELDS                    the -e list, one field per line (read by Go tests)
#   testdata/tshark/<name>.tshark.txt         per testdata/pcaps/<name>.pcap, -Y infiniband
#   testdata/tshark/<name>.all.tshark.txt     a few files without -Y (all packets, incl. TCP OOB)
#   testdata/tshark/FIELDS.cm, <name>.cm.tshark.txt   MAD/CM -e list and its goldens, per capture
#   testdata/tshark/probe/<name>.tshark.txt   per crafted testdata/tshark/probe/<name>.pcap
#   testdata/tshark/probe/<name>.all.tshark.txt
#   testdata/tshark/samples/*                 one packet as -T json and as -V text (layout notes)
#
#   usage: scripts/tshark-golden.sh            (TSHARK=/path/to/tshark to override)
#
# Every run uses an empty Wireshark config dir, so personal preferences (decode-as, RoCE port,
# protocol prefs, disabled heuristics) cannot leak into the goldens. See testdata/tshark/FORMATS.md.
set -euo pipefail

cd "$(dirname "$0")/.."
TSHARK=${TSHARK:-tshark}
OUT=testdata/tshark

# The -e list. Order = column order of the goldens. The first 9 are frame/IP/UDP, then every
# BTH/RETH/AETH/DETH/ImmDt/IETH/AtomicETH/AtomicAckETH/payload/CRC field tshark 4.0 registers
# (tshark -G fields), then two generic InfiniBand fields that carry RoCE bytes tshark has no
# named field for: infiniband.reserved (BTH byte 4 = FECN/BECN/resv6, DETH byte 4, MAD/CM
# reserved bytes) and infiniband.vendor (everything after the BTH for opcodes tshark 4.0 does not
# know: CNP 0x81, FLUSH 0x1C, ATOMIC WRITE 0x1D, ...).
FIELDS=(
  frame.number
  frame.time_relative
  ip.src
  ip.dst
  ipv6.src
  ipv6.dst
  ip.dsfield.ecn
  udp.srcport
  udp.dstport
  infiniband.bth
  infiniband.bth.opcode
  infiniband.bth.se
  infiniband.bth.m
  infiniband.bth.padcnt
  infiniband.bth.tver
  infiniband.bth.p_key
  infiniband.bth.destqp
  infiniband.bth.a
  infiniband.bth.reserved7
  infiniband.bth.psn
  infiniband.reth
  infiniband.reth.va
  infiniband.reth.r_key
  infiniband.reth.dmalen
  infiniband.aeth
  infiniband.aeth.syndrome
  infiniband.aeth.syndrome.reserved
  infiniband.aeth.syndrome.opcode
  infiniband.aeth.syndrome.credit_count
  infiniband.aeth.syndrome.timer
  infiniband.aeth.syndrome.reserved_value
  infiniband.aeth.syndrome.error_code
  infiniband.aeth.msn
  infiniband.deth
  infiniband.deth.q_key
  infiniband.deth.srcqp
  infiniband.immdt
  infiniband.ieth
  infiniband.atomiceth
  infiniband.atomiceth.swapdt
  infiniband.atomiceth.cmpdt
  infiniband.atomicacketh
  infiniband.atomicacketh.origremdt
  infiniband.payload
  infiniband.invariant.crc
  infiniband.variant.crc
  infiniband.reserved
  infiniband.vendor
)

# The layer-2 -e list: 802.1Q tags and MAC Control (802.3x PAUSE, PFC, MPCP), plus what a
# tagged RoCEv2 frame is told apart by (DSCP, ports, opcode, QP). A separate list so that the
# InfiniBand goldens above keep their 48 columns: it goes into testdata/tshark/FIELDS.l2 and
# <name>.l2.tshark.txt, unfiltered (PAUSE frames have no InfiniBand layer), for L2_FILES.
FIELDS_L2=(
  frame.number
  frame.time_relative
  vlan.priority
  vlan.dei
  vlan.cfi
  vlan.id
  vlan.etype
  vlan.len
  macc.opcode
  macc.pause_time
  macc.timestamp
  macc.reg.flags
  macc.regreq.grants
  macc.reg.grants
  macc.reg.assignedport
  macc.regack.assignedport
  macc.reg.synctime
  macc.regack.synctime
  macc.cbfc.enbv
  macc.cbfc.enbv.c0
  macc.cbfc.enbv.c1
  macc.cbfc.enbv.c2
  macc.cbfc.enbv.c3
  macc.cbfc.enbv.c4
  macc.cbfc.enbv.c5
  macc.cbfc.enbv.c6
  macc.cbfc.enbv.c7
  macc.cbfc.pause_time.c0
  macc.cbfc.pause_time.c1
  macc.cbfc.pause_time.c2
  macc.cbfc.pause_time.c3
  macc.cbfc.pause_time.c4
  macc.cbfc.pause_time.c5
  macc.cbfc.pause_time.c6
  macc.cbfc.pause_time.c7
  ip.src
  ip.dst
  ip.dsfield.dscp
  ip.dsfield.ecn
  ipv6.src
  ipv6.dst
  udp.srcport
  udp.dstport
  infiniband.bth.opcode
  infiniband.bth.destqp
  infiniband.bth.psn
)
# The CM -e list: the MAD common header and every CM message field tshark 4.0 registers
# (infiniband.mad.*, infiniband.cm.*), after what tells the MAD's packet apart. A separate list
# (testdata/tshark/FIELDS.cm, <name>.cm.tshark.txt, -Y infiniband) so the InfiniBand goldens
# keep their 48 columns; run on every capture, most of which have no MAD (empty columns).
FIELDS_CM=(
  frame.number
  ip.src
  ip.dst
  ipv6.src
  ipv6.dst
  infiniband.bth.opcode
  infiniband.bth.destqp
  infiniband.deth.q_key
  infiniband.deth.srcqp
  infiniband.reserved
  infiniband.smplid.smpdata
  infiniband.cm.req
  infiniband.cm.req.serviceid
  infiniband.cm.req.serviceid.prefix
  infiniband.cm.req.serviceid.protocol
  infiniband.cm.req.serviceid.dport
  infiniband.cm.req.localcaguid
  infiniband.cm.req.localqkey
  infiniband.cm.req.localqpn
  infiniband.cm.req.responderres
  infiniband.cm.req.localeecn
  infiniband.cm.req.initdepth
  infiniband.cm.req.remoteeecn
  infiniband.cm.req.remoteresptout
  infiniband.cm.req.transpsvctype
  infiniband.cm.req.e2eflowctrl
  infiniband.cm.req.startpsn
  infiniband.cm.req.localresptout
  infiniband.cm.req.retrcount
  infiniband.cm.req.pkey
  infiniband.cm.req.pppmtu
  infiniband.cm.req.rdcexist
  infiniband.cm.req.rnrretrcount
  infiniband.cm.req.maxcmretr
  infiniband.cm.req.srq
  infiniband.cm.req.ext_transport
  infiniband.cm.req.prim_locallid
  infiniband.cm.req.prim_remotelid
  infiniband.cm.req.prim_localgid
  infiniband.cm.req.prim_remotegid
  infiniband.cm.req.prim_localgid_ipv4
  infiniband.cm.req.prim_remotegid_ipv4
  infiniband.cm.req.prim_flowlabel
  infiniband.cm.req.prim_reserved0
  infiniband.cm.req.prim_pktrate
  infiniband.cm.req.prim_tfcclass
  infiniband.cm.req.prim_hoplim
  infiniband.cm.req.prim_sl
  infiniband.cm.req.prim_subnetlocal
  infiniband.cm.req.prim_reserved1
  infiniband.cm.req.prim_localacktout
  infiniband.cm.req.prim_reserved2
  infiniband.cm.req.alt_locallid
  infiniband.cm.req.alt_remotelid
  infiniband.cm.req.alt_localgid
  infiniband.cm.req.alt_remotegid
  infiniband.cm.req.alt_flowlabel
  infiniband.cm.req.alt_reserved0
  infiniband.cm.req.alt_pktrate
  infiniband.cm.req.alt_tfcclass
  infiniband.cm.req.alt_hoplim
  infiniband.cm.req.alt_sl
  infiniband.cm.req.alt_subnetlocal
  infiniband.cm.req.alt_reserved1
  infiniband.cm.req.alt_localacktout
  infiniband.cm.req.private
  infiniband.cm.req.ip_cm
  infiniband.cm.req.ip_cm.majv
  infiniband.cm.req.ip_cm.minv
  infiniband.cm.req.ip_cm.ipv
  infiniband.cm.req.ip_cm.reserved
  infiniband.cm.req.ip_cm.sport
  infiniband.cm.req.ip_cm.sip6
  infiniband.cm.req.ip_cm.dip6
  infiniband.cm.req.ip_cm.sip4
  infiniband.cm.req.ip_cm.dip4
  infiniband.cm.req.ip_cm.private
  infiniband.cm.rep
  infiniband.cm.rep.remotecommid
  infiniband.cm.rep.localqkey
  infiniband.cm.rep.localqpn
  infiniband.cm.rep.localeecn
  infiniband.cm.rep.startpsn
  infiniband.cm.rep.respres
  infiniband.cm.rep.initdepth
  infiniband.cm.rep.tgtackdelay
  infiniband.cm.rep.failoveracc
  infiniband.cm.rep.e2eflowctrl
  infiniband.cm.rep.rnrretrcount
  infiniband.cm.rep.srq
  infiniband.cm.rep.reserved
  infiniband.cm.rep.localcaguid
  infiniband.cm.rep.private
  infiniband.cm.rtu.localcommid
  infiniband.cm.rtu.remotecommid
  infiniband.cm.rtu.private
  infiniband.cm.rej.localcommid
  infiniband.cm.rej.remotecommid
  infiniband.cm.rej.msgrej
  infiniband.cm.rej.reserved0
  infiniband.cm.rej.rejinfolen
  infiniband.cm.rej.reserved1
  infiniband.cm.rej.reason
  infiniband.cm.rej.ari
  infiniband.cm.rej.private
  infiniband.cm.dreq.localcommid
  infiniband.cm.dreq.remotecommid
  infiniband.cm.req.remoteqpneecn
  infiniband.cm.dreq.private
  infiniband.cm.drsp.localcommid
  infiniband.cm.drsp.remotecommid
  infiniband.cm.drsp.private
  infiniband.mad
  infiniband.mad.baseversion
  infiniband.mad.mgmtclass
  infiniband.mad.classversion
  infiniband.mad.method
  infiniband.mad.status
  infiniband.mad.classspecific
  infiniband.mad.transactionid
  infiniband.mad.attributeid
  infiniband.mad.attributemodifier
  infiniband.mad.data
)
L2_FILES=(testdata/tshark/probe/probe_macc.pcap testdata/tshark/probe/probe_vlan.pcap
          testdata/tshark/probe/probe_ip.pcap testdata/pcaps/rc_pingpong.pcap)

# Files that also get an unfiltered (*.all.tshark.txt) golden: they show how packets without an
# InfiniBand layer render (TCP OOB exchange, ICMP, plain UDP, non-IP).
ALL_FILES=(testdata/pcaps/rc_pingpong.pcap testdata/pcaps/write_bw_s8.pcap
           testdata/pcaps/rc_imm.pcap testdata/tshark/probe/probe_ip.pcap)

command -v "$TSHARK" >/dev/null || { echo "tshark not found (set TSHARK=)" >&2; exit 1; }
ver=$("$TSHARK" --version 2>/dev/null | head -1)
case "$ver" in
  *" 4.0."*) ;;
  *) echo "warning: goldens were made with tshark 4.0.x; this is: $ver" >&2 ;;
esac

cfg=$(mktemp -d)
trap 'rm -rf "$cfg"' EXIT
export WIRESHARK_CONFIG_DIR="$cfg" LC_ALL=C TZ=UTC

# Every field must exist in this tshark (a typo would silently give an empty column).
known=$("$TSHARK" -G fields 2>/dev/null | awk -F'\t' '$1=="F"{print $3}')
for f in "${FIELDS[@]}" "${FIELDS_L2[@]}" "${FIELDS_CM[@]}"; do
  grep -qxF "$f" <<<"$known" || { echo "tshark has no field $f" >&2; exit 1; }
done

mkdir -p "$OUT" "$OUT/probe" "$OUT/samples"
printf '%s\n' "${FIELDS[@]}" >"$OUT/FIELDS"
printf '%s\n' "${FIELDS_L2[@]}" >"$OUT/FIELDS.l2"
printf '%s\n' "${FIELDS_CM[@]}" >"$OUT/FIELDS.cm"
# Raw registration lines (type, base, bitmask) of the FIELDS and of every infiniband.* field,
# in and out of scope (CM/MAD/LRH/GRH are not decoded by goroce yet).
"$TSHARK" -G fields 2>/dev/null | awk -F'\t' 'NR==FNR{want[$1]=1; next} $1=="F" && ($3 in want)' \
  "$OUT/FIELDS" - >"$OUT/tshark-G-fields.FIELDS.txt"
"$TSHARK" -G fields 2>/dev/null | grep -P '^[FP]\t[^\t]*\tinfiniband(\.|\t|$)' >"$OUT/tshark-G-fields.infiniband.txt"

EARGS=()
for f in "${FIELDS[@]}"; do EARGS+=(-e "$f"); done
L2ARGS=()
for f in "${FIELDS_L2[@]}"; do L2ARGS+=(-e "$f"); done
CMARGS=()
for f in "${FIELDS_CM[@]}"; do CMARGS+=(-e "$f"); done
"$TSHARK" -G fields 2>/dev/null | awk -F'\t' 'NR==FNR{want[$1]=1; next} $1=="F" && ($3 in want)' \
  "$OUT/FIELDS.l2" - >"$OUT/tshark-G-fields.FIELDS.l2.txt"

# These -E values are tshark's defaults for -T fields (checked below), spelled out so the
# goldens do not depend on them: tab separator, all occurrences, ',' aggregator, no quoting.
OPTS=(-E header=y -E separator=/t -E occurrence=a -E aggregator=, -E quote=n)

run() { # run OUTFILE PCAP [extra tshark args...]
  local out=$1 pcap=$2; shift 2
  local eargs=("${EARGS[@]}")
  case "$out" in
    *.l2.tshark.txt) eargs=("${L2ARGS[@]}") ;;
    *.cm.tshark.txt) eargs=("${CMARGS[@]}") ;;
  esac
  "$TSHARK" -r "$pcap" "$@" -T fields "${OPTS[@]}" "${eargs[@]}" >"$out" 2>"$cfg/stderr" || {
    cat "$cfg/stderr" >&2; echo "tshark failed on $pcap" >&2; exit 1; }
  # tshark prints its "Running as user root" note on stderr; anything else is worth seeing
  grep -v 'Running as user "root"' "$cfg/stderr" >&2 || true
}

pcaps=(testdata/pcaps/*.pcap testdata/tshark/probe/*.pcap)
for pcap in "${pcaps[@]}"; do
  name=$(basename "$pcap" .pcap)
  case "$pcap" in testdata/tshark/probe/*) dir=$OUT/probe ;; *) dir=$OUT ;; esac
  run "$dir/$name.tshark.txt" "$pcap" -Y infiniband
  # self-check: the explicit -E options above are the defaults
  "$TSHARK" -r "$pcap" -Y infiniband -T fields -E header=y "${EARGS[@]}" 2>/dev/null |
    cmp -s - "$dir/$name.tshark.txt" || { echo "defaults differ from ${OPTS[*]} on $pcap" >&2; exit 1; }
  echo "$dir/$name.tshark.txt: $(($(wc -l <"$dir/$name.tshark.txt") - 1)) packets"
  run "$dir/$name.cm.tshark.txt" "$pcap" -Y infiniband
done

for pcap in "${ALL_FILES[@]}"; do
  name=$(basename "$pcap" .pcap)
  case "$pcap" in testdata/tshark/probe/*) dir=$OUT/probe ;; *) dir=$OUT ;; esac
  run "$dir/$name.all.tshark.txt" "$pcap"
  echo "$dir/$name.all.tshark.txt: $(($(wc -l <"$dir/$name.all.tshark.txt") - 1)) packets"
done

for pcap in "${L2_FILES[@]}"; do
  name=$(basename "$pcap" .pcap)
  case "$pcap" in testdata/tshark/probe/*) dir=$OUT/probe ;; *) dir=$OUT ;; esac
  run "$dir/$name.l2.tshark.txt" "$pcap"
  echo "$dir/$name.l2.tshark.txt: $(($(wc -l <"$dir/$name.l2.tshark.txt") - 1)) packets"
done

# Layout samples (FORMATS.md "JSON and text output"): rc_imm frame 10 = RC RDMA WRITE Only with
# Immediate (BTH+RETH+ImmDt+payload+ICRC); rc_imm frame 11 = its ACK (AETH).
for n in 10 11; do
  "$TSHARK" -r testdata/pcaps/rc_imm.pcap -Y "frame.number == $n" -T json 2>/dev/null \
    >"$OUT/samples/rc_imm.f$n.json"
  "$TSHARK" -r testdata/pcaps/rc_imm.pcap -Y "frame.number == $n" -V 2>/dev/null \
    >"$OUT/samples/rc_imm.f$n.txt"
  "$TSHARK" -r testdata/pcaps/rc_imm.pcap -Y "frame.number == $n" -T json "${EARGS[@]}" 2>/dev/null \
    >"$OUT/samples/rc_imm.f$n.fields.json"
done
echo "done: $OUT"
