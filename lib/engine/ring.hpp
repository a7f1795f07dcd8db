// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Single-threaded FIFO of fixed power-of-two capacity, sized when a
// connection or stream is created so the per-packet path never allocates.
#pragma once

#include <cstdint>
#include <vector>

namespace mroce {

template <typename T>
class Ring {
public:
    explicit Ring(uint32_t capacity = 16) { reserve(capacity); }
    // Grows to at least `capacity` (rounded up to a power of two), keeping contents.
    void reserve(uint32_t capacity) {
        uint32_t cap = 1;
        while (cap < capacity) cap <<= 1;
        if (cap <= buf_.size()) return;
        std::vector<T> nb(cap);
        const uint32_t n = size();
        for (uint32_t i = 0; i < n; ++i) nb[i] = buf_[(head_ + i) & mask_];
        buf_.swap(nb);
        mask_ = cap - 1;
        head_ = 0;
        tail_ = n;
    }
    bool push(const T& v) {
        if (size() > mask_) return false;  // full (mask_ + 1 == buf_.size(): no division by sizeof(T))
        buf_[tail_++ & mask_] = v;
        return true;
    }
    bool pop(T& out) {
        if (empty()) return false;
        out = buf_[head_++ & mask_];
        return true;
    }
    T& front() { return buf_[head_ & mask_]; }
    const T& front() const { return buf_[head_ & mask_]; }
    void drop_front() { ++head_; }
    const T& at(uint32_t i) const { return buf_[(head_ + i) & mask_]; }  // i < size(): the i-th from the front
    bool empty() const { return head_ == tail_; }
    uint32_t size() const { return tail_ - head_; }
    uint32_t capacity() const { return uint32_t(buf_.size()); }
    void clear() { head_ = tail_ = 0; }
    // Drops the entries pred selects, keeping the others in order (O(size): not per packet).
    template <typename Pred>
    void remove_if(Pred pred) {
        uint32_t w = head_;
        for (uint32_t r = head_; r != tail_; ++r)
            if (!pred(buf_[r & mask_])) buf_[w++ & mask_] = buf_[r & mask_];
        tail_ = w;
    }

private:
    std::vector<T> buf_;
    uint32_t mask_ = 0;
    uint32_t head_ = 0;
    uint32_t tail_ = 0;
};

}  // namespace mroce
