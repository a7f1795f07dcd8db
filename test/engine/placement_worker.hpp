// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The placement stage of the pipeline arrangement on a std::thread: takes
// PlaceJobs from an SPSC ring, copies the payloads and returns the tokens on
// another SPSC ring, in order (doc/architecture.md 4.2). The test driver owns
// the received buffers and frees them when a job's token comes back.
#pragma once

#include <atomic>
#include <cstring>
#include <thread>

#include "mroce/packet_io.hpp"
#include "mroce/spsc_ring.hpp"

namespace mroce::test {

struct PlaceDone {
    uint32_t token = 0;
    uint32_t cookie = 0;
};

class PlacementWorker {
public:
    explicit PlacementWorker(uint32_t depth = 4096) : jobs_(depth), done_(depth), th_([this] { loop(); }) {}
    ~PlacementWorker() {
        stop_.store(true, std::memory_order_release);
        th_.join();
    }
    PlacementWorker(const PlacementWorker&) = delete;
    PlacementWorker& operator=(const PlacementWorker&) = delete;

    // Driver side. Never more than depth jobs outstanding (the done ring then cannot fill).
    void submit(const PlaceJob& j) {
        while (jobs_.enqueue_burst(&j, 1) == 0) std::this_thread::yield();
        ++submitted_;
    }
    size_t poll(PlaceDone* out, size_t max) {
        const size_t n = done_.dequeue_burst(out, max);
        returned_ += n;
        return n;
    }
    uint64_t outstanding() const noexcept { return submitted_ - returned_; }
    uint64_t copies() const noexcept { return copies_.load(std::memory_order_relaxed); }

private:
    void loop() {
        PlaceJob in[32];
        PlaceDone out[32];
        for (;;) {
            const size_t n = jobs_.dequeue_burst(in, 32);
            if (n == 0) {
                if (stop_.load(std::memory_order_acquire) && jobs_.size() == 0) return;
                std::this_thread::yield();
                continue;
            }
            for (size_t i = 0; i < n; ++i) {
                std::memcpy(in[i].dst, in[i].src, in[i].len);
                out[i] = PlaceDone{in[i].token, in[i].cookie};
            }
            size_t s = 0;
            while (s < n) s += done_.enqueue_burst(out + s, n - s);
            copies_.fetch_add(n, std::memory_order_relaxed);
        }
    }

    SpscRing<PlaceJob> jobs_;
    SpscRing<PlaceDone> done_;
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> copies_{0};
    uint64_t submitted_ = 0, returned_ = 0;
    std::thread th_;  // last: starts after the rings exist
};

}  // namespace mroce::test
