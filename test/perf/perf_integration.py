#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 The mroce authors
#
# Integration tests of mroce-perf: two real processes on 127.0.0.1.
#   verify OP LOSS   byte-exact transfer (--verify) of OP under injected loss; OP fadd/cas:
#                    every fetched value and the final word (each atomic ran exactly once)
#   killed-peer      SIGKILL the server mid-transfer: the client reports a
#                    connection error within a bounded time, no hang
#   killed-client    SIGKILL the client: the server gives up within a bounded time
#   dpdk-verify OP LOSS  the same byte-exact transfer (or atomics check) over the DPDK driver:
#                    two processes over net_memif (--no-huge --no-pci), each
#                    with its own configuration file; no mbuf may stay in use
#                    (optional 4th argument: RX/TX queues per port, per-path queues;
#                    optional 5th: planes, one net_memif pair per plane, R-PLANE-*;
#                    optional 6th: the device key pipeline, placement or placement+cc:
#                    payload copies, and the CC core, on EAL lcores of their own in each
#                    process, every lcore of a process on the same two CPUs; the stages'
#                    own counters must show work: copies at the receiving end, window
#                    records at both)
#   bad-input        garbage, truncated datagrams and packets for unknown
#                    connection ids at the server's ports during a transfer:
#                    counted as drops, and the transfer still verifies
#   one-buffer       the default buffer model (every message of a stream on its
#                    first slot, as perftest) completes every message under 1%
#                    loss and both ends report their CPU; --slots and --verify
#                    give distinct slots; conflicting flags are refused
#   one-path-full-window  one path whose window reaches the whole 256-packet SACK
#                    span (receiver capacity 400 Gbit/s): every message completes
#                    (a tail-loss probe or a timeout of a full span used to stall
#                    the path until conn_timeout)
# Exit status 0 = pass; every failure prints why.
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

