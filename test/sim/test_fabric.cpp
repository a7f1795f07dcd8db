// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Host polling, the event loop and determinism, with scripted endpoints.
#include <catch2/catch.hpp>

#include "sim_test_util.hpp"

using namespace simtest;

namespace {

LinkConfig byte_per_ns(Time delay = 1000) {
    LinkConfig c;
    c.rate_bps = 8'000'000'000;
    c.delay = delay;
    return c;
}

// Routes every packet over one link per (src, dst) direction pair created on demand.
void single_link_router(Fabric& fab, LinkId l) {
    fab.set_router([l](HostId, HostId, uint16_t, uint16_t, LinkId* out) -> size_t {
        out[0] = l;
        return 1;
    });
}

}  // namespace

TEST_CASE("tx_burst is called in bursts until it comes back short", "[sim][host]") {
    Fabric fab;
    ScriptedEndpoint a, b;
    const HostId ha = fab.add_host(a);
    const HostId hb = fab.add_host(b);
    single_link_router(fab, fab.add_link(byte_per_ns()));
    for (uint32_t i = 0; i < 100; ++i) a.outq.push_back(make_packet(hb, 100, i));
    fab.run_until(1'000'000);
    REQUIRE(a.tx_burst_sizes.size() >= 4);
    CHECK(a.tx_burst_sizes[0] == 32);
    CHECK(a.tx_burst_sizes[1] == 32);
    CHECK(a.tx_burst_sizes[2] == 32);
    CHECK(a.tx_burst_sizes[3] == 4);
    REQUIRE(b.rx.size() == 100);
    for (uint32_t i = 0; i < 100; ++i) CHECK(b.rx[i].tag == i);
    CHECK(fab.host_counters(ha).tx_packets == 100);
    CHECK(fab.host_counters(ha).tx_bytes == 10'000);
    CHECK(fab.host_counters(hb).rx_packets == 100);
}

TEST_CASE("simultaneous arrivals reach rx_burst together, in bursts", "[sim][host]") {
    Fabric fab;
    ScriptedEndpoint a, b;
    fab.add_host(a);
    const HostId hb = fab.add_host(b);
    std::vector<LinkId> links;
    for (int i = 0; i < 70; ++i) links.push_back(fab.add_link(byte_per_ns()));
    for (uint32_t i = 0; i < 70; ++i) {
        const LinkId route[] = {links[i]};
        fab.inject(0, make_packet(hb, 100, i), route);  // 70 packets, same arrival time
    }
    fab.run_until(1'000'000);
    REQUIRE(b.rx_burst_sizes == std::vector<size_t>{32, 32, 6});
    CHECK(fab.host_counters(hb).polls >= 1);
}

TEST_CASE("rx_coalesce gathers arrivals spread in time into one poll", "[sim][host]") {
    Fabric fab;
    ScriptedEndpoint a, b;
    fab.add_host(a);
    HostConfig hc;
    hc.rx_coalesce = 1000;
    const HostId hb = fab.add_host(b, hc);
    const LinkId l = fab.add_link(byte_per_ns());
    for (uint32_t i = 0; i < 8; ++i) {
        const LinkId route[] = {l};
        fab.inject(0, make_packet(hb, 100, i), route);  // arrive at 1100, 1200, ..., 1800
    }
    fab.run_until(1'000'000);
    REQUIRE(b.rx_burst_sizes == std::vector<size_t>{8});
    CHECK(b.rx[0].t == 1100 + 1000);
}

TEST_CASE("next_deadline wakes the host without input", "[sim][host]") {
    Fabric fab;
    ScriptedEndpoint a, b;
    fab.add_host(a);
    const HostId hb = fab.add_host(b);
    single_link_router(fab, fab.add_link(byte_per_ns(0)));
    a.outq.push_back(make_packet(hb, 100, 1));
    a.release_at = 5000;
    fab.run_until(1'000'000);
    REQUIRE(b.rx.size() == 1);
    CHECK(b.rx[0].t == 5100);
    // Polled at 0 (added), and at the deadline; nothing in between.
    CHECK(a.tx_burst_times == std::vector<Time>{0, 5000});
}

TEST_CASE("a far deadline is not duplicated in the event queue by every delivery", "[sim][host]") {
    Fabric fab;
    ScriptedEndpoint a, b;
    b.deadline = 1'000'000'000;  // like an idle-connection timer
    fab.add_host(a);
    const HostId hb = fab.add_host(b);
    const LinkId l = fab.add_link(LinkConfig{});
    for (uint32_t i = 0; i < 1000; ++i) {
        const LinkId route[] = {l};
        fab.inject(0, make_packet(hb, 100, i), route);
        fab.run_for(1000);
        CHECK(fab.events_pending() <= 2);  // b's one deadline, at most one packet
    }
    fab.run_for(10'000);
    CHECK(b.rx.size() == 1000);
    CHECK(fab.host_counters(hb).polls >= 1000);
    fab.run_until(2'000'000'000);
    CHECK(b.tx_burst_times.back() == 1'000'000'000);
}

TEST_CASE("a deadline not in the future cannot spin the clock in place", "[sim][host]") {
    struct Stuck : ScriptedEndpoint {
        Time next_deadline(Time now) override { return now; }
    } a;
    Fabric fab;
    const HostId ha = fab.add_host(a);
    fab.run_until(100);
    CHECK(fab.now() == 100);
    CHECK(fab.host_counters(ha).deadline_spins >= 100);
}

TEST_CASE("the wire is a copy made at transmit time", "[sim][host]") {
    struct Capture : Endpoint {
        std::vector<uint8_t> bytes;
        void rx_burst(const RxPacket* pkts, size_t n, Time) override {
            for (size_t i = 0; i < n; ++i) bytes.assign(pkts[i].data, pkts[i].data + pkts[i].len);
        }
        size_t tx_burst(TxPacket*, size_t, Time) override { return 0; }
        Time next_deadline(Time) override { return kNever; }
    } capture;
    Fabric fab;
    ScriptedEndpoint a;
    fab.add_host(a);
    const HostId hc = fab.add_host(capture);
    single_link_router(fab, fab.add_link(byte_per_ns(10'000)));
    static uint8_t app_memory[1000];
    std::memset(app_memory, 0xAB, sizeof app_memory);
    TxPacket p = make_packet(hc, 0, 77);
    p.payload = app_memory;
    p.payload_len = sizeof app_memory;
    a.outq.push_back(p);
    fab.run_until(5'000);  // sent, still on the wire
    std::memset(app_memory, 0xCD, sizeof app_memory);
    fab.run_until(100'000);
    REQUIRE(capture.bytes.size() == 16 + 1000);
    uint32_t tag;
    std::memcpy(&tag, capture.bytes.data(), 4);
    CHECK(tag == 77);
    for (size_t i = 16; i < capture.bytes.size(); ++i) REQUIRE(capture.bytes[i] == 0xAB);
}

TEST_CASE("run_until(pred) stops at the event that satisfies it", "[sim][fabric]") {
    Fabric fab;
    ScriptedEndpoint a, b;
    fab.add_host(a);
    const HostId hb = fab.add_host(b);
    single_link_router(fab, fab.add_link(byte_per_ns(1000)));
    for (uint32_t i = 0; i < 10; ++i) a.outq.push_back(make_packet(hb, 1000, i));
    CHECK(fab.run_until([&] { return b.rx.size() >= 3; }, 1'000'000));
    CHECK(fab.now() == 4000);
    CHECK(b.rx.size() == 3);
    CHECK_FALSE(fab.run_until([&] { return b.rx.size() >= 100; }, 50'000));
    CHECK(fab.now() == 50'000);
    CHECK(b.rx.size() == 10);
}

TEST_CASE("scheduled actions run at their time, in order", "[sim][fabric]") {
    Fabric fab;
    std::vector<std::pair<Time, int>> log;
    fab.at(300, [&] { log.emplace_back(fab.now(), 3); });
    fab.at(100, [&] { log.emplace_back(fab.now(), 1); });
    fab.at(100, [&] { log.emplace_back(fab.now(), 2); });
    fab.at(200, [&] { fab.at(250, [&] { log.emplace_back(fab.now(), 4); }); });
    fab.run_until(1000);
    CHECK(log == std::vector<std::pair<Time, int>>{{100, 1}, {100, 2}, {250, 4}, {300, 3}});
    CHECK_THROWS(fab.at(10, [] {}));
}

TEST_CASE("unroutable packets and unknown peers are counted, not delivered", "[sim][fabric]") {
    Fabric fab;
    ScriptedEndpoint a, b;
    const HostId ha = fab.add_host(a);
    const HostId hb = fab.add_host(b);
    a.outq.push_back(make_packet(hb, 100, 1));  // no router yet
    a.outq.push_back(make_packet(57, 100, 2));
    fab.run_until(10'000);
    CHECK(fab.host_counters(ha).drop_no_route == 1);
    CHECK(fab.host_counters(ha).drop_bad_peer == 1);
    CHECK(b.rx.empty());
    CHECK(fab.packets_in_flight() == 0);
}

TEST_CASE("NIC model: serialized at NIC rate with backpressure, no drops", "[sim][host]") {
    Fabric fab;
    ScriptedEndpoint a, b;
    HostConfig hc;
    hc.nic_rate_bps = 8'000'000'000;
    hc.nic_ring_bytes = 8000;
    const HostId ha = fab.add_host(a, hc);
    const HostId hb = fab.add_host(b);
    LinkConfig fast;
    fast.rate_bps = 800'000'000'000;
    fast.delay = 0;
    fast.capacity_bytes = 4000;  // would overflow if the host dumped everything at once
    single_link_router(fab, fab.add_link(fast));
    for (uint32_t i = 0; i < 200; ++i) a.outq.push_back(make_packet(hb, 1000, i));
    // The NIC holds at most the ring plus one burst.
    fab.run_until(1000);
    CHECK(fab.host_counters(ha).tx_packets <= 8 + 32 + 1);
    fab.run_until(10'000'000);
    REQUIRE(b.rx.size() == 200);
    CHECK(b.rx[0].t == 1000 + 10);
    CHECK(b.rx[199].t == 200'000 + 10);
    CHECK(fab.host_counters(ha).nic_stalls > 0);
    const LinkId nic = fab.nic_link(ha);
    REQUIRE(nic != kNoLink);
    CHECK(fab.link(nic).counters().tx_packets == 200);
    CHECK(fab.link(nic).counters().drops() == 0);
    CHECK(fab.nic_link(hb) == kNoLink);
}

namespace {

uint64_t trace_hash(uint64_t seed) {
    Fabric fab(seed);
    std::vector<std::unique_ptr<WindowEndpoint>> eps;
    std::vector<HostId> senders;
    const HostId receiver = 4;
    for (HostId h = 0; h < 4; ++h) {
        eps.push_back(std::make_unique<WindowEndpoint>(receiver, 32, 2000, 4));
        senders.push_back(fab.add_host(*eps.back()));
    }
    WindowEndpoint sink(0, 0, 0, 1);
    fab.add_host(sink);
    StarConfig sc;
    sc.access.loss = 0.01;
    sc.access.jitter = 300;
    sc.bottleneck.rate_bps = 25'000'000'000;
    sc.bottleneck.capacity_bytes = 64 * 1024;
    sc.bottleneck.ecn_threshold_bytes = 16 * 1024;
    sc.bottleneck.duplicate = 0.001;
    build_star(fab, senders, receiver, sc);
    uint64_t h = 0xcbf29ce484222325ull;
    auto mix = [&h](uint64_t v) {
        h ^= v;
        h *= 0x100000001b3ull;
    };
    uint64_t events = 0;
    fab.set_trace([&](const TraceEvent& e) {
        ++events;
        mix(e.time);
        mix(uint64_t(e.kind));
        mix(e.link);
        mix(uint64_t(e.src) << 32 | e.dst);
        mix(uint64_t(e.path) << 32 | uint64_t(e.entropy) << 16 | e.ce);
        mix(e.len);
    });
    fab.run_until(50'000'000);
    CHECK(events > 10'000);
    CHECK(sink.received > 4000);
    mix(fab.events_processed());
    return h;
}

}  // namespace

TEST_CASE("same seed, same event trace; another seed, another trace", "[sim][fabric]") {
    const uint64_t first = trace_hash(42);
    CHECK(trace_hash(42) == first);
    CHECK(trace_hash(43) != first);
}
