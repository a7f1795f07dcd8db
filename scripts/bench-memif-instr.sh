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
# LAT=1: the round trip instead (doc/performance.md 7.3, round 27): mroce-perf
# --lat with N1 and N2 8-byte WRITE round trips, and beside it, in the same
# run, the bare memif ping-pong (mroce-dpdk-bench --memif --lat --side, its
# ends as separate processes, one profiled, the other native, as for
# mroce-perf), N1 and N2 round trips each. Prints instructions per round trip
# per end by part, both side by side; the clock reads per round trip (the
# bare loop reads it once per poll, so they count its polls), mroce's passes,
# packets, tail-loss probes (R-TIMER-8) and duplicates per round trip.
# BOTH=1 (LAT=1): both ends under callgrind in the same runs, so that, as
# natively and unlike with one end 50x slower than the other, each end mostly
# takes the peer's answer and the ACK behind it in receives of their own
# (round 43: with one end profiled, that end took both in one burst of two
# in every round trip); prints each end's receive bursts with frames.
# ENGINE_EXTRA: a line added to both ends' [engine] section (e.g.
# "ack_delay_us = 0"), to compare settings in one build. LAT=1 defaults it to
# "ack_delay_us = 1000000" (ENGINE_EXTRA= sets none): under callgrind the
# native end's tail-loss probes, due newest.sent + 2 srtt + ack_delay
# (R-TIMER-8), fired 0.2-0.9 times per round trip (the profiled end is 50x
# slower), and they move the counts as much as a change does; a second of
# ack_delay puts them out of reach and changes nothing else in a ping-pong,
# whose every packet ends its message and is acknowledged at once (R-ACK-1;
# doc/performance.md 7.3, round 33: 0 probes, 2.000 packets per end).
#   scripts/bench-memif-instr.sh [BUILD_DIR] [N1] [N2] [-- more mroce-perf client args]
set -eu
B=${1:-build}
[ "${LAT:-0}" = 0 ] || ENGINE_EXTRA=${ENGINE_EXTRA-ack_delay_us = 1000000}
N1=${2:-20000}
N2=${3:-70000}
[ $# -ge 3 ] && shift 3 || shift $#
[ "${1:-}" = "--" ] && shift
PERF=$B/app/perf/mroce-perf
BENCH=${BENCH:-$B/app/dpdk-bench/mroce-dpdk-bench}  # LAT=1: needs --side (this tree's)
LAT=${LAT:-0}
command -v valgrind >/dev/null || { echo "bench-memif-instr.sh: valgrind not installed" >&2; exit 2; }
[ -x "$PERF" ] || { echo "bench-memif-instr.sh: $PERF not built" >&2; exit 2; }
[ "$LAT" = 0 ] || [ -x "$BENCH" ] || { echo "bench-memif-instr.sh: $BENCH not built" >&2; exit 2; }
T=$(mktemp -d /tmp/mroce-memif-instr.XXXXXX)
trap 'rm -rf "$T"' EXIT
conf() {  # role ip mac peer_ip peer_mac cpu
    cat <<EOC
[engine]
max_payload = 4096
min_rto_us = 2000000
initial_rto_us = 2000000
max_rto_us = 4000000
${ENGINE_EXTRA:-}
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
    # BOTH=1: one pair of runs profiles both ends (cg.client.N and cg.server.N).
    [ "${BOTH:-0}" = 0 ] || [ "$role" = client ] || break
    for n in "$N1" "$N2"; do
        vg="valgrind --tool=callgrind --callgrind-out-file=$T/cg.$role.$n"
        s=""; c=""
        if [ "${BOTH:-0}" != 0 ]; then s="valgrind --tool=callgrind --callgrind-out-file=$T/cg.server.$n"; c=$vg
        elif [ "$role" = server ]; then s=$vg; else c=$vg; fi
        rm -f "$T/memif.sock"
        $s "$PERF" --config "$T/s.conf" --json --accept-timeout 120 > "$T/s.json" 2> "$T/s.err" &
        i=0; while [ ! -S "$T/memif.sock" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
        mode="-s 64"; [ "$LAT" = 0 ] || mode=--lat
        $c "$PERF" 10.0.1.1 --config "$T/c.conf" --json $mode -n "$n" "$@" > "$T/c.$role.$n.json" 2> "$T/c.err" ||
            { cat "$T/c.err" "$T/s.err" >&2; exit 1; }
        wait
        cp "$T/s.json" "$T/s.$role.$n.json"
        [ "${BOTH:-0}" = 0 ] || { cp "$T/s.json" "$T/s.server.$n.json"; cp "$T/c.$role.$n.json" "$T/c.server.$n.json"; }
    done
done
if [ "$LAT" != 0 ] && [ "${BARE:-1}" != 0 ]; then  # BARE=0: mroce-perf alone
    for role in client server; do
        for n in "$N1" "$N2"; do
            vg="valgrind --tool=callgrind --fair-sched=yes --callgrind-out-file=$T/cg.bare.$role.$n"
            s=""; c=""
            if [ "$role" = server ]; then s=$vg; else c=$vg; fi
            rm -f "$T/bare.sock"
            $s "$BENCH" --memif --lat --side server --socket "$T/bare.sock" --iters "$n" --seconds 100000 \
                > "$T/bs.out" 2> "$T/bs.err" &
            i=0; while [ ! -S "$T/bare.sock" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
            $c "$BENCH" --memif --lat --side client --socket "$T/bare.sock" --iters "$n" --seconds 100000 \
                > "$T/bc.out" 2> "$T/bc.err" || { cat "$T/bc.err" "$T/bs.err" >&2; exit 1; }
            wait
        done
    done
fi
python3 - "$T" "$N1" "$N2" "$LAT" <<'EOP'
import glob, json, os, re, subprocess, sys
t, n1, n2, lat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] != "0"
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
    k = re.sub(r"^(?:void|bool|auto|unsigned long|int) (?=mroce::)", "", k)  # a template's return type
    if k.startswith("mroce::dpdk::") or "DpdkTransport" in k: return "DPDK driver (DpdkPort, PlanePorts, transport)"
    if "rte_" in k or "librte" in k or "pmds-" in k: return "DPDK libraries + memif PMD"
    if k.startswith(("mroce::Device", "mroce::Connection")): return "lib/api (Device, Connection, drive loop)"
    if k.startswith("mroce::"): return "engine (lib/engine, lib/cc, wire)"
    if "::pct(" in k: return "mroce-perf pct() (after the timed loop)"
    if "anonymous namespace" in k or k.startswith(("main", "memif_side", "run_memif")): return "mroce-perf / the bare loop (app)"
    return "libc and other"
def per_op(a, b):
    return {k: (b.get(k, 0) - a.get(k, 0)) / (n2 - n1) for k in set(a) | set(b)}
def by_part(d):
    parts = {}
    for k, v in d.items():
        parts.setdefault(part(k), []).append((v, k))
    return parts
if lat:
    def calls(f, pat):  # calls made to functions whose name holds pat (the raw file's cfn=/calls= lines)
        names, tot, cur = {}, 0, None
        for line in open(f):
            m = re.match(r"c?fn=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
            if m:
                if m.group(2): names[m.group(1)] = m.group(2)
                cur = m.group(1) if line.startswith("cfn") else None
            elif line.startswith("calls=") and cur is not None:
                if pat in names.get(cur, ""): tot += int(line.split()[0][6:])
                cur = None
        return tot
    # The bare loop reads the clock once per poll: polls per round trip. An
    # empty poll costs about (memif's receive function, the clock read, the
    # loop's own lines) / polls (their work for the one frame spread over the
    # polls: an upper bound), so the bare end's work per round trip is about
    # its total less (polls - 1) empty polls ("net" below).
    bare_net = {"client": 0.0, "server": 0.0}
    have_bare = os.path.exists(f"{t}/cg.bare.server.{n2}")
    for role in ("client", "server") if have_bare else ():
        a, b = f"{t}/cg.bare.{role}.{n1}", f"{t}/cg.bare.{role}.{n2}"
        polls = (calls(b, 'steady_clock::now') - calls(a, 'steady_clock::now')) / (n2 - n1)
        d = per_op(load(a), load(b))
        rx = max((v for k, v in d.items() if "librte_net_memif" in k), default=0.0)  # its receive, called every poll
        loop = sum(v for k, v in d.items() if "memif_side" in k or "steady_clock::now" in k or "clock_gettime" in k)
        empty = (rx + loop) / polls if polls else 0.0
        bare_net[role] = sum(d.values()) - max(polls - 1, 0) * empty
        print(f"bare {role} profiled: {polls:.2f} polls (clock reads) per round trip, an empty poll at most "
              f"{empty:.1f} instructions, the end's work per round trip about {bare_net[role]:.1f}")
    rows, tot = {}, {}
    for role in ("client", "server"):
        js = {n: (json.load(open(f"{t}/c.{role}.{n}.json")), json.load(open(f"{t}/s.{role}.{n}.json"))) for n in (n1, n2)}
        dif = lambda f: (f(*js[n2]) - f(*js[n1])) / (n2 - n1)
        pe = (lambda c, s: c["engine"]["progress_passes"]) if role == "client" else (lambda c, s: s["engine"]["progress_passes"])
        print(f"mroce {role} profiled: per round trip {dif(pe):.2f} passes of the profiled end, packets sent by the "
              f"client {dif(lambda c, s: c['engine']['udp_tx_packets']):.3f}, by the server "
              f"{dif(lambda c, s: s['engine']['udp_tx_packets']):.3f}; " +
              ", ".join(f"{n} round trips: client tail-loss probes {sum(p['tail_probes'] for p in js[n][0]['path'])}, "
                        f"duplicates at the client {js[n][0]['duplicates']}, retransmits {js[n][0]['retransmits']}"
                        for n in (n1, n2)))
        d = per_op(load(f"{t}/cg.{role}.{n1}"), load(f"{t}/cg.{role}.{n2}"))
        # Driver transmit calls (each one PMD burst here: one plane, one queue, bursts under 32).
        a, b = f"{t}/cg.{role}.{n1}", f"{t}/cg.{role}.{n2}"
        print(f"mroce {role} profiled: {(calls(b, 'DpdkPort::tx_burst(') - calls(a, 'DpdkPort::tx_burst(')) / (n2 - n1):.3f} "
              f"transmit bursts (DpdkPort::tx_burst calls) per round trip")
        # Empty polls included: each end receives 2.000 packets per round trip, so under 2 polls means bursts of two.
        print(f"mroce {role} profiled: {(calls(b, 'DpdkPort::rx_burst(') - calls(a, 'DpdkPort::rx_burst(')) / (n2 - n1):.3f} "
              f"receive polls (DpdkPort::rx_burst calls) per round trip")
        bd = per_op(load(f"{t}/cg.bare.{role}.{n1}"), load(f"{t}/cg.bare.{role}.{n2}")) if have_bare else {}
        for name, dd in ((f"{role} mroce", d), (f"{role} bare", bd)):
            tot[name] = sum(dd.values())
            for p, l in by_part(dd).items():
                rows.setdefault(p, {})[name] = (sum(v for v, _ in l), sorted(l, reverse=True)[:3])
    cols = ["client mroce", "client bare", "server mroce", "server bare"]
    print("\ninstructions per round trip, each end (mroce-perf --lat / bare memif ping-pong):")
    print(f"  {'part':<46}" + "".join(f"{c:>14}" for c in cols))
    for p in sorted(rows, key=lambda p: -sum(v[0] for v in rows[p].values())):
        print(f"  {p[:46]:<46}" + "".join(f"{rows[p].get(c, (0.0,))[0]:14.1f}" for c in cols))
    print(f"  {'total':<46}" + "".join(f"{tot[c]:14.1f}" for c in cols))
    print(f"both ends: mroce {tot['client mroce'] + tot['server mroce']:.1f}, bare {tot['client bare'] + tot['server bare']:.1f} "
          f"(net of its empty polls about {bare_net['client'] + bare_net['server']:.1f})")
    for c in cols:
        print(f"\n{c}, largest functions per part:")
        for p in sorted(rows, key=lambda p: -rows[p].get(c, (0.0,))[0]):
            if c in rows[p] and rows[p][c][0] >= 10:
                print(f"  {rows[p][c][0]:8.1f}  {p}")
                for v, k in rows[p][c][1]:
                    if v >= 10:
                        print(f"              {v:7.1f}  {k[:110]}")
    sys.exit(0)
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
