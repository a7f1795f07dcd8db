#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 The mroce authors
#
# Sets up, builds (build/, or $BUILD_DIR) and runs the main job:
#  1. mroce-demo, the wire-codec walk-through (extra arguments go to it);
#  2. a real transfer: two mroce-perf processes on 127.0.0.1, 1 MiB RDMA WRITEs
#     over 4 paths for $DEMO_SECONDS (default 3) seconds, byte-exact verified,
#     first without loss, then with 1% of received packets dropped on both
#     sides (mroce-perf's test-only fault injector), printing both results.
# Ports: $DEMO_PORT (default 47930) and the 36 above it.
set -euo pipefail

cd "$(dirname "$0")/.."
bash scripts/setup.sh
bdir="${BUILD_DIR:-build}"
if [[ ! -f "$bdir/meson-private/coredata.dat" ]]; then
  meson setup "$bdir"
fi
meson compile -C "$bdir" mroce-demo mroce-perf

"$bdir/app/demo/mroce-demo" "$@"

perf="$bdir/app/perf/mroce-perf"
port="${DEMO_PORT:-47930}"
secs="${DEMO_SECONDS:-3}"
server_pid=""
trap '[[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null || true' EXIT

# One server + one client run; the client's final table goes to stdout.
run() {
  local title="$1"
  shift
  echo
  echo "=== mroce-perf: $title ==="
  "$perf" -p "$port" --accept-timeout 30 "$@" >/dev/null &
  server_pid=$!
  sleep 0.3
  "$perf" 127.0.0.1 -p "$port" -s 1048576 -D "$secs" --verify "$@"
  wait "$server_pid"
  server_pid=""
}

run "1 MiB WRITE bandwidth, no loss"
run "1 MiB WRITE bandwidth, 1% injected loss" --inject-loss 0.01
