#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 The mroce authors
#
# Regenerates doc/results.md's tables with mroce-sim: ring all-reduce goodput
# against random end-to-end loss for mroce and the RoCEv2 baseline (without
# and with PFC), each as a fraction of its own lossless run, beside 1 - p.
#
# usage: scripts/results.py [--build build] [--hosts 16] [--gbps 400] [--mib 16]
import argparse, json, subprocess, sys

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build")
ap.add_argument("--hosts", type=int, default=16)
ap.add_argument("--gbps", type=float, default=400)
ap.add_argument("--mib", type=int, default=16)
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()

sim = f"{a.build}/app/sim/mroce-sim"
base = ["config/sim/ring.conf", f"fabric.hosts={a.hosts}", f"fabric.link_gbps={a.gbps}",
        f"workload.bytes={a.mib << 20}", f"scenario.seed={a.seed}", "workload.time_limit_ms=2000"]
losses = [0, 0.001, 0.01, 0.05, 0.10]
kinds = [("mroce", ["scenario.transport=mroce"]),
         ("RoCEv2", ["scenario.transport=roce"]),
         ("RoCEv2+PFC", ["scenario.transport=roce", "fabric.pfc=true"])]

res = {}
for name, extra in kinds:
    for p in losses:
        out = subprocess.run([sim] + base + extra + [f"fabric.path_loss={p}", "--quiet"],
                             capture_output=True, text=True)
        if out.returncode not in (0, 1):
            sys.exit(f"mroce-sim failed: {out.stderr}")
        d = json.loads(out.stdout)
        res[(name, p)] = d
        print(f"# {name} loss {p}: {d['aggregate_gbps']:.1f} Gbit/s, completed {d['completed']}, "
              f"wall {d['wall_s']:.1f} s", file=sys.stderr)

print(f"Ring all-reduce, {a.hosts} hosts, 1 plane of leaf-spine (4 spines), {a.gbps:g} Gbit/s links, "
      f"{a.mib} MiB per host, random loss once per end-to-end path (data and acks), seed {a.seed}.\n")
print("| loss | limit 1-p | " + " | ".join(f"{n} Gbit/s/host | {n} of lossless" for n, _ in kinds) + " |")
print("|---" * (2 + 2 * len(kinds)) + "|")
for p in losses:
    row = [f"{p * 100:g}%", f"{1 - p:.3f}"]
    for n, _ in kinds:
        d, d0 = res[(n, p)], res[(n, 0)]
        per_host = d["aggregate_gbps"] / a.hosts
        frac = d["aggregate_gbps"] / d0["aggregate_gbps"] if d0["aggregate_gbps"] else 0
        mark = "" if d["completed"] else " (not done in 2 s)"
        row += [f"{per_host:.1f}{mark}", f"{frac:.3f}"]
    print("| " + " | ".join(row) + " |")
