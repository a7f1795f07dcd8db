#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The engine's cost against the number of connections (doc/performance.md
# section 10, issue 22 item 3), with mroce-scale-bench:
#  1. instructions per data packet (callgrind, setup and ramp-up left out:
#     --instr-atstart=no, the benchmark starts instrumenting after --warmup)
#     with 8 and with 4,000 busy connections between two engines, and their ratio;
#  2. a 64-host all-to-all (4,032 connections) with the default configuration:
#     RSS and CPU time, --bytes per host (default 64M).
#   scripts/bench-scale.sh [BUILD_DIR | BINARY] [instr|a2a|all] [PACKETS] [BYTES]
set -eu
B=${1:-build}
WHAT=${2:-all}
N=${3:-30000}
BYTES=${4:-64M}
if [ -f "$B" ]; then BIN=$B; else BIN=$B/app/scale-bench/mroce-scale-bench; fi
[ -x "$BIN" ] || { echo "bench-scale.sh: $BIN not built (ninja -C $B app/scale-bench/mroce-scale-bench)" >&2; exit 2; }
T=$(mktemp -d /tmp/mroce-scale.XXXXXX)
trap 'rm -rf "$T"' EXIT
instr() {  # conns -> instructions per data packet
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$T/cg.$1" \
        "$BIN" --pairs "$1" -n "$N" --warmup 20000 --lean > "$T/out.$1" 2> "$T/err.$1" ||
        { cat "$T/err.$1" "$T/out.$1" >&2; exit 1; }
    ir=$(callgrind_annotate "$T/cg.$1" 2>/dev/null | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
    pk=$(sed -n 's/.* \([0-9]*\) data packets measured.*/\1/p' "$T/out.$1")
    echo "$ir $pk" | awk '{ printf "%.0f", $1 / $2 }'
}
if [ "$WHAT" = instr ] || [ "$WHAT" = all ]; then
    command -v valgrind >/dev/null || { echo "bench-scale.sh: valgrind not installed" >&2; exit 2; }
    i8=$(instr 8)
    i4k=$(instr 4000)
    echo "instructions per data packet (callgrind, $N packets after 20000 of warm-up, both engines and the loop):"
    echo "  8 connections      $i8"
    echo "  4000 connections   $i4k"
    echo "$i8 $i4k" | awk '{ printf "  ratio 4000 / 8     %.2f\n", $2 / $1 }'
fi
if [ "$WHAT" = a2a ] || [ "$WHAT" = all ]; then
    echo "64-host all-to-all, $BYTES per host, default configuration:"
    "$BIN" --hosts 64 --bytes "$BYTES" | sed 's/^/  /'
fi
