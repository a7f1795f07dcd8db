#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 The mroce authors
#
# A/B of mroce-perf between two builds (e.g. main before a change and after),
# interleaved so both see the same machine: per repetition one kernel TCP
# stream (iperf3) and the raw UDP ceiling, then mroce-perf WRITE 64 KiB and
# 1 MiB from build A and build B, alternating which goes first. Prints per
# repetition the goodputs and the client's timeouts / spurious timeouts, and
# per build and size the median ratio to the same repetition's iperf3.
# Unpinned (as PIN= in bench-udp.sh): on a shared machine pinning just queues
# a process behind whatever else runs on its core.
#
# usage: scripts/bench-udp-ab.sh <build-A> <build-B> [reps] [seconds]   (defaults: 3, 3)
# Env: PORT=base port; LOG=file for the raw JSON lines; AFLAGS / BFLAGS=extra
#      mroce-perf client flags for A / B (so A and B may be one build, e.g.
#      BFLAGS=--slots); FOOTPRINT=BYTES adds a raw ceiling whose sender
#      reads through that much source data (udp-ceiling --footprint); PLACE=BYTES
#      adds two raw ceilings whose receiver puts every payload into that much
#      destination memory, by a copy from its ring as mroce's engine does
#      (udp-ceiling --place) and straight from the socket (--place-direct);
#      their senders read FOOTPRINT bytes of source (0: one batch's), so with
#      both set they do the memory work mroce-perf's two ends do.
#      SEG=bytes of mroce's segments (default 8192, max_payload = auto on
#      loopback): the raw ceiling is the faster of 4 KiB and SEG-byte datagrams,
#      and the FOOTPRINT/PLACE ceilings use SEG-byte datagrams.
set -euo pipefail

A=${1:?usage: bench-udp-ab.sh <build-A> <build-B> [reps] [seconds]}
B=${2:?usage: bench-udp-ab.sh <build-A> <build-B> [reps] [seconds]}
REPS=${3:-3}
SECS=${4:-3}
PORT=${PORT:-43000}
LOG=${LOG:-$(mktemp /tmp/bench-udp-ab.XXXXXX.jsonl)}
read -r -a AF <<<"${AFLAGS:-}"
read -r -a BF <<<"${BFLAGS:-}"
FOOTPRINT=${FOOTPRINT:-0}
PLACE=${PLACE:-0}
SEG=${SEG:-8192}
CEIL=$B/app/udp-ceiling/mroce-udp-ceiling
for b in "$A/app/perf/mroce-perf" "$B/app/perf/mroce-perf" "$CEIL"; do
  [[ -x $b ]] || { echo "bench-udp-ab: $b missing" >&2; exit 1; }
done
command -v iperf3 >/dev/null || { echo "bench-udp-ab: iperf3 not installed" >&2; exit 1; }
port() { PORT=$((PORT + 10)); echo $PORT; }
: >"$LOG"

echo "# bench-udp-ab $(date -u +%FT%TZ)  $(nproc) cpus  load $(cut -d' ' -f1-3 /proc/loadavg)  A=$A ${AFLAGS:-} B=$B ${BFLAGS:-}  ${SECS}s per run, $REPS reps, raw ceiling: faster of 4096 / $SEG B"
for r in $(seq "$REPS"); do
  p=$(port)
  iperf3 -s -1 -p "$p" >/dev/null 2>&1 &
  sleep 0.3
  t=$(iperf3 -c 127.0.0.1 -p "$p" -t "$SECS" -J 2>/dev/null |
      python3 -c 'import json,sys; print("%.3f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9))')
  wait
  c=0
  for sz in 4096 "$SEG"; do
    x=$("$CEIL" --no-pin --mode bw --variant gso+gro --size "$sz" --seconds "$SECS" --port "$(port)" 2>&1 |
        sed -n 's/.* rx *\([0-9.]*\) Gbit\/s.*/\1/p' | head -1)
    c=$(printf '%s\n%s\n' "$c" "${x:-0}" | sort -g | tail -1)
  done
  echo "{\"rep\": $r, \"kind\": \"iperf3\", \"gbps\": ${t:-0}}" >>"$LOG"
  echo "{\"rep\": $r, \"kind\": \"ceiling\", \"gbps\": ${c:-0}}" >>"$LOG"
  if ((FOOTPRINT > 0)); then
    c=$("$CEIL" --no-pin --mode bw --variant gso+gro --size "$SEG" --seconds "$SECS" --footprint "$FOOTPRINT" \
        --port "$(port)" 2>&1 | sed -n 's/.* rx *\([0-9.]*\) Gbit\/s.*/\1/p' | head -1)
    echo "{\"rep\": $r, \"kind\": \"ceiling_fp\", \"gbps\": ${c:-0}}" >>"$LOG"
  fi
  if ((PLACE > 0)); then
    for kind in place direct; do
      extra=(--place "$PLACE" --footprint "$FOOTPRINT"); [[ $kind == direct ]] && extra+=(--place-direct)
      c=$("$CEIL" --no-pin --mode bw --variant gso+gro --size "$SEG" --seconds "$SECS" "${extra[@]}" \
          --port "$(port)" 2>&1 | sed -n 's/.* rx *\([0-9.]*\) Gbit\/s.*/\1/p' | head -1)
      echo "{\"rep\": $r, \"kind\": \"ceiling_$kind\", \"gbps\": ${c:-0}}" >>"$LOG"
    done
  fi
  if ((r % 2)); then order=(A B); else order=(B A); fi
  for s in 65536 1048576; do
    for k in "${order[@]}"; do
      if [[ $k == A ]]; then b=$A; f=("${AF[@]}"); else b=$B; f=("${BF[@]}"); fi
      p=$(port)
      "$b/app/perf/mroce-perf" -p "$p" --json >/dev/null 2>&1 &
      sleep 0.3
      o=$("$b/app/perf/mroce-perf" 127.0.0.1 -p "$p" -s "$s" -D "$SECS" "${f[@]}" --json 2>/dev/null) || o='{}'
      wait || true
      echo "{\"rep\": $r, \"kind\": \"$k\", \"run\": $o}" >>"$LOG"
    done
  done
