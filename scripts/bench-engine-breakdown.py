#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 The mroce authors
#
# Where a small message's engine instructions go (doc/performance.md 7):
# mroce-bench-engine -s 64 runs twice under callgrind (20,000 and 70,000
# one-packet WRITEs); the difference per message is grouped by stage
# (posting, transmit, receive, placement, ACK, completion, ...).
#   scripts/bench-engine-breakdown.py [BINARY] [SIZE] [more mroce-bench-engine args, e.g. -o 1]
# TOP=N in the environment also lists the N costliest functions per message.
import sys,re,subprocess,os,tempfile
binary=sys.argv[1] if len(sys.argv) > 1 else 'build/test/bench/mroce-bench-engine'
size=sys.argv[2] if len(sys.argv) > 2 else '64'
extra=sys.argv[3:]
t=tempfile.mkdtemp()
def run(n):
    subprocess.run(["valgrind","--tool=callgrind",f"--callgrind-out-file={t}/cg.{n}",binary,"-n",str(n),"-s",size]+extra,capture_output=True,check=True)
    out=subprocess.run(["callgrind_annotate","--threshold=100",f"{t}/cg.{n}"],capture_output=True,text=True).stdout
    d={}
    for l in out.split("-- Auto-annotated")[0].splitlines():
        m=re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(.*)$",l)
        if m and "=>" not in l: d[m.group(2)]=d.get(m.group(2),0)+int(m.group(1).replace(",",""))
    return d
a,b=run(20000),run(70000)
per={k:(b.get(k,0)-a.get(k,0))/50000 for k in set(a)|set(b)}
groups=[("post (post_send, local key check, segment count, send-queue scheduling)",["post_send","post_one_buffer","check_local","segments","schedule_sq","resolve_list"]),
 ("transmit: connection pass, scheduler, segment and header build",["emit_data","single_run","pick_path","plan_paths","emit_segment_run","Impl::tx(","send_on_path","encode_data","next_new_segment","tx_burst"]),
 ("receive: decode, connection lookup, SACK/CSN filters",["rx_one","decode_data","rx_burst","rx_data","sack_window","CsnWindow","SackBitmap"]),
 ("placement and execution (key check, copy bookkeeping, in-order release)",["place(","not_placed","check_remote","advance_rx","request_done","rx_accounted"]),
 ("ACK: generation and processing (incl. CC feedback)",["emit_ack","encode_ack","rx_ack","rx_control","delivered","advance_csn_una","cc_feed","apply_view","CcCore","PathWindow","on_ack","rtt_sample","advance_una"]),
 ("completion (send-queue advance, CQ push and poll)",["advance_sq","push_cq","cq_slot","poll_cq"]),
 ("timers, deadlines, wakeups",["timers","deadline","wake","tx_pending"]),
 ("libc copies (wire assembly, placement of 64 B, baseline)",["memmove","memcpy"]),
 ("benchmark harness",["bench_engine.cpp"])]
tot=per.get("PROGRAM TOTALS",0); used=set()
print(f"{'all':70s} {tot:8.1f}")
for name,keys in groups:
    s=0
    for k,v in per.items():
        if k in used or k=="PROGRAM TOTALS": continue
        if any(x in k for x in keys): s+=v; used.add(k)
    print(f"{name:70s} {s:8.1f}")
rest=sum(v for k,v in per.items() if k not in used and k!="PROGRAM TOTALS")
print(f"{'other':70s} {rest:8.1f}")
top=int(os.environ.get("TOP","0"))
if top:
    print()
    for k,v in sorted(((k,v) for k,v in per.items() if k!="PROGRAM TOTALS"),key=lambda kv:-kv[1])[:top]:
        print(f"{v:8.1f}  {k[:150]}")
