// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Scatter/gather lists on send and receive work requests (doc/spec.md
// R-SGE-*, R-MEM-4, R-SEND-5, R-SEND-7, R-SEG-2). The random layouts under
// loss are in the integrity matrix (test_engine_integrity.cpp); here the
// edges: the local checks per entry, the lengths, the segment count.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "engine_fixture.hpp"

using namespace mroce;
using mroce::test::Fixture;
using mroce::test::fill;

namespace {

EngineConfig sge_config() {
    EngineConfig c;
    c.max_send_sge = 16;
    c.max_recv_sge = 16;
    c.max_payload = 1024;
    return c;
}

SendWr list_wr(uint64_t id, OpKind op, const std::vector<Sge>& sg, uint64_t raddr, uint32_t rkey) {
    SendWr w;
    w.wr_id = id;
    w.op = op;
    w.sg_list = sg.data();
    w.num_sge = uint32_t(sg.size());
    w.remote_addr = raddr;
    w.rkey = rkey;
    return w;
}

}  // namespace

// R-SEG-2: a list is cut into segments at its entry boundaries, each entry
// into segments of at most seg bytes; zero-length entries add none.
TEST_CASE("sge: a WRITE's packets follow its list's layout", "[engine][sge]") {
    Fixture f(sge_config());
    fill(f.a.mem, 0, 300000, 3);
    // 1 + 2 + 0 + 1 + 3 segments at seg 1024: 7 packets for 4100 bytes (one buffer: 5).
    const std::vector<Sge> sg = {{f.a.addr(50000), 1, f.a.mr.lkey},
                                 {f.a.addr(10), 1025, f.a.mr.lkey},
                                 {f.a.addr(77), 0, 0xdeadbeef},  // zero length: not checked, no segment
                                 {f.a.addr(200001), 3, f.a.mr.lkey},
                                 {f.a.addr(9000), 3071, f.a.mr.lkey}};
    ConnStats before;
    REQUIRE(f.a.eng.conn_stats(f.ca, before) == Status::ok);
    REQUIRE(f.a.eng.post_send(f.ca, 7, list_wr(1, OpKind::write, sg, f.b.addr(500000), f.b.mr.rkey)) == Status::ok);
    auto c = f.wait(f.a, 1);
    REQUIRE(c.size() == 1);
    CHECK(c[0].status == WcStatus::success);
    CHECK(c[0].byte_len == 4100);  // the entries' sum
    ConnStats after;
    REQUIRE(f.a.eng.conn_stats(f.ca, after) == Status::ok);
    CHECK(after.tx_data_packets - before.tx_data_packets == 7);
    size_t at = 500000;
    for (const Sge& e : sg) {
        const size_t off = size_t(e.addr - f.a.addr());
        CHECK(std::memcmp(f.b.mem.data() + at, f.a.mem.data() + off, e.length) == 0);
        at += e.length;
    }
    CHECK(f.b.mem[at] == 0);  // nothing beyond the message
}