done
echo "# end $(date -u +%FT%TZ)  load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$LOG" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
sizes = (65536, 1048576)
extra = [(k, t) for k, t in (("ceiling_fp", "raw, footprint"), ("ceiling_place", "raw, placing copy"),
                              ("ceiling_direct", "raw, placing direct")) if any(r["kind"] == k for r in rows)]
print("| rep | iperf3 | raw ceiling |%s A 64K | B 64K | A 1M | B 1M | timeouts/spurious A 64K, B 64K, A 1M, B 1M |"
      % "".join(" %s |" % t for _, t in extra))
print("|---:|---:|---:|%s---:|---:|---:|---:|---|" % ("---:|" * len(extra)))
ratios, craw, cplace = {}, {}, {}
for rep in sorted({r["rep"] for r in rows}):
    R = [r for r in rows if r["rep"] == rep]
    t = next(r["gbps"] for r in R if r["kind"] == "iperf3")
    c = next(r["gbps"] for r in R if r["kind"] == "ceiling")
    ce = [next((r["gbps"] for r in R if r["kind"] == k), 0.0) for k, _ in extra]
    cp = next((r["gbps"] for r in R if r["kind"] == "ceiling_place"), None)
    runs = {(r["kind"], r["run"].get("size")): r["run"] for r in R if r["kind"] in "AB"}
    def gp(k, s):
        return runs.get((k, s), {}).get("goodput_gbps", 0.0)
    def to(k, s):
        p = runs.get((k, s), {}).get("path", [])
        return "%d/%d" % (sum(x["timeouts"] for x in p), sum(x.get("spurious_timeouts", 0) for x in p))
    for k in "AB":
        for s in sizes:
            ratios.setdefault((k, s), []).append(gp(k, s) / t if t else 0.0)
            craw.setdefault((k, s), []).append(gp(k, s) / c if c else 0.0)
            if cp:
                cplace.setdefault((k, s), []).append(gp(k, s) / cp)
    print("| %d | %.1f | %.1f |%s %.1f | %.1f | %.1f | %.1f | %s |" % (
        rep, t, c, "".join(" %.1f |" % x for x in ce), gp("A", 65536), gp("B", 65536), gp("A", 1048576), gp("B", 1048576),
        ", ".join(to(k, s) for k, s in (("A", 65536), ("B", 65536), ("A", 1048576), ("B", 1048576)))))
for s in sizes:
    print("# %s: median vs iperf3  A %.2f  B %.2f   (per rep A %s, B %s)" % (
        "64 KiB" if s == 65536 else "1 MiB", statistics.median(ratios[("A", s)]), statistics.median(ratios[("B", s)]),
        " ".join("%.2f" % x for x in ratios[("A", s)]), " ".join("%.2f" % x for x in ratios[("B", s)])))
    print("# %s: median vs raw ceiling  A %.2f  B %.2f   (per rep A %s, B %s)" % (
        "64 KiB" if s == 65536 else "1 MiB", statistics.median(craw[("A", s)]), statistics.median(craw[("B", s)]),
        " ".join("%.2f" % x for x in craw[("A", s)]), " ".join("%.2f" % x for x in craw[("B", s)])))
    if cplace:
        print("# %s: median vs raw placing ceiling (copy)  A %.2f  B %.2f   (per rep A %s, B %s)" % (
            "64 KiB" if s == 65536 else "1 MiB", statistics.median(cplace[("A", s)]),
            statistics.median(cplace[("B", s)]), " ".join("%.2f" % x for x in cplace[("A", s)]),
            " ".join("%.2f" % x for x in cplace[("B", s)])))
# CPU per packet (client: per packet sent, server: per packet received) is the figure that
# survives other load: it counts the work, not the wall time another process took.
def nspp(run, side):
    try:
        if side == "client":
            return 1e9 * run["cpu_s"] / run["engine"]["udp_tx_packets"]
        return 1e9 * run["server"]["cpu_s"] / run["server"]["engine"]["rx_packets"]
    except (KeyError, ZeroDivisionError):
        return None
for s in sizes:
    for k in "AB":
        R = [r["run"] for r in rows if r["kind"] == k and r["run"].get("size") == s]
        c = [x for x in (nspp(r, "client") for r in R) if x]
        v = [x for x in (nspp(r, "server") for r in R) if x]
        if c and v:
            print("# %s %s: cpu ns/packet median  client %.0f  server %.0f   (client %s; server %s)" % (
                "64 KiB" if s == 65536 else "1 MiB", k, statistics.median(c), statistics.median(v),
                " ".join("%.0f" % x for x in c), " ".join("%.0f" % x for x in v)))
print("# raw JSON lines: " + sys.argv[1])
PY
