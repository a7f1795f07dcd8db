// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Many connections between two engines, most of them idle: tx_burst,
// next_deadline and the timers visit only connections that may have work
// (Engine::Impl::ready / timed), so every kind of input must wake the one it
// concerns: a packet, an API call, a timer. Cost per packet with idle
// connections: `mroce-bench-engine -c N` (doc/performance.md section 1).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

#include "pair_link.hpp"

using namespace mroce;
using mroce::test::PairLink;

namespace {

// Two engines with small queues, a 64 KiB region each (A's readable, B's
// remotely writable) and a CQ each: what every test here starts from.
struct SmallPair {
    EngineConfig cfg;
    Engine a, b;
    std::vector<uint8_t> ma, mb;
    uint32_t pda, pdb, cqa = 0, cqb = 0;
    MrInfo mra{}, mrb{};
    static EngineConfig small(bool offload) {
        EngineConfig c;
        c.num_paths = 2;
        c.csn_window = 64;
        c.stream_depth = 4;
        c.recv_depth = 4;
        c.offload_cc = offload;
        return c;
    }
    explicit SmallPair(bool offload = false, uint8_t fill = 0)
        : cfg(small(offload)), a(cfg), b(cfg), ma(1 << 16, fill), mb(1 << 16, 0), pda(a.alloc_pd()), pdb(b.alloc_pd()) {
        REQUIRE(a.create_cq(4096, cqa) == Status::ok);
        REQUIRE(b.create_cq(4096, cqb) == Status::ok);
        REQUIRE(a.register_mr(pda, ma.data(), ma.size(), kAccessLocalWrite, mra) == Status::ok);
        REQUIRE(b.register_mr(pdb, mb.data(), mb.size(), kAccessLocalWrite | kAccessRemoteWrite, mrb) == Status::ok);
    }
};

}  // namespace

