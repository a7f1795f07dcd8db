#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 The mroce authors
#
# Regenerates the golden wire vectors (test/vectors/*.hex) from the field
# values below. This is an independent re-implementation of the v1 layout
# (doc/spec.md "Wire format"; offsets as in lib/wire/codec.cpp), so the C++
# test that decodes these files cross-checks the codec against it.
#
# File format: lines starting with '#' are comments. The first comment line is
# "# <name>: <description>"; the second lists the field values as key=value
# (decimal or 0x hex; enums by name). Error vectors carry "expect=<error>".
# Every other line holds hex bytes (whitespace ignored), 16 per line.
import os
import struct
import sys

TYPES = {"DATA": 1, "ACK": 2, "NAK": 3, "PROBE": 4, "PROBE_REPLY": 5,
         "CONNECT_REQ": 6, "CONNECT_ACK": 7, "DISCONNECT": 8, "DISCONNECT_ACK": 9}
OPCODES = {"SEND": 1, "SEND_IMM": 2, "WRITE": 3, "WRITE_IMM": 4, "READ_REQ": 5,
           "READ_RESP": 6, "ATOMIC_CAS": 7, "ATOMIC_FADD": 8, "ATOMIC_RESP": 9, "WRITE_PACK": 10}
SYNDROMES = {"rkey_invalid": 1, "pd_mismatch": 2, "access_denied": 3, "out_of_range": 4,
             "invalid_stream": 5, "invalid_request": 6, "remote_op_error": 7, "stream_error": 8, "rnr": 9}

COMMON = ["type", "dst_conn", "src_conn", "path_id"]
DATA = ["psn", "csn", "opcode", "dflags", "payload_len", "stream_id", "msg_seq", "msg_len",
        "offset", "rkey", "remote_addr", "recv_seq", "imm", "ts", "path_floor"]
ACK = ["cum_psn", "ts_echo", "rate_hint", "ce_count", "rx_count", "cum_csn", "ack_flags",
       "sack0", "sack1", "sack2", "sack3"]
NAK = ["stream_id", "msg_seq", "syndrome", "opcode", "csn"]
PROBE = ["probe_seq", "ts"]
CONNECT = ["num_paths", "max_payload", "initial_csn", "rx_capacity_mbps", "cookie",
           "stream_depth", "csn_window", "rate_hint"]
DISCONNECT = ["reason"]


def common(f, version=1, flags=0, reserved=0):
    flags = f.get("flags", flags)  # R-PACK-2: CONNECT_*'s accepts_pack bit
    return struct.pack(">BBHIIHH", version, TYPES[f["type"]], flags, f["dst_conn"],
                       f["src_conn"], f["path_id"], reserved)


def encode(f):
    t = f["type"]
    b = common(f)
    if t == "DATA":
        b += struct.pack(">IIBBHIIIIIQIIII", f["psn"], f["csn"], OPCODES[f["opcode"]],
                         f["dflags"], f["payload_len"], f["stream_id"], f["msg_seq"],
                         f["msg_len"], f["offset"], f["rkey"], f["remote_addr"],
                         f["recv_seq"], f["imm"], f["ts"], f["path_floor"])
        assert len(b) == 72
        b += f["payload"]
        assert len(f["payload"]) == f["payload_len"]
    elif t == "ACK":
        b += struct.pack(">IIIHHIBBHQQQQ", f["cum_psn"], f["ts_echo"], f["rate_hint"],
                         f["ce_count"], f["rx_count"], f["cum_csn"], f["ack_flags"], 0, 0,
                         f["sack0"], f["sack1"], f["sack2"], f["sack3"])
        assert len(b) == 72
    elif t == "NAK":
        b += struct.pack(">IIBBHI", f["stream_id"], f["msg_seq"], SYNDROMES[f["syndrome"]],
                         OPCODES[f["opcode"]], 0, f["csn"])
        assert len(b) == 32
    elif t in ("PROBE", "PROBE_REPLY"):
        b += struct.pack(">II", f["probe_seq"], f["ts"])
        assert len(b) == 24
    elif t in ("CONNECT_REQ", "CONNECT_ACK"):
        b += struct.pack(">HHIIIIII", f["num_paths"], f["max_payload"], f["initial_csn"],
                         f["rx_capacity_mbps"], f["cookie"], f["stream_depth"], f["csn_window"],
                         f["rate_hint"])
        assert len(b) == 44
        # R-PLANE-1: a device with planes appends its plane block; the fields
        # name them plane<i> = (IPv4 << 16) | port.
        planes = [f[k] for k in sorted((k for k in f if k.startswith("plane") and k[5:].isdigit()),
                                       key=lambda k: int(k[5:]))]
        if planes:
            b += struct.pack(">BBH", len(planes), 0, 0)
            for v in planes:
                b += struct.pack(">IHH", v >> 16, v & 0xFFFF, 0)
    elif t in ("DISCONNECT", "DISCONNECT_ACK"):
        b += struct.pack(">I", f["reason"])
        assert len(b) == 20
    return b


