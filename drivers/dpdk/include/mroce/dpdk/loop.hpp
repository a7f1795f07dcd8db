// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The DPDK driver's side of the drive loop (mroce/drive_loop.hpp): one
// DpdkPort RX/TX queue pair as its port, on one lcore, with the TSC clock.
// The port has no idle(): an lcore is dedicated to the loop, so it
// busy-polls. Header-only and templated on the engine so the driver does not
// link the engine (and tests can put a stand-in there).
#pragma once

#include <cstddef>
#include <cstdint>

#include <rte_cycles.h>

#include "mroce/dpdk/port.hpp"
#include "mroce/drive_loop.hpp"
#include "mroce/packet_io.hpp"

struct rte_mbuf;

namespace mroce::dpdk {

// Nanoseconds from the TSC: no system call, monotonic on one machine.
class TscClock {
public:
    TscClock() : mult_((uint64_t(1'000'000'000) << 32) / rte_get_tsc_hz()) {}
    Time now() const noexcept { return Time((unsigned __int128)rte_get_tsc_cycles() * mult_ >> 32); }

private:
    uint64_t mult_;   // ns per cycle, 32.32 fixed point
};

// One copy for the placement lcore (pipeline.hpp; 32 bytes, a multiple of 4
// as rte_ring_elem wants): the received mbuf travels with it.
struct PlaceWork {
    uint8_t* dst = nullptr;
    rte_mbuf* m = nullptr;
    uint32_t off = 0;     // of the payload in the frame (mbuf chain)
    uint32_t len = 0;
    uint32_t token = 0;
    uint32_t pad_ = 0;
};
static_assert(sizeof(PlaceWork) % 4 == 0);

// One RX queue and one TX queue of a DpdkPort as the drive loop's port.
class QueuePort {
public:
    static constexpr size_t kRxBurst = 32;
    static constexpr size_t kTxBurst = 64;

    explicit QueuePort(DpdkPort& port, uint16_t rxq = 0, uint16_t txq = 0) : port_(&port), rxq_(rxq), txq_(txq) {}

    size_t recv_burst(RxPacket* out, size_t max) noexcept { return port_->rx_burst(rxq_, out, max); }
    // Frees the burst's mbufs, but those keep() took.
    void rx_done() noexcept { port_->rx_release(rxq_); }
    size_t send_burst(const TxPacket* pkts, size_t n, uint32_t* unsent) noexcept {
        const size_t s = port_->tx_burst(txq_, pkts, n);
        for (size_t i = s; i < n; ++i) *unsent++ = uint32_t(i);
        return s;
    }
    // Pipeline: the mbuf of the job's datagram leaves rx_done and goes with
    // the copy; the placement lcore reads the payload from the frame (a job's
    // src may point into this queue's RX scratch, which the next burst reuses)
    // and frees the mbuf.
    PlaceWork keep(const PlaceJob& j) noexcept {
        PlaceWork w;
        uint32_t off = 0;
        w.m = port_->rx_take(rxq_, j.cookie, &off);
        w.dst = j.dst;
        w.off = off + j.src_off;
        w.len = j.len;
        w.token = j.token;
        return w;
    }
    Time now() const noexcept { return clock_.now(); }
    DpdkPort& dpdk() noexcept { return *port_; }

private:
    DpdkPort* port_;
    uint16_t rxq_, txq_;
    TscClock clock_;
};

// Every queue of a DpdkPort from one engine thread (tx_burst_paths,
// rx_burst_queues), as the native API's Transport drives it.
class AllQueuesPort {
public:
    explicit AllQueuesPort(DpdkPort& port) : port_(&port) {}
    size_t recv_burst(RxPacket* out, size_t max) noexcept { return port_->rx_burst_queues(out, max); }
    size_t send_burst(const TxPacket* pkts, size_t n, uint32_t* unsent) noexcept {
        return port_->tx_burst_paths(pkts, n, unsent);
    }
    Time now() const noexcept { return clock_.now(); }

private:
    DpdkPort* port_;
    TscClock clock_;
};

// Run to completion on one lcore: EngineLoop<Engine> loop(QueuePort(port), engine).
template <PacketEngine Eng>
using EngineLoop = DriveLoop<QueuePort, Eng>;

}  // namespace mroce::dpdk
