// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// A hierarchical timing wheel (Varghese and Lauck; the layout of the classic
// Linux timer wheel): 4 levels of 256 slots, level 0 ticks of 1,024 ns, each
// level 256 times coarser (level 3 reaches 2^42 ns, about 73 minutes; later
// times wait in its last slot and are placed again). Nodes are intrusive
// (doubly linked), so schedule, reschedule and cancel are O(1) and allocate
// nothing; advance costs O(1) per tick crossed and per node fired, and skips
// empty stretches a level at a time, so a clock that jumps far stays cheap.
//
// A node keeps its exact due time: advance fires only nodes due by `now`
// (the current tick's slot may hold later ones, which stay), and next_due()
// is exact for the nodes within level 0's 262 us and a lower bound (the next
// cascade) for later ones, so a driver sleeping until it wakes at worst
// early, never late. The engine (doc/architecture.md, "Timers and the ready
// list") keeps one node per connection, due at the earliest of its timers.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <limits>

#include "mroce/engine.hpp"

namespace mroce {

class TimerWheel {
public:
    static constexpr Time kNever = std::numeric_limits<Time>::max();
    struct Node {
        Node* next = nullptr;
        Node** pprev = nullptr;  // nullptr: not scheduled
        Time due = 0;
        uint16_t slot = 0;
        uint8_t level = 0;
        bool linked() const { return pprev != nullptr; }
    };

    // The wheel's clock starts at `now` (nothing is due before it).
    explicit TimerWheel(Time now = 0) : cur_(tick(now)) {}
    TimerWheel(const TimerWheel&) = delete;
    TimerWheel& operator=(const TimerWheel&) = delete;

    bool empty() const { return count_ == 0; }
    size_t size() const { return count_; }

    // Schedules (or moves) n to fire at due: O(1).
    void schedule(Node& n, Time due) {
        if (n.linked()) unlink(n);
        else ++count_;
        n.due = due;
        place(n);
        if (due < next_) next_ = due;
    }
    void cancel(Node& n) {
        if (!n.linked()) return;
        unlink(n);
        --count_;
        // next_ stays: a lower bound (a wake with nothing due is harmless).
    }

    // Fires every node due at or before now: unlinks it, then fire(node).
    // fire may schedule nodes; one scheduled due at or before now waits for
    // the next advance (next_due() then says it is due).
    template <class F>
    void advance(Time now, F&& fire) {
        const uint64_t target = tick(now);
        for (;;) {
            if (count_ == 0) {
                if (cur_ < target) cur_ = target;
                break;
            }
            if ((cur_ & kMask) == 0) cascade(1);
            const uint32_t slot = uint32_t(cur_ & kMask);
            if (slots_[0][slot]) fire_slot(slot, now, fire);
            if (cur_ >= target) break;
            uint64_t nxt;
            if (per_level_[0]) {
                // the next occupied slot of this revolution, else its end
                nxt = (cur_ | kMask) + 1;
                if (slot < kMask) {
                    const int b = next_set(slot + 1, true);
                    if (b >= 0) nxt = (cur_ & ~uint64_t(kMask)) + uint64_t(b);
                }
            } else {
                nxt = next_boundary();
            }
            cur_ = std::min(nxt, target);
        }
        next_ = compute_next();
    }

    // The earliest due time of any node: exact for those within level 0's
    // span, else the next cascade (a lower bound); kNever if empty.
    Time next_due() const { return next_; }

private:
    static constexpr int kLevels = 4;
    static constexpr int kBits = 8;
    static constexpr uint32_t kSlots = 1u << kBits;
    static constexpr uint32_t kMask = kSlots - 1;
    static constexpr int kTickShift = 10;  // 1,024 ns

    static uint64_t tick(Time t) { return t >> kTickShift; }

    template <class F>
    void fire_slot(uint32_t slot, Time now, F& fire) {
        // Take the due nodes off first (fire may relink nodes into this slot).
        Node* due = nullptr;
        for (Node* n = slots_[0][slot]; n;) {
            Node* nx = n->next;
            if (n->due <= now) {
                unlink(*n);
                --count_;
                n->next = due;  // the fire chain (n is unlinked: pprev == nullptr)
                due = n;
            }
            n = nx;
        }
        while (due) {
            Node* n = due;
            due = n->next;
            n->next = nullptr;
            fire(*n);
        }
    }

