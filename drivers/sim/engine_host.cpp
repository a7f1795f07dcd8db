// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
#include <memory>

#include "fabric.hpp"
#include "mroce/engine.hpp"

namespace mroce::sim {

namespace {

class EngineEndpoint final : public Endpoint {
public:
    explicit EngineEndpoint(Engine& engine) : engine_(engine) {}
    void rx_burst(const RxPacket* pkts, size_t n, Time now) override { engine_.rx_burst(pkts, n, now); }
    size_t tx_burst(TxPacket* out, size_t max, Time now) override { return engine_.tx_burst(out, max, now); }
    Time next_deadline(Time now) override { return engine_.next_deadline(now); }

private:
    Engine& engine_;
};

}  // namespace

HostId Fabric::add_host(Engine& engine, const HostConfig& cfg) {
    return add_host(std::make_unique<EngineEndpoint>(engine), cfg);
}

}  // namespace mroce::sim
