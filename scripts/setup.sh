#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 The mroce authors
#
# Installs every Debian 12 package the build, the tests, the fuzzer and the
# benchmarks need. Idempotent: does nothing (and does not touch the network)
# when all of them are already installed.
set -euo pipefail

packages=(
  meson ninja-build g++ pkg-config
  libdpdk-dev libibverbs-dev libfmt-dev catch2 libhwloc-dev
  clang libclang-rt-14-dev
  ibverbs-utils perftest qperf iperf3
  nftables iproute2 linux-perf python3
)

# One dpkg-query for all: "<name> <status>" per installed-or-known package.
declare -A status=()
while read -r name st; do
  status["$name"]="$st"
done < <(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${packages[@]}" 2>/dev/null || true)
missing=()
for p in "${packages[@]}"; do
  [[ "${status[$p]:-}" == ii* ]] || missing+=("$p")
done

if (( ${#missing[@]} == 0 )); then
  echo "setup.sh: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup.sh: installing ${missing[*]}"
sudo=()
if (( EUID != 0 )); then sudo=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
"${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
