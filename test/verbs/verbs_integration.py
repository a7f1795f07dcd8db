#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 The mroce authors
#
# Unmodified verbs programs over the mroce provider (issue 20, doc/verbs.md):
# two processes, each with its own configuration (server 127.0.0.1, client
# 127.0.0.2, same UDP port), started through mroce-run.
#   devices          ibv_devices and ibv_devinfo -v list mroce0 (and mroce1 of
#                    a second [device] section) with port ACTIVE, Ethernet, MTU
#                    4096, a speed, LID = low 16 bits of the address and the
#                    RoCEv2 GID ::ffff:<address>
#   pingpong         ibv_rc_pingpong -g 0 -c, by LID (no -g), with CQ events
#                    (-e); ibv_srq_pingpong -g 0 -c; ibv_ud_pingpong fails with
#                    a clear error (EOPNOTSUPP, "RC queue pairs only")
#   perftest-post    ib_{write,send,read}_{bw,lat} at -s 64/4096/65536/1048576,
#                    ib_atomic_bw (fetch-and-add and compare-and-swap, 8 B),
#                    ib_write_bw -q 4, with perftest's default post API: the
#                    devices report a ConnectX part id (verbs_part_id = 4119)
#                    because perftest 4.5 uses ibv_wr_* only for parts it
#                    knows; each run must print "ibv_wr* API : ON"
#   perftest-old-post  the same with --use_old_post_send (ibv_post_send)
#   qperf            qperf rc_bw and rc_lat (peers by LID, no GRH)
#   nccl             nccl_like (NCCL's loading and data path, byte-exact) under
#                    mroce-run; with only NCCL_IBVERBS_LIB (no LD_PRELOAD); with
#                    only the provider's libibverbs.so link on LD_LIBRARY_PATH
#                    (dlopen("libibverbs.so")); by LID, one QP
#   loss             inject_loss = 0.01 on both devices: the pingpongs (-c),
#                    perftest WRITE and SEND (bw and lat), nccl_like (checks
#                    every byte and requires retransmissions)
# Every run prints its figures. perftest checks no data (its buffers are not
# verified by design): the data checks are nccl_like's, pingpong -c's (one
# byte per page, see doc/verbs.md) and test_verbs_provider's.
# A program that is not installed is reported as SKIP (exit 77 when nothing ran).
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("--run", required=True)
ap.add_argument("--nccl-like", required=True)
ap.add_argument("--provider", required=True)
ap.add_argument("--sizes", default="64,4096,65536,1048576",
                help="perftest message sizes (sanitizer builds run fewer: the programs are not instrumented, "
                     "the provider is, and every size runs the same provider code)")
ap.add_argument("case")
ARGS = ap.parse_args()
RUN = ARGS.run
TMP = tempfile.mkdtemp(prefix="mroce-verbs-test-")
# Ports: each run gets its own UDP port pair (P on 127.0.0.1 and 127.0.0.2,
# paths P+1..P+16) and TCP port P+18, from a window derived from the pid
# (other test processes on this machine use 40000-52000).
_h = (os.getpid() * 7919 + sum(map(ord, ARGS.case)) * 131) % 9
_port = 52400 + _h * 900
failures = []
ran = 0


def next_port():
    global _port
    _port += 20
    return _port


def config(addr, port, extra=""):
    path = os.path.join(TMP, "%s-%d.conf" % (addr, port))
    with open(path, "w") as f:
        f.write("[device d]\naddress = %s\nport = %d\npath_port_base = %d\n%s" % (addr, port, port + 1, extra))
    return path


def have(prog):
    if shutil.which(prog):
        return True
    print("SKIP %s: not installed (scripts/setup.sh installs it)" % prog)
    return False


def tcp_listening(port):
    """True once some process listens on TCP port (any address), from /proc/net/tcp{,6}."""
    want = ":%04X" % port
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[1].endswith(want) and fields[3] == "0A":
                        return True
        except OSError:
            pass
    return False


def wait_listen(proc, port, timeout=10.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if tcp_listening(port):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.01)
    return False


def finish(p, timeout):
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        return None, out


