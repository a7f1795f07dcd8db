#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# mroce-perf over one net_memif plane beside two planes (two net_memif pairs,
# one ethdev per plane, R-PLANE-*), in one run (doc/performance.md, issue 21).
#   scripts/bench-dpdk-planes.sh [BUILD_DIR] [SECONDS] [REPS]
# Two processes, one lcore each (server: the first allowed CPU, client: the
# last); 64 KiB WRITEs for SECONDS each, REPS alternating runs of each
# arrangement; prints Gbit/s and the client's per-plane bytes.
set -eu
B=${1:-build}
S=${2:-3}
R=${3:-2}
PERF=$B/app/perf/mroce-perf
T=$(mktemp -d /tmp/mroce-planes-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
LAST=$(python3 -c 'import os; print(sorted(os.sched_getaffinity(0))[-1])')
FIRST=$(python3 -c 'import os; print(sorted(os.sched_getaffinity(0))[0])')

conf() {  # planes role me peer cpu
    v=""; ports=""; addrs=""; nb=""
    p=0
    while [ $p -lt "$1" ]; do
        n=$((p + 1))
        v="$v --vdev=net_memif$p,role=$2,id=0,socket=$T/m$p.sock,socket-abstract=no,mac=02:00:00:00:0$n:0$3,bsize=8192"
        ports="$ports${ports:+, }net_memif$p"
        addrs="$addrs${addrs:+, }10.0.$n.$3"
        nb="$nb${nb:+ | }10.0.$n.$4 02:00:00:00:0$n:0$4"
        p=$n
    done
    cat <<EOC
[engine]
max_payload = 4096
[device memif]
driver = dpdk
planes = $addrs
lcores = $5
eal_args = --no-huge --no-pci --log-level lib.eal:warning$v
dpdk_port = $ports
neighbours = $nb
tx_max_l3 = 4196
EOC
}
run() {  # planes
    conf "$1" server 1 2 "$FIRST" > "$T/s.conf"
    conf "$1" client 2 1 "$LAST" > "$T/c.conf"
    rm -f "$T"/m*.sock
    "$PERF" --config "$T/s.conf" --json --accept-timeout 30 > "$T/s.json" 2> "$T/s.err" &
    i=0; while [ ! -S "$T/m$(($1 - 1)).sock" ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done
    servers=10.0.1.1
    [ "$1" -gt 1 ] && servers=10.0.1.1,10.0.2.1
    "$PERF" "$servers" --config "$T/c.conf" -s 65536 -D "$S" > "$T/c.out" 2> "$T/c.err" || cat "$T/c.err"
    wait
    python3 - "$T/c.out" "$1" <<'EOP'
import sys
lines = open(sys.argv[1]).read().splitlines()
head = next(i for i, l in enumerate(lines) if l.split()[:2] == ["messages", "Gbit/s"])
gbps = float(lines[head + 1].split()[1])
retx = next(l.split()[1] for l in lines if l.startswith(" retransmits"))
planes = [l.split() for l in lines if len(l.split()) == 6 and l.split()[0].isdigit() and l.split()[1].count(".") == 3]
per = ", ".join(f"plane {p[0]} {int(p[3]) / 1e6:.0f} MB" for p in planes) if planes else "one plane"
print(f"{sys.argv[2]} plane(s): {gbps:6.2f} Gbit/s, retransmits {retx}; client tx {per}")
EOP
}
r=0
while [ $r -lt "$R" ]; do
    run 1
    run 2
    r=$((r + 1))
done
