// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// mroce-sim's experiments in small (a few hosts, a few MiB): the qualitative
// results doc/results.md shows at scale, each compared within one run of
// this test, never against a timed threshold of the machine.
#include <catch2/catch.hpp>

#include <algorithm>
#include <initializer_list>
#include <string>

#include "run.hpp"
#include "scenario.hpp"

using namespace mroce;
using namespace mroce::simapp;

namespace {

const char* kRing = R"(
[scenario]
seed = 3
[fabric]
topology = planes
hosts = 4
planes = 1
spines = 2
link_gbps = 100
link_delay_ns = 1000
buffer_bytes = 1048576
ecn_threshold_bytes = 102400
[workload]
kind = ring_allreduce
bytes = 4194304
)";

std::string refusal(const std::string& text) {
    try {
        parse_scenario(text, "bad.conf");
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "(accepted)";
}

// Command-line style overrides (section.key=value), in order.
void override_all(Scenario& s, std::initializer_list<const char*> kvs) {
    for (const char* kv : kvs) override_scenario(s, kv);
}

// mroce and the baseline, each lossless and at 1% end-to-end loss.
struct FourRuns {
    RunResult m0, m1, r0, r1;
};
FourRuns lossless_and_lossy(Scenario s) {
    FourRuns f;
    f.m0 = run_scenario(s);
    override_scenario(s, "fabric.path_loss=0.01");
    f.m1 = run_scenario(s);
    override_scenario(s, "scenario.transport=roce");
    f.r1 = run_scenario(s);
    override_scenario(s, "fabric.path_loss=0");
    f.r0 = run_scenario(s);
    return f;
}
}  // namespace

TEST_CASE("a scenario with a bad key is refused naming the file, line and key", "[mroce-sim]") {
    const std::string unknown = refusal("[fabric]\nhosts = 4\nlink_gbsp = 100\n");
    CHECK(unknown.find("bad.conf:3") != std::string::npos);
    CHECK(unknown.find("'link_gbsp'") != std::string::npos);
    const std::string value = refusal("# c\n[workload]\nkind = allreduce_ring\n");
    CHECK(value.find("bad.conf:3") != std::string::npos);
    CHECK(value.find("'kind'") != std::string::npos);
    CHECK(value.find("ring_allreduce") != std::string::npos);  // says what it takes
    // Engine keys go through mroce.conf's own parser, with this file's lines.
    const std::string engine = refusal("[fabric]\nhosts = 2\ntopology = pair\n\n[engine]\npathz = 4\n");
    CHECK(engine.find("bad.conf:6") != std::string::npos);
    CHECK(engine.find("'pathz'") != std::string::npos);
    CHECK(refusal("[fabric]\nhosts = 4\nhosts = 5\n").find("repeated") != std::string::npos);
    CHECK(refusal("[event]\naction = plane_down\ntarget = 9\n").find("'target'") != std::string::npos);
    CHECK(refusal("[fabrik]\n").find("unknown section") != std::string::npos);
    // A good file parses, and command-line overrides reach engine keys too.
    Scenario s = parse_scenario(kRing, "ring.conf");
    override_scenario(s, "engine.paths=2");
    override_scenario(s, "fabric.path_loss=0.01");
    CHECK(s.engine.num_paths == 2);
    CHECK(s.fabric.path_loss == 0.01);
    CHECK(s.engine.rx_capacity_mbps == 100'000);  // from the fabric
    CHECK_THROWS_AS(override_scenario(s, "fabric.nope=1"), ConfigError);
}

TEST_CASE("ring all-reduce under 1% loss: mroce keeps its goodput, go-back-N does not", "[mroce-sim]") {
    Scenario s = parse_scenario(kRing, "ring");
    const auto [m0, m1, r0, r1] = lossless_and_lossy(s);
    for (const RunResult* r : {&m0, &m1, &r0, &r1}) {
        REQUIRE(r->completed);
        CHECK(r->failed_ops == 0);
        CHECK(r->ops == 4 * 6);
    }
    INFO("mroce " << m0.aggregate_gbps << " -> " << m1.aggregate_gbps << " Gbit/s, RoCEv2 " << r0.aggregate_gbps
                  << " -> " << r1.aggregate_gbps);
    // The loss really happened to both, and both lossless runs were clean.
    CHECK(m1.fabric_drops > 0);
    CHECK(r1.fabric_drops > 0);
    CHECK(m0.fabric_drops == 0);
    CHECK(r0.fabric_drops == 0);
    CHECK(m1.aggregate_gbps >= 0.85 * m0.aggregate_gbps);
    CHECK(r1.aggregate_gbps < 0.6 * r0.aggregate_gbps);
    CHECK(m1.aggregate_gbps > 2 * r1.aggregate_gbps);
}

TEST_CASE("N:1 incast converges: every sender completes, at fair shares", "[mroce-sim]") {
    Scenario s = parse_scenario(R"(
[fabric]
topology = star
hosts = 9
link_gbps = 100
link_delay_ns = 1000
buffer_bytes = 524288
ecn_threshold_bytes = 65536
[workload]
kind = incast
bytes = 2097152
)",
                                "incast");
    const RunResult r = run_scenario(s);
    REQUIRE(r.completed);
    CHECK(r.failed_ops == 0);
    CHECK(r.ops == 8);
    INFO("jain " << r.jain << ", receiver-side " << r.aggregate_gbps << " Gbit/s, drops " << r.fabric_drops
                 << ", peak queue " << r.max_queue_bytes);
    CHECK(r.jain >= 0.95);
    // The bottleneck stays busy: 8 x 2 MiB through one 100 Gbit/s port.
    CHECK(r.aggregate_gbps >= 70);
    CHECK(r.max_queue_bytes <= 524288);
}

