#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 The mroce authors
#
# Issue 5's loopback comparison, all in one run on one machine, back to back:
#   kernel TCP (iperf3, one stream), the raw UDP socket ceiling (udp-ceiling,
#   GSO+GRO, at 4 KiB datagrams and at mroce-perf's segment size SEG; the same
#   through UdpPort; also a raw pair doing mroce-perf's memory work: its sender
#   reading 4 MiB of source, its receiver copying every payload into 4 MiB of
#   destination), mroce-perf WRITE at 64 KiB and 1 MiB, then latency: raw UDP
#   ping-pong, UdpPort ping-pong, mroce-perf --lat. mroce-perf runs in its
#   default buffer model (one buffer per stream, as perftest's ib_write_bw) and
#   with --slots (a slot per outstanding message: ~4 MiB each end, the memory
#   work the equal-work ceiling does).
# Prints one table with the ratios the targets are stated in; "vs raw ceiling"
# divides by the faster of the two raw ceilings, so a segment size cannot
# flatter the ratio.
#
# usage: scripts/bench-udp.sh [build-dir] [seconds]    (defaults: build, 3)
# Env: REPEAT=N runs every bandwidth figure N times and keeps the best (noise on
#      a shared machine only ever slows a run down); PIN="0 1" (server cpu,
#      client cpu; PIN= to run unpinned); PORT=base port; SEG=bytes of mroce's
#      segments (default 8192: max_payload = auto on loopback, MTU 65536);
#      ONLY=lat runs the latency figures alone, ROUNDS=N times interleaved
#      (raw, UdpPort, mroce, raw, ...), one row per round (issue 24).
set -euo pipefail

BUILD=${1:-build}
SECS=${2:-3}
REPEAT=${REPEAT:-1}
PORT=${PORT:-26000}
PIN=${PIN-"0 1"}
SEG=${SEG:-8192}
PERF=$BUILD/app/perf/mroce-perf
CEIL=$BUILD/app/udp-ceiling/mroce-udp-ceiling
for b in "$PERF" "$CEIL"; do
  [[ -x $b ]] || { echo "bench-udp: $b missing (ninja -C $BUILD)" >&2; exit 1; }
done
command -v iperf3 >/dev/null || { echo "bench-udp: iperf3 not installed" >&2; exit 1; }

read -r CPU_S CPU_C <<<"${PIN:-x x}"
CEIL_PIN=()
[[ -z $PIN ]] && CEIL_PIN=(--no-pin)  # udp-ceiling pins its pair to cpu0/cpu1 unless told not to
on() {  # on <cpu|x> cmd...: pinned unless PIN is empty
  local c=$1; shift
  if [[ $c == x ]]; then "$@"; else taskset -c "$c" "$@"; fi
}
json_field() { sed -n "s/.*\"$1\": \([0-9.e+-]*\).*/\1/p" | head -1; }
best() { sort -g | tail -1; }
port() { PORT=$((PORT + 10)); echo $PORT; }

iperf() {
  local p; p=$(port)
  on "$CPU_S" iperf3 -s -1 -p "$p" >/dev/null 2>&1 &
  local srv=$!
  sleep 0.3
  on "$CPU_C" iperf3 -c 127.0.0.1 -p "$p" -t "$SECS" -J 2>/dev/null |
    python3 -c 'import json,sys; print("%.3f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9))'
  wait "$srv" || true
}

ceiling() {  # ceiling <variant> <size> [args]: rx Gbit/s at datagrams of that payload
  local v=$1 sz=$2; shift 2
  "$CEIL" "${CEIL_PIN[@]}" --mode bw --variant "$v" --size "$sz" --seconds "$SECS" --port "$(port)" "$@" 2>&1 |
    sed -n 's/.* rx *\([0-9.]*\) Gbit\/s.*/\1/p' | head -1
}