def fail(name, why, *outs):
    msg = "FAIL %s: %s" % (name, why)
    for o in outs:
        if o:
            msg += "\n  | " + "\n  | ".join(o.strip().splitlines()[-25:])
    print(msg, flush=True)
    failures.append(name)


def pair(name, server, client, tcp_port, extra="", timeout=60, env=None, wrap=True):
    """Runs server then client (each under mroce-run with its own device
    configuration); returns (client output, server output) or None after
    recording a failure."""
    global ran
    ran += 1
    p = next_port()
    s_conf, c_conf = config("127.0.0.1", p, extra), config("127.0.0.2", p, extra)
    e = dict(os.environ, MROCE_VERBS_QUIET="1", **(env or {}))
    if wrap:
        s_cmd, c_cmd = [RUN, "-c", s_conf] + server, [RUN, "-c", c_conf] + client
    else:
        s_cmd, c_cmd = server, client
        e_s, e_c = dict(e, MROCE_CONFIG=s_conf), dict(e, MROCE_CONFIG=c_conf)
    t0 = time.monotonic()
    s = subprocess.Popen(s_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=e if wrap else e_s)
    if not wait_listen(s, tcp_port):
        rc, so = finish(s, 5)
        fail(name, "server did not listen on TCP %d (exit %s)" % (tcp_port, rc), so)
        return None
    c = subprocess.Popen(c_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=e if wrap else e_c)
    crc, co = finish(c, timeout)
    src, so = finish(s, 15 if crc is not None else 1)
    dt = time.monotonic() - t0
    if crc is None or src is None:
        fail(name, "did not finish within %ds (client %s, server %s)" % (timeout, crc, src), co, so)
        return None
    if crc != 0 or src != 0:
        fail(name, "exit codes client %d server %d" % (crc, src), co, so)
        return None
    return co, so, dt


# ---- devices ----
def case_devices():
    global ran
    if not (have("ibv_devices") and have("ibv_devinfo")):
        return
    p = next_port()
    conf = os.path.join(TMP, "two.conf")
    with open(conf, "w") as f:
        f.write("[device a]\naddress = 127.0.0.1\nport = %d\npath_port_base = %d\n"
                "[device b]\naddress = 127.0.3.7\nport = %d\npath_port_base = %d\n" % (p, p + 1, p, p + 1))
    ran += 1
    out = subprocess.run([RUN, "-c", conf, "ibv_devices"], capture_output=True, text=True, timeout=20)
    names = re.findall(r"^\s+(mroce\d+)\s+[0-9a-f]{16}\s*$", out.stdout, re.M)
    if out.returncode != 0 or names != ["mroce0", "mroce1"]:
        fail("ibv_devices", "exit %d, devices %s: expected mroce0, mroce1 in order" % (out.returncode, names),
             out.stdout, out.stderr)
    else:
        print("PASS ibv_devices: %s" % ", ".join(names))
    for dev, addr, lid in (("mroce0", "127.0.0.1", 1), ("mroce1", "127.0.3.7", 0x307)):
        ran += 1
        out = subprocess.run([RUN, "-c", conf, "ibv_devinfo", "-v", "-d", dev], capture_output=True, text=True,
                             timeout=20)
        t = out.stdout
        checks = [
            ("hca_id", r"hca_id:\s+%s\b" % dev),
            ("state ACTIVE", r"state:\s+PORT_ACTIVE \(4\)"),
            ("link layer Ethernet", r"link_layer:\s+Ethernet"),
            ("active_mtu 4096", r"active_mtu:\s+4096 \(5\)"),
            ("max_mtu 4096", r"max_mtu:\s+4096 \(5\)"),
            ("LID", r"port_lid:\s+%d\b" % lid),
            ("one GID", r"gid_tbl_len:\s+1\b"),
            ("GID 0 RoCEv2 ::ffff:%s" % addr, r"GID\[\s*0\]:\s+::ffff:%s, RoCE v2" % re.escape(addr)),
            ("a speed", r"active_speed:\s+[1-9][0-9.]* Gbps"),
            ("phys state LINK_UP", r"phys_state:\s+LINK_UP"),
        ]
        missing = [what for what, rx in checks if not re.search(rx, t)]
        if out.returncode != 0 or missing:
            fail("ibv_devinfo -v -d %s" % dev, "exit %d, missing: %s" % (out.returncode, ", ".join(missing)), t,
                 out.stderr)
        else:
            speed = re.search(r"active_speed:\s+(.*)", t).group(1).strip()
            print("PASS ibv_devinfo -v -d %s: ACTIVE, Ethernet, MTU 4096, LID %d, GID[0] ::ffff:%s RoCE v2, %s"
                  % (dev, lid, addr, speed))


