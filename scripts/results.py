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
#       goodput over time (CSV; SVG with --plots), time to
#       95% of the surviving capacity, failed operations, the plane's reuse;
#   (d) 64:1 incast with and without receiver hints: Jain index from 2 RTTs,
#       overall, fraction of line rate, drops, peak queue;
#   (e) ring all-reduce and all-to-all completion times (job, and each
#       operation's p50/p99/max) at 0, 0.1, 1% loss and with one hot link;
#   (f) long flows plus Poisson short flows (config/sim/mix.conf): flow
#       completion times per class at 0 and 1% loss;
#   (g) tree against ring all-reduce, pipelined: job time and algbw at 0 and
#       1% loss.
# Prints the tables as markdown on stdout, progress and CPU time on stderr;
# writes each table's CSV to --csv-dir. With --plots, draws an SVG per table
# from those CSVs with gnuplot (Debian: gnuplot-nox); --tables none --plots
# redraws from the CSVs already there without running the simulator.
#
# usage: scripts/results.py [--build build] [--tables a,b,c,d,e,f,g] [--hosts 16] [--gbps 400] [--mib 16]
#        [--b-hosts N] [--b-mib M] [--c-hosts N] [--d-senders N] [--e-hosts N] [--f-hosts N] [--g-hosts N]
#        [--csv-dir doc/results] [--plots]
import argparse, csv, json, math, os, re, resource, shutil, subprocess, sys, time

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build")
ap.add_argument("--tables", default="a,b,c,d,e", help="tables to run: any of a,b,c,d,e,f,g, or none (with --plots: redraw from the CSVs)")
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
ap.add_argument("--a-forms", default="unpipelined,pipelined",
                help="(a): ring forms: unpipelined (one WRITE per step), pipelined (--a-slices per step), "
                     "pipelined-nic (pipelined, a stream per slice, hosts with a 4 KiB NIC ring and bursts of 8), "
                     "pipelined-nic-red (pipelined-nic with redundant copies, R-TIMER-10)")
ap.add_argument("--a-slices", type=int, default=8, help="(a) pipelined: slices per step")
ap.add_argument("--a-window", type=int, default=8, help="(a) pipelined: slices in flight per sender (NCCL_STEPS)")
ap.add_argument("--a-csv", default="", help="(a): CSV file name (default ring-loss-HOSTS.csv; "
                "give another to keep a second size's table beside it; --plots then draws NAME.svg from it)")
ap.add_argument("--e-hosts", type=int, default=64)
ap.add_argument("--e-ring-mib", type=int, default=64, help="(e): ring all-reduce MiB per host")
ap.add_argument("--e-a2a-mib", type=int, default=16, help="(e): all-to-all MiB per host")
ap.add_argument("--e-hot-gbps", type=float, default=100, help="(e): the hot link's rate")
ap.add_argument("--f-hosts", type=int, default=16, help="(f): hosts (half send long flows)")
ap.add_argument("--f-mib", type=int, default=16, help="(f): MiB per long flow")
ap.add_argument("--f-short-kib", type=int, default=64, help="(f): KiB per short flow")
ap.add_argument("--f-short-flows", type=int, default=256)
ap.add_argument("--f-rate", type=float, default=1, help="(f): short-flow arrivals per us, all hosts together")
ap.add_argument("--g-hosts", type=int, default=16)
ap.add_argument("--g-mib", type=int, default=16, help="(g): MiB per host")
ap.add_argument("--csv-dir", default="doc/results")
ap.add_argument("--plots", action="store_true", help="draw SVGs with gnuplot from the CSVs (gnuplot-nox)")
a = ap.parse_args()
tables = set(a.tables.split(",")) - {"none", ""}
sim = f"{a.build}/app/sim/mroce-sim"


def run(conf, overrides, csv_path=None):
    cmd = [sim, conf] + overrides + [f"scenario.seed={a.seed}", "--quiet"]
    if csv_path:
        cmd += ["--csv", csv_path]
    if not os.path.exists(sim):
        sys.exit(f"mroce-sim not found at {sim}: build it first (ninja -C {a.build} app/sim/mroce-sim)")
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        sys.exit(f"mroce-sim failed ({' '.join(cmd)}): {out.stderr}")
    d = json.loads(out.stdout)
    print(f"# {' '.join(overrides)}: {d['aggregate_gbps']:.1f} Gbit/s, completed {d['completed']}, "
          f"wall {d['wall_s']:.1f} s", file=sys.stderr)
    return d