perf_bw() {  # perf_bw <size> [client flags]: goodput Gbit/s; the client's JSON goes to $LOG
  local sz=$1; shift
  local p; p=$(port)
  on "$CPU_S" "$PERF" -p "$p" --json >/dev/null 2>&1 &
  local srv=$!
  sleep 0.3
  local out
  out=$(on "$CPU_C" "$PERF" 127.0.0.1 -p "$p" -s "$sz" -D "$SECS" --json "$@" 2>/dev/null) || true
  wait "$srv" || true
  echo "$out" >>"$LOG"
  echo "$out" | json_field goodput_gbps
}

perf_lat() {
  local p; p=$(port)
  on "$CPU_S" "$PERF" -p "$p" --spin-us 1000 --json >/dev/null 2>&1 &
  local srv=$!
  sleep 0.3
  local out
  out=$(on "$CPU_C" "$PERF" 127.0.0.1 -p "$p" --lat -n 20000 --json 2>/dev/null) || true
  wait "$srv" || true
  echo "$out" >>"$LOG"
  echo "$(echo "$out" | json_field lat_p50_us) $(echo "$out" | json_field lat_p99_us)"
}

pingpong() {  # pingpong raw|driver: "p50 p99" in us
  local v=()
  [[ $1 == driver ]] && v=(--variant driver --spin-us 1000) || v=(--spin)
  "$CEIL" "${CEIL_PIN[@]}" --mode lat "${v[@]}" --iters 20000 --port "$(port)" 2>&1 |
    sed -n 's/.*p50 *\([0-9.]*\) *p99 *\([0-9.]*\).*/\1 \2/p' | head -1
}

repeat_best() { local f=$1; shift; for _ in $(seq "$REPEAT"); do "$f" "$@"; done | best; }

LOG=$(mktemp /tmp/bench-udp.XXXXXX.jsonl)
if [[ ${ONLY:-} == lat ]]; then
  echo "# bench-udp latency $(date -u +%FT%TZ)  $(nproc) cpus  load $(cut -d' ' -f1-3 /proc/loadavg)  pin server/client: ${PIN:-none}"
  echo "| round | raw ping-pong p50 / p99 us | UdpPort ping-pong p50 / p99 us | mroce --lat p50 / p99 us | mroce p50 / UdpPort p50 |"
  echo "|---:|---:|---:|---:|---:|"
  for r in $(seq "${ROUNDS:-1}"); do
    read -r pp50 pp99 <<<"$(pingpong raw)"
    read -r dp50 dp99 <<<"$(pingpong driver)"
    read -r ml50 ml99 <<<"$(perf_lat)"
    printf '| %s | %s / %s | %s / %s | %s / %s | %s |\n' "$r" "$pp50" "$pp99" "$dp50" "$dp99" "$ml50" "$ml99" \
      "$(python3 -c "import sys; a,b=float(sys.argv[1] or 0),float(sys.argv[2] or 0); print('%.2f' % (a/b if b else 0))" "$ml50" "$dp50")"
  done
  rm -f "$LOG"
  exit 0
fi
echo "# bench-udp $(date -u +%FT%TZ)  $(nproc) cpus  load $(cut -d' ' -f1-3 /proc/loadavg)  ${SECS}s per run, best of $REPEAT, pin server/client: ${PIN:-none}"
tcp=$(repeat_best iperf)
raw4=$(repeat_best ceiling gso+gro 4096)
rawseg=$(repeat_best ceiling gso+gro "$SEG")
raw=$(printf '%s\n%s\n' "$raw4" "$rawseg" | best)
# UdpPort fed as the device's poll loop feeds it: bursts of 128 (its kTxBurst).
drv=$(repeat_best ceiling driver+gso+gro "$SEG" --batch 128)
# The memory work of mroce-perf --slots (~4 MiB each end, performance 5.6).
eqw=$(repeat_best ceiling gso+gro "$SEG" --footprint 4194304 --place 4194304)
m64=$(repeat_best perf_bw 65536)
m1m=$(repeat_best perf_bw 1048576)
s64=$(repeat_best perf_bw 65536 --slots)
s1m=$(repeat_best perf_bw 1048576 --slots)
read -r pp50 pp99 <<<"$(pingpong raw)"
read -r dp50 dp99 <<<"$(pingpong driver)"
read -r ml50 ml99 <<<"$(perf_lat)"

