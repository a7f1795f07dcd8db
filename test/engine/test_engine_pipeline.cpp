// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Deferred placement (the pipeline arrangement, doc/architecture.md 4.2),
// driven packet by packet: rx_burst hands payload copies out as PlaceJobs,
// and nothing that depends on a copy (PSN in an ACK, cum_csn, byte count,
// completion) happens before Engine::placed() returns its token; records
// finish in arrival order, so an ACK never shows a hole that is only a copy
// still in progress (R-SACK-4 would call it a loss); a duplicate arriving
// while its original is being placed is not placed again (R-CSN-3).
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "pair_link.hpp"

using namespace mroce;
using mroce::test::PairLink;

namespace {

struct Captured {
    std::vector<uint8_t> bytes;
    wire::Packet pk{};
};

std::vector<Captured> drain_tx(Engine& e, Time now) {
    std::vector<Captured> out;
    TxPacket tx[32];
    size_t n;
    while ((n = e.tx_burst(tx, 32, now)) > 0) {
        for (size_t i = 0; i < n; ++i) {
            Captured c;
            c.bytes.assign(tx[i].hdr, tx[i].hdr + tx[i].hdr_len);
            if (tx[i].payload_len) c.bytes.insert(c.bytes.end(), tx[i].payload, tx[i].payload + tx[i].payload_len);
            out.push_back(std::move(c));
        }
        if (n < 32) break;
    }
    for (Captured& c : out) REQUIRE(wire::decode({c.bytes.data(), c.bytes.size()}, c.pk) == wire::DecodeError::ok);
    return out;
}

size_t count_type(const std::vector<Captured>& v, wire::PacketType t) {
    size_t n = 0;
    for (const Captured& c : v) n += c.pk.common.type == t;
    return n;
}

void deliver(Engine& e, std::vector<Captured>& pkts, Time now, uint32_t cookie_base = 0) {
    std::vector<RxPacket> rx(pkts.size());
    for (size_t i = 0; i < pkts.size(); ++i) {
        rx[i].data = pkts[i].bytes.data();
        rx[i].len = uint32_t(pkts[i].bytes.size());
        rx[i].peer = 0;
        rx[i].cookie = cookie_base + uint32_t(i);
    }
    e.rx_burst(rx.data(), rx.size(), now);
}

void copy(const PlaceJob& j) { std::memcpy(j.dst, j.src, j.len); }

}  // namespace

