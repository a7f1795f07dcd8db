#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Instructions per 64-byte WRITE message of the whole mroce-perf process, each
# end, over net_memif (doc/performance.md 7.3), where wall-clock figures swing
# 3x: one end runs under callgrind, the other natively (so the profiled end is
# the bottleneck and rarely polls empty), with N1 and N2 messages; the
# difference of the two runs over N2 - N1 cancels setup. RTOs are raised to
# seconds so valgrind's slowness causes no retransmission. Prints, per end,
# the cost by part: engine, DPDK driver (DpdkPort and its transport), the DPDK
# libraries and memif PMD, lib/api (Device, Connection, drive loop), mroce-perf,
# libc; mroce-perf's pct() (percentiles sorted after the timed loop) is listed
# apart.
#   scripts/bench-memif-instr.sh [BUILD_DIR] [N1] [N2] [-- more mroce-perf client args]
set -eu
B=${1:-build}
N1=${2:-20000}
N2=${3:-70000}
[ $# -ge 3 ] && shift 3 || shift $#
[ "${1:-}" = "--" ] && shift
PERF=$B/app/perf/mroce-perf
command -v valgrind >/dev/null || { echo "bench-memif-instr.sh: valgrind not installed" >&2; exit 2; }
[ -x "$PERF" ] || { echo "bench-memif-instr.sh: $PERF not built" >&2; exit 2; }
T=$(mktemp -d /tmp/mroce-memif-instr.XXXXXX)
trap 'rm -rf "$T"' EXIT
conf() {  # role ip mac peer_ip peer_mac cpu
    cat <<EOC
[engine]
max_payload = 4096
min_rto_us = 2000000
initial_rto_us = 2000000
max_rto_us = 4000000
[device memif]
driver = dpdk
address = $2
lcores = $6
eal_args = --no-huge --no-pci --log-level lib.eal:warning --vdev=net_memif0,role=$1,id=0,socket=$T/memif.sock,socket-abstract=no,mac=$3,bsize=8192
neighbours = $4 $5
tx_max_l3 = 4196
EOC
}
conf server 10.0.1.1 02:00:00:00:01:01 10.0.1.2 02:00:00:00:01:02 0 > "$T/s.conf"
conf client 10.0.1.2 02:00:00:00:01:02 10.0.1.1 02:00:00:00:01:01 1 > "$T/c.conf"
for role in client server; do
    for n in "$N1" "$N2"; do
        vg="valgrind --tool=callgrind --callgrind-out-file=$T/cg.$role.$n"
        s=""; c=""
        if [ "$role" = server ]; then s=$vg; else c=$vg; fi
        rm -f "$T/memif.sock"
        $s "$PERF" --config "$T/s.conf" --json --accept-timeout 120 > "$T/s.json" 2> "$T/s.err" &
        i=0; while [ ! -S "$T/memif.sock" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
        $c "$PERF" 10.0.1.1 --config "$T/c.conf" --json -s 64 -n "$n" "$@" > "$T/c.$role.$n.json" 2> "$T/c.err" ||
            { cat "$T/c.err" "$T/s.err" >&2; exit 1; }
        wait
    done
done
python3 - "$T" "$N1" "$N2" <<'EOP'
import json, re, subprocess, sys
t, n1, n2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def load(f):
    out = subprocess.run(["callgrind_annotate", "--threshold=100", f], capture_output=True, text=True, check=True).stdout
    fn = {}
    for line in out.split("-- Auto-annotated")[0].splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(.*)$", line)
        if not m or "PROGRAM TOTALS" in m.group(2):
            continue
        v, name = int(m.group(1).replace(",", "")), m.group(2)
        obj = re.search(r"\[([^\]]*)\]$", name)
        name = re.sub(r"\s*\[[^\]]*\]$", "", name)
        f = re.match(r"^(?:[^\s:(]*[/.][^\s:(]*|\?\?\?):(?!:)(.*)$", name)  # source file prefix
        if f:
            name = f.group(1)
        if name.startswith("0x") and obj:  # unnamed (stripped) functions: keep their object
            name += " " + obj.group(1).split("/")[-1]
        fn[name] = fn.get(name, 0) + v
    return fn
def part(k):
    if k.startswith("mroce::dpdk::") or "DpdkTransport" in k: return "DPDK driver (DpdkPort, PlanePorts, transport)"
    if "rte_" in k or "librte" in k or "pmds-" in k: return "DPDK libraries + memif PMD"
    if k.startswith(("mroce::Device", "mroce::Connection")): return "lib/api (Device, Connection, drive loop)"
    if k.startswith("mroce::"): return "engine (lib/engine, lib/cc, wire)"
    if "::pct(" in k: return "mroce-perf pct() (after the timed loop)"
    if "anonymous namespace" in k: return "mroce-perf (app/perf)"
    return "libc and other"
grand = 0.0
for role in ("client", "server"):
    for n in (n1, n2):
        j = json.load(open(f"{t}/c.{role}.{n}.json"))
        if j["retransmits"]:
            print(f"warning: {role} run with {n} messages retransmitted {j['retransmits']} times", file=sys.stderr)
    a, b = load(f"{t}/cg.{role}.{n1}"), load(f"{t}/cg.{role}.{n2}")
    d = {k: (b.get(k, 0) - a.get(k, 0)) / (n2 - n1) for k in set(a) | set(b)}
    parts = {}
    for k, v in d.items():
        parts.setdefault(part(k), []).append((v, k))
    total = sum(d.values())
    timed = total - sum(v for v, _ in parts.get("mroce-perf pct() (after the timed loop)", []))
    grand += timed
    print(f"{role} (sender)" if role == "client" else f"{role} (receiver)",
          f"instructions per message: {total:.1f}, without pct(): {timed:.1f}")
    for p, l in sorted(parts.items(), key=lambda x: -sum(v for v, _ in x[1])):
        print(f"  {sum(v for v, _ in l):8.1f}  {p}")
        for v, k in sorted(l, reverse=True)[:4]:
            if v >= 10:
                print(f"              {v:7.1f}  {k[:110]}")
print(f"both ends, without pct(): {grand:.1f} instructions per message")
EOP