# ---------------------------------------------------------------------------- (a)
def table_a():
    losses = [0, 0.001, 0.01, 0.05, 0.10]
    kinds = [("mroce", ["scenario.transport=mroce"]),
             ("RoCEv2", ["scenario.transport=roce"]),
             ("RoCEv2+PFC", ["scenario.transport=roce", "fabric.pfc=true"])]
    forms = {"unpipelined": ("unpipelined (one WRITE per step, the next step once it arrived)",
                             ["workload.slices=1", "workload.slices_outstanding=0"]),
             "pipelined": (f"pipelined NCCL-style ({a.a_slices} slices per step, at most {a.a_window} in flight "
                           f"per sender, a slice forwarded once it arrived)",
                           [f"workload.slices={a.a_slices}", f"workload.slices_outstanding={a.a_window}"]),
             # doc/results.md (a): what a repaired loss costs the pipelined ring.
             "pipelined-nic": (f"pipelined as above, slice j on stream j of the connection (mroce; the baseline "
                               f"keeps one QP), hosts with a NIC: a 4 KiB transmit ring, bursts of 8 packets",
                               [f"workload.slices={a.a_slices}", f"workload.slices_outstanding={a.a_window}",
                                f"workload.streams={a.a_slices}", "fabric.nic_ring_bytes=4096", "fabric.host_burst=8"]),
             # The same with redundant copies (R-TIMER-10: engine.tail_redundancy; mroce only, the
             # baseline's figures are pipelined-nic's).
             "pipelined-nic-red": (f"pipelined-nic with redundant copies (mroce: engine.tail_redundancy=true, "
                                   f"doc/spec.md R-TIMER-10; the baseline as in pipelined-nic)",
                                   [f"workload.slices={a.a_slices}", f"workload.slices_outstanding={a.a_window}",
                                    f"workload.streams={a.a_slices}", "fabric.nic_ring_bytes=4096",
                                    "fabric.host_burst=8", "engine.tail_redundancy=true"])}
    rows = []
    for form in a.a_forms.split(","):
        label, fo = forms[form]
        base = ["workload.kind=ring_allreduce", f"fabric.hosts={a.hosts}", f"fabric.link_gbps={a.gbps}",
                f"workload.bytes={a.mib << 20}", "workload.time_limit_ms=2000"] + fo
        # The baseline does not run mroce's engine: its figures are pipelined-nic's.
        fkinds = kinds[:1] if form == "pipelined-nic-red" else kinds
        res = {}
        for name, extra in fkinds:
            for p in losses:
                res[(name, p)] = run("config/sim/ring.conf", base + extra + [f"fabric.path_loss={p}"])
        print(f"Ring all-reduce, **{form}**: {label}; {a.hosts} hosts, 1 plane of leaf-spine (4 spines), "
              f"{a.gbps:g} Gbit/s links, {a.mib} MiB per host, random loss once per end-to-end path (data and acks), "
              f"seed {a.seed}.\n")
        print("| loss | limit 1-p | " + " | ".join(f"{n} Gbit/s/host | {n} of lossless" for n, _ in fkinds) + " |")
        print("|---" * (2 + 2 * len(fkinds)) + "|")
        for p in losses:
            row = [f"{p * 100:g}%", f"{1 - p:.3f}"]
            for n, _ in fkinds:
                d, d0 = res[(n, p)], res[(n, 0)]
                per_host = d["aggregate_gbps"] / a.hosts
                frac = d["aggregate_gbps"] / d0["aggregate_gbps"] if d0["aggregate_gbps"] else 0
                mark = "" if d["completed"] else " (not done in 2 s)"
                row += [f"{per_host:.1f}{mark}", f"{frac:.3f}"]
                rows.append({"form": form, "loss": p, "transport": n, "gbps_per_host": f"{per_host:.2f}",
                             "of_lossless": f"{frac:.4f}", "completed": int(d["completed"])})
            print("| " + " | ".join(row) + " |")
        print()
    write_csv(a.a_csv or f"ring-loss-{a.hosts}.csv", rows)


