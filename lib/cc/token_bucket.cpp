// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Sender pacing toward the receiver's fair-share hint (R-HINT-5).
#include <algorithm>

#include "mroce/cc.hpp"

namespace mroce {

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

// consume's first packet of a pass (now != last_send_). The depth follows the
// pass before this pass's tokens are counted, so they are not capped at the
// previous, shallower depth.
void TokenBucket::new_pass(Time now) noexcept {
    if (last_send_ != 0 && now > last_send_ && now - last_send_ <= kMaxPassTime) {
        const Time gap = now - last_send_;
        pass_ = pass_ == 0 ? gap : Time(int64_t(pass_) + (int64_t(gap) - int64_t(pass_)) / 8);
        resize();
    }
    last_send_ = now;
}

Time TokenBucket::release_time(Time now, uint32_t bytes) const noexcept {
    (void)bytes;
    if (rate_kbps_ == 0) return now;
    const double t = tokens_at(now);
    if (t >= 0.0) return now;
    return now + Time(-t / bytes_per_ns(rate_kbps_)) + 1;
}

}  // namespace mroce