    void place(Node& n) {
        uint64_t t = tick(n.due);
        if (t < cur_) t = cur_;  // already due: the current tick
        const uint64_t delta = t - cur_;
        int lvl = 0;
        if (delta < kSlots) lvl = 0;
        else if (delta < (uint64_t(1) << (2 * kBits))) lvl = 1;
        else if (delta < (uint64_t(1) << (3 * kBits))) lvl = 2;
        else {
            lvl = 3;
            const uint64_t top = uint64_t(1) << (4 * kBits);
            if (delta >= top) t = cur_ + top - 1;  // beyond the wheel: its farthest slot, placed again on cascade
        }
        const uint32_t slot = uint32_t((t >> (kBits * lvl)) & kMask);
        Node*& head = slots_[lvl][slot];
        n.next = head;
        if (head) head->pprev = &n.next;
        head = &n;
        n.pprev = &head;
        n.slot = uint16_t(slot);
        n.level = uint8_t(lvl);
        ++per_level_[lvl];
        if (lvl == 0) bits_[slot >> 6] |= uint64_t(1) << (slot & 63);
    }

    void unlink(Node& n) {
        *n.pprev = n.next;
        if (n.next) n.next->pprev = n.pprev;
        --per_level_[n.level];
        if (n.level == 0 && slots_[0][n.slot] == nullptr) bits_[n.slot >> 6] &= ~(uint64_t(1) << (n.slot & 63));
        n.next = nullptr;
        n.pprev = nullptr;
    }

    // Moves level lvl's slot for the current tick down a level or more
    // (the level above first, when it wraps too).
    void cascade(int lvl) {
        if (lvl >= kLevels) return;
        const uint32_t slot = uint32_t((cur_ >> (kBits * lvl)) & kMask);
        if (slot == 0) cascade(lvl + 1);
        Node* n = slots_[lvl][slot];
        slots_[lvl][slot] = nullptr;
        while (n) {
            Node* nx = n->next;
            --per_level_[lvl];
            place(*n);
            n = nx;
        }
    }

    // Level 0 empty: the next tick at which a cascade can bring a node down
    // (skipping the cascades of empty levels).
    uint64_t next_boundary() const {
        int k = 1;
        while (k < kLevels - 1 && per_level_[k] == 0) ++k;
        return ((cur_ >> (kBits * k)) + 1) << (kBits * k);
    }

    // First occupied level-0 slot at or after `from` (this revolution only
    // if `no_wrap`), -1 if none.
    int next_set(uint32_t from, bool no_wrap) const {
        for (uint32_t w = from >> 6; w < kSlots / 64; ++w) {
            uint64_t m = bits_[w];
            if (w == (from >> 6)) m &= ~uint64_t(0) << (from & 63);
            if (m) return int(w * 64 + uint32_t(std::countr_zero(m)));
        }
        if (no_wrap) return -1;
        return next_set(0, true);
    }

    Time compute_next() const {
        if (count_ == 0) return kNever;
        Time best = kNever;
        if (per_level_[0]) {
            // Level 0's slots, from the current tick's on, are its next 256
            // ticks in order: the first occupied one holds the earliest.
            const int b = next_set(uint32_t(cur_ & kMask), false);
            for (const Node* n = slots_[0][uint32_t(b)]; n; n = n->next) best = std::min(best, n->due);
        }
        if (count_ != per_level_[0]) {
            // Coarser levels' nodes are due no earlier than their cascade.
            const uint64_t b = per_level_[0] ? (cur_ | kMask) + 1 : next_boundary();
            best = std::min(best, Time(b) << kTickShift);
        }
        return best;
    }

    uint64_t cur_;                    // current tick: every earlier tick is done
    Time next_ = kNever;
    size_t count_ = 0;
    std::array<size_t, kLevels> per_level_{};
    std::array<uint64_t, kSlots / 64> bits_{};  // level 0: occupied slots
    std::array<std::array<Node*, kSlots>, kLevels> slots_{};
};

}  // namespace mroce