def write_csv(name, rows):
    os.makedirs(a.csv_dir, exist_ok=True)
    path = os.path.join(a.csv_dir, name)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    print(f"CSV: `{path}`.\n")


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
    for name, extra in [("mroce", ["scenario.transport=mroce"]), ("RoCEv2", ["scenario.transport=roce"]),
                        ("RoCEv2+PFC", ["scenario.transport=roce", "fabric.pfc=true"])]:
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
          "| RoCEv2 Gbit/s | RoCEv2 agg / (P x one plane) | RoCEv2+PFC Gbit/s | RoCEv2+PFC agg / (P x one plane) "
          "| mroce job time us | mroce drops | mroce CE marks | RoCEv2 drops | RoCEv2+PFC drops, pauses |")
    print("|---" * 14 + "|")
    rows = []
    for p in planes:
        m, m1 = res[("mroce", p)], res[("mroce", planes[0])]
        r, r1 = res[("RoCEv2", p)], res[("RoCEv2", planes[0])]
        q, q1 = res[("RoCEv2+PFC", p)], res[("RoCEv2+PFC", planes[0])]
        line = n * p * a.gbps

        def mk(d):
            return "" if d["completed"] else " (not done)"

        def ratio(d, d1):
            return d["aggregate_gbps"] / (p / planes[0] * d1["aggregate_gbps"])
        print(f"| {p} | {line:.0f} | {m['aggregate_gbps']:.0f}{mk(m)} | {m['aggregate_gbps'] / line:.3f} | "
              f"{ratio(m, m1):.3f} | {r['aggregate_gbps']:.0f}{mk(r)} | {ratio(r, r1):.3f} | "
              f"{q['aggregate_gbps']:.0f}{mk(q)} | {ratio(q, q1):.3f} | {m['jct_us']:.0f} | "
              f"{m['fabric']['drops']} | {m['fabric']['ce_marks']} | {r['fabric']['drops']} | "
              f"{q['fabric']['drops']}, {q['fabric']['pfc_pauses']} |")
        for name, d, d1 in [("mroce", m, m1), ("RoCEv2", r, r1), ("RoCEv2+PFC", q, q1)]:
            rows.append({"planes": p, "transport": name, "aggregate_gbps": f"{d['aggregate_gbps']:.1f}",
                         "of_line": f"{d['aggregate_gbps'] / line:.4f}", "of_planes_x_one": f"{ratio(d, d1):.4f}",
                         "jct_us": d["jct_us"], "drops": d["fabric"]["drops"],
                         "pfc_pauses": d["fabric"]["pfc_pauses"], "completed": int(d["completed"])})
    print()
    write_csv(f"planes-{n}.csv", rows)


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
    os.makedirs(a.csv_dir, exist_ok=True)
    res = []
    for i, (name, extra) in enumerate(kinds):
        ts = os.path.join(a.csv_dir, f"incast-{a.d_senders}-{['hints', 'nohints', 'roce', 'roce-pfc'][i]}.csv")
        res.append((name, run("config/sim/ring.conf", base + extra + ["scenario.sample_us=20"], ts)))
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
    print(f"\nTime series (every 20 us: goodput, and the Jain index of the bytes each sender placed in that "
          f"sample): `{a.csv_dir}/incast-{a.d_senders}-{{hints,nohints,roce,roce-pfc}}.csv`.")
    print()


# ---------------------------------------------------------------------------- (e)
def hot_spine_on_baseline_route(n):
    """The spine the baseline's ring QP from host 0 (leaf 0) hashes onto: a
    short RoCEv2 ring with the hot link on each spine in turn; the slowest
    run is the one whose route crosses it (ECMP pins a QP to one spine)."""
    best = (-1, 0)
    for sp in range(4):
        d = run("config/sim/ring.conf", ["workload.kind=ring_allreduce", f"fabric.hosts={n}",
                                         f"fabric.link_gbps={a.gbps}", f"workload.bytes={n << 16}",
                                         "scenario.transport=roce", f"fabric.hot_gbps={a.e_hot_gbps}",
                                         f"fabric.hot_spine={sp}"])
        best = max(best, (d["jct_us"], sp))
    return best[1]


