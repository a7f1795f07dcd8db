#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 The mroce authors
#
# Regenerates doc/results.md's tables with mroce-sim (app/sim), mroce beside
# the RoCEv2 baseline (without and with PFC) where the table has it:
#   (a) ring all-reduce goodput against random end-to-end loss, each
#       transport as a fraction of its own lossless run, beside 1 - p;
#   (b) 1, 2, 4, 8 planes, all-to-all with >= 4,000 connections: aggregate
#       / (planes x one plane);
#   (c) a plane failing mid-run and coming back (config/sim/plane-failure.conf):
#       goodput over time (CSV, and a PNG if matplotlib is installed), time to
#       95% of the surviving capacity, failed operations, the plane's reuse;
#   (d) 64:1 incast with and without receiver hints: Jain index from 2 RTTs,
#       overall, fraction of line rate, drops, peak queue.
# Prints the tables as markdown on stdout, progress on stderr.
#
# usage: scripts/results.py [--build build] [--tables a,b,c,d] [--hosts 16] [--gbps 400] [--mib 16]
#        [--b-hosts N] [--b-mib M] [--c-hosts N] [--d-senders N] [--csv-dir doc/results]
import argparse, csv, json, math, os, re, subprocess, sys

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build")
ap.add_argument("--tables", default="a,b,c,d")
ap.add_argument("--hosts", type=int, default=16, help="(a): hosts")
ap.add_argument("--gbps", type=float, default=400)
ap.add_argument("--mib", type=int, default=16, help="(a): MiB per host")
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--b-hosts", type=int, default=32)
ap.add_argument("--b-mib", type=int, default=8, help="(b): MiB per host and plane")
ap.add_argument("--b-planes", default="1,2,4,8")
ap.add_argument("--c-hosts", type=int, default=16)
ap.add_argument("--d-senders", type=int, default=64)
ap.add_argument("--d-mib", type=int, default=2, help="(d): MiB per sender")
ap.add_argument("--csv-dir", default="doc/results")
a = ap.parse_args()
tables = set(a.tables.split(","))
sim = f"{a.build}/app/sim/mroce-sim"


def run(conf, overrides, csv_path=None):
    cmd = [sim, conf] + overrides + [f"scenario.seed={a.seed}", "--quiet"]
    if csv_path:
        cmd += ["--csv", csv_path]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        sys.exit(f"mroce-sim failed ({' '.join(cmd)}): {out.stderr}")
    d = json.loads(out.stdout)
    print(f"# {' '.join(overrides)}: {d['aggregate_gbps']:.1f} Gbit/s, completed {d['completed']}, "
          f"wall {d['wall_s']:.1f} s", file=sys.stderr)
    return d


# ---------------------------------------------------------------------------- (a)
def table_a():
    base = ["workload.kind=ring_allreduce", f"fabric.hosts={a.hosts}", f"fabric.link_gbps={a.gbps}",
            f"workload.bytes={a.mib << 20}", "workload.time_limit_ms=2000"]
    losses = [0, 0.001, 0.01, 0.05, 0.10]
    kinds = [("mroce", ["scenario.transport=mroce"]),
             ("RoCEv2", ["scenario.transport=roce"]),
             ("RoCEv2+PFC", ["scenario.transport=roce", "fabric.pfc=true"])]
    res = {}
    for name, extra in kinds:
        for p in losses:
            res[(name, p)] = run("config/sim/ring.conf", base + extra + [f"fabric.path_loss={p}"])
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
    print()


# ---------------------------------------------------------------------------- (b)
# Per-connection state sized to the load (issue 22 item 3 is the engine's):
# thousands of connections each with a few packets in flight.
SMALL_CONNS = ["engine.csn_window=256", "engine.stream_depth=16", "engine.recv_depth=16",
               "engine.max_inline=0", "engine.max_send_sge=1", "engine.max_recv_sge=1"]