# ---- pingpongs ----
def pingpong(prog, args, extra="", label=None):
    if not have(prog):
        return
    tcp = next_port() + 18
    name = label or "%s %s" % (prog, " ".join(args))
    base = [prog, "-d", "mroce0", "-p", str(tcp)] + args
    r = pair(name, base, base + ["127.0.0.1"], tcp, extra)
    if r is None:
        return
    co, so, dt = r
    if "invalid data" in co + so:
        fail(name, "pingpong -c reported invalid data", co, so)
        return
    m = re.search(r"(\d+) iters in ([0-9.]+) seconds = ([0-9.]+) usec/iter", co)
    b = re.search(r"= ([0-9.]+) Mbit/sec", co)
    if not m or not b:
        fail(name, "no figures in the client's output", co)
        return
    print("PASS %s: %s iters, %s usec/iter, %s Mbit/s (%.1f s)" % (name, m.group(1), m.group(3), b.group(1), dt),
          flush=True)


def case_pingpong(extra="", n="200"):
    pingpong("ibv_rc_pingpong", ["-g", "0", "-c", "-n", n, "-s", "4097"], extra)
    pingpong("ibv_rc_pingpong", ["-c", "-n", n], extra, "ibv_rc_pingpong -c -n %s (by LID)" % n)
    pingpong("ibv_rc_pingpong", ["-g", "0", "-c", "-e", "-n", n, "-s", "65536"], extra)
    pingpong("ibv_srq_pingpong", ["-g", "0", "-c", "-n", "50", "-q", "4"], extra)
    if extra:
        return
    global ran
    if not have("ibv_ud_pingpong"):
        return
    ran += 1
    p = next_port()
    conf = config("127.0.0.1", p)
    out = subprocess.run([RUN, "-c", conf, "ibv_ud_pingpong", "-d", "mroce0", "-g", "0", "-p", str(p + 18)],
                         capture_output=True, text=True, timeout=20)
    err = out.stdout + out.stderr
    if out.returncode == 0 or "RC queue pairs only" not in err or "EOPNOTSUPP" not in err:
        fail("ibv_ud_pingpong", "exit %d: expected a failure naming EOPNOTSUPP and 'RC queue pairs only'"
             % out.returncode, err)
    else:
        line = next(l for l in err.splitlines() if "RC queue pairs only" in l)
        print("PASS ibv_ud_pingpong fails (exit %d): %s" % (out.returncode, line.strip()))


