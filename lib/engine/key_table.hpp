// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// 32-bit names that do not come back (doc/spec.md R-KEY-1): memory keys and
// connection ids. A name is the next value of a 32-bit counter whose slot is
// free; its slot is name & mask in a table of a power of two of slots kept
// at most half full, so finding a name is one load and one compare, and a
// name is issued again only after the counter has been round all 2^32
// values, which takes at least 2^31 issues whatever the order of releases.
#pragma once

#include <cstdint>
#include <vector>

namespace mroce {

template <typename T>
class KeyTable {
public:
    // max_live: names live at once, at most 2^30 (the table grows to twice that).
    explicit KeyTable(uint32_t max_live) : max_live_(max_live) { resize(kMinSlots); }

    // A fresh name for v, never 0; 0 when max_live names are live.
    uint32_t add(const T& v) {
        if (live_ >= max_live_) return 0;
        if (2 * (live_ + 1) > slots_.size()) resize(uint32_t(slots_.size() * 2));
        for (;;) {
            const uint32_t key = next_++;
            // 0 is never a name (it is the id of no connection on the wire).
            // A slot still live keeps its name: the counter passes it by.
            if (key == 0 || !is_free(key & mask_)) continue;
            Slot& s = slots_[key & mask_];
            s.key = key;
            s.value = v;
            ++live_;
            return key;
        }
    }
    // Inline: every received datagram looks up its connection, every WRITE packet its rkey.
    T* find(uint32_t key) noexcept {
        Slot& s = slots_[key & mask_];
        return s.key == key ? &s.value : nullptr;
    }
    const T* find(uint32_t key) const noexcept {
        const Slot& s = slots_[key & mask_];
        return s.key == key ? &s.value : nullptr;
    }
    bool remove(uint32_t key) {
        if (!find(key)) return false;
        const uint32_t i = key & mask_;
        slots_[i] = Slot{free_mark(i), T{}};
        --live_;
        return true;
    }
    uint32_t live() const noexcept { return live_; }

private:
    static constexpr uint32_t kMinSlots = 16;
    struct Slot {
        uint32_t key = 0;
        T value{};
    };
    // A free slot holds a name whose slot bits point elsewhere, so no lookup
    // can match it and find() needs no second test.
    static uint32_t free_mark(uint32_t i) { return i ^ 1u; }
    bool is_free(uint32_t i) const { return (slots_[i].key & mask_) != i; }
    // Growing keeps every live name: two names in different slots under a
    // mask still differ under the wider one.
    void resize(uint32_t n) {
        std::vector<Slot> old;
        old.swap(slots_);
        const uint32_t old_mask = mask_;
        slots_.resize(n);
        mask_ = n - 1;
        for (uint32_t i = 0; i < n; ++i) slots_[i].key = free_mark(i);
        for (uint32_t i = 0; i < old.size(); ++i)
            if ((old[i].key & old_mask) == i) slots_[old[i].key & mask_] = old[i];
    }

    std::vector<Slot> slots_;
    uint32_t mask_ = 0;
    uint32_t next_ = 1;
    uint32_t live_ = 0;
    uint32_t max_live_;
};

}  // namespace mroce
