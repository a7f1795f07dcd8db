// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Engine operations end to end between two real engines (doc/spec.md
// R-DATA-*, R-SEND-*, R-READ-*, R-ATOMIC-*, R-CMPL-*).
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "engine_fixture.hpp"

using namespace mroce;
using mroce::test::PairLink;

using mroce::test::Fixture;
using mroce::test::fill;

TEST_CASE("connect and write 1 MiB minus a bit", "[engine]") {
    Fixture f;
    const size_t len = (1 << 19) + 123;
    fill(f.a.mem, 0, len, 5);
    SendWr wr;
    wr.wr_id = 42;
    wr.op = OpKind::write;
    wr.local_addr = f.a.addr();
    wr.length = uint32_t(len);
    wr.lkey = f.a.mr.lkey;
    wr.remote_addr = f.b.addr(4096);
    wr.rkey = f.b.mr.rkey;
    REQUIRE(f.a.eng.post_send(f.ca, 7, wr) == Status::ok);
    auto c = f.wait(f.a, 1);
    REQUIRE(c.size() == 1);
    CHECK(c[0].wr_id == 42);
    CHECK(c[0].status == WcStatus::success);
    CHECK(c[0].opcode == WcOpcode::write);
    CHECK(std::memcmp(f.a.mem.data(), f.b.mem.data() + 4096, len) == 0);
}

TEST_CASE("send, send_imm, write_imm, read, atomics", "[engine]") {
    Fixture f;
    fill(f.a.mem, 0, 200000, 9);
    // Receives on B: two buffers.
    for (int i = 0; i < 3; ++i) {
        RecvWr r;
        r.wr_id = 100 + i;
        r.addr = f.b.addr(300000 + size_t(i) * 100000);
        r.length = 100000;
        r.lkey = f.b.mr.lkey;
        REQUIRE(f.b.eng.post_recv(f.cb, 7, r) == Status::ok);
    }
    SendWr s;
    s.wr_id = 1;
    s.op = OpKind::send;
    s.local_addr = f.a.addr();
    s.length = 70000;
    s.lkey = f.a.mr.lkey;
    REQUIRE(f.a.eng.post_send(f.ca, 7, s) == Status::ok);
    s.wr_id = 2;
    s.op = OpKind::send_imm;
    s.imm = 0xabcdef01;
    s.local_addr = f.a.addr(1000);
    s.length = 0;
    REQUIRE(f.a.eng.post_send(f.ca, 7, s) == Status::ok);
    SendWr w;
    w.wr_id = 3;
    w.op = OpKind::write_imm;
    w.imm = 77;
    w.local_addr = f.a.addr(5000);
    w.length = 9000;
    w.lkey = f.a.mr.lkey;
    w.remote_addr = f.b.addr(700000);
    w.rkey = f.b.mr.rkey;
    REQUIRE(f.a.eng.post_send(f.ca, 7, w) == Status::ok);
    // READ 50000 bytes of B into A.
    fill(f.b.mem, 800000, 50000, 3);
    SendWr rd;
    rd.wr_id = 4;
    rd.op = OpKind::read;
    rd.local_addr = f.a.addr(600000);
    rd.length = 50000;
    rd.lkey = f.a.mr.lkey;
    rd.remote_addr = f.b.addr(800000);
    rd.rkey = f.b.mr.rkey;
    REQUIRE(f.a.eng.post_send(f.ca, 7, rd) == Status::ok);
    uint64_t v = 10;
    std::memcpy(f.b.mem.data() + 900000, &v, 8);
    SendWr at;
    at.wr_id = 5;
    at.op = OpKind::atomic_fadd;
    at.local_addr = f.a.addr(700000);
    at.length = 8;
    at.lkey = f.a.mr.lkey;
    at.remote_addr = f.b.addr(900000);
    at.rkey = f.b.mr.rkey;
    at.compare_add = 5;
    REQUIRE(f.a.eng.post_send(f.ca, 7, at) == Status::ok);
    at.wr_id = 6;
    at.op = OpKind::atomic_cas;
    at.local_addr = f.a.addr(700008);
    at.compare_add = 15;
    at.swap = 99;
    REQUIRE(f.a.eng.post_send(f.ca, 7, at) == Status::ok);

    auto ca = f.wait(f.a, 6);
    REQUIRE(ca.size() == 6);
    for (size_t i = 0; i < 6; ++i) {
        CHECK(ca[i].wr_id == i + 1);  // R-CMPL-2: post order
        CHECK(ca[i].status == WcStatus::success);
    }
    auto cb = f.wait(f.b, 3);
    REQUIRE(cb.size() == 3);
    CHECK(cb[0].wr_id == 100);
    CHECK(cb[0].byte_len == 70000);
    CHECK_FALSE(cb[0].has_imm);
    CHECK(cb[1].wr_id == 101);
    CHECK(cb[1].byte_len == 0);
    CHECK(cb[1].has_imm);
    CHECK(cb[1].imm == 0xabcdef01);
    CHECK(cb[2].wr_id == 102);
    CHECK(cb[2].opcode == WcOpcode::recv_write_imm);
    CHECK(cb[2].imm == 77);
    CHECK(cb[2].byte_len == 9000);
    CHECK(std::memcmp(f.a.mem.data(), f.b.mem.data() + 300000, 70000) == 0);
    CHECK(std::memcmp(f.a.mem.data() + 5000, f.b.mem.data() + 700000, 9000) == 0);
    CHECK(std::memcmp(f.a.mem.data() + 600000, f.b.mem.data() + 800000, 50000) == 0);
    uint64_t old1, old2, now;
    std::memcpy(&old1, f.a.mem.data() + 700000, 8);
    std::memcpy(&old2, f.a.mem.data() + 700008, 8);
    std::memcpy(&now, f.b.mem.data() + 900000, 8);
    CHECK(old1 == 10);
    CHECK(old2 == 15);
    CHECK(now == 99);
}