def keys_for(t, f=None):
    if f and "flags" in f:
        return ["flags"] + keys_for(t, {k: v for k, v in f.items() if k != "flags"})
    if f and t in ("CONNECT_REQ", "CONNECT_ACK") and "plane0" in f:
        n = sum(1 for k in f if k.startswith("plane") and k[5:].isdigit())
        return COMMON + CONNECT + ["num_planes"] + [f"plane{i}" for i in range(n)]
    return COMMON + {"DATA": DATA, "ACK": ACK, "NAK": NAK, "PROBE": PROBE, "PROBE_REPLY": PROBE,
                     "CONNECT_REQ": CONNECT, "CONNECT_ACK": CONNECT, "DISCONNECT": DISCONNECT,
                     "DISCONNECT_ACK": DISCONNECT}[t]


def fmt_value(k, v):
    if isinstance(v, str):
        return v
    if k in ("flags", "dst_conn", "src_conn", "rkey", "remote_addr", "cookie", "imm", "dflags",
             "ack_flags") or k.startswith("sack") or (k.startswith("plane") and k[5:].isdigit()):
        return hex(v)
    return str(v)


def write(outdir, name, desc, fields_line, data):
    lines = [f"# {name}: {desc}", "# " + fields_line]
    for i in range(0, len(data), 16):
        chunk = data[i:i + 16]
        h = " ".join(f"{x:02x}" for x in chunk[:8])
        if len(chunk) > 8:
            h += "  " + " ".join(f"{x:02x}" for x in chunk[8:])
        lines.append(h)
    with open(os.path.join(outdir, name + ".hex"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


def good(outdir, name, desc, f):
    fields = " ".join(f"{k}={fmt_value(k, f[k])}" for k in keys_for(f["type"], f))
    write(outdir, name, desc, fields, encode(f))


def bad(outdir, name, desc, expect, data):
    write(outdir, name, desc, f"expect={expect}", data)


# Shared connection: initiator A (conn id 0x0000a001) -> passive B (conn id 0x0000b002).
A, B = 0x0000A001, 0x0000B002


def data(**kw):
    f = dict(type="DATA", dst_conn=B, src_conn=A, path_id=0, psn=0, csn=0, opcode="SEND",
             dflags=0, payload_len=0, stream_id=0, msg_seq=0, msg_len=0, offset=0, rkey=0,
             remote_addr=0, recv_seq=0, imm=0, ts=0, path_floor=0, payload=b"")
    f.update(kw)
    f["payload_len"] = len(f["payload"])
    return f


def pay(n, start=0):
    return bytes((start + i) & 0xFF for i in range(n))


def pack_entries(entries):
    """R-PACK-1: a WRITE_PACK payload from (rkey, remote_addr, bytes) entries."""
    return b"".join(struct.pack(">IIQ", rkey, len(b), addr) + b for rkey, addr, b in entries)


PACK3 = pack_entries([(0x1234ABCD, 0x00007F0000002000, pay(16, 0x30)),
                      (0x1234ABCD, 0x00007F0000002040, pay(8, 0x60)),
                      (0x00C0FFEE, 0x0000555500000000, b"")])


VECTORS = [
    ("data_send", "SEND, whole 16-byte message in one packet, solicited",
     data(path_id=1, psn=7, csn=1000, opcode="SEND", dflags=0x02, stream_id=3, msg_seq=0,
          msg_len=16, recv_seq=0, ts=123456789, path_floor=5, payload=pay(16))),
    ("data_send_zero_len", "SEND of a 0-byte message: its one packet has no payload",
     data(path_id=0, psn=0, csn=1, opcode="SEND", stream_id=1, msg_seq=4, msg_len=0,
          recv_seq=4, ts=1000, path_floor=0)),
    ("data_send_imm", "SEND_IMM, last 8 bytes (offset 24) of a 32-byte message",
     data(path_id=2, psn=41, csn=1003, opcode="SEND_IMM", stream_id=3, msg_seq=1, msg_len=32,
          offset=24, recv_seq=1, imm=0xDEADBEEF, ts=123460000, path_floor=40,
          payload=pay(8, 0x80))),
    ("data_write_first", "WRITE, first 16 bytes of a 4096-byte message, ack-now",
     data(path_id=3, psn=100, csn=5000, opcode="WRITE", dflags=0x04, stream_id=7, msg_seq=2,
          msg_len=4096, offset=0, rkey=0x1234ABCD, remote_addr=0x00007F0000001000,
          ts=0x89ABCDEF, path_floor=90, payload=pay(16))),
    ("data_write_retransmit", "WRITE, segment at offset 4080 retransmitted on another path",
     data(path_id=1, psn=0xFFFFFFFF, csn=5255, opcode="WRITE", dflags=0x01, stream_id=7,
          msg_seq=2, msg_len=4096, offset=4080, rkey=0x1234ABCD,
          remote_addr=0x00007F0000001000, ts=0x89ABCE00, path_floor=0xFFFFFFF0,
          payload=pay(16, 0xF0))),
    ("data_write_imm", "WRITE_IMM, one-packet 8-byte message consuming receive 9",
     data(path_id=0, psn=12, csn=77, opcode="WRITE_IMM", stream_id=2, msg_seq=5, msg_len=8,
          rkey=0x00C0FFEE, remote_addr=0x0000555500000040, recv_seq=9, imm=0x01020304,
          ts=42, path_floor=12, payload=pay(8, 0x40))),
    ("data_write_pack", "WRITE_PACK: messages 40, 41, 42 of stream 7, WRITEs of 16, 8 and 0 bytes "
     "(R-PACK-1)",
     data(path_id=2, psn=300, csn=6000, opcode="WRITE_PACK", stream_id=7, msg_seq=40, msg_len=3,
          ts=0x01020304, path_floor=299, payload=PACK3)),
    ("data_read_req", "READ_REQ for 65536 bytes (no payload)",
     data(path_id=0, psn=13, csn=78, opcode="READ_REQ", stream_id=2, msg_seq=6,
          msg_len=65536, rkey=0x0BADF00D, remote_addr=0x0000555500100000, ts=43,
          path_floor=10)),
    ("data_read_resp", "READ_RESP, 16 bytes at offset 8192 of the 65536-byte response",
     data(type="DATA", dst_conn=A, src_conn=B, path_id=1, psn=3, csn=200, opcode="READ_RESP",
          stream_id=2, msg_seq=6, msg_len=65536, offset=8192, ts=777, path_floor=3,
          payload=pay(16, 0x20))),
    ("data_atomic_cas", "ATOMIC_CAS compare=1 swap=2 at an 8-byte aligned address",
     data(path_id=0, psn=20, csn=90, opcode="ATOMIC_CAS", stream_id=4, msg_seq=0, msg_len=8,
          rkey=0x0A70A70A, remote_addr=0x0000600000000008, ts=55, path_floor=20,
          payload=struct.pack(">QQ", 1, 2))),
    ("data_atomic_fadd", "ATOMIC_FADD add=0x10 (second operand 0)",
     data(path_id=1, psn=21, csn=91, opcode="ATOMIC_FADD", stream_id=4, msg_seq=1, msg_len=8,
          rkey=0x0A70A70A, remote_addr=0x0000600000000010, ts=56, path_floor=21,
          payload=struct.pack(">QQ", 0x10, 0))),
    ("data_atomic_resp", "ATOMIC_RESP returning original value 0x1122334455667788",
     data(dst_conn=A, src_conn=B, path_id=0, psn=4, csn=201, opcode="ATOMIC_RESP", stream_id=4,
          msg_seq=0, msg_len=8, ts=900, path_floor=0,
          payload=struct.pack(">Q", 0x1122334455667788))),
    ("ack", "ACK of path 3: PSN 101 (cum_psn) and 102 missing, 103 and 104 received, 1 CE of 4",
     dict(type="ACK", dst_conn=A, src_conn=B, path_id=3, cum_psn=101, ts_echo=0x89ABCDEF,
          rate_hint=25000000, ce_count=1, rx_count=4, cum_csn=4990, ack_flags=0x01,
          sack0=0x6, sack1=0, sack2=0, sack3=0)),
    ("ack_sack_full", "ACK with SACK bits spread over all four words, no hint",
     dict(type="ACK", dst_conn=A, src_conn=B, path_id=0, cum_psn=0xFFFFFF00, ts_echo=1,
          rate_hint=0, ce_count=0, rx_count=32, cum_csn=0, ack_flags=0,
          sack0=0x8000000000000001, sack1=0x00000000FFFFFFFF, sack2=0x0123456789ABCDEF,
          sack3=0x8000000000000000)),
    ("nak_rkey_invalid", "NAK: WRITE of stream 7 message 2 named an unknown rkey",
     dict(type="NAK", dst_conn=A, src_conn=B, path_id=3, stream_id=7, msg_seq=2,
          syndrome="rkey_invalid", opcode="WRITE", csn=5000)),
    ("nak_invalid_stream", "NAK: SEND to a stream the responder does not know",
     dict(type="NAK", dst_conn=A, src_conn=B, path_id=0, stream_id=99, msg_seq=0,
          syndrome="invalid_stream", opcode="SEND", csn=1234)),
    ("nak_rnr", "NAK: receiver not ready, a WRITE of stream 12 the responder has not created yet (R-NAK-10)",
     dict(type="NAK", dst_conn=A, src_conn=B, path_id=1, stream_id=12, msg_seq=0,
          syndrome="rnr", opcode="WRITE", csn=77)),
    ("probe", "PROBE of failed path 2",
     dict(type="PROBE", dst_conn=B, src_conn=A, path_id=2, probe_seq=17, ts=0x01234567)),
    ("probe_reply", "PROBE_REPLY echoing probe 17",
     dict(type="PROBE_REPLY", dst_conn=A, src_conn=B, path_id=2, probe_seq=17, ts=0x01234567)),
    ("connect_req", "CONNECT_REQ: 4 paths, 4096-byte segments, 100 Gbit/s inbound",
     dict(type="CONNECT_REQ", dst_conn=0, src_conn=A, path_id=0, num_paths=4,
          max_payload=4096, initial_csn=1, rx_capacity_mbps=100000, cookie=0xC001D00D,
          stream_depth=256, csn_window=4096, rate_hint=0)),
    ("connect_req_pack", "CONNECT_REQ advertising accepts_pack (flags bit 0, R-PACK-2)",
     dict(type="CONNECT_REQ", flags=1, dst_conn=0, src_conn=A, path_id=0, num_paths=4,
          max_payload=4096, initial_csn=1, rx_capacity_mbps=100000, cookie=0xC001D00E,
          stream_depth=256, csn_window=4096, rate_hint=0)),
    ("connect_ack", "CONNECT_ACK: 8 paths, 9000-byte segments, echoes the cookie, "
     "fair share 6.25 Gbit/s for the initiator",
     dict(type="CONNECT_ACK", dst_conn=A, src_conn=B, path_id=0, num_paths=8,
          max_payload=9000, initial_csn=0x80000000, rx_capacity_mbps=25000, cookie=0xC001D00D,
          stream_depth=65536, csn_window=1048576, rate_hint=6250000)),
    ("connect_req_planes", "CONNECT_REQ from a 3-plane device: its plane block lists "
     "10.1.0.2, 10.2.0.2, 10.3.0.2, port 4793 each (R-PLANE-1)",
     dict(type="CONNECT_REQ", dst_conn=0, src_conn=A, path_id=0, num_paths=6,
          max_payload=8192, initial_csn=1, rx_capacity_mbps=100000, cookie=0xC001D00D,
          stream_depth=256, csn_window=4096, rate_hint=0, num_planes=3,
          plane0=(0x0A010002 << 16) | 4793, plane1=(0x0A020002 << 16) | 4793,
          plane2=(0x0A030002 << 16) | 4793)),
    ("disconnect", "DISCONNECT, reason 0 (normal close)",
     dict(type="DISCONNECT", dst_conn=B, src_conn=A, path_id=0, reason=0)),
    ("disconnect_ack", "DISCONNECT_ACK, reason 0",
     dict(type="DISCONNECT_ACK", dst_conn=A, src_conn=B, path_id=0, reason=0)),
]


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    by_name = {}
    for name, desc, f in VECTORS:
        good(outdir, name, desc, f)
        by_name[name] = encode(f)
    # Malformed datagrams (decode must fail with the given error).
    ws = by_name["data_write_first"]
    bad(outdir, "err_truncated_common", "15 bytes: shorter than the common header", "truncated",
        ws[:15])
    bad(outdir, "err_truncated_payload", "data_write_first missing its last payload byte",
        "truncated", ws[:-1])
    bad(outdir, "err_bad_version", "probe with version 2", "bad_version",
        bytes([2]) + by_name["probe"][1:])
    bad(outdir, "err_bad_type", "probe with type 10", "bad_type",
        by_name["probe"][:1] + bytes([10]) + by_name["probe"][2:])
    bad(outdir, "err_bad_opcode", "data_write_first with opcode 0", "bad_opcode",
        ws[:24] + bytes([0]) + ws[25:])
    bad(outdir, "err_oversized_trailing", "disconnect with one byte past its header", "oversized",
        by_name["disconnect"] + b"\x00")
    cp = by_name["connect_req_planes"]
    bad(outdir, "err_connect_planes_too_many", "connect_req_planes with a block of 9 planes "
        "(past the largest block, R-PLANE-1)", "oversized",
        cp[:44] + struct.pack(">BBH", 9, 0, 0) + b"".join(struct.pack(">IHH", 0x0A000002 + (i << 16), 4793, 0)
                                                     for i in range(9)))
    bad(outdir, "err_connect_planes_count", "connect_req_planes announcing 4 planes with 3 listed",
        "inconsistent", cp[:44] + bytes([4]) + cp[45:])
    bad(outdir, "err_connect_planes_dup", "connect_req_planes with plane 2's address equal to plane 0's",
        "inconsistent", cp[:-8] + cp[48:52] + cp[-4:])
    bad(outdir, "err_connect_planes_partial", "connect_req with 3 bytes past its header (no whole block)",
        "inconsistent", by_name["connect_req"] + b"\x01\x00\x00")
    wp = by_name["data_write_pack"]
    bad(outdir, "err_pack_one_entry", "data_write_pack announcing 1 entry (a WRITE_PACK carries 2..32, "
        "R-PACK-1)", "inconsistent", wp[:36] + struct.pack(">I", 1) + wp[40:])
    bad(outdir, "err_pack_entry_overrun", "data_write_pack whose second entry's length runs past "
        "payload_len (R-PACK-1)", "inconsistent",
        wp[:72 + 32 + 4] + struct.pack(">I", 200) + wp[72 + 32 + 8:])
    bad(outdir, "err_pack_short_head", "data_write_pack cut inside its third entry's head, payload_len "
        "to match (R-PACK-1)", "inconsistent",
        wp[:26] + struct.pack(">H", len(PACK3) - 4) + wp[28:-4])
    ack = bytearray(by_name["ack"])
    ack[28:30] = struct.pack(">H", 5)  # ce_count 5 > rx_count 4
    bad(outdir, "err_inconsistent_ce_count", "ack with ce_count 5 > rx_count 4", "inconsistent",
        bytes(ack))


if __name__ == "__main__":
    main()
