// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The pipeline arrangement over DPDK (doc/architecture.md 4.2): the engine
// lcore runs RX classification, acks, the scheduler and TX (the drive loop
// with the Pipeline policy: PipelineLoop); payload copies run on a placement
// lcore (PlacementStage), connected by two rte_rings in SP/SC mode with
// burst enqueue/dequeue: PlaceWork (destination, received mbuf, offset,
// length, token) one way, tokens back; congestion control on a CC lcore
// (cc_stage.hpp). The engine is built with EngineConfig::deferred_placement;
// the received mbuf of a copy stays out of rx_release (QueuePort::keep) until
// the placement lcore has copied from it (straight from the mbuf chain into
// its final place: one copy) and freed it.
//
// Size the port's RX pool for it: up to place_depth received mbufs wait for
// their copy beyond what the RX ring holds. Header-only.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sched.h>
#include <string>
#include <vector>

#include <rte_launch.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "mroce/dpdk/cc_stage.hpp"
#include "mroce/dpdk/eal.hpp"
#include "mroce/dpdk/loop.hpp"
#include "mroce/dpdk/port.hpp"
#include "mroce/drive_loop.hpp"
#include "mroce/packet_io.hpp"

namespace mroce::dpdk {

// The ring pair between one engine lcore and one placement lcore. Each ring
// holds 2 x depth slots, depth >= the engine's place_depth: the engine never
// has more copies outstanding, so neither enqueue can fail for long.
class PlacementRings {
public:
    PlacementRings(const std::string& name, uint32_t depth, int socket = SOCKET_ID_ANY) {
        uint32_t n = 64;
        while (n < 2 * depth) n <<= 1;
        work_ = rte_ring_create_elem((name + "_w").c_str(), sizeof(PlaceWork), n, socket,
                                     RING_F_SP_ENQ | RING_F_SC_DEQ);
        done_ = rte_ring_create_elem((name + "_d").c_str(), sizeof(uint32_t), n, socket,
                                     RING_F_SP_ENQ | RING_F_SC_DEQ);
        if (!work_ || !done_) {
            rte_ring_free(work_);
            rte_ring_free(done_);
            throw DpdkError("rte_ring_create_elem(" + name + "): " + std::string(rte_strerror(rte_errno)));
        }
    }
    ~PlacementRings() {
        rte_ring_free(work_);
        rte_ring_free(done_);
    }
    PlacementRings(const PlacementRings&) = delete;
    PlacementRings& operator=(const PlacementRings&) = delete;
    rte_ring* work() const noexcept { return work_; }
    rte_ring* done() const noexcept { return done_; }

    // The engine lcore's side (the drive loop's placement stage).
    void submit(const PlaceWork* w, size_t n, Time = 0) noexcept {
        unsigned s = 0;
        while (s < n) {
            s += rte_ring_sp_enqueue_burst_elem(work_, w + s, sizeof(PlaceWork), unsigned(n - s), nullptr);
            if (s < n) rte_pause();   // cannot stay full: the ring holds twice place_depth
        }
    }
    size_t take_done(uint32_t* tokens, size_t max, Time = 0) noexcept {
        return rte_ring_sc_dequeue_burst_elem(done_, tokens, sizeof(uint32_t), unsigned(max), nullptr);
    }

private:
    rte_ring* work_ = nullptr;
    rte_ring* done_ = nullptr;
};

// Placement lcore: serves one or more ring pairs (one per engine).
class PlacementStage {
public:
    static constexpr unsigned kBurst = 32;

    void add(PlacementRings& r) { rings_.push_back(&r); }

