#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 The mroce authors
"""Unmodified verbs programs over the mroce provider (issue 20's Done-when):
two processes on loopback, each with its own mroce configuration (127.0.0.1
is the server, 127.0.0.2 the client, one UDP port for both), started with
mroce-run. Every run must exit 0 and print its figures; the pingpongs run
with -c (which checks the first byte of each page of a received buffer and
only prints 'invalid data': that text fails the run). perftest checks no
data; nccl_like checks every byte.

usage: verbs_programs.py MROCE_RUN CASE
CASE: devinfo | planes | pingpong | perftest-PROGRAM | write-bw-4qp | qperf | loss
(perftest-PROGRAM: ib_write_bw, ib_send_bw, ib_read_bw, ib_atomic_bw,
ib_write_lat, ib_send_lat, ib_read_lat: the default post API, which perftest
4.5 takes for the part id the devices report here (ibv_wr_*), and
--use_old_post_send (ibv_post_send), at 64, 4096, 65536 and 1048576 bytes).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

RUN = os.path.abspath(sys.argv[1])
CASE = sys.argv[2]
TMP = tempfile.mkdtemp(prefix="mroce-verbs-programs-")
os.environ["MROCE_VERBS_STATS"] = "1"
# In the sanitizer build, LeakSanitizer would report the programs' own leaks
# (perftest never frees its device list): this file tests what the provider
# does for them; its own memory is checked by test_verbs_provider.
if "ASAN_OPTIONS" in os.environ:
    os.environ["ASAN_OPTIONS"] += ":detect_leaks=0"
# Below the kernel's ephemeral range (32768-60999), where clients of other tests bind.
base = 20000 + (os.getpid() * 37) % 10000
failures = []


def next_port():
    global base
    base += 40
    return base


def config(addr, port, extra):
    """addr: one address, or a comma-separated list: one per plane."""
    path = os.path.join(TMP, "%s-%d.conf" % (addr, port))
    with open(path, "w") as f:
        # verbs_part_id 4119: perftest 4.5 posts through ibv_wr_* for it (doc/verbs.md).
        f.write("[device v]\n%s = %s\nport = %d\npath_port_base = %d\nverbs_part_id = 4119\n%s"
                % ("planes" if "," in addr else "address", addr, port, port + 1, extra))
    return path


def via_mroce_run(conf):
    return [RUN, "-c", conf]


def run_pair(name, server_args, client_args, extra="", timeout=60, daemon=False, launch=via_mroce_run,
             addrs=("127.0.0.1", "127.0.0.2")):
    """Server then client (the server's address replaces SERVER in the client's arguments, else comes
    last); returns (ok, client out, server out). addrs: the two devices' configured addresses (a
    comma-separated list: one per plane, the first the one SERVER names). perftest measures the CPU
    clock against the wall clock before it reports and gives up when a loaded host makes the fit poor
    ("Correlation coefficient r^2 ... < 0.9", "Can't produce a report"), whatever the provider did:
    such a pair runs again, at most twice."""
    for attempt in range(3):
        ok, cout, sout = run_pair_once(name, server_args, client_args, extra, timeout, daemon, launch,
                                       last=attempt == 2, addrs=addrs)
        if ok or "Correlation coefficient r^2" not in cout + sout:
            return ok, cout, sout
        print("  %s: perftest could not calibrate its CPU clock on this loaded host; again" % name)
    return ok, cout, sout


def run_pair_once(name, server_args, client_args, extra, timeout, daemon, launch, last, addrs):
    port = next_port()
    sconf, cconf = config(addrs[0], port, extra), config(addrs[1], port, extra)
    srv = subprocess.Popen(launch(sconf) + server_args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(0.4)
    t0 = time.time()
    try:
        if "SERVER" not in client_args:
            client_args = client_args + ["SERVER"]
        client_args = ["127.0.0.1" if a == "SERVER" else a for a in client_args]
        cli = subprocess.run(launch(cconf) + client_args, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=timeout)
        cout, crc = cli.stdout, cli.returncode
    except subprocess.TimeoutExpired as e:
        cout, crc = (e.stdout or "") if isinstance(e.stdout, str) else "", "timeout"
    try:
        if daemon:  # a server that serves until stopped (qperf)
            srv.terminate()
        sout, _ = srv.communicate(timeout=10)
        src = 0 if daemon else srv.returncode
    except subprocess.TimeoutExpired:
        srv.kill()
        sout, _ = srv.communicate()
        src = "timeout"
    ok = crc == 0 and src == 0
    print("%-62s %s  (%.1f s)" % (name, "ok" if ok else "FAILED (client %s, server %s)" % (crc, src), time.time() - t0))
    if not ok and (last or "Correlation coefficient r^2" not in cout + sout):
        failures.append(name)
        print("--- client:\n%s\n--- server:\n%s" % (cout[-3000:], sout[-3000:]))
    return ok, cout, sout


def tcp_port():
    return str(next_port() + 20)


def figures(out):
    """perftest's result row (the line after the '#bytes' header)."""
    lines = out.splitlines()
    for i, l in enumerate(lines):
        if l.strip().startswith("#bytes") and i + 1 < len(lines):
            return lines[i + 1].split("mroce-verbs:")[0].split()  # the provider's stats line may follow
    return None