TEST_CASE("a plane failure is absorbed with no failed operation, and the plane is used again", "[mroce-sim]") {
    Scenario s = parse_scenario(R"(
[fabric]
topology = planes
hosts = 4
planes = 2
spines = 2
link_gbps = 100
link_delay_ns = 1000
[engine]
paths = 4
[workload]
kind = ring_allreduce
bytes = 8388608
[event]
at_us = 100
action = plane_down
target = 1
[event]
at_us = 300
action = plane_up
target = 1
)",
                                "plane");
    const RunResult r = run_scenario(s);
    REQUIRE(r.completed);
    CHECK(r.failed_ops == 0);
    INFO("jct " << r.jct << " ns, plane packets after recovery " << r.plane_packets[0] << " / " << r.plane_packets[1]);
    CHECK(r.fabric_drops > 0);  // the failure cost packets
    REQUIRE(r.plane_packets.size() == 2);
    CHECK(r.jct > 300'000);     // the run outlived the outage
    CHECK(r.plane_packets[1] > r.plane_packets[0] / 4);  // back in use after it returned
    // Per-plane statistics: the packets lost to the failure are the failed plane's.
    REQUIRE(r.groups.size() == 2);
    CHECK(r.group_kind == "plane");
    CHECK(r.groups[1].drop_down > 0);
    CHECK(r.groups[0].drop_down == 0);
    CHECK(r.groups[0].tx_packets > 0);
}

TEST_CASE("planes scale: all-to-all over 2 planes carries about twice one plane's", "[mroce-sim]") {
    // Both directions of every host pair, 2 connections each: also checks
    // that such connections come up (R-CONN-14 would merge crossed ones).
    auto run = [](int planes) {
        Scenario s = parse_scenario(kRing, "a2a");
        override_scenario(s, "workload.kind=all_to_all");
        override_scenario(s, "workload.conns_per_pair=2");
        override_scenario(s, "fabric.planes=" + std::to_string(planes));
        override_scenario(s, "engine.paths=" + std::to_string(2 * planes));
        override_scenario(s, "workload.bytes=" + std::to_string(planes * (2 << 20)));  // same duration
        return run_scenario(s);
    };
    const RunResult one = run(1), two = run(2);
    REQUIRE(one.completed);
    REQUIRE(two.completed);
    CHECK(one.ops == 4 * 3 * 2);
    CHECK(two.failed_ops == 0);
    INFO("1 plane " << one.aggregate_gbps << " Gbit/s, 2 planes " << two.aggregate_gbps);
    CHECK(two.aggregate_gbps >= 1.8 * one.aggregate_gbps);
    REQUIRE(two.groups.size() == 2);
    CHECK(two.groups[1].tx_packets > two.groups[0].tx_packets / 2);  // both planes used
}

