// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// mroce's engine as a Cluster: one Engine per host (Fabric::add_host, the
// same drive loop as every other sim use), one connection per (src, dst)
// pair with streams 1..workload.streams, WRITEs of at most chunk_bytes each from one
// registered buffer into the peer's.
#include <algorithm>
#include <deque>
#include <stdexcept>
#include <string>

#include "cluster.hpp"
#include "mroce/engine.hpp"

namespace mroce::simapp {

namespace {

class MroceCluster final : public Cluster {
    struct Node {
        Engine eng;
        sim::HostId host = 0;
        uint32_t pd = 0, cq = 0;
        std::vector<uint8_t> mem;
        MrInfo mr{};
        std::vector<uint32_t> in_conns;  // connections this host accepted
        Node(const EngineConfig& cfg, size_t bytes) : eng(cfg), mem(bytes) {
            pd = eng.alloc_pd();
            if (eng.create_cq(1 << 16, cq) != Status::ok) throw std::runtime_error("mroce-sim: create_cq");
            if (eng.register_mr(pd, mem.data(), mem.size(), kAccessLocalWrite | kAccessRemoteWrite, mr) !=
                Status::ok)
                throw std::runtime_error("mroce-sim: register_mr");
        }
        uint64_t addr() const { return uint64_t(reinterpret_cast<uintptr_t>(mem.data())); }
    };
    struct Conn {
        uint32_t src = 0, dst = 0, conn = 0;
        uint32_t remote = 0;  // its id at dst
        struct Lane {  // Cluster::write's `stream` l: the engine's stream l + 1
            uint32_t outstanding = 0;
            std::deque<std::pair<uint32_t, uint64_t>> waiting;  // (bytes, transfer) not yet posted
        };
        std::vector<Lane> lanes;
    };
    struct Transfer {
        uint64_t tag = 0;
        uint32_t wrs_left = 0;
        bool ok = true;
        uint32_t lane = 0;
    };

public:
    MroceCluster(sim::Fabric& fab, const Scenario& s)
        : chunk_(s.workload.chunk_bytes), streams_(std::max(1u, s.workload.streams)) {
        EngineConfig cfg = s.engine;
        depth_ = cfg.stream_depth;
        for (uint32_t i = 0; i < s.fabric.hosts; ++i) {
            nodes_.push_back(std::make_unique<Node>(cfg, chunk_));
            nodes_.back()->host = fab.add_host(nodes_.back()->eng, host_config(s));
        }
    }
    size_t size() const override { return nodes_.size(); }
    sim::HostId host(uint32_t i) const override { return nodes_.at(i)->host; }

    // The workloads ask for one connection per direction of a host pair (and
    // conns_per_pair of them), but R-CONN-14 makes a simultaneous connect ONE
    // connection: crossed CONNECT_REQs merge (no `incoming` event), and a
    // connect() toward a peer whose connection this host accepted returns
    // that accepted one (once). So: two waves, first every connection from a
    // lower to a higher host index, then the rest, so no two attempts cross;
    // and in the second, a connect() that hands back an accepted connection
    // (already established) is called again for a new one.
    bool connect(sim::Fabric& fab, const std::vector<std::pair<uint32_t, uint32_t>>& pairs, Time limit) override {
        conns_.resize(pairs.size());
        const Time deadline = fab.now() + limit;
        for (int wave = 0; wave < 2; ++wave) {
            std::vector<uint32_t> now_conns;
            for (uint32_t i = 0; i < pairs.size(); ++i) {
                const auto [a, b] = pairs[i];
                if ((a < b) != (wave == 0)) continue;
                Conn& c = conns_[i];
                c.src = a;
                c.dst = b;
                Engine& e = nodes_.at(a)->eng;
                do {
                    if (e.connect(nodes_.at(b)->host, c.conn) != Status::ok) return false;
                } while (e.conn_state(c.conn) == ConnState::established);
                now_conns.push_back(i);
            }
            if (!run_connects(fab, now_conns, deadline)) return false;
        }
        for (Conn& c : conns_) {
            Node& n = *nodes_[c.src];
            c.lanes.resize(streams_);
            for (uint32_t l = 0; l < streams_; ++l)
                if (n.eng.create_stream(c.conn, 1 + l, n.pd, n.cq, n.cq) != Status::ok) return false;
            ConnStats st;
            n.eng.conn_stats(c.conn, st);
            c.remote = st.remote_conn;
        }
        return true;
    }

