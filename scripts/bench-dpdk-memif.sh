#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# mroce over net_memif beside the bare memif loop, in one run (doc/performance.md sections 4, 7).
#   scripts/bench-dpdk-memif.sh [BUILD_DIR] [SECONDS]
# Two processes, one lcore each (CPU 0: server/receiver, the last allowed CPU: client/sender).
# Message rate: 64-byte and 4 KiB WRITEs against the bare loop's packets/s
# (ratio printed); latency: mroce-perf --lat (8-byte WRITE round trip)
# against the bare memif ping-pong (mroce-dpdk-bench --memif --lat).
# Env: SIZES="64 4096" (message sizes; "" for the latency pair alone), LAT=0 skips the latency part;
# PIPELINES="none placement placement+cc" runs mroce-perf in each arrangement
# of the device key pipeline (section 7.3), ROUNDS=3 repeats the bare loop and
# every (size, arrangement) run in interleaved rounds, then prints each
# arrangement's message rate against run to completion's (none) in the same
# round. Stage lcores: with 6 or more allowed CPUs each lcore gets one of its
# own; with fewer, each process's stages run on the CPU of the other
# process's engine (its own engine keeps its CPU).
# ENGINE_EXTRA: a line added to both ends' [engine] section (e.g. "ack_delay_us = 0").
set -eu
B=${1:-build}
S=${2:-2}
PERF=$B/app/perf/mroce-perf
BENCH=$B/app/dpdk-bench/mroce-dpdk-bench
T=$(mktemp -d /tmp/mroce-memif-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
CPUS=$(python3 -c 'import os; print(" ".join(map(str, sorted(os.sched_getaffinity(0)))))')
set -- $CPUS
FIRST=$1
NCPU=$#
eval LAST=\${$#}

SIZES=${SIZES-64 4096}
PIPELINES=${PIPELINES:-none}
ROUNDS=${ROUNDS:-1}

lcores() {  # lcores role pipeline: the device's lcores key
    n=1; [ "$2" = placement ] && n=2; [ "$2" = placement+cc ] && n=3
    if [ "$n" = 1 ]; then [ "$1" = server ] && echo "$FIRST" || echo "$LAST"; return; fi
    if [ "$NCPU" -ge 6 ]; then  # server: the first n CPUs, client: the last n
        [ "$1" = server ] && set -- $CPUS || set -- $(echo $CPUS | tr ' ' '\n' | tail -n "$n" | tr '\n' ' ')
        echo "$@" | cut -d' ' -f1-"$n" | tr ' ' ,
        return
    fi
    own=$FIRST; other=$LAST; [ "$1" = client ] && own=$LAST && other=$FIRST
    [ "$n" = 2 ] && echo "0@$own,1@$other" || echo "0@$own,1@$other,2@$other"
}
conf() {  # role ip mac peer_ip peer_mac pipeline
    cat <<EOC
[engine]
max_payload = 4096
${ENGINE_EXTRA:-}
[device memif]
driver = dpdk
address = $2
lcores = $(lcores "$1" "$6")
pipeline = $6
eal_args = --no-huge --no-pci --log-level lib.eal:warning --vdev=net_memif0,role=$1,id=0,socket=$T/memif.sock,socket-abstract=no,mac=$3,bsize=8192
neighbours = $4 $5
tx_max_l3 = 4196
EOC
}
perf_pair() {  # perf_pair pipeline <client args...>: the client's JSON in $T/c.json
    pl=$1; shift
    conf server 10.0.1.1 02:00:00:00:01:01 10.0.1.2 02:00:00:00:01:02 "$pl" > "$T/s.conf"
    conf client 10.0.1.2 02:00:00:00:01:02 10.0.1.1 02:00:00:00:01:01 "$pl" > "$T/c.conf"
    rm -f "$T/memif.sock"
    "$PERF" --config "$T/s.conf" --json --accept-timeout 30 > "$T/s.json" 2> "$T/s.err" &
    i=0; while [ ! -S "$T/memif.sock" ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done
    "$PERF" 10.0.1.1 --config "$T/c.conf" --json "$@" > "$T/c.json" 2> "$T/c.err" || cat "$T/c.err"
    wait
}
: > "$T/rates.txt"
for round in $(seq "$ROUNDS"); do
    [ "$ROUNDS" -gt 1 ] && echo "--- round $round ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1 /proc/loadavg))"
    : > "$T/bare.txt"
    [ -z "$SIZES" ] ||  # SIZES="": the latency pair alone
        "$BENCH" --memif --payload "$(echo $SIZES | tr ' ' ,)" --seconds "$S" 2>/dev/null | grep -v '^EAL' | tee "$T/bare.txt"
    for size in $SIZES; do
        for pl in $PIPELINES; do
            perf_pair "$pl" -s "$size" -D "$S"
            python3 - "$T/c.json" "$size" "$T/bare.txt" "$T/s.json" "$round" "$pl" "$T/rates.txt" <<'EOP'
import json, sys
j = json.load(open(sys.argv[1]))
size, rnd, pl = int(sys.argv[2]), sys.argv[5], sys.argv[6]
try:
    sj = json.load(open(sys.argv[4]))
except (OSError, ValueError):
    sj = {"engine": {"stage_copies": 0, "stage_cc_records": 0, "udp_tx_packets": 0}}
pps = j["engine"]["udp_tx_packets"] / j["seconds"]
bare = {int(l.split()[2]): float(l.split()[3]) * 1e6 for l in open(sys.argv[3]) if l.startswith("memif-plain")}
stages = ""
if pl != "none":
    stages = (f", stage copies (server) {sj['engine']['stage_copies']}, window records client "
              f"{j['engine']['stage_cc_records']} server {sj['engine']['stage_cc_records']}")
print(f"mroce-perf  write {size:>5} B, pipeline {pl}: {pps/1e6:7.3f} Mpps sent by the client (data + control), "
      f"{j['goodput_gbps']:7.3f} Gbit/s goodput, {j['msg_rate']:.0f} msg/s, retransmits {j['retransmits']}, "
      f"server sent {sj['engine']['udp_tx_packets'] / max(j['messages'], 1):.2f} packets (acks) per message{stages}")
if size in bare:
    print(f"  messages/s vs the bare loop's packets/s at {size} B: {j['msg_rate'] / bare[size]:.2f}")
with open(sys.argv[7], "a") as f:
    f.write(f"{rnd} {size} {pl} {j['msg_rate']:.1f} {bare.get(size, 0):.1f}\n")
EOP
        done
    done
done
if [ "$(echo $PIPELINES | wc -w)" -gt 1 ]; then
    python3 - "$T/rates.txt" <<'EOP'
import sys
rows = [l.split() for l in open(sys.argv[1])]
rate = {(r, int(s), p): float(m) for r, s, p, m, _ in rows}
bare = {(r, int(s)): float(b) for r, s, _, _, b in rows}
pls = list(dict.fromkeys(p for _, _, p, _, _ in rows))
print("\nround  size  bare loop Mpps  " + "  ".join(f"{p + ' msg/s (/none)':>28}" for p in pls))
for r, s in sorted(bare, key=lambda k: (int(k[1]), int(k[0]))):
    base = rate.get((r, s, "none"))
    cells = []
    for p in pls:
        m = rate.get((r, s, p), 0)
        cells.append(f"{m / 1e6:10.3f} M" + (f" ({m / base:.2f})" if base and p != "none" else " " * 7))
    print(f"{r:>5} {s:>5}  {bare[(r, s)] / 1e6:14.3f}  " + "  ".join(f"{c:>28}" for c in cells))
EOP
fi
[ "${LAT:-1}" = 0 ] && exit 0
"$BENCH" --memif --lat --seconds "$S" 2>/dev/null | grep -v '^EAL' | tee "$T/pp.txt"
perf_pair none --lat -n 20000
python3 - "$T/c.json" "$T/pp.txt" "$T/s.json" <<'EOP'
import json, sys
j = json.load(open(sys.argv[1]))
pp = [l.split() for l in open(sys.argv[2]) if l.startswith("memif-pingpong")]
try:
    sent = f"{json.load(open(sys.argv[3]))['engine']['udp_tx_packets'] / max(j['messages'], 1):.3f}"
except (OSError, ValueError):
    sent = "?"
print(f"mroce-perf --lat  8-byte WRITE round trip: p50 {j['lat_p50_us']:.2f} us, p99 {j['lat_p99_us']:.2f} us; "
      f"per round trip the client sent {j['engine']['udp_tx_packets'] / max(j['messages'], 1):.3f} packets, the server "
      f"{sent}; client tail-loss probes {sum(p['tail_probes'] for p in j['path'])}, duplicates at the client "
      f"(the server's probes) {j['duplicates']}, in {j['messages']} round trips")
if pp:
    print(f"  p50 vs the bare memif ping-pong's: {j['lat_p50_us'] / float(pp[0][2]):.2f}")
EOP
