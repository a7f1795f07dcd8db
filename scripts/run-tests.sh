#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 The mroce authors
#
# The project's test command (README; .ci/run calls it):
#   setup -> configure build-ci (-Dwerror=true) -> build -> meson test -> fuzz 60 s
# Prints exactly one summary line "N passed, M failed" (meson tests + the fuzz
# run; a failed configure or build counts as one failure) and exits non-zero
# if anything failed.
#
# Environment: FUZZ_SECONDS (default 60), MESON_TEST_ARGS (extra meson test args).
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
bdir=build-ci
fuzz_secs="${FUZZ_SECONDS:-60}"
passed=0
failed=0

if ! bash scripts/setup.sh; then
  echo "run-tests.sh: setup failed" >&2
  echo "0 passed, 1 failed"
  exit 1
fi

# Configure: reconfigure an existing build dir, start afresh when it is missing
# or broken (e.g. made by another meson version).
configured=0
if [[ -f "$bdir/meson-private/coredata.dat" ]]; then
  meson setup --reconfigure "$bdir" -Dwerror=true && configured=1
fi
if (( ! configured )); then
  if [[ -d "$bdir" ]]; then
    meson setup --wipe "$bdir" -Dwerror=true && configured=1
  else
    meson setup "$bdir" -Dwerror=true && configured=1
  fi
fi
if (( ! configured )) && [[ -d "$bdir" ]]; then
  rm -rf "$bdir"
  meson setup "$bdir" -Dwerror=true && configured=1
fi

built=0
if (( configured )); then
  meson compile -C "$bdir" && built=1
fi

if (( built )); then
  rm -f "$bdir/meson-logs/testlog.json"
  # shellcheck disable=SC2086
  meson test -C "$bdir" --print-errorlogs --num-processes 2 ${MESON_TEST_ARGS:-}
  mrc=$?
  counts=$(python3 - "$bdir/meson-logs/testlog.json" <<'PY'
import json, sys
ok = bad = 0
try:
    with open(sys.argv[1]) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line).get("result", "")
            if r in ("OK", "EXPECTEDFAIL"):
                ok += 1
            elif r == "SKIP":
                pass
            else:  # FAIL, TIMEOUT, UNEXPECTEDPASS, ERROR, ...
                bad += 1
except FileNotFoundError:
    pass
print(ok, bad)
PY
)
  read -r tok tbad <<<"$counts"
  passed=$((passed + tok))
  failed=$((failed + tbad))
  # meson failed without recording a failed test (e.g. no tests ran): count it.
  if (( mrc != 0 && tbad == 0 )); then failed=$((failed + 1)); fi
else
  echo "run-tests.sh: configure/build failed" >&2
  failed=$((failed + 1))
fi

if bash scripts/fuzz.sh "$fuzz_secs"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
fi

echo "$passed passed, $failed failed"
(( failed == 0 ))
