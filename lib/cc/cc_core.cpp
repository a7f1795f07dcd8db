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

CcView CcCore::fresh_view(const CcConfig& cfg, uint32_t slot, uint32_t gen, double initial) {
    PathWindow w(cfg);
    if (initial > 0) w.set_initial(initial);
    CcView v;
    view_of(w, slot, gen, 0, v);
    return v;
}

// The slot's window for a record of a path the core has not seen in this
// incarnation (f.gen), made fresh (slot_for's rare case).
CcCore::Slot& CcCore::new_slot(const CcFeedback& f) {
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
    return s;
}

void CcCore::apply_other(Slot& s, const CcFeedback& f) {
    PathWindow& w = s.w;
    switch (f.kind) {
    case CcEvent::ack: apply_ack(w, f); break;
    case CcEvent::timeout:
        w.on_timeout();
        ++s.timeouts;
        break;
    case CcEvent::initial: w.set_initial(f.initial); break;
    case CcEvent::reset: w.reset(); break;
    }
}

void CcCore::apply(const CcFeedback* in, size_t n, CcView* out) {
    for (size_t i = 0; i < n; ++i) out[i] = apply_one(in[i]);
}

}  // namespace mroce
