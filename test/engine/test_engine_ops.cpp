// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Engine operations end to end between two real engines (doc/spec.md
// R-DATA-*, R-SEND-*, R-READ-*, R-ATOMIC-*, R-CMPL-*).
#include <catch2/catch.hpp>

#include <sys/mman.h>

#include <algorithm>
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

// R-MEM-6: a READ's source region deregistered (and freed) by the responder
// while segments of its response may still be resent. Before the rule the
// responder kept resending from the freed memory (ASan: heap-use-after-free
// in verbs-nccl-like at 1% loss, the CI's ASan build).
namespace {
struct ReadAfterDereg {
    Fixture f;
    std::vector<uint8_t> src = std::vector<uint8_t>(64 * 1024);
    MrInfo smr{};
    uint64_t after_dereg_from_src = 0;  // B's packets reading src after its deregistration
    uint64_t void_resps = 0;
    bool deregistered = false;
    ReadAfterDereg() {
        fill(src, 0, src.size(), 5);
        REQUIRE(f.b.eng.register_mr(f.b.pd, src.data(), src.size(), kAccessRemoteRead, smr) == Status::ok);
    }
    static bool from_src(const TxPacket& p, const std::vector<uint8_t>& v) {
        return p.payload_len && p.payload >= v.data() && p.payload < v.data() + v.size();
    }
    static bool is_ack(const TxPacket& p) { return p.hdr[1] == uint8_t(wire::PacketType::ack); }
    static bool is_void_resp(const TxPacket& p) {
        return p.hdr[1] == uint8_t(wire::PacketType::data) && p.hdr[24] == uint8_t(wire::Opcode::read_resp) &&
               (p.hdr[25] & wire::kDataVoid) && p.payload_len == 0;
    }
    void watch(int from, const TxPacket& p) {
        if (from != 1) return;
        if (deregistered && from_src(p, src)) ++after_dereg_from_src;
        if (is_void_resp(p)) ++void_resps;
    }
    void post_read() {
        SendWr rd;
        rd.wr_id = 9;
        rd.op = OpKind::read;
        rd.local_addr = f.a.addr(0);
        rd.length = uint32_t(src.size());
        rd.lkey = f.a.mr.lkey;
        rd.remote_addr = uint64_t(reinterpret_cast<uintptr_t>(src.data()));
        rd.rkey = smr.rkey;
        REQUIRE(f.a.eng.post_send(f.ca, 7, rd) == Status::ok);
    }
    void deregister() {
        REQUIRE(f.b.eng.deregister_mr(smr.lkey) == Status::ok);
        deregistered = true;
        std::fill(src.begin(), src.end(), uint8_t(0xEE));  // what a freed buffer may hold
    }
};
}  // namespace

TEST_CASE("R-MEM-6: the requester has the whole READ, its ACKs are lost, the responder deregisters the source",
          "[engine][read][mem]") {
    ReadAfterDereg t;
    // Every ACK from the requester is lost: the responder keeps resending.
    t.f.link.drop_if = [&](int from, const TxPacket& p) {
        t.watch(from, p);
        return from == 0 && ReadAfterDereg::is_ack(p);
    };
    t.post_read();
    auto c = t.f.wait(t.f.a, 1);
    REQUIRE(c.size() == 1);
    CHECK(c[0].status == WcStatus::success);
    std::vector<uint8_t> want(t.src);
    CHECK(std::memcmp(t.f.a.mem.data(), want.data(), want.size()) == 0);
    t.deregister();
    t.f.link.run([] { return false; }, 50'000'000);  // 50 ms of resends
    CHECK(t.after_dereg_from_src == 0);
    CHECK(t.void_resps > 0);
    // The requester's READ stays a success and its bytes as placed.
    CHECK(std::memcmp(t.f.a.mem.data(), want.data(), want.size()) == 0);
    CHECK(t.f.a.eng.poll_cq(t.f.a.cq, c.data(), 1) == 0);
}

