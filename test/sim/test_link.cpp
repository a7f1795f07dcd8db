// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Link behaviour, driving links directly with Fabric::inject.
#include <catch2/catch.hpp>

#include <cmath>

#include "sim_test_util.hpp"

using namespace simtest;

namespace {

struct TwoHosts {
    Fabric fab;
    ScriptedEndpoint a, b;
    HostId ha, hb;
    explicit TwoHosts(uint64_t seed = 1) : fab(seed) {
        ha = fab.add_host(a);
        hb = fab.add_host(b);
    }
    void send(LinkId l, uint32_t len, uint32_t tag, uint8_t ect = 1) {
        const LinkId route[] = {l};
        fab.inject(ha, make_packet(hb, len, tag, ect), route);
    }
};

LinkConfig byte_per_ns(Time delay = 1000) {
    LinkConfig c;
    c.rate_bps = 8'000'000'000;  // 1 byte per ns makes expected times easy to read
    c.delay = delay;
    return c;
}

}  // namespace

TEST_CASE("arrival = serialization (size*8/rate) + propagation, back to back", "[sim][link]") {
    TwoHosts t;
    const LinkId l = t.fab.add_link(byte_per_ns(1000));
    for (uint32_t i = 0; i < 3; ++i) t.send(l, 1000, i);
    t.fab.run_until(100'000);
    REQUIRE(t.b.rx.size() == 3);
    CHECK(t.b.rx[0].t == 2000);
    CHECK(t.b.rx[1].t == 3000);
    CHECK(t.b.rx[2].t == 4000);
    CHECK(t.b.rx[0].len == 1000);
    CHECK(t.b.rx[0].peer == t.ha);

    // An idle link starts serializing at once.
    t.fab.at(200'000, [&] { t.send(l, 500, 9); });
    t.fab.run_until(300'000);
    REQUIRE(t.b.rx.size() == 4);
    CHECK(t.b.rx[3].t == 200'000 + 500 + 1000);
    CHECK(t.fab.link(l).counters().tx_packets == 4);
    CHECK(t.fab.link(l).counters().tx_bytes == 3500);
    CHECK(t.fab.link(l).counters().delivered == 4);
}

TEST_CASE("serialization keeps sub-nanosecond precision across a long train", "[sim][link]") {
    TwoHosts t;
    LinkConfig c;
    c.rate_bps = 3'000'000'000;  // 1000 B = 2666.67 ns
    c.delay = 0;
    const LinkId l = t.fab.add_link(c);
    for (uint32_t i = 0; i < 300; ++i) t.send(l, 1000, i);
    t.fab.run_until(10'000'000);
    REQUIRE(t.b.rx.size() == 300);
    CHECK(t.b.rx[0].t == 2667);
    CHECK(t.b.rx[1].t == 5334);
    CHECK(t.b.rx[2].t == 8000);
    CHECK(t.b.rx[299].t == 800'000);  // 300 * 8000 bits / 3 Gbit/s exactly, no drift
}

TEST_CASE("multi-hop routes are store-and-forward", "[sim][link]") {
    TwoHosts t;
    const LinkId l1 = t.fab.add_link(byte_per_ns(100));
    LinkConfig slow = byte_per_ns(300);
    slow.rate_bps = 4'000'000'000;  // 2 ns per byte
    const LinkId l2 = t.fab.add_link(slow);
    const LinkId route[] = {l1, l2};
    t.fab.inject(t.ha, make_packet(t.hb, 1000, 1), route);
    t.fab.inject(t.ha, make_packet(t.hb, 1000, 2), route);
    t.fab.run_until(100'000);
    REQUIRE(t.b.rx.size() == 2);
    CHECK(t.b.rx[0].t == 1000 + 100 + 2000 + 300);
    // The second packet waits behind the first on the slower link.
    CHECK(t.b.rx[1].t == 1000 + 100 + 2000 + 2000 + 300);
    CHECK(t.fab.link(l2).counters().max_queue_bytes == 1000);
}

TEST_CASE("per-link framing overhead counts toward serialization and queue", "[sim][link]") {
    TwoHosts t;
    LinkConfig c = byte_per_ns(0);
    c.overhead_bytes = 50;
    const LinkId l = t.fab.add_link(c);
    t.send(l, 950, 1);
    t.fab.run_until(10'000);
    REQUIRE(t.b.rx.size() == 1);
    CHECK(t.b.rx[0].t == 1000);
    CHECK(t.b.rx[0].len == 950);  // the endpoint sees the datagram only
    CHECK(t.fab.link(l).counters().tx_bytes == 1000);
}

TEST_CASE("drop-tail at capacity", "[sim][link]") {
    TwoHosts t;
    LinkConfig c = byte_per_ns();
    c.capacity_bytes = 10'000;
    const LinkId l = t.fab.add_link(c);
    for (uint32_t i = 0; i < 20; ++i) t.send(l, 1000, i);
    t.fab.run_until(100'000);
    const auto& k = t.fab.link(l).counters();
    CHECK(k.tx_packets == 10);
    CHECK(k.drop_queue == 10);
    REQUIRE(t.b.rx.size() == 10);
    for (uint32_t i = 0; i < 10; ++i) CHECK(t.b.rx[i].tag == i);  // the tail is what is dropped

    // The queue drains: the same burst later is admitted the same way.
    for (uint32_t i = 0; i < 11; ++i) t.send(l, 1000, 100 + i);
    t.fab.run_until(200'000);
    CHECK(k.drop_queue == 11);
    CHECK(t.b.rx.size() == 20);

    // A packet that just fits is admitted; one byte more is not.
    TwoHosts u;
    LinkConfig d = byte_per_ns();
    d.capacity_bytes = 2500;
    const LinkId m = u.fab.add_link(d);
    u.send(m, 1000, 0);
    u.send(m, 1500, 1);
    u.send(m, 1, 2);
    u.fab.run_until(100'000);
    CHECK(u.fab.link(m).counters().tx_packets == 2);
    CHECK(u.fab.link(m).counters().drop_queue == 1);
}

TEST_CASE("ECN: CE on ECT packets that find the queue above the threshold", "[sim][link]") {
    TwoHosts t;
    LinkConfig c = byte_per_ns();
    c.ecn_threshold_bytes = 3000;
    const LinkId l = t.fab.add_link(c);
    for (uint32_t i = 0; i < 10; ++i) t.send(l, 1000, i, /*ect=*/1);
    t.fab.run_until(100'000);
    REQUIRE(t.b.rx.size() == 10);
    // Packet i finds i*1000 bytes queued: i = 4..9 are above 3000.
    for (uint32_t i = 0; i < 10; ++i) CHECK(t.b.rx[i].ce == (i >= 4 ? 1 : 0));
    CHECK(t.fab.link(l).counters().ce_marks == 6);

    SECTION("Not-ECT packets are never marked") {
        for (uint32_t i = 0; i < 10; ++i) t.send(l, 1000, 100 + i, /*ect=*/0);
        t.fab.run_until(200'000);
        REQUIRE(t.b.rx.size() == 20);
        for (uint32_t i = 10; i < 20; ++i) CHECK(t.b.rx[i].ce == 0);
        CHECK(t.fab.link(l).counters().ce_marks == 6);
    }
    SECTION("threshold changes at run time") {
        t.fab.link(l).set_ecn_threshold(0);
        for (uint32_t i = 0; i < 3; ++i) t.send(l, 1000, 100 + i);
        t.fab.run_until(200'000);
        REQUIRE(t.b.rx.size() == 13);
        CHECK(t.b.rx[10].ce == 0);  // empty queue is not above 0
        CHECK(t.b.rx[11].ce == 1);
        CHECK(t.b.rx[12].ce == 1);
    }
}

TEST_CASE("ECN: a RED-style ramp marks with a probability rising from ecn_min to ecn_max", "[sim][link]") {
    TwoHosts t;
    LinkConfig c = byte_per_ns();
    c.ecn_threshold_bytes = 0;  // ignored while the ramp is set
    c.ecn_min_bytes = 10'000;
    c.ecn_max_bytes = 30'000;
    c.ecn_pmax = 0.5;
    const LinkId l = t.fab.add_link(c);
    // Bursts of 40: packet i finds i * 1000 bytes queued.
    constexpr uint32_t kRounds = 200;
    for (uint32_t r = 0; r < kRounds; ++r) {
        for (uint32_t i = 0; i < 40; ++i) t.send(l, 1000, r * 40 + i);
        t.fab.run_until((r + 1) * 100'000);
    }
    REQUIRE(t.b.rx.size() == kRounds * 40);
    std::vector<uint32_t> marks(40, 0);
    for (const Received& x : t.b.rx) marks[x.tag % 40] += x.ce;
    for (uint32_t i = 0; i <= 10; ++i) CHECK(marks[i] == 0);        // at or below ecn_min: never
    for (uint32_t i = 30; i < 40; ++i) CHECK(marks[i] == kRounds);  // from ecn_max: always
    // Between, p = 0.5 (q - 10000) / 20000: 0.25 on average over i = 11..29.
    uint32_t ramp = 0, low = 0, high = 0;
    for (uint32_t i = 11; i < 30; ++i) ramp += marks[i];
    for (uint32_t i = 11; i < 16; ++i) low += marks[i];
    for (uint32_t i = 25; i < 30; ++i) high += marks[i];
    const double frac = double(ramp) / (19.0 * kRounds);
    INFO("ramp fraction " << frac << ", low " << low << ", high " << high);
    CHECK(frac > 0.2);
    CHECK(frac < 0.3);
    CHECK(high > 2 * low);
    CHECK(t.fab.link(l).counters().ce_marks == ramp + 10 * kRounds);
    // Back to the threshold (0 here: everything that finds a queue), and a bad ramp refused.
    t.fab.link(l).set_ecn_ramp(0, 0, 1);
    for (uint32_t i = 0; i < 3; ++i) t.send(l, 1000, i);
    t.fab.run_until((kRounds + 1) * 100'000);
    CHECK(t.b.rx.back().ce == 1);
    CHECK_THROWS_AS(t.fab.link(l).set_ecn_ramp(5000, 5000, 0.5), std::invalid_argument);
    CHECK_THROWS_AS(t.fab.link(l).set_ecn_ramp(0, 5000, 0), std::invalid_argument);
}

TEST_CASE("CE set on an earlier hop survives later hops", "[sim][link]") {
    TwoHosts t;
    LinkConfig marking = byte_per_ns();
    marking.ecn_threshold_bytes = 0;
    const LinkId l1 = t.fab.add_link(marking);
    const LinkId l2 = t.fab.add_link(byte_per_ns());
    const LinkId route[] = {l1, l2};
    t.fab.inject(t.ha, make_packet(t.hb, 1000, 0), route);
    t.fab.inject(t.ha, make_packet(t.hb, 1000, 1), route);
    t.fab.run_until(100'000);
    REQUIRE(t.b.rx.size() == 2);
    CHECK(t.b.rx[0].ce == 0);
    CHECK(t.b.rx[1].ce == 1);
    CHECK(t.fab.link(l2).counters().ce_marks == 0);
}

TEST_CASE("queue depth statistics", "[sim][link]") {
    TwoHosts t;
    const LinkId l = t.fab.add_link(byte_per_ns());
    for (uint32_t i = 0; i < 10; ++i) t.send(l, 1000, i);
    t.fab.run_until(5'500);
    CHECK(t.fab.link(l).queue_bytes() == 5000);  // five sent; the sixth, half-way out, still counts
    t.fab.run_until(100'000);
    const auto& k = t.fab.link(l).counters();
    CHECK(k.max_queue_bytes == 9000);
    CHECK(k.mean_queue_bytes() == Approx(4500.0));
    CHECK(t.fab.link(l).queue_bytes() == 0);
    t.fab.link(l).reset_counters();
    CHECK(k.tx_packets == 0);
}

TEST_CASE("random loss rate is within statistical bounds and seed-determined", "[sim][link]") {
    static constexpr uint32_t n = 100'000;
    auto run = [](uint64_t seed, double p) {
        TwoHosts t(seed);
        LinkConfig c = byte_per_ns(10);
        c.loss = p;
        const LinkId l = t.fab.add_link(c);
        for (uint32_t i = 0; i < n; ++i) {
            t.send(l, 100, i);
            t.fab.run_for(100);  // no queueing: loss is the only cause
        }
        t.fab.run_for(10'000);
        const auto& k = t.fab.link(l).counters();
        CHECK(k.drop_queue == 0);
        CHECK(k.drop_loss + t.b.rx.size() == n);
        CHECK(k.delivered == t.b.rx.size());
        return k.drop_loss;
    };
    for (double p : {0.01, 0.1, 0.5}) {
        const uint64_t lost = run(7, p);
        const double sigma = std::sqrt(n * p * (1 - p));
        CHECK(std::abs(double(lost) - n * p) < 5 * sigma);
        CHECK(run(7, p) == lost);
    }
    CHECK(run(7, 0.1) != run(8, 0.1));
    CHECK(run(7, 0.0) == 0);
    CHECK(run(7, 1.0) == n);
}

TEST_CASE("duplication delivers extra copies at the configured rate", "[sim][link]") {
    constexpr uint32_t n = 50'000;
    TwoHosts t(3);
    LinkConfig c = byte_per_ns(10);
    c.duplicate = 0.05;
    const LinkId l = t.fab.add_link(c);
    for (uint32_t i = 0; i < n; ++i) {
        t.send(l, 100, i);
        t.fab.run_for(200);
    }
    t.fab.run_for(10'000);
    const auto& k = t.fab.link(l).counters();
    CHECK(t.b.rx.size() == n + k.duplicates);
    const double sigma = std::sqrt(n * 0.05 * 0.95);
    CHECK(std::abs(double(k.duplicates) - n * 0.05) < 5 * sigma);
    // A duplicate is a byte-identical copy right behind its original.
    for (size_t i = 1; i < t.b.rx.size(); ++i) CHECK(t.b.rx[i].tag >= t.b.rx[i - 1].tag);
    CHECK(t.fab.packets_in_flight() == 0);
}

TEST_CASE("a down link drops everything, including packets already queued", "[sim][link]") {
    TwoHosts t;
    const LinkId l = t.fab.add_link(byte_per_ns(1000));
    t.fab.link(l).set_up(false);
    for (uint32_t i = 0; i < 5; ++i) t.send(l, 1000, i);
    t.fab.run_until(50'000);
    CHECK(t.b.rx.empty());
    CHECK(t.fab.link(l).counters().drop_down == 5);

    t.fab.link(l).set_up(true);
    t.fab.link(l).reset_counters();
    // Five packets queued at 50 us: finishing at +1..+5 us, arriving +1 us later.
    for (uint32_t i = 0; i < 5; ++i) t.send(l, 1000, 10 + i);
    t.fab.at(52'500, [&] { t.fab.link(l).set_up(false); });  // one delivered, one on the wire, three queued
    t.fab.at(52'600, [&] { t.fab.link(l).set_up(true); });
    t.fab.at(52'700, [&] { t.send(l, 1000, 20); });
    t.fab.run_until(100'000);
    REQUIRE(t.b.rx.size() == 2);
    CHECK(t.b.rx[0].tag == 10);
    CHECK(t.b.rx[0].t == 52'000);
    CHECK(t.b.rx[1].tag == 20);
    CHECK(t.b.rx[1].t == 52'700 + 1000 + 1000);  // the failure emptied the queue
    CHECK(t.fab.link(l).counters().drop_down == 4);
    CHECK(t.fab.packets_in_flight() == 0);
}

TEST_CASE("jitter delays without reordering unless allowed", "[sim][link]") {
    auto run = [](bool reorders) {
        TwoHosts t(11);
        LinkConfig c = byte_per_ns(1000);
        c.jitter = 5000;
        c.jitter_reorders = reorders;
        const LinkId l = t.fab.add_link(c);
        for (uint32_t i = 0; i < 2000; ++i) t.send(l, 100, i);
        t.fab.run_until(10'000'000);
        REQUIRE(t.b.rx.size() == 2000);
        size_t inversions = 0;
        for (size_t i = 1; i < t.b.rx.size(); ++i) inversions += t.b.rx[i].tag < t.b.rx[i - 1].tag;
        Time extra_max = 0;
        for (size_t i = 0; i < t.b.rx.size(); ++i) {
            const Time base = (t.b.rx[i].tag + 1) * 100 + 1000;
            CHECK(t.b.rx[i].t >= base);
            if (reorders) extra_max = std::max(extra_max, t.b.rx[i].t - base);
        }
        if (reorders) CHECK(extra_max <= 5000);
        return inversions;
    };
    CHECK(run(false) == 0);
    CHECK(run(true) > 100);
}
