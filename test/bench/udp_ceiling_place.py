#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 The mroce authors
#
# mroce-udp-ceiling's placing receivers (--place, --place-direct, --place-peek)
# move real traffic over loopback and say what they did; their bad
# combinations are refused with a message. Figures are not asserted (noisy
# machines): only that each variant received data and labelled it.
import os, re, subprocess, sys

CEIL = sys.argv[1]
port = 20000 + (os.getpid() % 2000) * 10


def run(*args):
    return subprocess.run([CEIL, *args], capture_output=True, text=True, timeout=60)


def fail(msg, p=None):
    print("FAIL:", msg)
    if p is not None:
        print("stdout:", p.stdout, "\nstderr:", p.stderr)
    sys.exit(1)


for flags, label in ((["--place", "1048576"], "place into 1048576 B by copy"),
                     (["--place", "1048576", "--place-direct"], "place into 1048576 B directly"),
                     (["--place", "65536", "--place-peek"], "place into 65536 B directly after a peek")):
    port += 3
    p = run("--no-pin", "--mode", "bw", "--variant", "gso+gro", "--size", "4096", "--seconds", "0.3",
            "--port", str(port), *flags)
    if p.returncode != 0:
        fail(f"{flags}: exit {p.returncode}", p)
    if label not in p.stdout:
        fail(f"{flags}: header does not say '{label}'", p)
    m = re.search(r"rx +([0-9.]+) Gbit/s", p.stdout)
    if not m or float(m.group(1)) <= 0:
        fail(f"{flags}: no data received", p)
    print(f"ok {flags}: rx {m.group(1)} Gbit/s")

for flags, msg in ((["--place-direct"], "--place-direct and --place-peek need --place BYTES"),
                   (["--place-peek"], "--place-direct and --place-peek need --place BYTES"),
                   (["--place", "2000000000"], "--place at most 1 GiB"),
                   (["--place", "x"], "bad value for --place")):
    p = run("--mode", "bw", *flags)
    if p.returncode == 0 or msg not in p.stderr:
        fail(f"{flags}: expected a refusal naming '{msg}'", p)
    print(f"ok {flags}: refused")
