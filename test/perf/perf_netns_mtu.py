#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 The mroce authors
#
# R-SEG-4 over real interfaces: two mroce-perf processes in two network
# namespaces created here, joined by a veth pair (traffic cannot leave it).
#   - MTU 1500: max_payload = auto picks 1024, a byte-exact WRITE and READ
#     under 1% injected loss complete, and the client's namespace created no IP
#     fragments (before R-SEG-4 was enforced every 4168-byte datagram left in
#     three fragments and about 9% of the packets were resent);
#   - an explicit max_payload that does not fit the MTU is refused at open,
#     naming the key, the datagram size and the interface's MTU;
#   - MTU 9000 (jumbo frames): auto picks 8192, again without fragments.
# Needs root and `ip netns`; exits 77 (skipped) without them.
import os
import subprocess
import sys
import tempfile

PERF = os.path.abspath(sys.argv[1])
TAG = f"mrmtu{os.getpid() % 100000}"
NS = [f"{TAG}a", f"{TAG}b"]
IFC = [f"{TAG}x", f"{TAG}y"]
ADDR = ["10.78.0.1", "10.78.0.2"]


def sh(*args, check=True):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def frag_creates(ns):
    # Ip: line pair of the namespace's /proc/net/snmp.
    lines = [l.split() for l in sh("ip", "netns", "exec", ns, "cat", "/proc/net/snmp").stdout.splitlines()
             if l.startswith("Ip:")]
    return int(lines[1][lines[0].index("FragCreates")])


def conf(dirname, i, extra=""):
    p = os.path.join(dirname, f"dev{i}-{len(extra)}.conf")
    with open(p, "w") as f:
        f.write(f"[device default]\naddress = {ADDR[i]}\n{extra}")
    return p


def transfer(d, op, want_payload, loss):
    srv = subprocess.Popen(["ip", "netns", "exec", NS[0], PERF, "--config", conf(d, 0), "--accept-timeout", "20"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        cli = subprocess.run(["ip", "netns", "exec", NS[1], PERF, "--config", conf(d, 1), "--op", op, "--verify",
                              "-s", "262144", "-n", "200", "--inject-loss", str(loss), ADDR[0]],
                             capture_output=True, text=True, timeout=60)
        sout, serr = srv.communicate(timeout=20)
    finally:
        if srv.poll() is None:
            srv.kill()
    if cli.returncode != 0 or srv.returncode != 0:
        fail(f"{op}: exit codes client {cli.returncode} server {srv.returncode}; client: {cli.stderr[-600:]} "
             f"server: {serr[-600:]}")
    banner = f"via {IFC[0]} (MTU "
    if banner not in serr or f"max_payload {want_payload})" not in serr:
        fail(f"{op}: server banner lacks '{banner}' and 'max_payload {want_payload}': {serr[:400]}")
    if "verify ok" not in sout + cli.stdout:
        fail(f"{op}: no 'verify ok' in the output: {cli.stdout[-600:]}")


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root (network namespaces)")
        sys.exit(77)
    try:
        sh("ip", "netns", "add", NS[0])
        sh("ip", "netns", "add", NS[1])
    except (RuntimeError, FileNotFoundError) as e:
        print(f"SKIP: ip netns unavailable: {e}")
        sys.exit(77)
    try:
        sh("ip", "link", "add", IFC[0], "netns", NS[0], "type", "veth", "peer", "name", IFC[1], "netns", NS[1])
        for i in range(2):
            sh("ip", "-n", NS[i], "addr", "add", f"{ADDR[i]}/24", "dev", IFC[i])
            sh("ip", "-n", NS[i], "link", "set", IFC[i], "up")
            sh("ip", "-n", NS[i], "link", "set", "lo", "up")
        with tempfile.TemporaryDirectory() as d:
            before = frag_creates(NS[1])
            for op in ("write", "read"):
                transfer(d, op, 1024, 0.01)
            made = frag_creates(NS[1]) - before
            if made != 0:
                fail(f"MTU 1500: the client's namespace created {made} IP fragments")
            print("PASS MTU 1500: max_payload auto = 1024, WRITE and READ verified at 1% loss, 0 fragments")

            bad = subprocess.run(["ip", "netns", "exec", NS[1], PERF, "--config",
                                  conf(d, 1, "max_payload = 4096\n"), "-n", "1", ADDR[0]],
                                 capture_output=True, text=True, timeout=30)
            want = (f"key 'max_payload': 4096 needs 4196 B IPv4 datagrams, above the link's MTU of 1500 B "
                    f"(udp {ADDR[1]}")
            if bad.returncode != 1 or want not in bad.stderr or "use max_payload <= 1400 or auto" not in bad.stderr:
                fail(f"explicit max_payload 4096 on MTU 1500: exit {bad.returncode}, stderr: {bad.stderr[-400:]}")
            print("PASS MTU 1500: max_payload 4096 refused:", bad.stderr.strip().splitlines()[-1])

            for i in range(2):
                sh("ip", "-n", NS[i], "link", "set", IFC[i], "mtu", "9000")
            before = frag_creates(NS[1])
            transfer(d, "write", 8192, 0.01)
            made = frag_creates(NS[1]) - before
            if made != 0:
                fail(f"MTU 9000: the client's namespace created {made} IP fragments")
            print("PASS MTU 9000: max_payload auto = 8192, WRITE verified at 1% loss, 0 fragments")
    finally:
        for ns in NS:
            sh("ip", "netns", "del", ns, check=False)


if __name__ == "__main__":
    main()
