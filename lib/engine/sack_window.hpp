// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Receiver-side sequence tracking: the per-path 256-bit SACK window
// (R-SACK-*) and the per-connection CSN duplicate filter (R-CSN-*).
#pragma once

#include <cstdint>
#include <vector>

#include "mroce/wire.hpp"

namespace mroce {

// Bit i of bits = PSN cum + 1 + i received; cum itself is the next expected.
struct SackBitmap {
    uint32_t cum = 0;
    bool hole_news = false;  // a new hole marked since the ACK that last took the news (R-TIMER-10 (c))
    // False only while no bit is set: only an out-of-order mark sets one, and
    // an in-order mark that finds it false skips has_gap()'s four words.
    bool above = false;
    uint64_t bits[4] = {};

    enum class Result : uint8_t { fresh, duplicate, beyond_window };

    // Advances cum past PSNs the sender resolved (R-PATH-5). Runs for every
    // data packet and nearly always finds the floor at or below cum: that
    // test inline, the move out of line.
    [[gnu::always_inline]] void apply_floor(uint32_t floor) noexcept {
        if (wire::seq_le(floor, cum)) [[likely]] return;
        raise_floor(floor);
    }
    [[gnu::noinline]] void raise_floor(uint32_t floor) noexcept {
        if (!has_gap()) {  // nothing recorded above cum: just move it
            cum = floor;
            return;
        }
        const uint32_t d = floor - cum;
        cum = floor;
        // The bit for PSN floor sits at index d-1: shift it to "cum itself",
        // then fold a received cum into the cumulative point.
        if (d > wire::kSackBits) {
            clear();
            return;
        }
        shift(d - 1);
        fold();
    }
    Result classify(uint32_t psn) const noexcept {
        if (wire::seq_lt(psn, cum)) return Result::duplicate;
        if (psn == cum) return Result::fresh;
        const uint32_t i = psn - cum - 1;
        if (i >= wire::kSackBits) return Result::beyond_window;
        return (bits[i >> 6] >> (i & 63)) & 1 ? Result::duplicate : Result::fresh;
    }
    // Records a PSN that classify() called fresh.
    [[gnu::always_inline]] void mark(uint32_t psn) noexcept {
        if (psn == cum) {
            ++cum;
            if (!above) return;  // the common in-order case: nothing recorded above, nothing to fold
            if (has_gap()) fold();
            above = has_gap();
            return;
        }
        const uint32_t i = psn - cum - 1;
        // R-TIMER-10 (c): the PSN just below this one missing (cum itself, or
        // a clear bit) is a new hole. Out of order only: nothing in order.
        hole_news |= i == 0 || !((bits[(i - 1) >> 6] >> ((i - 1) & 63)) & 1);
        bits[i >> 6] |= 1ull << (i & 63);
        above = true;
    }
    bool has_gap() const noexcept { return bits[0] | bits[1] | bits[2] | bits[3]; }
    void clear() noexcept { bits[0] = bits[1] = bits[2] = bits[3] = 0; }

private:
    // While the bit for PSN cum (index 0 after a shift by one) is set, advance.
    void fold() noexcept {
        // After ++cum, bit 0 describes PSN cum+1 of the old numbering = new cum.
        while (bits[0] & 1) {
            shift(1);
            ++cum;
        }
        shift(1);  // bits now describe cum+1.. again: drop the bit of old cum (known clear)
    }
    void shift(uint32_t n) noexcept {
        if (n == 0) return;
        if (n >= 256) { clear(); return; }
        const uint32_t wsh = n >> 6, bsh = n & 63;
        for (uint32_t k = 0; k < 4; ++k) {
            const uint32_t src = k + wsh;
            uint64_t v = src < 4 ? bits[src] >> bsh : 0;
            if (bsh && src + 1 < 4) v |= bits[src + 1] << (64 - bsh);
            bits[k] = v;
        }
    }
};

// Receiver state of one of the peer's paths.
struct RxPath {
    SackBitmap sack;
    uint32_t ts_last = 0;
    uint16_t ce_pending = 0;
    uint16_t rx_pending = 0;
    bool ack_pending = false;
    bool ack_ce = false;
    bool ack_now = false;        // R-ACK-1: a gap, CE, duplicate or message end: ack at once
    uint64_t first_pending = 0;  // when the oldest unacked packet arrived (ack_delay)
    uint64_t rx_packets = 0;
    uint64_t rx_ce = 0;
};

// Duplicate filter over CSNs [cum, cum + window): a CSN is fresh exactly once.
class CsnWindow {
public:
    void init(uint32_t first, uint32_t window) {
        cum_ = first;
        mask_ = window - 1;
        above_ = 0;
        bits_.assign((window + 63) / 64, 0);
    }
    enum class Result : uint8_t { fresh, duplicate, beyond_window };
    Result classify(uint32_t csn) const noexcept {
        if (csn == cum_) return Result::fresh;  // in order (cum_'s own bit is never set)
        if (wire::seq_lt(csn, cum_)) return Result::duplicate;
        if (csn - cum_ > mask_) return Result::beyond_window;
        const uint32_t i = csn & mask_;
        return (bits_[i >> 6] >> (i & 63)) & 1 ? Result::duplicate : Result::fresh;
    }
    // Records a CSN that classify() called fresh.
    void mark(uint32_t csn) noexcept {
        if (csn != cum_) {
            // Above cum_: just recorded (cum_'s own bit is never set, so nothing folds).
            const uint32_t i = csn & mask_;
            bits_[i >> 6] |= 1ull << (i & 63);
            ++above_;
            return;
        }
        ++cum_;  // the in-order case: never set, so nothing to clear
        if (!above_) return;  // nothing recorded above: nothing to fold (the common case, no bit read)
        // Fold the contiguous prefix recorded above it into cum_ and clear its bits for reuse.
        while (true) {
            const uint32_t j = cum_ & mask_;
            uint64_t& x = bits_[j >> 6];
            const uint64_t b = 1ull << (j & 63);
            if (!(x & b)) break;
            x &= ~b;
            --above_;
            ++cum_;
        }
    }
    uint32_t cum() const noexcept { return cum_; }

private:
    uint32_t cum_ = 0;
    uint32_t mask_ = 0;
    uint32_t above_ = 0;  // bits set in bits_: CSNs recorded above cum_, not yet folded
    std::vector<uint64_t> bits_;
};

}  // namespace mroce
