// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Simultaneous connect (doc/spec.md R-CONN-14, R-CONN-1): two endpoints that
// connect to each other at the same moment end up with one connection,
// whether their CONNECT_REQs cross, one of them is lost, copies are repeated
// and arrive late, or one end's connect() comes just after it accepted.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "stream_fixture.hpp"

using namespace mroce;
using mroce::test::fill_pattern;
using mroce::test::PairLink;
using mroce::test::StreamSide;

namespace {

bool is_type(const TxPacket& t, wire::PacketType ty) { return t.hdr_len > 1 && t.hdr[1] == uint8_t(ty); }

struct Events {
    size_t incoming = 0, established = 0, other = 0;
    void poll(Engine& e) {
        ConnEvent ev[8];
        for (size_t n; (n = e.poll_events(ev, 8)) > 0;)
            for (size_t i = 0; i < n; ++i) {
                if (ev[i].kind == EventKind::incoming) ++incoming;
                else if (ev[i].kind == EventKind::established) ++established;
                else ++other;
            }
    }
};

// Both ends call connect() before either has heard of the other; returns
// once both ids are ESTABLISHED and checks they name one connection.
struct Crossing {
    StreamSide a, b;
    PairLink link;
    uint32_t ca = 0, cb = 0;
    Events ea, eb;
    Crossing(const EngineConfig& cfg, uint64_t seed) : a(cfg, 1 << 20), b(cfg, 1 << 20), link(a.eng, b.eng, seed) {}

