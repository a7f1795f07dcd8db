// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Per-path queues on a port with several queues: a net_ring pair with 4 RX and
// 4 TX queues each (A's TX queue q feeds B's RX queue q: net_ring has no RSS, so
// the sender's queue choice is what spreads the paths). Checks that
// tx_burst_paths puts path p on queue p % queues and reports refused packets
// in order, and that two engines move all operation types byte-exact under
// loss with every queue carrying its path.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ring.h>

#include "integrity_workload.hpp"
#include "ring_pair.hpp"
#include "mroce/dpdk/loop.hpp"

using namespace mroce;
using namespace mroce::dpdk;
using namespace mroce::test;
using Clock = std::chrono::steady_clock;

namespace {

constexpr unsigned kQueues = 4;

struct PortPair {
    RingPortPair rings;
    std::unique_ptr<DpdkPort> p[2];

    PortPair(const char* tag, unsigned ring_size, uint16_t txq) : rings(tag, kQueues, ring_size) {
        for (int i = 0; i < 2; ++i)
            p[i] = std::make_unique<DpdkPort>(rings.config(i, [&](PortConfig& c) {
                c.rx_queues = kQueues;
                c.tx_queues = txq;
                c.rx_desc = c.tx_desc = 256;
            }));
    }
    ~PortPair() {
        p[0].reset();
        p[1].reset();
    }
};

struct Eal {
    Eal() {
        EalConfig ec;
        ec.program = "mroce-test-dpdk-mq";
        ec.args = {"-l", "0", "--no-huge", "--no-pci", "-m", "256", "--log-level", "lib.eal:warning"};
        ec.file_prefix = fmt::format("mroce-test-mq-{}", ::getpid());
        eal_init(ec);
    }
    ~Eal() { eal_cleanup(); }
};
Eal& eal() {
    static Eal e;
    return e;
}

// The native API's pass (Device::step_locked): the drive loop over every queue
// of the port, with the native API's bursts.
using QueuesLoop = DriveLoop<AllQueuesPort, LossyEngine>;
constexpr Bursts kDeviceBursts{64, 128};

}  // namespace

TEST_CASE("dpdk queues: path p leaves on TX queue p % queues, refused packets reported in order",
          "[dpdk][queues]") {
    eal();
    // Rings of 64 hold 63 frames: the 64th packet of a queue is refused.
    PortPair P("mqt", 64, kQueues);
    DpdkPort& a = *P.p[0];
    DpdkPort& b = *P.p[1];
    std::vector<uint8_t> payload(256, 0x5a);
    std::vector<TxPacket> pk(300);
    for (size_t i = 0; i < pk.size(); ++i) {
        TxPacket& p = pk[i];
        p.peer = 0;
        // Paths 0..5 (6 paths on 4 queues: 4 and 5 share queues 0 and 1) and control packets.
        p.path = i % 7 == 6 ? kControlPath : uint16_t(i % 7);
        p.entropy = uint16_t(i % 7);
        p.hdr_len = 16;
        const uint32_t id = uint32_t(i);
        std::memcpy(p.hdr, &id, 4);
        p.payload = payload.data();
        p.payload_len = 256;
    }
    std::vector<uint32_t> unsent(pk.size());
    const size_t sent = a.tx_burst_paths(pk.data(), pk.size(), unsent.data());
    // Queue 0: paths 0, 4 and control; queue 1: paths 1, 5; queues 2, 3: paths 2, 3.
    size_t per_q[kQueues] = {};
    for (const auto& p : pk) ++per_q[a.tx_queue_of(p)];
    size_t want_sent = 0;
    for (unsigned q = 0; q < kQueues; ++q) want_sent += std::min<size_t>(per_q[q], 63);
    CHECK(sent == want_sent);
    const size_t nunsent = pk.size() - sent;
    for (size_t i = 1; i < nunsent; ++i) CHECK(unsent[i - 1] < unsent[i]);
    // The refused ones are exactly each queue's packets past the 63rd.
    size_t seen[kQueues] = {};
    std::vector<bool> refused(pk.size(), false);
    for (size_t i = 0; i < nunsent; ++i) refused[unsent[i]] = true;
    for (size_t i = 0; i < pk.size(); ++i) {
        const uint16_t q = a.tx_queue_of(pk[i]);
        CHECK(refused[i] == (seen[q]++ >= 63));
    }
    // Each of B's RX queues holds its queue's packets, in order.
    RxPacket rx[32];
    for (unsigned q = 0; q < kQueues; ++q) {
        uint32_t last = 0;
        size_t got = 0;
        for (size_t n; (n = b.rx_burst(uint16_t(q), rx, 32)) > 0;) {
            for (size_t k = 0; k < n; ++k) {
                uint32_t id = 0;
                std::memcpy(&id, rx[k].data, 4);
                CHECK(a.tx_queue_of(pk[id]) == q);
                CHECK(rx[k].local_path == q);
                if (got) CHECK(id > last);
                last = id;
                ++got;
            }
        }
        CHECK(got == std::min<size_t>(per_q[q], 63));
    }
    b.rx_release_all();
}