    // One pass over every ring pair; returns the copies done.
    size_t poll() noexcept {
        size_t total = 0;
        for (PlacementRings* r : rings_) {
            const unsigned n = rte_ring_sc_dequeue_burst_elem(r->work(), work_, sizeof(PlaceWork), kBurst, nullptr);
            if (!n) continue;
            for (unsigned i = 0; i < n; ++i) {
                PlaceWork& w = work_[i];
                // Contiguous: a pointer into the mbuf; a chain: copied into dst by the read itself.
                const void* p = rte_pktmbuf_read(w.m, w.off, w.len, w.dst);
                if (p && p != w.dst) std::memcpy(w.dst, p, w.len);
                mbufs_[i] = w.m;
                tokens_[i] = w.token;
            }
            rte_pktmbuf_free_bulk(mbufs_, n);
            unsigned s = 0;
            while (s < n) {
                s += rte_ring_sp_enqueue_burst_elem(r->done(), tokens_ + s, sizeof(uint32_t), n - s, nullptr);
                if (s < n) rte_pause();
            }
            total += n;
        }
        // One writer: a plain add, published for readers on other threads.
        if (total) copies_.store(copies_.load(std::memory_order_relaxed) + total, std::memory_order_relaxed);
        return total;
    }
    // Polls until stop is set and every ring is empty. After idle_polls empty
    // passes in a row it yields the CPU between passes (as CcStage::run: on a
    // machine with fewer CPUs than busy lcores a spinning idle stage takes the
    // engine's time slice; 0: never yield, a dedicated core).
    void run(const std::atomic<bool>& stop, uint32_t idle_polls = 4096) noexcept {
        uint32_t idle = 0;
        for (;;) {
            if (poll()) {
                idle = 0;
                continue;
            }
            if (stop.load(std::memory_order_acquire)) {
                bool empty = true;
                for (PlacementRings* r : rings_) empty &= rte_ring_count(r->work()) == 0;
                if (empty) return;
            }
            if (idle_polls && ++idle >= idle_polls) sched_yield();
            else rte_pause();
        }
    }
    // Copies made (readable from any thread).
    uint64_t copies() const noexcept { return copies_.load(std::memory_order_relaxed); }

private:
    std::vector<PlacementRings*> rings_;
    PlaceWork work_[kBurst];
    rte_mbuf* mbufs_[kBurst];
    uint32_t tokens_[kBurst];
    std::atomic<uint64_t> copies_{0};
};

// Runs a stage (PlacementStage, CcStage: anything with run(stop)) on an EAL
// worker lcore from construction until destruction, which stops it once its
// input rings are empty and waits for the lcore.
template <class Stage>
class StageLcore {
public:
    StageLcore(Stage& stage, unsigned lcore) : stage_(stage), lcore_(lcore) {
        if (lcore >= RTE_MAX_LCORE) throw DpdkError("StageLcore: no such EAL lcore (the EAL core list is too short)");
        if (const int rc = rte_eal_remote_launch(
                [](void* arg) {
                    auto* self = static_cast<StageLcore*>(arg);
                    self->stage_.run(self->stop_);
                    return 0;
                },
                this, lcore);
            rc != 0)
            throw DpdkError("rte_eal_remote_launch on lcore " + std::to_string(lcore) + ": " + rte_strerror(-rc));
    }
    ~StageLcore() {
        stop_.store(true, std::memory_order_release);
        rte_eal_wait_lcore(lcore_);
    }
    StageLcore(const StageLcore&) = delete;
    StageLcore& operator=(const StageLcore&) = delete;
    unsigned lcore() const noexcept { return lcore_; }

private:
    Stage& stage_;
    unsigned lcore_;
    std::atomic<bool> stop_{false};
};

// Engine lcore of the pipeline arrangement: payload copies leave on the work
// ring with their mbufs and tokens come back; window feedback leaves for the
// CC lcore and its views come back (an engine built with deferred_placement
// and offload_cc). PipelineLoop<Engine> loop(QueuePort(port), engine, {&rings, &cc}).
template <PlacingEngine Eng>
using PipelineLoop = DriveLoop<QueuePort, Eng, Pipeline<PlacementRings, CcRings>>;

}  // namespace mroce::dpdk
