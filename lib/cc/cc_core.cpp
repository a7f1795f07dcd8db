// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The congestion-control core (R-CC-8): every path's window, fed by
// CcFeedback records and publishing CcViews, whether it runs inline on the
// engine's thread or on its own lcore.
#include <algorithm>

#include "mroce/cc.hpp"

namespace mroce {

CcCore::CcCore(const CcConfig& cfg, size_t slots_hint) : cfg_(cfg) { slots_.reserve(slots_hint); }

CcView CcCore::view_of(const PathWindow& w, uint32_t slot, uint32_t gen, uint32_t timeouts) noexcept {
    CcView v;
    v.slot = slot;
    v.gen = gen;
    v.timeouts = timeouts;
    v.cwnd = w.cwnd();
    v.rounds_since_mark = w.rounds_since_mark();
    v.rounds = uint32_t(w.rounds());
    v.cuts = uint32_t(w.cuts());
    return v;
}

CcView CcCore::fresh_view(const CcConfig& cfg, uint32_t slot, uint32_t gen, double initial) {
    PathWindow w(cfg);
    if (initial > 0) w.set_initial(initial);
    return view_of(w, slot, gen);
}

// One record: the engine's inline CC applies one per ACK (apply_one), with
// no loop and no output array around it (issue 24).
CcView CcCore::apply_one(const CcFeedback& f) {
    if (f.slot >= slots_.size()) slots_.resize(size_t(f.slot) + 1, Slot{PathWindow(cfg_), 0, 0, false});
    Slot& s = slots_[f.slot];
    if (!s.used || s.gen != f.gen) {
        // A new path (or a new incarnation of the slot): records of the
        // old one may still be on the ring behind us, never ahead.
        s.w = PathWindow(cfg_);
        s.gen = f.gen;
        s.timeouts = 0;
        s.used = true;
    }
    PathWindow& w = s.w;
    switch (f.kind) {
    case CcEvent::ack:
        if (f.undo) w.on_spurious_timeout(f.marked > 0);  // before this ack's own update (R-CC-9)
        for (uint32_t k = 0; k < f.losses; ++k) w.on_loss();
        if (f.rtt) w.on_rtt(f.rtt);
        w.on_ack(f.acked, cfg_.ecn ? f.marked : 0, f.ack_psn, f.snd_nxt);
        if (f.hint_kbps) {
            // R-HINT-7: pacing at the hint cannot drain a queue that windows
            // sized before the first hint already built (an incast's first
            // flights): it drains only at capacity minus the sum of hints. So
            // each path is also capped at twice its share of hint x unqueued
            // (minimum) RTT, never below 2 packets: a path a hostile or stale
            // ack misjudges must keep enough window to recover.
            double lim = 0;
            if (w.min_rtt() && f.active_paths && f.pkt_bytes) {
                const double bytes =
                    double(f.hint_kbps) * 125.0 / 1e9 * double(w.min_rtt()) / double(f.active_paths);
                lim = std::max(2.0, 2.0 * bytes / double(f.pkt_bytes));
            }
            w.set_limit(lim);
        } else {
            w.set_limit(0);
        }
        break;
    case CcEvent::timeout:
        w.on_timeout();
        ++s.timeouts;
        break;
    case CcEvent::initial: w.set_initial(f.initial); break;
    case CcEvent::reset: w.reset(); break;
    }
    ++records_;
    return view_of(w, f.slot, f.gen, s.timeouts);
}

void CcCore::apply(const CcFeedback* in, size_t n, CcView* out) {
    for (size_t i = 0; i < n; ++i) out[i] = apply_one(in[i]);
}

}  // namespace mroce
