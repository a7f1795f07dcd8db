// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The congestion-control core on its own lcore (doc/architecture.md 4.2,
// doc/spec.md R-CC-8): an engine built with EngineConfig::offload_cc queues
// CcFeedback records; its drive loop (the Pipeline policy with CcRings as
// its CC stage) moves them to a CcStage over an SP/SC rte_ring, and the
// CcViews the stage's CcCore publishes come back over another. Burst
// enqueue/dequeue, no allocation after a connection's first record, no locks.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <sched.h>
#include <string>
#include <vector>

#include <rte_errno.h>
#include <rte_pause.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "mroce/cc.hpp"
#include "mroce/dpdk/eal.hpp"
#include "mroce/drive_loop.hpp"

namespace mroce::dpdk {

static_assert(sizeof(CcFeedback) % 4 == 0 && sizeof(CcView) % 4 == 0, "rte_ring elements are multiples of 4 bytes");

// The ring pair between one engine and the CC lcore, and that engine's
// CcCore (built from the engine's own config().cc; only the CC lcore touches it).
class CcRings {
public:
    CcRings(const std::string& name, const CcConfig& cc, uint32_t depth = 4096, int socket = SOCKET_ID_ANY)
        : core_(cc) {
        uint32_t n = 64;
        while (n < depth) n <<= 1;
        fb_ = rte_ring_create_elem((name + "_f").c_str(), sizeof(CcFeedback), n, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
        views_ = rte_ring_create_elem((name + "_v").c_str(), sizeof(CcView), n, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
        if (!fb_ || !views_) {
            rte_ring_free(fb_);
            rte_ring_free(views_);
            throw DpdkError("rte_ring_create_elem(" + name + "): " + std::string(rte_strerror(rte_errno)));
        }
    }
    ~CcRings() {
        rte_ring_free(fb_);
        rte_ring_free(views_);
    }
    CcRings(const CcRings&) = delete;
    CcRings& operator=(const CcRings&) = delete;
    rte_ring* feedback() const noexcept { return fb_; }
    rte_ring* views() const noexcept { return views_; }
    CcCore& core() noexcept { return core_; }

    // The engine's side, from the engine's lcore (the drive loop's CC
    // stage): views in first (this pass's TX schedules on them), then
    // feedback out, only as much as the ring takes: the rest waits in the
    // engine (Engine::cc_feedback_waiting), in order.
    template <CcOffloadingEngine Eng>
    size_t exchange(Eng& eng, Time = 0) noexcept {
        constexpr unsigned kBurst = 64;
        CcView v[kBurst];
        size_t moved = 0;
        for (unsigned n; (n = rte_ring_sc_dequeue_burst_elem(views_, v, sizeof(CcView), kBurst, nullptr)) > 0;) {
            eng.cc_update(v, n);
            moved += n;
            if (n < kBurst) break;
        }
        CcFeedback f[kBurst];
        for (;;) {
            const unsigned room = std::min<unsigned>(kBurst, rte_ring_free_count(fb_));
            if (!room) break;
            const size_t n = eng.take_cc_feedback(f, room);
            if (!n) break;
            // SP: nobody else enqueues, so the room counted above is still there.
            rte_ring_sp_enqueue_burst_elem(fb_, f, sizeof(CcFeedback), unsigned(n), nullptr);
            moved += n;
        }
        return moved;
    }

private:
    rte_ring* fb_ = nullptr;
    rte_ring* views_ = nullptr;
    CcCore core_;
};

// The CC lcore: serves one or more engines' ring pairs.
class CcStage {
public:
    static constexpr unsigned kBurst = 32;

    void add(CcRings& r) { rings_.push_back(&r); }

    // One pass over every ring pair; returns the records applied.
    size_t poll() noexcept {
        size_t total = 0;
        for (CcRings* r : rings_) {
            const unsigned n = rte_ring_sc_dequeue_burst_elem(r->feedback(), fb_, sizeof(CcFeedback), kBurst, nullptr);
            if (!n) continue;
            r->core().apply(fb_, n, views_);
            unsigned s = 0;
            while (s < n) {
                // Cannot stay full for long: the engine side drains views first in every pass.
                s += rte_ring_sp_enqueue_burst_elem(r->views(), views_ + s, sizeof(CcView), n - s, nullptr);
                if (s < n) rte_pause();
            }
            total += n;
        }
        if (total) records_.store(records_.load(std::memory_order_relaxed) + total, std::memory_order_relaxed);
        return total;
    }
    // Polls until stop is set and every feedback ring is empty. After
    // idle_polls empty passes in a row it yields the CPU between passes: on
    // a machine with fewer CPUs than busy lcores a spinning idle stage would
    // take the engine's time slice (0: never yield, a dedicated core).
    void run(const std::atomic<bool>& stop, uint32_t idle_polls = 4096) noexcept {
        uint32_t idle = 0;
        for (;;) {
            if (poll()) {
                idle = 0;
                continue;
            }
            if (stop.load(std::memory_order_acquire)) {
                bool empty = true;
                for (CcRings* r : rings_) empty &= rte_ring_count(r->feedback()) == 0;
                if (empty) return;
            }
            if (idle_polls && ++idle >= idle_polls) sched_yield();
            else rte_pause();
        }
    }
    // Records applied (readable from any thread).
    uint64_t records() const noexcept { return records_.load(std::memory_order_relaxed); }

private:
    std::vector<CcRings*> rings_;
    CcFeedback fb_[kBurst];
    CcView views_[kBurst];
    std::atomic<uint64_t> records_{0};
};

}  // namespace mroce::dpdk