// R-SGE-2 / R-MEM-4: every entry of a send WR's list is checked at post; one
// bad entry fails the WR with loc_prot_err, nothing of it is sent, and the
// stream enters ERROR (later WRs flush).
TEST_CASE("sge: a bad entry in a send WR's list is a local protection error", "[engine][sge]") {
    const int which = GENERATE(0, 1, 2, 3);
    Fixture f(sge_config());
    // A region without local write: fine to gather from, not to scatter a READ into.
    std::vector<uint8_t> ro(4096);
    MrInfo ro_mr;
    REQUIRE(f.a.eng.register_mr(f.a.pd, ro.data(), ro.size(), 0, ro_mr) == Status::ok);
    const uint64_t ro_addr = uint64_t(reinterpret_cast<uintptr_t>(ro.data()));
    std::vector<Sge> sg = {{f.a.addr(0), 100, f.a.mr.lkey}, {f.a.addr(1000), 200, f.a.mr.lkey},
                           {f.a.addr(5000), 300, f.a.mr.lkey}};
    OpKind op = OpKind::write;
    switch (which) {
    case 0: sg[1].lkey ^= 0x100; break;                                   // no such key
    case 1: sg[2].addr = f.a.addr(f.a.mem.size() - 100); break;           // runs past the region
    case 2: sg[0].addr = f.a.addr() - 1; break;                           // starts before it
    case 3: sg[1] = Sge{ro_addr, 64, ro_mr.lkey}; op = OpKind::read; break;  // READ into read-only memory
    }
    REQUIRE(f.a.eng.post_send(f.ca, 7, list_wr(1, op, sg, f.b.addr(0), f.b.mr.rkey)) == Status::ok);
    SendWr later = list_wr(2, OpKind::write, {}, f.b.addr(0), f.b.mr.rkey);
    later.local_addr = f.a.addr(0);
    later.length = 10;
    later.lkey = f.a.mr.lkey;
    REQUIRE(f.a.eng.post_send(f.ca, 7, later) == Status::ok);
    auto c = f.wait(f.a, 2);
    REQUIRE(c.size() == 2);
    CHECK(c[0].wr_id == 1);
    CHECK(c[0].status == WcStatus::loc_prot_err);
    CHECK(c[1].wr_id == 2);
    CHECK(c[1].status == WcStatus::wr_flush_err);
    ConnStats st;
    REQUIRE(f.a.eng.conn_stats(f.ca, st) == Status::ok);
    CHECK(st.tx_data_packets == 0);
    // A read-only entry is fine for a WRITE's gather (no local write needed).
    if (which == 3) {
        Fixture g(sge_config());
        MrInfo ro2;
        REQUIRE(g.a.eng.register_mr(g.a.pd, ro.data(), ro.size(), 0, ro2) == Status::ok);
        std::memset(ro.data(), 0x5c, 64);
        const std::vector<Sge> ok = {{ro_addr, 64, ro2.lkey}, {g.a.addr(0), 1, g.a.mr.lkey}};
        REQUIRE(g.a.eng.post_send(g.ca, 7, list_wr(3, OpKind::write, ok, g.b.addr(0), g.b.mr.rkey)) == Status::ok);
        auto d = g.wait(g.a, 1);
        REQUIRE(d.size() == 1);
        CHECK(d[0].status == WcStatus::success);
        CHECK(g.b.mem[63] == 0x5c);
    }
}

// R-SGE-1: the post-time limits: at most max_send_sge / max_recv_sge
// entries, a list pointer when num_sge > 0, atomics one 8-byte buffer.
TEST_CASE("sge: lists beyond the limits are refused at post", "[engine][sge]") {
    EngineConfig cfg = sge_config();
    cfg.max_send_sge = 5;
    cfg.max_recv_sge = 3;
    Fixture f(cfg);
    std::vector<Sge> sg(6, Sge{f.a.addr(0), 8, f.a.mr.lkey});
    SendWr w = list_wr(1, OpKind::write, sg, f.b.addr(0), f.b.mr.rkey);
    CHECK(f.a.eng.post_send(f.ca, 7, w) == Status::invalid_argument);
    w.num_sge = 5;
    CHECK(f.a.eng.post_send(f.ca, 7, w) == Status::ok);
    w.sg_list = nullptr;
    CHECK(f.a.eng.post_send(f.ca, 7, w) == Status::invalid_argument);
    SendWr at = list_wr(2, OpKind::atomic_fadd, sg, f.b.addr(0), f.b.mr.rkey);
    at.num_sge = 2;
    CHECK(f.a.eng.post_send(f.ca, 7, at) == Status::invalid_argument);  // two 8-byte entries
    at.num_sge = 1;
    CHECK(f.a.eng.post_send(f.ca, 7, at) == Status::ok);                 // one 8-byte entry
    RecvWr r;
    r.sg_list = sg.data();
    r.num_sge = 4;
    CHECK(f.b.eng.post_recv(f.cb, 7, r) == Status::invalid_argument);
    r.num_sge = 3;
    CHECK(f.b.eng.post_recv(f.cb, 7, r) == Status::ok);
    auto c = f.wait(f.a, 2);
    REQUIRE(c.size() == 2);
    CHECK(c[0].status == WcStatus::success);
    CHECK(c[1].status == WcStatus::success);
}

