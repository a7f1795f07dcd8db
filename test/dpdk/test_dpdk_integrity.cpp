// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Two engines in one process over a net_ring port pair, every operation type
// (integrity_workload.hpp) at 0, 1 and 10% injected receive loss. net_ring
// loses nothing by itself, so the loss comes from LossyEngine. The ports
// outlive the cases; every case starts from fresh engines, and its mbufs must
// all be back in their pools at its end. Every case runs in both lcore
// arrangements: run to completion (EngineLoop, one lcore) and pipeline
// (PipelineLoop on lcore 0, both engines' payload copies on a placement
// lcore, both engines' congestion-control cores on a CC lcore, rte_rings
// between them; pipeline.hpp, cc_stage.hpp).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ring.h>

#include <rte_launch.h>
#include <rte_lcore.h>

#include "integrity_workload.hpp"
#include "ring_pair.hpp"
#include "mroce/dpdk/pipeline.hpp"

using namespace mroce;
using namespace mroce::dpdk;
using namespace mroce::test;
using Clock = std::chrono::steady_clock;

namespace {

constexpr unsigned kRing = 4096;

struct Ports {
    std::optional<RingPortPair> rings;   // made after the EAL is up, freed before it goes down
    std::unique_ptr<DpdkPort> p[2];

    Ports() {
        EalConfig ec;
        ec.program = "mroce-test-dpdk-integrity";
        // Three lcores floating over the (at least) two CPUs CI has: lcore 1
        // is the placement stage, lcore 2 the CC core.
        ec.args = {"--lcores", "(0,1,2)@(0,1)", "--no-huge", "--no-pci", "-m", "256", "--log-level", "lib.eal:warning"};
        ec.file_prefix = fmt::format("mroce-test-integ-{}", ::getpid());
        eal_init(ec);
        rings.emplace("i", 1, kRing);
        for (int i = 0; i < 2; ++i)
            p[i] = std::make_unique<DpdkPort>(rings->config(i, [](PortConfig& c) { c.pools.cache = 64; }));
    }
    ~Ports() {
        p[0].reset();
        p[1].reset();
        rings.reset();
        eal_cleanup();
    }
};

Ports& ports() {
    static Ports p;
    return p;
}

struct CaseResult {
    double seconds = 0;
    uint64_t dropped = 0, retransmits = 0;
};

enum class Arrangement { run_to_completion, pipeline };

template <class LoopA, class LoopB>
void drive(double loss, uint64_t seed, Engine& ea, Engine& eb, LossyEngine& la, LossyEngine& lb, LoopA& loop_a,
           LoopB& loop_b, const Workload& w, std::vector<uint8_t>* mem, const uint64_t* base, const PoolUsage* u0,
           const std::function<uint64_t()>& outstanding);

void run_case(double loss, uint64_t seed, Arrangement arr) {
    Ports& P = ports();
    const PoolUsage u0[2] = {P.p[0]->pool_usage(), P.p[1]->pool_usage()};
    // 4 streams x 200 messages: about 5 MB of payload in both directions (READs flow back).
    const Workload w = Workload::make(seed, 4, 200, 16u << 20);
    std::vector<uint8_t> mem[2] = {std::vector<uint8_t>(w.mem), std::vector<uint8_t>(w.mem)};
    const uint64_t base[2] = {uint64_t(uintptr_t(mem[0].data())), uint64_t(uintptr_t(mem[1].data()))};
    EngineConfig cfg = integrity_engine_config(4096);
    cfg.deferred_placement = arr == Arrangement::pipeline;
    cfg.offload_cc = arr == Arrangement::pipeline;
    Engine ea(cfg), eb(cfg);
    LossyEngine la(ea, loss, seed * 3 + 1), lb(eb, loss, seed * 5 + 2);
    if (arr == Arrangement::run_to_completion) {
        EngineLoop<LossyEngine> loop_a(QueuePort(*P.p[0]), la), loop_b(QueuePort(*P.p[1]), lb);
        drive(loss, seed, ea, eb, la, lb, loop_a, loop_b, w, mem, base, u0, [] { return uint64_t(0); });
        CHECK(ea.stats().place_jobs + eb.stats().place_jobs == 0);
        CHECK(ea.stats().cc_feedback + eb.stats().cc_feedback == 0);
    } else {
        PlacementRings ra("pl_a", cfg.place_depth), rb("pl_b", cfg.place_depth);
        CcRings cca("cc_a", ea.config().cc), ccb("cc_b", eb.config().cc);
        PipelineLoop<LossyEngine> loop_a(QueuePort(*P.p[0]), la, {&ra, &cca}), loop_b(QueuePort(*P.p[1]), lb, {&rb, &ccb});
        uint64_t copies = 0, cc_records = 0;
        PlacementStage placement;   // both engines' copies on lcore 1
        placement.add(ra);
        placement.add(rb);
        CcStage cc_stage;           // both engines' CC cores on lcore 2
        cc_stage.add(cca);
        cc_stage.add(ccb);
        {
            const unsigned l1 = rte_get_next_lcore(-1, 1, 0);
            StageLcore<PlacementStage> on_l1(placement, l1);
            StageLcore<CcStage> on_l2(cc_stage, rte_get_next_lcore(l1, 1, 0));
            drive(loss, seed, ea, eb, la, lb, loop_a, loop_b, w, mem, base, u0,
                  [&] { return loop_a.outstanding() + loop_b.outstanding(); });
            // Hand over the last feedback; the CC lcore stops once its rings are empty.
            while (ea.cc_feedback_waiting() + eb.cc_feedback_waiting()) {
                cca.exchange(la);
                ccb.exchange(lb);
            }
        }
        copies = placement.copies();
        // Every window update went through the CC lcore, none was dropped.
        cc_records = cca.core().records() + ccb.core().records();
        CHECK(ea.stats().cc_feedback > 0);
        CHECK(cc_records == ea.stats().cc_feedback + eb.stats().cc_feedback);
        CHECK(ea.stats().cc_feedback_full + eb.stats().cc_feedback_full == 0);
        // Every copy went through the placement lcore and came back.
        CHECK(eb.stats().place_jobs > 0);
        CHECK(loop_a.jobs_sent() + loop_b.jobs_sent() == ea.stats().place_jobs + eb.stats().place_jobs);
        CHECK(copies == loop_a.jobs_sent() + loop_b.jobs_sent());
        CHECK(ea.place_outstanding() == 0);
        CHECK(eb.place_outstanding() == 0);
        // A descheduled placement lcore fills the queue: drops, then loss recovery (R-ACK-7), not a fault.
        WARN(fmt::format("pipeline: {} copies on lcore {}, {} dropped for a full placement queue; {} window "
                         "records on the CC lcore",
                         copies, rte_get_next_lcore(-1, 1, 0), ea.stats().rx_place_full + eb.stats().rx_place_full,
                         cc_records));
    }
}

template <class LoopA, class LoopB>
void drive(double loss, uint64_t seed, Engine& ea, Engine& eb, LossyEngine& la, LossyEngine& lb, LoopA& loop_a,
           LoopB& loop_b, const Workload& w, std::vector<uint8_t>* mem, const uint64_t* base, const PoolUsage* u0,
           const std::function<uint64_t()>& outstanding) {
    Ports& P = ports();
    IntegritySide a(ea, w, true, mem[0].data(), base[0], base[1], 0);
    IntegritySide b(eb, w, false, mem[1].data(), base[0], base[1], 0);
    // The requester uses its own key for B's region (see IntegritySide): true for fresh engines.
    REQUIRE(a.mr().rkey == b.mr().rkey);
    a.start();

    const auto t0 = Clock::now();
    const auto deadline = t0 + std::chrono::seconds(40);
    auto pass = [&] {
        loop_a.step(loop_a.now());
        a.app();
        loop_b.step(loop_b.now());
        b.app();
    };
    while (!(a.finished() && b.finished()) && !a.failed() && !b.failed() && Clock::now() < deadline) pass();
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    // Keep both sides running a while: late duplicates must not complete anything,
    // and tail acks (or their retransmitted data) finish flowing.
    const auto settle = Clock::now() + std::chrono::milliseconds(300);
    while (Clock::now() < settle) pass();
    const auto drain_end = Clock::now() + std::chrono::seconds(5);
    while ((P.p[0]->pool_usage() != u0[0] || P.p[1]->pool_usage() != u0[1] || outstanding() != 0) &&
           Clock::now() < drain_end)
        pass();

    ConnStats sa{}, sb{};
    ea.conn_stats(a.conn(), sa);
    eb.conn_stats(b.conn(), sb);
    INFO(fmt::format("loss {} seed {}: {:.2f} s, {} msgs, {} payload bytes, dropped {}+{}, retransmits {}+{}, "
                     "rnr {}, ring retry drops {}+{}",
                     loss, seed, secs, w.want_send, w.payload_bytes, la.dropped(), lb.dropped(), sa.retransmits,
                     sb.retransmits, sb.rnr_drops, loop_a.retry_dropped(), loop_b.retry_dropped()));
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
    CHECK(ea.stats().rx_decode_errors == 0);
    CHECK(eb.stats().rx_decode_errors == 0);
    CHECK(P.p[0]->stats().rx_dropped() == 0);
    CHECK(P.p[1]->stats().rx_dropped() == 0);
    // Issue 6 item 3, "copied once": net_ring delivers our zero-copy TX chains
    // (header mbuf + payload extbuf) as they are; every one reached the engine
    // as two spans, none was linearised into scratch (the payload's only copy
    // is the engine's placement, inline or on the placement lcore).
    for (int i = 0; i < 2; ++i) {
        CHECK(P.p[i]->stats().rx_split > 0);
        CHECK(P.p[i]->stats().rx_linearized == 0);
    }
    CHECK(ea.stats().rx_split_header + eb.stats().rx_split_header == 0);
    if (loss >= 0.1) CHECK(sa.retransmits + sb.retransmits > 0);
    // No mbuf leaks: every pool back where it was before the case.
    CHECK(P.p[0]->pool_usage() == u0[0]);
    CHECK(P.p[1]->pool_usage() == u0[1]);
    WARN(fmt::format("net_ring loss {}: {:.2f} s for {} ops / {:.1f} MB, injected drops {}, retransmits {}", loss,
                     secs, w.want_send, w.payload_bytes / 1e6, la.dropped() + lb.dropped(),
                     sa.retransmits + sb.retransmits));
}

}  // namespace

TEST_CASE("dpdk integrity: all ops over net_ring, no loss", "[dpdk][integrity]") {
    run_case(0.0, 11, Arrangement::run_to_completion);
}
TEST_CASE("dpdk integrity: all ops over net_ring, 1% loss", "[dpdk][integrity]") {
    run_case(0.01, 12, Arrangement::run_to_completion);
}
TEST_CASE("dpdk integrity: all ops over net_ring, 10% loss", "[dpdk][integrity]") {
    run_case(0.10, 13, Arrangement::run_to_completion);
}
TEST_CASE("dpdk integrity, pipeline lcores: all ops over net_ring, no loss", "[dpdk][integrity][pipeline]") {
    run_case(0.0, 11, Arrangement::pipeline);
}
TEST_CASE("dpdk integrity, pipeline lcores: all ops over net_ring, 1% loss", "[dpdk][integrity][pipeline]") {
    run_case(0.01, 12, Arrangement::pipeline);
}
TEST_CASE("dpdk integrity, pipeline lcores: all ops over net_ring, 10% loss", "[dpdk][integrity][pipeline]") {
    run_case(0.10, 13, Arrangement::pipeline);
}
