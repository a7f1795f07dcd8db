// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The UDP driver's side of the drive loop (mroce/drive_loop.hpp): UdpPort as
// its port, with an adaptive idle policy: busy-poll while traffic flows (a
// syscall-free spin is what keeps latency low), but after spin_ns without
// activity block in epoll until a datagram arrives or the engine's next
// deadline, so two endpoints sharing a 2-core machine do not starve each
// other or the application.
//
// Header-only and templated on the engine so the driver does not link the
// engine (and tests can drive it with a stand-in).
#pragma once

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "mroce/drive_loop.hpp"
#include "mroce/packet_io.hpp"
#include "mroce/udp/port.hpp"

namespace mroce::udp {

inline Time monotonic_ns() noexcept {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return Time(ts.tv_sec) * 1'000'000'000u + Time(ts.tv_nsec);
}

struct IdlePolicy {
    Time spin_ns = 50'000;            // keep polling this long after the last activity
    Time max_block_ns = 100'000'000;  // never block longer, so stop flags and app work get looked at
    // An idle pass inside the spin window, once yield_after_ns have passed without activity,
    // yields the CPU (sched_yield) before polling again: on a shared core the peer process
    // (the other mroce endpoint on loopback) runs instead of being polled against; with
    // nothing else runnable it returns at once. Not sooner: a reply expected within a round
    // trip (~10 us on loopback) would otherwise wait out the syscall. Off by default: under
    // load it bought bandwidth but cost round-trip latency (doc/history/issue5.md 5.2).
    bool yield = false;
    Time yield_after_ns = 20'000;
};

class IdleWaiter {
public:
    explicit IdleWaiter(IdlePolicy p = {}) : p_(p) {}

    // Call once per loop pass. active: the pass moved packets or did work.
    // deadline: when the caller must run again without input (UINT64_MAX: never).
    // Returns true if it blocked.
    // After work (active) now is not used (see DrivePort): the spin window
    // opens at the next idle pass.
    bool idle(UdpPort& port, bool active, Time now, Time deadline) {
        if (active) {
            spin_.reopen();
            return false;
        }
        const Time quiet = spin_.idle_for(now);
        if (quiet < p_.spin_ns || deadline <= now) {
            if (p_.yield && quiet >= p_.yield_after_ns) {
                ++yields_;
                sched_yield();
            }
            return false;
        }
        const Time t = std::min(deadline - now, p_.max_block_ns);
        ++blocks_;
        if (port.wait(t)) spin_.reopen();  // woken by I/O: spin again
        return true;
    }
    uint64_t blocks() const noexcept { return blocks_; }
    uint64_t yields() const noexcept { return yields_; }
    const IdlePolicy& policy() const noexcept { return p_; }

private:
    IdlePolicy p_;
    SpinWindow spin_;
    uint64_t blocks_ = 0;
    uint64_t yields_ = 0;
};

// UdpPort as the drive loop's port (mroce/drive_loop.hpp): its sockets, its
// idle policy and the monotonic clock.
class UdpDrivePort {
public:
    // Larger transmit bursts give each path socket longer GSO runs (the engine spreads a
    // burst over its paths, and every path is a separate sendmmsg).
    static constexpr size_t kRxBurst = 64;
    static constexpr size_t kTxBurst = 128;

    explicit UdpDrivePort(UdpPort& port, IdlePolicy p = {}) : port_(&port), waiter_(p) {}
    size_t recv_burst(RxPacket* out, size_t max) { return port_->recv_burst(out, max); }
    size_t send_burst(const TxPacket* pkts, size_t n, uint32_t* unsent) { return port_->send_burst(pkts, n, unsent); }
    Time now() const noexcept { return monotonic_ns(); }
    bool idle(bool active, Time now, Time deadline) { return waiter_.idle(*port_, active, now, deadline); }
    void wake() { port_->wake(); }
    UdpPort& udp() noexcept { return *port_; }
    const UdpPort& udp() const noexcept { return *port_; }
    const IdleWaiter& waiter() const noexcept { return waiter_; }

private:
    UdpPort* port_;
    IdleWaiter waiter_;
};

// One engine over one UdpPort: EngineLoop<Engine> loop(UdpDrivePort(port, policy), engine).
template <PacketEngine Eng>
using EngineLoop = DriveLoop<UdpDrivePort, Eng>;

}  // namespace mroce::udp
