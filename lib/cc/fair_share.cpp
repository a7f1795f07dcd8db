// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Receiver-side max-min fair share of inbound capacity (R-HINT-1..R-HINT-4).
#include <algorithm>

#include "mroce/cc.hpp"

namespace mroce {

FairShare::FairShare(uint64_t capacity_kbps, Time interval) noexcept
    : capacity_kbps_(capacity_kbps),
      interval_(interval ? interval : 1),
      quiet_(std::max<Time>(interval_ / 8, 1)),
      free_cap_(double(capacity_kbps)) {}

uint32_t FairShare::add_sender(double weight) {
    for (uint32_t i = 0; i < senders_.size(); ++i) {
        if (!senders_[i].used) {
            senders_[i] = Sender{};
            senders_[i].weight = weight > 0 ? weight : 1.0;
            senders_[i].used = true;
            return i;
        }
    }
    Sender s;
    s.weight = weight > 0 ? weight : 1.0;
    s.used = true;
    senders_.push_back(s);
    nsenders_ = uint32_t(senders_.size());
    return nsenders_ - 1;
}

void FairShare::remove_sender(uint32_t idx) noexcept {
    if (idx < senders_.size()) {
        const bool was_active = senders_[idx].active;
        if (was_active) --active_;
        senders_[idx] = Sender{};
        if (was_active) recompute();  // membership changed: a connection's close, not per packet
    }
}

void FairShare::set_weight(uint32_t idx, double w) noexcept {
    if (idx < senders_.size() && w > 0) {
        senders_[idx].weight = w;
        if (senders_[idx].active) recompute();
    }
}

void FairShare::activate(Sender& s, Time now) noexcept {
    if (!s.active) {
        // R-HINT-2: a new sender counts at once, so the others' hints drop in
        // the same round trip instead of one interval later.
        // O(1) (issue 22): the newcomer is not demand-limited (no rate yet),
        // so it joins the unlimited senders' pool and every unlimited
        // sender's hint, free_cap_ / free_w_ * weight, drops at once; the
        // demand-limited keep their grants until the interval's full
        // water-filling (update) re-tests them against the smaller share.
        s.active = true;
        s.idle_intervals = 0;
        s.rate_kbps = 0;
        s.limited = false;
        ++active_;
        free_w_ += s.weight;
    }
    if (!started_) {
        started_ = true;
        interval_start_ = now;
    }
}

void FairShare::on_connect(uint32_t idx, Time now) noexcept {
    if (idx < senders_.size() && senders_[idx].used) activate(senders_[idx], now);
}

// R-HINT-2: a sender of unknown rate (it started this interval) that has gone
// quiet for an eighth of an interval (a short flow that ended) stops counting
// at once, not two intervals on: each such claimant took an equal share from
// the long flows at its receiver (a mix of long and short flows ran its long
// flows 4x slower). It is not given a rate from so short a look (that would
// make a sender that paused look demand-limited, R-HINT-4); its next byte
// makes it a newcomer again.
void FairShare::check_quiet(Time now) noexcept {
    quiet_check_ = now + quiet_;
    bool left = false, pending = false;
    for (Sender& s : senders_) {
        if (!s.active || s.rate_kbps != 0 || s.bytes == 0) continue;
        if (now - s.last_rx < quiet_) {
            pending = true;
            continue;
        }
        s.active = false;
        s.bytes = 0;
        s.idle_intervals = 0;
        --active_;
        left = true;
    }
    unknown_ = pending;
    if (left) recompute();
}

void FairShare::update(Time now) noexcept {
    if (!started_ || now - interval_start_ < interval_) return;
    for (Sender& s : senders_) {
        if (!s.used) continue;
        const Time span = now - s.measure_from;
        // Started sending less than an interval ago: its rate is not known
        // yet (0: not limited); the bytes count toward the next interval.
        if (s.bytes > 0 && s.rate_kbps == 0 && span < interval_) continue;
        s.rate_kbps = span ? double(s.bytes) * 8.0 / 1000.0 / (double(span) / 1e9) : 0.0;
        if (s.bytes == 0 && s.active) {
            // R-HINT-2: two silent intervals make a sender inactive.
            if (++s.idle_intervals >= 2) {
                s.active = false;
                --active_;
            }
        } else {
            s.idle_intervals = 0;
        }
        s.bytes = 0;
        s.measure_from = now;
    }
    interval_start_ = now;
    recompute();
}

void FairShare::recompute() noexcept {
    // Water-filling (R-HINT-4): senders that used clearly less than an equal
    // weighted share last interval are demand-limited; they get their rate
    // plus headroom and the remainder goes to the rest by weight.
    double cap = double(capacity_kbps_);
    double wsum = 0;
    for (Sender& s : senders_) {
        s.limited = false;
        if (s.active) wsum += s.weight;
    }
    free_cap_ = cap;
    free_w_ = 0;
    if (wsum <= 0) return;
    bool changed = true;
    for (Sender& s : senders_) s.share_kbps = 0;
    uint32_t rounds = 0;
    limited_.assign(senders_.size(), 0);
    std::vector<uint8_t>& limited = limited_;
    while (changed && rounds++ < senders_.size() + 1) {
        changed = false;
        const double per_w = cap / wsum;
        for (size_t i = 0; i < senders_.size(); ++i) {
            Sender& s = senders_[i];
            if (!s.active || limited[i]) continue;
            const double fair = per_w * s.weight;
            // Rate 0 = just arrived: not known to be limited.
            if (s.rate_kbps > 0 && s.rate_kbps * 2.0 < fair) {
                const double grant = std::min(fair, s.rate_kbps * 2.0);
                s.share_kbps = uint32_t(std::max(1.0, grant));
                s.grant_kbps = s.share_kbps;
                s.limited = true;
                limited[i] = 1;
                cap -= grant;
                wsum -= s.weight;
                changed = true;
            }
        }
        if (wsum <= 0) break;
    }
    free_cap_ = std::max(0.0, cap);
    free_w_ = std::max(0.0, wsum);
    if (wsum > 0) {
        const double per_w = std::max(0.0, cap) / wsum;
        for (size_t i = 0; i < senders_.size(); ++i) {
            Sender& s = senders_[i];
            if (s.active && !limited[i])
                s.share_kbps = uint32_t(std::min(4294967295.0, std::max(1.0, per_w * s.weight)));
        }
    } else if (cap > 0) {
        // Every active sender is demand-limited: the inbound link is not the
        // bottleneck, so nothing needs holding back. The capacity left over is
        // divided among them by weight on top of their grants; a grant of only
        // twice the measured rate would otherwise feed back (R-HINT-7 sizes the
        // window from the hint, the window limits the rate, the rate the next
        // grant) and ratchet a lone sender whose RTT rose above its minimum
        // down to the 2-packet floor.
        double w_all = 0;
        for (const Sender& s : senders_)
            if (s.active) w_all += s.weight;
        for (Sender& s : senders_)
            if (s.active)
                s.share_kbps = uint32_t(std::min(4294967295.0, double(s.share_kbps) + cap * s.weight / w_all));
    }
}

uint32_t FairShare::hint_kbps(uint32_t idx) const noexcept {
    if (idx >= senders_.size() || !senders_[idx].active) return uint32_t(std::min<uint64_t>(capacity_kbps_, 0xffffffffu));
    const Sender& s = senders_[idx];
    // A limited sender: its grant (share_kbps, with the leftover while no
    // one is unlimited); the others: the unlimited pool's per-weight share,
    // kept as two sums so that a sender joining costs O(1) (activate).
    if (s.limited) {
        if (free_w_ > 0) return uint32_t(s.grant_kbps);
        return s.share_kbps;
    }
    if (free_w_ <= 0) return s.share_kbps;
    return uint32_t(std::min(4294967295.0, std::max(1.0, free_cap_ / free_w_ * s.weight)));
}

}  // namespace mroce