PERF = sys.argv[1]
CASE = sys.argv[2:]
# Distinct ports per case and per run: meson runs cases in parallel.
_h = (os.getpid() * 7919 + sum(map(ord, " ".join(CASE))) * 131) % 12000
PORT = 40000 + (_h // 40) * 40  # server P, P+1..P+16 paths; client P+20, P+21..P+36
LPORT = PORT + 20


def fail(msg, *procs):
    for p in procs:
        if p and p.poll() is None:
            p.kill()
    print("FAIL:", msg)
    sys.exit(1)


def server(*extra):
    return subprocess.Popen([PERF, "-p", str(PORT), "--json", "--accept-timeout", "20", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def client(*extra):
    return subprocess.Popen([PERF, "127.0.0.1", "-p", str(PORT), "--local-port", str(LPORT), "--json", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(p, timeout, what):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        fail(f"{what} did not finish within {timeout}s; stderr: {err[-500:]}")
    return p.returncode, out, err


def run_pair(cargs, sargs=(), timeout=60):
    s = server(*sargs)
    time.sleep(0.3)
    c = client(*cargs)
    crc, cout, cerr = finish(c, timeout, "client")
    src, sout, serr = finish(s, 10, "server")
    if crc != 0 or src != 0:
        fail(f"exit codes client {crc} server {src}; client: {cerr[-800:]} server: {serr[-800:]}")
    try:
        return json.loads(cout), json.loads(sout)
    except json.JSONDecodeError as e:
        fail(f"bad JSON ({e}): client {cout!r} server {sout!r}")


def op_workload(op, loss, bulk_n):
    """Message count and size flags of a verify run: bulk ops move bulk_n (halved at high
    loss) 64 KiB messages; atomics (8 bytes, always checked: message j fetches j, the word
    ends at n, so each ran exactly once) five times as many."""
    n = bulk_n if loss < 0.05 else bulk_n // 2
    if op in ("fadd", "cas"):
        return str(5 * n), []
    return str(n), ["-s", "65536"]


def check_injected(cj, sj, loss):
    """With loss injected, both ends together dropped something (else the run proved nothing)."""
    if loss > 0:
        injected = cj["engine"]["injected_drops"] + sj["engine"]["injected_drops"]
        if injected == 0:
            fail("loss injection dropped nothing")
        print(f"injected drops {injected}, retransmits client {cj['retransmits']}")


def case_verify(op, loss):
    loss = float(loss)
    n, size = op_workload(op, loss, 600)
    inj = ["--inject-loss", str(loss), "--seed", "11"] if loss > 0 else []
    cj, sj = run_pair(["--op", op, *size, "-n", n, "--verify", *inj],
                      ["--inject-loss", str(loss), "--seed", "12"] if loss > 0 else [])
    if cj["verify"] != "ok" or sj["verify"] != "ok" or cj["mismatches"] != 0:
        fail(f"verification: client {cj['verify']} server {sj['verify']} mismatches {cj['mismatches']}")
    if cj["messages"] != int(n):
        fail(f"{cj['messages']} messages completed, expected {n}")
    if op == "send" and sj["received"] != int(n):
        fail(f"server received {sj['received']} of {n} SENDs")
    check_injected(cj, sj, loss)
    if cj["op"] != op or cj["size"] != (8 if op in ("fadd", "cas") else 65536):
        fail(f"client ran op {cj['op']} size {cj['size']}")
    print(f"PASS verify {op} loss {loss}: {cj['goodput_gbps']:.2f} Gbit/s, {cj['msg_rate']:.0f} msg/s, "
          f"{cj['messages']} x {cj['size']} B, duplicates {cj['duplicates']}")


def check_lat(cj, sj, n, loss):
    """A --lat run: every ping answered (the client waits for the pong to carry
    its own sequence number, so a lost, stale or misplaced answer never ends
    the run), the percentiles ordered, the loss injected and repaired."""
    if cj["mode"] != "lat" or cj["size"] != 8:
        fail(f"client ran mode {cj['mode']} size {cj['size']}")
    if cj["messages"] != n:
        fail(f"{cj['messages']} round trips completed, expected {n}")
    if not 0 < cj["lat_p50_us"] <= cj["lat_p99_us"] <= cj["lat_p999_us"]:
        fail(f"latency percentiles out of order: {cj['lat_p50_us']} {cj['lat_p99_us']} {cj['lat_p999_us']}")
    check_injected(cj, sj, loss)


def case_lat(loss, sq_depth=None):
    """mroce-perf --lat over UDP loopback: 8-byte WRITE ping-pong. With sq_depth, both
    ends' streams hold that many send WRs (engine stream_depth): a ping or pong whose
    ACK is late (lost, its path quiet until an RTO) holds its queue's head while the
    later ones complete, so a small queue fills; that is back-pressure, to wait out.
    Before, each end posted with post_send, which throws on a full queue: the run
    ended 'send queue full' (seen over memif at 5% loss on a loaded host, about one
    run in eight at the default 256)."""
    loss = float(loss)
    n = 3000
    inj = (lambda seed: ["--inject-loss", str(loss), "--seed", str(seed)]) if loss > 0 else (lambda seed: [])
    conf = []
    if sq_depth:
        path = f"/tmp/mroce-perf-lat-sq-{os.getpid()}.conf"
        with open(path, "w") as f:
            f.write(f"[engine]\nstream_depth = {sq_depth}\n")
        conf = ["--config", path]
    cj, sj = run_pair(["--lat", "-n", str(n), *conf, *inj(11)], [*conf, *inj(12)])
    if conf:
        os.unlink(conf[1])
    check_lat(cj, sj, n, loss)
    print(f"PASS lat loss {loss}{f' stream_depth {sq_depth}' if sq_depth else ''}: p50 {cj['lat_p50_us']:.1f} us, "
          f"p99 {cj['lat_p99_us']:.1f} us, {n} round trips, retransmits {cj['retransmits']}")


def case_busy_peer():
    """A peer busy with local work longer than conn_timeout (allocating, filling and checking
    256 MiB at each end with conn_timeout 200 ms) is not declared silent: mroce-perf keeps
    the device progressing through such work (its ACKs and keepalive answers go out,
    R-CONN-15), so verified READs of 128 MiB messages complete. Before, the
    first message's CONNECT-time Hello went unacknowledged while the server allocated, and
    the client failed with 'peer silent'."""
    for op in ("read",):  # READ: the server fills its buffer before answering, the client checks each message
        t0 = time.time()
        cj, sj = run_pair(["--op", op, "-s", str(128 << 20), "-n", "2", "--verify", "--conn-timeout", "200"],
                          ["--conn-timeout", "200"], timeout=120)
        if cj["verify"] != "ok" or sj["verify"] != "ok" or cj["messages"] != 2:
            fail(f"{op}: verify client {cj['verify']} server {sj['verify']}, {cj['messages']} messages")
        print(f"PASS busy peer {op}: 2 x 128 MiB verified in {time.time() - t0:.1f} s with conn_timeout 200 ms")


def case_killed_peer():
    s = server("--conn-timeout", "500")
    time.sleep(0.3)
    c = client("-D", "30", "-s", "65536", "--conn-timeout", "500")
    time.sleep(1.0)
    if c.poll() is not None or s.poll() is not None:
        fail(f"a process ended early: client {c.poll()} server {s.poll()}; client stderr "
             f"{c.stderr.read()[-500:]}", c, s)
    s.send_signal(signal.SIGKILL)
    s.wait()
    t0 = time.monotonic()
    rc, out, err = finish(c, 10, "client after the server was killed")
    dt = time.monotonic() - t0
    if rc != 3 or "connection error" not in err:
        fail(f"client exit {rc}, stderr {err[-500:]!r}: expected exit 3 with 'connection error'")
    # The state at the failure comes with it: a dead peer (nothing received
    # since) is told apart from a stalled transfer by the per-path table.
    if "state at the failure" not in err or " path  state" not in err or '"rx_packets"' not in err:
        fail(f"no per-path state on stderr with the connection error: {err[-800:]!r}")
    if dt > 5:
        fail(f"connection error reported after {dt:.1f}s (conn_timeout 0.5s)")
    print(f"PASS killed peer: client reported in {dt:.2f}s: {err.strip().splitlines()[-1]}")


def case_killed_client():
    s = server("--conn-timeout", "500")
    time.sleep(0.3)
    c = client("-D", "30", "-s", "65536")
    time.sleep(1.0)
    c.send_signal(signal.SIGKILL)
    c.wait()
    t0 = time.monotonic()
    rc, out, err = finish(s, 10, "server after the client was killed")
    dt = time.monotonic() - t0
    if rc != 3 or "connection error" not in err:
        fail(f"server exit {rc}, stderr {err[-500:]!r}: expected exit 3 with 'connection error'")
    if "state at the failure" not in err or " path  state" not in err:
        fail(f"no per-path state on stderr with the connection error: {err[-800:]!r}")
    if dt > 5:
        fail(f"server noticed after {dt:.1f}s")
    print(f"PASS killed client: server reported in {dt:.2f}s: {err.strip().splitlines()[-1]}")


def case_one_buffer():
    n = 400
    # The default is perftest's buffer model: one buffer per stream, both ends.
    cj, sj = run_pair(["-s", "65536", "-n", str(n), "--inject-loss", "0.01", "--seed", "5"],
                      ["--inject-loss", "0.01", "--seed", "6"])
    if cj["messages"] != n or cj.get("one_buffer") is not True:
        fail(f"default: {cj['messages']} of {n} messages, one_buffer {cj.get('one_buffer')!r}: expected true")
    if cj["engine"]["injected_drops"] + sj["engine"]["injected_drops"] == 0 or cj["retransmits"] == 0:
        fail("loss injection dropped nothing / nothing was retransmitted")
    if not (cj["cpu_s"] > 0 and cj["server"]["cpu_s"] > 0):
        fail(f"cpu_s client {cj['cpu_s']} server {cj['server']['cpu_s']}: expected both > 0")
    for flags, want in ((["--one-buffer"], True), (["--slots"], False), (["--verify"], False)):
        cj, _ = run_pair(["-s", "65536", "-n", "64"] + flags, [])
        if cj["messages"] != 64 or cj.get("one_buffer") is not want:
            fail(f"{flags}: {cj['messages']} of 64 messages, one_buffer {cj.get('one_buffer')!r}: expected {want}")
    for flags, msg in ((["--one-buffer", "--verify"], "--one-buffer and --verify"),
                       (["--one-buffer", "--slots"], "--one-buffer and --slots"),
                       (["--lat", "--slots"], "drop --slots"),
                       (["--op", "fadd", "-s", "64"], "atomics are 8 bytes"),
                       (["--op", "cas", "--one-buffer"], "drop --one-buffer"),
                       (["--op", "fadd", "--lat"], "drop --op fadd")):
        p = subprocess.run([PERF, "127.0.0.1", "-p", str(PORT)] + flags, capture_output=True, text=True, timeout=10)
        if p.returncode != 1 or msg not in p.stderr:
            fail(f"{' '.join(flags)}: exit {p.returncode}, stderr {p.stderr[-300:]!r}: expected a usage error")
    print(f"PASS one-buffer: {n} x 64 KiB by default under 1% loss, --one-buffer/--slots/--verify choose as "
          f"documented, conflicting flags refused")


def case_one_path_full_window():
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "config", "mroce.conf")
    with open(src) as f:
        text = f.read()
    if "rx_capacity_mbps = 100000" not in text:
        fail("config/mroce.conf: no 'rx_capacity_mbps = 100000' line to raise")
    conf = f"/tmp/mroce-full-window-{os.getpid()}.conf"
    with open(conf, "w") as f:
        f.write(text.replace("rx_capacity_mbps = 100000", "rx_capacity_mbps = 400000"))
    try:
        # No --verify: checking the slots slows the server enough that the window
        # rarely fills; the byte-exact runs are the verify cases.
        n = 1500
        common = ["--config", conf]
        cj, sj = run_pair([*common, "-s", "1048576", "-n", str(n), "--paths", "1"], common, timeout=60)
    finally:
        os.unlink(conf)
    if cj["messages"] != n:
        fail(f"{cj['messages']} of {n} messages")
    cw = max(p["cwnd"] for p in cj["path"])
    print(f"PASS one-path-full-window: {n} x 1 MiB on 1 path, {cj['goodput_gbps']:.2f} Gbit/s, cwnd {cw:.0f}, "
          f"timeouts {sum(p['timeouts'] for p in cj['path'])}, probes {sum(p['tail_probes'] for p in cj['path'])}")


def case_bad_input():
    s = server()
    time.sleep(0.3)
    c = client("-D", "2", "-s", "65536", "--verify")
    sent = {"garbage": 0, "truncated": 0, "unknown": 0}
    stop = threading.Event()

    def blast():
        rnd = random.Random(5)
        sk = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        time.sleep(0.4)
        while not stop.is_set():
            dst = ("127.0.0.1", PORT + rnd.choice([0, 0, 1, 2, 3, 4]))
            kind = rnd.choice(list(sent))
            if kind == "garbage":
                # version byte 0x77: never a valid datagram
                pkt = bytes([0x77]) + rnd.randbytes(rnd.randint(1, 1500))
            elif kind == "truncated":
                pkt = struct.pack(">BB", 1, 1) + rnd.randbytes(rnd.randint(0, 10))
            else:
                # a well-formed PROBE (24 B) for a connection id nobody owns
                pkt = struct.pack(">BBHIIHHII", 1, 4, 0, 0x7E000000 + rnd.randint(0, 1 << 20),
                                  rnd.randint(1, 1 << 30), 0, 0, rnd.randint(0, 1 << 30), 0)
            sk.sendto(pkt, dst)
            sent[kind] += 1
            if sum(sent.values()) % 50 == 0:
                time.sleep(0.002)

    th = threading.Thread(target=blast)
    th.start()
    crc, cout, cerr = finish(c, 30, "client")
    stop.set()
    th.join()
    src, sout, serr = finish(s, 10, "server")
    if crc != 0 or src != 0:
        fail(f"exit codes client {crc} server {src}: {cerr[-500:]} {serr[-500:]}")
    cj, sj = json.loads(cout), json.loads(sout)
    e = sj["engine"]
    if cj["verify"] != "ok" or sj["verify"] != "ok":
        fail(f"verification failed under bad input: {cj['verify']}/{sj['verify']}")
    # Sent while the server ran; a few may arrive after it reported: allow a margin below.
    if e["rx_unknown_conn"] == 0 or e["rx_decode_errors"] == 0 or e["rx_truncated"] == 0:
        fail(f"drops not counted: {e} (sent {sent})")
    if e["rx_bad_version"] == 0:
        fail(f"garbage not counted as bad_version: {e}")
    print(f"PASS bad input: sent {sent}; server counted decode {e['rx_decode_errors']} "
          f"(truncated {e['rx_truncated']}, bad_version {e['rx_bad_version']}) unknown_conn {e['rx_unknown_conn']}; "
          f"transfer {cj['goodput_gbps']:.2f} Gbit/s verified")


def dpdk_configs(queues=1, planes=1, pipeline="none"):
    """Server and client configuration files for one net_memif link per plane
    (planes > 1: one vdev, address and neighbour table per plane, R-PLANE-*).
    Returns the last plane's socket (the server has made them all once it exists)."""
    socks = [f"/tmp/mroce-perf-memif-{os.getpid()}-{p}.sock" for p in range(planes)]
    cpus = sorted(os.sched_getaffinity(0))
    files = []
    # The server places itself (lcores = auto: hwloc, the first free core), the client is pinned.
    cores = [("server", 1, 2, "auto"), ("client", 2, 1, cpus[-1])]
    if pipeline != "none":
        # The engine lcore and one per stage, all free to run on the last two CPUs (an lcore
        # map): on a 2-core host each process's stages share the CPUs with both engines.
        n = 3 if pipeline == "placement+cc" else 2
        lmap = "(" + ",".join(map(str, range(n))) + ")@(" + ",".join(map(str, cpus[-2:])) + ")"
        cores = [("server", 1, 2, lmap), ("client", 2, 1, lmap)]
    for role, me, peer, cpu in cores:
        path = f"/tmp/mroce-perf-dpdk-{os.getpid()}-{role}.conf"
        # bsize: one frame per memif buffer (see test/dpdk/test_dpdk_integrity_memif.cpp);
        # memif reports MTU 1500 but carries the 4 KiB segments: tx_max_l3.
        vdevs = " ".join(f"--vdev=net_memif{p},role={role},id=0,socket={socks[p]},socket-abstract=no,"
                         f"mac=02:00:00:00:0{p + 1}:0{me},bsize=8192" for p in range(planes))
        addrs = ", ".join(f"10.0.{p + 1}.{me}" for p in range(planes))
        nbrs = " | ".join(f"10.0.{p + 1}.{peer} 02:00:00:00:0{p + 1}:0{peer}" for p in range(planes))
        where = f"address = {addrs}" if planes == 1 else \
            f"planes = {addrs}\ndpdk_port = " + ", ".join(f"net_memif{p}" for p in range(planes))
        with open(path, "w") as f:
            f.write(f"""[engine]
max_payload = 4096
[device memif]
driver = dpdk
{where}
port = 4793
lcores = {cpu}
eal_args = --no-huge --no-pci --log-level lib.eal:warning {vdevs}
eal_memory_mb = 256
neighbours = {nbrs}
tx_max_l3 = 4196
rx_queues = {queues}
tx_queues = {queues}
pipeline = {pipeline}
""")
        files.append(path)
    return socks[-1], files


def run_dpdk_pair(loss, queues, planes, pipeline, cargs):
    """Server and client mroce-perf over net_memif (dpdk_configs), loss injected
    at both ends; returns (crc, cout, cerr, src, sout, serr)."""
    sock, (scfg, ccfg) = dpdk_configs(queues, planes, pipeline)
    try:
        os.unlink(sock)
    except FileNotFoundError:
        pass
    inj_s = ["--inject-loss", str(loss), "--seed", "12"] if loss > 0 else []
    inj_c = ["--inject-loss", str(loss), "--seed", "11"] if loss > 0 else []
    s = subprocess.Popen([PERF, "--config", scfg, "--json", "--accept-timeout", "30", *inj_s],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The memif client needs the server's socket; mroce-perf prints once it listens.
    for _ in range(300):
        if os.path.exists(sock) or s.poll() is not None:
            break
        time.sleep(0.05)
    # R-PLANE-6: the server named on every plane.
    server_at = ",".join(f"10.0.{p + 1}.1" for p in range(planes))
    c = subprocess.Popen([PERF, server_at, "--config", ccfg, "--json", *cargs, *inj_c],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    crc, cout, cerr = finish(c, 60, "client")
    src, sout, serr = finish(s, 15, "server")
    for f in [scfg, ccfg] + [sock.replace(f"-{planes - 1}.sock", f"-{p}.sock") for p in range(planes)]:
        try:
            os.unlink(f)
        except FileNotFoundError:
            pass
    return crc, cout, cerr, src, sout, serr


def case_dpdk_lat(loss):
    """mroce-perf --lat over net_memif, one lcore each end."""
    loss = float(loss)
    n = 3000
    crc, cout, cerr, src, sout, serr = run_dpdk_pair(loss, 1, 1, "none", ["--lat", "-n", str(n)])
    if crc != 0 or src != 0:
        fail(f"exit codes client {crc} server {src}; client: {cerr[-1500:]} server: {serr[-1500:]}")
    try:
        cj, sj = json.loads(cout), json.loads(sout)
    except json.JSONDecodeError as e:
        fail(f"bad JSON ({e}): client {cout!r} server {sout!r}")
    check_lat(cj, sj, n, loss)
    # Each end's answer leaves in a PMD transmit burst of its own, the ACK of
    # what it answers in the next: two per round trip (round 39: sharing one
    # saved a driver send but lengthened the round trip). Lossless only: a
    # repair sends more. The slack is for setup, control messages and the
    # rare tail-loss probe.
    if loss == 0:
        for side, j in (("client", cj), ("server", sj)):
            pkts, bursts = j["engine"]["udp_tx_packets"], j["engine"]["tx_calls"]
            if pkts < 2 * n or not 1.95 * n <= bursts <= pkts:
                fail(f"{side}: {pkts} packets in {bursts} transmit bursts for {n} round trips "
                     f"(want at least {2 * n} packets, {1.95 * n:.0f} to {pkts} bursts)")
    print(f"PASS dpdk lat loss {loss}: p50 {cj['lat_p50_us']:.1f} us, p99 {cj['lat_p99_us']:.1f} us, {n} round trips, "
          f"transmit bursts client {cj['engine']['tx_calls']} server {sj['engine']['tx_calls']}")


def case_dpdk_verify(op, loss, queues="1", planes="1", pipeline="none"):
    loss = float(loss)
    n, size = op_workload(op, loss, 400)
    crc, cout, cerr, src, sout, serr = run_dpdk_pair(loss, int(queues), int(planes), pipeline,
                                                     ["--op", op, *size, "-n", n, "--verify"])
    if crc != 0 or src != 0:
        # A negative code is the signal that ended the process (after its report, at exit).
        why = "; ".join(f"{who} killed by {signal.Signals(-rc).name}" for who, rc in (("client", crc), ("server", src))
                        if rc < 0)
        fail(f"exit codes client {crc} server {src}{' (' + why + ')' if why else ''}; "
             f"client: {cerr[-1500:]} server: {serr[-1500:]}")
    want_s = "mroce dpdk: lcores auto: lcore 0 cpu " if pipeline == "none" else "mroce dpdk: lcores from configuration"
    for who, err, want in (("client", cerr, "mroce dpdk: lcores from configuration"), ("server", serr, want_s)):
        if want not in err:
            fail(f"{who} did not print its lcore choice ({want!r}): {err[-800:]}")
        if "mbufs in use at close" in err or "leaking its pools" in err:
            fail(f"{who} leaked mbufs: {err[-800:]}")
    try:
        cj, sj = json.loads(cout), json.loads(sout)
    except json.JSONDecodeError as e:
        fail(f"bad JSON ({e}): client {cout!r} server {sout!r}")
    if cj["verify"] != "ok" or sj["verify"] != "ok" or cj["mismatches"] != 0:
        fail(f"verification: client {cj['verify']} server {sj['verify']} mismatches {cj['mismatches']}")
    if cj["messages"] != int(n):
        fail(f"{cj['messages']} messages completed, expected {n}")
    if op == "send" and sj["received"] != int(n):
        fail(f"server received {sj['received']} of {n} SENDs")
    # R-PLANE-5: every plane carried data (64 KiB messages: WRITE data leaves the client, READ data reaches it).
    if len(cj["planes"]) != int(planes):
        fail(f"client reports {len(cj['planes'])} planes, expected {planes}")
    if int(planes) > 1:
        key = "rx_bytes" if op == "read" else "tx_bytes"
        if any(p[key] < 65536 for p in cj["planes"]):
            fail(f"a plane carried no data: {cj['planes']}")
    # Every frame the port dropped is a driver fault here (memif carries only our frames).
    for who, j in (("client", cj), ("server", sj)):
        if j["engine"]["rx_decode_errors"]:
            fail(f"{who}: {j['engine']['rx_decode_errors']} decode errors")
    check_injected(cj, sj, loss)
    # The arrangement: each end ran the key's stages, and they did the work (their own counters).
    for who, j, err in (("client", cj, cerr), ("server", sj, serr)):
        e = j["engine"]
        if j["pipeline"] != pipeline:
            fail(f"{who} reports pipeline {j['pipeline']!r}, configured {pipeline!r}")
        if pipeline == "none":
            if e["stage_copies"] or e["stage_cc_records"] or e["place_jobs"] or e["cc_feedback"]:
                fail(f"{who}: stage work in run to completion: {e}")
            continue
        if f"pipeline {pipeline}: placement on lcore " not in err:
            fail(f"{who} did not print where its stages run: {err[-800:]}")
        if e["stage_copies"] > e["place_jobs"]:
            fail(f"{who}: {e['stage_copies']} copies on the placement stage, {e['place_jobs']} handed to it")
        cc = pipeline == "placement+cc"
        if cc and (e["stage_cc_records"] == 0 or e["stage_cc_records"] > e["cc_feedback"]):
            fail(f"{who}: {e['stage_cc_records']} window records on the CC stage, {e['cc_feedback']} fed to it")
        if not cc and (e["stage_cc_records"] or e["cc_feedback"]):
            fail(f"{who}: CC stage work with pipeline = placement: {e}")
    if op in ("write", "read", "send") and pipeline != "none":
        # 64 KiB messages in 4 KiB segments, above place_inline_max: the receiving end's copies all on the stage.
        recv = sj if op in ("write", "send") else cj
        if recv["engine"]["stage_copies"] < int(n) * 16:
            fail(f"the receiving end's placement stage made {recv['engine']['stage_copies']} copies for "
                 f"{n} x 16 segments")
        print(f"stages: copies at the receiver {recv['engine']['stage_copies']}, window records client "
              f"{cj['engine']['stage_cc_records']} server {sj['engine']['stage_cc_records']}")
    print(f"PASS dpdk (net_memif, {queues} queue(s), {planes} plane(s), pipeline {pipeline}) verify {op} loss {loss}: {cj['goodput_gbps']:.2f} Gbit/s, "
          f"{cj['messages']} x 64 KiB; server " + next(l for l in serr.splitlines() if "mroce dpdk: lcores" in l))


def case_dpdk_bad_config():
    """Values the EAL or the port refuse at open time: exit 1, the key and the reason named."""
    sock = f"/tmp/mroce-perf-badcfg-{os.getpid()}.sock"
    memif = f"--vdev=net_memif0,role=server,id=0,socket={sock},socket-abstract=no,bsize=8192"
    small_memif = f"--vdev=net_memif0,role=server,id=0,socket={sock},socket-abstract=no"
    cpu0 = sorted(os.sched_getaffinity(0))[0]
    cases = [
        (f"eal_args = --no-huge --no-pci {small_memif}\n",
         "key 'eal_args': net_memif0: memif buffers of 2048 B (bsize) are smaller than a frame of 4210 B"),
        ("eal_args = --no-huge --no-pci --vdev=net_nosuch0\n", "keys 'eal_args' / 'lcores': rte_eal_init failed"),
        (f"eal_args = --no-huge --no-pci {memif}\ndpdk_port = net_ring7\n",
         "key 'dpdk_port': no port named 'net_ring7' (ports: 0 (net_memif0))"),
        (f"eal_args = --no-huge --no-pci {memif}\n",
         "key 'tx_max_l3': the port sends IPv4 datagrams up to 1500 B"),
        (f"eal_args = --no-huge --no-pci {memif}\nrx_mbufs = 100\n", "rx_mbufs 100 (need"),
        ("eal_args = --no-huge --no-pci\nlcores = 4000\n", "keys 'eal_args' / 'lcores': rte_eal_init failed"),
        # Two planes, the second port missing: the plane and the key named (R-PLANE-1).
        (f"eal_args = --no-huge --no-pci {memif}\nplanes = 10.0.1.1, 10.0.2.1\ndpdk_port = net_memif0, net_memif9\n"
         "neighbours = 10.0.1.2 02:00:00:00:01:02 | 10.0.2.2 02:00:00:00:02:02\ntx_max_l3 = 4196\n",
         "device 'd' (dpdk), plane 1: key 'dpdk_port': no port named 'net_memif9' (ports: 0 (net_memif0))"),
        # The pipeline arrangement: one EAL lcore per stage beside the main one (the engine's).
        (f"eal_args = --no-huge --no-pci {memif}\ntx_max_l3 = 4196\npipeline = placement+cc\n",
         "device 'd': key 'lcores': pipeline = placement+cc needs 3 EAL lcores (the engine's and one per stage); "
         "the EAL's lcores: 0 (main) (key 'lcores' = 0)"),
        (f"lcores = (0,1)@({cpu0})\neal_args = --no-huge --no-pci {memif}\ntx_max_l3 = 4196\npipeline = placement\n"
         "placement_lcore = 0\n",
         "device 'd': key 'placement_lcore': the placement stage's lcore 0 is the EAL main lcore"),
        (f"lcores = (0,1,2)@({cpu0})\neal_args = --no-huge --no-pci {memif}\ntx_max_l3 = 4196\n"
         "pipeline = placement+cc\ncc_lcore = 7\n",
         "device 'd': key 'cc_lcore': the CC stage's lcore 7 is not an EAL lcore; the EAL's lcores: 0 (main), 1, 2"),
    ]
    path = f"/tmp/mroce-perf-badcfg-{os.getpid()}.conf"
    for body, want in cases:
        with open(path, "w") as f:
            f.write("[device d]\ndriver = dpdk\n" + ("" if "planes" in body else "address = 10.0.1.1\n")
                    + ("" if "lcores" in body else "lcores = 0\n") + body)
        p = subprocess.run([PERF, "--config", path, "--accept-timeout", "1"], capture_output=True, text=True,
                           timeout=30)
        for f in (sock,):
            try:
                os.unlink(f)
            except FileNotFoundError:
                pass
        if p.returncode != 1 or want not in p.stderr:
            fail(f"config {body!r}: exit {p.returncode}, want 1 and {want!r} in stderr: {p.stderr[-600:]}")
        print("PASS refused:", next(l for l in p.stderr.splitlines() if l.startswith("mroce-perf: ") and "error" in l))
    os.unlink(path)


def case_cq_mod():
    """--cq-mod: a completion for 1 message in m of each stream, the stream's last
    always (-n splits the messages evenly over the streams, so each stream's last
    is known at its post), and under -D each stream runs on to a signalled message.
    --post-list: up to N messages of a stream in one call; a list the send queue
    cannot take whole is posted in part and its rest built again. Depths, lists
    and counts here are no multiples of m or of the stream count, with 5% loss
    both ways: every message must be counted exactly once and land."""
    inj = ["--inject-loss", "0.05"]
    # 1,000 WRITEs over 3 streams (334 / 333 / 333), depth 7, m = min(3, 7 // 2) = 3, lists of 5,
    # into send queues of 5 WRs (engine stream_depth): lists cut by the depth and by a full queue.
    path = f"/tmp/mroce-perf-cqmod-{os.getpid()}.conf"
    with open(path, "w") as f:
        f.write("[engine]\nstream_depth = 5\n")
    cj, sj = run_pair(["-s", "1000", "-n", "1000", "--streams", "3", "-t", "7", "--cq-mod", "3", "--post-list", "5",
                       "--verify", "--config", path, *inj, "--seed", "21"], ["--config", path, *inj, "--seed", "22"])
    os.unlink(path)
    if cj["verify"] != "ok" or sj["verify"] != "ok" or cj["messages"] != 1000 or cj["cq_mod"] != 3 \
            or cj["post_list"] != 5:
        fail(f"-n run: verify {cj['verify']} / {sj['verify']}, messages {cj['messages']}, cq_mod {cj['cq_mod']}, "
             f"post_list {cj['post_list']}")
    check_injected(cj, sj, 0.05)
    # SEND: the server counts what it received, the client what completed (depth 9: m = min(100, 4) = 4).
    cj, sj = run_pair(["--op", "send", "-s", "200", "-n", "997", "--streams", "2", "-t", "9", *inj, "--seed", "23"],
                      [*inj, "--seed", "24"])
    if cj["messages"] != 997 or sj["received"] != 997 or cj["cq_mod"] != 4:
        fail(f"send: client {cj['messages']} server {sj['received']} of 997, cq_mod {cj['cq_mod']}")
    # -D: 4 streams, depth 11, m = 5; the run must end (each stream's last message signalled).
    cj, sj = run_pair(["-s", "64", "-D", "0.5", "--streams", "4", "-t", "11", "--cq-mod", "5", "--post-list", "4",
                       *inj, "--seed", "25"],
                      [*inj, "--seed", "26"], timeout=30)
    if cj["messages"] < 4 or cj["cq_mod"] != 5 or cj["lat_samples"] < 4:
        fail(f"-D run: messages {cj['messages']}, cq_mod {cj['cq_mod']}, lat_samples {cj['lat_samples']}")
    # Checked on completion, so every message asks for one.
    cj, _ = run_pair(["--op", "fadd", "-n", "300", "--cq-mod", "8", "--post-list", "8"])
    if cj["cq_mod"] != 1 or cj["mismatches"] != 0 or cj["messages"] != 300:
        fail(f"fadd: cq_mod {cj['cq_mod']} mismatches {cj['mismatches']} messages {cj['messages']}")
    print(f"PASS cq-mod, post-list: -n exact over 3 streams (depth 7, m 3, lists of 5 into queues of 5) and SEND "
          f"(m 4) at 5% loss; -D ended (lists of 4); fadd m 1 (lists of 8), each executed once")


if CASE[0] == "verify":
    case_verify(CASE[1], CASE[2])
elif CASE[0] == "lat":
    case_lat(*CASE[1:3])
elif CASE[0] == "dpdk-bad-config":
    case_dpdk_bad_config()
elif CASE[0] == "dpdk-lat":
    case_dpdk_lat(CASE[1])
elif CASE[0] == "dpdk-verify":
    case_dpdk_verify(*CASE[1:6])
elif CASE[0] == "busy-peer":
    case_busy_peer()
elif CASE[0] == "killed-peer":
    case_killed_peer()
elif CASE[0] == "killed-client":
    case_killed_client()
elif CASE[0] == "bad-input":
    case_bad_input()
elif CASE[0] == "one-buffer":
    case_one_buffer()
elif CASE[0] == "cq-mod":
    case_cq_mod()
elif CASE[0] == "one-path-full-window":
    case_one_path_full_window()
else:
    fail(f"unknown case {CASE}")