TEST_CASE("ack_delay coalesces acks without changing the result", "[engine][ack]") {
    // R-ACK-1: held acks go out after kAckEvery packets or ack_delay; gaps,
    // CE, duplicates and message ends are acked at once.
    uint64_t acks[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
        EngineConfig cfg;
        cfg.ack_delay = k ? 20'000 : 0;
        Fixture f(cfg, 4 << 20);
        f.link.loss = 0.01;
        fill(f.a.mem, 0, 2 << 20, 11);
        const uint64_t b_tx0 = f.b.eng.stats().tx_packets;
        for (int m = 0; m < 8; ++m) {
            SendWr wr;
            wr.wr_id = uint64_t(m);
            wr.op = OpKind::write;
            wr.local_addr = f.a.addr(size_t(m) << 18);
            wr.length = 1 << 18;
            wr.lkey = f.a.mr.lkey;
            wr.remote_addr = f.b.addr((size_t(m) << 18) + (2 << 20));
            wr.rkey = f.b.mr.rkey;
            REQUIRE(f.a.eng.post_send(f.ca, 7, wr) == Status::ok);
        }
        auto c = f.wait(f.a, 8);
        REQUIRE(c.size() == 8);
        for (auto& x : c) CHECK(x.status == WcStatus::success);
        CHECK(std::memcmp(f.a.mem.data(), f.b.mem.data() + (2 << 20), 2 << 20) == 0);
        acks[k] = f.b.eng.stats().tx_packets - b_tx0;
    }
    INFO("acks without delay " << acks[0] << ", with 20 us delay " << acks[1]);
    CHECK(acks[1] * 2 < acks[0]);
}

