// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Two real engines over two DpdkPorts on a net_ring pair (A's TX ring is B's
// RX ring), driven by EngineLoop on one thread with the TSC clock: connect,
// WRITE and SEND, byte-exact, and every mbuf back in its pool afterwards.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ring.h>

#include "mroce/dpdk/loop.hpp"
#include "mroce/dpdk/port.hpp"
#include "mroce/engine.hpp"
#include "ring_pair.hpp"

using namespace mroce;
using namespace mroce::dpdk;

namespace {

struct Side {
    std::unique_ptr<DpdkPort> port;
    std::unique_ptr<Engine> eng;
    std::unique_ptr<EngineLoop<Engine>> loop;
    std::vector<uint8_t> mem = std::vector<uint8_t>(4 << 20);
    uint32_t pd = 0, cq = 0;
    MrInfo mr;
    uint64_t addr(size_t off = 0) const { return uint64_t(uintptr_t(mem.data() + off)); }
};

struct World {
    std::optional<test::RingPortPair> rings;   // made after the EAL is up, freed before it goes down
    Side s[2];
    uint32_t conn[2] = {0, 0};

    World() {
        EalConfig ec;
        ec.program = "mroce-test-dpdk-engine";
        ec.args = {"-l", "0", "--no-huge", "--no-pci", "-m", "256", "--log-level", "lib.eal:warning"};
        ec.file_prefix = fmt::format("mroce-test-{}", ::getpid());
        eal_init(ec);
        rings.emplace("e", 1, 4096);
        for (int i = 0; i < 2; ++i) {
            // Peer handle 0 = the other side.
            const PortConfig c = rings->config(i, [](PortConfig& pc) { pc.pools.cache = 64; });
            Side& sd = s[i];
            sd.port = std::make_unique<DpdkPort>(c);
            sd.eng = std::make_unique<Engine>(EngineConfig{});
            sd.loop = std::make_unique<EngineLoop<Engine>>(QueuePort(*sd.port), *sd.eng);
            sd.pd = sd.eng->alloc_pd();
            REQUIRE(sd.eng->create_cq(1 << 12, sd.cq) == Status::ok);
            REQUIRE(sd.eng->register_mr(sd.pd, sd.mem.data(), sd.mem.size(),
                                        kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead, sd.mr) ==
                    Status::ok);
        }
    }
    ~World() {
        // Let both sides drain, then account for every mbuf before teardown.
        for (int i = 0; i < 1000; ++i) step();
        for (auto& sd : s) {
            sd.loop.reset();
            sd.eng.reset();
        }
        s[0].port.reset();
        s[1].port.reset();
        rings.reset();
        eal_cleanup();
    }
    void step() {
        for (auto& sd : s) sd.loop->step(sd.loop->now());
    }
    template <class Pred>
    bool run_until(Pred&& p, double seconds = 10) {
        const Time end = s[0].loop->now() + Time(seconds * 1e9);
        while (!p()) {
            if (s[0].loop->now() > end) return false;
            step();
        }
        return true;
    }
    std::vector<Completion> wait(int side, size_t n) {
        std::vector<Completion> got;
        run_until([&] {
            Completion c[16];
            const size_t k = s[side].eng->poll_cq(s[side].cq, c, 16);
            got.insert(got.end(), c, c + k);
            return got.size() >= n;
        });
        return got;
    }
};

World& world() {
    static World w;
    return w;
}

}  // namespace

TEST_CASE("dpdk+engine: connect over net_ring, stream created on both sides", "[dpdk][engine]") {
    World& w = world();
    REQUIRE(w.s[0].eng->connect(0, w.conn[0]) == Status::ok);
    REQUIRE(w.run_until([&] {
        ConnEvent ev[4];
        const size_t n = w.s[1].eng->poll_events(ev, 4);
        for (size_t i = 0; i < n; ++i)
            if (ev[i].kind == EventKind::incoming) w.conn[1] = ev[i].conn;
        return w.conn[1] != 0 && w.s[0].eng->conn_state(w.conn[0]) == ConnState::established;
    }));
    ConnEvent ev[4];
    w.s[0].eng->poll_events(ev, 4);
    for (int i = 0; i < 2; ++i)
        REQUIRE(w.s[i].eng->create_stream(w.conn[i], 7, w.s[i].pd, w.s[i].cq, w.s[i].cq) == Status::ok);
}

TEST_CASE("dpdk+engine: WRITE 1 MiB + 123 and SEND arrive byte-exact", "[dpdk][engine]") {
    World& w = world();
    REQUIRE(w.conn[1] != 0);
    Side& a = w.s[0];
    Side& b = w.s[1];
    const PoolUsage a0 = a.port->pool_usage(), b0 = b.port->pool_usage();
    const size_t len = (1 << 20) + 123;
    for (size_t i = 0; i < len; ++i) a.mem[i] = uint8_t(i * 13 + (i >> 10));
    SendWr wr;
    wr.wr_id = 42;
    wr.op = OpKind::write;
    wr.local_addr = a.addr();
    wr.length = uint32_t(len);
    wr.lkey = a.mr.lkey;
    wr.remote_addr = b.addr(4096);
    wr.rkey = b.mr.rkey;
    REQUIRE(a.eng->post_send(w.conn[0], 7, wr) == Status::ok);
    auto c = w.wait(0, 1);
    REQUIRE(c.size() == 1);
    CHECK(c[0].wr_id == 42);
    CHECK(c[0].status == WcStatus::success);
    CHECK(std::memcmp(a.mem.data(), b.mem.data() + 4096, len) == 0);

    RecvWr r;
    r.wr_id = 7;
    r.addr = b.addr(2 << 20);
    r.length = 100000;
    r.lkey = b.mr.lkey;
    REQUIRE(b.eng->post_recv(w.conn[1], 7, r) == Status::ok);
    SendWr s;
    s.wr_id = 43;
    s.op = OpKind::send;
    s.local_addr = a.addr(1000);
    s.length = 70000;
    s.lkey = a.mr.lkey;
    REQUIRE(a.eng->post_send(w.conn[0], 7, s) == Status::ok);
    auto rc = w.wait(1, 1);
    REQUIRE(rc.size() == 1);
    CHECK(rc[0].wr_id == 7);
    CHECK(rc[0].byte_len == 70000);
    CHECK(std::memcmp(a.mem.data() + 1000, b.mem.data() + (2 << 20), 70000) == 0);
    CHECK(w.wait(0, 1).size() == 1);

    // Quiesce (acks in flight), then every mbuf is home.
    for (int i = 0; i < 2000; ++i) w.step();
    CHECK(a.port->pool_usage() == a0);
    CHECK(b.port->pool_usage() == b0);
    const PortStats sa = a.port->stats(), sb = b.port->stats();
    CHECK(sa.rx_dropped() == 0);
    CHECK(sb.rx_dropped() == 0);
    INFO("A tx " << sa.tx_packets << " B rx " << sb.rx_packets << " ring-full " << sa.tx_ring_full);
    CHECK(sb.rx_packets >= len / 4096);
    CHECK(a.eng->stats().rx_decode_errors == 0);
    CHECK(b.eng->stats().rx_decode_errors == 0);
}
