// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// What the engine keeps incrementally instead of recomputing per message
// (issue 24): each path's scheduler step (R-SCHED-2, R-SCHED-3), kept across
// bursts and cleared by every writer of srtt and the CC view, each
// connection's count of packets out and failed paths (quiet, wants_timer),
// and with inline CC each path's view, which the core writes in place
// (cc_feed) instead of handing one back, against the core's own.
// A missed writer would be a scheduling or timer bug that most traffic never
// shows, so these runs change every input (ACKs, SACK losses, ECN marks,
// timeouts, silences, a path failed and revived, borrowed RTTs, rate hints,
// an offloaded CC core) in randomized order, and compare the kept state with
// a fresh computation (Engine::self_check) at every step of the link.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine_fixture.hpp"

using namespace mroce;
using namespace mroce::test;

namespace {

struct Variant {
    uint32_t paths;
    bool offload_cc, tail_redundancy, rate_hints;
};

void run_variant(const Variant& v, uint64_t seed) {
    EngineConfig cfg;
    cfg.num_paths = v.paths;
    cfg.offload_cc = v.offload_cc;
    cfg.tail_redundancy = v.tail_redundancy;
    cfg.rate_hints = v.rate_hints;
    cfg.probe_interval = 200'000;
    Fixture f(cfg, 1 << 20);
    if (v.offload_cc) {
        f.link.enable_cc_stage(0);
        f.link.enable_cc_stage(1);
    }
    f.link.rng = SplitMix{seed};
    f.link.ce = 0.2;
    SplitMix r{seed * 7919 + 1};
    bool down = false;
    uint16_t dead = 0;
    f.link.drop_if = [&](int, const TxPacket& t) { return down && t.path == dead; };
    size_t bad = 0;
    uint64_t checks = 0;
    uint64_t id = 0;
    for (int round = 0; round < 80; ++round) {
        // Faults change between rounds: random loss, a path dead both ways
        // (timeouts, silences, failure, probes, revival), or a clean link.
        const uint64_t x = r.next();
        f.link.loss = (x & 3) == 0 ? 0.0 : double(x % 7) / 100.0;
        if ((x >> 8) % 4 == 0) {
            down = !down;
            dead = uint16_t((x >> 16) % v.paths);
        }
        // A message alone (a burst of one packet), or many of mixed sizes.
        const size_t n = (x >> 24) % 3 == 0 ? 1 : 1 + size_t((x >> 32) % 48);
        for (size_t k = 0; k < n; ++k) {
            const uint32_t len = (r.next() & 1) ? 64 : 1 + uint32_t(r.next() % 16384);
            const size_t off = size_t(r.next() % ((1 << 20) - 16384));
            SendWr w;
            w.wr_id = ++id;
            w.op = OpKind::write;
            w.local_addr = f.a.addr(off);
            w.length = len;
            w.lkey = f.a.mr.lkey;
            w.remote_addr = f.b.addr(off);
            w.rkey = f.b.mr.rkey;
            REQUIRE(f.a.eng.post_send(f.ca, 7, w) == Status::ok);
            bad += f.a.eng.self_check();
        }
        size_t got = 0;
        const bool done = f.link.run([&] {
            bad += f.a.eng.self_check() + f.b.eng.self_check();
            ++checks;
            Completion c[64];
            for (size_t k; (k = f.a.eng.poll_cq(f.a.cq, c, 64)) > 0;) {
                for (size_t i = 0; i < k; ++i) REQUIRE(c[i].status == WcStatus::success);
                got += k;
            }
            return got >= n;
        }, 2'000'000'000);
        REQUIRE(done);
    }
    // Idle at the end: what is left settles (timers, probes of a dead path).
    down = false;
    f.link.loss = 0;
    f.link.run([&] {
        bad += f.a.eng.self_check() + f.b.eng.self_check();
        ++checks;
        return false;
    }, 5'000'000);
    CHECK(checks > 500);
    CHECK(bad == 0);
    // The runs reached the writers this test is for.
    uint64_t timeouts = 0, losses = 0, rerouted = 0;
    for (uint16_t pi = 0; pi < v.paths; ++pi) {
        PathStats ps;
        REQUIRE(f.a.eng.path_stats(f.ca, pi, ps) == Status::ok);
        timeouts += ps.timeouts + ps.silences;
        losses += ps.losses;
        rerouted += ps.rerouted;
    }
    CHECK(timeouts > 0);
    CHECK(losses > 0);
    CHECK(rerouted > 0);
}

}  // namespace

TEST_CASE("kept scheduler steps and unsettled counts equal a fresh computation under loss, ECN, timeouts and "
          "path failure",
          "[engine][sched][kept]") {
    const Variant variants[] = {
        {4, false, false, false},
        {4, true, false, false},
        {4, false, true, true},
        {3, false, false, true},
    };
    for (const Variant& v : variants)
        for (uint64_t seed = 1; seed <= 3; ++seed) {
            INFO("paths " << v.paths << " offload_cc " << v.offload_cc << " tail_redundancy " << v.tail_redundancy
                          << " rate_hints " << v.rate_hints << " seed " << seed);
            run_variant(v, seed);
        }
}
