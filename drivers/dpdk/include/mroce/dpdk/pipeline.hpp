// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The pipeline arrangement over DPDK (doc/architecture.md 4.2): the engine
// lcore runs RX classification, acks, congestion control, the scheduler and
// TX (PipelineLoop); payload copies run on a placement lcore
// (PlacementStage), connected by two rte_rings in SP/SC mode with burst
// enqueue/dequeue: PlaceWork (destination, received mbuf, offset, length,
// token) one way, tokens back. The engine is built with
// EngineConfig::deferred_placement; the received mbuf of a copy stays out
// of rx_release until the placement lcore has copied from it (straight from
// the mbuf chain into its final place: one copy) and freed it.
//
// Size the port's RX pool for it: up to place_depth received mbufs wait for
// their copy beyond what the RX ring holds. Header-only and templated on the
// engine like EngineLoop.
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
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
#include "mroce/packet_io.hpp"

namespace mroce::dpdk {

template <class E>
concept PlacingEngine = PacketEngine<E> && requires(E& e, PlaceJob* j, const uint32_t* t, size_t n, Time now) {
    { e.take_place_jobs(j, n) } -> std::convertible_to<size_t>;
    e.placed(t, n, now);
};

// One copy on the ring (32 bytes, a multiple of 4 as rte_ring_elem wants).
struct PlaceWork {
    uint8_t* dst = nullptr;
    rte_mbuf* m = nullptr;
    uint32_t off = 0;     // of the payload in the frame (mbuf chain)
    uint32_t len = 0;
    uint32_t token = 0;
    uint32_t pad_ = 0;
};
static_assert(sizeof(PlaceWork) % 4 == 0);

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
        copies_ += total;
        return total;
    }
    // Busy-polls until stop is set and every ring is empty.
    void run(const std::atomic<bool>& stop) noexcept {
        for (;;) {
            if (poll()) continue;
            if (stop.load(std::memory_order_acquire)) {
                bool empty = true;
                for (PlacementRings* r : rings_) empty &= rte_ring_count(r->work()) == 0;
                if (empty) return;
            }
            rte_pause();
        }
    }
    uint64_t copies() const noexcept { return copies_; }

private:
    std::vector<PlacementRings*> rings_;
    PlaceWork work_[kBurst];
    rte_mbuf* mbufs_[kBurst];
    uint32_t tokens_[kBurst];
    uint64_t copies_ = 0;
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

// Engine lcore of the pipeline arrangement: like EngineLoop, but payload
// copies leave on the work ring with their mbufs and tokens come back; with
// cc rings (an engine built with offload_cc) window feedback leaves for the
// CC lcore and its views come back (cc_stage.hpp).
template <PlacingEngine Eng>
class PipelineLoop {
public:
    static constexpr size_t kRxBurst = 32;
    static constexpr size_t kDoneBurst = 64;

    PipelineLoop(DpdkPort& port, Eng& eng, PlacementRings& rings, uint16_t rxq = 0, uint16_t txq = 0)
        : port_(port), eng_(eng), rings_(rings), rxq_(rxq), txq_(txq) {}
    PipelineLoop(DpdkPort& port, Eng& eng, PlacementRings& rings, CcRings& cc, uint16_t rxq = 0, uint16_t txq = 0)
        requires CcOffloadingEngine<Eng>
        : port_(port), eng_(eng), rings_(rings), cc_(&cc), rxq_(rxq), txq_(txq) {}

    size_t step(Time now) {
        const size_t moved_cc = cc_pass();   // views first: this pass's TX schedules on them
        return step_io(now) + moved_cc + cc_pass();   // then what RX and TX fed back
    }

private:
    size_t cc_pass() {
        if constexpr (CcOffloadingEngine<Eng>) {
            if (cc_) return cc_exchange(eng_, *cc_);
        }
        return 0;
    }

    size_t step_io(Time now) {
        // Finished copies first: their acks go out in this pass's TX.
        const unsigned nd =
            rte_ring_sc_dequeue_burst_elem(rings_.done(), done_, sizeof(uint32_t), kDoneBurst, nullptr);
        if (nd) {
            eng_.placed(done_, nd, now);
            outstanding_ -= nd;
        }
        size_t moved = port_.rx_burst(rxq_, rx_, kRxBurst);
        if (moved) {
            for (size_t i = 0; i < moved; ++i) rx_[i].cookie = uint32_t(i);
            eng_.rx_burst(rx_, moved, now);
            size_t k;
            while ((k = eng_.take_place_jobs(jobs_, kRxBurst)) > 0) {
                for (size_t i = 0; i < k; ++i) {
                    uint32_t off = 0;
                    PlaceWork& w = work_[i];
                    w.m = port_.rx_take(rxq_, jobs_[i].cookie, &off);
                    w.dst = jobs_[i].dst;
                    w.off = off + jobs_[i].src_off;
                    w.len = jobs_[i].len;
                    w.token = jobs_[i].token;
                }
                unsigned s = 0;
                while (s < k) {
                    s += rte_ring_sp_enqueue_burst_elem(rings_.work(), work_ + s, sizeof(PlaceWork),
                                                        unsigned(k - s), nullptr);
                    if (s < k) rte_pause();   // cannot stay full: the ring holds twice place_depth
                }
                outstanding_ += k;
                jobs_sent_ += k;
            }
        }
        port_.rx_release(rxq_);   // everything not taken by a copy
        moved += tx_.pump(port_, txq_, eng_, now);
        return moved + nd;
    }

public:
    template <class App, class Stop>
    void run(App&& app, Stop&& stop) {
        while (!stop()) {
            const Time now = clock_.now();
            step(now);
            app(now);
        }
    }

    Time now() const noexcept { return clock_.now(); }
    uint64_t retry_dropped() const noexcept { return tx_.retry_dropped(); }
    uint64_t outstanding() const noexcept { return outstanding_; }   // copies on the rings
    uint64_t jobs_sent() const noexcept { return jobs_sent_; }

private:
    DpdkPort& port_;
    Eng& eng_;
    PlacementRings& rings_;
    CcRings* cc_ = nullptr;
    uint16_t rxq_, txq_;
    TscClock clock_;
    RxPacket rx_[kRxBurst];
    PlaceJob jobs_[kRxBurst];
    PlaceWork work_[kRxBurst];
    uint32_t done_[kDoneBurst];
    TxPump tx_;
    uint64_t outstanding_ = 0;
    uint64_t jobs_sent_ = 0;
};

}  // namespace mroce::dpdk