// R-SEND-5 against a list: a SEND fits when msg_len is at most the sum of the
// receive's entries; one byte more fails both sides.
TEST_CASE("sge: a SEND is checked against its receive list's sum", "[engine][sge]") {
    const bool over = GENERATE(false, true);
    Fixture f(sge_config());
    fill(f.a.mem, 0, 10000, 5);
    RecvWr r;
    r.wr_id = 50;
    const std::vector<Sge> rl = {{f.b.addr(9000), 1000, f.b.mr.lkey}, {f.b.addr(100), 999, f.b.mr.lkey},
                                 {f.b.addr(30000), 1, f.b.mr.lkey}};
    r.sg_list = rl.data();
    r.num_sge = 3;
    REQUIRE(f.b.eng.post_recv(f.cb, 7, r) == Status::ok);
    SendWr s;
    s.wr_id = 1;
    s.op = OpKind::send;
    s.local_addr = f.a.addr(0);
    s.length = over ? 2001 : 2000;
    s.lkey = f.a.mr.lkey;
    REQUIRE(f.a.eng.post_send(f.ca, 7, s) == Status::ok);
    auto ca = f.wait(f.a, 1);
    auto cb = f.wait(f.b, 1);
    REQUIRE(ca.size() == 1);
    REQUIRE(cb.size() == 1);
    CHECK(cb[0].wr_id == 50);
    if (over) {
        CHECK(ca[0].status == WcStatus::rem_inv_req_err);
        CHECK(cb[0].status == WcStatus::loc_len_err);
        CHECK(f.b.mem[9000] == 0);  // nothing placed
    } else {
        CHECK(ca[0].status == WcStatus::success);
        CHECK(cb[0].status == WcStatus::success);
        CHECK(cb[0].byte_len == 2000);
        CHECK(std::memcmp(f.b.mem.data() + 9000, f.a.mem.data(), 1000) == 0);
        CHECK(std::memcmp(f.b.mem.data() + 100, f.a.mem.data() + 1000, 999) == 0);
        CHECK(f.b.mem[30000] == f.a.mem[1999]);
    }
}

// R-SGE-2 / R-SEND-7: a receive whose list has a bad entry is accepted;
// the SEND that consumes it fails (remote_op_error at the requester) and the
// receive completes with loc_prot_err, nothing placed.
TEST_CASE("sge: a receive list with a bad entry fails the SEND that consumes it", "[engine][sge]") {
    Fixture f(sge_config());
    fill(f.a.mem, 0, 100, 5);
    RecvWr r;
    r.wr_id = 60;
    const std::vector<Sge> rl = {{f.b.addr(0), 50, f.b.mr.lkey}, {f.b.addr(100), 50, f.b.mr.lkey ^ 0x100}};
    r.sg_list = rl.data();
    r.num_sge = 2;
    REQUIRE(f.b.eng.post_recv(f.cb, 7, r) == Status::ok);
    SendWr s;
    s.wr_id = 1;
    s.op = OpKind::send;
    s.local_addr = f.a.addr(0);
    s.length = 20;
    s.lkey = f.a.mr.lkey;
    REQUIRE(f.a.eng.post_send(f.ca, 7, s) == Status::ok);
    auto ca = f.wait(f.a, 1);
    auto cb = f.wait(f.b, 1);
    REQUIRE(ca.size() == 1);
    REQUIRE(cb.size() == 1);
    CHECK(ca[0].status == WcStatus::rem_op_err);
    CHECK(cb[0].wr_id == 60);
    CHECK(cb[0].status == WcStatus::loc_prot_err);
    CHECK(f.b.mem[0] == 0);
}
