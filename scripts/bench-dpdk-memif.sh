#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# mroce over net_memif beside the bare memif loop, in one run (doc/performance.md section 4).
#   scripts/bench-dpdk-memif.sh [BUILD_DIR] [SECONDS]
# Two processes, one lcore each (CPU 0: server/receiver, the last allowed CPU: client/sender).
set -eu
B=${1:-build}
S=${2:-2}
PERF=$B/app/perf/mroce-perf
BENCH=$B/app/dpdk-bench/mroce-dpdk-bench
T=$(mktemp -d /tmp/mroce-memif-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
LAST=$(python3 -c 'import os; print(sorted(os.sched_getaffinity(0))[-1])')
FIRST=$(python3 -c 'import os; print(sorted(os.sched_getaffinity(0))[0])')

"$BENCH" --memif --payload 64,4096 --seconds "$S" 2>/dev/null | grep -v '^EAL'

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
for size in 64 4096; do
    rm -f "$T/memif.sock"
    "$PERF" --config "$T/s.conf" --json --accept-timeout 30 > "$T/s.json" 2> "$T/s.err" &
    i=0; while [ ! -S "$T/memif.sock" ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done
    "$PERF" 10.0.1.1 --config "$T/c.conf" --json -s "$size" -D "$S" > "$T/c.json" 2> "$T/c.err" || cat "$T/c.err"
    wait
    python3 - "$T/c.json" "$size" <<'EOP'
import json, sys
j = json.load(open(sys.argv[1]))
pps = j["engine"]["udp_tx_packets"] / j["seconds"]
print(f"mroce-perf  write {int(sys.argv[2]):>5} B: {pps/1e6:7.3f} Mpps sent by the client (data + control), "
      f"{j['goodput_gbps']:7.3f} Gbit/s goodput, {j['msg_rate']:.0f} msg/s, retransmits {j['retransmits']}")
EOP
done