TEST_CASE("pipeline: nothing is acked or completed before it is placed", "[engine][pipeline]") {
    EngineConfig ca_cfg;
    ca_cfg.num_paths = 1;
    ca_cfg.rate_hints = false;  // no pacing: the three segments leave in one burst
    EngineConfig cb_cfg = ca_cfg;
    cb_cfg.deferred_placement = true;
    Engine a(ca_cfg), b(cb_cfg);
    std::vector<uint8_t> ma(1 << 16), mb(1 << 16, 0);
    for (size_t i = 0; i < ma.size(); ++i) ma[i] = uint8_t(i * 37 + 11);
    const uint32_t pa = a.alloc_pd(), pb = b.alloc_pd();
    uint32_t qa, qb;
    REQUIRE(a.create_cq(64, qa) == Status::ok);
    REQUIRE(b.create_cq(64, qb) == Status::ok);
    const uint32_t all = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
    MrInfo ra, rb;
    REQUIRE(a.register_mr(pa, ma.data(), ma.size(), all, ra) == Status::ok);
    REQUIRE(b.register_mr(pb, mb.data(), mb.size(), all, rb) == Status::ok);
    PairLink link(a, b);
    uint32_t conn_a, conn_b;
    REQUIRE(mroce::test::connect_pair(link, conn_a, conn_b));
    REQUIRE(a.create_stream(conn_a, 1, pa, qa, qa) == Status::ok);
    REQUIRE(b.create_stream(conn_b, 1, pb, qb, qb) == Status::ok);
    RecvWr rw;
    rw.wr_id = 77;
    rw.addr = uint64_t(uintptr_t(mb.data()));
    rw.lkey = rb.lkey;
    REQUIRE(b.post_recv(conn_b, 1, rw) == Status::ok);

    // A 3-segment WRITE_IMM: the receive completion at B needs all three copies.
    const uint32_t len = 3 * 4096;
    SendWr w;
    w.wr_id = 5;
    w.op = OpKind::write_imm;
    w.local_addr = uint64_t(uintptr_t(ma.data()));
    w.lkey = ra.lkey;
    w.length = len;
    w.remote_addr = uint64_t(uintptr_t(mb.data())) + 1000;
    w.rkey = rb.rkey;
    w.imm = 42;
    REQUIRE(a.post_send(conn_a, 1, w) == Status::ok);
    Time now = link.now + 1000;
    std::vector<Captured> data = drain_tx(a, now);
    REQUIRE(count_type(data, wire::PacketType::data) == 3);
    const uint32_t psn0 = data[0].pk.data.psn;

    now += 2000;
    deliver(b, data, now);
    PlaceJob jobs[8];
    REQUIRE(b.take_place_jobs(jobs, 8) == 3);
    CHECK(b.take_place_jobs(jobs + 3, 5) == 0);
    CHECK(b.place_outstanding() == 3);
    for (uint32_t i = 0; i < 3; ++i) {
        CHECK(jobs[i].cookie == i);   // the driver's buffer handle comes back
        CHECK(jobs[i].len == 4096);
        CHECK(jobs[i].src == data[i].bytes.data() + jobs[i].src_off);
        CHECK(jobs[i].dst == mb.data() + 1000 + 4096 * i);
    }
    // Nothing placed yet: no ACK, no completion, memory untouched.
    CHECK(count_type(drain_tx(b, now), wire::PacketType::ack) == 0);
    Completion cpl[8];
    CHECK(b.poll_cq(qb, cpl, 8) == 0);
    CHECK(mb[1000] == 0);

    // The second copy finishes first: still no ACK (it would show PSN 0 as a hole).
    copy(jobs[1]);
    b.placed(&jobs[1].token, 1, now + 10);
    CHECK(count_type(drain_tx(b, now + 10), wire::PacketType::ack) == 0);
    CHECK(b.place_outstanding() == 3);

    // A retransmitted copy of segment 2 arrives while it is being placed: no second job.
    std::vector<Captured> dup{data[2]};
    deliver(b, dup, now + 20, 10);
    CHECK(b.take_place_jobs(jobs + 3, 5) == 0);
    CHECK(b.place_outstanding() == 4);

    // The first copy: segments 0 and 1 are acked, cumulatively, nothing beyond.
    copy(jobs[0]);
    b.placed(&jobs[0].token, 1, now + 30);
    CHECK(b.place_outstanding() == 2);
    std::vector<Captured> acks = drain_tx(b, now + 30);
    REQUIRE(count_type(acks, wire::PacketType::ack) == 1);
    const wire::AckHeader& ack1 = acks[0].pk.ack;
    CHECK(ack1.cum_psn == psn0 + 2);
    CHECK((ack1.sack[0] | ack1.sack[1] | ack1.sack[2] | ack1.sack[3]) == 0);
    CHECK(ack1.cum_csn == data[2].pk.data.csn);   // R-CSN-6: the placed prefix only
    CHECK(b.poll_cq(qb, cpl, 8) == 0);
    ConnStats sb;
    REQUIRE(b.conn_stats(conn_b, sb) == Status::ok);
    CHECK(sb.rx_data_packets == 2);

    // The last copy: the message completes, the duplicate is acked after it.
    copy(jobs[2]);
    b.placed(&jobs[2].token, 1, now + 40);
    CHECK(b.place_outstanding() == 0);
    REQUIRE(b.poll_cq(qb, cpl, 8) == 1);
    CHECK(cpl[0].wr_id == 77);
    CHECK(cpl[0].status == WcStatus::success);
    CHECK(cpl[0].imm == 42);
    CHECK(std::memcmp(mb.data() + 1000, ma.data(), len) == 0);
    REQUIRE(b.conn_stats(conn_b, sb) == Status::ok);
    CHECK(sb.rx_data_packets == 3);
    CHECK(sb.duplicates == 1);
    acks = drain_tx(b, now + 40);
    REQUIRE(count_type(acks, wire::PacketType::ack) == 1);
    CHECK(acks[0].pk.ack.cum_psn == psn0 + 3);
    CHECK(acks[0].pk.ack.cum_csn == data[2].pk.data.csn + 1);

    // The sender completes on that ACK.
    deliver(a, acks, now + 2000);
    REQUIRE(a.poll_cq(qa, cpl, 8) == 1);
    CHECK(cpl[0].wr_id == 5);
    CHECK(cpl[0].status == WcStatus::success);
}