TEST_CASE("incast with receiver hints is fair from the second round trip on", "[mroce-sim]") {
    Scenario s = parse_scenario(R"(
[fabric]
topology = star
hosts = 17
link_gbps = 100
link_delay_ns = 1000
[workload]
kind = incast
bytes = 1048576
)",
                                "incast-hints");
    const RunResult r = run_scenario(s);
    REQUIRE(r.completed);
    CHECK(r.failed_ops == 0);
    INFO("jain from 2 RTTs " << r.jain_from_2rtt << ", overall " << r.jain << ", base RTT " << r.base_rtt
                             << " ns, drops " << r.fabric_drops << ", peak switch queue " << r.switch_max_queue_bytes);
    CHECK(r.base_rtt > 4'000);   // 2 hops, 1 us each way
    CHECK(r.jain_from_2rtt >= 0.95);
    CHECK(r.fabric_drops == 0);
    CHECK(r.switch_max_queue_bytes < (1u << 20));
    // Without hints the senders find their shares through loss and ECN alone.
    override_scenario(s, "engine.rate_hints=false");
    const RunResult no = run_scenario(s);
    REQUIRE(no.completed);
    INFO("without hints: jain from 2 RTTs " << no.jain_from_2rtt << ", drops " << no.fabric_drops);
    CHECK(no.jain_from_2rtt < r.jain_from_2rtt);
}

TEST_CASE("PFC in the fabric makes the RoCEv2 baseline's incast lossless by pausing", "[mroce-sim][pfc]") {
    Scenario s = parse_scenario(R"(
[scenario]
transport = roce
[fabric]
topology = star
hosts = 9
link_gbps = 100
buffer_bytes = 1048576
ecn_threshold_bytes = 65536
[workload]
kind = incast
bytes = 2097152
)",
                                "roce-incast");
    override_scenario(s, "fabric.buffer_bytes=262144");
    const RunResult lossy = run_scenario(s);
    override_scenario(s, "fabric.buffer_bytes=1048576");  // headroom for 8 ports' flight
    override_scenario(s, "fabric.pfc=true");
    const RunResult lossless = run_scenario(s);
    REQUIRE(lossy.completed);
    REQUIRE(lossless.completed);
    INFO("drops " << lossy.fabric_drops << " -> " << lossless.fabric_drops << ", pauses " << lossless.pfc_pauses);
    CHECK(lossy.fabric_drops > 0);
    CHECK(lossy.pfc_pauses == 0);
    CHECK(lossless.fabric_drops == 0);
    CHECK(lossless.pfc_pauses > 0);
    CHECK(lossless.pfc_paused_ns > 0);
}

TEST_CASE("a pipelined ring forwards each slice once it arrived: more goodput than step by step", "[mroce-sim]") {
    // Unpipelined, each step waits for the previous one's last byte; sliced,
    // a host forwards slice j as soon as it arrived, so the ring's steps overlap.
    Scenario s = parse_scenario(kRing, "ring");
    const RunResult steps = run_scenario(s);
    override_scenario(s, "workload.slices=8");
    override_scenario(s, "workload.slices_outstanding=8");
    const RunResult sliced = run_scenario(s);
    REQUIRE(steps.completed);
    REQUIRE(sliced.completed);
    CHECK(steps.ops == 4 * 6);
    CHECK(sliced.ops == 4 * 6 * 8);
    CHECK(sliced.failed_ops == 0);
    INFO("step by step " << steps.aggregate_gbps << " Gbit/s, sliced " << sliced.aggregate_gbps);
    CHECK(sliced.aggregate_gbps > 1.1 * steps.aggregate_gbps);  // 4 hosts: 307 -> 363
    // Every operation's own duration is reported, and none is longer than the job.
    REQUIRE(sliced.op_durations.size() == sliced.ops);
    for (Time d : sliced.op_durations) CHECK((d > 0 && d <= sliced.jct));
}

