// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Poll loop for one engine over one UdpPort, with an adaptive idle policy:
// busy-poll while traffic flows (a syscall-free spin is what keeps latency
// low), but after spin_ns without activity block in epoll until a datagram
// arrives or the engine's next deadline, so two endpoints sharing a 2-core
// machine do not starve each other or the application.
//
// Header-only and templated on the engine so the driver does not link the
// engine (and tests can drive it with a stand-in).
#pragma once

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>

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
    // load it bought bandwidth but cost round-trip latency (doc/performance.md 5.2).
    bool yield = false;
    Time yield_after_ns = 20'000;
};

class IdleWaiter {
public:
    explicit IdleWaiter(IdlePolicy p = {}) : p_(p) {}

    // Call once per loop pass. active: the pass moved packets or did work.
    // deadline: when the caller must run again without input (UINT64_MAX: never).
    // Returns true if it blocked.
    bool idle(UdpPort& port, bool active, Time now, Time deadline) {
        if (active || last_active_ == 0) {
            last_active_ = now;
            return false;
        }
        if (now - last_active_ < p_.spin_ns || deadline <= now) {
            if (p_.yield && now - last_active_ >= p_.yield_after_ns) {
                ++yields_;
                sched_yield();
            }
            return false;
        }
        const Time t = std::min(deadline - now, p_.max_block_ns);
        ++blocks_;
        if (port.wait(t)) last_active_ = monotonic_ns();  // woken by I/O: spin again
        return true;
    }
    uint64_t blocks() const noexcept { return blocks_; }
    uint64_t yields() const noexcept { return yields_; }
    const IdlePolicy& policy() const noexcept { return p_; }

private:
    IdlePolicy p_;
    Time last_active_ = 0;
    uint64_t blocks_ = 0;
    uint64_t yields_ = 0;
};

// What EngineLoop needs of an engine (mroce::Engine, or a stand-in in tests).
template <class E>
concept PacketEngine = requires(E& e, const E& ce, const RxPacket* rx, TxPacket* tx, size_t n, Time t) {
    e.rx_burst(rx, n, t);
    { e.tx_burst(tx, n, t) } -> std::convertible_to<size_t>;
    { ce.next_deadline(t) } -> std::convertible_to<Time>;
};

template <PacketEngine Eng>
class EngineLoop {
public:
    // Larger transmit bursts give each path socket longer GSO runs (the engine spreads a
    // burst over its paths, and every path is a separate sendmmsg).
    static constexpr size_t kRxBurst = 64;
    static constexpr size_t kTxBurst = 128;

    EngineLoop(UdpPort& port, Eng& eng, IdlePolicy p = {}) : port_(port), eng_(eng), waiter_(p) {}

    // One pass: receive a burst into the engine, then drain the engine's transmit
    // queue. Returns the packets moved in both directions.
    size_t step(Time now) {
        size_t moved = 0;
        const size_t nrx = port_.recv_burst(rx_, kRxBurst);
        if (nrx) eng_.rx_burst(rx_, nrx, now);
        moved += nrx;
        // Packets refused last pass (socket buffer full) get one more chance; after that the
        // engine's loss recovery owns them, as for any loss.
        if (nretry_) {
            const size_t n = nretry_;
            nretry_ = 0;
            const size_t s = port_.send_burst(retry_, n, unsent_);
            moved += s;
            retry_dropped_ += n - s;
            if (s < n) return moved;
        }
        for (;;) {
            const size_t n = eng_.tx_burst(tx_, kTxBurst, now);
            if (n == 0) break;
            const size_t s = port_.send_burst(tx_, n, unsent_);
            moved += n;
            if (s < n) {
                for (size_t i = 0; i < n - s; ++i) retry_[nretry_++] = tx_[unsent_[i]];
                break;  // the socket is full: let it drain before asking for more
            }
            if (n < kTxBurst) break;
        }
        return moved;
    }

    void idle(bool active, Time now) { waiter_.idle(port_, active, now, eng_.next_deadline(now)); }

    // Runs until stop() is true. app(now) runs once per pass (post work, poll CQs) and
    // returns true if it did something, which counts as activity for the idle policy.
    template <class App, class Stop>
    void run(App&& app, Stop&& stop) {
        while (!stop()) {
            Time now = monotonic_ns();
            bool active = step(now) != 0;
            active |= bool(app(now));
            idle(active, monotonic_ns());
        }
    }

    const IdleWaiter& waiter() const noexcept { return waiter_; }
    uint64_t retry_dropped() const noexcept { return retry_dropped_; }

private:
    UdpPort& port_;
    Eng& eng_;
    IdleWaiter waiter_;
    RxPacket rx_[kRxBurst];
    TxPacket tx_[kTxBurst];
    TxPacket retry_[kTxBurst];
    uint32_t unsent_[kTxBurst];
    size_t nretry_ = 0;
    uint64_t retry_dropped_ = 0;
};

}  // namespace mroce::udp
