// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Congestion control end to end: real engines on the simulated fabric
// (doc/spec.md 9.2 R-CC-*, 9.3 R-HINT-*, 9.4 R-SCHED-*). Every figure is
// measured on the receiver (placed bytes) or on the fabric's links.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "cc_harness.hpp"

using namespace cctest;

namespace {

constexpr uint64_t kGbps = 1'000'000'000;

struct IncastResult {
    Time base_rtt = 0;
    double jain_early = 0;        // window starting at 3 base RTTs
    Time time_to_fair = kNever;   // first window start (since start) with Jain >= 0.99
    double total_gbps = 0;        // all senders, steady state
    uint64_t max_queue_early = 0; // bottleneck, from start to 3 RTTs (the initial windows)
    uint64_t max_queue_steady = 0;// bottleneck, after 3 RTTs
    uint64_t max_queue_late = 0;  // bottleneck, second half of the run
    uint64_t drops = 0;
    uint64_t ce = 0;
    std::vector<double> early_rates;
};

// 16 backlogged senders, one receiver, one shared 100 Gbit/s bottleneck
// queue that marks CE above ecn_threshold.
constexpr int kSenders = 16;
constexpr Time kHop = 5'000;               // propagation per link
constexpr uint64_t kEcnK = 64 << 10;
constexpr Time kWindow = 200'000;          // measurement window

// With paths = 1 and init_cwnd = 8 the first flights (16 x 8 packets) are
// about two bandwidth-delay products. With the defaults (4 paths x 32) they
// are 33 BDPs (8 MiB): see the default-window tests below.
IncastResult run_incast(bool hints, bool unequal_rtts, uint16_t paths = 1, double init_cwnd = 8,
                        bool offload_cc = false) {
    EngineConfig cfg;
    cfg.offload_cc = offload_cc;
    cfg.num_paths = paths;
    cfg.cc.init_cwnd = init_cwnd;
    cfg.rate_hints = hints;
    // R-HINT-3: capacity net of headroom, so paced senders drain a queue.
    cfg.rx_capacity_mbps = 95'000;
    Fabric fab(11);
    std::vector<std::unique_ptr<Node>> tx;
    std::vector<HostId> ids;
    for (int i = 0; i < kSenders; ++i) {
        tx.push_back(std::make_unique<Node>(cfg, 256 << 10));
        tx.back()->host = fab.add_host(tx.back()->eng);
        ids.push_back(tx.back()->host);
    }
    Node rx(cfg, size_t(kSenders) * (256 << 10));
    rx.host = fab.add_host(rx.eng);
    StarConfig sc;
    sc.access.rate_bps = 100 * kGbps;
    sc.access.delay = kHop;
    sc.bottleneck.rate_bps = 100 * kGbps;
    sc.bottleneck.delay = kHop;
    sc.bottleneck.capacity_bytes = 16 << 20;
    sc.bottleneck.ecn_threshold_bytes = kEcnK;
    sc.reverse.rate_bps = 100 * kGbps;
    sc.reverse.delay = kHop;
    const StarTopology topo = build_star(fab, ids, rx.host, sc);
    // Senders at different distances: window-based shares favour short RTTs.
    if (unequal_rtts)
        for (int i = 0; i < kSenders; ++i) fab.link(topo.access[i]).set_delay(kHop / 5 + Time(i) * kHop / 5);

    std::vector<Flow> flows(kSenders);
    for (int i = 0; i < kSenders; ++i) {
        flows[i].src = tx[i].get();
        flows[i].dst = &rx;
        flows[i].dst_off = size_t(i) * (256 << 10);
    }
    REQUIRE(connect_all(fab, flows, 100'000'000));
    fab.run_for(1'000'000);  // handshake traffic gone

    IncastResult r;
    // Two link delays each way plus serialization of one data packet per hop.
    r.base_rtt = 4 * kHop + 2 * (4168 * 8 * 1'000'000'000ull / (100 * kGbps));
    Link& bn = fab.link(topo.bottleneck);
    bn.reset_counters();
    const Time start = fab.now();
    // Senders arrive spread over one base RTT, as an incast's responses do.
    for (int i = 0; i < kSenders; ++i) {
        run_flows(fab, flows, start + Time(i) * r.base_rtt / kSenders, 500);
        flows[i].start();
    }
    const Time t0 = start + 3 * r.base_rtt;
    run_flows(fab, flows, t0);
    r.max_queue_early = bn.counters().max_queue_bytes;
    const uint64_t drops_early = bn.counters().drops();
    bn.reset_counters();
    // Sliding windows, one base RTT apart, to find when Jain first reaches 0.99.
    std::vector<std::vector<uint64_t>> snaps;
    const Time step = r.base_rtt;
    const int nsteps = int(3'000'000 / step);
    snaps.push_back(snapshot(flows));
    const int wsteps = int(kWindow / step);
    uint64_t max_q = 0, drops_mid = 0;
    for (int k = 1; k <= nsteps; ++k) {
        if (k == nsteps / 2) {
            max_q = bn.counters().max_queue_bytes;
            drops_mid = bn.counters().drops();
            bn.reset_counters();
        }
        run_flows(fab, flows, t0 + Time(k) * step);
        snaps.push_back(snapshot(flows));
        if (k >= wsteps && r.time_to_fair == kNever) {
            const double j = jain(rates_gbps(snaps[k - wsteps], snaps[k], kWindow));
            if (j >= 0.99) r.time_to_fair = 3 * r.base_rtt + Time(k - wsteps) * step;
        }
    }
    r.early_rates = rates_gbps(snaps[0], snaps[wsteps], kWindow);
    r.jain_early = jain(r.early_rates);
    const auto steady = rates_gbps(snaps[nsteps / 2], snaps[nsteps], Time(nsteps - nsteps / 2) * step);
    for (double g : steady) r.total_gbps += g;
    r.max_queue_late = bn.counters().max_queue_bytes;
    r.max_queue_steady = std::max(max_q, r.max_queue_late);
    r.drops = drops_early + drops_mid + bn.counters().drops();
    r.ce = bn.counters().ce_marks;
    for (Flow& f : flows) CHECK(f.errors == 0);
    for (const auto& n : tx) CHECK(cc_arrangement_ran(n->eng));
    return r;
}

// Both arrangements of the congestion-control core (R-CC-8): inline on the
// engine's thread, and on a separate stage one transit away (the sim host
// runs it, drivers/sim/engine_host.cpp).
const char* arrangement(bool offload_cc) { return offload_cc ? "CC core on its own stage" : "CC core inline"; }

std::string describe(const char* name, const IncastResult& r) {
    std::ostringstream o;
    o << name << ": base RTT " << r.base_rtt << " ns, Jain[3 RTT, +" << kWindow / 1000 << " us] = " << r.jain_early
      << ", time to Jain>=0.99 " << (r.time_to_fair == kNever ? -1.0 : double(r.time_to_fair) / double(r.base_rtt))
      << " RTTs, total " << r.total_gbps << " Gbit/s, max queue first 3 RTTs " << r.max_queue_early
      << " B, after " << r.max_queue_steady << " B, second half " << r.max_queue_late << " B, drops " << r.drops << ", CE " << r.ce << "; early rates";
    for (double g : r.early_rates) o << ' ' << g;
    return o.str();
}

}  // namespace

TEST_CASE("incast 16:1: fair shares within 3 RTTs, bounded queue (R-HINT-1..5, R-CC-2)", "[cc][incast]") {
    const bool offload = GENERATE(false, true);
    INFO(arrangement(offload));
    const IncastResult on = run_incast(true, false, 1, 8, offload);
    WARN(arrangement(offload) << ": " << describe("equal RTTs, hints on", on));
    CHECK(on.jain_early >= 0.99);
    CHECK(on.time_to_fair <= 3 * on.base_rtt);
    // After the first 3 RTTs the queue stays within a few ECN thresholds.
    CHECK(on.max_queue_steady <= 4 * kEcnK);
    // Paced at the hints (95% of the link) the queue then all but empties.
    CHECK(on.max_queue_late <= kEcnK);
    CHECK(on.drops == 0);
    CHECK(on.total_gbps >= 90.0);  // of the 95 Gbit/s configured capacity
}

// Issue 4's first Done-when item, with the default windows (4 paths x 32
// packets per sender: 16 first flights of init_cwnd would be ~8 MiB, 33
// BDPs). With hints every sender learns its share in the handshake and
// starts with that share's BDP, paced at it (R-HINT-8); senders that shook
// hands before the others got a refreshed share before their first packet
// (R-HINT-9). Without hints the first flights fill the queue and the
// windows then converge by DCTCP alone.
TEST_CASE("incast 16:1 with default windows: fair within 3 RTTs, bounded queue; slower without hints "
          "(R-HINT-2, R-HINT-5, R-HINT-8, R-HINT-9)",
          "[cc][incast]") {
    const bool offload = GENERATE(false, true);
    INFO(arrangement(offload));
    const IncastResult on = run_incast(true, false, 4, 32, offload);
    const IncastResult off = run_incast(false, false, 4, 32, offload);
    WARN(arrangement(offload) << ": " << describe("default windows, hints on", on));
    WARN(arrangement(offload) << ": " << describe("default windows, hints off", off));
    CHECK(on.jain_early >= 0.99);
    CHECK(on.time_to_fair <= 3 * on.base_rtt);
    // Bounded from the first packet on: the whole run stays below the ECN
    // threshold (64 KiB, a quarter of the bottleneck's BDP).
    CHECK(std::max(on.max_queue_early, on.max_queue_steady) <= kEcnK);
    CHECK(on.drops == 0);
    CHECK(on.total_gbps >= 90.0);  // of the 95 Gbit/s configured capacity
    // The difference the hints make, measured in the same run.
    CHECK(off.jain_early < on.jain_early);
    CHECK(off.time_to_fair > on.time_to_fair);
    CHECK(off.max_queue_early > 8 * on.max_queue_early);
}

TEST_CASE("incast 16:1 at unequal RTTs: hints converge, windows alone do not (R-HINT-4, R-HINT-5)",
          "[cc][incast]") {
    const IncastResult on = run_incast(true, true);
    const IncastResult off = run_incast(false, true);
    WARN(describe("unequal RTTs, hints on", on));
    WARN(describe("unequal RTTs, hints off", off));
    // Windows share a queue in proportion to 1/RTT; the hint is a rate, the
    // same for every sender whatever its distance.
    CHECK(on.time_to_fair < off.time_to_fair);
    CHECK(on.time_to_fair <= 60 * on.base_rtt);
    CHECK(on.drops == 0);
}

TEST_CASE("hot spot: the scheduler moves load off a congested path (R-SCHED-2, R-SCHED-3, R-CC-2)", "[cc][sched]") {
    const bool offload = GENERATE(false, true);
    INFO(arrangement(offload));
    EngineConfig cfg;
    cfg.num_paths = 4;
    cfg.offload_cc = offload;
    Fabric fab(21);
    Node a(cfg, 1 << 20), b(cfg, 1 << 20);
    a.host = fab.add_host(a.eng);
    b.host = fab.add_host(b.eng);
    PairConfig pc;
    pc.paths = 4;
    LinkConfig good;
    good.rate_bps = 25 * kGbps;
    good.delay = 5'000;
    good.capacity_bytes = 2 << 20;
    good.ecn_threshold_bytes = kEcnK;
    // Path 3 crosses a hot spot: a fifth of the rate left and a switch that
    // marks as soon as anything queues.
    LinkConfig hot = good;
    hot.rate_bps = 5 * kGbps;
    hot.ecn_threshold_bytes = 8 << 10;
    pc.per_path = {good, good, good, hot};
    const PairTopology topo = build_pair(fab, a.host, b.host, pc);
    std::vector<Flow> flows(1);
    flows[0].src = &a;
    flows[0].dst = &b;
    flows[0].msg = 1 << 20;
    REQUIRE(connect_all(fab, flows, 100'000'000));
    flows[0].start();
    run_flows(fab, flows, fab.now() + 1'000'000, 10'000);  // past the first windows
    std::vector<uint64_t> tx0(4);
    for (uint16_t p = 0; p < 4; ++p) {
        PathStats ps;
        a.eng.path_stats(flows[0].src_conn, p, ps);
        tx0[p] = ps.tx_packets;
    }
    for (LinkId l : topo.forward) fab.link(l).reset_counters();
    const uint64_t b0 = flows[0].rx_bytes();
    const Time t0 = fab.now();
    run_flows(fab, flows, t0 + 4'000'000, 10'000);
    const double gbps = double(flows[0].rx_bytes() - b0) * 8.0 / double(fab.now() - t0);
    uint64_t total = 0;
    std::vector<uint64_t> sent(4);
    for (uint16_t p = 0; p < 4; ++p) {
        PathStats ps;
        a.eng.path_stats(flows[0].src_conn, p, ps);
        sent[p] = ps.tx_packets - tx0[p];
        total += sent[p];
    }
    const double hot_share = double(sent[3]) / double(total);
    std::ostringstream o;
    o << arrangement(offload) << ": goodput " << gbps << " Gbit/s (uncongested paths: 75); packets per path";
    for (uint16_t p = 0; p < 4; ++p)
        o << ' ' << sent[p] << " (max queue " << fab.link(topo.forward[p]).counters().max_queue_bytes << " B, CE "
          << fab.link(topo.forward[p]).counters().ce_marks << ')';
    o << "; hot path share " << hot_share;
    WARN(o.str());
    // Spraying evenly would put 1/4 on the hot path and hold the whole
    // connection to 4 x 5 Gbit/s.
    CHECK(hot_share < 0.10);
    CHECK(gbps >= 0.9 * 75.0);
    CHECK(fab.link(topo.forward[3]).counters().drop_queue == 0);
    CHECK(flows[0].errors == 0);
    CHECK(cc_arrangement_ran(a.eng));
}

TEST_CASE("a new flow gets an equal share of a long flow's bottleneck (R-HINT-2, R-HINT-4)", "[cc][incast]") {
    const bool offload = GENERATE(false, true);
    INFO(arrangement(offload));
    EngineConfig cfg;
    cfg.rx_capacity_mbps = 95'000;
    cfg.offload_cc = offload;
    Fabric fab(31);
    std::vector<std::unique_ptr<Node>> tx;
    std::vector<HostId> ids;
    for (int i = 0; i < 2; ++i) {
        tx.push_back(std::make_unique<Node>(cfg, 1 << 20));
        tx.back()->host = fab.add_host(tx.back()->eng);
        ids.push_back(tx.back()->host);
    }
    Node rx(cfg, 2 << 20);
    rx.host = fab.add_host(rx.eng);
    StarConfig sc;
    sc.access.rate_bps = 100 * kGbps;
    sc.access.delay = kHop;
    sc.bottleneck = sc.access;
    sc.bottleneck.capacity_bytes = 16 << 20;
    sc.bottleneck.ecn_threshold_bytes = kEcnK;
    sc.reverse = sc.access;
    const StarTopology topo = build_star(fab, ids, rx.host, sc);
    std::vector<Flow> flows(2);
    for (int i = 0; i < 2; ++i) {
        flows[i].src = tx[i].get();
        flows[i].dst = &rx;
        flows[i].dst_off = size_t(i) << 20;
        flows[i].msg = 1 << 20;
    }
    REQUIRE(connect_all(fab, flows, 100'000'000));
    const Time base_rtt = 4 * kHop + 2 * 334;
    flows[0].start();
    run_flows(fab, flows, fab.now() + 2'000'000);  // the long flow owns the link
    const Time joined = fab.now();
    flows[1].start();
    // Ratio of the two flows' goodput over successive 10-RTT windows; the
    // first window from which it stays inside [0.8, 1.25] to the end.
    const Time w = 10 * base_rtt;
    Time settled = kNever;
    double last_ratio = 0, worst_after = 1;
    auto prev = snapshot(flows);
    std::vector<uint64_t> half;  // placed bytes at the start of the second half
    for (int k = 1; k <= 100; ++k) {
        run_flows(fab, flows, joined + Time(k) * w);
        const auto cur = snapshot(flows);
        if (k == 50) half = cur;
        const auto r = rates_gbps(prev, cur, w);
        prev = cur;
        last_ratio = r[0] > 0 ? r[1] / r[0] : 0;
        const bool inside = last_ratio >= 0.8 && last_ratio <= 1.25;
        if (inside && settled == kNever) settled = Time(k - 1) * w;
        if (!inside) settled = kNever;
        if (settled != kNever) worst_after = std::min(worst_after, std::min(last_ratio, 1 / last_ratio));
    }
    WARN(arrangement(offload) << ": new/long goodput ratio settled inside [0.8, 1.25] after "
         << (settled == kNever ? -1.0 : double(settled) / double(base_rtt)) << " base RTTs (" << base_rtt
         << " ns); final ratio " << last_ratio << ", worst after settling " << worst_after << ", max queue "
         << fab.link(topo.bottleneck).counters().max_queue_bytes << " B");
    // Equal shares: over the second half (500 RTTs) the two flows' goodputs
    // are within 2% of each other, and together they fill the link.
    const auto end = snapshot(flows);
    const auto share = rates_gbps(half, end, 50 * w);
    WARN(arrangement(offload) << ": second half goodput long " << share[0] << " Gbit/s, new " << share[1]
                              << " Gbit/s, ratio " << share[1] / share[0]);
    CHECK(share[1] / share[0] >= 0.98);
    CHECK(share[1] / share[0] <= 1.02);
    CHECK(share[0] + share[1] >= 0.9 * 95.0);
    CHECK(settled <= 50 * base_rtt);
    for (Flow& f : flows) CHECK(f.errors == 0);
    for (const auto& n : tx) CHECK(cc_arrangement_ran(n->eng));
}

TEST_CASE("CONNECT_ACK carries the share; the first window is its BDP over the paths (R-HINT-8, R-HINT-9)",
          "[cc][hint]") {
    for (bool hints : {true, false}) {
        CAPTURE(hints);
        EngineConfig cfg;  // 4 paths, init_cwnd 32
        cfg.rate_hints = hints;
        cfg.rx_capacity_mbps = 95'000;
        Fabric fab(41);
        std::vector<std::unique_ptr<Node>> tx;
        std::vector<HostId> ids;
        for (int i = 0; i < 2; ++i) {
            tx.push_back(std::make_unique<Node>(cfg, 1 << 16));
            tx.back()->host = fab.add_host(tx.back()->eng);
            ids.push_back(tx.back()->host);
        }
        Node rx(cfg, 1 << 17);
        rx.host = fab.add_host(rx.eng);
        StarConfig sc;
        sc.access.rate_bps = 100 * kGbps;
        sc.access.delay = kHop;
        sc.bottleneck = sc.access;
        sc.reverse = sc.access;
        build_star(fab, ids, rx.host, sc);
        std::vector<Flow> flows(2);
        for (int i = 0; i < 2; ++i) {
            flows[i].src = tx[i].get();
            flows[i].dst = &rx;
        }
        // Both connect at once: one handshake is answered before the other
        // sender is known, so its share needs the refresh (R-HINT-9).
        REQUIRE(connect_all(fab, flows, 100'000'000));
        fab.run_for(100'000);
        // Handshake RTT: 4 link delays (small packets serialize in ns).
        const double bdp_pkts = 47.5e9 / 8 * double(4 * kHop) / 1e9 / (4096 + 72);
        for (Flow& f : flows) {
            ConnStats s;
            REQUIRE(f.src->eng.conn_stats(f.src_conn, s) == Status::ok);
            CHECK(s.tx_data_packets == 0);
            CHECK(s.rate_hint_kbps == (hints ? 47'500'000u : 0u));
            for (uint16_t p = 0; p < 4; ++p) {
                PathStats ps;
                REQUIRE(f.src->eng.path_stats(f.src_conn, p, ps) == Status::ok);
                if (hints)
                    CHECK(ps.cwnd == Approx(bdp_pkts / 4).epsilon(0.02));
                else
                    CHECK(ps.cwnd == 32);
            }
        }
    }
}

TEST_CASE("fair share: a sender that starts mid-interval is not taken for demand-limited (R-HINT-2, R-HINT-4)",
          "[cc][hint]") {
    constexpr Time kIv = 400'000;
    FairShare fs(1'000'000, kIv);  // 1 Gbit/s
    const uint32_t a = fs.add_sender(), b = fs.add_sender();
    fs.on_connect(a, 0);
    fs.on_connect(b, 0);
    CHECK(fs.active_senders() == 2);
    CHECK(fs.hint_kbps(a) == 500'000);
    // b sends at its share all interval; a shook hands at 0 but starts only
    // at 300 us, at its share (500 Mbit/s = 62.5 bytes per us).
    for (Time t = 0; t < kIv; t += 10'000) {
        fs.on_rx(b, 625, t);
        if (t >= 300'000) fs.on_rx(a, 625, t);
    }
    fs.update(kIv);
    // Measured over the whole interval a would look like 125 Mbit/s, under
    // half its share, and be cut to 250 Mbit/s.
    CHECK(fs.hint_kbps(a) == 500'000);
    CHECK(fs.hint_kbps(b) == 500'000);
    // a's first bytes count toward the next closed interval; then two silent
    // intervals make it inactive.
    for (Time k = 2; k <= 4; ++k) {
        for (Time t = (k - 1) * kIv; t < k * kIv; t += 10'000) fs.on_rx(b, 625, t);
        fs.update(k * kIv);
        CHECK(fs.active_senders() == (k < 4 ? 2u : 1u));
    }
}

TEST_CASE("pacer started at a hint banks no burst before the first packet (R-HINT-8)", "[cc][hint]") {
    TokenBucket tb;
    tb.start_kbps(8'000'000, 1'000);  // 8 Gbit/s = 1 byte/ns
    CHECK(tb.allow(1'000'000, 4168));  // long after: the first packet may go ...
    tb.consume(1'000'000, 4168);
    CHECK(!tb.allow(1'000'000, 4168));  // ... but nothing was banked meanwhile
    CHECK(tb.release_time(1'000'000, 4168) == Approx(1'004'168).margin(2));
    TokenBucket plain;  // set_rate_kbps keeps the burst allowance
    plain.set_rate_kbps(8'000'000, 1'000);
    plain.consume(1'000'000, 4168);
    CHECK(plain.allow(1'000'000, 4168));
}

TEST_CASE("initial window from the handshake stays within [min_cwnd, init_cwnd] (R-HINT-8)", "[cc][hint]") {
    CcConfig cc;
    PathWindow w(cc);
    w.set_initial(7.5);
    CHECK(w.cwnd() == 7.5);
    w.set_initial(0.1);
    CHECK(w.cwnd() == cc.min_cwnd);
    w.set_initial(1000);
    CHECK(w.cwnd() == cc.init_cwnd);
}

namespace {

struct RerouteResult {
    double gbps = 0;              // goodput in the late window
    double hot_share = 0;         // of the sender leaf's spine-bound packets, on the hot spine, late window
    uint64_t rerouted = 0;        // all paths
    std::vector<uint16_t> final_spine;
    uint16_t hot = 0;
};

// One plane, 4 spines, 4 paths. The spine that path 0's first route (entropy
// 0) hashes to is a hot spot from the sender's leaf: a fifth of the rate and
// marking as soon as anything queues.
RerouteResult run_reroute(uint32_t reroute_after_marks, bool offload) {
    EngineConfig cfg;
    cfg.num_paths = 4;
    cfg.reroute_after_marks = reroute_after_marks;
    cfg.offload_cc = offload;
    Fabric fab(41);
    Node a(cfg, 1 << 20), b(cfg, 1 << 20);
    a.host = fab.add_host(a.eng);
    b.host = fab.add_host(b.eng);
    PlanesConfig pc;
    pc.planes = 1;
    pc.spines = 4;
    pc.host_link.rate_bps = 100 * kGbps;
    pc.host_link.delay = 1'000;
    pc.spine_link.rate_bps = 25 * kGbps;
    pc.spine_link.delay = 2'000;
    pc.spine_link.capacity_bytes = 2 << 20;
    pc.spine_link.ecn_threshold_bytes = kEcnK;
    const std::vector<HostId> hosts = {a.host, b.host};
    const PlanesTopology topo = build_planes(fab, hosts, pc);
    RerouteResult r;
    auto spine_of = [&](uint16_t entropy) { return ecmp_pick(topo.ecmp_seed, 0, a.host, b.host, entropy, 4); };
    r.hot = spine_of(0);
    auto up_link = [&](uint16_t spine) -> Link& { return fab.link(topo.leaf_spine[size_t(0) * 4 + spine]); };
    up_link(r.hot).set_rate(5 * kGbps);
    up_link(r.hot).set_ecn_threshold(8 << 10);
    std::vector<Flow> flows(1);
    flows[0].src = &a;
    flows[0].dst = &b;
    flows[0].msg = 1 << 20;
    REQUIRE(connect_all(fab, flows, 100'000'000));
    flows[0].start();
    run_flows(fab, flows, fab.now() + 3'000'000, 10'000);
    for (uint16_t s = 0; s < 4; ++s) up_link(s).reset_counters();
    const uint64_t b0 = flows[0].rx_bytes();
    const Time t0 = fab.now();
    run_flows(fab, flows, t0 + 3'000'000, 10'000);
    r.gbps = double(flows[0].rx_bytes() - b0) * 8.0 / double(fab.now() - t0);
    uint64_t total = 0;
    for (uint16_t s = 0; s < 4; ++s) total += up_link(s).counters().tx_packets;
    r.hot_share = double(up_link(r.hot).counters().tx_packets) / double(total);
    for (uint16_t p = 0; p < 4; ++p) {
        PathStats ps;
        a.eng.path_stats(flows[0].src_conn, p, ps);
        r.rerouted += ps.rerouted;
        r.final_spine.push_back(spine_of(ps.entropy));
    }
    CHECK(flows[0].errors == 0);
    CHECK(cc_arrangement_ran(a.eng));
    return r;
}

}  // namespace

TEST_CASE("re-routing: a path that stays congested moves to a new ECMP route (R-SCHED-5)", "[cc][sched]") {
    const bool offload = GENERATE(false, true);
    INFO(arrangement(offload));
    const RerouteResult off = run_reroute(0, offload);
    const RerouteResult on = run_reroute(3, offload);
    auto show = [](const RerouteResult& r) {
        std::ostringstream o;
        o << r.gbps << " Gbit/s, hot spine " << r.hot << " share " << r.hot_share << ", rerouted " << r.rerouted
          << ", final spines";
        for (uint16_t s : r.final_spine) o << ' ' << s;
        return o.str();
    };
    WARN(arrangement(offload) << ": re-routing off: " << show(off) << "; on (after 3 marked rounds): " << show(on));
    // Without re-routing path 0 stays on the hot spine; the scheduler only
    // steers most of its load away (R-SCHED-3).
    CHECK(off.rerouted == 0);
    CHECK(off.final_spine[0] == off.hot);
    // With it, the paths end on uncongested spines (at most one may just have
    // been re-routed onto the hot one again: it leaves after 3 marked
    // rounds), the hot one carries a few percent, and the connection gains
    // the capacity of the spine it avoids. (Paths that hash onto one spine
    // mark each other too and move on: the count of re-routes is far above
    // the one path that started on the hot spot.)
    CHECK(on.rerouted >= 1);
    CHECK(std::count(on.final_spine.begin(), on.final_spine.end(), on.hot) <= 1);
    // (New entropies are drawn at random over 16 bits since issue 21, so a
    // path lands on the hot spine again a quarter of the time and stays 3
    // rounds: a third of the share without re-routing, not a quarter.)
    CHECK(on.hot_share < 0.05);
    CHECK(on.hot_share < off.hot_share / 3);
    CHECK(on.gbps >= 1.5 * off.gbps);
}

TEST_CASE("spurious timeout undo restores the pre-timeout window (R-CC-6, R-CC-9)", "[cc][undo]") {
    CcConfig cc;
    PathWindow w(cc);
    CHECK_FALSE(w.on_spurious_timeout());  // nothing pending
    w.set_initial(20);
    w.on_timeout();
    CHECK(w.cwnd() == cc.min_cwnd);
    CHECK(w.undo_pending());
    w.on_timeout();  // a second one before any ACK: the undo still returns to 20
    CHECK(w.on_spurious_timeout());
    CHECK(w.cwnd() == 20);
    CHECK(w.undos() == 1);
    CHECK_FALSE(w.on_spurious_timeout());  // once
    // An ACK of data after the timeout settles it: no undo any more.
    w.on_timeout();
    w.on_ack(1, 0, 100, 110);
    CHECK_FALSE(w.undo_pending());
    CHECK_FALSE(w.on_spurious_timeout());
    CHECK(w.cwnd() < 3);
    // An ACK that acknowledges nothing (a late one) leaves the undo pending.
    PathWindow g(cc);
    g.set_initial(2);
    g.on_timeout();
    g.on_ack(0, 0, 0, 10);  // an ACK that acknowledges nothing new keeps the undo
    CHECK(g.undo_pending());
    CHECK(g.on_spurious_timeout());
    CHECK(g.cwnd() == 2);
    // ECN says the path queues: the delay that fired the timer was congestion,
    // and the timeout's window stands (marks on the proving ACK, or in the
    // last round).
    PathWindow m(cc);
    m.set_initial(20);
    m.on_timeout();
    CHECK_FALSE(m.on_spurious_timeout(true));
    CHECK(m.cwnd() == cc.min_cwnd);
    CHECK_FALSE(m.undo_pending());
    PathWindow r(cc);
    r.set_initial(20);
    r.on_ack(4, 1, 0, 50);   // opens a round to PSN 50, marked
    r.on_ack(4, 0, 50, 60);  // ends it: marked in the last round
    REQUIRE(r.rounds_since_mark() == 0);
    r.on_timeout();
    CHECK_FALSE(r.on_spurious_timeout(false));
    CHECK(r.cwnd() == cc.min_cwnd);
}

TEST_CASE("alpha is the marked fraction's EWMA per round, bit for bit, unmarked and empty rounds too (R-CC-2)",
          "[cc][alpha]") {
    // on_ack skips the division of an unmarked round (0 / acked is 0.0):
    // alpha must still be exactly the formula's, including rounds that
    // acknowledged nothing and a marked round's decay afterwards.
    CcConfig cc;
    cc.dctcp_g = 3.0 / 16;
    PathWindow w(cc);
    double alpha = 0;
    uint32_t psn = 0;
    struct Round { uint32_t acked, marked; };
    const Round rounds[] = {{8, 0}, {8, 3}, {5, 5}, {0, 0}, {7, 0}, {9, 1}, {4, 0}, {0, 0}, {6, 2}, {3, 0}};
    uint32_t since_mark = w.rounds_since_mark();
    for (const Round& r : rounds) {
        w.on_ack(r.acked, r.marked, psn, psn + 10);  // within the round (the first opens it, to psn + 10)
        psn += 10;
        w.on_ack(0, 0, psn, psn + 10);  // acknowledges nothing, ends the round
        const double f = r.acked ? double(r.marked) / double(r.acked) : 0.0;
        alpha = (1.0 - cc.dctcp_g) * alpha + cc.dctcp_g * std::min(1.0, f);
        since_mark = r.marked ? 0 : since_mark + 1;
        CHECK(w.alpha() == alpha);
        CHECK(w.rounds_since_mark() == since_mark);
    }
    CHECK(w.rounds() == std::size(rounds));
    CHECK(alpha > 0);
}

TEST_CASE("alpha 0 stays 0 through unmarked rounds, before any mark and after its decay underflows (R-CC-2)",
          "[cc][alpha]") {
    // on_ack skips the fold of an unmarked round while alpha is 0 (a lone
    // message's ACK closes a round each time): alpha must still be the
    // formula's, bit for bit, on both sides of a mark, down to the
    // decay's last subnormal and the exact 0 after it.
    CcConfig cc;
    cc.dctcp_g = 1.0 / 2;
    PathWindow w(cc);
    double alpha = 0;
    uint32_t psn = 0;
    bool reached_zero = false;
    for (uint32_t k = 0; k < 1200; ++k) {
        const uint32_t marked = k == 5 ? 4 : 0;  // one marked round; the rest unmarked
        w.on_ack(4, marked, psn, psn + 1);  // opens the round to psn + 1 (the first) ...
        ++psn;
        w.on_ack(0, 0, psn, psn + 1);  // ... and ends it
        alpha = (1.0 - cc.dctcp_g) * alpha + cc.dctcp_g * (marked ? 1.0 : 0.0);
        REQUIRE(w.alpha() == alpha);
        REQUIRE(!std::signbit(w.alpha()));
        if (k > 5 && alpha == 0) reached_zero = true;
    }
    CHECK(reached_zero);  // the decay underflowed to 0, and unmarked rounds kept it there
    CHECK(w.alpha() == 0);
}