def table_e():
    n = a.e_hosts
    hot = hot_spine_on_baseline_route(n)
    conds = [("0%", ["fabric.path_loss=0"]), ("0.1%", ["fabric.path_loss=0.001"]), ("1%", ["fabric.path_loss=0.01"]),
             ("hot link", [f"fabric.hot_gbps={a.e_hot_gbps}", "fabric.hot_leaf=0", f"fabric.hot_spine={hot}"])]
    kinds = [("mroce", ["scenario.transport=mroce"]),
             ("RoCEv2", ["scenario.transport=roce"]),
             ("RoCEv2+PFC", ["scenario.transport=roce", "fabric.pfc=true"])]
    wls = [("ring all-reduce", ["workload.kind=ring_allreduce", f"workload.bytes={a.e_ring_mib << 20}"]),
           ("all-to-all", ["workload.kind=all_to_all", f"workload.bytes={a.e_a2a_mib << 20}"] + SMALL_CONNS)]
    print(f"{n} hosts, 1 plane of leaf-spine (4 spines), {a.gbps:g} Gbit/s links, seed {a.seed}. Ring all-reduce "
          f"(unpipelined, as table (a)'s first form): {a.e_ring_mib} MiB per host, 2(N-1) steps of one WRITE each; "
          f"all-to-all: {a.e_a2a_mib} MiB per host, one WRITE to each other host, all at once ({n * (n - 1)} mroce "
          f"connections with table (b)'s per-connection sizing; the baseline one QP per host pair). Loss: random, "
          f"once per end-to-end path, as table (a). Hot link: plane 0's link between leaf 0 (host 0's) and spine "
          f"{hot}, both directions, at {a.e_hot_gbps:g} Gbit/s instead of {a.gbps:g} (`fabric.hot_gbps`, "
          f"`hot_leaf`, `hot_spine`), no loss; spine {hot} is the one the baseline's ring QP out of host 0 hashes "
          f"onto (found by the script with a short run per spine), so the single-path baseline meets it. Job: "
          f"until the last byte of the last operation; operation: one WRITE's completion from its post "
          f"(ring: one step of one host; all-to-all: one flow), p50/p99/max over all of them, resolution 2 us "
          f"(`slice_ns`).\n")
    print("| workload | condition | transport | job us | op p50 us | op p99 us | op max us | Gbit/s/host | "
          "drops | PFC pauses | timeouts |")
    print("|---" * 11 + "|")
    rows = []
    for wname, wo in wls:
        for cname, co in conds:
            for tname, to in kinds:
                d = run("config/sim/ring.conf", [f"fabric.hosts={n}", f"fabric.link_gbps={a.gbps}",
                                                 "workload.time_limit_ms=2000"] + wo + co + to)
                od = d["op_duration_us"]
                mark = "" if d["completed"] else " (not done in 2 s)"
                tmo = d["transport_stats"].get("timeouts", "")
                print(f"| {wname} | {cname} | {tname} | {d['jct_us']:.0f}{mark} | {od['p50']:.0f} | {od['p99']:.0f} | "
                      f"{od['max']:.0f} | {d['aggregate_gbps'] / n:.1f} | {d['fabric']['drops']} | "
                      f"{d['fabric']['pfc_pauses']} | {tmo} |")
                rows.append({"workload": wname, "condition": cname, "transport": tname, "jct_us": d["jct_us"],
                             "op_p50_us": od["p50"], "op_p99_us": od["p99"], "op_max_us": od["max"],
                             "gbps_per_host": f"{d['aggregate_gbps'] / n:.2f}", "drops": d["fabric"]["drops"],
                             "pfc_pauses": d["fabric"]["pfc_pauses"], "timeouts": tmo,
                             "completed": int(d["completed"])})
    print()
    write_csv(f"completion-{n}.csv", rows)


# ---------------------------------------------------------------------------- (f)
KINDS = [("mroce", ["scenario.transport=mroce"]),
         ("RoCEv2", ["scenario.transport=roce"]),
         ("RoCEv2+PFC", ["scenario.transport=roce", "fabric.pfc=true"])]