// R-MEM-6 at ibv_destroy_qp: the responder deregisters the source and frees
// it (a large buffer: unmapped), then destroys its stream while segments of
// the response are still unacknowledged. The stream's orphans were copied
// from the freed region (verbs-nccl-like: SIGSEGV in destroy_stream's
// memcpy); they go void instead, as their next transmission would.
TEST_CASE("R-MEM-6: the responder destroys its stream after freeing the source of an unacknowledged READ",
          "[engine][read][mem]") {
    ReadAfterDereg t;
    const size_t len = t.src.size();
    void* m = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED);
    auto* src = static_cast<uint8_t*>(m);
    std::memcpy(src, t.src.data(), len);
    MrInfo smr{};
    REQUIRE(t.f.b.eng.register_mr(t.f.b.pd, src, len, kAccessRemoteRead, smr) == Status::ok);
    bool freed = false;
    uint64_t resp_bytes_after = 0;  // B's response payload sent after the source went
    t.f.link.drop_if = [&](int from, const TxPacket& p) {
        if (freed && from == 1 && p.hdr[1] == uint8_t(wire::PacketType::data) &&
            p.hdr[24] == uint8_t(wire::Opcode::read_resp))
            resp_bytes_after += p.payload_len;
        return from == 0 && ReadAfterDereg::is_ack(p);  // the responder keeps resending
    };
    SendWr rd;
    rd.wr_id = 9;
    rd.op = OpKind::read;
    rd.local_addr = t.f.a.addr(0);
    rd.length = uint32_t(len);
    rd.lkey = t.f.a.mr.lkey;
    rd.remote_addr = uint64_t(reinterpret_cast<uintptr_t>(src));
    rd.rkey = smr.rkey;
    REQUIRE(t.f.a.eng.post_send(t.f.ca, 7, rd) == Status::ok);
    auto c = t.f.wait(t.f.a, 1);
    REQUIRE(c.size() == 1);
    CHECK(c[0].status == WcStatus::success);
    CHECK(std::memcmp(t.f.a.mem.data(), t.src.data(), len) == 0);
    REQUIRE(t.f.b.eng.deregister_mr(smr.lkey) == Status::ok);
    REQUIRE(::munmap(m, len) == 0);
    freed = true;
    REQUIRE(t.f.b.eng.destroy_stream(t.f.cb, 7) == Status::ok);
    t.f.link.run([] { return false; }, 50'000'000);  // 50 ms of resends of the orphans
    CHECK(resp_bytes_after == 0);
    CHECK(std::memcmp(t.f.a.mem.data(), t.src.data(), len) == 0);
}

// R-MEM-6 only voids what reads a deregistered region: a transmit record
// that last carried a READ response keeps its region's key when it is freed,
// and the one-packet fast path (single_run) once reused such a record without
// clearing it, so the responder's later one-packet WRITEs on those records
// left empty and void (without the fix: 48 of the first 64 complete, the
// rest never do).
TEST_CASE("R-MEM-6: one-packet WRITEs on transmit records a READ response used, its source deregistered",
          "[engine][read][mem]") {
    ReadAfterDereg t;
    t.f.link.drop_if = [&](int from, const TxPacket& p) {
        t.watch(from, p);
        return false;
    };
    t.post_read();
    auto c = t.f.wait(t.f.a, 1);
    REQUIRE(c.size() == 1);
    REQUIRE(c[0].status == WcStatus::success);
    t.deregister();
    // More one-packet WRITEs from the responder than it has transmit records
    // (they start at 128), so every record the response used is reused.
    constexpr size_t kMsg = 64, kRounds = 8, kPerRound = 64, kDst = 512 * 1024;
    fill(t.f.b.mem, 0, kMsg * kRounds * kPerRound, 3);
    for (size_t r = 0; r < kRounds; ++r) {
        for (size_t i = 0; i < kPerRound; ++i) {
            const size_t off = (r * kPerRound + i) * kMsg;
            SendWr wr;
            wr.wr_id = off;
            wr.op = OpKind::write;
            wr.local_addr = t.f.b.addr(off);
            wr.length = uint32_t(kMsg);
            wr.lkey = t.f.b.mr.lkey;
            wr.remote_addr = t.f.a.addr(kDst + off);
            wr.rkey = t.f.a.mr.rkey;
            REQUIRE(t.f.b.eng.post_send(t.f.cb, 7, wr) == Status::ok);
        }
        auto w = t.f.wait(t.f.b, kPerRound);
        REQUIRE(w.size() == kPerRound);
        for (const Completion& x : w) CHECK(x.status == WcStatus::success);
    }
    CHECK(t.void_resps == 0);
    CHECK(std::memcmp(t.f.a.mem.data() + kDst, t.f.b.mem.data(), kMsg * kRounds * kPerRound) == 0);
}

TEST_CASE("R-MEM-6: the responder deregisters the source while a segment of the READ is still missing",
          "[engine][read][mem]") {
    ReadAfterDereg t;
    bool lost_once = false;
    uint64_t resp_sent = 0;
    // The last segment's first transmission is lost; the responder deregisters
    // as soon as every segment has left once.
    t.f.link.drop_if = [&](int from, const TxPacket& p) {
        t.watch(from, p);
        if (from != 1 || p.hdr[1] != uint8_t(wire::PacketType::data) ||
            p.hdr[24] != uint8_t(wire::Opcode::read_resp) || p.payload_len == 0)
            return false;
        ++resp_sent;
        if (!lost_once && p.payload + p.payload_len == t.src.data() + t.src.size()) {
            lost_once = true;
            return true;
        }
        return false;
    };
    t.post_read();
    REQUIRE(t.f.link.run([&] { return lost_once; }, 1'000'000'000));
    t.deregister();
    auto c = t.f.wait(t.f.a, 1);
    REQUIRE(c.size() == 1);
    CHECK(c[0].wr_id == 9);
    CHECK(c[0].status == WcStatus::rem_access_err);  // not success, not a hang
    CHECK(t.after_dereg_from_src == 0);
    CHECK(t.void_resps > 0);
}
