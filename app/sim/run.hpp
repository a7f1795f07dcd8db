// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// One mroce-sim run: builds the scenario's fabric and hosts, runs its
// workload and returns what it measured (JSON, CSV time series).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "scenario.hpp"

namespace mroce::simapp {

struct RunResult {
    bool completed = false;          // every operation finished before the time limit
    uint64_t ops = 0, failed_ops = 0;
    Time jct = 0;                    // job completion time from the workload's start, ns
    std::vector<double> host_gbps;   // payload each host sent / jct
    double aggregate_gbps = 0;
    uint64_t placed_bytes = 0;       // payload placed at all hosts during the workload, each byte once
    double algbw_gbps = 0;           // all-reduces: bytes (one host's buffer) / jct, NCCL's algorithm bandwidth
    std::vector<Time> op_times;      // each op's completion time (incast: per sender)
    std::vector<Time> op_durations;  // each op's completion time from its own post (flow completion time)
    // mix: flow completion times (from each op's own post) per class, "long" and "short".
    struct OpClass {
        std::string name;
        std::vector<Time> durations;
        double pct(double q) const;  // us; q = 1: the max
    };
    std::vector<OpClass> classes;
    double jain = 0;                 // incast: over the senders' rates (bytes / own completion time)
    std::string transport_stats;     // JSON members
    uint64_t fabric_drops = 0, ce_marks = 0, max_queue_bytes = 0;
    uint64_t switch_max_queue_bytes = 0;  // max_queue_bytes without the hosts' own links (NIC queues)
    uint64_t pfc_pauses = 0;         // PFC: pauses, and link-time spent paused (all links)
    Time pfc_paused_ns = 0;
    struct Sample {
        Time t;
        double gbps;
        std::vector<double> group_gbps;  // wire Gbit/s into each plane/path (its first-hop links)
        double jain = 0;                 // incast: over the senders' bytes placed in this sample
    };
    // Per plane (planes topology), parallel path (pair) or the whole fabric
    // (star): every link of it, both directions.
    struct GroupStats {
        uint64_t tx_packets = 0, drop_queue = 0, drop_loss = 0, drop_down = 0, ce_marks = 0;
        uint64_t max_queue_bytes = 0;     // switch ports (hosts' own links, their NIC queues, apart)
        uint64_t nic_max_queue_bytes = 0; // hosts' own first-hop links: what the NICs held
        double mean_queue_bytes = 0;      // backlog arrivals found at its switch ports, averaged over arrivals
    };
    // planes and fat_tree: per kind of link, all planes together (leaf_up:
    // leaf -> spine or aggregation; agg_up, core_down: tiers = 3 only;
    // spine_down: spine or aggregation -> leaf; leaf_down: leaf -> host).
    struct TierStats {
        std::string name;
        uint64_t links = 0, tx_packets = 0, min_link_tx_packets = 0;
        uint64_t drop_queue = 0, ce_marks = 0, max_queue_bytes = 0;
    };
    std::vector<TierStats> tiers;
    std::string group_kind;
    std::vector<GroupStats> groups;
    Time base_rtt = 0;               // one full data packet out, a header-only ack back, unloaded
    // incast: Jain index over the senders' bytes placed from 2 base RTTs
    // after the start to the first sender's completion (all still sending).
    double jain_from_2rtt = 0;
    // Per plane: data crossing its host links since its last plane_up event
    // (since the start if none): a recovered plane is used again.
    std::vector<uint64_t> plane_packets;
    std::vector<Sample> series;      // aggregate placed goodput per sample_interval
    double wall_s = 0;
    std::string json(const Scenario& s) const;
    void write_csv(std::FILE* f) const;
};

// progress: print a progress line on stderr about once a second of wall time.
RunResult run_scenario(const Scenario& s, bool progress = false);

}  // namespace mroce::simapp
