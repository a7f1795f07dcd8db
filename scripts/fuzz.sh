#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 The mroce authors
#
# Builds the wire-decoder libFuzzer target (test/fuzz/fuzz_decode.cpp) with
# ASan + UBSan, seeds its corpus from the golden vectors (test/vectors/*.hex)
# and runs it for a bounded time.
#
#   scripts/fuzz.sh [SECONDS]        default 60
#
# Environment: FUZZ_BUILD_DIR (default build-fuzz), CXX (default clang++),
# FUZZ_JOBS (parallel fuzzing processes, default 1).
# Exits non-zero on a build failure or on any crash / leak / sanitizer report;
# the crashing input is left in $FUZZ_BUILD_DIR/artifacts/.
set -euo pipefail

cd "$(dirname "$0")/.."
secs="${1:-60}"
case "$secs" in
  ''|*[!0-9]*) echo "fuzz.sh: time must be a whole number of seconds, got '$secs'" >&2; exit 2 ;;
esac
bdir="${FUZZ_BUILD_DIR:-build-fuzz}"
cxx="${CXX:-clang++}"
jobs="${FUZZ_JOBS:-1}"

mkdir -p "$bdir/corpus" "$bdir/artifacts"
bin="$bdir/fuzz_decode"

# Rebuild when a source is newer than the binary.
srcs=(lib/wire/codec.cpp test/fuzz/fuzz_decode.cpp lib/include/mroce/wire.hpp)
need=0
[[ -x "$bin" ]] || need=1
for s in "${srcs[@]}"; do [[ "$s" -nt "$bin" ]] && need=1; done
if (( need )); then
  echo "fuzz.sh: building $bin"
  "$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -Ilib/include lib/wire/codec.cpp test/fuzz/fuzz_decode.cpp -o "$bin"
fi

# Seed: each vector file's hex bytes (comments after '#' dropped) as one binary input.
seeds="$bdir/seeds"
rm -rf "$seeds"
mkdir -p "$seeds"
nseed=0
for f in test/vectors/*.hex; do
  [[ -e "$f" ]] || continue
  python3 -c 'import sys, re
text = re.sub(r"#[^\n]*", "", open(sys.argv[1]).read())
sys.stdout.buffer.write(bytes.fromhex("".join(text.split())))' "$f" > "$seeds/$(basename "$f" .hex)"
  nseed=$((nseed + 1))
done
echo "fuzz.sh: $nseed seed inputs from test/vectors, running ${secs}s"

extra=()
if (( jobs > 1 )); then extra=(-jobs="$jobs" -workers="$jobs"); fi

log="$bdir/fuzz.log"
set +e
ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}" \
UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
"$bin" "$bdir/corpus" "$seeds" \
  -max_total_time="$secs" -max_len=9100 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$bdir/artifacts/" \
  "${extra[@]}" \
  2>&1 | tee "$log" | grep -E '^(#[0-9]+[[:space:]]+(INITED|DONE)|stat::|==[0-9]+==|SUMMARY|fuzz_decode:|INFO: (Seed|Loaded|-max_len)|Done [0-9]+ runs|MS:|artifact_prefix|Test unit written)'
rc=${PIPESTATUS[0]}
set -e

execs=$(grep -E '^stat::number_of_executed_units:' "$log" | tail -1 | awk '{print $2}')
if (( rc != 0 )); then
  echo "fuzz.sh: FAILED (exit $rc); see $log and $bdir/artifacts/" >&2
  exit 1
fi
echo "fuzz.sh: ok, ${execs:-?} executions in ${secs}s, corpus $(find "$bdir/corpus" -type f | wc -l) inputs"
