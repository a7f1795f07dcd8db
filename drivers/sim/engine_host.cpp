// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Fabric::add_host(Engine&): the real engine as a simulated host, driven by
// the drive loop (host_loop.hpp) in the arrangement its config names: run to
// completion, or the pipeline with a modelled placement stage
// (deferred_placement), a modelled CC stage (offload_cc), or both.
#include <algorithm>
#include <cstring>
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

// EngineConfig::deferred_placement: the host's payload copies run on a
// placement stage (architecture 4.2), modelled as another lcore one ring
// transit away: a copy is done kPlaceTransit after the engine handed it out,
// its datagram's wire copy kept until then, and its token is back at the
// engine the same instant, in the order the copies left.
class ModelledPlacementStage {
public:
    static constexpr Time kPlaceTransit = 1'000;

    explicit ModelledPlacementStage(HostPort port) : port_(port) {}
    void submit(const HostPort::Copy* c, size_t n, Time now) {
        for (size_t i = 0; i < n; ++i) waiting_.push_back(Waiting{now + kPlaceTransit, c[i]});
    }
    size_t take_done(uint32_t* tokens, size_t max, Time now) {
        size_t n = 0;
        for (; n < max && !waiting_.empty() && waiting_.front().ready <= now; ++n) {
            const HostPort::Copy& c = waiting_.front().copy;
            std::memcpy(c.dst, c.src, c.len);
            port_.release(c.slot);
            tokens[n] = c.token;
            waiting_.pop_front();
        }
        return n;
    }
    Time deadline(Time now) const {
        return waiting_.empty() ? kNever : std::max(now + 1, waiting_.front().ready);
    }

private:
    struct Waiting {
        Time ready;
        HostPort::Copy copy;
    };
    HostPort port_;
    std::deque<Waiting> waiting_;
};

template <class Placement, class Cc>
std::unique_ptr<HostLoop> engine_loop(HostPort port, Engine& engine, size_t burst, Placement placement, Cc cc) {
    return std::make_unique<HostLoopOf<Engine, Placement, Cc>>(port, engine, burst, std::move(placement),
                                                                std::move(cc));
}

}  // namespace

HostId Fabric::add_host(Engine& engine, const HostConfig& cfg) {
    const HostId id = new_host(cfg);
    const HostPort port(*impl_, id);
    const EngineConfig& ec = engine.config();
    std::unique_ptr<HostLoop> loop;
    if (ec.deferred_placement && ec.offload_cc)
        loop = engine_loop(port, engine, cfg.burst, ModelledPlacementStage(port), ModelledCcStage(ec.cc));
    else if (ec.deferred_placement)
        loop = engine_loop(port, engine, cfg.burst, ModelledPlacementStage(port), NoStage{});
    else if (ec.offload_cc)
        loop = engine_loop(port, engine, cfg.burst, NoStage{}, ModelledCcStage(ec.cc));
    else
        loop = engine_loop(port, engine, cfg.burst, NoStage{}, NoStage{});
    attach(id, std::move(loop));
    return id;
}

}  // namespace mroce::sim