TEST_CASE("dpdk queues: all ops byte-exact over 4 queues per port, 1% loss, every queue used",
          "[dpdk][queues][integrity]") {
    eal();
    PortPair P("mqi", 4096, kQueues);
    const PoolUsage u0[2] = {P.p[0]->pool_usage(), P.p[1]->pool_usage()};
    const Workload w = Workload::make(31, 4, 200, 16u << 20);
    std::vector<uint8_t> mem[2] = {std::vector<uint8_t>(w.mem), std::vector<uint8_t>(w.mem)};
    const uint64_t base[2] = {uint64_t(uintptr_t(mem[0].data())), uint64_t(uintptr_t(mem[1].data()))};
    EngineConfig cfg = integrity_engine_config(4096);
    cfg.num_paths = 4;
    Engine ea(cfg), eb(cfg);
    LossyEngine la(ea, 0.01, 91), lb(eb, 0.01, 92);
    QueuesLoop loop_a(AllQueuesPort(*P.p[0]), la, {}, kDeviceBursts), loop_b(AllQueuesPort(*P.p[1]), lb, {}, kDeviceBursts);
    IntegritySide a(ea, w, true, mem[0].data(), base[0], base[1], 0);
    IntegritySide b(eb, w, false, mem[1].data(), base[0], base[1], 0);
    REQUIRE(a.mr().rkey == b.mr().rkey);
    a.start();
    TscClock clock;
    const auto deadline = Clock::now() + std::chrono::seconds(40);
    auto pass = [&] {
        loop_a.step(clock.now());
        a.app();
        loop_b.step(clock.now());
        b.app();
    };
    while (!(a.finished() && b.finished()) && !a.failed() && !b.failed() && Clock::now() < deadline) pass();
    const auto settle = Clock::now() + std::chrono::milliseconds(300);
    while (Clock::now() < settle) pass();
    REQUIRE(a.finished());
    REQUIRE(b.finished());
    a.verify();
    b.verify();
    std::string errs;
    for (const auto& e : a.errors()) errs += "A: " + e + "\n";
    for (const auto& e : b.errors()) errs += "B: " + e + "\n";
    INFO(errs);
    CHECK(a.errors().empty());
    CHECK(b.errors().empty());
    CHECK(la.dropped() + lb.dropped() > 0);
    for (int i = 0; i < 2; ++i) {
        CHECK(P.p[i]->stats().rx_dropped() == 0);
        for (uint16_t q = 0; q < kQueues; ++q) {
            INFO("port " << i << " queue " << q);
            CHECK(P.p[i]->rx_queue_stats(q).rx_packets > 0);
            CHECK(P.p[i]->tx_queue_stats(q).tx_packets > 0);
        }
    }
    P.p[0]->rx_release_all();
    P.p[1]->rx_release_all();
    CHECK(P.p[0]->pool_usage() == u0[0]);
    CHECK(P.p[1]->pool_usage() == u0[1]);
}
