#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# mroce over net_memif beside the bare memif loop, in one run (doc/performance.md sections 4, 7).
#   scripts/bench-dpdk-memif.sh [BUILD_DIR] [SECONDS]
# Two processes, one lcore each (CPU 0: server/receiver, the last allowed CPU: client/sender).
# Message rate: 64-byte and 4 KiB WRITEs against the bare loop's packets/s
# (ratio printed); latency: mroce-perf --lat (8-byte WRITE round trip)
# against the bare memif ping-pong (mroce-dpdk-bench --memif --lat).
# Env: SIZES="64 4096" (message sizes), LAT=0 skips the latency part.
set -eu
B=${1:-build}
S=${2:-2}
PERF=$B/app/perf/mroce-perf
BENCH=$B/app/dpdk-bench/mroce-dpdk-bench
T=$(mktemp -d /tmp/mroce-memif-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
LAST=$(python3 -c 'import os; print(sorted(os.sched_getaffinity(0))[-1])')
FIRST=$(python3 -c 'import os; print(sorted(os.sched_getaffinity(0))[0])')

SIZES=${SIZES:-64 4096}
"$BENCH" --memif --payload "$(echo $SIZES | tr ' ' ,)" --seconds "$S" 2>/dev/null | grep -v '^EAL' | tee "$T/bare.txt"

conf() {  # role ip mac peer_ip peer_mac cpu
    cat <<EOC
[engine]
max_payload = 4096
[device memif]
driver = dpdk
address = $2
lcores = $6
eal_args = --no-huge --no-pci --log-level lib.eal:warning --vdev=net_memif0,role=$1,id=0,socket=$T/memif.sock,socket-abstract=no,mac=$3,bsize=8192
neighbours = $4 $5
tx_max_l3 = 4196
EOC
}
conf server 10.0.1.1 02:00:00:00:01:01 10.0.1.2 02:00:00:00:01:02 "$FIRST" > "$T/s.conf"
conf client 10.0.1.2 02:00:00:00:01:02 10.0.1.1 02:00:00:00:01:01 "$LAST" > "$T/c.conf"
perf_pair() {  # perf_pair <client args...>: the client's JSON in $T/c.json
    rm -f "$T/memif.sock"
    "$PERF" --config "$T/s.conf" --json --accept-timeout 30 > "$T/s.json" 2> "$T/s.err" &
    i=0; while [ ! -S "$T/memif.sock" ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done
    "$PERF" 10.0.1.1 --config "$T/c.conf" --json "$@" > "$T/c.json" 2> "$T/c.err" || cat "$T/c.err"
    wait
}
for size in $SIZES; do
    perf_pair -s "$size" -D "$S"
    python3 - "$T/c.json" "$size" "$T/bare.txt" <<'EOP'
import json, sys
j = json.load(open(sys.argv[1]))
size = int(sys.argv[2])
pps = j["engine"]["udp_tx_packets"] / j["seconds"]
bare = {int(l.split()[2]): float(l.split()[3]) * 1e6 for l in open(sys.argv[3]) if l.startswith("memif-plain")}
print(f"mroce-perf  write {size:>5} B: {pps/1e6:7.3f} Mpps sent by the client (data + control), "
      f"{j['goodput_gbps']:7.3f} Gbit/s goodput, {j['msg_rate']:.0f} msg/s, retransmits {j['retransmits']}")
if size in bare:
    print(f"  messages/s vs the bare loop's packets/s at {size} B: {j['msg_rate'] / bare[size]:.2f}")
EOP
done
[ "${LAT:-1}" = 0 ] && exit 0
"$BENCH" --memif --lat --seconds "$S" 2>/dev/null | grep -v '^EAL' | tee "$T/pp.txt"
perf_pair --lat -n 20000
python3 - "$T/c.json" "$T/pp.txt" <<'EOP'
import json, sys
j = json.load(open(sys.argv[1]))
pp = [l.split() for l in open(sys.argv[2]) if l.startswith("memif-pingpong")]
print(f"mroce-perf --lat  8-byte WRITE round trip: p50 {j['lat_p50_us']:.2f} us, p99 {j['lat_p99_us']:.2f} us")
if pp:
    print(f"  p50 vs the bare memif ping-pong's: {j['lat_p50_us'] / float(pp[0][2]):.2f}")
EOP
