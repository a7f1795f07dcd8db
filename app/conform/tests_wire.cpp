// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Section 1 and 2 of the spec: what a receiver does with malformed
// datagrams (silently dropped, counted by cause, in the order of 2.12), and
// the shape of the packets the IUT sends.
#include <cstring>

#include "fixture.hpp"

namespace mroce::conform {
namespace {

using wire::Opcode;
using wire::PacketType;

Pred anything() {
    return [](const RxPkt&) { return true; };
}

std::map<std::string, uint64_t> delta(const std::map<std::string, uint64_t>& a, const std::map<std::string, uint64_t>& b) {
    std::map<std::string, uint64_t> d;
    for (const auto& [k, v] : b) d[k] = v - (a.count(k) ? a.at(k) : 0);
    return d;
}

void check_delta(const std::map<std::string, uint64_t>& d, const std::string& name, uint64_t want) {
    const uint64_t got = d.count(name) ? d.at(name) : 0;
    if (got != want) fail("counter " + name + " +" + std::to_string(want), "+" + std::to_string(got));
}

// A valid WRITE of n bytes at region offset off as one packet (consumes a PSN and a CSN).
std::vector<uint8_t> good_write(Env& e, uint32_t msg_seq, uint32_t off, uint32_t n, Sent& s, uint8_t seed = 1) {
    return e.p().build(write_seg(e, msg_seq, off, n, 0, pattern(n, seed)), s);
}

void accepted(Env& e, const std::vector<uint8_t>& dgram, const Sent& s, uint32_t off, uint32_t n, uint8_t seed = 1) {
    e.p().send_raw(dgram, 0, 2);
    wait_acked(e.p(), 0, s.psn);
    if (e.ctl.mem_read(e.at(off), n) != pattern(n, seed)) fail("the WRITE's bytes in the region", "other bytes");
}

}  // namespace

CONFORM_TEST(decode_truncated, "R-WIRE-3 R-ERR-1 R-ERR-3 R-ERR-4",
             "15-byte, header-short and payload-short datagrams are dropped silently and counted truncated") {
    Env e = setup(t);
    Sent s;
    const auto full = good_write(e, 0, 0, 16, s);
    const auto before = t.ctl.counters();
    e.p().send_raw(std::span(full.data(), 15));
    e.p().send_raw(std::span(full.data(), 40));
    e.p().send_raw(std::span(full.data(), full.size() - 1));
    wire::CommonHeader c;
    c.type = PacketType::ack;
    c.dst_conn = e.p().iut_conn;
    c.src_conn = e.p().my_conn;
    std::vector<uint8_t> ack(wire::kAckLen);
    wire::encode_ack(ack, c, wire::AckHeader{});
    e.p().send_raw(std::span(ack.data(), 71));
    e.p().quiet(answer_from(e.p()), 40 * kMs, "no answer to a truncated datagram (R-ERR-3)");
    const auto d = delta(before, t.ctl.counters());
    check_delta(d, "rx_truncated", 4);
    check_delta(d, "rx_decode_errors", 4);
    check(d.at("rx_packets") >= 4, "rx_packets to count every datagram (+4 at least)", "+" + std::to_string(d.at("rx_packets")));
    accepted(e, full, s, 0, 16);
}

CONFORM_TEST(decode_bad_version_type_opcode, "R-WIRE-4 R-WIRE-11 R-ERR-1 R-ERR-3",
             "versions other than 1, types 0 and 10..255, opcodes 0 and 11..255 are dropped silently and counted") {
    Env e = setup(t);
    Sent s;
    const auto full = good_write(e, 0, 0, 16, s);
    const auto before = t.ctl.counters();
    for (uint8_t v : {0, 2, 255}) {
        auto b = full;
        b[0] = v;
        e.p().send_raw(b);
    }
    for (uint8_t ty : {0, 10, 255}) {
        auto b = full;
        b[1] = ty;
        e.p().send_raw(b);
    }
    for (uint8_t op : {0, 11, 255}) {  // (10 is WRITE_PACK, R-PACK-1)
        auto b = full;
        b[24] = op;
        e.p().send_raw(b);
    }
    // A NAK naming opcode 0 (its syndrome is valid): bad_opcode.
    std::vector<uint8_t> nak(wire::kNakLen);
    wire::CommonHeader c;
    c.type = PacketType::nak;
    c.dst_conn = e.p().iut_conn;
    c.src_conn = e.p().my_conn;
    wire::NakHeader n;
    n.syndrome = wire::Syndrome::rkey_invalid;
    n.stream_id = 1;
    wire::encode_nak(nak, c, n);
    nak[25] = 0;
    e.p().send_raw(nak);
    e.p().quiet(answer_from(e.p()), 40 * kMs, "no answer to a datagram of another version, type or opcode");
    const auto d = delta(before, t.ctl.counters());
    check_delta(d, "rx_bad_version", 3);
    check_delta(d, "rx_bad_type", 7);  // bad_opcode is counted with bad_type (R-ERR-1)
    check_delta(d, "rx_decode_errors", 10);
    accepted(e, full, s, 0, 16);
}

CONFORM_TEST(decode_error_order, "R-WIRE-9",
             "a datagram with several faults yields the error of the first failing step of 2.12") {
    Env e = setup(t);
    Sent s;
    const auto full = good_write(e, 0, 0, 16, s);
    const auto before = t.ctl.counters();
    // Version 2 and shorter than a DATA header: step 2 (bad_version) before step 4 (truncated).
    auto a = full;
    a[0] = 2;
    e.p().send_raw(std::span(a.data(), 20));
    // Type 10 and only 16 bytes: bad_type (step 3), not truncated.
    auto b = full;
    b[1] = 10;
    e.p().send_raw(std::span(b.data(), 16));
    // DATA shorter than its header with dst_conn 0: truncated (step 4) before inconsistent (step 5).
    auto c = full;
    std::memset(c.data() + 4, 0, 4);
    e.p().send_raw(std::span(c.data(), 50));
    // Opcode 0 and payload_len 9001: bad_opcode (D1) before oversized (D2).
    auto d2 = full;
    d2[24] = 0;
    d2[26] = 0x23;
    d2[27] = 0x29;
    e.p().send_raw(d2);
    // payload_len 9001 and one byte short of it: oversized (D2) before truncated (D3).
    auto f = full;
    f[26] = 0x23;
    f[27] = 0x29;
    e.p().send_raw(f);
    // WRITE whose offset + payload passes msg_len and one byte too many: oversized (D4) before inconsistent (D5).
    auto g = full;
    g[39] = 4;  // msg_len 4 < payload 16
    g.push_back(0);
    e.p().send_raw(g);
    e.p().quiet(answer_from(e.p()), 40 * kMs, "no answer to a malformed datagram");
    const auto d = delta(before, t.ctl.counters());
    check_delta(d, "rx_bad_version", 1);
    check_delta(d, "rx_bad_type", 2);
    check_delta(d, "rx_truncated", 1);
    check_delta(d, "rx_oversized", 2);
    check_delta(d, "rx_inconsistent", 0);
    accepted(e, full, s, 0, 16);
}

CONFORM_TEST(decode_connection_ids, "R-WIRE-5",
             "dst_conn 0 outside CONNECT_REQ and src_conn 0 are inconsistent; a CONNECT_REQ's dst_conn is ignored") {
    Env e = setup(t);
    Sent s;
    const auto full = good_write(e, 0, 0, 16, s);
    const auto before = t.ctl.counters();
    auto a = full;
    std::memset(a.data() + 4, 0, 4);
    e.p().send_raw(a);
    auto b = full;
    std::memset(b.data() + 8, 0, 4);
    e.p().send_raw(b);
    e.p().quiet(answer_from(e.p()), 30 * kMs, "no answer to DATA with a zero connection id");
    const auto d = delta(before, t.ctl.counters());
    check_delta(d, "rx_inconsistent", 2);
    accepted(e, full, s, 0, 16);
    // A second peer's CONNECT_REQ with a nonzero dst_conn: answered all the same.
    Peer q(t.ctl.udp_ip(), t.ctl.udp_port());
    ConnParams cp;
    cp.conn_id = 0x77;
    cp.cookie = 0x1234;
    auto req = q.connect_req(cp);
    req[4] = 0xde;
    req[7] = 0xad;
    q.send_raw(req);
    q.wait([&](const RxPkt& r) { return r.is(PacketType::connect_ack) && r.pk.common.dst_conn == 0x77; }, 1000 * kMs,
           "a CONNECT_ACK to a CONNECT_REQ whose dst_conn is not 0");
}

CONFORM_TEST(decode_oversized_and_large_payload, "R-WIRE-6 R-ERR-1",
             "payload_len 9001 and bytes past the packet are oversized; a 9000-byte segment is accepted whatever max_payload said") {
    Env e = setup(t);
    const auto before = t.ctl.counters();
    Sent s;
    auto big = e.p().build(write_seg(e, 0, 0, 9001, 0, pattern(9001, 3)), s, false);
    e.p().send_raw(big);
    auto trailing = e.p().build(write_seg(e, 0, 0, 16, 0, pattern(16, 3)), s, false);
    trailing.push_back(0);
    e.p().send_raw(trailing);
    std::vector<uint8_t> ack(wire::kAckLen + 1);
    wire::CommonHeader c;
    c.type = PacketType::ack;
    c.dst_conn = e.p().iut_conn;
    c.src_conn = e.p().my_conn;
    wire::encode_ack(ack, c, wire::AckHeader{});
    e.p().send_raw(ack);
    e.p().quiet(answer_from(e.p()), 30 * kMs, "no answer to an oversized datagram");
    const auto d = delta(before, t.ctl.counters());
    check_delta(d, "rx_oversized", 3);
    // 9000 bytes in one segment although we announced max_payload 1024 and the IUT 1024.
    const auto sent = e.p().send(write_seg(e, 0, 100, 9000, 0, pattern(9000, 9)));
    wait_acked(e.p(), 0, sent.psn);
    if (t.ctl.mem_read(e.at(100), 9000) != pattern(9000, 9)) fail("the 9000-byte segment in the region", "other bytes");
}

CONFORM_TEST(decode_inconsistent_fields, "R-WIRE-7 R-ATOMIC-1 R-CONN-3 R-PATH-5:check",
             "each consistency rule of 2.12 (DATA per opcode, PSN below floor, ACK, NAK, CONNECT ranges) drops the packet") {
    Env e = setup(t);
    const auto before = t.ctl.counters();
    int n = 0;
    auto bad = [&](DataSpec d) {
        Sent s;
        e.p().send_raw(e.p().build(d, s, false), 0, 2);
        ++n;
    };
    DataSpec w = write_seg(e, 0, 0, 10, 0, pattern(16, 1));  // offset + payload_len > msg_len
    bad(w);
    w = write_seg(e, 0, 0, 5, 0, {});  // empty packet of a non-empty message
    bad(w);
    w = write_seg(e, 0, 0, 32, 0, pattern(32, 1));
    w.raddr = 0xfffffffffffffff0ull;  // destination range wraps 2^64
    bad(w);
    DataSpec r;
    r.op = Opcode::read_req;
    r.msg_len = 64;
    r.rkey = e.mr.rkey;
    r.raddr = e.at(0);
    r.payload = pattern(8, 1);  // READ_REQ with payload
    bad(r);
    r.payload = {};
    r.offset = 4;  // READ_REQ with an offset
    bad(r);
    DataSpec a;
    a.op = Opcode::atomic_fadd;
    a.msg_len = 8;
    a.rkey = e.mr.rkey;
    a.raddr = e.at(8);
    a.payload = pattern(8, 0);  // 8 bytes of operands, not 16
    bad(a);
    a.payload = pattern(16, 0);
    a.raddr = e.at(12);  // not 8-byte aligned
    bad(a);
    a.raddr = e.at(8);
    a.msg_len = 4;  // msg_len must be 8
    bad(a);
    DataSpec ar;
    ar.op = Opcode::atomic_resp;
    ar.msg_len = 8;
    ar.payload = pattern(16, 0);  // ATOMIC_RESP carries 8 bytes
    bad(ar);
    w = write_seg(e, 0, 0, 16, 0, pattern(16, 1));
    w.psn = 5;
    w.floor = 6;  // psn below path_floor
    bad(w);
    wire::CommonHeader c;
    c.dst_conn = e.p().iut_conn;
    c.src_conn = e.p().my_conn;
    {
        std::vector<uint8_t> b(wire::kAckLen);
        c.type = PacketType::ack;
        wire::AckHeader h;
        h.ce_count = 5;
        h.rx_count = 4;
        wire::encode_ack(b, c, h);
        e.p().send_raw(b, 0);
        ++n;
    }
    for (uint8_t syn : {0, 10}) {
        std::vector<uint8_t> b(wire::kNakLen);
        c.type = PacketType::nak;
        wire::NakHeader h;
        h.opcode = Opcode::write;
        wire::encode_nak(b, c, h);
        b[24] = syn;
        e.p().send_raw(b, 0);
        ++n;
    }
    Peer q(t.ctl.udp_ip(), t.ctl.udp_port());
    const ConnParams good;
    std::vector<ConnParams> conns(6, good);
    conns[0].num_paths = 0;
    conns[1].num_paths = 257;
    conns[2].max_payload = 0;
    conns[3].stream_depth = 0;
    conns[4].csn_window = 100;  // not a power of two
    conns[5].csn_window = 32;   // below 64
    for (size_t i = 0; i < conns.size(); ++i) {
        conns[i].conn_id = 0x900 + uint32_t(i);
        conns[i].cookie = 0x5000 + uint32_t(i);
        q.send_raw(q.connect_req(conns[i]));
        ++n;
    }
    e.p().quiet(answer_from(e.p()), 40 * kMs, "no answer to an inconsistent packet");
    q.quiet(anything(), 5 * kMs, "no CONNECT_ACK to a CONNECT_REQ with a field out of range");
    const auto d = delta(before, t.ctl.counters());
    check_delta(d, "rx_inconsistent", uint64_t(n));
    Sent s;
    const auto full = good_write(e, 0, 0, 16, s);
    accepted(e, full, s, 0, 16);
}

CONFORM_TEST(reserved_fields_ignored, "R-WIRE-8 R-DATA-4 R-DATA-9:receiver",
             "reserved bits and unused fields set on receive change nothing; the IUT sends them as zero") {
    Env e = setup(t);
    DataSpec d = write_seg(e, 0, 0, 64, 0, pattern(64, 5));
    d.recv_seq = 77;  // unused by WRITE
    d.imm = 99;
    d.flags = 0xf0 | wire::kDataRetransmit;  // reserved dflags bits, and 'retransmit' changes nothing
    Sent s;
    auto b = e.p().build(d, s);
    b[2] = b[3] = 0xff;    // common flags
    b[14] = b[15] = 0xff;  // common reserved
    e.p().send_raw(b, 0, 2);
    const RxPkt a = wait_acked(e.p(), 0, s.psn);
    if (t.ctl.mem_read(e.at(0), 64) != pattern(64, 5)) fail("the WRITE placed", "other bytes");
    check(a.raw[2] == 0 && a.raw[3] == 0 && a.raw[14] == 0 && a.raw[15] == 0,
          "the ACK's common flags and reserved bytes zero", to_hex(a.raw.data(), 16));
    check(a.raw[36] == 0 && a.raw[37] == 0 && a.raw[38] == 0 && a.raw[39] == 0,
          "the ACK's ack_flags (no CE) and reserved bytes zero", to_hex(a.raw.data() + 36, 4));
}

CONFORM_TEST(datagram_shape_and_ports, "R-WIRE-1 R-WIRE-2 R-CONN-2 R-ECN-1:control",
             "every datagram is exactly one packet; CONNECT_ACK leaves from the listening port, ACKs from path ports, all Not-ECT") {
    Env e = setup(t, Setup{.connect = false});
    Peer& p = *(e.peer = std::make_unique<Peer>(t.ctl.udp_ip(), t.ctl.udp_port()));
    const RxPkt ca = p.connect(ConnParams{});
    check_eq(ca.raw.size(), wire::kConnectLen, "CONNECT_ACK datagram length");
    check_eq(ca.src_port, t.ctl.udp_port(), "CONNECT_ACK source port (the IUT's listening port)");
    check_eq(ca.ecn, 0, "CONNECT_ACK ECN bits (Not-ECT)");
    e.conn = t.ctl.accept();
    t.ctl.stream(e.conn, 1, e.pd, e.cq, e.cq);
    for (uint16_t path = 0; path < 2; ++path) {
        DataSpec d = write_seg(e, path, 0, 32, 0, pattern(32, 1));
        d.path = path;
        const Sent s = p.send(d);
        const RxPkt a = wait_acked(p, path, s.psn);
        check_eq(a.raw.size(), wire::kAckLen, "ACK datagram length");
        check_eq(a.ecn, 0, "ACK ECN bits (Not-ECT)");
        check(a.src_port != t.ctl.udp_port(), "the ACK from a path port, not the listening port",
              "source port " + std::to_string(a.src_port));
    }
}

CONFORM_TEST(bad_path_id, "R-PATH-3 R-WIRE-10",
             "DATA on a path_id beyond the sender's num_paths is dropped, counted rx_bad_path; ACK path_id names the data's path") {
    Env e = setup(t);  // the suite announced 2 paths
    const auto before = t.ctl.counters();
    DataSpec d = write_seg(e, 0, 0, 16, 0, pattern(16, 1));
    d.path = 2;
    e.p().send(d);
    e.p().quiet(is_ack(), 30 * kMs, "no ACK of DATA on path 2 of 2");
    check_delta(delta(before, t.ctl.counters()), "rx_bad_path", 1);
    DataSpec g = write_seg(e, 0, 0, 16, 0, pattern(16, 1));
    g.path = 1;
    g.csn = d.csn ? *d.csn : e.p().next_csn - 1;
    const Sent s = e.p().send(g);
    const RxPkt a = wait_acked(e.p(), 1, s.psn);
    check_eq(a.pk.common.path_id, 1, "ACK path_id");
}

}  // namespace mroce::conform
