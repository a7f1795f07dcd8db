#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 The mroce authors
#
# The project's test command (README; .ci/run calls it):
#   setup -> configure build-ci (-Dwerror=true) -> build -> meson test
#         -> the same in build-ci-asan (ASan + UBSan, -O1) -> fuzz 60 s
# Prints exactly one summary line "N passed, M failed" (meson tests of both
# builds + the fuzz run; a failed configure or build counts as one failure)
# and exits non-zero if anything failed. Above it: each failed test's last lines
# and name (CI shows only the tail of what this prints).
#
# Environment: FUZZ_SECONDS (default 60), MESON_TEST_ARGS (extra meson test
# args), SANITIZE=0 (skip the sanitizer build).
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
bdir=build-ci
fuzz_secs="${FUZZ_SECONDS:-60}"
passed=0
failed=0
failed_names=()  # "build-dir test:RESULT", listed again just above the summary (CI shows the tail)
failed_tails=()  # files with the last lines of each failed test's output

if ! bash scripts/setup.sh; then
  echo "run-tests.sh: setup failed" >&2
  echo "0 passed, 1 failed"
  exit 1
fi

# Configure: reconfigure an existing build dir, start afresh when it is missing
# or broken (e.g. made by another meson version).
configure() {  # dir, meson options...
  local dir=$1
  shift
  if [[ -f "$dir/meson-private/coredata.dat" ]] && meson setup --reconfigure "$dir" "$@"; then return 0; fi
  if [[ -d "$dir" ]] && meson setup --wipe "$dir" "$@"; then return 0; fi
  rm -rf "$dir"
  meson setup "$dir" "$@"
}

# Builds and runs the suite in a build dir; adds its counts to passed/failed.
suite() {  # dir, meson test options...
  local dir=$1
  shift
  if ! meson compile -C "$dir"; then
    echo "run-tests.sh: build in $dir failed" >&2
    failed=$((failed + 1))
    return
  fi
  rm -f "$dir/meson-logs/testlog.json"
  # shellcheck disable=SC2086
  meson test -C "$dir" --print-errorlogs --num-processes 2 "$@" ${MESON_TEST_ARGS:-}
  local mrc=$? tok tbad tnames
  read -r tok tbad tnames < <(python3 - "$dir/meson-logs/testlog.json" "$dir/meson-logs/failed-tails.txt" <<'PY'
import json, sys
ok = bad = 0
names = []
tails = []
try:
    with open(sys.argv[1]) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            t = json.loads(line)
            r = t.get("result", "")
            if r in ("OK", "EXPECTEDFAIL"):
                ok += 1
            elif r == "SKIP":
                pass
            else:  # FAIL, TIMEOUT, UNEXPECTEDPASS, ERROR, ...
                bad += 1
                names.append(f"{t.get('name', '?')}:{r}")
                out = (t.get("stdout") or "").rstrip().splitlines()[-6:]
                tails.append(f"--- {t.get('name', '?')} ({r}), its last lines:\n" + "\n".join(l[:300] for l in out))
except FileNotFoundError:
    pass
with open(sys.argv[2], "w") as f:
    f.write("\n".join(tails) + ("\n" if tails else ""))
print(ok, bad, " ".join(names))
PY
)
  passed=$((passed + tok))
  failed=$((failed + tbad))
  local n
  for n in $tnames; do failed_names+=("$dir $n"); done
  failed_tails+=("$dir/meson-logs/failed-tails.txt")
  # meson failed without recording a failed test (e.g. no tests ran): count it.
  if (( mrc != 0 && tbad == 0 )); then failed=$((failed + 1)); fi
}

if configure "$bdir" -Dwerror=true; then
  suite "$bdir"
else
  echo "run-tests.sh: configure of $bdir failed" >&2
  failed=$((failed + 1))
fi

# The same suite under AddressSanitizer and UBSan: no read or write outside
# an object, no undefined behaviour, no leak, whatever the input (bad input is
# a first-class case). UBSan stops at its first report so that it fails the
# test. SANITIZE=0 skips it. Not -Werror: the first build enforces warnings,
# and GCC 12 under -fsanitize warns falsely (-Wmaybe-uninitialized inside
# libstdc++'s <regex>, which Catch2 includes). -O1, as ASan's documentation
# advises: on the 2-core host that build took 1,185 s against 1,449 s at -O2
# and its suite 296 s against 256 s (2026-12-06, both runs beside the same
# other job): about 4 minutes less of CI; the -O2 build above still runs
# every test optimised.
if [[ "${SANITIZE:-1}" == 1 ]]; then
  if configure "$bdir-asan" -Db_sanitize=address,undefined -Db_lundef=false -Doptimization=1; then
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 suite "$bdir-asan" -t 3
  else
    echo "run-tests.sh: configure of $bdir-asan failed" >&2
    failed=$((failed + 1))
  fi
fi

if bash scripts/fuzz.sh "$fuzz_secs"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
fi

for f in "${failed_tails[@]}"; do cat "$f" 2>/dev/null; done
for n in "${failed_names[@]}"; do echo "run-tests.sh: failed: $n"; done
echo "$passed passed, $failed failed"
(( failed == 0 ))
