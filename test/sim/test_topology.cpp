// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Topology builders: which links each packet takes.
#include <catch2/catch.hpp>

#include "sim_test_util.hpp"

using namespace simtest;

TEST_CASE("pair: path index picks the path, control uses path 0", "[sim][topology]") {
    Fabric fab;
    ScriptedEndpoint a, b;
    const HostId ha = fab.add_host(a);
    const HostId hb = fab.add_host(b);
    PairConfig pc;
    pc.paths = 4;
    pc.per_path.resize(4);
    for (int i = 0; i < 4; ++i) pc.per_path[i].delay = Time(1000 * (i + 1));
    const PairTopology t = build_pair(fab, ha, hb, pc);
    REQUIRE(t.forward.size() == 4);
    REQUIRE(t.reverse.size() == 4);

    // Sent in path order 3, 2, 1, 0 at the same time: arrive 0, 1, 2, 3 (per-path delay reorders).
    for (uint16_t p = 4; p-- > 0;) a.outq.push_back(make_packet(hb, 100, p, 1, p));
    a.outq.push_back(make_packet(hb, 100, 99, 0, kControlPathIndex));
    a.outq.push_back(make_packet(hb, 100, 6, 1, 6));  // 6 mod 4 = path 2
    b.outq.push_back(make_packet(ha, 100, 50, 1, 1));
    fab.run_until(1'000'000);
    REQUIRE(b.rx.size() == 6);
    CHECK(b.rx[0].tag == 0);
    CHECK(b.rx[1].tag == 99);
    CHECK(b.rx[5].tag == 3);
    CHECK(fab.link(t.forward[0]).counters().tx_packets == 2);
    CHECK(fab.link(t.forward[2]).counters().tx_packets == 2);
    CHECK(fab.link(t.forward[3]).counters().tx_packets == 1);
    CHECK(fab.link(t.reverse[1]).counters().tx_packets == 1);
    REQUIRE(a.rx.size() == 1);
    CHECK(a.rx[0].t == 100 * 8 / 100 + 2000);  // 100 B at the default 100 Gbit/s, 2 us on path 1

    SECTION("failing one path drops only that path, both directions") {
        t.set_path_up(fab, 1, false);
        for (uint16_t p = 0; p < 4; ++p) a.outq.push_back(make_packet(hb, 100, 10 + p, 1, p));
        b.outq.push_back(make_packet(ha, 100, 51, 1, 1));
        fab.run_until(2'000'000);
        CHECK(b.rx.size() == 9);
        CHECK(a.rx.size() == 1);
        CHECK(fab.link(t.forward[1]).counters().drop_down == 1);
        CHECK(fab.link(t.reverse[1]).counters().drop_down == 1);
        t.set_path_up(fab, 1, true);
        a.outq.push_back(make_packet(hb, 100, 20, 1, 1));
        fab.run_until(3'000'000);
        CHECK(b.rx.size() == 10);
    }
}

