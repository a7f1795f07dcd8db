#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 The mroce authors
"""Issue 20's performance targets, in one run: perftest over the verbs
provider against mroce-perf over the native API, same sizes, same machine,
interleaved round by round (the host is noisy: compare ratios measured
together).

  ib_write_bw -s 65536 / 1048576   vs  mroce-perf -s 65536 / 1048576 (Gbit/s)
  ib_write_bw -s 64                vs  mroce-perf -s 64 (messages/s)
  ib_write_lat -s 8 (t_typical)    vs  mroce-perf --lat (rtt p50)

usage: scripts/bench-verbs.py [BUILD] [ROUNDS] [SECONDS]   (defaults: build 3 3)
Prints every run and then medians with the ratios. Env: PORT (base), SPIN
(spin_us of both verbs devices for the latency pair; mroce-perf --lat gets
the same with --spin-us), BASE (another provider's mroce-run, e.g. a copy of
the previous commit's build: its perftest runs go in the same rounds, as
"base ...", for a same-run before/after).
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
SECS = int(sys.argv[3]) if len(sys.argv) > 3 else 3
PERF = os.path.join(BUILD, "app/perf/mroce-perf")
RUN = os.path.join(BUILD, "drivers/verbs/mroce-run")
port = int(os.environ.get("PORT", "27000"))
SPIN = os.environ.get("SPIN", "")
BASE = os.environ.get("BASE", "")
TMP = tempfile.mkdtemp(prefix="mroce-bench-verbs-")


def next_port():
    global port
    port += 40
    return port


def config(addr, p, extra=""):
    path = os.path.join(TMP, "%s-%d.conf" % (addr, p))
    with open(path, "w") as f:
        f.write("[device d]\naddress = %s\nport = %d\npath_port_base = %d\n%s" % (addr, p, p + 1, extra))
    return path


def pair(server, client, timeout=60):
    s = subprocess.Popen(server, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(0.5)
    try:
        c = subprocess.run(client, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print("  TIMEOUT: %s" % " ".join(client))
        s.kill()
        s.communicate()
        return None
    try:
        so, _ = s.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        s.kill()
        so = ""
    if c.returncode != 0:
        print("  FAILED: %s\n%s\n%s" % (" ".join(client), c.stdout[-2000:], so[-2000:]))
        return None
    return c.stdout


def perftest(prog, args, extra="", run=RUN):
    p = next_port()
    s_conf, c_conf = config("127.0.0.1", p, extra), config("127.0.0.2", p, extra)
    tcp = str(p + 20)
    out = pair([run, "-c", s_conf, prog, "-d", "mroce0", "-p", tcp] + args,
               [run, "-c", c_conf, prog, "-d", "mroce0", "-p", tcp] + args + ["127.0.0.1"])
    if out is None:
        return None
    lines = out.splitlines()
    for i, l in enumerate(lines):
        if l.strip().startswith("#bytes"):
            return lines[i + 1].split()
    return None


def mroce_perf(args):
    p = next_port()
    out = pair([PERF, "-p", str(p)] + args, [PERF, "-p", str(p), "127.0.0.1", "--json"] + args)
    if out is None:
        return None
    m = {}
    for k in ("goodput_gbps", "msg_rate", "lat_p50_us"):
        r = re.search(r'"%s":\s*([0-9.e+-]+)' % k, out)
        if r:
            m[k] = float(r.group(1))
    return m


results = {}


def note(key, value):
    if value is not None:
        results.setdefault(key, []).append(value)
        print("  %-28s %12.3f" % (key, value), flush=True)


lat_spin = ["--spin-us", SPIN] if SPIN else []
lat_extra = ("spin_us = %s\n" % SPIN) if SPIN else ""
for r in range(ROUNDS):
    print("round %d" % (r + 1), flush=True)
    for size in (65536, 1048576):
        m = mroce_perf(["-s", str(size), "-D", str(SECS)])
        note("mroce-perf %d Gbit/s" % size, m and m.get("goodput_gbps"))
        row = perftest("ib_write_bw", ["-s", str(size), "-D", str(SECS)])
        note("ib_write_bw %d Gbit/s" % size, row and float(row[3]) * 8 / 1000)  # BW average MB/s
        if BASE:
            row = perftest("ib_write_bw", ["-s", str(size), "-D", str(SECS)], run=BASE)
            note("base ib_write_bw %d Gbit/s" % size, row and float(row[3]) * 8 / 1000)
    m = mroce_perf(["-s", "64", "-D", str(SECS)])
    note("mroce-perf 64 msg/s", m and m.get("msg_rate"))
    row = perftest("ib_write_bw", ["-s", "64", "-D", str(SECS)])
    note("ib_write_bw 64 msg/s", row and float(row[4]) * 1e6)  # MsgRate Mpps
    if BASE:
        row = perftest("ib_write_bw", ["-s", "64", "-D", str(SECS)], run=BASE)
        note("base ib_write_bw 64 msg/s", row and float(row[4]) * 1e6)
    m = mroce_perf(["--lat", "-n", "5000"] + lat_spin)
    note("mroce-perf --lat p50 us", m and m.get("lat_p50_us"))
    row = perftest("ib_write_lat", ["-s", "8", "-n", "5000"], lat_extra)
    note("ib_write_lat t_typical us", row and float(row[4]))
    if BASE:
        row = perftest("ib_write_lat", ["-s", "8", "-n", "5000"], lat_extra, run=BASE)
        note("base ib_write_lat t_typical us", row and float(row[4]))


def med(k):
    v = results.get(k)
    return statistics.median(v) if v else float("nan")


print("\nmedians of %d rounds (%s s each):" % (ROUNDS, SECS))
for k in sorted(results):
    print("  %-28s %12.3f   (%s)" % (k, med(k), " ".join("%.3f" % x for x in results[k])))
print("ratios (median ÷ median):")
for size in (65536, 1048576):
    print("  ib_write_bw / mroce-perf, %7d B: %.3f" % (size, med("ib_write_bw %d Gbit/s" % size) / med("mroce-perf %d Gbit/s" % size)))
print("  ib_write_bw / mroce-perf, 64 B msg/s: %.3f" % (med("ib_write_bw 64 msg/s") / med("mroce-perf 64 msg/s")))
print("  ib_write_lat / mroce-perf --lat:      %.3f" % (med("ib_write_lat t_typical us") / med("mroce-perf --lat p50 us")))
if BASE:
    print("base (%s), same rounds:" % BASE)
    for size in (65536, 1048576):
        print("  ib_write_bw / mroce-perf, %7d B: %.3f" % (size, med("base ib_write_bw %d Gbit/s" % size) / med("mroce-perf %d Gbit/s" % size)))
    print("  ib_write_bw / mroce-perf, 64 B msg/s: %.3f" % (med("base ib_write_bw 64 msg/s") / med("mroce-perf 64 msg/s")))
    print("  ib_write_lat / mroce-perf --lat:      %.3f" % (med("base ib_write_lat t_typical us") / med("mroce-perf --lat p50 us")))
