#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 The mroce authors
#
# Many concurrent connections between two processes (native API, one stream
# each, default configuration), in a network namespace created here so the
# nftables rule that fails paths touches nothing else:
#   - N connections each WRITE a 16 KiB slot and READ it back, checking it,
#     for 4 rounds and at least 1.5 s;
#   - once all are connected, 12.5% of the paths fail (the client's packets
#     of paths 0 and 1 of every connection whose id is 0 mod 4 are dropped,
#     data and probes alike, whatever their source port) for 0.6 s, then heal;
#   - every round of every connection must verify, and the probe packets the
#     client sent (path probes and keepalives) stay within its probe_rate
#     (R-PATH-14): at most probe_rate per second plus one burst.
# Usage: perf_many_conns.py MROCE_TEST_CONNS [N]. Needs root (77 without).
import json
import os
import subprocess
import sys
import threading
import time

CONNS = os.path.abspath(sys.argv[1])
N = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
NS = f"mrmc{os.getpid() % 100000}"
PORT, LPORT = 4793, 4993          # in the namespace's own port space
PROBE_RATE = 5000                 # the default (config/mroce.conf)


def sh(*args, check=True):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r


def nsx(*args):
    return ["ip", "netns", "exec", NS, *args]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    if os.geteuid() != 0 or subprocess.run(["which", "nft"], capture_output=True).returncode != 0:
        print("SKIP: needs root and nft")
        sys.exit(77)
    srv = cli = None
    try:
        sh("ip", "netns", "add", NS)
        sh(*nsx("ip", "link", "set", "lo", "up"))
        srv = subprocess.Popen(nsx(CONNS, "server", str(PORT), str(N)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        first = srv.stdout.readline().split()
        if len(first) != 4 or first[0] != "addr":
            fail(f"server said {first!r}: {srv.stderr.read()[-400:]}")
        addr, rkey = first[1], first[3]
        cli = subprocess.Popen(nsx(CONNS, "client", "127.0.0.1", str(PORT), str(LPORT), str(N), addr, rkey, "4",
                                   "1.5"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        t_conn = time.time()
        if cli.stdout.readline().strip() != "connected":
            fail(f"client did not connect: {cli.stderr.read()[-600:]}")
        print(f"{N} connections up in {time.time() - t_conn:.1f} s")
        # Fail 12.5% of the paths: the client's packets (its path ports) of
        # path_id 0 and 1 (bytes 12-13 of the mroce header, after the 8-byte UDP
        # header) of connections whose src_conn (bytes 8-11) is 0 mod 4.
        sh(*nsx("nft", "add", "table", "inet", "mrmc"))
        sh(*nsx("nft", "add", "chain", "inet", "mrmc", "out", "{ type filter hook output priority 0; }"))
        sh(*nsx("nft", "add", "rule", "inet", "mrmc", "out", "udp", "sport", f"{LPORT + 1}-{LPORT + 16}",
                "@th,160,16", "<", "2", "@th,152,8", "&", "3", "==", "0", "counter", "drop"))
        time.sleep(0.6)
        dropped = sh(*nsx("nft", "list", "chain", "inet", "mrmc", "out")).stdout
        sh(*nsx("nft", "delete", "table", "inet", "mrmc"))
        try:
            cout, cerr = cli.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            cli.kill()
            fail(f"client stalled; stderr: {cli.communicate()[1][-800:]}")
        sout, serr = srv.communicate(timeout=30)
        lines = [l for l in cout.splitlines() if l.startswith("{")]
        if cli.returncode != 0 or not lines:
            fail(f"client exit {cli.returncode}: {cout[-400:]} {cerr[-800:]}")
        r = json.loads(lines[-1])
        pkts = int(dropped.split("packets ")[1].split()[0]) if "packets " in dropped else 0
        print(f"failure window dropped {pkts} packets; client: {r}")
        if pkts == 0:
            fail("the path failure dropped nothing")
        if r["verified"] < 4 * N or r["mismatches"] or r["failures"]:
            fail(f"verification: {r}")
        sent = r["probes_sent"] + r["keepalives_sent"]
        bound = PROBE_RATE * r["seconds"] + PROBE_RATE / 10
        if sent > bound:
            fail(f"{sent} probes in {r['seconds']:.2f} s, above the bound {bound:.0f} (probe_rate {PROBE_RATE}/s)")
        print(f"PASS {N} connections, {r['verified']} rounds verified in {r['seconds']:.2f} s, "
              f"at most {r['max_failed_paths']} paths failed at once, {sent} probes "
              f"({sent / r['seconds']:.0f}/s, bound {PROBE_RATE}/s), "
              f"{r['rss_per_conn']} B resident per connection")
    finally:
        for p in (cli, srv):
            if p and p.poll() is None:
                p.kill()
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)


main()
