// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Fabric throughput in simulated packets per second of wall time, with lean
// window-limited endpoints (no engine) so the number is the sim's own cost.
// Wall time is read here, never inside the fabric.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fabric.hpp"
#include "mroce/engine.hpp"

using namespace mroce;
using namespace mroce::sim;

namespace {

constexpr uint32_t kAckLen = 72;

// Sends `payload`-byte data packets spread over paths, at most `window`
// unacknowledged; acks every data packet it receives with a 72-byte packet.
// Losses are forgiven on a timer (a stand-in for the engine's recovery).
class BenchEndpoint final : public Endpoint {
public:
    BenchEndpoint(HostId peer, uint32_t window, uint16_t paths, uint32_t payload, bool sender)
        : peer_(peer), window_(window), paths_(paths), payload_(payload), sender_(sender) {
        acks_.reserve(4096);
    }
    uint64_t data_rx = 0;

    void rx_burst(const RxPacket* pkts, size_t n, Time) override {
        for (size_t i = 0; i < n; ++i) {
            if (pkts[i].len == kAckLen) {
                if (acked_ < sent_) ++acked_;
            } else {
                ++data_rx;
                acks_.push_back({pkts[i].peer, pkts[i].local_path});
            }
        }
    }
    size_t tx_burst(TxPacket* out, size_t max, Time now) override {
        size_t k = 0;
        while (k < max && ack_head_ < acks_.size()) {
            TxPacket& p = out[k++];
            p.peer = acks_[ack_head_].peer;
            p.path = acks_[ack_head_].path;
            p.entropy = p.path;
            p.ect = 0;
            p.hdr_len = kAckLen;
            p.payload_len = 0;
            p.payload = nullptr;
            ++ack_head_;
        }
        if (ack_head_ == acks_.size()) acks_.clear(), ack_head_ = 0;
        if (!sender_) return k;
        if (sent_ - acked_ >= window_ && stalled_ != kNever && now >= stalled_ + 200'000) acked_ = sent_;
        while (k < max && sent_ - acked_ < window_) {
            TxPacket& p = out[k++];
            p.peer = peer_;
            p.path = uint16_t(sent_ % paths_);
            p.entropy = uint16_t(sent_ % (paths_ * 4));
            p.ect = 1;
            p.hdr_len = 72;
            p.payload_len = payload_;
            p.payload = payload_bytes();
            ++sent_;
        }
        stalled_ = sent_ - acked_ >= window_ ? (stalled_ == kNever ? now : stalled_) : kNever;
        return k;
    }
    Time next_deadline(Time) override { return stalled_ == kNever ? kNever : stalled_ + 200'000; }

private:
    static const uint8_t* payload_bytes() {
        static uint8_t bytes[9000];
        return bytes;
    }
    struct Owed {
        HostId peer;
        uint16_t path;
    };
    HostId peer_;
    uint32_t window_;
    uint16_t paths_;
    uint32_t payload_;
    bool sender_;
    uint32_t sent_ = 0, acked_ = 0;
    Time stalled_ = kNever;
    std::vector<Owed> acks_;
    size_t ack_head_ = 0;
};

struct Result {
    double wall_s;
    uint64_t packets;
    uint64_t events;
    Time sim_ns;
};

void report(const char* name, const Result& r, uint64_t data) {
    std::printf("%-34s %9.3f s wall  %6.2f ms sim  %10llu pkts  %6.2f Mpkt/s  %6.2f Mevents/s  data %llu\n", name,
                r.wall_s, double(r.sim_ns) / 1e6, (unsigned long long)r.packets, double(r.packets) / r.wall_s / 1e6,
                double(r.events) / r.wall_s / 1e6, (unsigned long long)data);
}

template <class Fn>
Result timed(Fabric& fab, Time sim_ns, Fn&& delivered) {
    const auto t0 = std::chrono::steady_clock::now();
    fab.run_until(sim_ns);
    const auto t1 = std::chrono::steady_clock::now();
    return Result{std::chrono::duration<double>(t1 - t0).count(), delivered(), fab.events_processed(), sim_ns};
}

uint64_t delivered_packets(const Fabric& fab) {
    uint64_t n = 0;
    for (HostId h = 0; h < fab.num_hosts(); ++h) n += fab.host_counters(h).rx_packets;
    return n;
}

void bench_pair(uint32_t payload, double loss) {
    Fabric fab(1);
    BenchEndpoint a(1, 512, 4, payload, true), b(0, 0, 4, payload, false);
    fab.add_host(a);
    fab.add_host(b);
    PairConfig pc;
    pc.paths = 4;
    pc.link.rate_bps = 100'000'000'000;
    pc.link.delay = 2'000;
    pc.link.capacity_bytes = 1 << 20;
    pc.link.ecn_threshold_bytes = 200'000;
    pc.link.loss = loss;
    build_pair(fab, 0, 1, pc);
    const Result r = timed(fab, 50'000'000, [&] { return delivered_packets(fab); });
    char name[64];
    std::snprintf(name, sizeof name, "pair 4 paths %u B loss %.2f", payload, loss);
    report(name, r, b.data_rx);
}

void bench_incast(int senders, uint32_t payload) {
    Fabric fab(1);
    std::vector<std::unique_ptr<BenchEndpoint>> eps;
    std::vector<HostId> ids;
    for (int i = 0; i < senders; ++i) {
        eps.push_back(std::make_unique<BenchEndpoint>(HostId(senders), 64, 4, payload, true));
        ids.push_back(fab.add_host(*eps.back()));
    }
    BenchEndpoint rx(0, 0, 1, payload, false);
    fab.add_host(rx);
    StarConfig sc;
    sc.bottleneck.capacity_bytes = 2 << 20;
    sc.bottleneck.ecn_threshold_bytes = 100'000;
    const StarTopology star = build_star(fab, ids, HostId(senders), sc);
    const Result r = timed(fab, 50'000'000, [&] { return delivered_packets(fab); });
    char name[64];
    std::snprintf(name, sizeof name, "incast %d:1 %u B", senders, payload);
    report(name, r, rx.data_rx);
    const LinkCounters& bn = fab.link(star.bottleneck).counters();
    std::printf("  in flight %llu, bottleneck drops %llu, max queue %llu\n",
                (unsigned long long)fab.packets_in_flight(), (unsigned long long)bn.drop_queue,
                (unsigned long long)bn.max_queue_bytes);
}

void bench_planes(uint32_t payload) {
    constexpr int kHosts = 16;
    Fabric fab(1);
    std::vector<std::unique_ptr<BenchEndpoint>> eps;
    std::vector<HostId> ids;
    for (int i = 0; i < kHosts; ++i) {
        // Host i sends to host i^1's partner across the leaf boundary.
        eps.push_back(std::make_unique<BenchEndpoint>(HostId((i + kHosts / 2) % kHosts), 256, 8, payload, true));
        ids.push_back(fab.add_host(*eps.back()));
    }
    PlanesConfig pc;
    pc.planes = 4;
    pc.spines = 4;
    pc.hosts_per_leaf = kHosts / 2;
    pc.host_link.capacity_bytes = 1 << 20;
    pc.spine_link.capacity_bytes = 1 << 20;
    pc.spine_link.ecn_threshold_bytes = 100'000;
    build_planes(fab, ids, pc);
    const Result r = timed(fab, 20'000'000, [&] { return delivered_packets(fab); });
    uint64_t data = 0;
    for (auto& e : eps) data += e->data_rx;
    char name[64];
    std::snprintf(name, sizeof name, "planes 4x4 spines, %d hosts %u B", kHosts, payload);
    report(name, r, data);
}

// Two real engines over a 4-path pair: back-to-back 1 MiB WRITEs, so the
// figure includes the engine's own per-packet work.
void bench_engines(double loss) {
    EngineConfig cfg;
    cfg.num_paths = 4;
    constexpr size_t kLen = 1 << 20;
    struct Side {
        Engine eng;
        uint32_t pd = 0, cq = 0, conn = 0;
        std::vector<uint8_t> mem;
        MrInfo mr{};
        explicit Side(const EngineConfig& c) : eng(c), mem(kLen) {
            pd = eng.alloc_pd();
            eng.create_cq(4096, cq);
            eng.register_mr(pd, mem.data(), mem.size(), kAccessLocalWrite | kAccessRemoteWrite, mr);
        }
    } a(cfg), b(cfg);
    Fabric fab(1);
    const HostId ha = fab.add_host(a.eng), hb = fab.add_host(b.eng);
    PairConfig pc;
    pc.paths = 4;
    pc.link.rate_bps = 100'000'000'000;
    pc.link.delay = 2'000;
    pc.link.capacity_bytes = 1 << 20;
    pc.link.ecn_threshold_bytes = 200'000;
    pc.link.loss = loss;
    build_pair(fab, ha, hb, pc);
    a.eng.connect(hb, a.conn);
    fab.run_until(
        [&] {
            ConnEvent ev[4];
            for (size_t i = 0, n = b.eng.poll_events(ev, 4); i < n; ++i)
                if (ev[i].kind == EventKind::incoming) b.conn = ev[i].conn;
            return b.conn && a.eng.conn_state(a.conn) == ConnState::established;
        },
        100'000'000);
    a.eng.create_stream(a.conn, 1, a.pd, a.cq, a.cq);
    b.eng.create_stream(b.conn, 1, b.pd, b.cq, b.cq);
    const uint64_t pkts0 = delivered_packets(fab), events0 = fab.events_processed();
    const Time sim0 = fab.now();
    uint64_t done = 0, posted = 0;
    auto post = [&] {
        SendWr wr;
        wr.wr_id = posted++;
        wr.op = OpKind::write;
        wr.local_addr = uint64_t(reinterpret_cast<uintptr_t>(a.mem.data()));
        wr.length = uint32_t(kLen);
        wr.lkey = a.mr.lkey;
        wr.remote_addr = uint64_t(reinterpret_cast<uintptr_t>(b.mem.data()));
        wr.rkey = b.mr.rkey;
        a.eng.post_send(a.conn, 1, wr);
    };
    for (int i = 0; i < 4; ++i) post();
    const auto t0 = std::chrono::steady_clock::now();
    const Time end = sim0 + 20'000'000;
    while (fab.now() < end) {
        fab.run_until(
            [&] {
                Completion c[16];
                const size_t n = a.eng.poll_cq(a.cq, c, 16);
                done += n;
                return n > 0;
            },
            end);
        while (posted - done < 4) post();
    }
    const auto t1 = std::chrono::steady_clock::now();
    const Result r{std::chrono::duration<double>(t1 - t0).count(), delivered_packets(fab) - pkts0,
                   fab.events_processed() - events0, fab.now() - sim0};
    char name[64];
    std::snprintf(name, sizeof name, "engines pair 4 paths loss %.2f", loss);
    report(name, r, done);
    std::printf("  goodput %.1f Gbit/s simulated\n", double(done) * kLen * 8 / double(r.sim_ns));
}

}  // namespace

int main(int argc, char** argv) {
    // Optional argument: run only the benchmarks whose name starts with it.
    const std::string only = argc > 1 ? argv[1] : "";
    auto want = [&](const char* name) { return only.empty() || std::string(name).rfind(only, 0) == 0; };
    if (want("pair")) {
        bench_pair(4096, 0.0);
        bench_pair(4096, 0.01);
        bench_pair(1024, 0.0);
    }
    if (want("incast")) bench_incast(16, 4096);
    if (want("planes")) bench_planes(4096);
    if (want("engines")) {
        bench_engines(0.0);
        bench_engines(0.01);
    }
    return 0;
}