# ---- perftest ----
def perftest(prog, args, extra="", post_api=None, label=None):
    """One perftest pair; checks the result table. post_api: 'ON'/'OFF', the
    'ibv_wr* API' line perftest prints."""
    if not have(prog):
        return None
    tcp = next_port() + 18
    name = label or "%s %s" % (prog, " ".join(args))
    base = [prog, "-d", "mroce0", "-p", str(tcp)] + args
    r = pair(name, base, base + ["127.0.0.1"], tcp, extra)
    if r is None:
        return None
    co, so, dt = r
    api = re.search(r"ibv_wr\* API\s*:\s*(ON|OFF)", co)
    if post_api and (not api or api.group(1) != post_api):
        fail(name, "perftest used ibv_wr* API %s, expected %s" % (api and api.group(1), post_api), co)
        return None
    lines = co.splitlines()
    row = None
    for i, l in enumerate(lines):
        if l.strip().startswith("#bytes") and i + 1 < len(lines):
            row = lines[i + 1].split()
            head = l
    if not row or not re.match(r"^\d+$", row[0]):
        fail(name, "no result table", co, so)
        return None
    size = int(row[0])
    want = next((int(args[i + 1]) for i, a in enumerate(args) if a == "-s"), None)
    if prog == "ib_atomic_bw":
        want = 8
    if want is not None and size != want:
        fail(name, "table reports %d bytes, expected %d" % (size, want), co)
        return None
    vals = [float(x) for x in row[2:]]
    if "BW average" in head:
        bw, rate = vals[1], vals[2]
        if not bw > 0 or not rate > 0:
            fail(name, "BW average %s MB/s, MsgRate %s Mpps: expected > 0" % (bw, rate), co)
            return None
        print("PASS %-44s %8.1f MB/s %8.4f Mpps (%.1f s)" % (name, bw, rate, dt), flush=True)
    else:
        typ, avg = vals[2], vals[3]
        if not typ > 0 or not avg > 0:
            fail(name, "t_typical %s us, t_avg %s us: expected > 0" % (typ, avg), co)
            return None
        print("PASS %-44s t_typical %8.2f us t_avg %8.2f us (%.1f s)" % (name, typ, avg, dt), flush=True)
    return row


SIZES = tuple(ARGS.sizes.split(","))
# Few iterations keep every run short; 1 MiB needs fewer than 64 B.
ITERS = {"64": "200", "4096": "200", "65536": "100", "1048576": "20"}
LAT_ITERS = {"64": "200", "4096": "200", "65536": "50", "1048576": "10"}
if any(s not in ITERS for s in SIZES):
    print("--sizes: each of %s" % ", ".join(ITERS))
    sys.exit(2)


def case_perftest(old_post):
    flags = ["--use_old_post_send"] if old_post else []
    # perftest 4.5 posts with ibv_wr_* only on device part ids it knows.
    extra = "" if old_post else "verbs_part_id = 4119\n"
    api = "OFF" if old_post else "ON"
    for prog in ("ib_write_bw", "ib_send_bw", "ib_read_bw"):
        for s in SIZES:
            perftest(prog, ["-s", s, "-n", ITERS[s]] + flags, extra, api)
    for s in SIZES:
        for prog in ("ib_write_lat", "ib_send_lat", "ib_read_lat"):
            perftest(prog, ["-s", s, "-n", LAT_ITERS[s]] + flags, extra, api)
    perftest("ib_atomic_bw", ["-n", "200"] + flags, extra, api)
    perftest("ib_atomic_bw", ["-A", "CMP_AND_SWAP", "-n", "200"] + flags, extra, api)
    perftest("ib_write_bw", ["-q", "4", "-s", "65536", "-n", "100"] + flags, extra, api)