ratio() { python3 -c "import sys; a,b=float(sys.argv[1] or 0),float(sys.argv[2] or 0); print('%.2f' % (a/b if b else 0))" "$1" "$2"; }
printf '| %-52s | %12s |\n' "figure" "value"
printf '|%s|%s|\n' "$(printf -- '-%.0s' {1..54})" "-------------:"
printf '| %-52s | %7s Gbit/s |\n' "iperf3, one TCP stream" "$tcp"
printf '| %-52s | %7s Gbit/s |\n' "UDP ceiling: raw sockets, GSO+GRO, 4 KiB" "$raw4"
printf '| %-52s | %7s Gbit/s |\n' "UDP ceiling: raw sockets, GSO+GRO, $SEG B" "$rawseg"
printf '| %-52s | %7s Gbit/s |\n' "UDP ceiling: through UdpPort, GSO+GRO, $SEG B" "$drv"
printf '| %-52s | %7s Gbit/s |\n' "UDP ceiling: raw, $SEG B, 4 MiB source, placing" "$eqw"
printf '| %-52s | %7s Gbit/s |\n' "mroce-perf WRITE 64 KiB (one buffer, the default)" "$m64"
printf '| %-52s | %7s Gbit/s |\n' "mroce-perf WRITE 1 MiB (one buffer, the default)" "$m1m"
printf '| %-52s | %7s Gbit/s |\n' "mroce-perf WRITE 64 KiB --slots" "$s64"
printf '| %-52s | %7s Gbit/s |\n' "mroce-perf WRITE 1 MiB --slots" "$s1m"
printf '| %-52s | %5s / %5s |\n' "64 KiB / 1 MiB vs iperf3 (target >= 1)" "$(ratio "$m64" "$tcp")" "$(ratio "$m1m" "$tcp")"
printf '| %-52s | %5s / %5s |\n' "64 KiB / 1 MiB vs faster raw ceiling (target >= 0.8)" "$(ratio "$m64" "$raw")" "$(ratio "$m1m" "$raw")"
printf '| %-52s | %5s / %5s |\n' "64 KiB / 1 MiB vs UdpPort ceiling" "$(ratio "$m64" "$drv")" "$(ratio "$m1m" "$drv")"
printf '| %-52s | %5s / %5s |\n' "--slots 64 KiB / 1 MiB vs iperf3" "$(ratio "$s64" "$tcp")" "$(ratio "$s1m" "$tcp")"
printf '| %-52s | %5s / %5s |\n' "--slots 64 KiB / 1 MiB vs faster raw ceiling" "$(ratio "$s64" "$raw")" "$(ratio "$s1m" "$raw")"
printf '| %-52s | %5s / %5s |\n' "--slots 64 KiB / 1 MiB vs the equal-work raw ceiling" "$(ratio "$s64" "$eqw")" "$(ratio "$s1m" "$eqw")"
printf '| %-52s | %5s / %5s |\n' "UDP ping-pong raw busy-poll, 8 B, p50 / p99 us" "$pp50" "$pp99"
printf '| %-52s | %5s / %5s |\n' "UDP ping-pong through UdpPort, 8 B, p50 / p99 us" "$dp50" "$dp99"
printf '| %-52s | %5s / %5s |\n' "mroce-perf --lat 8 B WRITE round trip, p50 / p99 us" "$ml50" "$ml99"
printf '| %-52s | %12s |\n' "mroce --lat p50 / UdpPort ping-pong p50" "$(ratio "$ml50" "$dp50")"
echo "# mroce-perf client JSON (per-path retransmits, syscalls): $LOG"
