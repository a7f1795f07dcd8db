// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Run-to-completion loop for one engine over one DpdkPort queue pair, on one
// lcore. Header-only and templated on the engine so the driver does not link
// the engine (and tests can put a stand-in there). It busy-polls: an lcore is
// dedicated to it, so there is nothing to gain from blocking.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

#include <rte_cycles.h>

#include "mroce/dpdk/port.hpp"
#include "mroce/packet_io.hpp"

namespace mroce::dpdk {

// Nanoseconds from the TSC: no system call, monotonic on one machine.
class TscClock {
public:
    TscClock() : mult_((uint64_t(1'000'000'000) << 32) / rte_get_tsc_hz()) {}
    Time now() const noexcept { return Time((unsigned __int128)rte_get_tsc_cycles() * mult_ >> 32); }

private:
    uint64_t mult_;   // ns per cycle, 32.32 fixed point
};

template <class E>
concept PacketEngine = requires(E& e, const E& ce, const RxPacket* rx, TxPacket* tx, size_t n, Time t) {
    e.rx_burst(rx, n, t);
    { e.tx_burst(tx, n, t) } -> std::convertible_to<size_t>;
    { ce.next_deadline(t) } -> std::convertible_to<Time>;
};

// The transmit half of an engine loop, shared by EngineLoop and
// PipelineLoop: the engine's queue to one TX queue, in bursts. Packets the
// TX ring refused get one more chance on the next pass; after that the
// engine's loss recovery owns them, as for any loss.
class TxPump {
public:
    static constexpr size_t kBurst = 64;

    // Returns the packets moved (handed to the port, and taken from the engine).
    template <PacketEngine Eng>
    size_t pump(DpdkPort& port, uint16_t txq, Eng& eng, Time now) {
        size_t moved = 0;
        if (nretry_) {
            const size_t n = nretry_;
            nretry_ = 0;
            const size_t s = port.tx_burst(txq, retry_, n);
            moved += s;
            retry_dropped_ += n - s;
            if (s < n) return moved;
        }
        for (;;) {
            const size_t n = eng.tx_burst(tx_, kBurst, now);
            if (n == 0) break;
            const size_t s = port.tx_burst(txq, tx_, n);
            moved += n;
            if (s < n) {
                for (size_t i = s; i < n; ++i) retry_[nretry_++] = tx_[i];
                break;   // the ring is full: let it drain before asking for more
            }
            if (n < kBurst) break;
        }
        return moved;
    }
    uint64_t retry_dropped() const noexcept { return retry_dropped_; }

private:
    TxPacket tx_[kBurst];
    TxPacket retry_[kBurst];
    size_t nretry_ = 0;
    uint64_t retry_dropped_ = 0;
};

template <PacketEngine Eng>
class EngineLoop {
public:
    static constexpr size_t kRxBurst = 32;

    EngineLoop(DpdkPort& port, Eng& eng, uint16_t rxq = 0, uint16_t txq = 0)
        : port_(port), eng_(eng), rxq_(rxq), txq_(txq) {}

    // One pass: a received burst into the engine, then the engine's transmit
    // queue to the port. Returns the packets moved in both directions.
    size_t step(Time now) {
        size_t moved = port_.rx_burst(rxq_, rx_, kRxBurst);
        if (moved) eng_.rx_burst(rx_, moved, now);
        // The engine keeps nothing of an RxPacket past rx_burst: free the mbufs now.
        port_.rx_release(rxq_);
        moved += tx_.pump(port_, txq_, eng_, now);
        return moved;
    }

    // Runs until stop() is true; app(now) runs once per pass (post work, poll CQs).
    template <class App, class Stop>
    void run(App&& app, Stop&& stop) {
        while (!stop()) {
            const Time now = clock_.now();
            step(now);
            app(now);
        }
    }

    Time now() const noexcept { return clock_.now(); }
    uint64_t retry_dropped() const noexcept { return tx_.retry_dropped(); }

private:
    DpdkPort& port_;
    Eng& eng_;
    uint16_t rxq_, txq_;
    TscClock clock_;
    RxPacket rx_[kRxBurst];
    TxPump tx_;
};

}  // namespace mroce::dpdk