# ---- qperf ----
def case_qperf():
    global ran
    if not have("qperf"):
        return
    ran += 1
    p = next_port()
    tcp = p + 18
    s_conf, c_conf = config("127.0.0.1", p), config("127.0.0.2", p)
    env = dict(os.environ, MROCE_VERBS_QUIET="1")
    s = subprocess.Popen([RUN, "-c", s_conf, "qperf", "-lp", str(tcp)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=env)
    try:
        if not wait_listen(s, tcp):
            fail("qperf", "server did not listen on TCP %d" % tcp)
            return
        t0 = time.monotonic()
        try:
            c = subprocess.run([RUN, "-c", c_conf, "qperf", "-lp", str(tcp), "-t", "1", "-i", "mroce0:1",
                                "127.0.0.1", "rc_bw", "rc_lat"], capture_output=True, text=True, timeout=60,
                               env=env)
        except subprocess.TimeoutExpired:
            fail("qperf rc_bw rc_lat", "did not finish within 60 s")
            return
        dt = time.monotonic() - t0
        out = c.stdout + c.stderr
        bw = re.search(r"rc_bw:\s*\n\s*bw\s*=\s*([0-9.]+) (\w+/sec)", out)
        lat = re.search(r"rc_lat:\s*\n\s*latency\s*=\s*([0-9.]+) (\w+)", out)
        if c.returncode != 0 or not bw or not lat or float(bw.group(1)) <= 0 or float(lat.group(1)) <= 0:
            fail("qperf rc_bw rc_lat", "exit %d, no positive bw and latency" % c.returncode, out)
        else:
            print("PASS qperf rc_bw %s %s, rc_lat %s %s (%.1f s)" % (bw.group(1), bw.group(2), lat.group(1),
                                                                   lat.group(2), dt))
    finally:
        s.kill()
        s.communicate()


# ---- nccl_like ----
def nccl(label, args, extra="", env=None, wrap=True):
    tcp = next_port() + 18
    base = [ARGS.nccl_like, "-p", str(tcp)] + args
    r = pair("nccl_like " + label, base, base + ["127.0.0.1"], tcp, extra, env=env, wrap=wrap)
    if r is None:
        return
    co, so, dt = r
    if "sender: PASS" not in co or "receiver: PASS" not in so:
        fail("nccl_like " + label, "no PASS from both sides", co, so)
        return
    lib = re.search(r"sender: verbs from (\S+)", co)
    if not lib or os.path.realpath(lib.group(1)) != os.path.realpath(ARGS.provider):
        fail("nccl_like " + label, "verbs came from %s, not the provider" % (lib and lib.group(1)), co)
        return
    summary = re.search(r"sender: PASS: (.*)", co).group(1)
    retx = re.findall(r"retransmits (\d+)", co)
    print("PASS nccl_like %s: verbs from %s; %s; sender retransmits %s (%.1f s)"
          % (label, lib.group(1), summary, retx[0] if retx else "?", dt), flush=True)


def case_nccl():
    nccl("under mroce-run (GID, 2 QPs)", [])
    provider_dir = os.path.dirname(os.path.abspath(ARGS.provider))
    nccl("with only NCCL_IBVERBS_LIB", ["-q", "3"], env={"NCCL_IBVERBS_LIB": os.path.abspath(ARGS.provider)},
         wrap=False)
    nccl("with only the shim on LD_LIBRARY_PATH (dlopen libibverbs.so)", ["-q", "1"],
         env={"LD_LIBRARY_PATH": os.path.join(provider_dir, "shim")}, wrap=False)
    nccl("by LID (no GRH), 1 QP", ["-l", "-q", "1"])


# ---- 1% loss ----
def case_loss():
    loss = "inject_loss = 0.01\ninject_seed = %d\n" % (os.getpid() % 1000 + 1)
    case_pingpong(loss, "100")
    nccl("under 1% loss", ["-r"], loss)
    for old in (False, True):
        flags = ["--use_old_post_send"] if old else []
        extra = loss + ("" if old else "verbs_part_id = 4119\n")
        api = "OFF" if old else "ON"
        tag = " (1% loss)"
        for prog in ("ib_write_bw", "ib_send_bw"):
            for s in ("65536", "1048576"):
                args = ["-s", s, "-n", ITERS[s]] + flags
                perftest(prog, args, extra, api, "%s %s%s" % (prog, " ".join(args), tag))
        for prog in ("ib_write_lat", "ib_send_lat"):
            args = ["-s", "4096", "-n", "100"] + flags
            perftest(prog, args, extra, api, "%s %s%s" % (prog, " ".join(args), tag))


CASES = {
    "devices": case_devices,
    "pingpong": case_pingpong,
    "perftest-post": lambda: case_perftest(False),
    "perftest-old-post": lambda: case_perftest(True),
    "qperf": case_qperf,
    "nccl": case_nccl,
    "loss": case_loss,
}

if ARGS.case not in CASES:
    print("unknown case %s (one of %s)" % (ARGS.case, ", ".join(CASES)))
    sys.exit(2)
try:
    CASES[ARGS.case]()
finally:
    shutil.rmtree(TMP, ignore_errors=True)
if failures:
    print("%d of %d runs failed: %s" % (len(failures), ran, "; ".join(failures)))
    sys.exit(1)
if ran == 0:
    print("SKIP: none of the programs is installed")
    sys.exit(77)
print("all %d runs passed" % ran)
