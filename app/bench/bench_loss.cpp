// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Goodput against random loss (brief: ~86% of lossless at 1% is the
// published figure to beat; the physical limit is 1 - p). Two real engines
// on the simulated fabric: 4 paths of 25 Gbit/s (100 Gbit/s), 4 KiB
// segments, 20 us each way, so the bandwidth-delay product is about 120
// packets. Loss applies to every link, both directions (data and acks).
//
// usage: mroce-bench-loss [MiB per run, default 256] [seed, default 1]
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cc_harness.hpp"

using namespace cctest;

namespace {

struct Result {
    double gbps = 0;
    uint64_t retransmits = 0, timeouts = 0, losses = 0;
    Time rtt = 0;
};

Result run(double loss, uint64_t bytes, uint64_t seed) {
    EngineConfig cfg;
    cfg.num_paths = 4;
    cfg.rx_capacity_mbps = 100'000;
    Fabric fab(seed);
    Node a(cfg, 1 << 20), b(cfg, 1 << 20);
    a.host = fab.add_host(a.eng);
    b.host = fab.add_host(b.eng);
    PairConfig pc;
    pc.paths = 4;
    pc.link.rate_bps = 25'000'000'000;
    pc.link.delay = 20'000;
    pc.link.capacity_bytes = 4 << 20;
    pc.link.ecn_threshold_bytes = 256 << 10;
    const PairTopology topo = build_pair(fab, a.host, b.host, pc);
    std::vector<Flow> flows(1);
    flows[0].src = &a;
    flows[0].dst = &b;
    flows[0].msg = 1 << 20;
    flows[0].depth = 4;
    if (!connect_all(fab, flows, 100'000'000)) {
        std::fprintf(stderr, "connect failed\n");
        std::exit(1);
    }
    // Loss only after the handshake, so every run starts from the same state.
    for (LinkId l : topo.forward) fab.link(l).set_loss(loss);
    for (LinkId l : topo.reverse) fab.link(l).set_loss(loss);
    flows[0].start();
    // Skip the first 2 ms (window growth, first RTT samples), then measure.
    const Time warm = fab.now() + 2'000'000;
    run_flows(fab, flows, warm, 10'000);
    const uint64_t b0 = flows[0].rx_bytes();
    const Time t0 = fab.now();
    while (flows[0].rx_bytes() - b0 < bytes) run_flows(fab, flows, fab.now() + 100'000, 10'000);
    Result r;
    r.gbps = double(flows[0].rx_bytes() - b0) * 8.0 / double(fab.now() - t0);
    ConnStats cs;
    a.eng.conn_stats(flows[0].src_conn, cs);
    r.retransmits = cs.retransmits;
    for (uint16_t p = 0; p < 4; ++p) {
        PathStats ps;
        a.eng.path_stats(flows[0].src_conn, p, ps);
        r.timeouts += ps.timeouts;
        r.losses += ps.losses;
        r.rtt += ps.srtt / 4;
    }
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    const uint64_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
    const uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
    const double losses[] = {0.0, 0.001, 0.01, 0.05, 0.10};
    std::printf("# 2 engines, sim pair, 4 paths x 25 Gbit/s, 20 us each way, 4 KiB segments, %llu MiB per run\n",
                (unsigned long long)mib);
    std::printf("%-7s %10s %10s %8s %10s %9s %8s %8s\n", "loss%", "Gbit/s", "of_lossless", "limit", "retx",
                "timeouts", "sacklost", "srtt_us");
    double base = 0;
    for (double p : losses) {
        const Result r = run(p, mib << 20, seed);
        if (p == 0) base = r.gbps;
        std::printf("%-7.1f %10.2f %10.3f %8.3f %10llu %9llu %8llu %8.1f\n", p * 100, r.gbps,
                    base > 0 ? r.gbps / base : 0.0, 1.0 - p, (unsigned long long)r.retransmits,
                    (unsigned long long)r.timeouts, (unsigned long long)r.losses, double(r.rtt) / 1000.0);
        std::fflush(stdout);
    }
    return 0;
}