// A driver may hand a datagram over in two spans (DPDK: the header mbuf and
// the payload mbuf of a chain, no linearising copy): every operation that
// carries a payload is placed byte-exact whatever the split, from the header
// alone in the first span to all but the last payload byte, inline and with
// deferred placement (the part in the first span is copied by the engine,
// the job covers the second span).
TEST_CASE("two-span datagrams: every op placed byte-exact at every split offset", "[engine][split]") {
    const bool deferred = GENERATE(false, true);
    EngineConfig cfg;
    cfg.max_payload = 256;   // every offset of a full segment: 256 datagrams per opcode
    cfg.num_paths = 2;
    cfg.deferred_placement = deferred;
    cfg.place_inline_max = 0;   // deferred: every payload copy goes to the placement stage
    Fixture f(cfg);
    if (deferred) {
        f.link.enable_pipeline(0);
        f.link.enable_pipeline(1);
    }
    constexpr uint32_t kSeg = 256;
    // Per opcode, the next split offset and the offsets seen for full segments.
    uint32_t next[16] = {};
    std::vector<std::vector<bool>> seen(16, std::vector<bool>(kSeg + 16, false));
    f.link.split_at = [&](int, const std::vector<uint8_t>& d) -> uint32_t {
        if (d.size() <= wire::kDataLen || d[1] != uint8_t(wire::PacketType::data)) return 0;
        const uint8_t op = d[24] & 15;
        const uint32_t room = uint32_t(d.size() - wire::kDataLen);   // payload bytes
        const uint32_t in_first = next[op]++ % room;                  // 0 .. room-1
        if (room == kSeg || room == 16 || room == 8) seen[op][in_first] = true;
        return uint32_t(wire::kDataLen) + in_first;
    };
    const size_t kLen = size_t(kSeg) * (kSeg + 3);   // > 256 full segments per message
    fill(f.a.mem, 0, kLen, 11);
    fill(f.b.mem, 600000, kLen, 12);
    RecvWr r;
    r.wr_id = 100;
    r.addr = f.b.addr(300000);
    r.length = uint32_t(kLen);
    r.lkey = f.b.mr.lkey;
    REQUIRE(f.b.eng.post_recv(f.cb, 7, r) == Status::ok);
    r.length = 4096;
    for (uint64_t k : {101, 102}) {   // WRITE_IMM's and SEND_IMM's
        r.wr_id = k;
        r.addr = f.b.addr(450000);
        REQUIRE(f.b.eng.post_recv(f.cb, 7, r) == Status::ok);
    }
    uint64_t id = 1;
    auto post = [&](OpKind op, size_t loc, size_t rem, uint32_t len) {
        SendWr w;
        w.wr_id = id++;
        w.op = op;
        w.local_addr = f.a.addr(loc);
        w.length = len;
        w.lkey = f.a.mr.lkey;
        w.remote_addr = f.b.addr(rem);
        w.rkey = f.b.mr.rkey;
        w.imm = 5;
        REQUIRE(f.a.eng.post_send(f.ca, 7, w) == Status::ok);
    };
    post(OpKind::write, 0, 100000, uint32_t(kLen));
    post(OpKind::send, 0, 0, uint32_t(kLen));
    post(OpKind::read, 800000, 600000, uint32_t(kLen));
    post(OpKind::write_imm, 1000, 500000, 3000);
    post(OpKind::send_imm, 2000, 0, 777);
    // Atomics on B's word at 999992: 16 FADDs of 1..16, then CAS 136 -> 7 (16 + 1 requests).
    uint64_t v = 0;
    std::memcpy(f.b.mem.data() + 999992, &v, 8);
    for (uint64_t k = 1; k <= 16; ++k) {
        SendWr at;
        at.wr_id = id++;
        at.op = OpKind::atomic_fadd;
        at.local_addr = f.a.addr(900000 + 8 * k);
        at.length = 8;
        at.lkey = f.a.mr.lkey;
        at.remote_addr = f.b.addr(999992);
        at.rkey = f.b.mr.rkey;
        at.compare_add = k;
        REQUIRE(f.a.eng.post_send(f.ca, 7, at) == Status::ok);
    }
    SendWr cas;
    cas.wr_id = id++;
    cas.op = OpKind::atomic_cas;
    cas.local_addr = f.a.addr(900000);
    cas.length = 8;
    cas.lkey = f.a.mr.lkey;
    cas.remote_addr = f.b.addr(999992);
    cas.rkey = f.b.mr.rkey;
    cas.compare_add = 136;
    cas.swap = 7;
    REQUIRE(f.a.eng.post_send(f.ca, 7, cas) == Status::ok);
    const size_t nreq = size_t(id - 1);

    auto ca = f.wait(f.a, nreq);
    REQUIRE(ca.size() == nreq);
    for (size_t i = 0; i < nreq; ++i) {
        CHECK(ca[i].wr_id == i + 1);
        CHECK(ca[i].status == WcStatus::success);
    }
    auto cb = f.wait(f.b, 3);
    REQUIRE(cb.size() == 3);
    CHECK(cb[0].byte_len == kLen);
    CHECK(cb[1].opcode == WcOpcode::recv_write_imm);
    CHECK(cb[2].byte_len == 777);
    CHECK(std::memcmp(f.a.mem.data(), f.b.mem.data() + 100000, kLen) == 0);          // WRITE
    CHECK(std::memcmp(f.a.mem.data(), f.b.mem.data() + 300000, kLen) == 0);          // SEND
    CHECK(std::memcmp(f.b.mem.data() + 600000, f.a.mem.data() + 800000, kLen) == 0); // READ response
    CHECK(std::memcmp(f.a.mem.data() + 1000, f.b.mem.data() + 500000, 3000) == 0);   // WRITE_IMM
    CHECK(std::memcmp(f.a.mem.data() + 2000, f.b.mem.data() + 450000, 777) == 0);    // SEND_IMM
    for (uint64_t k = 1; k <= 16; ++k) {
        uint64_t old = 0;
        std::memcpy(&old, f.a.mem.data() + 900000 + 8 * k, 8);
        CHECK(old == k * (k - 1) / 2);   // FADDs executed once each, in order
    }
    uint64_t cas_old = 0, fin = 0;
    std::memcpy(&cas_old, f.a.mem.data() + 900000, 8);
    std::memcpy(&fin, f.b.mem.data() + 999992, 8);
    CHECK(cas_old == 136);
    CHECK(fin == 7);
    // Every split offset was exercised for each payload-carrying opcode.
    auto all = [&](wire::Opcode op, uint32_t room) {
        for (uint32_t i = 0; i < room; ++i)
            if (!seen[uint8_t(op)][i]) return false;
        return true;
    };
    CHECK(all(wire::Opcode::write, kSeg));
    CHECK(all(wire::Opcode::send, kSeg));
    CHECK(all(wire::Opcode::read_resp, kSeg));
    CHECK(all(wire::Opcode::atomic_fadd, 16));
    CHECK(all(wire::Opcode::atomic_resp, 8));
    CHECK(f.link.split_seen > 3 * kSeg);
    CHECK(f.b.eng.stats().rx_decode_errors == 0);
    CHECK(f.a.eng.stats().rx_decode_errors == 0);
    if (deferred) CHECK(f.b.eng.stats().place_jobs > 2 * kSeg);
}
