// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Two net_ring ports wired back to back in one process: A's TX queue q is
// B's RX queue q and the other way round. The EAL must be up before one is
// made, and every DpdkPort built on it must be gone before it is destroyed.
#pragma once

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ring.h>

#include "mroce/dpdk/port.hpp"

namespace mroce::test {

struct RingPortPair {
    std::vector<rte_ring*> ab, ba;
    uint16_t pid[2] = {};
    dpdk::MacAddr mac[2];
    uint32_t ip[2] = {0x0a000001, 0x0a000002};
    unsigned queues, ring_size;

    RingPortPair(const std::string& tag, unsigned nqueues, unsigned ring_slots)
        : ab(nqueues, nullptr), ba(nqueues, nullptr), queues(nqueues), ring_size(ring_slots) {
        for (unsigned q = 0; q < queues; ++q) {
            ab[q] = rte_ring_create(fmt::format("{}ab{}", tag, q).c_str(), ring_size, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
            ba[q] = rte_ring_create(fmt::format("{}ba{}", tag, q).c_str(), ring_size, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
            if (!ab[q] || !ba[q]) { free_rings(); throw dpdk::DpdkError("rte_ring_create"); }
        }
        const int pa = rte_eth_from_rings(fmt::format("{}_a", tag).c_str(), ba.data(), queues, ab.data(), queues, 0);
        const int pb = rte_eth_from_rings(fmt::format("{}_b", tag).c_str(), ab.data(), queues, ba.data(), queues, 0);
        if (pa < 0 || pb < 0) { free_rings(); throw dpdk::DpdkError("rte_eth_from_rings"); }
        pid[0] = uint16_t(pa);
        pid[1] = uint16_t(pb);
        for (int i = 0; i < 2; ++i) {
            rte_ether_addr a{};
            rte_eth_macaddr_get(pid[i], &a);
            std::memcpy(mac[i].data(), a.addr_bytes, 6);
        }
    }
    ~RingPortPair() { free_rings(); }
    RingPortPair(const RingPortPair&) = delete;
    RingPortPair& operator=(const RingPortPair&) = delete;

    // Side i's configuration: its port, address, the peer as neighbour (peer
    // handle 0), MTU 9000; `tweak` then sets queues, descriptors or caches,
    // and the pools are sized last: the minimum for that configuration, plus
    // our frames that wait in every one of the peer's RX rings.
    dpdk::PortConfig config(int i, const std::function<void(dpdk::PortConfig&)>& tweak = {}) const {
        dpdk::PortConfig c;
        c.port_id = pid[i];
        c.local_ip = ip[i];
        c.neighbours = {{ip[1 - i], mac[1 - i]}};
        c.mtu = 9000;
        if (tweak) tweak(c);
        const dpdk::PoolConfig need = dpdk::DpdkPort::min_pools(c);
        c.pools.rx_mbufs = need.rx_mbufs;
        c.pools.hdr_mbufs = need.hdr_mbufs + queues * ring_size;
        c.pools.ext_mbufs = need.ext_mbufs + queues * ring_size;
        return c;
    }

private:
    void free_rings() {
        for (rte_ring* r : ab) rte_ring_free(r);
        for (rte_ring* r : ba) rte_ring_free(r);
        ab.assign(queues, nullptr);
        ba.assign(queues, nullptr);
    }
};

}  // namespace mroce::test
