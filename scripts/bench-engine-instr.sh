#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Instructions per data packet of the engine (doc/performance.md section 1),
# where no hardware counters exist (a VM): mroce-bench-engine runs twice under
# callgrind, with N1 and N2 packets, and the difference of the two runs is
# divided by the difference of their data packets (messages, when each is of
# one packet's size: several may share a WRITE_PACK), so setup cancels. Prints
# all instructions, the libc copies (wire assembly, placement, baseline), the
# benchmark's own code, and what remains: the engine, both ends.
#   scripts/bench-engine-instr.sh [BUILD_DIR | BINARY] [N1] [N2] [-- more mroce-bench-engine args]
set -eu
B=${1:-build}
N1=${2:-20000}
N2=${3:-70000}
[ $# -ge 3 ] && shift 3 || shift $#
[ "${1:-}" = "--" ] && shift
if [ -f "$B" ]; then BIN=$B; else BIN=$B/test/bench/mroce-bench-engine; fi
command -v valgrind >/dev/null || { echo "bench-engine-instr.sh: valgrind not installed (apt-get install valgrind)" >&2; exit 2; }
[ -x "$BIN" ] || { echo "bench-engine-instr.sh: $BIN not built (ninja -C $B test/bench/mroce-bench-engine)" >&2; exit 2; }
T=$(mktemp -d /tmp/mroce-instr.XXXXXX)
trap 'rm -rf "$T"' EXIT
for n in "$N1" "$N2"; do
    valgrind --tool=callgrind --callgrind-out-file="$T/cg.$n" "$BIN" -n "$n" "$@" > "$T/out.$n" 2> "$T/err.$n" ||
        { cat "$T/err.$n" >&2; exit 1; }
done
python3 - "$T" "$N1" "$N2" <<'EOP'
import re, subprocess, sys
t, n1, n2 = sys.argv[1], sys.argv[2], sys.argv[3]
def load(n):
    out = subprocess.run(["callgrind_annotate", "--threshold=100", f"{t}/cg.{n}"],
                         capture_output=True, text=True, check=True).stdout
    total, fn = 0, {}
    for line in out.split("-- Auto-annotated")[0].splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(.*)$", line)
        if not m or "=>" in line:
            continue
        v, name = int(m.group(1).replace(",", "")), m.group(2)
        if "PROGRAM TOTALS" in name:
            total = v
        else:
            fn[name] = fn.get(name, 0) + v
    out = open(f"{t}/out.{n}").read()
    pk = int(re.search(r"(\d+) data packets", out).group(1))
    # Messages of one packet each (-s up to the segment size): per message,
    # since WRITE_PACK (R-PACK-3) carries several in one data packet; before
    # packing the two counts were equal. Larger messages: per data packet.
    m = re.search(r"mtu (\d+) B.*\((\d+) x (\d+) B WRITE\)", out)
    if m and int(m.group(3)) <= int(m.group(1)):
        pk = int(m.group(2))
    return total, fn, pk
t1, f1, p1 = load(n1)
t2, f2, p2 = load(n2)
pk = p2 - p1
d = lambda pred: sum(f2.get(k, 0) - f1.get(k, 0) for k in set(f1) | set(f2) if pred(k)) / pk
copies = d(lambda k: "memmove" in k or "memcpy" in k)
harness = d(lambda k: "bench_engine.cpp" in k)
total = (t2 - t1) / pk
print(f"instructions per data packet or one-packet message (callgrind, runs of {p1} and {p2}, difference / {pk}):")
rows = [("all", total), ("libc copies (wire assembly, placement, baseline)", copies),
        ("benchmark harness", harness), ("engine, both ends", total - copies - harness)]
for name, v in rows:
    print(f"  {name:<50} {v:8.1f}")
EOP
