// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// PlanePorts: a multi-plane DPDK device (doc/spec.md R-PLANE-1..7), one
// DpdkPort per plane: plane p is its own ethdev (a NIC port, or a vdev such
// as net_memif), with its own local IPv4 address and neighbour table.
//
// Peer handles. A port's peer handle is the index of the source address in
// its own neighbour table; the engine needs one handle per remote device,
// whatever plane a packet uses (R-PLANE-2). Each address (plane p, neighbour
// j) starts as a handle of its own (handle base[p] + j, so a one-plane device
// keeps the port's handles); a peer's addresses become one handle when they
// are learnt together: from the addresses the application names at connect
// (add_peer, R-PLANE-6) or from the plane block of a CONNECT_* received from
// one of them (R-PLANE-1). An address already joined to a peer stays that
// peer's. All tables are sized at construction: learning on the receive path
// writes, never allocates.
//
// TX: a packet leaves on the port of TxPacket::plane, to the peer's address
// on that plane; a plane where the peer's address is not known (a one-plane
// peer) sends from the plane its handle came from. RX: every plane's port,
// starting one plane further each call; RxPacket::plane is the port's plane.
// One plane: both pass straight through to the port (no copy, no lookup).
//
// Threading: as DpdkPort, all calls from the one thread that drives the
// engine. The burst calls never allocate, lock, log or make system calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mroce/dpdk/port.hpp"
#include "mroce/packet_io.hpp"

namespace mroce::dpdk {

class PlanePorts {
public:
    static constexpr uint32_t kNoPeer = UINT32_MAX;

    // Plane p is ports[p] (1..wire::kMaxPlanes ports, not owned: they must
    // outlive this object). Throws DpdkError on a bad count.
    explicit PlanePorts(std::vector<DpdkPort*> ports);

    size_t num_planes() const noexcept { return ports_.size(); }
    DpdkPort& port(size_t plane) const noexcept { return *ports_[plane]; }

    // Handle of the peer whose address on `plane` is ip (host order), or kNoPeer.
    uint32_t peer_of(size_t plane, uint32_t ip) const noexcept;
    // Handle of ip on any plane (plane 0 first), or kNoPeer.
    uint32_t peer_of_any(uint32_t ip) const noexcept;
    // R-PLANE-6: one handle for a peer given by its address on planes
    // 0..n-1 (host order). known = how many of them it can be sent to (the
    // addresses in their plane's neighbour table; every one must be). Throws
    // DpdkError naming the address that is in no neighbour table.
    uint32_t add_peer(const uint32_t* ips, size_t n, uint8_t& known);
    // The address a handle was made from (its home plane and neighbour).
    bool peer_address(uint32_t h, uint32_t& ip, size_t& plane) const noexcept;
    // Planes of the peer whose address is known (0: unknown handle).
    size_t peer_planes(uint32_t h) const noexcept;

    // The device's send: returns the packets consumed; indices of those not
    // taken go to unsent, ascending.
    // One plane inline: straight to its port.
    size_t tx_burst(const TxPacket* pkts, size_t n, uint32_t* unsent) noexcept {
        return one_ ? one_->tx_burst_paths(pkts, n, unsent) : tx_burst_planes(pkts, n, unsent);
    }
    // The device's receive, over every plane. Data stays valid until the next rx_burst.
    size_t rx_burst(RxPacket* out, size_t max) noexcept {
        return one_ ? one_->rx_burst_queues(out, max) : rx_burst_planes(out, max);
    }
    void rx_release_all() noexcept;

    uint64_t peer_planes_learned() const noexcept { return learned_; }

private:
    size_t tx_burst_planes(const TxPacket* pkts, size_t n, uint32_t* unsent) noexcept;
    size_t rx_burst_planes(RxPacket* out, size_t max) noexcept;
    void join(uint32_t h, size_t plane, uint32_t nbr) noexcept;
    void learn(size_t plane, uint32_t from_nbr, uint32_t h, const RxPacket& r) noexcept;

    std::vector<DpdkPort*> ports_;
    DpdkPort* one_ = nullptr;        // the port when there is one plane
    std::vector<uint32_t> base_;     // handle of plane p's neighbour 0
    std::vector<uint32_t> rx_map_;   // address (base_[p] + j) -> handle
    std::vector<uint8_t> joined_;    // address joined to a peer's handle
    std::vector<uint32_t> nbr_;      // handle * planes + plane -> neighbour index there, or kNoPeer
    std::vector<uint8_t> home_;      // handle -> plane it came from
    std::vector<TxPacket> gather_;   // planes x kChunk: one plane's packets of a chunk
    std::vector<uint32_t> gather_idx_;
    std::vector<uint32_t> refused_;  // kChunk: a port's refused indices (in its gather)
    size_t rx_next_ = 0;
    uint64_t learned_ = 0;
};

}  // namespace mroce::dpdk
