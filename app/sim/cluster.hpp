// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// What a workload sees of the hosts of one simulated run: N hosts of one
// transport (mroce's engine or the RoCEv2 baseline) already added to a
// fabric. Workloads post WRITEs between hosts and reap their completions;
// they know nothing of the transport behind them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fabric.hpp"
#include "scenario.hpp"

namespace mroce::simapp {

struct Done {
    uint64_t tag = 0;
    bool ok = true;
};

class Cluster {
public:
    virtual ~Cluster() = default;
    virtual size_t size() const = 0;
    virtual sim::HostId host(uint32_t index) const = 0;
    // Opens one connection (QP) from src to dst for each pair, in order
    // (connection c is pairs[c]; a pair may repeat, and both directions of
    // a host pair may be asked at once), and runs the fabric until all are
    // usable; false if they are not by limit.
    virtual bool connect(sim::Fabric& fab, const std::vector<std::pair<uint32_t, uint32_t>>& pairs, Time limit) = 0;
    // A WRITE of `bytes` over connection c (src into dst's memory) on its
    // stream `stream` (< workload.streams; a transport with one QP per
    // connection ignores it); completes (poll) with tag once dst has every byte.
    virtual void write(uint32_t c, uint64_t bytes, uint64_t tag, uint32_t stream = 0) = 0;
    // Completions since the last call, appended to out.
    virtual void poll(std::vector<Done>& out) = 0;
    // Payload bytes placed at host index (each byte once: goodput).
    virtual uint64_t rx_bytes(uint32_t index) const = 0;
    // Payload bytes connection c placed at its destination.
    virtual uint64_t conn_rx_bytes(uint32_t c) const = 0;
    // Transport counters as JSON members ("\"retransmits\": 12, ...");
    // mroce adds "paths": per path index, summed over its connections.
    virtual std::string stats_json() const = 0;
};

// How the fabric models a host of this scenario (fabric.host_burst, its NIC: fabric.nic_ring_bytes).
inline sim::HostConfig host_config(const Scenario& s) {
    sim::HostConfig hc;
    hc.burst = s.fabric.host_burst;
    if (s.fabric.nic_ring_bytes) {
        hc.nic_rate_bps = s.fabric.link_bps * (leaf_spine(s.fabric) ? s.fabric.planes : 1);
        hc.nic_ring_bytes = s.fabric.nic_ring_bytes;
        hc.nic_overhead_bytes = s.fabric.overhead_bytes;
    }
    return hc;
}

std::unique_ptr<Cluster> make_mroce_cluster(sim::Fabric& fab, const Scenario& s);
std::unique_ptr<Cluster> make_roce_cluster(sim::Fabric& fab, const Scenario& s);

}  // namespace mroce::simapp