TEST_CASE("pipeline: a full placement queue drops unacked, then recovers", "[engine][pipeline]") {
    EngineConfig cfg;
    cfg.num_paths = 4;
    cfg.cc.init_cwnd = 128;   // 4 paths x 128 in flight against 64 placement records
    cfg.rate_hints = false;   // no pacing or hint cap on the windows
    EngineConfig cb_cfg = cfg;
    cb_cfg.deferred_placement = true;
    cb_cfg.place_depth = 64;  // the minimum
    Engine a(cfg), b(cb_cfg);
    CHECK(b.config().place_depth == 64);
    std::vector<uint8_t> ma(1 << 20), mb(1 << 20, 0);
    for (size_t i = 0; i < ma.size(); ++i) ma[i] = uint8_t(i * 13 + 5);
    const uint32_t pa = a.alloc_pd(), pb = b.alloc_pd();
    uint32_t qa, qb;
    REQUIRE(a.create_cq(64, qa) == Status::ok);
    REQUIRE(b.create_cq(64, qb) == Status::ok);
    MrInfo ra{}, rb{};
    REQUIRE(a.register_mr(pa, ma.data(), ma.size(), kAccessLocalWrite, ra) == Status::ok);
    REQUIRE(b.register_mr(pb, mb.data(), mb.size(), kAccessLocalWrite | kAccessRemoteWrite, rb) == Status::ok);
    PairLink link(a, b);
    link.enable_pipeline(1);
    link.place_latency = 50'000;  // slow placement: 64 records fill long before copies return
    uint32_t conn_a, conn_b;
    REQUIRE(mroce::test::connect_pair(link, conn_a, conn_b));
    REQUIRE(a.create_stream(conn_a, 1, pa, qa, qa) == Status::ok);
    REQUIRE(b.create_stream(conn_b, 1, pb, qb, qb) == Status::ok);
    SendWr w;
    w.wr_id = 9;
    w.op = OpKind::write;
    w.local_addr = uint64_t(uintptr_t(ma.data()));
    w.lkey = ra.lkey;
    w.length = 1 << 20;
    w.remote_addr = uint64_t(uintptr_t(mb.data()));
    w.rkey = rb.rkey;
    REQUIRE(a.post_send(conn_a, 1, w) == Status::ok);
    Completion cpl[4];
    size_t got = 0;
    REQUIRE(link.run([&] { return (got += a.poll_cq(qa, cpl, 4)) > 0; }, 20'000'000'000ull));
    CHECK(cpl[0].status == WcStatus::success);
    CHECK(std::memcmp(ma.data(), mb.data(), mb.size()) == 0);
    CHECK(b.stats().rx_place_full > 0);
    link.finish_placements(true);
    CHECK(b.place_outstanding() == 0);
}

TEST_CASE("pipeline: payloads up to place_inline_max are copied inline", "[engine][pipeline]") {
    EngineConfig cfg;
    cfg.num_paths = 1;
    cfg.rate_hints = false;
    EngineConfig cb_cfg = cfg;
    cb_cfg.deferred_placement = true;
    cb_cfg.place_inline_max = 256;
    Engine a(cfg), b(cb_cfg);
    std::vector<uint8_t> ma(4096, 0x3c), mb(4096, 0);
    const uint32_t pa = a.alloc_pd(), pb = b.alloc_pd();
    uint32_t qa, qb;
    REQUIRE(a.create_cq(64, qa) == Status::ok);
    REQUIRE(b.create_cq(64, qb) == Status::ok);
    MrInfo ra{}, rb{};
    REQUIRE(a.register_mr(pa, ma.data(), ma.size(), kAccessLocalWrite, ra) == Status::ok);
    REQUIRE(b.register_mr(pb, mb.data(), mb.size(), kAccessLocalWrite | kAccessRemoteWrite, rb) == Status::ok);
    PairLink link(a, b);
    uint32_t conn_a, conn_b;
    REQUIRE(mroce::test::connect_pair(link, conn_a, conn_b));
    REQUIRE(a.create_stream(conn_a, 1, pa, qa, qa) == Status::ok);
    REQUIRE(b.create_stream(conn_b, 1, pb, qb, qb) == Status::ok);
    const uint32_t len = GENERATE(1u, 256u, 257u);
    SendWr w;
    w.op = OpKind::write;
    w.local_addr = uint64_t(uintptr_t(ma.data()));
    w.lkey = ra.lkey;
    w.length = len;
    w.remote_addr = uint64_t(uintptr_t(mb.data()));
    w.rkey = rb.rkey;
    REQUIRE(a.post_send(conn_a, 1, w) == Status::ok);
    Time now = link.now + 1000;
    std::vector<Captured> data = drain_tx(a, now);
    REQUIRE(count_type(data, wire::PacketType::data) == 1);
    deliver(b, data, now + 2000);
    PlaceJob jobs[2];
    const size_t nj = b.take_place_jobs(jobs, 2);
    CHECK(nj == (len > 256 ? 1u : 0u));
    CHECK((mb[len - 1] == 0x3c) == (len <= 256));   // copied inline, or not yet
    CHECK(count_type(drain_tx(b, now + 2000), wire::PacketType::ack) == (len <= 256 ? 1u : 0u));
    if (nj) {
        copy(jobs[0]);
        b.placed(&jobs[0].token, 1, now + 2100);
        CHECK(count_type(drain_tx(b, now + 2100), wire::PacketType::ack) == 1);
    }
    CHECK(std::memcmp(mb.data(), ma.data(), len) == 0);
    CHECK(b.place_outstanding() == 0);
}
