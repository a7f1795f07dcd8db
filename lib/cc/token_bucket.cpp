// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Sender pacing toward the receiver's fair-share hint (R-HINT-5).
#include <algorithm>

#include "mroce/cc.hpp"

namespace mroce {

// kbit/s to bytes per nanosecond: kbps * 1000 / 8 bytes/s / 1e9.
static inline double bytes_per_ns(uint32_t kbps) { return double(kbps) * 125.0 / 1e9; }

double TokenBucket::tokens_at(Time now) const noexcept {
    if (rate_kbps_ == 0) return double(burst_);
    if (before_first_) return 0.0;
    const double dt = now > last_ ? double(now - last_) : 0.0;
    return std::min(double(burst_), tokens_ + dt * bytes_per_ns(rate_kbps_));
}

void TokenBucket::resize() noexcept {
    const Time span = std::max(kBurstTime, 2 * pass_);
    burst_ = uint32_t(std::clamp(bytes_per_ns(rate_kbps_) * double(span), double(min_burst_), 4294967295.0));
}

void TokenBucket::set_rate_kbps(uint32_t kbps, Time now) noexcept {
    tokens_ = tokens_at(now);
    last_ = now;
    rate_kbps_ = kbps;
    resize();
}

bool TokenBucket::allow(Time now, uint32_t bytes) const noexcept {
    if (rate_kbps_ == 0) return true;
    // A packet larger than what is left may go once the bucket is non-negative:
    // the debt is repaid before the next one (keeps the long-run rate exact).
    (void)bytes;
    return tokens_at(now) >= 0.0;
}

void TokenBucket::consume(Time now, uint32_t bytes) noexcept {
    if (rate_kbps_ == 0) return;
    // A new pass (every packet of one tx pass carries the same time). The depth
    // follows it before this pass's tokens are counted, so they are not capped
    // at the previous, shallower depth.
    if (now != last_send_ && last_send_ != 0 && now > last_send_ && now - last_send_ <= kMaxPassTime) {
        const Time gap = now - last_send_;
        pass_ = pass_ == 0 ? gap : Time(int64_t(pass_) + (int64_t(gap) - int64_t(pass_)) / 8);
        resize();
    }
    last_send_ = now;
    tokens_ = tokens_at(now) - double(bytes);
    last_ = now;
    before_first_ = false;
}

Time TokenBucket::release_time(Time now, uint32_t bytes) const noexcept {
    (void)bytes;
    if (rate_kbps_ == 0) return now;
    const double t = tokens_at(now);
    if (t >= 0.0) return now;
    return now + Time(-t / bytes_per_ns(rate_kbps_)) + 1;
}

}  // namespace mroce