TEST_CASE("a repaired loss costs the pipelined ring less with a stream per slice, a NIC ring and short bursts", "[mroce-sim]") {
    // Issue 22 (a), doc/results.md: a slice whose loss is being repaired holds
    // back the completions of every later slice of its stream (R-CMPL-2), and
    // without a NIC model the ACKs and the resend wait behind the sender's
    // and receiver's self-built queues on their first links (with one, behind
    // at most the ring and one transmit burst).
    // 8 hosts at 400 Gbit/s: 128 KiB slices of ~2.6 us against an RTT of ~8 us.
    Scenario s = parse_scenario(kRing, "ring");
    override_all(s, {"fabric.hosts=8", "fabric.link_gbps=400", "workload.bytes=8388608", "workload.slices=8",
                          "workload.slices_outstanding=8", "fabric.path_loss=0.02"});
    const RunResult one = run_scenario(s);
    override_all(s, {"workload.streams=8", "fabric.nic_ring_bytes=4096", "fabric.host_burst=8"});
    const RunResult lanes = run_scenario(s);
    REQUIRE(one.completed);
    REQUIRE(lanes.completed);
    CHECK(lanes.failed_ops == 0);
    CHECK(lanes.ops == 8 * 14 * 8);
    INFO("one stream " << one.aggregate_gbps << " Gbit/s, 8 streams and a NIC ring " << lanes.aggregate_gbps);
    CHECK(lanes.aggregate_gbps > 1.15 * one.aggregate_gbps);  // 2042 -> 2624
    // The keys are checked: streams only for the ring, a ring size in range.
    CHECK_THROWS_WITH(override_scenario(s, "fabric.nic_ring_bytes=-1"), Catch::Contains("'nic_ring_bytes'"));
    CHECK_THROWS_WITH(override_scenario(s, "fabric.host_burst=0"), Catch::Contains("'host_burst'"));
    s = parse_scenario(kRing, "ring");
    override_scenario(s, "workload.kind=all_to_all");
    CHECK_THROWS_WITH(override_scenario(s, "workload.streams=4"), Catch::Contains("'streams'"));
}

TEST_CASE("redundant copies repair a pipelined ring's losses faster at 10% loss (R-TIMER-10)", "[mroce-sim]") {
    // Issue 22 (a), doc/results.md: at 10% loss nearly every slice has a
    // loss; a copy of each resend, and of the youngest packets when the
    // sender is idle, repairs it before the loss is known.
    Scenario s = parse_scenario(kRing, "ring");
    override_all(s, {"fabric.hosts=4", "fabric.link_gbps=400", "workload.bytes=4194304", "workload.slices=8",
                          "workload.slices_outstanding=8", "workload.streams=8", "fabric.nic_ring_bytes=4096",
                          "fabric.host_burst=8", "fabric.path_loss=0.1"});
    const RunResult off = run_scenario(s);
    override_scenario(s, "engine.tail_redundancy=true");
    const RunResult on = run_scenario(s);
    REQUIRE(off.completed);
    REQUIRE(on.completed);
    CHECK(on.failed_ops == 0);
    INFO("without copies " << off.aggregate_gbps << " Gbit/s, with " << on.aggregate_gbps);
    CHECK(on.aggregate_gbps > 1.08 * off.aggregate_gbps);  // 932 -> 1094
    CHECK(off.transport_stats.find("\"redundant_packets\": 0,") != std::string::npos);
    CHECK(on.transport_stats.find("\"redundant_packets\": 0,") == std::string::npos);
}

