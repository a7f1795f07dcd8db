// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// What a simulated host does when the fabric polls it: one pass of the drive
// loop (mroce/drive_loop.hpp) with the fabric as its port, then the time of
// its next poll. Internal to drivers/sim (fabric.cpp, engine_host.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "fabric.hpp"
#include "mroce/drive_loop.hpp"

namespace mroce::sim {

// Host h's side of the fabric as the drive loop's port. One poll hands over
// every datagram that has arrived by now, in bursts (kRxUntilEmpty); the
// fabric takes every packet sent, but the host's NIC ring, when it has one,
// stops the pass from taking more from the engine while it is full (tx_ready).
// Deferred placement: keep() holds a datagram's wire copy past rx_done for
// its PlaceJob until release().
class HostPort {
public:
    static constexpr bool kRxUntilEmpty = true;

    // One payload copy for the placement stage; slot: the kept wire copy.
    struct Copy {
        uint8_t* dst = nullptr;
        const uint8_t* src = nullptr;
        uint32_t len = 0;
        uint32_t token = 0;
        uint32_t slot = 0;
    };

    HostPort(Fabric::Impl& im, HostId h) : im_(&im), h_(h) {}
    size_t recv_burst(RxPacket* out, size_t max);
    void rx_done();
    Copy keep(const PlaceJob& j);
    void release(uint32_t slot);
    size_t send_burst(const TxPacket* pkts, size_t n, uint32_t* unsent);
    bool tx_ready();
    // This poll stopped at a full NIC ring; its resume poll is scheduled.
    bool stalled() const;

private:
    Fabric::Impl* im_;
    HostId h_;
};

class HostLoop {
public:
    virtual ~HostLoop() = default;
    // One pass at now; returns when to poll again without new input (kNever: not).
    virtual Time poll(Time now) = 0;
};

// The drive loop of one host over engine Eng (an Engine, or an Endpoint for
// the fabric's own tests), owning the stages of its policy (NoStage: inline).
template <class Eng, class Placement = NoStage, class Cc = NoStage>
class HostLoopOf final : public HostLoop {
public:
    HostLoopOf(HostPort port, Eng& eng, size_t burst, Placement placement = {}, Cc cc = {})
        : placement_(std::move(placement)), cc_(std::move(cc)),
          loop_(port, eng, Pipeline<Placement, Cc>{&placement_, &cc_}, Bursts{burst, burst}) {}
    Time poll(Time now) override {
        loop_.step(now);
        return loop_.port().stalled() ? kNever : loop_.next_deadline(now);
    }

private:
    [[no_unique_address]] Placement placement_;
    [[no_unique_address]] Cc cc_;
    DriveLoop<HostPort, Eng, Pipeline<Placement, Cc>> loop_;
};

}  // namespace mroce::sim