def table_b():
    n = a.b_hosts
    k = max(1, math.ceil(4000 / (n * (n - 1))))
    planes = [int(x) for x in a.b_planes.split(",")]
    res = {}
    for name, extra in [("mroce", ["scenario.transport=mroce"]), ("RoCEv2", ["scenario.transport=roce"])]:
        for p in planes:
            ov = ["workload.kind=all_to_all", f"fabric.hosts={n}", f"fabric.link_gbps={a.gbps}",
                  f"fabric.planes={p}", "fabric.spines=4", f"workload.conns_per_pair={k}",
                  f"workload.bytes={a.b_mib * p << 20}", f"engine.paths={2 * p}", "workload.time_limit_ms=100"]
            res[(name, p)] = run("config/sim/ring.conf", ov + extra + SMALL_CONNS)
    conns = n * (n - 1) * k
    print(f"All-to-all, {n} hosts, {k} connection(s) per ordered host pair: **{conns} concurrent mroce "
          f"connections** ({n * (n - 1) // 2} RoCEv2 QPs, one per host pair); P planes of leaf-spine "
          f"(4 spines each), one {a.gbps:g} Gbit/s NIC port per plane; {a.b_mib} MiB per host and plane "
          f"(so every run lasts about as long); mroce with 2 paths per plane (engine.paths = 2P); seed {a.seed}.\n")
    print("| planes | line Gbit/s (hosts x P x rate) | mroce Gbit/s | mroce of line | mroce agg / (P x one plane) "
          "| RoCEv2 Gbit/s | RoCEv2 agg / (P x one plane) | mroce job time us | mroce drops | mroce CE marks |")
    print("|---" * 10 + "|")
    for p in planes:
        m, m1 = res[("mroce", p)], res[("mroce", planes[0])]
        r, r1 = res[("RoCEv2", p)], res[("RoCEv2", planes[0])]
        line = n * p * a.gbps
        mark = "" if m["completed"] else " (not done)"
        print(f"| {p} | {line:.0f} | {m['aggregate_gbps']:.0f}{mark} | {m['aggregate_gbps'] / line:.3f} | "
              f"{m['aggregate_gbps'] / (p / planes[0] * m1['aggregate_gbps']):.3f} | {r['aggregate_gbps']:.0f} | "
              f"{r['aggregate_gbps'] / (p / planes[0] * r1['aggregate_gbps']):.3f} | {m['jct_us']:.0f} | "
              f"{m['fabric']['drops']} | {m['fabric']['ce_marks']} |")
    print()