TEST_CASE("a hot link slows the baseline's ring QP that ECMP pins onto it; bad hot-link keys are named", "[mroce-sim]") {
    CHECK(refusal(std::string(kRing) + "\n[fabric]\n").find("repeated") != std::string::npos);
    Scenario s = parse_scenario(kRing, "ring");
    override_scenario(s, "fabric.hot_gbps=10");
    CHECK_THROWS_WITH(override_scenario(s, "fabric.hot_spine=2"), Catch::Contains("'hot_spine'"));
    s = parse_scenario(kRing, "ring");
    override_scenario(s, "fabric.hot_gbps=10");
    CHECK_THROWS_WITH(override_scenario(s, "fabric.hot_leaf=4"), Catch::Contains("'hot_leaf'"));
    CHECK(refusal("[fabric]\ntopology = star\nhot_gbps = 10\n").find("'hot_gbps'") != std::string::npos);
    s = parse_scenario(kRing, "ring");
    CHECK_THROWS_WITH(override_scenario(s, "fabric.hot_gbps=-1"), Catch::Contains("'hot_gbps'"));
    s = parse_scenario(kRing, "ring");
    override_scenario(s, "workload.kind=all_to_all");
    CHECK_THROWS_WITH(override_scenario(s, "workload.slices=4"), Catch::Contains("'slices'"));
    // The baseline's one QP out of host 0 crosses one of the 2 spines: with
    // leaf 0's link to that spine at a tenth of the rate, its ring is slower.
    s = parse_scenario(kRing, "ring");
    override_scenario(s, "scenario.transport=roce");
    const RunResult cool = run_scenario(s);
    override_scenario(s, "fabric.hot_gbps=10");
    double slowest = 0;
    for (int sp = 0; sp < 2; ++sp) {
        override_scenario(s, "fabric.hot_spine=" + std::to_string(sp));
        const RunResult hot = run_scenario(s);
        REQUIRE(hot.completed);
        slowest = std::max(slowest, double(hot.jct));
    }
    INFO("cool " << cool.jct << " ns, slowest hot " << slowest << " ns");
    CHECK(slowest > 1.5 * double(cool.jct));
}

namespace {

// 8 hosts, 4 per leaf (2 leaves): the leaves' uplinks are where an
// oversubscribed two-tier fat-tree congests.
const char* kFatTree = R"(
[scenario]
seed = 5
[fabric]
topology = fat_tree
tiers = 2
hosts = 8
hosts_per_leaf = 4
oversubscription = 1
link_gbps = 100
link_delay_ns = 1000
buffer_bytes = 262144
ecn_threshold_bytes = 65536
[engine]
paths = 4
[workload]
kind = all_to_all
bytes = 2097152
)";

const RunResult::TierStats& tier(const RunResult& r, const std::string& name) {
    for (const auto& t : r.tiers)
        if (t.name == name) return t;
    FAIL("no tier " << name);
    return r.tiers.front();
}

}  // namespace