    void write(uint32_t ci, uint64_t bytes, uint64_t tag, uint32_t stream) override {
        Conn& c = conns_.at(ci);
        const uint32_t lane = stream % streams_;
        const uint64_t t = transfers_.size();
        const uint32_t wrs = uint32_t(std::max<uint64_t>(1, (bytes + chunk_ - 1) / chunk_));
        transfers_.push_back(Transfer{tag, wrs, true, lane});
        for (uint64_t off = 0; off < std::max<uint64_t>(bytes, 1); off += chunk_)
            c.lanes[lane].waiting.emplace_back(uint32_t(std::min<uint64_t>(chunk_, bytes - off)), t);
        post_waiting(c, lane);
    }

    void poll(std::vector<Done>& out) override {
        for (auto& np : nodes_) {
            Completion comp[256];
            for (size_t n; (n = np->eng.poll_cq(np->cq, comp, 256)) > 0;)
                for (size_t i = 0; i < n; ++i) {
                    // wr_id: transfer index << 32 | connection index
                    Conn& c = conns_[uint32_t(comp[i].wr_id)];
                    Transfer& t = transfers_[comp[i].wr_id >> 32];
                    --c.lanes[t.lane].outstanding;
                    if (comp[i].status != WcStatus::success) {
                        t.ok = false;
                        ++failed_;
                    }
                    if (--t.wrs_left == 0) out.push_back(Done{t.tag, t.ok});
                    post_waiting(c, t.lane);
                }
        }
    }

    uint64_t rx_bytes(uint32_t i) const override {
        uint64_t sum = 0;
        for (uint32_t conn : nodes_.at(i)->in_conns) {
            ConnStats st;
            nodes_[i]->eng.conn_stats(conn, st);
            sum += st.rx_payload_bytes;
        }
        return sum;
    }

    uint64_t conn_rx_bytes(uint32_t ci) const override {
        const Conn& c = conns_.at(ci);
        ConnStats st;
        nodes_[c.dst]->eng.conn_stats(c.remote, st);
        return st.rx_payload_bytes;
    }

