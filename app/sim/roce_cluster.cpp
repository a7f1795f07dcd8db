// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The RoCEv2 baseline's hosts as a Cluster: one RoceEndpoint per host, QP
// pairs created out of band (no handshake on the wire, as with RDMA-CM
// before the measured phase).
#include <string>

#include "cluster.hpp"
#include "roce.hpp"

namespace mroce::simapp {

namespace {

class RoceCluster final : public Cluster {
public:
    RoceCluster(sim::Fabric& fab, const Scenario& s) {
        for (uint32_t i = 0; i < s.fabric.hosts; ++i) {
            eps_.push_back(std::make_unique<RoceEndpoint>(s.roce, s.fabric.link_bps));
            hosts_.push_back(fab.add_host(*eps_.back(), host_config(s)));
            index_of_.resize(hosts_.back() + 1, 0);
            index_of_[hosts_.back()] = i;
        }
    }
    size_t size() const override { return eps_.size(); }
    sim::HostId host(uint32_t i) const override { return hosts_.at(i); }
    bool connect(sim::Fabric&, const std::vector<std::pair<uint32_t, uint32_t>>& pairs, Time) override {
        for (const auto& [a, b] : pairs) {
            // One UDP source port per QP pair: ECMP pins it to one route. One
            // QP pair per host pair serves both directions and every
            // connection asked between them (conns_per_pair is mroce's).
            const uint16_t entropy = uint16_t(sim::splitmix64(uint64_t(a) << 32 | b) | 1);
            eps_.at(a)->create_qp(hosts_.at(b), entropy);
            eps_.at(b)->create_qp(hosts_.at(a), entropy);
        }
        pairs_ = pairs;
        return true;
    }
    void write(uint32_t c, uint64_t bytes, uint64_t tag, uint32_t) override {
        const auto [src, dst] = pairs_.at(c);
        eps_.at(src)->post_write(hosts_.at(dst), bytes, tag);
    }
    uint64_t conn_rx_bytes(uint32_t c) const override {
        const auto [src, dst] = pairs_.at(c);
        return eps_.at(dst)->rx_bytes_from(hosts_.at(src));
    }
    void poll(std::vector<Done>& out) override {
        for (auto& ep : eps_) {
            scratch_.clear();
            ep->take_completions(scratch_);
            for (const auto& c : scratch_) out.push_back(Done{c.tag, true});
        }
    }
    uint64_t rx_bytes(uint32_t i) const override { return eps_.at(i)->counters().rx_payload_bytes; }
    std::string stats_json() const override {
        RoceCounters t;
        for (const auto& ep : eps_) {
            const RoceCounters& c = ep->counters();
            t.data_sent += c.data_sent;
            t.data_resent += c.data_resent;
            t.acks += c.acks;
            t.naks_sent += c.naks_sent;
            t.cnps_sent += c.cnps_sent;
            t.timeouts += c.timeouts;
            t.out_of_order_drops += c.out_of_order_drops;
        }
        return "\"data_packets\": " + std::to_string(t.data_sent) + ", \"resent_packets\": " +
               std::to_string(t.data_resent) + ", \"naks\": " + std::to_string(t.naks_sent) +
               ", \"cnps\": " + std::to_string(t.cnps_sent) + ", \"timeouts\": " + std::to_string(t.timeouts) +
               ", \"out_of_order_drops\": " + std::to_string(t.out_of_order_drops) + ", \"failed_ops\": 0";
    }

private:
    std::vector<std::unique_ptr<RoceEndpoint>> eps_;
    std::vector<sim::HostId> hosts_;
    std::vector<uint32_t> index_of_;
    std::vector<RoceEndpoint::Completion> scratch_;
    std::vector<std::pair<uint32_t, uint32_t>> pairs_;
};

}  // namespace

std::unique_ptr<Cluster> make_roce_cluster(sim::Fabric& fab, const Scenario& s) {
    return std::make_unique<RoceCluster>(fab, s);
}

}  // namespace mroce::simapp