TEST_CASE("fat-tree sizes are derived from hosts and the oversubscription; impossible ones are named", "[mroce-sim][fat-tree]") {
    Scenario s = parse_scenario(kFatTree, "ft");
    CHECK(s.fabric.spines == 4);  // 4 hosts per leaf, 1:1
    override_scenario(s, "fabric.oversubscription=4");
    CHECK(s.fabric.spines == 1);
    CHECK(s.engine.rx_capacity_mbps == 100'000);
    CHECK_THROWS_WITH(override_scenario(s, "fabric.oversubscription=3"), Catch::Contains("'oversubscription'"));
    s = parse_scenario(kFatTree, "ft");
    CHECK_THROWS_WITH(override_scenario(s, "fabric.hosts_per_leaf=3"), Catch::Contains("'hosts_per_leaf'"));
    s = parse_scenario(kFatTree, "ft");
    CHECK_THROWS_WITH(override_scenario(s, "fabric.hosts_per_leaf=8"), Catch::Contains("'hosts_per_leaf'"));  // one leaf
    s = parse_scenario(kFatTree, "ft");
    CHECK_THROWS_WITH(override_scenario(s, "fabric.spines=2"), Catch::Contains("'spines'"));
    s = parse_scenario(kFatTree, "ft");
    CHECK_THROWS_WITH(override_scenario(s, "fabric.tiers=4"), Catch::Contains("'tiers'"));
    s = parse_scenario(kFatTree, "ft");
    CHECK_THROWS_WITH(override_scenario(s, "fabric.leaves_per_pod=2"), Catch::Contains("'leaves_per_pod'"));  // tiers = 2
    s = parse_scenario(kFatTree, "ft");  // 2 leaves, 2 per pod by default: one pod
    CHECK_THROWS_WITH(override_scenario(s, "fabric.tiers=3"), Catch::Contains("'leaves_per_pod'"));
    s = parse_scenario(kFatTree, "ft");
    override_scenario(s, "fabric.hosts_per_leaf=2");
    override_scenario(s, "fabric.tiers=3");  // 4 leaves, 2 pods
    CHECK_THROWS_WITH(override_scenario(s, "fabric.leaves_per_pod=3"), Catch::Contains("'leaves_per_pod'"));
    CHECK(refusal("[fabric]\ntopology = planes\ntiers = 3\n").find("'tiers'") != std::string::npos);
    CHECK(refusal("[fabric]\ntopology = planes\noversubscription = 2\n").find("'oversubscription'") != std::string::npos);
    CHECK(refusal("[fabric]\ntopology = fat_tree\nhosts = 8\nhosts_per_leaf = 4\noversubscription = 0.5\n")
              .find("'oversubscription'") != std::string::npos);
}

TEST_CASE("an oversubscribed fat-tree congests at the leaf uplinks: less all-to-all goodput", "[mroce-sim][fat-tree]") {
    Scenario s = parse_scenario(kFatTree, "ft");
    const RunResult full = run_scenario(s);
    override_scenario(s, "fabric.oversubscription=4");
    const RunResult over = run_scenario(s);
    REQUIRE(full.completed);
    REQUIRE(over.completed);
    CHECK(full.ops == 8 * 7);
    CHECK(over.failed_ops == 0);
    const auto& fu = tier(full, "leaf_up");
    const auto& ou = tier(over, "leaf_up");
    INFO("1:1 " << full.aggregate_gbps << " Gbit/s (leaf uplinks: " << fu.links << " links, " << fu.drop_queue
                << " drops, " << fu.ce_marks << " CE), 4:1 " << over.aggregate_gbps << " Gbit/s (" << ou.links
                << " links, " << ou.drop_queue << " drops, " << ou.ce_marks << " CE)");
    CHECK(fu.links == 2 * 4);
    CHECK(ou.links == 2 * 1);
    CHECK(over.aggregate_gbps < 0.7 * full.aggregate_gbps);
    CHECK(ou.drop_queue + ou.ce_marks > 0);
    CHECK(ou.drop_queue + ou.ce_marks > 4 * (fu.drop_queue + fu.ce_marks));
    // The baseline congests there too.
    override_scenario(s, "scenario.transport=roce");
    const RunResult roce = run_scenario(s);
    REQUIRE(roce.completed);
    CHECK(tier(roce, "leaf_up").drop_queue + tier(roce, "leaf_up").ce_marks > 0);
}

TEST_CASE("a three-tier fat-tree routes every host pair over every aggregation and core link", "[mroce-sim][fat-tree]") {
    // 8 hosts, 2 per leaf, 2 leaves per pod: 2 pods of 2 leaves and 2
    // aggregation switches, 2 groups of 2 cores.
    Scenario s = parse_scenario(kFatTree, "ft3");
    override_scenario(s, "fabric.hosts_per_leaf=2");
    override_scenario(s, "fabric.tiers=3");
    override_scenario(s, "fabric.planes=2");
    override_scenario(s, "workload.bytes=1048576");
    const RunResult r = run_scenario(s);
    REQUIRE(r.completed);
    CHECK(r.ops == 8 * 7);
    CHECK(r.failed_ops == 0);
    REQUIRE(r.tiers.size() == 5);
    for (const auto& t : r.tiers) {
        INFO(t.name << ": " << t.links << " links, " << t.tx_packets << " packets, least " << t.min_link_tx_packets);
        CHECK(t.min_link_tx_packets > 0);
    }
    // per plane: 4 leaves x 2 aggregations; 2 pods x 2 aggregations x 2 cores
    CHECK(tier(r, "leaf_up").links == 2 * 4 * 2);
    CHECK(tier(r, "agg_up").links == 2 * 2 * 2 * 2);
    CHECK(tier(r, "core_down").links == 2 * 2 * 2 * 2);
    // Half the destinations of each host are in the other pod: the cores carry a fair part.
    CHECK(tier(r, "agg_up").tx_packets > tier(r, "leaf_up").tx_packets / 3);
    REQUIRE(r.plane_packets.size() == 2);
    CHECK(r.plane_packets[1] > 0);
}

TEST_CASE("tree all-reduce: reduce up, broadcast down, every byte placed; mroce beats go-back-N under loss", "[mroce-sim][tree]") {
    // 7 hosts: a full binary tree of depth 2; 8 slices, at most 4 in flight per host.
    Scenario s = parse_scenario(kRing, "tree");
    override_all(s, {"fabric.hosts=7", "workload.kind=tree_allreduce", "workload.bytes=2097152",
                          "workload.slices=8", "workload.slices_outstanding=4"});
    const auto [m0, m1, r0, r1] = lossless_and_lossy(s);
    for (const RunResult* r : {&m0, &m1, &r0, &r1}) {
        REQUIRE(r->completed);
        CHECK(r->failed_ops == 0);
        CHECK(r->ops == 2 * 6 * 8);
        // Every edge carries the buffer once up and once down.
        CHECK(r->placed_bytes == 2 * 6 * uint64_t(2097152));
        CHECK(r->algbw_gbps > 0);
    }
    // Goodput as the ring's: what each host sent / time; a leaf sends its
    // buffer once (up), an inner host 3 times (up, to two children), the root twice.
    const double leaf = m0.host_gbps[6], inner = m0.host_gbps[1], root = m0.host_gbps[0];
    CHECK(inner == Approx(3 * leaf));
    CHECK(root == Approx(2 * leaf));
    INFO("mroce " << m0.algbw_gbps << " -> " << m1.algbw_gbps << " Gbit/s algbw, RoCEv2 " << r0.algbw_gbps << " -> "
                  << r1.algbw_gbps);
    CHECK(m1.fabric_drops > 0);
    CHECK(r1.fabric_drops > 0);
    CHECK(m1.aggregate_gbps >= 0.8 * m0.aggregate_gbps);
    CHECK(m1.aggregate_gbps > 1.5 * r1.aggregate_gbps);
    CHECK(m1.jct < r1.jct);
    // slices belong to the all-reduces only.
    override_scenario(s, "workload.slices=1");
    override_scenario(s, "workload.kind=permutation");
    CHECK_THROWS_WITH(override_scenario(s, "workload.slices=2"), Catch::Contains("'slices'"));
}

TEST_CASE("a long/short mix reports both classes; mroce's short flows finish sooner than go-back-N's under loss", "[mroce-sim][mix]") {
    // 8 hosts: 0..3 each send 4 MiB to 4..7; 64 short flows of 32 KiB
    // arrive at 1 per us from hosts 4..7 to random others.
    Scenario s = parse_scenario(kRing, "mix");
    override_all(s, {"fabric.hosts=8", "workload.kind=mix", "workload.bytes=4194304", "workload.short_bytes=32768",
                          "workload.short_flows=64", "workload.short_rate_per_us=1", "fabric.path_loss=0.01"});
    const RunResult m = run_scenario(s);
    override_scenario(s, "scenario.transport=roce");
    const RunResult r = run_scenario(s);
    for (const RunResult* x : {&m, &r}) {
        REQUIRE(x->completed);
        CHECK(x->failed_ops == 0);
        CHECK(x->ops == 4 + 64);
        REQUIRE(x->classes.size() == 2);
        CHECK(x->classes[0].name == "long");
        CHECK(x->classes[0].durations.size() == 4);
        CHECK(x->classes[1].name == "short");
        CHECK(x->classes[1].durations.size() == 64);
        CHECK(x->placed_bytes == 4 * 4194304ull + 64 * 32768ull);
        CHECK(x->json(s).find("\"fct_us\": {\"long\": {\"count\": 4") != std::string::npos);
        CHECK(x->classes[1].pct(0.5) < x->classes[0].pct(0.5));  // short flows are short
    }
    INFO("short p50/p99: mroce " << m.classes[1].pct(0.5) << "/" << m.classes[1].pct(0.99) << " us, RoCEv2 "
                                 << r.classes[1].pct(0.5) << "/" << r.classes[1].pct(0.99) << " us; long p50 "
                                 << m.classes[0].pct(0.5) << " / " << r.classes[0].pct(0.5));
    CHECK(m.fabric_drops > 0);
    CHECK(r.fabric_drops > 0);
    CHECK(m.classes[1].pct(0.99) < r.classes[1].pct(0.99));
    // Same seed, same arrivals: the run is a function of the scenario.
    override_scenario(s, "scenario.transport=mroce");
    CHECK(run_scenario(s).classes[1].durations == m.classes[1].durations);
    // The mix's keys are checked.
    CHECK_THROWS_WITH(override_scenario(s, "workload.long_hosts=8"), Catch::Contains("'long_hosts'"));
    s = parse_scenario(kRing, "ring");
    CHECK_THROWS_WITH(override_scenario(s, "workload.short_bytes=4096"), Catch::Contains("'short_bytes'"));
    CHECK_THROWS_WITH(override_scenario(s, "workload.short_rate_per_us=0"), Catch::Contains("'short_rate_per_us'"));
    CHECK(refusal("[workload]\nkind = ring_allreduce\nshort_flows = 3\n").find("'short_flows'") != std::string::npos);
}

TEST_CASE("a RED-style ECN ramp marks less than a threshold at its low end; bad ramps are named", "[mroce-sim][red]") {
    // The 8:1 incast's bottleneck port: a threshold at 16 KiB marks every
    // packet that finds more; a ramp from 16 KiB to 512 KiB marks a fraction.
    const char* kIncast = R"(
[fabric]
topology = star
hosts = 9
link_gbps = 100
buffer_bytes = 1048576
ecn_threshold_bytes = 16384
[engine]
rate_hints = false
[workload]
kind = incast
bytes = 1048576
)";
    Scenario s = parse_scenario(kIncast, "red");
    const RunResult threshold = run_scenario(s);
    override_all(s, {"fabric.ecn_max_bytes=524288", "fabric.ecn_min_bytes=16384", "fabric.ecn_pmax=0.1"});
    const RunResult ramp = run_scenario(s);
    REQUIRE(threshold.completed);
    REQUIRE(ramp.completed);
    CHECK(ramp.failed_ops == 0);
    INFO("CE marks: threshold " << threshold.ce_marks << ", ramp " << ramp.ce_marks);
    CHECK(threshold.ce_marks > 0);
    CHECK(ramp.ce_marks > 0);
    CHECK(ramp.ce_marks < threshold.ce_marks);
    REQUIRE(ramp.groups.size() == 1);
    CHECK(ramp.groups[0].mean_queue_bytes > threshold.groups[0].mean_queue_bytes);  // a softer signal: a longer queue
    CHECK(refusal("[fabric]\necn_min_bytes = 1000\n").find("'ecn_min_bytes'") != std::string::npos);
    CHECK(refusal("[fabric]\necn_pmax = 0.5\n").find("'ecn_pmax'") != std::string::npos);
    CHECK(refusal("[fabric]\necn_min_bytes = 9000\necn_max_bytes = 9000\n").find("'ecn_max_bytes'") != std::string::npos);
    CHECK(refusal("[fabric]\necn_max_bytes = 9000\necn_pmax = 1.5\n").find("'ecn_pmax'") != std::string::npos);
}