def table_f():
    n = a.f_hosts
    base = [f"fabric.hosts={n}", f"fabric.link_gbps={a.gbps}", f"workload.bytes={a.f_mib << 20}",
            f"workload.short_bytes={a.f_short_kib << 10}", f"workload.short_flows={a.f_short_flows}",
            f"workload.short_rate_per_us={a.f_rate:g}", "workload.time_limit_ms=2000"]
    print(f"`config/sim/mix.conf`: {n} hosts, 4 per leaf, 1 plane of leaf-spine (4 spines), {a.gbps:g} Gbit/s links, "
          f"seed {a.seed}. Hosts 0..{n // 2 - 1} each write {a.f_mib} MiB to host i + {n // 2} (long flows, all at "
          f"the start); {a.f_short_flows} short flows of {a.f_short_kib} KiB arrive as a Poisson process of "
          f"{a.f_rate:g} per us from hosts {n // 2}..{n - 1} to random others. Flow completion time: from a "
          f"flow's post to its completion (resolution 2 us). Loss: random, once per end-to-end path.\n")
    print("| loss | transport | short p50 us | short p99 us | short max us | long p50 us | long max us | drops | "
          "PFC pauses | timeouts |")
    print("|---" * 10 + "|")
    rows = []
    # mroce without receiver hints too: a short flow arriving at a long flow's
    # receiver makes it share its capacity (R-HINT-4) while the short sender
    # stays active (R-HINT-2: up to 2 hint intervals after its last byte).
    kinds = KINDS[:1] + [("mroce, hints off", ["scenario.transport=mroce", "engine.rate_hints=false"])] + KINDS[1:]
    for p in [0, 0.01]:
        for tname, to in kinds:
            d = run("config/sim/mix.conf", base + to + [f"fabric.path_loss={p}"])
            sh, lo = d["fct_us"]["short"], d["fct_us"]["long"]
            mark = "" if d["completed"] else " (not done in 2 s)"
            tmo = d["transport_stats"].get("timeouts", "")
            print(f"| {p * 100:g}% | {tname} | {sh['p50']:.0f} | {sh['p99']:.0f} | {sh['max']:.0f} | "
                  f"{lo['p50']:.0f}{mark} | {lo['max']:.0f} | {d['fabric']['drops']} | {d['fabric']['pfc_pauses']} | "
                  f"{tmo} |")
            rows.append({"loss": p, "transport": tname, "short_p50_us": sh["p50"], "short_p99_us": sh["p99"],
                         "short_max_us": sh["max"], "long_p50_us": lo["p50"], "long_max_us": lo["max"],
                         "drops": d["fabric"]["drops"], "pfc_pauses": d["fabric"]["pfc_pauses"],
                         "timeouts": tmo, "completed": int(d["completed"])})
    print()
    write_csv(f"mix-{n}.csv", rows)


# ---------------------------------------------------------------------------- (g)
def table_g():
    n = a.g_hosts
    base = [f"fabric.hosts={n}", f"fabric.link_gbps={a.gbps}", f"workload.bytes={a.g_mib << 20}",
            f"workload.slices={a.a_slices}", f"workload.slices_outstanding={a.a_window}",
            "workload.time_limit_ms=2000"]
    print(f"{n} hosts, 1 plane of leaf-spine (4 spines), {a.gbps:g} Gbit/s links, {a.g_mib} MiB per host, seed "
          f"{a.seed}; both pipelined in {a.a_slices} slices, at most {a.a_window} in flight per sender. Ring: "
          f"2(N-1) steps of bytes/N; tree: one binary tree, reduce up and broadcast down (NCCL runs two). algbw: "
          f"one host's buffer / job time (NCCL's algorithm bandwidth, comparable between the two).\n")
    print("| loss | transport | ring job us | ring algbw Gbit/s | tree job us | tree algbw Gbit/s |")
    print("|---" * 6 + "|")
    rows = []
    for p in [0, 0.01]:
        for tname, to in KINDS:
            r = {w: run("config/sim/ring.conf", base + to + [f"workload.kind={w}", f"fabric.path_loss={p}"])
                 for w in ("ring_allreduce", "tree_allreduce")}
            cells = []
            for w in ("ring_allreduce", "tree_allreduce"):
                mark = "" if r[w]["completed"] else " (not done in 2 s)"
                cells += [f"{r[w]['jct_us']:.0f}{mark}", f"{r[w]['algbw_gbps']:.1f}"]
                rows.append({"loss": p, "transport": tname, "workload": w, "jct_us": r[w]["jct_us"],
                             "algbw_gbps": r[w]["algbw_gbps"], "completed": int(r[w]["completed"])})
            print(f"| {p * 100:g}% | {tname} | " + " | ".join(cells) + " |")
    print()
    write_csv(f"tree-ring-{n}.csv", rows)