# ---------------------------------------------------------------------------- (c)
def table_c():
    conf = "config/sim/plane-failure.conf"
    text = open(conf).read()
    ats = [int(x) for x in re.findall(r"^at_us\s*=\s*(\d+)", text, re.M)]
    target = int(re.findall(r"^target\s*=\s*(\d+)", text, re.M)[0])
    planes = int(re.findall(r"^planes\s*=\s*(\d+)", text, re.M)[0])
    t_down, t_up = ats[0], ats[1]
    os.makedirs(a.csv_dir, exist_ok=True)
    csv_path = os.path.join(a.csv_dir, f"plane-failure-{a.c_hosts}.csv")
    d = run(conf, [f"fabric.hosts={a.c_hosts}", f"fabric.link_gbps={a.gbps}"], csv_path)
    rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(open(csv_path))]
    rtt = d["base_rtt_us"]
    pcol = f"plane{target}_wire_gbps"
    others = [f"plane{p}_wire_gbps" for p in range(planes) if p != target]
    pre = [r["aggregate_gbps"] for r in rows if 100 <= r["time_us"] <= t_down]
    before = sum(pre) / len(pre)
    surv = before * (planes - 1) / planes
    out = [r for r in rows if t_down < r["time_us"] <= t_up]
    g = [r["aggregate_gbps"] for r in out]
    first95 = next((r["time_us"] for r in out if r["aggregate_gbps"] >= 0.95 * surv), None)
    # held: from then on every window of 10 base RTTs (until the plane returns) averages >= 95%
    dt = out[1]["time_us"] - out[0]["time_us"]
    w = max(1, round(10 * rtt / dt))
    held = None
    for i in range(len(out) - w):  # a stretch shorter than one window at the end does not count
        if all(sum(g[j:j + w]) / len(g[j:j + w]) >= 0.95 * surv for j in range(i, max(i + 1, len(g) - w + 1))):
            held = out[i]["time_us"]
            break
    # longest stretch under half the surviving capacity
    stall = best = 0
    for x in g:
        stall = stall + dt if x < 0.5 * surv else 0
        best = max(best, stall)
    outage_frac = sum(g) / len(g) / surv
    after = [r for r in rows if r["time_us"] > t_up]
    back = next((r["time_us"] for r in after
                 if r[pcol] >= 0.1 * sum(r[o] for o in others) / len(others)), None)
    pk = d["plane_packets"]
    st = d["transport_stats"]

    def rt(t):
        return "not before the plane returned" if t is None else f"{t - t_down:.0f} us = {(t - t_down) / rtt:.1f} RTTs"

    print(f"Permutation of long flows (host i to host i + N/2, 4 connections each, 8 paths: 2 per plane), "
          f"{a.c_hosts} hosts, {planes} planes of leaf-spine, {a.gbps:g} Gbit/s links; plane {target} fails at "
          f"{t_down} us and returns at {t_up} us (`{conf}`); goodput sampled every "
          f"{dt:.0f} us; base RTT {rtt:.2f} us; seed {a.seed}.\n")
    print("| figure | mroce | target |")
    print("|---|---|---|")
    print(f"| goodput before the failure (from 100 us) | {before:.0f} Gbit/s ({before / (a.c_hosts * planes * a.gbps):.3f} of line) | |")
    print(f"| surviving capacity ({planes - 1}/{planes} of that) | {surv:.0f} Gbit/s | |")
    print(f"| first sample at >= 95% of it, after the failure | {rt(first95)} | |")
    print(f"| from when every 10-RTT window averages >= 95% until the return | {rt(held)} | within 10 RTTs |")
    print(f"| longest stretch under 50% during the outage | {best:.0f} us = {best / rtt:.1f} RTTs | |")
    print(f"| mean goodput during the outage, of the surviving capacity | {outage_frac:.3f} | |")
    print(f"| failed operations | {d['failed_ops']} of {d['ops']} (completed: {str(d['completed']).lower()}) | 0 |")
    print(f"| timeouts (all paths) | {st['timeouts']} | |")
    print(f"| plane {target} carries traffic again (>= 10% of the others' wire rate) | "
          f"{'never' if back is None else f'{back - t_up:.0f} us after its return'} | |")
    print(f"| packets per plane since plane {target} returned | {', '.join(map(str, pk))} | reused |")
    # The baseline on the same fabric and events: one QP per host pair, bound to one port (plane).
    rcsv = os.path.join(a.csv_dir, f"plane-failure-{a.c_hosts}-roce.csv")
    r = run(conf, [f"fabric.hosts={a.c_hosts}", f"fabric.link_gbps={a.gbps}", "scenario.transport=roce"], rcsv)
    rrows = [{k: float(v) for k, v in x.items()} for x in csv.DictReader(open(rcsv))]

    def mean(lo, hi):
        v = [x["aggregate_gbps"] for x in rrows if lo < x["time_us"] <= hi]
        return sum(v) / len(v) if v else 0.0
    rb, ro = mean(100, t_down), mean(t_down, t_up)
    print(f"\nRoCEv2 on the same fabric and events (one QP per host pair, bound to one port, so one plane, by its "
          f"UDP source port): goodput {rb:.0f} Gbit/s before ({rb / (a.c_hosts * planes * a.gbps):.3f} of the "
          f"{planes} planes' line: a QP uses one port), {ro:.0f} Gbit/s during the outage ({ro / rb:.3f} of before: "
          f"the QPs on plane {target} stop until it returns and their 1 ms timeout resends); "
          f"{r['failed_ops']} failed operations; {r['transport_stats']['timeouts']} timeouts, "
          f"{r['fabric']['drops']} drops; operations complete at p50 {r['op_completion_us']['p50']:.0f} us, "
          f"max {r['op_completion_us']['max']:.0f} us (mroce: p50 {d['op_completion_us']['p50']:.0f}, "
          f"max {d['op_completion_us']['max']:.0f} us). CSV: `{rcsv}`.")
    print(f"\nGoodput over time: `{csv_path}` (time_us, aggregate_gbps, each plane's wire Gbit/s at the hosts' first hop).")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        t = [r["time_us"] for r in rows]
        plt.figure(figsize=(8, 3.5))
        plt.plot(t, [r["aggregate_gbps"] for r in rows], label="goodput")
        plt.axvline(t_down, color="r", ls=":")
        plt.axvline(t_up, color="g", ls=":")
        plt.xlabel("us")
        plt.ylabel("Gbit/s")
        plt.legend()
        png = csv_path[:-4] + ".png"
        plt.savefig(png, dpi=100, bbox_inches="tight")
        print(f"Plot: `{png}`.")
    except ImportError:
        print("(No plot: matplotlib is not installed here.)")
    print()


