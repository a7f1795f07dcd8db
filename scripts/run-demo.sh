#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 The mroce authors
#
# Sets up, builds (build/, or $BUILD_DIR) and runs mroce-demo. Extra arguments go
# to the demo.
set -euo pipefail

cd "$(dirname "$0")/.."
bash scripts/setup.sh
bdir="${BUILD_DIR:-build}"
if [[ ! -f "$bdir/meson-private/coredata.dat" ]]; then
  meson setup "$bdir"
fi
meson compile -C "$bdir" mroce-demo
exec "$bdir/app/demo/mroce-demo" "$@"