TEST_CASE("star: incast shares the bottleneck queue, where ECN marks", "[sim][topology]") {
    Fabric fab;
    std::vector<std::unique_ptr<ScriptedEndpoint>> eps;
    std::vector<HostId> senders;
    for (int i = 0; i < 8; ++i) {
        eps.push_back(std::make_unique<ScriptedEndpoint>());
        senders.push_back(fab.add_host(*eps.back()));
    }
    ScriptedEndpoint rx;
    const HostId hr = fab.add_host(rx);
    StarConfig sc;
    sc.access.rate_bps = 100'000'000'000;
    sc.bottleneck.rate_bps = 100'000'000'000;
    sc.bottleneck.ecn_threshold_bytes = 20'000;
    sc.bottleneck.capacity_bytes = 100'000;
    const StarTopology t = build_star(fab, senders, hr, sc);
    CHECK(t.access.size() == 8);
    for (auto& ep : eps)
        for (uint32_t i = 0; i < 20; ++i) ep->outq.push_back(make_packet(hr, 1000, i));
    rx.outq.push_back(make_packet(senders[3], 64, 7, 0));
    eps[0]->outq.push_back(make_packet(senders[5], 64, 8, 0));
    fab.run_until(10'000'000);
    const auto& bn = fab.link(t.bottleneck).counters();
    CHECK(bn.tx_packets + bn.drop_queue == 160);
    CHECK(bn.drop_queue > 0);     // 8 x 20 KB into a 100 KB queue at line rate
    CHECK(bn.ce_marks > 0);
    CHECK(bn.max_queue_bytes > 20'000);
    for (LinkId l : t.access) CHECK(fab.link(l).counters().ce_marks == 0);
    CHECK(rx.rx.size() == bn.tx_packets);
    REQUIRE(eps[3]->rx.size() == 1);  // receiver -> sender: uplink, downlink
    CHECK(eps[3]->rx[0].tag == 7);
    REQUIRE(eps[5]->rx.size() == 1);  // sender -> sender: access, downlink
    CHECK(fab.link(t.uplink).counters().tx_packets == 1);
    CHECK(fab.link(t.downlink[5]).counters().tx_packets == 1);
}

TEST_CASE("planes: path mod P picks the plane, entropy spreads over spines", "[sim][topology]") {
    Fabric fab(5);
    ScriptedEndpoint a, b, c;
    std::vector<HostId> hosts = {fab.add_host(a), fab.add_host(b), fab.add_host(c)};
    PlanesConfig pc;
    pc.planes = 4;
    pc.spines = 4;
    pc.hosts_per_leaf = 2;  // a and b share a leaf, c is on another
    const PlanesTopology t = build_planes(fab, hosts, pc);
    CHECK(t.leaves == 2);
    CHECK(t.up.size() == 12);
    CHECK(t.leaf_spine.size() == 4 * 2 * 4);

    constexpr int n = 4000;
    for (int i = 0; i < n; ++i)
        a.outq.push_back(make_packet(hosts[2], 100, uint32_t(i), 1, uint16_t(i % 8), uint16_t(i)));
    fab.run_until(10'000'000);
    REQUIRE(c.rx.size() == n);
    for (uint16_t p = 0; p < 4; ++p) {
        CHECK(fab.link(t.up[0 * 4 + p]).counters().tx_packets == n / 4);
        CHECK(fab.link(t.down[2 * 4 + p]).counters().tx_packets == n / 4);
        for (uint16_t s = 0; s < 4; ++s) {
            const auto& k = fab.link(t.leaf_spine[(p * 2 + 0) * 4 + s]).counters();
            CHECK(k.tx_packets > n / 16 / 2);  // ECMP spreads (binomial, mean 250)
            CHECK(k.tx_packets < n / 16 * 3 / 2);
        }
    }

    SECTION("one flow (fixed entropy) stays on one spine") {
        for (auto& l : t.leaf_spine) fab.link(l).reset_counters();
        for (int i = 0; i < 100; ++i) a.outq.push_back(make_packet(hosts[2], 100, 0, 1, 1, 777));
        fab.run_until(20'000'000);
        int spines_used = 0;
        for (uint16_t s = 0; s < 4; ++s)
            spines_used += fab.link(t.leaf_spine[(1 * 2 + 0) * 4 + s]).counters().tx_packets > 0;
        CHECK(spines_used == 1);
    }
    SECTION("same-leaf traffic does not touch the spines") {
        for (auto& l : t.leaf_spine) fab.link(l).reset_counters();
        a.outq.push_back(make_packet(hosts[1], 100, 0, 1, 0, 1));
        fab.run_until(20'000'000);
        CHECK(b.rx.size() == 1);
        for (auto& l : t.leaf_spine) CHECK(fab.link(l).counters().tx_packets == 0);
    }
    SECTION("a failed plane drops its traffic only") {
        t.set_plane_up(fab, 2, false);
        for (int i = 0; i < 400; ++i)
            a.outq.push_back(make_packet(hosts[2], 100, uint32_t(i), 1, uint16_t(i % 4), uint16_t(i)));
        fab.run_until(20'000'000);
        CHECK(c.rx.size() == n + 300);
        CHECK(fab.link(t.up[0 * 4 + 2]).counters().drop_down == 100);
        t.set_plane_up(fab, 2, true);
        a.outq.push_back(make_packet(hosts[2], 100, 0, 1, 2, 3));
        fab.run_until(30'000'000);
        CHECK(c.rx.size() == n + 301);
    }
}
