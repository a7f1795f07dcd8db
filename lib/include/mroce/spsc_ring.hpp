// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Lock-free single-producer single-consumer ring of fixed power-of-two
// capacity, with burst enqueue/dequeue: the portable counterpart of rte_ring
// in SP/SC mode, for the pipeline arrangement where DPDK is not in use
// (doc/architecture.md 4.2). Head and tail live on separate cache lines; each
// side caches the other's index so a burst costs one acquire load at most.
// Used by drivers and tests; the engine itself has no threads.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace mroce {

template <typename T>
class SpscRing {
public:
    explicit SpscRing(uint32_t capacity) {
        uint32_t cap = 2;
        while (cap < capacity) cap <<= 1;
        mask_ = cap - 1;
        buf_ = std::make_unique<T[]>(cap);
    }
    SpscRing(const SpscRing&) = delete;
    SpscRing& operator=(const SpscRing&) = delete;

    // Producer: copies up to n items, returns how many fit.
    size_t enqueue_burst(const T* in, size_t n) noexcept {
        const uint32_t t = tail_.load(std::memory_order_relaxed);
        uint32_t free = mask_ + 1 - (t - head_cache_);
        if (free < n) {
            head_cache_ = head_.load(std::memory_order_acquire);
            free = mask_ + 1 - (t - head_cache_);
        }
        if (n > free) n = free;
        for (size_t i = 0; i < n; ++i) buf_[(t + uint32_t(i)) & mask_] = in[i];
        tail_.store(t + uint32_t(n), std::memory_order_release);
        return n;
    }
    // Consumer: moves up to max items out, returns how many.
    size_t dequeue_burst(T* out, size_t max) noexcept {
        const uint32_t h = head_.load(std::memory_order_relaxed);
        uint32_t avail = tail_cache_ - h;
        if (avail < max) {
            tail_cache_ = tail_.load(std::memory_order_acquire);
            avail = tail_cache_ - h;
        }
        if (max > avail) max = avail;
        for (size_t i = 0; i < max; ++i) out[i] = buf_[(h + uint32_t(i)) & mask_];
        head_.store(h + uint32_t(max), std::memory_order_release);
        return max;
    }
    uint32_t capacity() const noexcept { return mask_ + 1; }
    // Either side, approximate while the other side runs.
    uint32_t size() const noexcept {
        return tail_.load(std::memory_order_acquire) - head_.load(std::memory_order_acquire);
    }

private:
    std::unique_ptr<T[]> buf_;
    uint32_t mask_ = 0;
    alignas(64) std::atomic<uint32_t> head_{0};   // consumer's index
    uint32_t tail_cache_ = 0;                     // consumer's copy of tail_
    alignas(64) std::atomic<uint32_t> tail_{0};   // producer's index
    uint32_t head_cache_ = 0;                     // producer's copy of head_
};

}  // namespace mroce