def expect(name, cond, why):
    if not cond:
        failures.append(name)
        print("  FAILED: %s: %s" % (name, why))


def devinfo():
    port = next_port()
    conf = config("127.0.0.1", port, "")
    out = subprocess.run([RUN, "-c", conf, "ibv_devices"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=30).stdout
    print(out)
    expect("ibv_devices", re.search(r"^\s*mroce0\s+6d727f000001", out, re.M), "mroce0 with its GUID not listed")
    out = subprocess.run([RUN, "-c", conf, "ibv_devinfo", "-v", "-d", "mroce0"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=30).stdout
    print(out)
    for pat in [r"hca_id:\s+mroce0", r"state:\s+PORT_ACTIVE", r"link_layer:\s+Ethernet", r"active_mtu:\s+4096",
                r"max_mtu:\s+4096", r"port_lid:\s+1\b", r"GID\[\s*0\]:\s+::ffff:127\.0\.0\.1, RoCE v2",
                r"atomic_cap:\s+ATOMIC_HCA", r"vendor_part_id:\s+4119", r"active_speed:\s+\S+", r"max_qp_wr:\s+65536"]:
        expect("ibv_devinfo -v", re.search(pat, out), "no line matching %r" % pat)


loss_totals = [0, 0]


def lossy(name, extra, *outs):
    """Under injected loss the run must have lost packets (else it proved nothing); a lost ACK needs no
    resend, so resends are required of the loss case as a whole (loss_totals)."""
    if not extra:
        return
    drops = sum(int(x) for o in outs for x in re.findall(r"injected_drops (\d+)", o))
    resent = sum(int(x) for o in outs for x in re.findall(r"retransmits (\d+)", o))
    loss_totals[0] += drops
    loss_totals[1] += resent
    print("    injected drops %d, retransmits %d" % (drops, resent))
    expect(name, drops > 0, "no packet was dropped")


def pingpong(extra=""):
    tag = " (1% loss)" if extra else ""
    for args in (["ibv_rc_pingpong", "-g", "0", "-c", "-n", "200", "-s", "4097"],
                 ["ibv_rc_pingpong", "-c", "-n", "200", "-s", "65536"],             # LID only, no GRH
                 ["ibv_rc_pingpong", "-g", "0", "-c", "-e", "-n", "100", "-s", "1"],  # completion events
                 ["ibv_srq_pingpong", "-g", "0", "-c", "-n", "50", "-s", "3000"]):   # 16 QPs on one SRQ
        p = tcp_port()
        ok, cout, sout = run_pair(" ".join(args) + tag, args + ["-d", "mroce0", "-p", p],
                                  args + ["-d", "mroce0", "-p", p], extra)
        if ok:
            expect(" ".join(args), re.search(r"iters in [0-9.]+ seconds", cout), "no result line")
            # -c prints this (exit status unchanged) when a checked byte is wrong.
            expect(" ".join(args), "invalid data" not in cout + sout, "pingpong -c found invalid data")
            lossy(" ".join(args) + tag, extra, cout, sout)


def ud_pingpong():
    port = next_port()
    conf = config("127.0.0.2", port, "")
    r = subprocess.run([RUN, "-c", conf, "ibv_ud_pingpong", "-d", "mroce0", "-g", "0", "-p", tcp_port(), "127.0.0.1"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    print("ibv_ud_pingpong: exit %d\n%s" % (r.returncode, r.stdout))
    expect("ibv_ud_pingpong", r.returncode != 0, "a UD QP must be refused")
    expect("ibv_ud_pingpong", "QP type UD is not supported" in r.stdout, "the provider must say why")


SIZES = {"ib_atomic_bw": [8]}
ITERS = {64: "500", 4096: "300", 65536: "100", 1048576: "20", 8: "300"}


def perftest(prog, extra="", sizes=None, apis=(("default", []), ("old", ["--use_old_post_send"]))):
    tag = " (1% loss)" if extra else ""
    for api, api_args in apis:
        for size in sizes or SIZES.get(prog, [64, 4096, 65536, 1048576]):
            p = tcp_port()
            args = [prog, "-d", "mroce0", "-p", p, "-n", ITERS[size]] + api_args
            if prog != "ib_atomic_bw":
                args += ["-s", str(size)]
            name = "%s -s %d %s%s" % (prog, size, api, tag)
            ok, cout, sout = run_pair(name, args, args, extra)
            if not ok:
                continue
            lossy(name, extra, cout, sout)
            # perftest says which post API it took; the default must be ibv_wr_* (verbs_part_id 4119).
            used = re.search(r"ibv_wr\* API\s*:\s*(ON|OFF)", cout)
            expect(name, used and used.group(1) == ("ON" if api == "default" else "OFF"),
                   "perftest's 'ibv_wr* API' line says %s" % (used and used.group(1)))
            row = figures(cout)
            expect(name, row is not None and len(row) >= 3, "no result row")
            if row:
                print("    " + " ".join(row))
                nums = [float(x) for x in row[2:] if re.match(r"^[0-9.]+$", x)]
                expect(name, int(row[0]) == size and any(v > 0 for v in nums), "result row without figures")


def planes():
    """Two planes per device (R-PLANE-1): one RoCEv2 GID per plane. Each end connects to the other at
    RTR (both at once) through the GID it was given, on plane 0 (-g 0) or plane 1 (-g 1), learns the
    other's planes in the handshake (R-PLANE-6), and both planes carry data on both ends (R-PLANE-2).
    Before the fixes: -g 0 failed at RTR (Device::connect read past its one given address, bad_alloc);
    -g 1 hung (each end a second connection to the other, the QPs' streams on different ones)."""
    addrs = ("127.0.0.1,127.0.0.3", "127.0.0.2,127.0.0.4")
    port = next_port()
    out = subprocess.run([RUN, "-c", config(addrs[0], port, ""), "ibv_devinfo", "-v", "-d", "mroce0"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30).stdout
    for pat in [r"GID\[\s*0\]:\s+::ffff:127\.0\.0\.1, RoCE v2", r"GID\[\s*1\]:\s+::ffff:127\.0\.0\.3, RoCE v2"]:
        expect("ibv_devinfo -v (2 planes)", re.search(pat, out), "no line matching %r" % pat)
    for gid in ("0", "1"):
        name = "ibv_rc_pingpong -g %s (2 planes)" % gid
        args = ["ibv_rc_pingpong", "-g", gid, "-c", "-n", "300", "-s", "8192"]
        p = tcp_port()
        ok, cout, sout = run_pair(name, args + ["-d", "mroce0", "-p", p], args + ["-d", "mroce0", "-p", p],
                                  addrs=addrs, timeout=30)
        if not ok:
            continue
        expect(name, "invalid data" not in cout + sout, "pingpong -c found invalid data")
        expect(name, "GID ::ffff:127.0.0.%s" % ("3" if gid == "1" else "1") in cout,
               "the client was not given the server's plane-%s GID" % gid)
        for who, o in (("client", cout), ("server", sout)):
            per_plane = re.findall(r"plane (\d) (\S+): tx_packets (\d+) rx_packets (\d+)", o)
            print("    %s planes: %s" % (who, per_plane))
            expect(name, len(per_plane) == 2 and all(int(t) > 0 and int(r) > 0 for _, _, t, r in per_plane),
                   "%s: both planes must have sent and received" % who)


def qperf():
    p = tcp_port()
    ok, cout, _ = run_pair("qperf rc_bw rc_lat", ["qperf", "-lp", p], ["qperf", "SERVER", "-lp", p, "-t", "1", "rc_bw", "rc_lat"],
                            daemon=True)
    print(cout)
    if ok:
        expect("qperf rc_bw", re.search(r"rc_bw:\s*\n\s*bw\s*=\s*[0-9.]+ [KMG]?B/sec", cout), "no rc_bw figure")
        expect("qperf rc_lat", re.search(r"rc_lat:\s*\n\s*latency\s*=\s*[0-9.]+ (us|ms|ns)", cout), "no rc_lat figure")


if CASE == "devinfo":
    devinfo()
elif CASE == "planes":
    planes()
elif CASE == "pingpong":
    pingpong()
    ud_pingpong()
elif CASE.startswith("perftest-"):
    perftest(CASE[len("perftest-"):])
elif CASE == "write-bw-4qp":
    p = tcp_port()
    args = ["ib_write_bw", "-d", "mroce0", "-p", p, "-q", "4", "-s", "65536", "-n", "200"]
    ok, cout, _ = run_pair("ib_write_bw -q 4 (four QPs, one connection)", args, args)
    if ok:
        print("    " + " ".join(figures(cout) or []))
        expect("ib_write_bw -q 4", figures(cout) is not None, "no result row")
elif CASE == "nccl-like":
    prog, provider = os.path.abspath(sys.argv[3]), os.path.abspath(sys.argv[4])
    modes = [
        # mroce-run, NCCL_IBVERBS_LIB removed: dlopen("libibverbs.so") finds the shim directory first.
        ("under mroce-run, dlopen(libibverbs.so)", lambda conf: [RUN, "-c", conf, "env", "-u", "NCCL_IBVERBS_LIB"]),
        ("under mroce-run", via_mroce_run),
        # Nothing but NCCL_IBVERBS_LIB: no preload, no library path.
        ("NCCL_IBVERBS_LIB only", lambda conf: ["env", "-u", "LD_PRELOAD", "NCCL_IBVERBS_LIB=" + provider,
                                                "MROCE_CONFIG=" + conf]),
    ]
    # (label, launch, nccl_like arguments, configuration extra)
    modes = [(label, launch, [], "") for label, launch in modes]
    modes += [
        # NCCL_IB_QPS_PER_CONNECTION > 1: a message split over 3 QPs of one connection; a 1-byte
        # message leaves QPs an empty share: a zero-byte WRITE_WITH_IMM with no SGE.
        ("under mroce-run, 3 QPs", via_mroce_run, ["-q", "3"], ""),
        # InfiniBand-style addressing: LID only, no GRH.
        ("under mroce-run, by LID", via_mroce_run, ["-l", "-q", "1"], ""),
        # -r: the sender must have resent (mroce_query_conn through dlsym).
        ("under mroce-run, 1% loss", via_mroce_run, ["-r"], "inject_loss = 0.01\n"),
    ]
    for label, launch, args, extra in modes:
        p = tcp_port()
        ok, cout, sout = run_pair("nccl_like " + label, [prog, "-p", p] + args, [prog, "-p", p] + args + ["SERVER"],
                                  extra, launch=launch)
        lossy("nccl_like " + label, extra, cout, sout)
        print("    " + cout.strip().replace("\n", "\n    "))
        if ok:
            expect(label, "sender: PASS" in cout and "receiver: PASS" in sout, "not verified")
            lib = re.search(r"sender: verbs from (\S+)", cout)
            expect(label, lib and os.path.realpath(lib.group(1)) == os.path.realpath(provider),
                   "verbs did not come from the provider")
elif CASE == "qperf":
    qperf()
elif CASE == "loss":
    loss = "inject_loss = 0.01\n"
    pingpong(loss)
    for prog in ("ib_write_bw", "ib_send_bw"):
        perftest(prog, loss, sizes=[4096, 65536], apis=(("default", []),))
    print("loss case: injected drops %d, retransmits %d" % tuple(loss_totals))
    expect("loss", loss_totals[1] > 0, "nothing was resent")
else:
    print("unknown case %s" % CASE)
    sys.exit(2)

shutil.rmtree(TMP, ignore_errors=True)
if failures:
    print("\n%d failed: %s" % (len(failures), ", ".join(sorted(set(failures)))))
    sys.exit(1)
print("\nall passed")