    void connect_both_and_post() {
        REQUIRE(a.eng.connect(1, ca) == Status::ok);
        REQUIRE(b.eng.connect(0, cb) == Status::ok);
        // Work posted while CONNECTING (R-CONN-12) on both sides: carried by the one connection.
        REQUIRE(a.eng.create_stream(ca, 3, a.attr()) == Status::ok);
        REQUIRE(b.eng.create_stream(cb, 3, b.attr()) == Status::ok);
        fill_pattern(a.mem, 0, 10000, 1);
        fill_pattern(b.mem, 0, 10000, 2);
        REQUIRE(b.eng.post_recv(cb, 3, b.recv(70, 500000, 8192)) == Status::ok);
        REQUIRE(a.eng.post_recv(ca, 3, a.recv(80, 500000, 8192)) == Status::ok);
        REQUIRE(a.eng.post_send(ca, 3, a.wr(1, OpKind::write, 0, 10000, b.addr(100000), b.mr.rkey)) == Status::ok);
        REQUIRE(a.eng.post_send(ca, 3, a.wr(2, OpKind::send, 0, 5000)) == Status::ok);
        REQUIRE(b.eng.post_send(cb, 3, b.wr(3, OpKind::write, 0, 10000, a.addr(100000), a.mr.rkey)) == Status::ok);
        REQUIRE(b.eng.post_send(cb, 3, b.wr(4, OpKind::send, 0, 6000)) == Status::ok);
    }
    void check_one_connection() {
        a.got.clear();
        b.got.clear();
        REQUIRE(link.run([&] {
            a.poll();
            b.poll();
            ea.poll(a.eng);
            eb.poll(b.eng);
            return a.got.size() >= 3 && b.got.size() >= 3;
        }, 3'000'000'000));
        CHECK(a.eng.conn_state(ca) == ConnState::established);
        CHECK(b.eng.conn_state(cb) == ConnState::established);
        CHECK(a.eng.conn_count() == 1);
        CHECK(b.eng.conn_count() == 1);
        ConnStats sa{}, sb{};
        REQUIRE(a.eng.conn_stats(ca, sa) == Status::ok);
        REQUIRE(b.eng.conn_stats(cb, sb) == Status::ok);
        CHECK(sa.remote_conn == cb);  // each end's id names the other's: one connection
        CHECK(sb.remote_conn == ca);
        CHECK(ea.incoming == 0);
        CHECK(eb.incoming == 0);
        CHECK(ea.established == 1);
        CHECK(eb.established == 1);
        for (const Completion& c : a.got) CHECK(c.status == WcStatus::success);
        for (const Completion& c : b.got) CHECK(c.status == WcStatus::success);
        CHECK(std::memcmp(a.mem.data(), b.mem.data() + 100000, 10000) == 0);
        CHECK(std::memcmp(b.mem.data(), a.mem.data() + 100000, 10000) == 0);
        CHECK(std::memcmp(a.mem.data(), b.mem.data() + 500000, 5000) == 0);
        CHECK(std::memcmp(b.mem.data(), a.mem.data() + 500000, 6000) == 0);
        // Late or repeated CONNECT_REQs create nothing.
        link.run([] { return false; }, 200'000'000);
        ea.poll(a.eng);
        eb.poll(b.eng);
        CHECK(a.eng.conn_count() == 1);
        CHECK(b.eng.conn_count() == 1);
        CHECK(ea.incoming + eb.incoming == 0);
        CHECK(ea.other + eb.other == 0);
    }
    // Whose attempt became the connection: A's if B is the passive end (B's id answered A's REQ).
    bool a_won() const { return a.eng.stats().connects_crossed > 0 && b.eng.stats().connects_crossed == 0; }
};

}  // namespace

TEST_CASE("connect: crossing CONNECT_REQs make one connection; both callers' ids name it (R-CONN-14)",
          "[engine][connect]") {
    int a_wins = 0;
    for (uint64_t seed = 1; seed <= 16; ++seed) {
        INFO("seed " << seed);
        EngineConfig cfg;
        Crossing x(cfg, seed);
        x.connect_both_and_post();
        x.check_one_connection();
        // Exactly one end dropped the other's REQ: the winner.
        CHECK((x.a.eng.stats().connects_crossed > 0) != (x.b.eng.stats().connects_crossed > 0));
        a_wins += x.a_won();
    }
    INFO("A's attempt won " << a_wins << " of 16 (random keys, R-CSN-2)");
    SUCCEED();
}

TEST_CASE("connect: simultaneous connect with one CONNECT_REQ lost (R-CONN-14, R-CONN-5)", "[engine][connect]") {
    const int lost_from = GENERATE(0, 1);
    for (uint64_t seed = 1; seed <= 8; ++seed) {
        INFO("seed " << seed << ", first REQ of " << (lost_from ? "B" : "A") << " lost");
        EngineConfig cfg;
        Crossing x(cfg, seed);
        bool dropped = false;
        x.link.drop_if = [&](int from, const TxPacket& t) {
            if (dropped || from != lost_from || !is_type(t, wire::PacketType::connect_req)) return false;
            dropped = true;
            return true;
        };
        x.connect_both_and_post();
        x.check_one_connection();
        CHECK(dropped);
    }
}

TEST_CASE("connect: simultaneous connect with repeated, duplicated and late CONNECT_REQs and lost ACKs "
          "(R-CONN-14, R-CONN-4)",
          "[engine][connect]") {
    for (uint64_t seed = 1; seed <= 8; ++seed) {
        INFO("seed " << seed);
        EngineConfig cfg;
        Crossing x(cfg, seed);
        x.link.dup = 0.3;  // every packet may arrive twice
        int acks = 0;
        uint64_t reqs = 0;
        // The first two CONNECT_ACKs are lost (REQs are repeated, R-CONN-5), and
        // every other CONNECT_REQ arrives 50 ms late, long after the handshake.
        x.link.drop_if = [&](int, const TxPacket& t) {
            return is_type(t, wire::PacketType::connect_ack) && acks++ < 2;
        };
        x.link.delay_if = [&](int, const TxPacket& t) -> Time {
            return is_type(t, wire::PacketType::connect_req) && (reqs++ % 2) ? 50'000'000 : 0;
        };
        x.connect_both_and_post();
        x.check_one_connection();
        CHECK(reqs >= 3);
        CHECK(x.a.eng.stats().connects_crossed + x.b.eng.stats().connects_crossed > 0);
    }
}

TEST_CASE("connect: a connect() just after accepting the peer's returns that connection (R-CONN-14)",
          "[engine][connect]") {
    EngineConfig cfg;
    StreamSide a(cfg, 1 << 20), b(cfg, 1 << 20);
    PairLink link(a.eng, b.eng, 3);
    // A's CONNECT_ACK is held back: B accepted, A is still CONNECTING when B connects.
    bool hold_ack = true;
    int reqs_from_b = 0;
    link.drop_if = [&](int from, const TxPacket& t) {
        if (from == 1 && is_type(t, wire::PacketType::connect_req)) ++reqs_from_b;
        return hold_ack && from == 1 && is_type(t, wire::PacketType::connect_ack);
    };
    uint32_t ca = 0, cb = 0;
    REQUIRE(a.eng.connect(1, ca) == Status::ok);
    REQUIRE(link.run([&] { return b.eng.conn_count() == 1; }, 100'000'000));
    CHECK(a.eng.conn_state(ca) == ConnState::connecting);
    REQUIRE(b.eng.connect(0, cb) == Status::ok);
    CHECK(b.eng.conn_count() == 1);  // no second connection, no CONNECT_REQ of B's
    CHECK(b.eng.conn_state(cb) == ConnState::established);
    hold_ack = false;
    REQUIRE(link.run([&] { return a.eng.conn_state(ca) == ConnState::established; }, 1'000'000'000));
    CHECK(reqs_from_b == 0);
    ConnStats sa{}, sb{};
    REQUIRE(a.eng.conn_stats(ca, sa) == Status::ok);
    REQUIRE(b.eng.conn_stats(cb, sb) == Status::ok);
    CHECK(sa.remote_conn == cb);
    CHECK(sb.remote_conn == ca);
    CHECK(a.eng.conn_count() == 1);
    CHECK(a.eng.stats().connects_crossed == 0);
    // Once: the next connect() opens a connection of its own.
    uint32_t cb2 = 0;
    REQUIRE(b.eng.connect(0, cb2) == Status::ok);
    CHECK(cb2 != cb);
    REQUIRE(link.run([&] { return b.eng.conn_state(cb2) == ConnState::established; }, 1'000'000'000));
    CHECK(a.eng.conn_count() == 2);
    CHECK(b.eng.conn_count() == 2);
}
