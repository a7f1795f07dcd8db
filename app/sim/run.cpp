// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The fabric comes from drivers/sim's topology builders; loss and failures
// go through its Link setters; the hosts are a Cluster (mroce or RoCEv2) the
// workloads drive without knowing which.
#include "run.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <unordered_map>
#include <memory>
#include <stdexcept>

#include "cluster.hpp"
#include "fabric.hpp"

namespace mroce::simapp {

namespace {

using namespace mroce::sim;

// The built fabric: which links are each host's first hop (where per-path
// loss applies and where a host failure cuts) and how to fail a plane.
struct Built {
    std::vector<std::vector<LinkId>> host_links;  // per host index: its first-hop links (all planes)
    std::vector<std::vector<LinkId>> host_down;   // per host index: links into it
    PlanesTopology planes;
    bool has_planes = false;
    // Per-path/plane statistics: planes: one group per plane (all its links);
    // pair: one per parallel path (both directions); star: one, every link.
    // group_tx: per group, the first-hop links whose bytes the CSV reports.
    const char* group_kind = "plane";
    std::vector<std::vector<LinkId>> groups, group_tx;
};

Built build_fabric(Fabric& fab, const Scenario& s, const Cluster& c) {
    const FabricSpec& f = s.fabric;
    LinkConfig link;
    link.rate_bps = f.link_bps;
    link.delay = f.link_delay;
    link.capacity_bytes = f.buffer_bytes;
    link.ecn_threshold_bytes = f.ecn_bytes;
    link.ecn_min_bytes = f.ecn_min_bytes;
    link.ecn_max_bytes = f.ecn_max_bytes;
    link.ecn_pmax = f.ecn_pmax;
    link.overhead_bytes = f.overhead_bytes;
    if (f.pfc) {
        link.pfc_xoff_bytes = f.pfc_xoff_bytes;
        link.pfc_xon_bytes = f.pfc_xon_bytes;
    }
    std::vector<HostId> hosts;
    for (uint32_t i = 0; i < c.size(); ++i) hosts.push_back(c.host(i));
    Built b;
    b.host_links.resize(hosts.size());
    b.host_down.resize(hosts.size());
    switch (f.topology) {
        case TopologyKind::pair: {
            PairConfig pc;
            pc.paths = f.pair_paths;
            pc.link = link;
            const PairTopology t = build_pair(fab, hosts[0], hosts[1], pc);
            b.host_links[0] = t.forward;
            b.host_links[1] = t.reverse;
            b.host_down[0] = t.reverse;
            b.host_down[1] = t.forward;
            b.group_kind = "path";
            for (size_t i = 0; i < t.forward.size(); ++i) {
                b.groups.push_back({t.forward[i], t.reverse[i]});
                b.group_tx.push_back({t.forward[i], t.reverse[i]});
            }
            break;
        }
        case TopologyKind::star: {
            // Host 0 receives; the bottleneck is the switch's port to it.
            StarConfig sc;
            sc.access = sc.bottleneck = sc.reverse = link;
            const StarTopology t = build_star(fab, std::span(hosts).subspan(1), hosts[0], sc);
            b.host_links[0] = {t.uplink};
            b.host_down[0] = {t.bottleneck};
            for (size_t i = 1; i < hosts.size(); ++i) {
                b.host_links[i] = {t.access[i - 1]};
                b.host_down[i] = {t.downlink[i - 1]};
            }
            b.group_kind = "fabric";
            b.groups.emplace_back();
            for (LinkId l = 0; l < fab.num_links(); ++l) b.groups.back().push_back(l);
            b.group_tx.push_back({t.bottleneck});
            break;
        }
        case TopologyKind::planes:
        case TopologyKind::fat_tree: {
            // fat_tree: check() derived spines from the oversubscription (fewer uplinks).
            PlanesConfig pc;
            pc.planes = f.planes;
            pc.spines = f.spines;
            pc.hosts_per_leaf = f.hosts_per_leaf;
            if (f.topology == TopologyKind::fat_tree && f.tiers == 3) {
                pc.tiers = 3;
                pc.leaves_per_pod = pod_leaves(f);
                pc.cores_per_agg = uint16_t(pod_leaves(f));
            }
            pc.host_link = link;
            pc.spine_link = link;
            b.planes = build_planes(fab, hosts, pc);
            b.has_planes = true;
            for (size_t h = 0; h < hosts.size(); ++h)
                for (uint16_t p = 0; p < f.planes; ++p) {
                    b.host_links[h].push_back(b.planes.up[h * f.planes + p]);
                    b.host_down[h].push_back(b.planes.down[h * f.planes + p]);
                }
            if (f.hot_bps) {
                // The hot link: plane 0, leaf hot_leaf <-> spine hot_spine, both directions.
                const PlanesTopology& t = b.planes;
                fab.link(t.leaf_spine[size_t(f.hot_leaf) * t.spines + f.hot_spine]).set_rate(f.hot_bps);
                fab.link(t.spine_leaf[size_t(f.hot_spine) * t.leaves + f.hot_leaf]).set_rate(f.hot_bps);
            }
            for (uint16_t p = 0; p < f.planes; ++p) {
                b.groups.push_back(b.planes.plane_links(p));
                b.group_tx.emplace_back();
                for (size_t h = 0; h < hosts.size(); ++h) b.group_tx.back().push_back(b.planes.up[h * f.planes + p]);
            }
            break;
        }
    }
    // A host's own link is its NIC's queue: the NIC holds what it cannot send
    // (no drop, no mark there); switches' queues are the scenario's.
    for (const auto& links : b.host_links)
        for (LinkId l : links) {
            if (f.topology == TopologyKind::pair) continue;  // pair: the links are the whole path
            fab.link(l).set_capacity(kUnlimited);
            fab.link(l).set_ecn_threshold(kUnlimited);
            fab.link(l).set_ecn_ramp(0, 0, 1);
        }
    return b;
}

void apply_loss(Fabric& fab, const Scenario& s, const Built& b) {
    if (s.fabric.link_loss > 0)
        for (LinkId l = 0; l < fab.num_links(); ++l) fab.link(l).set_loss(s.fabric.link_loss);
    if (s.fabric.path_loss > 0) {
        // Once per end-to-end traversal: every packet (data or ack) leaves its
        // host through exactly one of the host's first-hop links.
        for (const auto& links : b.host_links)
            for (LinkId l : links) {
                const double p = s.fabric.link_loss;
                fab.link(l).set_loss(1 - (1 - p) * (1 - s.fabric.path_loss));
            }
    }
}

uint64_t group_tx_bytes(Fabric& fab, const std::vector<LinkId>& links) {
    uint64_t sum = 0;
    for (LinkId l : links) sum += fab.link(l).counters().tx_bytes;
    return sum;
}

uint64_t plane_tx(Fabric& fab, const Built& b, uint16_t plane) {
    uint64_t sum = 0;
    for (const auto& links : b.host_links) sum += fab.link(links[plane]).counters().tx_packets;
    return sum;
}

// plane_base[p]: plane p's host-link packets when it last came back up.
void schedule_events(Fabric& fab, const Scenario& s, const Built& b, Time start, std::vector<uint64_t>& plane_base) {
    for (const EventSpec& e : s.events) {
        const Time at = start + e.at;
        switch (e.action) {
            case EventAction::plane_down:
            case EventAction::plane_up: {
                const bool up = e.action == EventAction::plane_up;
                fab.at(at, [&fab, &b, &plane_base, plane = uint16_t(e.target), up] {
                    b.planes.set_plane_up(fab, plane, up);
                    if (up) plane_base[plane] = plane_tx(fab, b, plane);
                });
                break;
            }
            case EventAction::link_down:
            case EventAction::link_up: {
                const bool up = e.action == EventAction::link_up;
                fab.at(at, [&fab, &b, h = e.target, up] {
                    for (LinkId l : b.host_links[h]) fab.link(l).set_up(up);
                    for (LinkId l : b.host_down[h]) fab.link(l).set_up(up);
                });
                break;
            }
        }
    }
}

// What a workload does with the cluster between fabric slices.
class Workload {
public:
    virtual ~Workload() = default;
    virtual std::vector<std::pair<uint32_t, uint32_t>> pairs() const = 0;
    virtual void start(Cluster& c) = 0;
    virtual void on_done(Cluster& c, const Done& d, Time now) = 0;
    virtual bool finished() const = 0;
    virtual uint64_t ops() const = 0;
    virtual uint64_t sent_by(uint32_t host) const = 0;
    // Operation classes reported apart (flow completion times per class);
    // none by default.
    virtual std::vector<std::string> class_names() const { return {}; }
    virtual size_t op_class(uint64_t /*tag*/) const { return 0; }
};

// Ring all-reduce: reduce-scatter then all-gather, 2(N-1) steps of bytes/N
// per host; step k at host i may start once i has received step k-1 from
// its left neighbour (its WRITE completed: acknowledged by i).
// Pipelined (NCCL-style, slices > 1): each step is `slices` WRITEs; slice j
// of step k at host i starts once slice j of step k-1 has arrived from the
// left, with at most `window` WRITEs of host i in flight (0: no cap), as
// NCCL's NCCL_STEPS buffers per channel bound what a rank has outstanding.
// slices = 1, window = 0 is the unpipelined ring.
class RingAllReduce final : public Workload {
public:
    RingAllReduce(uint32_t n, uint64_t bytes, uint32_t slices, uint32_t window, uint32_t streams)
        : n_(n), steps_(2 * (n - 1)), slices_(slices), window_(window), streams_(std::max(1u, streams)), ready_(n),
          outstanding_(n, 0), sent_(n, 0) {
        const uint64_t step = std::max<uint64_t>(1, bytes / n);
        slice_bytes_ = std::max<uint64_t>(1, step / slices);
        last_slice_bytes_ = std::max<uint64_t>(1, step - slice_bytes_ * (slices - 1));
    }
    std::vector<std::pair<uint32_t, uint32_t>> pairs() const override {
        std::vector<std::pair<uint32_t, uint32_t>> p;
        for (uint32_t i = 0; i < n_; ++i) p.emplace_back(i, (i + 1) % n_);
        return p;
    }
    void start(Cluster& c) override {
        for (uint32_t i = 0; i < n_; ++i) {
            for (uint32_t j = 0; j < slices_; ++j) ready_[i].push_back({0, j});
            pump(c, i);
        }
    }
    void on_done(Cluster& c, const Done& d, Time) override {
        // tag: sender << 40 | step << 20 | slice
        const uint32_t i = uint32_t(d.tag >> 40);
        const uint32_t k = uint32_t(d.tag >> 20) & 0xfffff;
        const uint32_t j = uint32_t(d.tag) & 0xfffff;
        ++done_;
        --outstanding_[i];
        const uint32_t next = (i + 1) % n_;
        if (k + 1 < steps_) ready_[next].push_back({k + 1, j});
        pump(c, next);
        pump(c, i);
    }
    bool finished() const override { return done_ == ops(); }
    uint64_t ops() const override { return uint64_t(n_) * steps_ * slices_; }
    uint64_t sent_by(uint32_t h) const override { return sent_[h]; }

private:
    struct Slice {
        uint32_t step, slice;
    };
    void pump(Cluster& c, uint32_t i) {
        while (!ready_[i].empty() && (window_ == 0 || outstanding_[i] < window_)) {
            const Slice x = ready_[i].front();
            ready_[i].pop_front();
            const uint64_t b = x.slice + 1 == slices_ ? last_slice_bytes_ : slice_bytes_;
            // connection i: i -> i + 1
            c.write(i, b, uint64_t(i) << 40 | uint64_t(x.step) << 20 | x.slice, x.slice % streams_);
            sent_[i] += b;
            ++outstanding_[i];
        }
    }
    uint32_t n_;
    uint32_t steps_, slices_, window_, streams_;
    uint64_t slice_bytes_ = 1, last_slice_bytes_ = 1;
    std::vector<std::deque<Slice>> ready_;
    std::vector<uint32_t> outstanding_;
    std::vector<uint64_t> sent_;
    uint64_t done_ = 0;
};

// Tree all-reduce over a binary tree of the hosts (rank i's parent is
// (i - 1) / 2, its children 2i + 1 and 2i + 2; NCCL runs two such trees,
// this is one): reduce up, then broadcast down, each host's `bytes` in
// `slices` WRITEs as the ring pipelines them. A host sends slice j to its
// parent once slice j arrived from every child (a leaf at once); the root,
// once it has slice j from every child, sends it down, and a host forwards a
// slice it received from its parent to each child. At most `window` WRITEs
// of one host in flight (0: no cap), as the ring.
class TreeAllReduce final : public Workload {
public:
    TreeAllReduce(uint32_t n, uint64_t bytes, uint32_t slices, uint32_t window)
        : n_(n), slices_(slices), window_(window), have_(size_t(n) * slices, 0), ready_(n), outstanding_(n, 0),
          sent_(n, 0) {
        slice_bytes_ = std::max<uint64_t>(1, bytes / slices);
        last_slice_bytes_ = std::max<uint64_t>(1, bytes - slice_bytes_ * (slices - 1));
    }
    // Connection 2(i - 1): i -> parent (reduce); 2(i - 1) + 1: parent -> i (broadcast).
    std::vector<std::pair<uint32_t, uint32_t>> pairs() const override {
        std::vector<std::pair<uint32_t, uint32_t>> p;
        for (uint32_t i = 1; i < n_; ++i) {
            p.emplace_back(i, parent(i));
            p.emplace_back(parent(i), i);
        }
        return p;
    }
    void start(Cluster& c) override {
        for (uint32_t i = 0; i < n_; ++i) {
            if (children(i) == 0)
                for (uint32_t j = 0; j < slices_; ++j) reduced(c, i, j);
            pump(c, i);
        }
    }
    void on_done(Cluster& c, const Done& d, Time) override {
        // tag: down << 63 | child rank << 32 | slice
        const bool down = d.tag >> 63;
        const uint32_t child = uint32_t(d.tag >> 32) & 0x7fffffff;
        const uint32_t j = uint32_t(d.tag);
        const uint32_t sender = down ? parent(child) : child;
        ++done_;
        --outstanding_[sender];
        if (down) {
            send_down(child, j);
            pump(c, child);
        } else {
            const uint32_t p = parent(child);
            if (++have_[size_t(p) * slices_ + j] == children(p)) reduced(c, p, j);
            pump(c, p);
        }
        pump(c, sender);
    }
    bool finished() const override { return done_ == ops(); }
    uint64_t ops() const override { return uint64_t(2) * (n_ - 1) * slices_; }
    uint64_t sent_by(uint32_t h) const override { return sent_[h]; }

private:
    static uint32_t parent(uint32_t i) { return (i - 1) / 2; }
    uint32_t children(uint32_t i) const { return (2 * i + 1 < n_) + (2 * i + 2 < n_); }
    // Slice j is reduced at i (from its own and all its children's): up, or at the root down.
    void reduced(Cluster&, uint32_t i, uint32_t j) {
        if (i == 0) send_down(0, j);
        else ready_[i].push_back(uint64_t(i) << 32 | j);
    }
    void send_down(uint32_t i, uint32_t j) {
        for (uint32_t ch = 2 * i + 1; ch <= 2 * i + 2 && ch < n_; ++ch) ready_[i].push_back(1ull << 63 | uint64_t(ch) << 32 | j);
    }
    void pump(Cluster& c, uint32_t i) {
        while (!ready_[i].empty() && (window_ == 0 || outstanding_[i] < window_)) {
            const uint64_t tag = ready_[i].front();
            ready_[i].pop_front();
            const bool down = tag >> 63;
            const uint32_t child = uint32_t(tag >> 32) & 0x7fffffff;
            const uint64_t b = uint32_t(tag) + 1 == slices_ ? last_slice_bytes_ : slice_bytes_;
            c.write(2 * (child - 1) + (down ? 1 : 0), b, tag);
            sent_[i] += b;
            ++outstanding_[i];
        }
    }
    uint32_t n_, slices_, window_;
    uint64_t slice_bytes_ = 1, last_slice_bytes_ = 1;
    std::vector<uint32_t> have_;                 // [rank * slices + j]: children whose slice j arrived
    std::vector<std::deque<uint64_t>> ready_;    // per sender: tags of WRITEs ready to post
    std::vector<uint32_t> outstanding_;
    std::vector<uint64_t> sent_;
    uint64_t done_ = 0;
};

// N:1 incast: every host but 0 writes `bytes` to host 0 at once.
class Incast final : public Workload {
public:
    Incast(uint32_t n, uint64_t bytes) : n_(n), bytes_(bytes), finish_(n, 0) {}
    std::vector<std::pair<uint32_t, uint32_t>> pairs() const override {
        std::vector<std::pair<uint32_t, uint32_t>> p;
        for (uint32_t i = 1; i < n_; ++i) p.emplace_back(i, 0);
        return p;
    }
    void start(Cluster& c) override {
        for (uint32_t i = 1; i < n_; ++i) c.write(i - 1, bytes_, i);  // connection i - 1: i -> 0
    }
    void on_done(Cluster&, const Done& d, Time now) override {
        finish_[d.tag] = now;
        ++done_;
    }
    bool finished() const override { return done_ == n_ - 1; }
    uint64_t ops() const override { return n_ - 1; }
    uint64_t sent_by(uint32_t h) const override { return h == 0 ? 0 : bytes_; }
    const std::vector<Time>& finish() const { return finish_; }

private:
    uint32_t n_;
    uint64_t bytes_;
    std::vector<Time> finish_;
    uint64_t done_ = 0;
};

// All-to-all or permutation: every host's `bytes` go out at once as one
// transfer per connection (conns_per_pair of them per host pair, the bytes
// split evenly), each its own operation. All-to-all: to every other host;
// permutation: host i to host (i + n/2) mod n, so every host sends to one
// and receives from one.
class Flows final : public Workload {
public:
    Flows(uint32_t n, uint64_t bytes, uint32_t k, bool all) : sent_(n, 0) {
        for (uint32_t i = 0; i < n; ++i) {
            std::vector<uint32_t> dsts;
            if (all) {
                for (uint32_t j = 1; j < n; ++j) dsts.push_back((i + j) % n);
            } else {
                dsts.push_back((i + std::max<uint32_t>(1, n / 2)) % n);
            }
            const uint64_t per = std::max<uint64_t>(1, bytes / (uint64_t(dsts.size()) * k));
            for (uint32_t d : dsts)
                for (uint32_t x = 0; x < k; ++x) {
                    pairs_.emplace_back(i, d);
                    bytes_.push_back(per);
                    sent_[i] += per;
                }
        }
    }
    std::vector<std::pair<uint32_t, uint32_t>> pairs() const override { return pairs_; }
    void start(Cluster& c) override {
        for (uint32_t i = 0; i < pairs_.size(); ++i) c.write(i, bytes_[i], i);
    }
    void on_done(Cluster&, const Done&, Time) override { ++done_; }
    bool finished() const override { return done_ == pairs_.size(); }
    uint64_t ops() const override { return pairs_.size(); }
    uint64_t sent_by(uint32_t h) const override { return sent_[h]; }

private:
    std::vector<std::pair<uint32_t, uint32_t>> pairs_;
    std::vector<uint64_t> bytes_;
    std::vector<uint64_t> sent_;
    uint64_t done_ = 0;
};

// Long flows plus short flows (kind = mix): hosts 0 .. L-1 each write
// `bytes` to host (i + N/2) mod N at the start; short_flows WRITEs of
// short_bytes arrive as a Poisson process (exponential gaps of mean
// 1/short_rate_per_us, from the scenario's seed), each from a host drawn
// among L .. N-1 to one drawn among all others, posted at its arrival time
// (a fabric event) on the connection of its host pair (one per pair: short
// flows between the same pair queue behind each other, as on one QP).
class Mix final : public Workload {
public:
    Mix(Fabric& fab, uint32_t n, const WorkloadSpec& w, uint64_t seed)
        : fab_(fab), n_(n), long_(std::min(n - 1, long_hosts(w, n))), bytes_(w.bytes), short_bytes_(w.short_bytes),
          sent_(n, 0), conn_of_(size_t(n) * n, UINT32_MAX) {
        for (uint32_t i = 0; i < long_; ++i) {
            pairs_.emplace_back(i, (i + std::max<uint32_t>(1, n / 2)) % n);
            sent_[i] += bytes_;
        }
        Rng rng(splitmix64(seed ^ 0x5a0f7u));
        double t_us = 0;
        for (uint32_t k = 0; k < w.short_flows; ++k) {
            t_us += -std::log1p(-rng.uniform()) / w.short_rate_per_us;
            const uint32_t src = long_ + uint32_t(rng.below(n - long_));
            uint32_t dst = uint32_t(rng.below(n - 1));
            if (dst >= src) ++dst;
            uint32_t& c = conn_of_[size_t(src) * n + dst];
            if (c == UINT32_MAX) {
                c = uint32_t(pairs_.size());
                pairs_.emplace_back(src, dst);
            }
            arrivals_.push_back(Arrival{Time(t_us * 1e3), src, c});
            sent_[src] += short_bytes_;
        }
    }
    std::vector<std::pair<uint32_t, uint32_t>> pairs() const override { return pairs_; }
    void start(Cluster& c) override {
        for (uint32_t i = 0; i < long_; ++i) c.write(i, bytes_, i);
        const Time t0 = fab_.now();
        for (size_t k = 0; k < arrivals_.size(); ++k)
            fab_.at(t0 + arrivals_[k].at, [this, &c, k] {
                const Arrival& a = arrivals_[k];
                c.write(a.conn, short_bytes_, kShort | k);
                fab_.kick(c.host(a.src));
            });
    }
    void on_done(Cluster&, const Done&, Time) override { ++done_; }
    bool finished() const override { return done_ == ops(); }
    uint64_t ops() const override { return long_ + arrivals_.size(); }
    uint64_t sent_by(uint32_t h) const override { return sent_[h]; }
    std::vector<std::string> class_names() const override { return {"long", "short"}; }
    size_t op_class(uint64_t tag) const override { return tag & kShort ? 1 : 0; }

private:
    static constexpr uint64_t kShort = 1ull << 40;
    struct Arrival {
        Time at;  // from the workload's start
        uint32_t src, conn;
    };
    Fabric& fab_;
    uint32_t n_, long_;
    uint64_t bytes_, short_bytes_;
    std::vector<std::pair<uint32_t, uint32_t>> pairs_;
    std::vector<Arrival> arrivals_;
    std::vector<uint64_t> sent_;
    std::vector<uint32_t> conn_of_;  // [src * n + dst]: the short flows' connection
    uint64_t done_ = 0;
};

// The cluster as the workloads see it, noting when each operation was
// posted so its duration (flow completion time) can be reported. Tags are
// unique per operation in every workload.
class Timed final : public Cluster {
public:
    Timed(Cluster& c, Fabric& fab) : c_(c), fab_(fab) {}
    size_t size() const override { return c_.size(); }
    HostId host(uint32_t i) const override { return c_.host(i); }
    bool connect(Fabric& fab, const std::vector<std::pair<uint32_t, uint32_t>>& pairs, Time limit) override {
        return c_.connect(fab, pairs, limit);
    }
    void write(uint32_t conn, uint64_t bytes, uint64_t tag, uint32_t stream) override {
        posted_[tag] = fab_.now();
        c_.write(conn, bytes, tag, stream);
    }
    void poll(std::vector<Done>& out) override { c_.poll(out); }
    uint64_t rx_bytes(uint32_t i) const override { return c_.rx_bytes(i); }
    uint64_t conn_rx_bytes(uint32_t conn) const override { return c_.conn_rx_bytes(conn); }
    std::string stats_json() const override { return c_.stats_json(); }
    // How long the operation with this tag took (now - its post); forgets it.
    Time finish(uint64_t tag) {
        const auto it = posted_.find(tag);
        if (it == posted_.end()) return 0;
        const Time d = fab_.now() - it->second;
        posted_.erase(it);
        return d;
    }

private:
    Cluster& c_;
    Fabric& fab_;
    std::unordered_map<uint64_t, Time> posted_;
};

// Unloaded round trip: a full data packet through every hop and a header-only
// ack back (transport header 72 B, as mroce's; the fabric's framing).
Time base_rtt(const Scenario& s) {
    const FabricSpec& f = s.fabric;
    const uint32_t hops = f.topology == TopologyKind::pair ? 1
                          : f.topology == TopologyKind::star ? 2
                          : f.hosts_per_leaf >= f.hosts   ? 2
                          : f.topology == TopologyKind::fat_tree && f.tiers == 3 ? 6
                                                          : 4;
    const uint32_t payload = s.transport == TransportKind::mroce ? s.engine.max_payload : s.roce.mtu;
    auto ser = [&](uint64_t bytes) { return Time(double(bytes) * 8e9 / double(f.link_bps)); };
    return hops * (2 * f.link_delay + ser(payload + 72 + f.overhead_bytes) + ser(72 + f.overhead_bytes));
}

double jain(const std::vector<double>& x) {
    double s = 0, s2 = 0;
    for (double v : x) {
        s += v;
        s2 += v * v;
    }
    return s2 > 0 ? s * s / (double(x.size()) * s2) : 0.0;
}

// The q-quantile of sorted ns values, in us (0 if none; q = 1: the max).
double percentile_us(const std::vector<Time>& sorted, double q) {
    return sorted.empty() ? 0.0 : double(sorted[std::min(sorted.size() - 1, size_t(q * double(sorted.size())))]) / 1e3;
}

std::string num(double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%.6g", std::isfinite(v) ? v : 0.0);
    return b;
}

}  // namespace

RunResult run_scenario(const Scenario& s, bool progress) {
    const auto wall0 = std::chrono::steady_clock::now();
    if (s.fabric.pfc && s.transport == TransportKind::mroce)
        throw ConfigError(s.origin + ": key 'pfc': PFC is for the RoCEv2 baseline (mroce runs on a lossy fabric)");
    Fabric fab(s.seed);
    std::unique_ptr<Cluster> cluster =
        s.transport == TransportKind::mroce ? make_mroce_cluster(fab, s) : make_roce_cluster(fab, s);
    const Built built = build_fabric(fab, s, *cluster);
    std::unique_ptr<Workload> wl;
    const uint32_t n = uint32_t(cluster->size());
    switch (s.workload.kind) {
        case WorkloadKind::ring_allreduce: wl = std::make_unique<RingAllReduce>(n, s.workload.bytes, s.workload.slices, s.workload.slices_outstanding,
                                                                            s.workload.streams);
            break;
        case WorkloadKind::tree_allreduce:
            wl = std::make_unique<TreeAllReduce>(n, s.workload.bytes, s.workload.slices, s.workload.slices_outstanding);
            break;
        case WorkloadKind::incast: wl = std::make_unique<Incast>(n, s.workload.bytes); break;
        case WorkloadKind::mix: wl = std::make_unique<Mix>(fab, n, s.workload, s.seed); break;
        case WorkloadKind::all_to_all:
        case WorkloadKind::permutation:
            wl = std::make_unique<Flows>(n, s.workload.bytes, s.workload.conns_per_pair,
                                         s.workload.kind == WorkloadKind::all_to_all);
            break;
    }

    if (!cluster->connect(fab, wl->pairs(), 1'000'000'000))
        throw std::runtime_error("mroce-sim: connections did not come up within 1 s of virtual time");
    // Loss and events only once connected, so every run starts from the same state.
    apply_loss(fab, s, built);
    const Time start = fab.now();
    std::vector<uint64_t> plane_base(s.fabric.planes, 0);
    schedule_events(fab, s, built, start, plane_base);

    RunResult r;
    r.base_rtt = base_rtt(s);
    std::vector<uint64_t> rx0(n);
    uint64_t rx_prev = 0;
    for (uint32_t i = 0; i < n; ++i) rx_prev += rx0[i] = cluster->rx_bytes(i);
    std::vector<uint64_t> grp_prev;
    for (const auto& g : built.group_tx) grp_prev.push_back(group_tx_bytes(fab, g));
    // incast: per-sender bytes placed, for the Jain index over time
    const bool incast = s.workload.kind == WorkloadKind::incast;
    const uint32_t nconns = uint32_t(wl->pairs().size());
    auto conn_bytes = [&] {
        std::vector<uint64_t> v(nconns);
        for (uint32_t c = 0; c < nconns; ++c) v[c] = cluster->conn_rx_bytes(c);
        return v;
    };
    auto jain_of = [](const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
        std::vector<double> d(a.size());
        for (size_t i = 0; i < a.size(); ++i) d[i] = double(a[i] - b[i]);
        return jain(d);
    };
    std::vector<uint64_t> conn_prev, conn_at_2rtt;
    if (incast) conn_prev = conn_bytes();
    const Time at_2rtt = start + 2 * r.base_rtt;
    Time next_sample = s.sample_interval ? start + s.sample_interval : kNever;
    Time last_sample = start;
    for (const std::string& name : wl->class_names()) r.classes.push_back({name, {}});
    Timed timed(*cluster, fab);
    wl->start(timed);
    std::vector<Done> done;
    auto last_print = std::chrono::steady_clock::now();
    const Time limit = start + s.workload.time_limit;
    while (!wl->finished() && fab.now() < limit) {
        fab.run_until(std::min(limit, fab.now() + s.slice));
        done.clear();
        cluster->poll(done);
        if (incast && conn_at_2rtt.empty() && fab.now() >= at_2rtt) conn_at_2rtt = conn_bytes();
        if (incast && !done.empty() && r.op_times.empty() && !conn_at_2rtt.empty())
            r.jain_from_2rtt = jain_of(conn_bytes(), conn_at_2rtt);
        for (const Done& d : done) {
            if (!d.ok) ++r.failed_ops;
            r.op_times.push_back(fab.now() - start);
            r.op_durations.push_back(timed.finish(d.tag));
            if (!r.classes.empty()) r.classes[wl->op_class(d.tag)].durations.push_back(r.op_durations.back());
            wl->on_done(timed, d, fab.now() - start);
        }
        if (fab.now() >= next_sample) {
            uint64_t rx = 0;
            for (uint32_t i = 0; i < n; ++i) rx += cluster->rx_bytes(i);
            // Over the time since the last sample (slices need not divide sample_us).
            const double dt = double(fab.now() - last_sample);
            last_sample = fab.now();
            RunResult::Sample x{fab.now() - start, double(rx - rx_prev) * 8.0 / dt, {}, 0};
            for (size_t g = 0; g < built.group_tx.size(); ++g) {
                const uint64_t b = group_tx_bytes(fab, built.group_tx[g]);
                x.group_gbps.push_back(double(b - grp_prev[g]) * 8.0 / dt);
                grp_prev[g] = b;
            }
            if (incast) {
                std::vector<uint64_t> now_b = conn_bytes();
                x.jain = jain_of(now_b, conn_prev);
                conn_prev = std::move(now_b);
            }
            r.series.push_back(std::move(x));
            rx_prev = rx;
            while (next_sample <= fab.now()) next_sample += s.sample_interval;
        }
        if (progress) {
            const auto now = std::chrono::steady_clock::now();
            if (now - last_print > std::chrono::seconds(1)) {
                last_print = now;
                std::fprintf(stderr, "mroce-sim: %s %s t=%.3f ms, %zu/%llu ops done\n", to_string(s.transport),
                             to_string(s.workload.kind), double(fab.now() - start) / 1e6, r.op_times.size(),
                             (unsigned long long)wl->ops());
            }
        }
    }
    r.completed = wl->finished();
    r.ops = r.op_times.size();
    r.jct = fab.now() - start;
    for (uint32_t i = 0; i < n; ++i) r.placed_bytes += cluster->rx_bytes(i) - rx0[i];
    if (s.workload.kind == WorkloadKind::ring_allreduce || s.workload.kind == WorkloadKind::tree_allreduce)
        r.algbw_gbps = double(s.workload.bytes) * 8.0 / double(std::max<Time>(r.jct, 1));
    for (uint32_t i = 0; i < n; ++i) {
        const double g = double(wl->sent_by(i)) * 8.0 / double(std::max<Time>(r.jct, 1));
        r.host_gbps.push_back(g);
        r.aggregate_gbps += g;
    }
    if (const auto* inc = dynamic_cast<const Incast*>(wl.get())) {
        std::vector<double> rates;
        for (uint32_t i = 1; i < n; ++i)
            rates.push_back(inc->finish()[i] ? double(s.workload.bytes) / double(inc->finish()[i]) : 0.0);
        r.jain = jain(rates);
    }
    r.transport_stats = cluster->stats_json();
    for (LinkId l = 0; l < fab.num_links(); ++l) {
        const LinkCounters& c = fab.link(l).counters();
        r.fabric_drops += c.drops();
        r.ce_marks += c.ce_marks;
        r.max_queue_bytes = std::max(r.max_queue_bytes, c.max_queue_bytes);
        r.pfc_pauses += c.pfc_pauses;
        r.pfc_paused_ns += c.pfc_paused_ns;
    }
    // A host's own first-hop link is its NIC's queue (pair: the links are the whole path).
    std::vector<bool> nic(fab.num_links(), false);
    if (s.fabric.topology != TopologyKind::pair)
        for (const auto& links : built.host_links)
            for (LinkId l : links) nic[l] = true;
    for (LinkId l = 0; l < fab.num_links(); ++l)
        if (!nic[l]) r.switch_max_queue_bytes = std::max(r.switch_max_queue_bytes, fab.link(l).counters().max_queue_bytes);
    r.group_kind = built.group_kind;
    for (const auto& g : built.groups) {
        RunResult::GroupStats gs;
        uint64_t samples = 0, sum = 0;
        for (LinkId l : g) {
            const LinkCounters& c = fab.link(l).counters();
            gs.tx_packets += c.tx_packets;
            gs.drop_queue += c.drop_queue;
            gs.drop_loss += c.drop_loss;
            gs.drop_down += c.drop_down;
            gs.ce_marks += c.ce_marks;
            if (nic[l]) {
                gs.nic_max_queue_bytes = std::max(gs.nic_max_queue_bytes, c.max_queue_bytes);
                continue;
            }
            gs.max_queue_bytes = std::max(gs.max_queue_bytes, c.max_queue_bytes);
            samples += c.queue_samples;
            sum += c.queue_bytes_sum;
        }
        gs.mean_queue_bytes = samples ? double(sum) / double(samples) : 0.0;
        r.groups.push_back(gs);
    }
    if (built.has_planes) {
        for (uint16_t p = 0; p < s.fabric.planes; ++p) r.plane_packets.push_back(plane_tx(fab, built, p) - plane_base[p]);
        const PlanesTopology& t = built.planes;
        const std::pair<const char*, const std::vector<LinkId>*> kinds[] = {
            {"leaf_up", &t.leaf_spine}, {"agg_up", &t.agg_core},   {"core_down", &t.core_agg},
            {"spine_down", &t.spine_leaf}, {"leaf_down", &t.down}};
        for (const auto& [name, links] : kinds) {
            if (links->empty()) continue;
            RunResult::TierStats ts{name, links->size(), 0, UINT64_MAX, 0, 0, 0};
            for (LinkId l : *links) {
                const LinkCounters& c = fab.link(l).counters();
                ts.tx_packets += c.tx_packets;
                ts.min_link_tx_packets = std::min(ts.min_link_tx_packets, c.tx_packets);
                ts.drop_queue += c.drop_queue;
                ts.ce_marks += c.ce_marks;
                ts.max_queue_bytes = std::max(ts.max_queue_bytes, c.max_queue_bytes);
            }
            r.tiers.push_back(ts);
        }
    }
    r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    return r;
}

double RunResult::OpClass::pct(double q) const {
    std::vector<Time> v = durations;
    std::sort(v.begin(), v.end());
    return percentile_us(v, q);
}

std::string RunResult::json(const Scenario& s) const {
    std::vector<Time> t = op_times, du = op_durations;
    std::sort(t.begin(), t.end());
    std::sort(du.begin(), du.end());
    const auto& pct_of = percentile_us;
    auto pct = [&](double q) { return pct_of(t, q); };
    std::string o = "{\n";
    o += "  \"scenario\": \"" + s.origin + "\",\n";
    o += "  \"transport\": \"" + std::string(to_string(s.transport)) + "\", \"pfc\": " + (s.fabric.pfc ? "true" : "false") + ",\n";
    o += "  \"workload\": \"" + std::string(to_string(s.workload.kind)) + "\", \"hosts\": " + std::to_string(s.fabric.hosts) +
         ", \"bytes\": " + std::to_string(s.workload.bytes) + ",\n";
    o += "  \"link_gbps\": " + num(double(s.fabric.link_bps) / 1e9) + ", \"link_loss\": " + num(s.fabric.link_loss) +
         ", \"path_loss\": " + num(s.fabric.path_loss) + ", \"seed\": " + std::to_string(s.seed) + ",\n";
    o += "  \"completed\": " + std::string(completed ? "true" : "false") + ", \"ops\": " + std::to_string(ops) +
         ", \"failed_ops\": " + std::to_string(failed_ops) + ",\n";
    o += "  \"jct_us\": " + num(double(jct) / 1e3) + ", \"op_completion_us\": {\"p50\": " + num(pct(0.5)) +
         ", \"p99\": " + num(pct(0.99)) + ", \"max\": " + num(t.empty() ? 0.0 : double(t.back()) / 1e3) + "},\n";
    o += "  \"op_duration_us\": {\"p50\": " + num(pct_of(du, 0.5)) + ", \"p99\": " + num(pct_of(du, 0.99)) +
         ", \"max\": " + num(du.empty() ? 0.0 : double(du.back()) / 1e3) + "},\n";
    if (!classes.empty()) {
        o += "  \"fct_us\": {";
        for (size_t i = 0; i < classes.size(); ++i)
            o += std::string(i ? ", " : "") + "\"" + classes[i].name + "\": {\"count\": " +
                 std::to_string(classes[i].durations.size()) + ", \"p50\": " + num(classes[i].pct(0.5)) +
                 ", \"p99\": " + num(classes[i].pct(0.99)) + ", \"max\": " + num(classes[i].pct(1)) + "}";
        o += "},\n";
    }
    o += "  \"placed_bytes\": " + std::to_string(placed_bytes) + ", \"algbw_gbps\": " + num(algbw_gbps) + ",\n";
    o += "  \"aggregate_gbps\": " + num(aggregate_gbps) + ", \"jain\": " + num(jain) +
         ", \"jain_from_2rtt\": " + num(jain_from_2rtt) + ", \"base_rtt_us\": " + num(double(base_rtt) / 1e3) + ",\n";
    o += "  \"host_gbps\": [";
    for (size_t i = 0; i < host_gbps.size(); ++i) o += (i ? ", " : "") + num(host_gbps[i]);
    o += "],\n";
    o += "  \"plane_packets\": [";
    for (size_t i = 0; i < plane_packets.size(); ++i) o += (i ? ", " : "") + std::to_string(plane_packets[i]);
    o += "],\n";
    o += "  \"fabric\": {\"drops\": " + std::to_string(fabric_drops) + ", \"ce_marks\": " + std::to_string(ce_marks) +
         ", \"max_queue_bytes\": " + std::to_string(max_queue_bytes) +
         ", \"switch_max_queue_bytes\": " + std::to_string(switch_max_queue_bytes) + ", \"pfc_pauses\": " + std::to_string(pfc_pauses) +
         ", \"pfc_paused_us\": " + num(double(pfc_paused_ns) / 1e3) + "},\n";
    o += "  \"per_" + group_kind + "\": [";
    for (size_t i = 0; i < groups.size(); ++i) {
        const GroupStats& g = groups[i];
        o += std::string(i ? ",\n    " : "\n    ") + "{\"" + group_kind + "\": " + std::to_string(i) +
             ", \"tx_packets\": " + std::to_string(g.tx_packets) + ", \"drop_queue\": " + std::to_string(g.drop_queue) +
             ", \"drop_loss\": " + std::to_string(g.drop_loss) + ", \"drop_down\": " + std::to_string(g.drop_down) +
             ", \"ce_marks\": " + std::to_string(g.ce_marks) + ", \"max_queue_bytes\": " + std::to_string(g.max_queue_bytes) +
             ", \"nic_max_queue_bytes\": " + std::to_string(g.nic_max_queue_bytes) +
             ", \"mean_queue_bytes\": " + num(g.mean_queue_bytes) + "}";
    }
    o += "],\n";
    if (!tiers.empty()) {
        o += "  \"per_tier\": [";
        for (size_t i = 0; i < tiers.size(); ++i) {
            const TierStats& x = tiers[i];
            o += std::string(i ? ",\n    " : "\n    ") + "{\"tier\": \"" + x.name + "\", \"links\": " +
                 std::to_string(x.links) + ", \"tx_packets\": " + std::to_string(x.tx_packets) +
                 ", \"min_link_tx_packets\": " + std::to_string(x.min_link_tx_packets) +
                 ", \"drop_queue\": " + std::to_string(x.drop_queue) + ", \"ce_marks\": " + std::to_string(x.ce_marks) +
                 ", \"max_queue_bytes\": " + std::to_string(x.max_queue_bytes) + "}";
        }
        o += "],\n";
    }
    o += "  \"transport_stats\": {" + transport_stats + "},\n";
    o += "  \"wall_s\": " + num(wall_s) + "\n}\n";
    return o;
}

void RunResult::write_csv(std::FILE* f) const {
    // time, aggregate goodput (payload placed), wire Gbit/s into each plane/path, incast's Jain index
    std::fprintf(f, "time_us,aggregate_gbps");
    for (size_t g = 0; g < groups.size(); ++g) std::fprintf(f, ",%s%zu_wire_gbps", group_kind.c_str(), g);
    std::fprintf(f, ",jain\n");
    for (const Sample& x : series) {
        std::fprintf(f, "%.3f,%.6g", double(x.t) / 1e3, x.gbps);
        for (double g : x.group_gbps) std::fprintf(f, ",%.6g", g);
        std::fprintf(f, ",%.6g\n", x.jain);
    }
}

}  // namespace mroce::simapp
