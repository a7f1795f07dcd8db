// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Shared by the congestion-control tests and the loss benchmark: real
// engines on the simulated fabric, kept backlogged with WRITEs, with
// per-flow goodput read from the receiver's own counters (deduplicated,
// placed bytes), so what is measured is what the application would see.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "fabric.hpp"
#include "mroce/engine.hpp"

namespace cctest {

using namespace mroce;
using namespace mroce::sim;

struct Node {
    Engine eng;
    HostId host = 0;
    uint32_t pd = 0, cq = 0;
    std::vector<uint8_t> mem;
    MrInfo mr{};
    Node(const EngineConfig& cfg, size_t bytes) : eng(cfg), mem(bytes) {
        pd = eng.alloc_pd();
        if (eng.create_cq(4096, cq) != Status::ok) throw std::runtime_error("create_cq");
        if (eng.register_mr(pd, mem.data(), mem.size(), kAccessLocalWrite | kAccessRemoteWrite, mr) != Status::ok)
            throw std::runtime_error("register_mr");
    }
    uint64_t addr(size_t off = 0) const { return uint64_t(reinterpret_cast<uintptr_t>(mem.data())) + off; }
};

// One sender -> receiver connection that is kept backlogged: `depth` WRITEs
// of `msg` bytes stay posted, each reposted as soon as it completes.
struct Flow {
    Node* src = nullptr;
    Node* dst = nullptr;
    uint32_t src_conn = 0, dst_conn = 0;
    size_t dst_off = 0;
    uint32_t msg = 256 << 10;
    uint32_t depth = 4;
    bool running = false;
    uint32_t outstanding = 0;
    uint64_t posted = 0, completed = 0, errors = 0;

    void post_one() {
        SendWr wr;
        wr.wr_id = posted++;
        wr.op = OpKind::write;
        wr.local_addr = src->addr();
        wr.length = msg;
        wr.lkey = src->mr.lkey;
        wr.remote_addr = dst->addr(dst_off);
        wr.rkey = dst->mr.rkey;
        if (src->eng.post_send(src_conn, 1, wr) != Status::ok) throw std::runtime_error("post_send");
        ++outstanding;
    }
    void start() {
        running = true;
        while (outstanding < depth) post_one();
    }
    // Reaps completions; reposts while running.
    void service() {
        Completion c[64];
        for (size_t n; (n = src->eng.poll_cq(src->cq, c, 64)) > 0;) {
            for (size_t i = 0; i < n; ++i) {
                --outstanding;
                ++completed;
                if (c[i].status != WcStatus::success) ++errors;
            }
        }
        while (running && outstanding < depth) post_one();
    }
    // Bytes placed at the receiver (each CSN once, R-CSN-3).
    uint64_t rx_bytes() const {
        ConnStats s;
        dst->eng.conn_stats(dst_conn, s);
        return s.rx_payload_bytes;
    }
};

// Connects every flow (sender side active open) and creates stream 1 on both ends.
inline bool connect_all(Fabric& fab, std::vector<Flow>& flows, Time limit) {
    for (Flow& f : flows)
        if (f.src->eng.connect(f.dst->host, f.src_conn) != Status::ok) return false;
    const bool ok = fab.run_until(
        [&] {
            bool all = true;
            for (Flow& f : flows) {
                ConnEvent ev[32];
                for (size_t i = 0, n = f.dst->eng.poll_events(ev, 32); i < n; ++i) {
                    if (ev[i].kind != EventKind::incoming) continue;
                    for (Flow& g : flows)
                        if (g.dst == f.dst && g.src->host == ev[i].peer) g.dst_conn = ev[i].conn;
                }
                all = all && f.dst_conn != 0 && f.src->eng.conn_state(f.src_conn) == ConnState::established;
            }
            return all;
        },
        fab.now() + limit);
    if (!ok) return false;
    for (Flow& f : flows) {
        ConnEvent drain[32];
        f.src->eng.poll_events(drain, 32);
        if (f.src->eng.create_stream(f.src_conn, 1, f.src->pd, f.src->cq, f.src->cq) != Status::ok) return false;
        if (f.dst->eng.create_stream(f.dst_conn, 1, f.dst->pd, f.dst->cq, f.dst->cq) != Status::ok) return false;
    }
    return true;
}

// Advances virtual time to t in small slices, keeping the flows backlogged.
inline void run_flows(Fabric& fab, std::vector<Flow>& flows, Time t, Time slice = 2'000) {
    while (fab.now() < t) {
        fab.run_until(std::min(t, fab.now() + slice));
        for (Flow& f : flows) f.service();
    }
}

// The arrangement a test asked for is the one that ran (R-CC-8): with
// offload_cc every window update went through the host's separate CC stage
// (the engine queued feedback, none was dropped), inline none did.
inline bool cc_arrangement_ran(const Engine& e) {
    const EngineStats& s = e.stats();
    if (e.config().offload_cc) return s.cc_feedback > 0 && s.cc_feedback_full == 0 && s.cc_views_stale == 0;
    return s.cc_feedback == 0;
}

inline double jain(const std::vector<double>& x) {
    double s = 0, s2 = 0;
    for (double v : x) {
        s += v;
        s2 += v * v;
    }
    return s2 > 0 ? s * s / (double(x.size()) * s2) : 0.0;
}

// Per-flow placed bytes at one instant, to difference into window goodputs.
inline std::vector<uint64_t> snapshot(const std::vector<Flow>& flows) {
    std::vector<uint64_t> v;
    for (const Flow& f : flows) v.push_back(f.rx_bytes());
    return v;
}

inline std::vector<double> rates_gbps(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b, Time dt) {
    std::vector<double> r;
    for (size_t i = 0; i < a.size(); ++i) r.push_back(double(b[i] - a[i]) * 8.0 / double(dt));
    return r;
}

}  // namespace cctest