TEST_CASE("many idle connections: the ones given work wake and finish it", "[engine][conns]") {
    SmallPair sp(false, 0x11);
    Engine &a = sp.a, &b = sp.b;
    std::vector<uint8_t>&ma = sp.ma, &mb = sp.mb;
    const uint32_t pda = sp.pda, pdb = sp.pdb, cqa = sp.cqa, cqb = sp.cqb;
    const MrInfo &mra = sp.mra, &mrb = sp.mrb;
    PairLink link(a, b, 9);

    constexpr int kConns = 300;
    std::vector<uint32_t> ca(kConns), cb;
    for (int i = 0; i < kConns; ++i) REQUIRE(a.connect(1, ca[i]) == Status::ok);
    REQUIRE(link.run(
        [&] {
            ConnEvent ev[64];
            for (size_t n; (n = b.poll_events(ev, 64)) > 0;)
                for (size_t i = 0; i < n; ++i)
                    if (ev[i].kind == EventKind::incoming) cb.push_back(ev[i].conn);
            for (uint32_t c : ca)
                if (a.conn_state(c) != ConnState::established) return false;
            return cb.size() == size_t(kConns);
        },
        1'000'000'000));
    ConnEvent drain[64];
    while (a.poll_events(drain, 64) > 0) {}
    // Accepted in the order they were requested (CONNECT_REQs in order on one link).
    for (int i = 0; i < kConns; ++i) {
        REQUIRE(a.create_stream(ca[i], 7, pda, cqa, cqa) == Status::ok);
        REQUIRE(b.create_stream(cb[i], 7, pdb, cqb, cqb) == Status::ok);
    }
    // Long idle: nothing is due but the keepalive (R-CONN-15, conn_timeout / 4
    // after the last packet heard), nothing is sent.
    const Time quiet_from = link.now;
    const uint64_t tx0 = a.stats().tx_packets + b.stats().tx_packets;
    link.run([] { return false; }, 50'000'000);
    CHECK(a.stats().tx_packets + b.stats().tx_packets == tx0);
    CHECK(a.next_deadline(link.now) >= quiet_from + a.config().conn_timeout / 4 - 1'000'000);
    CHECK(b.next_deadline(link.now) >= quiet_from + b.config().conn_timeout / 4 - 1'000'000);
    CHECK(a.stats().keepalives_sent + b.stats().keepalives_sent == 0);

    // Work on a few scattered ones, through loss (timers must wake them too).
    link.loss = 0.05;
    const int busy[] = {0, 137, 299};
    for (int k = 0; k < 3; ++k) {
        SendWr wr;
        wr.wr_id = uint64_t(busy[k]);
        wr.op = OpKind::write;
        wr.local_addr = uint64_t(reinterpret_cast<uintptr_t>(ma.data()));
        wr.length = 16 << 10;
        wr.lkey = mra.lkey;
        wr.remote_addr = uint64_t(reinterpret_cast<uintptr_t>(mb.data() + size_t(k) * (16 << 10)));
        wr.rkey = mrb.rkey;
        REQUIRE(a.post_send(ca[size_t(busy[k])], 7, wr) == Status::ok);
    }
    int done = 0;
    REQUIRE(link.run(
        [&] {
            Completion c[8];
            for (size_t i = 0, n = a.poll_cq(cqa, c, 8); i < n; ++i) {
                CHECK(c[i].status == WcStatus::success);
                ++done;
            }
            return done == 3;
        },
        2'000'000'000));
    CHECK(std::memcmp(mb.data(), ma.data(), 48 << 10) == 0);
    link.loss = 0;

    // An idle one closes when asked, on both sides; the others stay up.
    REQUIRE(a.disconnect(ca[42]) == Status::ok);
    REQUIRE(link.run([&] { return a.conn_state(ca[42]) == ConnState::closed && b.conn_state(cb[42]) == ConnState::closed; },
                     1'000'000'000));
    for (int i = 0; i < kConns; ++i)
        if (i != 42) CHECK(a.conn_state(ca[size_t(i)]) == ConnState::established);
}

// R-CONN-13: closed connections are released, not kept: a server that
// accepts, serves and closes connection after connection holds only the
// ones still open, and a released connection's late packets land nowhere.
TEST_CASE("released connections free their slots; late packets of a released one are dropped and counted",
          "[engine][conns][release]") {
    const bool offload = GENERATE(false, true);
    SmallPair sp(offload);
    Engine &a = sp.a, &b = sp.b;
    std::vector<uint8_t>&ma = sp.ma, &mb = sp.mb;
    const uint32_t pda = sp.pda, pdb = sp.pdb, cqa = sp.cqa, cqb = sp.cqb;
    const MrInfo &mra = sp.mra, &mrb = sp.mrb;
    PairLink link(a, b, 5);
    if (offload) {
        link.enable_cc_stage(0);
        link.enable_cc_stage(1);
    }
    link.loss = 0.02;
    std::vector<uint8_t> captured;  // one DATA datagram of the first connection, A to B
    link.drop_if = [&](int from, const TxPacket& p) {
        if (from == 0 && captured.empty() && p.payload_len > 0) {
            captured.assign(p.hdr, p.hdr + p.hdr_len);
            captured.insert(captured.end(), p.payload, p.payload + p.payload_len);
        }
        return false;
    };

    constexpr int kCycles = 40;
    std::vector<uint32_t> ids_a, ids_b;
    for (int cyc = 0; cyc < kCycles; ++cyc) {
        uint32_t ca = 0, cb = 0;
        REQUIRE(a.connect(1, ca) == Status::ok);
        REQUIRE(link.run(
            [&] {
                ConnEvent ev[8];
                for (size_t n; (n = b.poll_events(ev, 8)) > 0;)
                    for (size_t i = 0; i < n; ++i)
                        if (ev[i].kind == EventKind::incoming) cb = ev[i].conn;
                return cb != 0 && a.conn_state(ca) == ConnState::established;
            },
            1'000'000'000));
        ConnEvent drain[8];
        while (a.poll_events(drain, 8) > 0) {}
        ids_a.push_back(ca);
        ids_b.push_back(cb);
        REQUIRE(a.create_stream(ca, 3, pda, cqa, cqa) == Status::ok);
        REQUIRE(b.create_stream(cb, 3, pdb, cqb, cqb) == Status::ok);
        // Every cycle moves its own bytes through the reused slot.
        for (size_t i = 0; i < 8192; ++i) ma[i] = uint8_t(cyc * 7 + i);
        SendWr wr;
        wr.wr_id = uint64_t(cyc);
        wr.op = OpKind::write;
        wr.local_addr = uint64_t(reinterpret_cast<uintptr_t>(ma.data()));
        wr.length = 8192;
        wr.lkey = mra.lkey;
        wr.remote_addr = uint64_t(reinterpret_cast<uintptr_t>(mb.data()));
        wr.rkey = mrb.rkey;
        REQUIRE(a.post_send(ca, 3, wr) == Status::ok);
        bool done = false;
        REQUIRE(link.run(
            [&] {
                Completion c[4];
                for (size_t i = 0, n = a.poll_cq(cqa, c, 4); i < n; ++i) {
                    CHECK(c[i].status == WcStatus::success);
                    CHECK(c[i].wr_id == uint64_t(cyc));
                    done = true;
                }
                return done;
            },
            2'000'000'000));
        REQUIRE(std::memcmp(mb.data(), ma.data(), 8192) == 0);
        // Still open: release is refused and changes nothing.
        CHECK(a.release_conn(ca) == Status::bad_state);
        CHECK(a.conn_state(ca) == ConnState::established);
        REQUIRE(a.disconnect(ca) == Status::ok);
        REQUIRE(link.run(
            [&] { return a.conn_state(ca) == ConnState::closed && b.conn_state(cb) == ConnState::closed; },
            1'000'000'000));
        ConnStats st;
        CHECK(a.conn_stats(ca, st) == Status::ok);  // a closed connection keeps its figures until released
        CHECK(a.release_conn(ca) == Status::ok);
        CHECK(b.release_conn(cb) == Status::ok);
        CHECK(a.release_conn(ca) == Status::no_such_object);
        CHECK(a.conn_stats(ca, st) == Status::no_such_object);
        CHECK(a.conn_count() == 0);
        CHECK(b.conn_count() == 0);
        // Let late acks, retransmissions and CC records of the released pair drain.
        link.run([] { return false; }, 20'000'000);
    }
    // Ids were never repeated although the slots were.
    for (size_t i = 0; i < ids_a.size(); ++i)
        for (size_t j = i + 1; j < ids_a.size(); ++j) {
            CHECK(ids_a[i] != ids_a[j]);
            CHECK(ids_b[i] != ids_b[j]);
        }

    // A late datagram of the first (released) connection is refused: no byte
    // placed, counted as from an unknown connection.
    REQUIRE(!captured.empty());
    std::fill(mb.begin(), mb.end(), uint8_t(0));
    const uint64_t unknown0 = b.stats().rx_unknown_conn;
    RxPacket r;
    r.data = captured.data();
    r.len = uint32_t(captured.size());
    r.peer = 0;
    b.rx_burst(&r, 1, link.now);
    CHECK(b.stats().rx_unknown_conn == unknown0 + 1);
    CHECK(std::all_of(mb.begin(), mb.end(), [](uint8_t v) { return v == 0; }));
}
