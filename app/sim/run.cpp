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
};

Built build_fabric(Fabric& fab, const Scenario& s, const Cluster& c) {
    const FabricSpec& f = s.fabric;
    LinkConfig link;
    link.rate_bps = f.link_bps;
    link.delay = f.link_delay;
    link.capacity_bytes = f.buffer_bytes;
    link.ecn_threshold_bytes = f.ecn_bytes;
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
            break;
        }
        case TopologyKind::planes: {
            PlanesConfig pc;
            pc.planes = f.planes;
            pc.spines = f.spines;
            pc.hosts_per_leaf = f.hosts_per_leaf;
            pc.host_link = link;
            pc.spine_link = link;
            b.planes = build_planes(fab, hosts, pc);
            b.has_planes = true;
            for (size_t h = 0; h < hosts.size(); ++h)
                for (uint16_t p = 0; p < f.planes; ++p) {
                    b.host_links[h].push_back(b.planes.up[h * f.planes + p]);
                    b.host_down[h].push_back(b.planes.down[h * f.planes + p]);
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
};

// Ring all-reduce: reduce-scatter then all-gather, 2(N-1) steps of bytes/N
// per host; step k at host i may start once i has received step k-1 from
// its left neighbour (its WRITE completed: acknowledged by i).
class RingAllReduce final : public Workload {
public:
    RingAllReduce(uint32_t n, uint64_t bytes)
        : n_(n), step_bytes_(std::max<uint64_t>(1, bytes / n)), steps_(2 * (n - 1)), received_(n, 0), sent_(n, 0) {}
    std::vector<std::pair<uint32_t, uint32_t>> pairs() const override {
        std::vector<std::pair<uint32_t, uint32_t>> p;
        for (uint32_t i = 0; i < n_; ++i) p.emplace_back(i, (i + 1) % n_);
        return p;
    }
    void start(Cluster& c) override {
        for (uint32_t i = 0; i < n_; ++i) post(c, i, 0);
    }
    void on_done(Cluster& c, const Done& d, Time) override {
        const uint32_t i = uint32_t(d.tag >> 32);
        const uint32_t k = uint32_t(d.tag);
        ++done_;
        const uint32_t next = (i + 1) % n_;
        ++received_[next];
        if (k + 1 < steps_) post(c, next, k + 1);
    }
    bool finished() const override { return done_ == uint64_t(n_) * steps_; }
    uint64_t ops() const override { return uint64_t(n_) * steps_; }
    uint64_t sent_by(uint32_t h) const override { return sent_[h]; }

private:
    void post(Cluster& c, uint32_t i, uint32_t k) {
        c.write(i, (i + 1) % n_, step_bytes_, uint64_t(i) << 32 | k);
        sent_[i] += step_bytes_;
    }
    uint32_t n_;
    uint64_t step_bytes_;
    uint32_t steps_;
    std::vector<uint32_t> received_;
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
        for (uint32_t i = 1; i < n_; ++i) c.write(i, 0, bytes_, i);
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

double jain(const std::vector<double>& x) {
    double s = 0, s2 = 0;
    for (double v : x) {
        s += v;
        s2 += v * v;
    }
    return s2 > 0 ? s * s / (double(x.size()) * s2) : 0.0;
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
    if (s.workload.kind == WorkloadKind::ring_allreduce) wl = std::make_unique<RingAllReduce>(n, s.workload.bytes);
    else wl = std::make_unique<Incast>(n, s.workload.bytes);

    if (!cluster->connect(fab, wl->pairs(), 1'000'000'000))
        throw std::runtime_error("mroce-sim: connections did not come up within 1 s of virtual time");
    // Loss and events only once connected, so every run starts from the same state.
    apply_loss(fab, s, built);
    const Time start = fab.now();
    std::vector<uint64_t> plane_base(s.fabric.planes, 0);
    schedule_events(fab, s, built, start, plane_base);

    RunResult r;
    std::vector<uint64_t> rx0(n);
    uint64_t rx_prev = 0;
    for (uint32_t i = 0; i < n; ++i) rx_prev += rx0[i] = cluster->rx_bytes(i);
    Time next_sample = s.sample_interval ? start + s.sample_interval : kNever;
    wl->start(*cluster);
    std::vector<Done> done;
    auto last_print = std::chrono::steady_clock::now();
    const Time limit = start + s.workload.time_limit;
    while (!wl->finished() && fab.now() < limit) {
        fab.run_until(std::min(limit, fab.now() + s.slice));
        done.clear();
        cluster->poll(done);
        for (const Done& d : done) {
            if (!d.ok) ++r.failed_ops;
            r.op_times.push_back(fab.now() - start);
            wl->on_done(*cluster, d, fab.now() - start);
        }
        if (fab.now() >= next_sample) {
            uint64_t rx = 0;
            for (uint32_t i = 0; i < n; ++i) rx += cluster->rx_bytes(i);
            r.series.push_back({fab.now() - start, double(rx - rx_prev) * 8.0 / double(s.sample_interval)});
            rx_prev = rx;
            next_sample += s.sample_interval;
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
    if (built.has_planes)
        for (uint16_t p = 0; p < s.fabric.planes; ++p) r.plane_packets.push_back(plane_tx(fab, built, p) - plane_base[p]);
    r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    return r;
}

std::string RunResult::json(const Scenario& s) const {
    std::vector<Time> t = op_times;
    std::sort(t.begin(), t.end());
    auto pct = [&](double q) -> double {
        return t.empty() ? 0.0 : double(t[std::min(t.size() - 1, size_t(q * double(t.size())))]) / 1e3;
    };
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
    o += "  \"aggregate_gbps\": " + num(aggregate_gbps) + ", \"jain\": " + num(jain) + ",\n";
    o += "  \"host_gbps\": [";
    for (size_t i = 0; i < host_gbps.size(); ++i) o += (i ? ", " : "") + num(host_gbps[i]);
    o += "],\n";
    o += "  \"plane_packets\": [";
    for (size_t i = 0; i < plane_packets.size(); ++i) o += (i ? ", " : "") + std::to_string(plane_packets[i]);
    o += "],\n";
    o += "  \"fabric\": {\"drops\": " + std::to_string(fabric_drops) + ", \"ce_marks\": " + std::to_string(ce_marks) +
         ", \"max_queue_bytes\": " + std::to_string(max_queue_bytes) + ", \"pfc_pauses\": " + std::to_string(pfc_pauses) +
         ", \"pfc_paused_us\": " + num(double(pfc_paused_ns) / 1e3) + "},\n";
    o += "  \"transport_stats\": {" + transport_stats + "},\n";
    o += "  \"wall_s\": " + num(wall_s) + "\n}\n";
    return o;
}

void RunResult::write_csv(std::FILE* f) const {
    std::fprintf(f, "time_us,aggregate_gbps\n");
    for (const Sample& x : series) std::fprintf(f, "%.3f,%.6g\n", double(x.t) / 1e3, x.gbps);
}

}  // namespace mroce::simapp