# ---------------------------------------------------------------------------- plots
# gnuplot (Debian package gnuplot-nox), SVG, from the CSVs above.
def gnuplot(name, script):
    path = os.path.join(a.csv_dir, name)
    full = f"set terminal svg size 800,480 dynamic font 'sans,12' background '#ffffff'\nset output '{path}'\n" \
           f"set datafile separator ','\nset grid\n" + script
    out = subprocess.run(["gnuplot"], input=full, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"gnuplot failed on {path}: {out.stderr}")
    print(f"# plot: {path}", file=sys.stderr)


def plots():
    if shutil.which("gnuplot") is None:
        sys.exit("--plots needs gnuplot: install the Debian package gnuplot-nox (apt-get install gnuplot-nox)")
    d = a.csv_dir

    def have(f):
        return os.path.exists(os.path.join(d, f))
    a_csv = a.a_csv or f"ring-loss-{a.hosts}.csv"
    if "a" in plot_tables and have(a_csv):
        rows = list(csv.DictReader(open(os.path.join(d, a_csv))))
        # one small data file per (form, transport): loss %, of lossless
        series = []
        for r in rows:
            k = (r["form"], r["transport"])
            if k not in series:
                series.append(k)
        blocks, plots_ = "", []
        for idx, (form, tr) in enumerate(series):
            blocks += f"$s{idx} << EOD\n" + "".join(
                f"{float(r['loss']) * 100},{r['of_lossless']}\n" for r in rows
                if (r["form"], r["transport"]) == (form, tr)) + "EOD\n"
            dash = {"pipelined": "dt 1 pt 7", "pipelined-nic": "dt 3 pt 5",
                    "pipelined-nic-red": "dt 4 pt 9"}.get(form, "dt 2 pt 6")
            color = {"mroce": "'#0072b2'", "RoCEv2": "'#d55e00'", "RoCEv2+PFC": "'#009e73'"}.get(tr, "'gray'")
            plots_.append(f"$s{idx} using 1:2 with linespoints {dash} lc rgb {color} lw 2 title '{tr}, {form}'")
        gnuplot(a_csv.replace(".csv", ".svg") if a.a_csv else "ring-loss.svg", blocks + "set key below\n"
                "set xlabel 'random loss per end-to-end path (%)'\nset ylabel 'goodput, fraction of lossless'\n"
                "set xrange [0:10.2]\nset yrange [0:1.05]\n"
                f"set title 'Ring all-reduce, {a.hosts} hosts, {a.gbps:g} Gbit/s, {a.mib} MiB per host'\n"
                "$pub << EOD\n1,0.86\nEOD\n$tgt << EOD\n1,0.95\n10,0.80\nEOD\n"
                "plot 1 - x/100 with lines lc 'black' lw 1 title 'limit 1-p', "
                "$pub using 1:2 with points pt 7 ps 1.5 lc 'red' title 'published hardware (about 0.86 at 1%)', "
                "$tgt using 1:2 with points pt 2 ps 1.5 lc 'black' title 'issue 22 target (0.95, 0.80)', "
                + ", ".join(plots_) + "\n")
    if "b" in plot_tables and have(f"planes-{a.b_hosts}.csv"):
        rows = list(csv.DictReader(open(os.path.join(d, f"planes-{a.b_hosts}.csv"))))
        blocks, pl = "", []
        for idx, tr in enumerate(["mroce", "RoCEv2", "RoCEv2+PFC"]):
            blocks += f"$s{idx} << EOD\n" + "".join(f"{r['planes']},{r['of_planes_x_one']}\n"
                                                      for r in rows if r["transport"] == tr) + "EOD\n"
            pl.append(f"$s{idx} using 1:2 with linespoints lw 2 title '{tr}'")
        gnuplot("planes.svg", blocks + "set key bottom left\nset logscale x 2\n"
                "set xlabel 'planes'\nset ylabel 'aggregate / (planes x one plane)'\nset yrange [0:1.2]\n"
                f"set title 'All-to-all over planes, {a.b_hosts} hosts'\n"
                "plot 0.97 with lines lc 'black' dt 2 title 'target 0.97', " + ", ".join(pl) + "\n")
    if "c" in plot_tables and have(f"plane-failure-{a.c_hosts}.csv"):
        conf = open("config/sim/plane-failure.conf").read()
        ats = [int(x) for x in re.findall(r"^at_us\s*=\s*(\d+)", conf, re.M)]
        m, r = os.path.join(d, f"plane-failure-{a.c_hosts}.csv"), os.path.join(d, f"plane-failure-{a.c_hosts}-roce.csv")
        extra = f", '{r}' every ::1 using 1:2 with lines lw 1.5 title 'RoCEv2 goodput'" if os.path.exists(r) else ""
        t_end = float(open(m).read().split()[-1].split(",")[0])  # mroce's last sample; RoCEv2 runs longer
        gnuplot("plane-failure.svg",
                "set key below\nset xlabel 'time (us)'\nset ylabel 'Gbit/s (all hosts)'\n"
                f"set xrange [0:{t_end * 1.05:.0f}]\n"
                f"set title 'Plane 1 of 4 fails at {ats[0]} us and returns at {ats[1]} us, {a.c_hosts} hosts "
                f"(RoCEv2 runs on to {float(open(r).read().split()[-1].split(',')[0]) if os.path.exists(r) else 0:.0f} us)'\n"
                f"set arrow from {ats[0]}, graph 0 to {ats[0]}, graph 1 nohead lc 'red' dt 2\n"
                f"set arrow from {ats[1]}, graph 0 to {ats[1]}, graph 1 nohead lc 'dark-green' dt 2\n"
                f"plot '{m}' every ::1 using 1:2 with lines lw 1.5 title 'mroce goodput', "
                f"'{m}' every ::1 using 1:4 with lines lw 1 title 'mroce wire rate into plane 1'{extra}\n")
    def jcol(path):  # the CSV's jain column, 1-based
        return open(path).readline().strip().split(",").index("jain") + 1
    if "d" in plot_tables:
        fs = [(f"incast-{a.d_senders}-{k}.csv", t) for k, t in
              [("hints", "mroce, receiver hints"), ("nohints", "mroce, no hints"), ("roce", "RoCEv2"),
               ("roce-pfc", "RoCEv2+PFC")]]
        pl = [f"'{os.path.join(d, f)}' using 1:{jcol(os.path.join(d, f))} every ::1 with steps lw 1.5 title '{t}'" for f, t in fs if have(f)]
        if pl:
            gnuplot("incast.svg", "set key below\nset xlabel 'time (us)'\n"
                    "set ylabel 'Jain index of bytes placed per 20 us'\nset yrange [0:1.05]\n"
                    f"set title '{a.d_senders}:1 incast, {a.gbps:g} Gbit/s'\nplot " + ", ".join(pl) + "\n")
    if "e" in plot_tables and have(f"completion-{a.e_hosts}.csv"):
        rows = list(csv.DictReader(open(os.path.join(d, f"completion-{a.e_hosts}.csv"))))
        for wname, fname in [("ring all-reduce", "completion-ring.svg"), ("all-to-all", "completion-a2a.svg")]:
            conds = []
            for r in rows:
                if r["workload"] == wname and r["condition"] not in conds:
                    conds.append(r["condition"])
            data = "$d << EOD\n"
            for c in conds:
                v = {r["transport"]: float(r["jct_us"]) for r in rows if r["workload"] == wname and r["condition"] == c}
                data += f"\"{c}\",{v.get('mroce', 0)},{v.get('RoCEv2', 0)},{v.get('RoCEv2+PFC', 0)}\n"
            data += "EOD\n"
            gnuplot(fname, data + "set style data histograms\nset style histogram clustered gap 1\n"
                    "set style fill solid 0.8 border -1\nset logscale y\nset yrange [10:*]\n"
                    "set ylabel 'job completion time (us, log)'\nset key top left\n"
                    f"set title '{wname}, {a.e_hosts} hosts, {a.gbps:g} Gbit/s'\n"
                    "plot $d using 2:xtic(1) title 'mroce', '' using 3 title 'RoCEv2', '' using 4 title 'RoCEv2+PFC'\n")


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


plot_tables = set(tables) if tables else {"a", "b", "c", "d", "e"}
for t, f in [("a", table_a), ("b", table_b), ("c", table_c), ("d", table_d), ("e", table_e), ("f", table_f),
             ("g", table_g)]:
    if t in tables:
        c0, w0 = cpu_s(), time.time()
        print(f"### ({t})\n")
        f()
        print(f"# table ({t}): {cpu_s() - c0:.0f} s of CPU, {time.time() - w0:.0f} s wall", file=sys.stderr)
        print(f"(Table ({t}): {cpu_s() - c0:.0f} s of CPU in mroce-sim, {time.time() - w0:.0f} s wall.)\n")
if a.plots:
    plots()
