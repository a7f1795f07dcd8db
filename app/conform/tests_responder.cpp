// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The IUT as responder: the suite sends DATA (out of order, duplicated,
// gapped, CE-marked, with bad keys, for streams in error) and checks the
// ACKs, SACK bitmaps, NAKs, placed bytes and receive completions that come
// back (spec sections 4, 5, 6.1, 11).
#include <algorithm>
#include <cstring>
#include <set>
#include <tuple>

#include "fixture.hpp"

namespace mroce::conform {
namespace {

using wire::Opcode;
using wire::PacketType;
using wire::Syndrome;

std::vector<uint8_t> be64(uint64_t v) {
    std::vector<uint8_t> b(8);
    for (int i = 0; i < 8; ++i) b[size_t(i)] = uint8_t(v >> (56 - 8 * i));
    return b;
}
uint64_t from_be64(std::span<const uint8_t> p) {
    uint64_t v = 0;
    for (size_t i = 0; i < 8; ++i) v = v << 8 | p[i];
    return v;
}
uint64_t from_le64(const std::vector<uint8_t>& p) {
    uint64_t v = 0;
    for (size_t i = 8; i-- > 0;) v = v << 8 | p[i];
    return v;
}
std::vector<uint8_t> le64(uint64_t v) {
    std::vector<uint8_t> b(8);
    for (size_t i = 0; i < 8; ++i) b[i] = uint8_t(v >> (8 * i));
    return b;
}

DataSpec atomic(const Env& e, Opcode op, uint32_t msg_seq, uint32_t off, uint64_t a, uint64_t b) {
    DataSpec d;
    d.op = op;
    d.msg_seq = msg_seq;
    d.msg_len = 8;
    d.rkey = e.mr.rkey;
    d.raddr = e.at(off);
    d.payload = be64(a);
    const auto bb = be64(b);
    d.payload.insert(d.payload.end(), bb.begin(), bb.end());
    return d;
}

Pred resp_for(uint32_t msg_seq, Opcode op) {
    return [=](const RxPkt& r) { return r.is(PacketType::data) && r.d().opcode == op && r.d().msg_seq == msg_seq; };
}

void expect_bytes(Env& e, uint64_t off, const std::vector<uint8_t>& want, const std::string& what) {
    const auto got = e.ctl.mem_read(e.at(off), uint32_t(want.size()));
    if (got != want) {
        size_t i = 0;
        while (i < want.size() && got[i] == want[i]) ++i;
        fail(what, "bytes differ from offset " + std::to_string(i) + " (" + std::to_string(got[i]) + " instead of " +
                       std::to_string(want[i]) + ")");
    }
}

}  // namespace

CONFORM_TEST(write_out_of_order_placement,
             "R-DATA-2 R-DATA-3 R-SEG-3 R-DATA-8 R-DATA-10 R-SEND-8 R-CMPL-6:recv",
             "a 4-segment WRITE_IMM of uneven segments, sent 3,1,0,2 over two paths, lands whole; one recv_write_imm "
             "completion after the last byte") {
    Env e = setup(t);
    e.post_recv(7, e.at(60000), 16);
    t.ctl.mem_write(e.at(60000), std::vector<uint8_t>(16, 0xee));
    const auto msg = pattern(1407, 11);
    const uint32_t offs[] = {0, 100, 1100, 1107}, lens[] = {100, 1000, 7, 300};
    const int order[] = {3, 1, 0, 2};
    for (int k = 0; k < 4; ++k) {
        const int i = order[k];
        DataSpec d = write_seg(e, 0, 2000, 1407, offs[i],
                               std::vector<uint8_t>(msg.begin() + offs[i], msg.begin() + offs[i] + lens[i]),
                               Opcode::write_imm);
        d.imm = 0xabcd0001;
        d.path = uint16_t(k % 2);
        const Sent s = e.p().send(d);
        wait_acked(e.p(), d.path, s.psn);
        if (k < 3) e.no_completion(5);
    }
    const auto wc = e.completions(1);
    check_wc(wc[0], 7, "success", "WRITE_IMM");
    check(wc[0].opcode == "recv_write_imm" && wc[0].byte_len == 1407 && wc[0].has_imm && wc[0].imm == 0xabcd0001,
          "recv_write_imm byte_len 1407 imm 0xabcd0001", wc[0].str());
    expect_bytes(e, 2000, msg, "the message at remote_addr");
    expect_bytes(e, 60000, std::vector<uint8_t>(16, 0xee), "the receive buffer untouched by WRITE_IMM");
}

CONFORM_TEST(send_matched_by_recv_seq, "R-SEND-1 R-SEND-2 R-SEND-3 R-CMPL-3 R-CMPL-6 R-CMPL-1",
             "SEND 1 arriving before SEND 0 lands in receive 1 at once; completions wait and come in msg_seq order") {
    Env e = setup(t);
    e.post_recv(100, e.at(0), 512);
    e.post_recv(101, e.at(1024), 512);
    DataSpec s1;
    s1.op = Opcode::send_imm;
    s1.msg_seq = 1;
    s1.recv_seq = 1;
    s1.msg_len = 300;
    s1.imm = 0x51;
    s1.payload = pattern(300, 21);
    const Sent a = e.p().send(s1);
    wait_acked(e.p(), 0, a.psn);
    expect_bytes(e, 1024, pattern(300, 21), "SEND 1 placed in receive 1 before SEND 0 arrived");
    e.no_completion(10);
    DataSpec s0;
    s0.op = Opcode::send;
    s0.msg_seq = 0;
    s0.recv_seq = 0;
    s0.msg_len = 200;
    s0.payload = pattern(200, 22);
    e.p().send(s0);
    const auto wc = e.completions(2);
    check_wc(wc[0], 100, "success", "first completion");
    check_wc(wc[1], 101, "success", "second completion");
    check(wc[0].opcode == "recv" && wc[0].byte_len == 200 && !wc[0].has_imm, "recv of 200 bytes, no imm", wc[0].str());
    check(wc[1].opcode == "recv" && wc[1].byte_len == 300 && wc[1].has_imm && wc[1].imm == 0x51,
          "recv of 300 bytes with imm 0x51", wc[1].str());
    expect_bytes(e, 0, pattern(200, 22), "SEND 0 in receive 0");
}

CONFORM_TEST(ack_fields_and_sack_layout, "R-ACK-3 R-SACK-1 R-RTT-1:echo R-ACK-2 R-ACK-5 R-CSN-6:receiver",
             "PSNs 0,1,3 then 4+63,4+64,4+200,4+255: cum_psn, every SACK bit where 2.7 puts it, ts_echo, counts, cum_csn") {
    Env e = setup(t);
    const uint32_t c0 = e.p().next_csn;
    Sent last;
    for (uint32_t psn : {0u, 1u, 3u}) {
        DataSpec d = write_seg(e, psn, 0, 8, 0, pattern(8, uint8_t(psn)));
        d.psn = psn;
        d.csn = c0 + psn;
        last = e.p().send(d);
    }
    // Every ACK of these three: rx_count totals 3; the last one shows the gap at PSN 2.
    uint32_t rx = 0;
    RxPkt a;
    while (rx < 3) {
        a = e.p().wait(is_ack(0), 1000 * kMs, "ACKs counting 3 packets");
        rx += a.a().rx_count;
        check(a.a().ce_count <= a.a().rx_count, "ce_count <= rx_count", a.str());
    }
    check_eq(rx, 3u, "sum of rx_count");
    check_eq(a.a().cum_psn, 2u, "cum_psn (PSN 2 missing)");
    check_eq(a.a().sack[0], uint64_t(1), "sack[0] (PSN 3 = cum_psn + 1 + bit 0)");
    check_eq(a.a().ts_echo, last.ts, "ts_echo (ts of the most recent packet)");
    check_eq(a.a().cum_csn, c0 + 2, "cum_csn (CSN of PSN 2 missing)");
    // Bits 63, 64, 200 and 255 above cum_psn 2: PSNs 66, 67, 203, 258.
    uint32_t msg = 4;
    for (uint32_t bit : {63u, 64u, 200u, 255u}) {
        DataSpec d = write_seg(e, msg++, 0, 8, 0, pattern(8, 1));
        d.psn = 2 + 1 + bit;
        d.csn = c0 + 3 + bit;
        e.p().send(d);
        const RxPkt k = e.p().wait([&](const RxPkt& r) { return r.is(PacketType::ack) && acks_psn(r, 3 + bit); },
                                   1000 * kMs, "an ACK with bit " + std::to_string(bit) + " set");
        check_eq(k.a().cum_psn, 2u, "cum_psn");
        // The bit's byte on the wire: 40 + 8*(i/64) + 7 - (i mod 64)/8, bit i mod 8.
        const size_t byte = 40 + 8 * (bit / 64) + 7 - (bit % 64) / 8;
        check((k.raw[byte] >> (bit % 8)) & 1, "bit " + std::to_string(bit) + " in byte " + std::to_string(byte),
              to_hex(k.raw.data() + 40, 32));
    }
}

CONFORM_TEST(path_identified_by_path_id, "R-PATH-8 R-ACK-4",
             "DATA of path 0 sent from path 1's source port is acknowledged as path 0; ACKs are Not-ECT") {
    Env e = setup(t);
    DataSpec d = write_seg(e, 0, 0, 16, 0, pattern(16, 1));
    Sent s;
    const auto b = e.p().build(d, s);  // path 0
    e.p().send_raw(b, 1, 2);           // from path 1's socket
    const RxPkt a = wait_acked(e.p(), 0, s.psn);
    check_eq(a.pk.common.path_id, 0, "ACK path_id");
    check_eq(a.ecn, 0, "ACK ECN bits");
    // And path 1's own PSN space is untouched: its PSN 0 is fresh.
    DataSpec g = write_seg(e, 1, 16, 16, 0, pattern(16, 2));
    g.path = 1;
    const Sent s1 = e.p().send(g);
    check_eq(s1.psn, 0u, "first PSN of path 1");
    wait_acked(e.p(), 1, 0);
}

CONFORM_TEST(duplicates_acked_not_placed_twice, "R-CSN-3:place R-ACK-1:dup R-DATA-10",
             "a duplicate PSN and a duplicate CSN under a new PSN (other bytes) are acked, never placed or counted twice") {
    Env e = setup(t);
    e.post_recv(1, e.at(60000), 8);
    const auto seg0 = pattern(1024, 31), seg1 = pattern(1000, 32);
    DataSpec d0 = write_seg(e, 0, 0, 2024, 0, seg0, Opcode::write_imm);
    Sent s;
    const auto b0 = e.p().build(d0, s);
    e.p().send_raw(b0, 0, 2);
    wait_acked(e.p(), 0, s.psn);
    e.p().send_raw(b0, 0, 2);  // same PSN again
    e.p().wait([&](const RxPkt& r) { return r.is(PacketType::ack) && r.a().rx_count >= 1 && acks_psn(r, s.psn); },
               1000 * kMs, "an ACK for the duplicate PSN");
    DataSpec dup = d0;
    dup.csn = s.csn;                    // same CSN, new PSN
    dup.payload = pattern(1024, 99);    // other bytes: must not be placed
    dup.path = 1;
    const Sent s2 = e.p().send(dup);
    wait_acked(e.p(), 1, s2.psn);
    e.no_completion(10);  // 1024 + 1024 bytes counted would complete a 2024-byte message
    expect_bytes(e, 0, seg0, "the original bytes, not the duplicate's");
    e.p().send(write_seg(e, 0, 0, 2024, 1024, seg1, Opcode::write_imm));
    const auto wc = e.completions(1);
    check_wc(wc[0], 1, "success", "WRITE_IMM");
    e.no_completion(10);
}

CONFORM_TEST(atomic_replay_executed_once, "R-ATOMIC-2:once R-CSN-7 R-CSN-3:exec",
             "an FADD and a CAS replayed under new PSNs on both paths are executed once; the replies carry the first result") {
    Env e = setup(t);
    t.ctl.mem_write(e.at(64), le64(100));
    t.ctl.mem_write(e.at(72), le64(7));
    DataSpec f = atomic(e, Opcode::atomic_fadd, 0, 64, 5, 0);
    const Sent sf = e.p().send(f);
    DataSpec c = atomic(e, Opcode::atomic_cas, 1, 72, 7, 8);
    const Sent sc = e.p().send(c);
    for (int k = 0; k < 2; ++k) {
        DataSpec rf = f, rc = c;
        rf.csn = sf.csn;
        rc.csn = sc.csn;
        rf.path = rc.path = uint16_t(k);
        e.p().send(rf);
        e.p().send(rc);
    }
    wait_acked(e.p(), 1, e.p().next_psn[1] - 1);
    const auto r0 = e.p().wait(resp_for(0, Opcode::atomic_resp), 1000 * kMs, "ATOMIC_RESP of the FADD");
    const auto r1 = e.p().wait(resp_for(1, Opcode::atomic_resp), 1000 * kMs, "ATOMIC_RESP of the CAS");
    check_eq(from_be64(r0.payload()), uint64_t(100), "FADD reply (old value)");
    check_eq(from_be64(r1.payload()), uint64_t(7), "CAS reply (old value)");
    e.p().ack_all({r0, r1});
    e.p().quiet(is_data(), 30 * kMs, "no second ATOMIC_RESP (the replays are not executed)");
    check_eq(from_le64(t.ctl.mem_read(e.at(64), 8)), uint64_t(105), "FADD target after one execution");
    check_eq(from_le64(t.ctl.mem_read(e.at(72), 8)), uint64_t(8), "CAS target");
    // A CAS replayed after the target changed would now fail to swap; FADD would add again.
    t.ctl.mem_write(e.at(72), le64(7));
    DataSpec rc = c;
    rc.csn = sc.csn;
    const Sent s3 = e.p().send(rc);
    DataSpec rf = f;
    rf.csn = sf.csn;
    const Sent s4 = e.p().send(rf);
    wait_acked(e.p(), 0, s3.psn);
    wait_acked(e.p(), 0, s4.psn);
    check_eq(from_le64(t.ctl.mem_read(e.at(72), 8)), uint64_t(7), "CAS target after a late replay");
    check_eq(from_le64(t.ctl.mem_read(e.at(64), 8)), uint64_t(105), "FADD target after a late replay");
}

CONFORM_TEST(atomics_execute_and_reply, "R-ATOMIC-2:exec R-ATOMIC-3 R-ATOMIC-4 R-READ-4 R-DATA-4:sender",
             "CAS that swaps, CAS that does not, FADD wrapping 2^64: values, replies, and the reply resent until acked") {
    Env e = setup(t, Setup{.iut = {{"num_paths", "1"}, {"max_payload", "1024"}, {"initial_rto_us", "20000"}, {"min_rto_us", "20000"}}});
    t.ctl.mem_write(e.at(0), le64(0x1111));
    t.ctl.mem_write(e.at(8), le64(0x2222));
    t.ctl.mem_write(e.at(16), le64(0xfffffffffffffffeull));
    e.p().send(atomic(e, Opcode::atomic_cas, 0, 0, 0x1111, 0xaaaa));
    e.p().send(atomic(e, Opcode::atomic_cas, 1, 8, 0x9999, 0xbbbb));
    e.p().send(atomic(e, Opcode::atomic_fadd, 2, 16, 3, 0));
    const uint64_t want[] = {0x1111, 0x2222, 0xfffffffffffffffeull};
    std::vector<RxPkt> replies;
    for (uint32_t m = 0; m < 3; ++m) {
        auto r = e.p().wait(resp_for(m, Opcode::atomic_resp), 1000 * kMs, "ATOMIC_RESP " + std::to_string(m));
        check_eq(r.d().msg_len, 8u, "ATOMIC_RESP msg_len");
        check_eq(r.d().payload_len, 8, "ATOMIC_RESP payload_len");
        check_eq(r.d().stream_id, 1u, "ATOMIC_RESP stream_id (the requester's)");
        check(r.d().rkey == 0 && r.d().remote_addr == 0 && r.d().recv_seq == 0 && r.d().imm == 0,
              "unused fields of ATOMIC_RESP zero", r.str());
        check_eq(from_be64(r.payload()), want[m], "ATOMIC_RESP value (big-endian old value)");
        replies.push_back(r);
    }
    check_eq(from_le64(t.ctl.mem_read(e.at(0), 8)), uint64_t(0xaaaa), "CAS swapped");
    check_eq(from_le64(t.ctl.mem_read(e.at(8), 8)), uint64_t(0x2222), "CAS compare failed: unchanged");
    check_eq(from_le64(t.ctl.mem_read(e.at(16), 8)), uint64_t(1), "FADD modulo 2^64");
    // Not acknowledged: the response is resent (same CSN, new PSN) and keeps its value.
    e.p().ack_all({replies[0], replies[2]});
    const auto again = e.p().wait([&](const RxPkt& r) { return r.is(PacketType::data) && r.d().csn == replies[1].d().csn; },
                                  1000 * kMs, "the unacknowledged ATOMIC_RESP resent");
    check(again.d().psn != replies[1].d().psn, "a new PSN for the resend", again.str());
    check_eq(from_be64(again.payload()), uint64_t(0x2222), "the resent ATOMIC_RESP's value");
    e.p().ack_all({again});
}

CONFORM_TEST(read_request_executes_in_order, "R-READ-2 R-READ-3 R-READ-4 R-SEG-1:response R-CSN-1",
             "a READ_REQ behind an incomplete WRITE waits for it; the response is segmented, reliable, and reads the "
             "WRITE's bytes") {
    Env e = setup(t, Setup{.iut = {{"num_paths", "1"}, {"max_payload", "1024"}, {"initial_rto_us", "20000"}, {"min_rto_us", "20000"}}});
    const auto w = pattern(2500, 41);
    // WRITE msg 0 (3 segments): segments 1 and 2 only, for now.
    for (uint32_t off : {1024u, 2048u})
        e.p().send(write_seg(e, 0, 0, 2500, off, std::vector<uint8_t>(w.begin() + off, w.begin() + std::min<uint32_t>(off + 1024, 2500))));
    DataSpec r;
    r.op = Opcode::read_req;
    r.msg_seq = 1;
    r.msg_len = 2500;
    r.rkey = e.mr.rkey;
    r.raddr = e.at(0);
    const Sent rs = e.p().send(r);
    wait_acked(e.p(), 0, rs.psn);
    e.p().quiet(is_data(), 30 * kMs, "no READ_RESP before the WRITE ahead of it is complete");
    e.p().send(write_seg(e, 0, 0, 2500, 0, std::vector<uint8_t>(w.begin(), w.begin() + 1024)));
    auto segs = e.p().collect_n(resp_for(1, Opcode::read_resp), 3, 1000 * kMs);
    check_eq(segs.size(), size_t(3), "READ_RESP segments (2500 bytes in 1024-byte segments)");
    std::vector<uint8_t> got(2500);
    std::set<uint32_t> offs;
    for (const auto& s : segs) {
        check(s.d().msg_len == 2500 && s.d().stream_id == 1 && s.d().rkey == 0 && s.d().remote_addr == 0,
              "READ_RESP msg_len 2500, stream 1, rkey and remote_addr 0", s.str());
        check(s.d().payload_len <= 1024 && s.d().offset % 1024 == 0, "segments of at most 1024 at k*1024", s.str());
        std::memcpy(got.data() + s.d().offset, s.payload().data(), s.d().payload_len);
        offs.insert(s.d().offset);
    }
    check_eq(offs.size(), size_t(3), "distinct offsets");
    if (got != w) fail("the READ_RESP carrying the bytes the WRITE placed", "other bytes");
    // Ack all but the middle segment: it is resent with its CSN, under a new PSN.
    e.p().ack_all({segs[0], segs[2]});
    const auto again = e.p().wait([&](const RxPkt& x) { return x.is(PacketType::data) && x.d().csn == segs[1].d().csn; },
                                  1000 * kMs, "the lost READ_RESP segment resent");
    check(again.d().psn != segs[1].d().psn && again.d().offset == segs[1].d().offset, "same CSN and offset, new PSN",
          again.str());
    e.p().ack_all({again});
}

CONFORM_TEST(read_response_selective_resend, "R-SACK-4 R-READ-4",
             "a 5-segment READ_RESP, PSN 1 missing below SACKed PSN 2, PSNs 3-4 still in flight: only PSN 1's segment is resent") {
    Env e = setup(t);
    t.ctl.mem_write(e.at(0), pattern(4500, 8));
    DataSpec r;
    r.op = Opcode::read_req;
    r.msg_len = 4500;
    r.rkey = e.mr.rkey;
    r.raddr = e.at(0);
    e.p().send(r);
    auto segs = e.p().collect_n(resp_for(0, Opcode::read_resp), 5, 1000 * kMs);
    check_eq(segs.size(), size_t(5), "READ_RESP segments");
    std::sort(segs.begin(), segs.end(), [](const RxPkt& a, const RxPkt& b) { return a.d().psn < b.d().psn; });
    const uint32_t p0 = segs[0].d().psn;
    wire::AckHeader a{};
    a.cum_psn = p0 + 1;
    a.sack[0] = 1;  // PSN p0 + 2
    a.rx_count = 2;
    e.p().send_ack(segs[0].pk.common.path_id, a);
    auto more = e.p().collect(is_data(), 60 * kMs);
    std::vector<std::string> resent;
    for (const auto& x : more) resent.push_back(x.str());
    check(more.size() == 1 && more[0].d().csn == segs[1].d().csn && more[0].d().offset == segs[1].d().offset,
          "exactly one resend, of PSN " + std::to_string(p0 + 1) + "'s segment",
          std::to_string(more.size()) + " packets" + (more.empty() ? "" : ", first " + more[0].str()));
    for (const auto& x : segs) e.p().record(x);
    e.p().ack_all(more);
}

CONFORM_TEST(read_replay_not_reexecuted, "R-READ-5",
             "a READ_REQ replayed under a new PSN after its response was acknowledged produces no new response") {
    Env e = setup(t);
    t.ctl.mem_write(e.at(0), pattern(100, 1));
    DataSpec r;
    r.op = Opcode::read_req;
    r.msg_len = 100;
    r.rkey = e.mr.rkey;
    r.raddr = e.at(0);
    const Sent s = e.p().send(r);
    const auto resp = e.p().wait(resp_for(0, Opcode::read_resp), 1000 * kMs, "READ_RESP");
    e.p().ack_all({resp});
    t.ctl.mem_write(e.at(0), pattern(100, 2));
    DataSpec again = r;
    again.csn = s.csn;
    const Sent s2 = e.p().send(again);
    wait_acked(e.p(), 0, s2.psn);
    e.p().quiet(is_data(), 30 * kMs, "no second READ_RESP");
}

CONFORM_TEST(remote_access_key_pd_access, "R-MEM-3:key R-MEM-3:pd R-MEM-3:access R-MEM-3:order R-NAK-2 R-MEM-6 "
             "R-ACK-8:refused R-NAK-1:noack",
             "unknown rkey, another PD's region, a region without the access: NAK with the first failing check, nothing "
             "written, no ACK for any of them") {
    Env e = setup(t);
    const uint32_t pd2 = t.ctl.pd();
    const Mr other = t.ctl.mr(pd2, 4096, "lwra");
    const Mr ro = t.ctl.mr(e.pd, 4096, "lr");
    const Mr dead = t.ctl.mr(e.pd, 4096, "lwra");
    t.ctl.call("mr_dereg " + std::to_string(dead.lkey));
    struct Case {
        uint32_t rkey;
        uint64_t addr;
        Opcode op;
        Syndrome want;
    } cases[] = {
        {0x7fffff13, e.at(0), Opcode::write, Syndrome::rkey_invalid},
        {dead.rkey, dead.addr, Opcode::write, Syndrome::rkey_invalid},               // R-MEM-6
        {other.rkey, other.addr + 8192, Opcode::write, Syndrome::pd_mismatch},     // PD before range
        {ro.rkey, ro.addr, Opcode::write, Syndrome::access_denied},
        {ro.rkey, ro.addr + 8, Opcode::atomic_fadd, Syndrome::access_denied},
        {e.mr.rkey, 0, Opcode::read_req, Syndrome::rkey_invalid},  // placeholder, patched below
    };
    cases[5] = {other.rkey, other.addr, Opcode::read_req, Syndrome::pd_mismatch};
    uint32_t sid = 10;
    for (const auto& c : cases) {
        t.ctl.stream(e.conn, sid, e.pd, e.cq, e.cq);
        DataSpec d;
        d.op = c.op;
        d.stream = sid;
        d.rkey = c.rkey;
        d.raddr = c.addr;
        if (c.op == Opcode::write) {
            d.msg_len = 64;
            d.payload = pattern(64, 1);
        } else if (c.op == Opcode::read_req) {
            d.msg_len = 64;
        } else {
            d.msg_len = 8;
            d.payload = std::vector<uint8_t>(16, 1);
        }
        const Sent s = e.p().send(d);
        const RxPkt n = wait_nak(e.p(), c.want, s.csn);
        check(n.n().stream_id == sid && n.n().msg_seq == 0 && n.n().opcode == c.op,
              "NAK naming stream " + std::to_string(sid) + " msg 0 opcode " + wire::to_string(c.op), n.str());
        ++sid;
    }
    if (t.ctl.mem_read(other.addr, 64) != std::vector<uint8_t>(64, 0)) fail("nothing written to the other PD's region", "bytes changed");
    const Sent ok = e.p().send(write_seg(e, 0, 0, 16, 0, pattern(16, 1)));
    const RxPkt a = wait_acked(e.p(), 0, ok.psn);
    check(a.a().cum_psn == 0, "cum_psn 0: none of the refused PSNs 0-5 acknowledged", a.str());
}

CONFORM_TEST(remote_access_out_of_range, "R-MEM-3:range R-MEM-5",
             "WRITE past a region's end, READ and FADD past it: NAK out_of_range, nothing written or read") {
    Env e = setup(t, Setup{.mr_len = 4096});
    struct Case {
        Opcode op;
        uint64_t off;
        uint32_t len;
    } cases[] = {{Opcode::write, 4000, 200}, {Opcode::read_req, 4000, 200}, {Opcode::atomic_fadd, 4096, 8}};
    uint32_t sid = 20;
    for (const auto& c : cases) {
        t.ctl.stream(e.conn, sid, e.pd, e.cq, e.cq);
        DataSpec d;
        d.op = c.op;
        d.stream = sid;
        d.rkey = e.mr.rkey;
        d.raddr = e.at(c.off);
        d.msg_len = c.op == Opcode::atomic_fadd ? 8 : c.len;
        if (c.op == Opcode::write) d.payload = pattern(c.len, 5);
        if (c.op == Opcode::atomic_fadd) d.payload = std::vector<uint8_t>(16, 1);
        const Sent s = e.p().send(d);
        wait_nak(e.p(), Syndrome::out_of_range, s.csn);
        ++sid;
    }
    if (t.ctl.mem_read(e.at(4000), 96) != std::vector<uint8_t>(96, 0)) fail("nothing written inside the region", "bytes changed");
    e.p().quiet(is_data(), 20 * kMs, "no READ_RESP for an out-of-range READ");
}

CONFORM_TEST(refused_message_never_acked, "R-NAK-1:noack R-ACK-8:refused R-NAK-8 R-NAK-7 R-STREAM-6 R-STREAM-3:incoming",
             "every packet of a failed WRITE is NAKed with its cause (also when resent), a later message gets stream_error, "
             "and no ACK ever covers them") {
    Env e = setup(t);
    t.ctl.stream(e.conn, 2, e.pd, e.cq, e.cq);
    // Message 0 of stream 1: three segments, a bad rkey.
    std::vector<Sent> refused;
    for (uint32_t k = 0; k < 3; ++k) {
        DataSpec d = write_seg(e, 0, 0, 3072, 1024 * k, pattern(1024, uint8_t(k)));
        d.rkey = 0x7ffffe01;
        refused.push_back(e.p().send(d));
        wait_nak(e.p(), Syndrome::rkey_invalid, refused.back().csn);
    }
    // Resent (the NAK was lost): refused again with the original cause.
    DataSpec again = write_seg(e, 0, 0, 3072, 0, pattern(1024, 0));
    again.rkey = 0x7ffffe01;
    again.csn = refused[0].csn;
    refused.push_back(e.p().send(again));
    wait_nak(e.p(), Syndrome::rkey_invalid, refused.back().csn);
    // A later, valid message of the stream: stream_error, not placed.
    const Sent later = e.p().send(write_seg(e, 1, 8192, 64, 0, pattern(64, 9)));
    wait_nak(e.p(), Syndrome::stream_error, later.csn);
    refused.push_back(later);
    // A packet of another stream on the same path: its ACK shows the path's state.
    DataSpec ok = write_seg(e, 0, 16384, 64, 0, pattern(64, 3));
    ok.stream = 2;
    const Sent s = e.p().send(ok);
    const RxPkt a = wait_acked(e.p(), 0, s.psn);
    for (const auto& r : refused)
        check(!acks_psn(a, r.psn), "no ACK covering refused PSN " + std::to_string(r.psn), a.str());
    if (t.ctl.mem_read(e.at(8192), 64) != std::vector<uint8_t>(64, 0)) fail("nothing of the later message placed", "bytes");
    if (t.ctl.mem_read(e.at(0), 64) != std::vector<uint8_t>(64, 0)) fail("nothing of the failed message placed", "bytes");
}

CONFORM_TEST(rnr_receive_not_posted, "R-SEND-4 R-NAK-10:responder R-CSN-3:rnr",
             "a SEND with no receive posted is NAKed rnr, not acked, nothing placed; resent after post_recv it lands") {
    Env e = setup(t);
    DataSpec d;
    d.op = Opcode::send;
    d.msg_len = 64;
    d.payload = pattern(64, 7);
    const Sent s = e.p().send(d);
    wait_nak(e.p(), Syndrome::rnr, s.csn);
    const Sent probe = e.p().send(write_seg(e, 1, 4096, 8, 0, pattern(8, 1)));
    const RxPkt a = wait_acked(e.p(), 0, probe.psn);
    check(!acks_psn(a, s.psn), "the RNR'd PSN not acknowledged", a.str());
    e.post_recv(5, e.at(0), 128);
    DataSpec again = d;
    again.csn = s.csn;  // the same CSN: it was not consumed
    const Sent s2 = e.p().send(again);
    wait_acked(e.p(), 0, s2.psn);
    const auto wc = e.completions(1);
    check_wc(wc[0], 5, "success", "the receive");
    expect_bytes(e, 0, pattern(64, 7), "the SEND in the receive buffer");
}

CONFORM_TEST(rnr_unknown_stream_then_created, "R-STREAM-4:fresh R-NAK-10:responder R-STREAM-1",
             "a WRITE for a stream not created yet is NAKed rnr; created (a second creation refused: exists), its resend lands") {
    Env e = setup(t);
    DataSpec d = write_seg(e, 0, 0, 32, 0, pattern(32, 3));
    d.stream = 7;
    const Sent s = e.p().send(d);
    wait_nak(e.p(), Syndrome::rnr, s.csn);
    t.ctl.stream(e.conn, 7, e.pd, e.cq, e.cq);
    const Answer twice = t.ctl.try_call("stream " + std::to_string(e.conn) + " 7 " + std::to_string(e.pd) + " " +
                                        std::to_string(e.cq) + " " + std::to_string(e.cq));
    check(!twice.ok && twice.status() == "exists", "a second creation of stream 7 refused 'exists'", twice.line);
    DataSpec again = d;
    again.csn = s.csn;
    const Sent s2 = e.p().send(again);
    wait_acked(e.p(), 0, s2.psn);
    expect_bytes(e, 0, pattern(32, 3), "the WRITE placed");
}

CONFORM_TEST(destroyed_stream_incarnations, "R-STREAM-11 R-STREAM-4:dup R-NAK-2 R-NAK-8",
             "after destroy, a resent CSN whose original was placed is acknowledged again, a fresh packet of the old "
             "incarnation gets invalid_stream; the new incarnation works") {
    Env e = setup(t);
    t.ctl.stream(e.conn, 3, e.pd, e.cq, e.cq);
    DataSpec d = write_seg(e, 0, 0, 32, 0, pattern(32, 1));
    d.stream = 3;
    const Sent s = e.p().send(d);
    wait_acked(e.p(), 0, s.psn);
    t.ctl.call("stream_destroy " + std::to_string(e.conn) + " 3");
    DataSpec dup = d;
    dup.csn = s.csn;
    const Sent s2 = e.p().send(dup);
    wait_acked(e.p(), 0, s2.psn);  // its ACK "was lost": the original landed, so it is acknowledged again
    t.ctl.stream(e.conn, 3, e.pd, e.cq, e.cq);
    DataSpec old = write_seg(e, 1, 64, 32, 0, pattern(32, 2));
    old.stream = 3;  // incarnation 0, the destroyed one
    const Sent s3 = e.p().send(old);
    wait_nak(e.p(), Syndrome::invalid_stream, s3.csn);
    DataSpec fresh = write_seg(e, 0, 128, 32, 0, pattern(32, 3));
    fresh.stream = (1u << 24) | 3;  // incarnation 1
    const Sent s4 = e.p().send(fresh);
    wait_acked(e.p(), 0, s4.psn);
    expect_bytes(e, 128, pattern(32, 3), "the new incarnation's WRITE");
    if (t.ctl.mem_read(e.at(64), 32) != std::vector<uint8_t>(32, 0)) fail("nothing of the old incarnation placed", "bytes");
}

CONFORM_TEST(csn_beyond_window_dropped, "R-CSN-4",
             "a CSN at cum_csn + csn_window is dropped unacknowledged; one just inside is accepted") {
    Env e = setup(t, Setup{.iut = {{"num_paths", "1"}, {"max_payload", "1024"}, {"csn_window", "64"}}});
    check_eq(e.p().theirs.csn_window, 64u, "the IUT's announced csn_window");
    const uint32_t c0 = e.p().next_csn;
    DataSpec far = write_seg(e, 0, 0, 16, 0, pattern(16, 1));
    far.csn = c0 + 64;
    const Sent s = e.p().send(far);
    DataSpec near = write_seg(e, 1, 64, 16, 0, pattern(16, 2));
    near.csn = c0 + 63;
    const Sent s2 = e.p().send(near);
    const RxPkt a = wait_acked(e.p(), 0, s2.psn);
    check(!acks_psn(a, s.psn), "the PSN of the CSN beyond the window not acknowledged", a.str());
    not_acked(e.p(), 0, s.psn, 20 * kMs);
    if (t.ctl.mem_read(e.at(0), 16) != std::vector<uint8_t>(16, 0)) fail("nothing placed for the CSN beyond the window", "bytes");
}

CONFORM_TEST(forged_message_does_not_consume_csn, "R-CSN-8",
             "a fresh CSN naming a msg_seq beyond the stream window is not placed and does not consume its CSN") {
    Env e = setup(t);
    const uint32_t depth = e.p().theirs.stream_depth;
    DataSpec forged = write_seg(e, depth + 5, 0, 16, 0, pattern(16, 66));
    const Sent s = e.p().send(forged);
    DataSpec real = write_seg(e, 0, 0, 16, 0, pattern(16, 1));
    real.csn = s.csn;
    const Sent s2 = e.p().send(real);
    wait_acked(e.p(), 0, s2.psn);
    expect_bytes(e, 0, pattern(16, 1), "the real packet of the CSN placed (the forged one did not consume it)");
}

CONFORM_TEST(send_longer_than_receive, "R-SEND-5 R-STREAM-6:recv R-ERR-5",
             "a SEND longer than its receive: NAK invalid_request, receive loc_len_err, the other receive flushed") {
    Env e = setup(t);
    e.post_recv(1, e.at(0), 100);
    e.post_recv(2, e.at(1024), 100);
    DataSpec d;
    d.op = Opcode::send;
    d.msg_len = 200;
    d.payload = pattern(200, 1);
    const Sent s = e.p().send(d);
    wait_nak(e.p(), Syndrome::invalid_request, s.csn);
    const auto wc = e.completions(2);
    check_wc(wc[0], 1, "loc_len_err", "the matched receive");
    check_wc(wc[1], 2, "wr_flush_err", "the other posted receive");
    if (t.ctl.mem_read(e.at(0), 100) != std::vector<uint8_t>(100, 0)) fail("nothing placed", "bytes");
}

CONFORM_TEST(receive_with_bad_lkey, "R-SEND-7 R-MEM-4:recv",
             "a receive posted with an invalid lkey is accepted; the SEND that consumes it: NAK remote_op_error, loc_prot_err") {
    Env e = setup(t);
    e.post_recv(3, e.at(0), 100, 1, 0x7fff0001);
    DataSpec d;
    d.op = Opcode::send;
    d.msg_len = 50;
    d.payload = pattern(50, 1);
    const Sent s = e.p().send(d);
    wait_nak(e.p(), Syndrome::remote_op_error, s.csn);
    const auto wc = e.completions(1);
    check_wc(wc[0], 3, "loc_prot_err", "the receive");
}

CONFORM_TEST(send_for_completed_receive, "R-SEND-6",
             "a fresh CSN naming a receive already completed is not placed and completes nothing") {
    Env e = setup(t);
    e.post_recv(1, e.at(0), 100);
    e.post_recv(2, e.at(1024), 100);
    DataSpec d;
    d.op = Opcode::send;
    d.msg_len = 50;
    d.payload = pattern(50, 1);
    e.p().send(d);
    e.completions(1);
    DataSpec stale = d;
    stale.msg_seq = 1;
    stale.recv_seq = 0;  // receive 0 is done
    stale.payload = pattern(50, 99);
    e.p().send(stale);
    e.no_completion(30);
    expect_bytes(e, 0, pattern(50, 1), "receive 0 keeps the first SEND's bytes");
}

CONFORM_TEST(segments_disagree, "R-DATA-7",
             "a segment whose msg_len differs from its message's first packet: NAK invalid_request, nothing of it placed") {
    Env e = setup(t);
    e.p().send(write_seg(e, 0, 0, 2048, 0, pattern(1024, 1)));
    DataSpec d = write_seg(e, 0, 0, 4096, 1024, pattern(1024, 2));
    const Sent s = e.p().send(d);
    wait_nak(e.p(), Syndrome::invalid_request, s.csn);
    if (t.ctl.mem_read(e.at(1024), 1024) != std::vector<uint8_t>(1024, 0)) fail("nothing of the disagreeing segment placed", "bytes");
}

CONFORM_TEST(void_packet_consumes_csn, "R-NAK-11:responder",
             "a fresh CSN with the void flag is acknowledged, places nothing, completes nothing, and consumes its CSN") {
    Env e = setup(t);
    e.post_recv(1, e.at(0), 100);
    DataSpec v;
    v.op = Opcode::write;
    v.flags = wire::kDataVoid;
    v.msg_seq = 0;
    const Sent s = e.p().send(v);
    wait_acked(e.p(), 0, s.psn);
    e.no_completion(10);
    DataSpec again;
    again.op = Opcode::send;
    again.msg_len = 50;
    again.payload = pattern(50, 1);
    again.csn = s.csn;  // a duplicate now
    const Sent s2 = e.p().send(again);
    wait_acked(e.p(), 0, s2.psn);
    e.no_completion(20);
    if (t.ctl.mem_read(e.at(0), 50) != std::vector<uint8_t>(50, 0)) fail("nothing placed for the consumed CSN", "bytes");
}

CONFORM_TEST(unmatched_response_acked_not_placed, "R-READ-3:unmatched",
             "a READ_RESP matching no outstanding READ is acknowledged and not placed") {
    Env e = setup(t);
    DataSpec r;
    r.op = Opcode::read_resp;
    r.msg_len = 64;
    r.payload = pattern(64, 1);
    const Sent s = e.p().send(r);
    wait_acked(e.p(), 0, s.psn);
}

CONFORM_TEST(probe_answered, "R-PATH-12",
             "a PROBE is answered by a PROBE_REPLY echoing path_id, probe_seq and ts") {
    Env e = setup(t);
    std::vector<uint8_t> b(wire::kProbeLen);
    wire::CommonHeader c;
    c.type = PacketType::probe;
    c.dst_conn = e.p().iut_conn;
    c.src_conn = e.p().my_conn;
    c.path_id = 1;
    wire::ProbeHeader h;
    h.probe_seq = 0x1234;
    h.ts = 0x55667788;
    wire::encode_probe(b, c, h);
    e.p().send_raw(b, 1);
    const auto r = e.p().wait(is_ctrl(PacketType::probe_reply), 1000 * kMs, "a PROBE_REPLY");
    check(r.pk.common.path_id == 1 && r.pk.probe.probe_seq == 0x1234 && r.pk.probe.ts == 0x55667788 &&
              r.pk.common.dst_conn == e.p().my_conn,
          "PROBE_REPLY path 1 seq 0x1234 ts 0x55667788 to our connection", r.str());
}

CONFORM_TEST(ce_marks_echoed, "R-ECN-2 R-ECN-3 R-ACK-1:ce",
             "CE-marked DATA is counted in ce_count with the ce flag; ECT(1) and Not-ECT count unmarked") {
    Env e = setup(t);
    uint32_t ce = 0, rx = 0;
    const int marks[] = {3, 2, 3, 1, 0};
    for (int k = 0; k < 5; ++k) {
        DataSpec d = write_seg(e, uint32_t(k), uint32_t(64 * k), 16, 0, pattern(16, 1));
        Sent s;
        e.p().send_raw(e.p().build(d, s), 0, uint8_t(marks[k]));
    }
    while (rx < 5) {
        const auto a = e.p().wait(is_ack(0), 1000 * kMs, "ACKs counting 5 packets");
        check((a.a().ack_flags & wire::kAckCe) == (a.a().ce_count ? wire::kAckCe : 0), "ack_flags.ce iff ce_count > 0",
              a.str());
        rx += a.a().rx_count;
        ce += a.a().ce_count;
    }
    check_eq(ce, 2u, "ce_count summed over the ACKs (2 CE of 5)");
}

CONFORM_TEST(ack_without_delay_when_it_matters, "R-ACK-1",
             "with a 1 s ack delay: a gap, a CE mark, a duplicate and a message's last byte are acked at once; a plain packet within the delay") {
    Env e = setup(t, Setup{.iut = {{"num_paths", "1"}, {"max_payload", "1024"}, {"ack_delay_us", "1000000"}}});
    auto timed = [&](DataSpec d, uint8_t ecn, const std::string& what, uint64_t bound) {
        Sent s;
        const auto b = e.p().build(d, s);
        const uint64_t t0 = now_ns();
        e.p().send_raw(b, 0, ecn);
        const RxPkt a = wait_acked(e.p(), 0, s.psn, 3000 * kMs);
        check(a.at - t0 < bound, what + " acked within " + std::to_string(bound / kMs) + " ms",
              "after " + std::to_string((a.at - t0) / kMs) + " ms");
        return s;
    };
    // A plain packet (not a message's last byte): within ack_delay.
    timed(write_seg(e, 0, 0, 2048, 0, pattern(1024, 1)), 2, "a plain packet", 2000 * kMs);
    // The message's last byte: at once.
    timed(write_seg(e, 0, 0, 2048, 1024, pattern(1024, 2)), 2, "the last byte of a message", 400 * kMs);
    // CE: at once.
    timed(write_seg(e, 1, 4096, 2048, 0, pattern(1024, 1)), 3, "a CE-marked packet", 400 * kMs);
    // A gap: skip a PSN.
    ++e.p().next_psn[0];
    timed(write_seg(e, 2, 8192, 2048, 0, pattern(1024, 1)), 2, "a packet after a gap", 400 * kMs);
}

CONFORM_TEST(path_floor_raises_cum_psn, "R-PATH-6 R-PATH-5:receiver",
             "PSN 0, then PSN 2 with path_floor 2: the ACK's cum_psn is 3, the given-up PSN 1 no longer pins it") {
    Env e = setup(t);
    e.p().send(write_seg(e, 0, 0, 16, 0, pattern(16, 1)));
    DataSpec d = write_seg(e, 1, 64, 16, 0, pattern(16, 2));
    d.psn = 2;
    d.floor = 2;
    e.p().send(d);
    const auto a = e.p().wait([](const RxPkt& r) { return r.is(PacketType::ack) && acks_psn(r, 2); }, 1000 * kMs,
                              "an ACK of PSN 2");
    check_eq(a.a().cum_psn, 3u, "cum_psn after the floor");
}

CONFORM_TEST(psn_beyond_sack_window, "R-SACK-1:window R-ERR-5",
             "a PSN at cum_psn + 257 is dropped unacknowledged; cum_psn + 256 is bit 255") {
    Env e = setup(t);
    const uint32_t c0 = e.p().next_csn;
    DataSpec far = write_seg(e, 0, 0, 16, 0, pattern(16, 1));
    far.psn = 257;
    far.csn = c0 + 1;
    const Sent s = e.p().send(far);
    DataSpec edge = write_seg(e, 1, 64, 16, 0, pattern(16, 2));
    edge.psn = 256;
    edge.csn = c0 + 2;
    const Sent s2 = e.p().send(edge);
    const RxPkt a = wait_acked(e.p(), 0, s2.psn);
    check(!acks_psn(a, s.psn) && a.a().cum_psn == 0, "cum_psn 0 and PSN 257 not acknowledged", a.str());
    if (t.ctl.mem_read(e.at(0), 16) != std::vector<uint8_t>(16, 0)) fail("nothing placed beyond the SACK window", "bytes");
}

CONFORM_TEST(psn_space_wraps, "R-PATH-13",
             "a path's PSNs wrap from 2^32-1 to 0: packets at 0xfffffffe..1 (floors raised in steps) are acknowledged in order") {
    Env e = setup(t);
    uint32_t k = 0;
    for (uint32_t psn : {0x40000000u, 0x80000000u, 0xc0000000u, 0xfffffffeu}) {
        DataSpec d = write_seg(e, k, 64 * k, 16, 0, pattern(16, uint8_t(k)));
        d.psn = psn;
        d.floor = psn;
        e.p().send(d);
        wait_acked(e.p(), 0, psn);
        ++k;
    }
    for (uint32_t psn : {0xffffffffu, 0u, 1u}) {
        DataSpec d = write_seg(e, k, 64 * k, 16, 0, pattern(16, uint8_t(k)));
        d.psn = psn;
        d.floor = 0xfffffffeu;
        e.p().send(d);
        const RxPkt a = wait_acked(e.p(), 0, psn);
        check_eq(a.a().cum_psn, psn + 1, "cum_psn across the wrap");
        ++k;
    }
    expect_bytes(e, 64 * 6, pattern(16, 6), "the last WRITE placed");
}

CONFORM_TEST(cq_overflow_loses_completion, "R-CMPL-5",
             "three receive completions into a CQ of depth 2: two are polled, one is lost and counted") {
    Env e = setup(t, Setup{.stream = false});
    const uint32_t small = t.ctl.cq(2);
    t.ctl.stream(e.conn, 1, e.pd, e.cq, small);
    const uint64_t before = counter(t.ctl, "cq_overflows");
    for (uint32_t i = 0; i < 3; ++i) {
        e.post_recv(i, e.at(128 * i), 64);
        DataSpec d;
        d.op = Opcode::send;
        d.msg_seq = i;
        d.recv_seq = i;
        d.msg_len = 8;
        d.payload = pattern(8, 1);
        const Sent s = e.p().send(d);
        wait_acked(e.p(), 0, s.psn);
    }
    const uint64_t end = now_ns() + 200 * kMs;
    while (counter(t.ctl, "cq_overflows") == before && now_ns() < end) {}
    check_eq(counter(t.ctl, "cq_overflows") - before, uint64_t(1), "cq_overflows");
    check_eq(e.ctl.poll(small).size(), size_t(2), "completions in the CQ");
}

CONFORM_TEST(zero_length_send, "R-SEG-2:zero R-DATA-8:zero",
             "a 0-byte SEND is one packet with payload_len 0 and completes its receive with byte_len 0") {
    Env e = setup(t);
    e.post_recv(9, e.at(0), 64);
    DataSpec d;
    d.op = Opcode::send;
    const Sent s = e.p().send(d);
    wait_acked(e.p(), 0, s.psn);
    const auto wc = e.completions(1);
    check(wc[0].wr_id == 9 && wc[0].status == "success" && wc[0].byte_len == 0, "receive 9 success byte_len 0", wc[0].str());
}


namespace {

// R-PACK-1: a WRITE_PACK payload from (rkey, remote address, bytes) entries.
std::vector<uint8_t> pack_payload(const std::vector<std::tuple<uint32_t, uint64_t, std::vector<uint8_t>>>& entries) {
    std::vector<uint8_t> p;
    for (const auto& [rkey, addr, bytes] : entries) {
        uint8_t h[wire::kPackEntryHead];
        wire::detail::put32(h, rkey);
        wire::detail::put32(h + 4, uint32_t(bytes.size()));
        wire::detail::put64(h + 8, addr);
        p.insert(p.end(), h, h + sizeof h);
        p.insert(p.end(), bytes.begin(), bytes.end());
    }
    return p;
}

}  // namespace

CONFORM_TEST(write_pack_entry_refused, "R-PACK-1 R-PACK-2 R-PACK-5 R-PACK-6 R-NAK-1:noack R-ACK-8:refused",
             "an IUT that accepts WRITE_PACK (CONNECT_ACK flags bit 0) places a packed WRITE's entries in order: "
             "with entry 2's rkey unknown, entries 0 and 1 land, 2 and 3 do not, the NAK names the packet's CSN and "
             "entry 2's msg_seq, the packet sent again is refused the same way; an IUT configured not to pack does "
             "not advertise") {
    {
        Env off = setup(t, Setup{.iut = iut_cfg({{"pack_writes", "0"}}), .connect = false});
        const RxPkt ca = off.p().connect(ConnParams{});
        check((ca.raw[3] & wire::kConnAcceptsPack) == 0, "no accepts_pack in the CONNECT_ACK of an IUT that does not pack",
              to_hex(ca.raw.data(), 4));
    }
    Env e = setup(t, Setup{.connect = false});
    const RxPkt ca = e.p().connect(ConnParams{});
    e.conn = t.ctl.accept(1000);
    t.ctl.stream(e.conn, 1, e.pd, e.cq, e.cq);
    if (!(ca.raw[3] & wire::kConnAcceptsPack))
        fail("accepts_pack in the IUT's CONNECT_ACK (R-PACK-2; the R-PACK tests need an IUT that accepts WRITE_PACK)",
             to_hex(ca.raw.data(), 4));
    // A whole good pack first: every entry placed, the CSN acknowledged.
    DataSpec good;
    good.op = Opcode::write_pack;
    good.stream = 1;
    good.msg_seq = 0;
    good.msg_len = 3;
    good.payload = pack_payload({{e.mr.rkey, e.at(0), pattern(40, 1)},
                                 {e.mr.rkey, e.at(64), pattern(8, 2)},
                                 {e.mr.rkey, e.at(128), {}}});
    const Sent g = e.p().send(good);
    wait_acked(e.p(), 0, g.psn);
    if (t.ctl.mem_read(e.at(0), 40) != pattern(40, 1) || t.ctl.mem_read(e.at(64), 8) != pattern(8, 2))
        fail("the packed WRITEs' bytes in the region", "other bytes");
    // Messages 3..6: entry 2 (message 5) names an unknown rkey.
    DataSpec bad;
    bad.op = Opcode::write_pack;
    bad.stream = 1;
    bad.msg_seq = 3;
    bad.msg_len = 4;
    bad.payload = pack_payload({{e.mr.rkey, e.at(1024), pattern(32, 3)},
                                {e.mr.rkey, e.at(1088), pattern(32, 4)},
                                {0x7fffff21, e.at(1152), pattern(32, 5)},
                                {e.mr.rkey, e.at(1216), pattern(32, 6)}});
    const Sent b = e.p().send(bad);
    RxPkt n = wait_nak(e.p(), Syndrome::rkey_invalid, b.csn);
    check(n.n().stream_id == 1 && n.n().msg_seq == 5, "NAK naming stream 1 message 5 (entry 2)", n.str());
    if (t.ctl.mem_read(e.at(1024), 32) != pattern(32, 3) || t.ctl.mem_read(e.at(1088), 32) != pattern(32, 4))
        fail("entries 0 and 1 placed", "other bytes");
    if (t.ctl.mem_read(e.at(1152), 128) != std::vector<uint8_t>(128, 0)) fail("entries 2 and 3 not placed", "bytes changed");
    // Sent again (its NAK lost): refused again, the same entry named.
    bad.csn = b.csn;
    const Sent b2 = e.p().send(bad);
    n = wait_nak(e.p(), Syndrome::rkey_invalid, b2.csn);
    check(n.n().msg_seq == 5, "the resent WRITE_PACK NAKed at message 5 again", n.str());
    // R-PACK-6 with R-PACK-1: a pack whose entry count exceeds its payload is a decode error, nothing placed.
    const auto before = t.ctl.counters();
    DataSpec torn = good;
    torn.msg_seq = 7;
    torn.msg_len = 4;  // three entries in the payload
    e.p().send(torn);
    e.p().quiet(answer_from(e.p()), 40 * kMs,
                "no answer: no ACK of the refused WRITE_PACK (R-NAK-1, R-ACK-8), none to the malformed one");
    const uint64_t d = t.ctl.counters().at("rx_inconsistent") - before.at("rx_inconsistent");
    check(d == 1, "rx_inconsistent +1 for the malformed WRITE_PACK", "+" + std::to_string(d));
}

}  // namespace mroce::conform
