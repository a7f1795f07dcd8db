// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Fabric::add_host(Engine&): the real engine as a simulated host, driven by
// the drive loop (host_loop.hpp) in the arrangement its config names.
#include <algorithm>
#include <deque>
#include <memory>
#include <utility>

#include "fabric.hpp"
#include "host_loop.hpp"
#include "mroce/engine.hpp"

namespace mroce::sim {

namespace {

// EngineConfig::offload_cc: the host's congestion-control core is a separate
// stage (R-CC-8, architecture 4.2), modelled as another lcore one ring
// transit away: a record reaches it kCcTransit after the engine queued it,
// and its view is back at the engine the same instant.
class ModelledCcStage {
public:
    static constexpr Time kCcTransit = 1'000;

    explicit ModelledCcStage(const CcConfig& cfg) : core_(cfg) {}
    size_t exchange(Engine& engine, Time now) {
        size_t moved = 0;
        for (; !waiting_.empty() && waiting_.front().first + kCcTransit <= now; ++moved) {
            const CcView v = core_.apply_one(waiting_.front().second);
            waiting_.pop_front();
            engine.cc_update(&v, 1);
        }
        CcFeedback fb[64];
        for (size_t n; (n = engine.take_cc_feedback(fb, 64)) > 0; moved += n)
            for (size_t i = 0; i < n; ++i) waiting_.emplace_back(now, fb[i]);
        return moved;
    }
    Time deadline(Time now) const {
        return waiting_.empty() ? kNever : std::max(now + 1, waiting_.front().first + kCcTransit);
    }

private:
    CcCore core_;
    std::deque<std::pair<Time, CcFeedback>> waiting_;
};

}  // namespace

HostId Fabric::add_host(Engine& engine, const HostConfig& cfg) {
    const HostId id = new_host(cfg);
    const HostPort port(*impl_, id);
    if (engine.config().offload_cc)
        attach(id, std::make_unique<HostLoopOf<Engine, NoStage, ModelledCcStage>>(
                       port, engine, cfg.burst, NoStage{}, ModelledCcStage(engine.config().cc)));
    else
        attach(id, std::make_unique<HostLoopOf<Engine>>(port, engine, cfg.burst));
    return id;
}

}  // namespace mroce::sim
