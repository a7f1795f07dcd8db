// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Fabric::add_host(Engine&): the real engine as a simulated host.
#include <algorithm>
#include <deque>
#include <utility>
#include <vector>

#include "fabric.hpp"
#include "mroce/engine.hpp"

namespace mroce::sim {

namespace {

class EngineEndpoint final : public Endpoint {
public:
    explicit EngineEndpoint(Engine& engine) : engine_(engine), core_(engine.config().cc) {}
    void rx_burst(const RxPacket* pkts, size_t n, Time now) override {
        cc_stage(now);
        engine_.rx_burst(pkts, n, now);
        cc_collect(now);
    }
    size_t tx_burst(TxPacket* out, size_t max, Time now) override {
        cc_stage(now);
        const size_t n = engine_.tx_burst(out, max, now);
        cc_collect(now);
        return n;
    }
    Time next_deadline(Time now) override {
        Time d = engine_.next_deadline(now);
        if (!waiting_.empty()) d = std::min(d, std::max(now + 1, waiting_.front().first + kCcTransit));
        return d;
    }

private:
    // EngineConfig::offload_cc: the host's congestion-control core is a
    // separate stage (R-CC-8, architecture 4.2), modelled as another lcore
    // one ring transit away: a record reaches it kCcTransit after the engine
    // queued it, and its view is back at the engine the same instant.
    static constexpr Time kCcTransit = 1'000;
    void cc_collect(Time now) {
        if (!engine_.config().offload_cc) return;
        CcFeedback fb[64];
        for (size_t n; (n = engine_.take_cc_feedback(fb, 64)) > 0;)
            for (size_t i = 0; i < n; ++i) waiting_.emplace_back(now, fb[i]);
    }
    void cc_stage(Time now) {
        while (!waiting_.empty() && waiting_.front().first + kCcTransit <= now) {
            const CcView v = core_.apply_one(waiting_.front().second);
            waiting_.pop_front();
            engine_.cc_update(&v, 1);
        }
    }
    Engine& engine_;
    CcCore core_;
    std::deque<std::pair<Time, CcFeedback>> waiting_;
};

}  // namespace

HostId Fabric::add_host(Engine& engine, const HostConfig& cfg) {
    return add_host(std::make_unique<EngineEndpoint>(engine), cfg);
}

}  // namespace mroce::sim