    std::string stats_json() const override {
        // Per path index (a connection's k-th UDP source port), over all connections.
        struct Sum {
            uint64_t tx = 0, retx = 0, losses = 0, timeouts = 0, spurious = 0, tlp = 0, red = 0, ce = 0, rerouted = 0,
                     failed = 0;
        };
        std::vector<Sum> per_path;
        uint64_t tx = 0, retx = 0, red = 0, ack_copies = 0;
        for (const Conn& c : conns_) {
            const Engine& e = nodes_[c.src]->eng;
            ConnStats st;
            e.conn_stats(c.conn, st);
            ConnStats rst;  // the receiving end: its ACKs
            if (nodes_[c.dst]->eng.conn_stats(c.remote, rst) == Status::ok) ack_copies += rst.ack_copies;
            tx += st.tx_data_packets;
            retx += st.retransmits;
            red += st.redundant;
            if (per_path.size() < st.num_paths) per_path.resize(st.num_paths);
            for (uint16_t p = 0; p < st.num_paths; ++p) {
                PathStats ps;
                if (e.path_stats(c.conn, p, ps) != Status::ok) continue;
                Sum& x = per_path[p];
                x.tx += ps.tx_packets;
                x.retx += ps.retransmits;
                x.losses += ps.losses;
                x.timeouts += ps.timeouts;
                x.spurious += ps.spurious_timeouts;
                x.tlp += ps.tail_probes;
                x.red += ps.redundant;
                x.ce += ps.ce_marks;
                x.rerouted += ps.rerouted;
                x.failed += ps.state == PathStateKind::failed ? 1 : 0;
            }
        }
        Sum all;
        std::string paths;
        for (size_t p = 0; p < per_path.size(); ++p) {
            const Sum& x = per_path[p];
            all.losses += x.losses;
            all.timeouts += x.timeouts;
            paths += std::string(p ? ",\n    " : "\n    ") + "{\"path\": " + std::to_string(p) +
                     ", \"tx_packets\": " + std::to_string(x.tx) + ", \"resent\": " + std::to_string(x.retx) +
                     ", \"sack_losses\": " + std::to_string(x.losses) + ", \"timeouts\": " + std::to_string(x.timeouts) +
                     ", \"spurious_timeouts\": " + std::to_string(x.spurious) + ", \"tail_probes\": " +
                     std::to_string(x.tlp) + ", \"redundant\": " + std::to_string(x.red) + ", \"ce_echoed\": " + std::to_string(x.ce) + ", \"rerouted\": " +
                     std::to_string(x.rerouted) + ", \"failed_at_end\": " + std::to_string(x.failed) + "}";
        }
        return "\"data_packets\": " + std::to_string(tx) + ", \"resent_packets\": " + std::to_string(retx) +
               ", \"redundant_packets\": " + std::to_string(red) + ", \"ack_copies\": " + std::to_string(ack_copies) +
               ", \"sack_losses\": " + std::to_string(all.losses) + ", \"timeouts\": " + std::to_string(all.timeouts) +
               ", \"failed_ops\": " + std::to_string(failed_) + ",\n  \"paths\": [" + paths + "]";
    }

private:
    // Runs the fabric until every connection in `which` is established and
    // its peer has accepted it (created its stream).
    bool run_connects(sim::Fabric& fab, const std::vector<uint32_t>& which, Time deadline) {
        // Counted from the events (`established` at the connecting end), so
        // the check after every fabric event stays O(hosts), not O(connections).
        size_t accepted = 0, established = 0;
        const bool ok = fab.run_until(
            [&] {
                for (size_t i = 0; i < nodes_.size(); ++i) {
                    ConnEvent ev[64];
                    for (size_t k = 0, n = nodes_[i]->eng.poll_events(ev, 64); k < n; ++k) {
                        if (ev[k].kind == EventKind::established) ++established;
                        if (ev[k].kind != EventKind::incoming) continue;
                        Node& d = *nodes_[i];
                        d.in_conns.push_back(ev[k].conn);
                        for (uint32_t l = 0; l < streams_; ++l)
                            if (d.eng.create_stream(ev[k].conn, 1 + l, d.pd, d.cq, d.cq) != Status::ok)
                                throw std::runtime_error("mroce-sim: create_stream");
                        ++accepted;
                    }
                }
                return accepted >= which.size() && established >= which.size();
            },
            deadline);
        if (!ok) return false;
        for (uint32_t i : which)
            if (nodes_[conns_[i].src]->eng.conn_state(conns_[i].conn) != ConnState::established) return false;
        return true;
    }

    void post_waiting(Conn& c, uint32_t lane) {
        Node& s = *nodes_[c.src];
        Node& d = *nodes_[c.dst];
        Conn::Lane& q = c.lanes[lane];
        while (q.outstanding < depth_ && !q.waiting.empty()) {
            const auto [bytes, t] = q.waiting.front();
            SendWr wr;
            wr.wr_id = t << 32 | uint32_t(&c - conns_.data());
            wr.op = OpKind::write;
            wr.local_addr = s.addr();
            wr.length = bytes;
            wr.lkey = s.mr.lkey;
            wr.remote_addr = d.addr();
            wr.rkey = d.mr.rkey;
            if (s.eng.post_send(c.conn, 1 + lane, wr) != Status::ok) throw std::runtime_error("mroce-sim: post_send refused");
            q.waiting.pop_front();
            ++q.outstanding;
        }
    }

    uint32_t chunk_;
    uint32_t streams_ = 1;
    uint32_t depth_ = 256;
    std::vector<std::unique_ptr<Node>> nodes_;
    std::vector<Conn> conns_;
    std::vector<Transfer> transfers_;
    uint64_t failed_ = 0;
};

}  // namespace

std::unique_ptr<Cluster> make_mroce_cluster(sim::Fabric& fab, const Scenario& s) {
    return std::make_unique<MroceCluster>(fab, s);
}

}  // namespace mroce::simapp
