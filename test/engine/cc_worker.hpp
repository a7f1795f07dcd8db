// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The congestion-control core of the pipeline arrangement on a std::thread
// (doc/architecture.md 4.2, R-CC-8): CcFeedback records in on one SPSC
// ring, the CcViews a CcCore publishes back on another, in order.
#pragma once

#include <atomic>
#include <thread>

#include "mroce/cc.hpp"
#include "mroce/spsc_ring.hpp"

namespace mroce::test {

class CcWorker {
public:
    explicit CcWorker(const CcConfig& cfg, uint32_t depth = 4096)
        : core_(cfg), in_(depth), out_(depth), th_([this] { loop(); }) {}
    ~CcWorker() {
        stop_.store(true, std::memory_order_release);
        th_.join();
    }
    CcWorker(const CcWorker&) = delete;
    CcWorker& operator=(const CcWorker&) = delete;

    // Driver side. Never more than depth records outstanding (then the view ring cannot fill).
    void submit(const CcFeedback* f, size_t n) {
        size_t s = 0;
        while (s < n) {
            s += in_.enqueue_burst(f + s, n - s);
            if (s < n) std::this_thread::yield();
        }
        submitted_ += n;
    }
    size_t poll(CcView* out, size_t max) {
        const size_t n = out_.dequeue_burst(out, max);
        returned_ += n;
        return n;
    }
    uint64_t outstanding() const noexcept { return submitted_ - returned_; }
    uint64_t applied() const noexcept { return applied_.load(std::memory_order_relaxed); }

private:
    void loop() {
        CcFeedback in[32];
        CcView out[32];
        for (;;) {
            const size_t n = in_.dequeue_burst(in, 32);
            if (n == 0) {
                if (stop_.load(std::memory_order_acquire) && in_.size() == 0) return;
                std::this_thread::yield();
                continue;
            }
            core_.apply(in, n, out);
            size_t s = 0;
            while (s < n) s += out_.enqueue_burst(out + s, n - s);
            applied_.fetch_add(n, std::memory_order_relaxed);
        }
    }

    CcCore core_;  // touched only by the worker thread
    SpscRing<CcFeedback> in_;
    SpscRing<CcView> out_;
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> applied_{0};
    uint64_t submitted_ = 0, returned_ = 0;
    std::thread th_;  // last: starts after the rings exist
};

}  // namespace mroce::test
