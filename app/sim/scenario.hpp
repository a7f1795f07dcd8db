// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// A mroce-sim scenario: fabric, transport, workload and timed events, read
// from an INI-like file (format: doc/results.md, "Scenario files"). Every
// error names the file, the line and the key.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mroce/api.hpp"
#include "mroce/engine.hpp"

namespace mroce::simapp {

enum class TopologyKind { pair, star, planes, fat_tree };
enum class TransportKind { mroce, roce };
enum class WorkloadKind { ring_allreduce, tree_allreduce, incast, all_to_all, permutation, mix };
enum class EventAction { plane_down, plane_up, link_down, link_up };

struct FabricSpec {
    TopologyKind topology = TopologyKind::planes;
    uint32_t hosts = 8;
    uint16_t planes = 1;
    uint16_t spines = 4;
    uint32_t hosts_per_leaf = 1;
    uint16_t pair_paths = 4;         // topology = pair: parallel paths
    bool spines_given = false;       // fat_tree derives spines; saying it is refused
    // topology = fat_tree (planes of leaf-spine, drivers/sim build_planes):
    // tiers 2 or 3; oversubscription = the leaves' downlink:uplink capacity,
    // reached by fewer uplinks (spines = hosts_per_leaf / oversubscription,
    // derived by check()); tiers = 3: pods of leaves_per_pod leaves, each
    // aggregation switch with leaves_per_pod core uplinks (non-blocking above
    // the leaves).
    uint16_t tiers = 2;
    double oversubscription = 1;
    uint32_t leaves_per_pod = 0;     // tiers = 3 (0: 2)
    uint64_t link_bps = 100'000'000'000;
    Time link_delay = 1'000;         // ns per link
    uint64_t buffer_bytes = 1 << 20; // per output queue
    uint64_t ecn_bytes = 100 << 10;  // CE-mark above this backlog
    // RED-style ramp instead (ecn_max_bytes > 0): mark with probability
    // rising linearly from 0 at ecn_min_bytes to ecn_pmax at ecn_max_bytes, always above.
    uint64_t ecn_min_bytes = 0, ecn_max_bytes = 0;
    double ecn_pmax = 1;
    double link_loss = 0;            // every link
    double path_loss = 0;            // once per end-to-end traversal (the sender's first hop)
    uint32_t overhead_bytes = 42;    // Ethernet + IPv4 + UDP per datagram
    bool pfc = false;                // priority flow control (RoCEv2 runs)
    uint64_t pfc_xoff_bytes = 32 << 10;   // per ingress port: pause it above this
    uint64_t pfc_xon_bytes = 16 << 10;    // ... resume it below this
    // One hot link (topology = planes or fat_tree): plane 0's link between leaf hot_leaf
    // and spine hot_spine, both directions, runs at hot_gbps (0: none).
    uint64_t hot_bps = 0;
    uint32_t hot_leaf = 0;
    uint16_t hot_spine = 0;
    // Host NIC (both transports): a transmit ring of this many bytes in front
    // of the host's links, drained at their rate (all planes'); the host's
    // transport is not asked for packets while it is full, so its ACKs and
    // retransmissions wait behind at most this much. 0: no NIC model (every
    // packet the transport releases queues on the host's first link).
    uint64_t nic_ring_bytes = 0;
    // Packets per receive and transmit burst of a host's drive loop: what an
    // ACK or a resend the transport makes may wait behind in one pass.
    uint32_t host_burst = 32;
};

struct RoceSpec {
    uint32_t mtu = 4096;             // payload per packet
    Time rto = 1'000'000;            // go-back-N timeout (ns)
    uint32_t max_inflight = 4096;    // packets per QP
    bool dcqcn = true;
};

struct WorkloadSpec {
    WorkloadKind kind = WorkloadKind::ring_allreduce;
    uint64_t bytes = 8 << 20;        // ring, all_to_all, permutation: per host; incast: per sender
    uint32_t chunk_bytes = 1 << 20;  // largest single WRITE
    uint32_t conns_per_pair = 1;     // all_to_all, permutation: connections per (src, dst), bytes split among them
    // ring_allreduce, NCCL-style pipelining: each step's bytes/N in `slices`
    // WRITEs; slice j of step k+1 starts once slice j of step k has arrived,
    // at most `slices_outstanding` WRITEs in flight per sender (0: no cap).
    // slices = 1, slices_outstanding = 0: one WRITE per step (the unpipelined ring).
    uint32_t slices = 1;
    uint32_t slices_outstanding = 0;
    // ring_allreduce: streams (QPs) per neighbour connection, slice j on
    // stream j % streams, so a repaired slice holds back only the completions
    // of its own stream (send completions are in post order per stream,
    // R-CMPL-2), as NCCL spreads a channel over several QPs. mroce only: the
    // baseline keeps one QP per neighbour.
    uint32_t streams = 1;
    Time time_limit = 10'000'000'000;
    // mix: hosts 0 .. long_hosts-1 each write `bytes` to host (i + N/2) mod N
    // (long flows, a permutation) while short_flows WRITEs of short_bytes
    // arrive as a Poisson process of short_rate_per_us (all hosts together)
    // at the other hosts, each from a host drawn at random among them to a
    // host drawn at random among all but itself (seeded).
    uint32_t long_hosts = UINT32_MAX;  // UINT32_MAX: hosts / 2
    uint64_t short_bytes = 64 << 10;
    uint32_t short_flows = 64;
    double short_rate_per_us = 0.5;
};
inline uint32_t long_hosts(const WorkloadSpec& w, uint32_t hosts) noexcept {
    return w.long_hosts == UINT32_MAX ? hosts / 2 : w.long_hosts;
}

struct EventSpec {
    size_t line = 0;
    Time at = 0;
    EventAction action = EventAction::plane_down;
    uint32_t target = 0;             // plane index, or host index for a host link
};

struct Scenario {
    std::string origin;
    uint64_t seed = 1;
    FabricSpec fabric;
    TransportKind transport = TransportKind::mroce;
    EngineConfig engine;             // [engine]: config/mroce.conf's keys, the engine's own defaults
    bool engine_rx_capacity_given = false;  // else rx_capacity_mbps = the host's link capacity
    std::vector<std::string> engine_lines;  // the file, [engine] lines kept, others blank (for overrides)
    RoceSpec roce;
    WorkloadSpec workload;
    std::vector<EventSpec> events;
    Time sample_interval = 0;        // time series period (0: none)
    Time slice = 2'000;              // how often the workload reaps completions
};

// Throws ConfigError("file:line: key 'k': why (got 'v')") on any error.
Scenario parse_scenario(std::string_view text, const std::string& origin = "<scenario>");
Scenario load_scenario(const std::string& path);
// "key=value" overrides as from the command line, e.g. "fabric.path_loss=0.01".
void override_scenario(Scenario& s, const std::string& assignment);

// planes or fat_tree: build_planes' leaf-spine planes (plane events, hot link).
inline bool leaf_spine(const FabricSpec& f) noexcept {
    return f.topology == TopologyKind::planes || f.topology == TopologyKind::fat_tree;
}
inline uint32_t pod_leaves(const FabricSpec& f) noexcept { return f.leaves_per_pod ? f.leaves_per_pod : 2; }

const char* to_string(TransportKind k) noexcept;
const char* to_string(WorkloadKind k) noexcept;

}  // namespace mroce::simapp