# ---------------------------------------------------------------------------- (d)
def table_d():
    n = a.d_senders + 1
    base = ["workload.kind=incast", "fabric.topology=star", f"fabric.hosts={n}", f"fabric.link_gbps={a.gbps}",
            f"workload.bytes={a.d_mib << 20}", "workload.time_limit_ms=1000"]
    kinds = [("mroce, receiver hints", ["scenario.transport=mroce", "engine.rate_hints=true"]),
             ("mroce, no hints", ["scenario.transport=mroce", "engine.rate_hints=false"]),
             ("RoCEv2 (DCQCN)", ["scenario.transport=roce"]),
             ("RoCEv2+PFC (16 MiB buffer)", ["scenario.transport=roce", "fabric.pfc=true",
                                             f"fabric.buffer_bytes={16 << 20}"])]
    res = [(name, run("config/sim/ring.conf", base + extra)) for name, extra in kinds]
    rtt = res[0][1]["base_rtt_us"]
    print(f"{a.d_senders}:1 incast: {a.d_senders} senders each WRITE {a.d_mib} MiB to one receiver at once, "
          f"through one switch (`topology = star`), {a.gbps:g} Gbit/s links, 1 us each, switch buffer 1 MiB per "
          f"port, ECN above 100 KiB; base RTT {rtt:.2f} us; seed {a.seed}. Jain from 2 RTTs: over the bytes each "
          f"sender placed from 2 base RTTs after the start to the first sender's completion; overall: over "
          f"each sender's bytes / its own completion time; fraction of line: all bytes / last completion / "
          f"line rate. PFC gets a 16 MiB buffer: lossless needs headroom for every paused ingress port (64 x (32 KiB + a "
          f"round trip at line rate)); with 1 MiB it drops like the run without PFC. Published: incast resolved "
          f"in one or two round trips.\n")
    print("| transport | Jain from 2 RTTs | Jain overall | of line rate | drops | peak switch queue KiB | "
          "completion us | PFC pauses |")
    print("|---" * 8 + "|")
    for name, d in res:
        mark = "" if d["completed"] else " (not done)"
        print(f"| {name} | {d['jain_from_2rtt']:.3f} | {d['jain']:.3f} | "
              f"{d['aggregate_gbps'] / a.gbps:.3f}{mark} | {d['fabric']['drops']} | "
              f"{d['fabric']['switch_max_queue_bytes'] / 1024:.0f} | {d['jct_us']:.0f} | {d['fabric']['pfc_pauses']} |")
    print()


for t, f in [("a", table_a), ("b", table_b), ("c", table_c), ("d", table_d)]:
    if t in tables:
        print(f"### ({t})\n")
        f()
