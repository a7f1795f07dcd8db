// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Smoke tests: two real engines connect and move a WRITE through the fabric.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "fabric.hpp"
#include "mroce/engine.hpp"

using namespace mroce;
using namespace mroce::sim;

namespace {

struct Side {
    Engine eng;
    HostId host = 0;
    uint32_t pd = 0, cq = 0, conn = 0;
    std::vector<uint8_t> mem;
    MrInfo mr{};
    explicit Side(const EngineConfig& cfg, size_t bytes) : eng(cfg), mem(bytes) {
        pd = eng.alloc_pd();
        REQUIRE(eng.create_cq(1024, cq) == Status::ok);
        REQUIRE(eng.register_mr(pd, mem.data(), mem.size(), kAccessLocalWrite | kAccessRemoteWrite, mr) ==
                Status::ok);
    }
    uint64_t addr(size_t off = 0) const { return uint64_t(reinterpret_cast<uintptr_t>(mem.data())) + off; }
};

bool connect(Fabric& fab, Side& a, Side& b) {
    if (a.eng.connect(b.host, a.conn) != Status::ok) return false;
    bool incoming = false;
    const bool ok = fab.run_until(
        [&] {
            ConnEvent ev[8];
            const size_t n = b.eng.poll_events(ev, 8);
            for (size_t i = 0; i < n; ++i)
                if (ev[i].kind == EventKind::incoming && ev[i].peer == a.host) {
                    b.conn = ev[i].conn;
                    incoming = true;
                }
            return incoming && a.eng.conn_state(a.conn) == ConnState::established;
        },
        fab.now() + 100'000'000);
    ConnEvent drain[8];
    a.eng.poll_events(drain, 8);
    return ok;
}

// Posts one WRITE of `len` bytes from a to b and waits for its completion.
std::vector<Completion> write_and_wait(Fabric& fab, Side& a, Side& b, size_t len, Time limit) {
    for (size_t i = 0; i < len; ++i) a.mem[i] = uint8_t(i * 131 + (i >> 9));
    SendWr wr;
    wr.wr_id = 4242;
    wr.op = OpKind::write;
    wr.local_addr = a.addr();
    wr.length = uint32_t(len);
    wr.lkey = a.mr.lkey;
    wr.remote_addr = b.addr(512);
    wr.rkey = b.mr.rkey;
    REQUIRE(a.eng.post_send(a.conn, 1, wr) == Status::ok);
    std::vector<Completion> got;
    fab.run_until(
        [&] {
            Completion c[8];
            const size_t n = a.eng.poll_cq(a.cq, c, 8);
            got.insert(got.end(), c, c + n);
            return !got.empty();
        },
        fab.now() + limit);
    return got;
}

}  // namespace

TEST_CASE("two engines connect and complete a WRITE over 4 parallel paths", "[sim][engine]") {
    EngineConfig cfg;
    cfg.num_paths = 4;
    constexpr size_t len = (256 << 10) + 77;
    Side a(cfg, len + 4096), b(cfg, len + 4096);
    Fabric fab(1);
    a.host = fab.add_host(a.eng);
    b.host = fab.add_host(b.eng);
    PairConfig pc;
    pc.paths = 4;
    pc.per_path.resize(4);
    for (size_t i = 0; i < 4; ++i) {
        pc.per_path[i].rate_bps = 100'000'000'000;
        pc.per_path[i].delay = 2'000 + 700 * i;  // different delays: the receiver sees reordering
        pc.per_path[i].capacity_bytes = 1 << 20;
    }
    const PairTopology topo = build_pair(fab, a.host, b.host, pc);
    REQUIRE(connect(fab, a, b));
    REQUIRE(a.eng.create_stream(a.conn, 1, a.pd, a.cq, a.cq) == Status::ok);
    REQUIRE(b.eng.create_stream(b.conn, 1, b.pd, b.cq, b.cq) == Status::ok);

    const auto got = write_and_wait(fab, a, b, len, 100'000'000);
    REQUIRE(got.size() == 1);
    CHECK(got[0].wr_id == 4242);
    CHECK(got[0].status == WcStatus::success);
    CHECK(got[0].opcode == WcOpcode::write);
    CHECK(std::memcmp(a.mem.data(), b.mem.data() + 512, len) == 0);
    uint64_t data_links_used = 0;
    // 64 packets; the scheduler favours the shorter paths (R-SCHED-2) and the
    // first windows are the hint's BDP, not init_cwnd (R-HINT-8): the longest
    // path still carries its part.
    for (LinkId l : topo.forward) data_links_used += fab.link(l).counters().tx_packets >= 5;
    CHECK(data_links_used == 4);  // the engine spread the message over every path
    INFO("completed at " << fab.now() << " ns");
    CHECK(fab.now() < 10'000'000);
}

namespace {

struct LossyRun {
    uint64_t trace_hash = 0;
    Time completed_at = 0;
};

// 1 MiB WRITE over 4 paths with 1% loss; path 2 dies shortly after the
// transfer starts and never comes back.
LossyRun lossy_write(uint64_t seed) {
    EngineConfig cfg;
    cfg.num_paths = 4;
    constexpr size_t len = 1 << 20;
    Side a(cfg, len + 4096), b(cfg, len + 4096);
    Fabric fab(seed);
    a.host = fab.add_host(a.eng);
    b.host = fab.add_host(b.eng);
    PairConfig pc;
    pc.paths = 4;
    pc.link.rate_bps = 25'000'000'000;
    pc.link.delay = 3'000;
    pc.link.capacity_bytes = 512 << 10;
    pc.link.ecn_threshold_bytes = 64 << 10;
    pc.link.loss = 0.01;
    const PairTopology topo = build_pair(fab, a.host, b.host, pc);
    uint64_t h = 0xcbf29ce484222325ull;
    fab.set_trace([&h](const TraceEvent& e) {
        for (uint64_t v : {e.time, uint64_t(e.kind), uint64_t(e.link), uint64_t(e.src) << 32 | e.dst,
                           uint64_t(e.path) << 16 | e.entropy, uint64_t(e.len) << 8 | e.ce}) {
            h ^= v;
            h *= 0x100000001b3ull;
        }
    });
    REQUIRE(connect(fab, a, b));
    REQUIRE(a.eng.create_stream(a.conn, 1, a.pd, a.cq, a.cq) == Status::ok);
    REQUIRE(b.eng.create_stream(b.conn, 1, b.pd, b.cq, b.cq) == Status::ok);
    fab.at(fab.now() + 20'000, [&] { topo.set_path_up(fab, 2, false); });

    const auto got = write_and_wait(fab, a, b, len, 2'000'000'000);
    REQUIRE(got.size() == 1);
    CHECK(got[0].status == WcStatus::success);
    CHECK(std::memcmp(a.mem.data(), b.mem.data() + 512, len) == 0);
    uint64_t lost = 0;
    for (size_t p = 0; p < 4; ++p)
        lost += fab.link(topo.forward[p]).counters().drop_loss + fab.link(topo.reverse[p]).counters().drop_loss;
    CHECK(lost > 0);
    CHECK(fab.link(topo.forward[2]).counters().drop_down > 0);
    PathStats ps;
    REQUIRE(a.eng.path_stats(a.conn, 2, ps) == Status::ok);
    INFO("completed at " << fab.now() << " ns; path 2 timeouts " << ps.timeouts);
    CHECK(ps.timeouts > 0);
    return LossyRun{h, fab.now()};
}

}  // namespace

TEST_CASE("a WRITE completes through loss and a path failure", "[sim][engine]") {
    lossy_write(7);
}

TEST_CASE("engines over the fabric are deterministic for a seed", "[sim][engine]") {
    const LossyRun first = lossy_write(11);
    const LossyRun again = lossy_write(11);
    CHECK(again.trace_hash == first.trace_hash);
    CHECK(again.completed_at == first.completed_at);
    CHECK(lossy_write(12).trace_hash != first.trace_hash);
}

TEST_CASE("multi-plane: a WRITE survives a plane failure mid-transfer", "[sim][engine]") {
    EngineConfig cfg;
    cfg.num_paths = 8;  // two paths per plane
    constexpr size_t len = 2 << 20;
    Side a(cfg, len + 4096), b(cfg, len + 4096);
    Fabric fab(3);
    a.host = fab.add_host(a.eng);
    b.host = fab.add_host(b.eng);
    PlanesConfig pc;
    pc.planes = 4;
    pc.spines = 2;
    pc.host_link.rate_bps = 25'000'000'000;
    pc.host_link.delay = 500;
    pc.spine_link.rate_bps = 25'000'000'000;
    pc.spine_link.delay = 1'000;
    pc.spine_link.capacity_bytes = 1 << 20;
    pc.spine_link.ecn_threshold_bytes = 100 << 10;
    const std::vector<HostId> hosts = {a.host, b.host};
    const PlanesTopology topo = build_planes(fab, hosts, pc);
    REQUIRE(connect(fab, a, b));
    REQUIRE(a.eng.create_stream(a.conn, 1, a.pd, a.cq, a.cq) == Status::ok);
    REQUIRE(b.eng.create_stream(b.conn, 1, b.pd, b.cq, b.cq) == Status::ok);
    fab.at(fab.now() + 50'000, [&] { topo.set_plane_up(fab, 1, false); });

    const auto got = write_and_wait(fab, a, b, len, 2'000'000'000);
    REQUIRE(got.size() == 1);
    CHECK(got[0].status == WcStatus::success);
    CHECK(std::memcmp(a.mem.data(), b.mem.data() + 512, len) == 0);
    for (uint16_t p = 0; p < 4; ++p) {
        INFO("plane " << p);
        // Every plane carried data, plane 1 in the 50 us before it failed
        // (paced at the hint from the first packet, R-HINT-8: ~37 packets at most).
        CHECK(fab.link(topo.up[0 * 4 + p]).counters().tx_packets > 20);
    }
    CHECK(fab.link(topo.up[0 * 4 + 1]).counters().drop_down > 0);
    INFO("completed at " << fab.now() << " ns");
    CHECK(fab.now() < 100'000'000);
}

TEST_CASE("incast: four engines WRITE into one through a shared ECN queue", "[sim][engine]") {
    EngineConfig cfg;
    cfg.num_paths = 4;
    cfg.rx_capacity_mbps = 25'000;
    constexpr size_t len = 512 << 10;
    constexpr int kSenders = 4;
    std::vector<std::unique_ptr<Side>> senders;
    Fabric fab(5);
    std::vector<HostId> ids;
    for (int i = 0; i < kSenders; ++i) {
        senders.push_back(std::make_unique<Side>(cfg, len));
        senders.back()->host = fab.add_host(senders.back()->eng);
        ids.push_back(senders.back()->host);
    }
    // The receiver has a window per sender, and one connection per sender.
    Side rx(cfg, kSenders * len + 4096);
    rx.host = fab.add_host(rx.eng);
    StarConfig sc;
    sc.access.rate_bps = 25'000'000'000;
    sc.bottleneck.rate_bps = 25'000'000'000;
    sc.bottleneck.capacity_bytes = 256 << 10;
    sc.bottleneck.ecn_threshold_bytes = 32 << 10;
    sc.reverse.rate_bps = 25'000'000'000;
    const StarTopology topo = build_star(fab, ids, rx.host, sc);

    std::vector<uint32_t> rx_conn(kSenders, 0);
    for (auto& s : senders) REQUIRE(s->eng.connect(rx.host, s->conn) == Status::ok);
    int established = 0;
    REQUIRE(fab.run_until(
        [&] {
            ConnEvent ev[16];
            for (size_t i = 0, n = rx.eng.poll_events(ev, 16); i < n; ++i)
                if (ev[i].kind == EventKind::incoming) rx_conn[ev[i].peer] = ev[i].conn;
            established = 0;
            for (auto& s : senders) established += s->eng.conn_state(s->conn) == ConnState::established;
            return established == kSenders;
        },
        100'000'000));
    for (int i = 0; i < kSenders; ++i) {
        Side& s = *senders[i];
        REQUIRE(rx_conn[s.host] != 0);
        REQUIRE(s.eng.create_stream(s.conn, 1, s.pd, s.cq, s.cq) == Status::ok);
        REQUIRE(rx.eng.create_stream(rx_conn[s.host], 1, rx.pd, rx.cq, rx.cq) == Status::ok);
        for (size_t k = 0; k < len; ++k) s.mem[k] = uint8_t(k * 7 + i * 31);
        SendWr wr;
        wr.wr_id = uint64_t(i);
        wr.op = OpKind::write;
        wr.local_addr = s.addr();
        wr.length = uint32_t(len);
        wr.lkey = s.mr.lkey;
        wr.remote_addr = rx.addr(i * len);
        wr.rkey = rx.mr.rkey;
        REQUIRE(s.eng.post_send(s.conn, 1, wr) == Status::ok);
    }
    int done = 0;
    const Time start = fab.now();
    REQUIRE(fab.run_until(
        [&] {
            for (auto& s : senders) {
                Completion c[4];
                for (size_t i = 0, n = s->eng.poll_cq(s->cq, c, 4); i < n; ++i) {
                    CHECK(c[i].status == WcStatus::success);
                    ++done;
                }
            }
            return done == kSenders;
        },
        fab.now() + 1'000'000'000));
    for (int i = 0; i < kSenders; ++i)
        CHECK(std::memcmp(senders[i]->mem.data(), rx.mem.data() + i * len, len) == 0);
    const LinkCounters& bn = fab.link(topo.bottleneck).counters();
    const double seconds = double(fab.now() - start) / 1e9;
    INFO("bottleneck: " << bn.tx_packets << " pkts, " << bn.ce_marks << " CE, " << bn.drop_queue
                        << " tail drops, max queue " << bn.max_queue_bytes << " B; goodput "
                        << double(kSenders * len) * 8 / seconds / 1e9 << " Gbit/s");
    CHECK(bn.tx_packets >= kSenders * len / cfg.max_payload);
    // 4 x 25 Gbit/s into 25: the whole transfer cannot beat the bottleneck.
    CHECK(seconds >= double(kSenders * len) * 8 / 25e9);
}

// R-ACK-8 on the simulated fabric, with no injected fault at all: B's NAKs
// (sent on path 0) and path 0's ACKs return over a 2 ms reverse link while
// the other paths' ACKs take microseconds, so every NAK is overtaken by ACKs
// of later packets. B's stream 2 is in ERROR before A sends (B's own post
// failed its local check); stream 1 is healthy. 1% loss on every link in the
// second run; both placement and both CC arrangements. Every success is
// verified; stream 2 never succeeds.
TEST_CASE("sim: a NAK on a slow reverse path never loses to ACKs on fast ones", "[sim][engine][completion]") {
    const double loss = GENERATE(0.0, 0.01);
    const bool cc_stage = GENERATE(false, true);
    const bool deferred = GENERATE(false, true);
    INFO("loss " << loss << " CC stage " << cc_stage << " deferred placement " << deferred);
    EngineConfig cfg;
    cfg.num_paths = 4;
    cfg.offload_cc = cc_stage;
    cfg.deferred_placement = deferred;
    constexpr size_t kSlot = 32768, kLen = 20000;
    constexpr uint32_t kWrs = 40;
    Side a(cfg, kSlot * kWrs), b(cfg, kSlot * kWrs);
    Fabric fab(21 + uint64_t(loss * 100) + cc_stage + 2 * deferred);
    a.host = fab.add_host(a.eng);
    b.host = fab.add_host(b.eng);
    PairConfig pc;
    pc.paths = 4;
    pc.link.rate_bps = 25'000'000'000;
    pc.link.delay = 2'000;
    pc.link.capacity_bytes = 1 << 20;
    pc.link.loss = loss;
    const PairTopology topo = build_pair(fab, a.host, b.host, pc);
    REQUIRE(connect(fab, a, b));
    fab.link(topo.reverse[0]).set_delay(2'000'000);
    for (uint32_t s : {1u, 2u}) {
        REQUIRE(a.eng.create_stream(a.conn, s, a.pd, a.cq, a.cq) == Status::ok);
        REQUIRE(b.eng.create_stream(b.conn, s, b.pd, b.cq, b.cq) == Status::ok);
    }
    SendWr bad;
    bad.op = OpKind::write;
    bad.local_addr = b.addr();
    bad.length = 64;
    bad.lkey = b.mr.lkey ^ 0x00ff0000u;  // R-MEM-4: B's stream 2 enters ERROR at post
    REQUIRE(b.eng.post_send(b.conn, 2, bad) == Status::ok);
    for (uint32_t k = 0; k < kWrs; ++k) {
        for (size_t i = 0; i < kLen; ++i) a.mem[k * kSlot + i] = uint8_t(i * 7 + k * 13 + (i >> 8));
        SendWr w;
        w.wr_id = k;
        w.op = OpKind::write;
        w.local_addr = a.addr(k * kSlot);
        w.length = uint32_t(kLen);
        w.lkey = a.mr.lkey;
        w.remote_addr = b.addr(k * kSlot);
        w.rkey = b.mr.rkey;
        REQUIRE(a.eng.post_send(a.conn, 1 + (k & 1), w) == Status::ok);
    }
    std::vector<Completion> got;
    REQUIRE(fab.run_until(
        [&] {
            Completion c[16];
            for (size_t n; (n = a.eng.poll_cq(a.cq, c, 16)) > 0;) got.insert(got.end(), c, c + n);
            return got.size() >= kWrs;
        },
        fab.now() + 20'000'000'000ull));
    REQUIRE(got.size() == kWrs);
    size_t ok1 = 0, err2 = 0;
    for (const Completion& c : got) {
        INFO("WR " << c.wr_id << " stream " << c.stream << " " << to_string(c.status));
        if (c.status == WcStatus::success)
            CHECK(std::memcmp(a.mem.data() + c.wr_id * kSlot, b.mem.data() + c.wr_id * kSlot, kLen) == 0);
        if (c.stream == 1) ok1 += c.status == WcStatus::success;
        if (c.stream == 2) err2 += c.status != WcStatus::success;
    }
    CHECK(ok1 == kWrs / 2);
    CHECK(err2 == kWrs / 2);
    ConnStats sa;
    REQUIRE(a.eng.conn_stats(a.conn, sa) == Status::ok);
    CHECK(sa.naks_received > 0);
}

namespace {

struct PipelineRun {
    Time completed_at = 0;
    uint64_t place_jobs = 0;
};

// Both engines in the pipeline arrangement on the fabric (architecture 4.2):
// their payload copies on the hosts' modelled placement stages
// (deferred_placement), their windows on the modelled CC stages when
// cc_stage. A sends WRITEs and SENDs to B and READs from B, of sizes on both
// sides of place_inline_max and of a segment, through loss and duplication;
// every completion must be a success with its destination bytes in place.
PipelineRun pipeline_workload(uint64_t seed, double loss, bool cc_stage) {
    EngineConfig cfg;
    cfg.num_paths = 4;
    cfg.deferred_placement = true;
    cfg.offload_cc = cc_stage;
    constexpr size_t kSlot = 80 << 10;
    const uint32_t sizes[] = {0, 1, 255, 256, 257, 4095, 4096, 4097, 20000, 65537};
    constexpr size_t kOps = 3 * std::size(sizes);
    Side a(cfg, kSlot * kOps), b(cfg, kSlot * kOps);
    MrInfo b_read{};
    REQUIRE(b.eng.register_mr(b.pd, b.mem.data(), b.mem.size(), kAccessRemoteRead, b_read) == Status::ok);
    Fabric fab(seed);
    a.host = fab.add_host(a.eng);
    b.host = fab.add_host(b.eng);
    PairConfig pc;
    pc.paths = 4;
    pc.link.rate_bps = 25'000'000'000;
    pc.link.delay = 2'000;
    pc.link.capacity_bytes = 1 << 20;
    pc.link.loss = loss;
    pc.link.duplicate = loss;
    build_pair(fab, a.host, b.host, pc);
    REQUIRE(connect(fab, a, b));
    REQUIRE(a.eng.create_stream(a.conn, 1, a.pd, a.cq, a.cq) == Status::ok);
    REQUIRE(b.eng.create_stream(b.conn, 1, b.pd, b.cq, b.cq) == Status::ok);
    for (size_t i = 0; i < kSlot * kOps; ++i) {
        a.mem[i] = uint8_t(i * 7 + (i >> 11) + seed);
        b.mem[i] = uint8_t(i * 13 + (i >> 10) + 5);
    }
    const std::vector<uint8_t> a0 = a.mem, b0 = b.mem;
    for (size_t k = 0; k < std::size(sizes); ++k) {   // a receive for each SEND, B's slots 2k+1
        RecvWr r;
        r.wr_id = 1000 + k;
        r.addr = b.addr((3 * k + 1) * kSlot);
        r.length = uint32_t(kSlot);
        r.lkey = b.mr.lkey;
        REQUIRE(b.eng.post_recv(b.conn, 1, r) == Status::ok);
    }
    for (size_t k = 0; k < std::size(sizes); ++k)
        for (size_t op = 0; op < 3; ++op) {
            const size_t slot = 3 * k + op;
            SendWr w;
            w.wr_id = slot;
            w.op = op == 0 ? OpKind::write : op == 1 ? OpKind::send : OpKind::read;
            w.local_addr = a.addr(slot * kSlot);
            w.length = sizes[k];
            w.lkey = a.mr.lkey;
            w.remote_addr = b.addr(slot * kSlot);
            w.rkey = op == 2 ? b_read.rkey : b.mr.rkey;
            REQUIRE(a.eng.post_send(a.conn, 1, w) == Status::ok);
        }
    std::vector<Completion> got, recvs;
    REQUIRE(fab.run_until(
        [&] {
            Completion c[16];
            for (size_t n; (n = a.eng.poll_cq(a.cq, c, 16)) > 0;) got.insert(got.end(), c, c + n);
            for (size_t n; (n = b.eng.poll_cq(b.cq, c, 16)) > 0;) recvs.insert(recvs.end(), c, c + n);
            return got.size() >= kOps && recvs.size() >= std::size(sizes);
        },
        fab.now() + 5'000'000'000ull));
    REQUIRE(got.size() == kOps);
    REQUIRE(recvs.size() == std::size(sizes));
    for (const Completion& c : got) {
        INFO("WR " << c.wr_id << " " << to_string(c.status));
        REQUIRE(c.status == WcStatus::success);
        const size_t off = c.wr_id * kSlot, len = sizes[c.wr_id / 3];
        if (c.wr_id % 3 == 2) {   // READ: B's bytes at A
            CHECK(std::memcmp(a.mem.data() + off, b0.data() + off, len) == 0);
            CHECK(a.mem[off + len] == a0[off + len]);
        } else {
            CHECK(std::memcmp(b.mem.data() + off, a0.data() + off, len) == 0);
            CHECK(b.mem[off + len] == b0[off + len]);
        }
    }
    for (const Completion& c : recvs) {
        CHECK(c.status == WcStatus::success);
        CHECK(c.byte_len == sizes[c.wr_id - 1000]);
    }
    const PipelineRun run{fab.now(), a.eng.stats().place_jobs + b.eng.stats().place_jobs};
    // Every copy went through a placement stage (READ responses at A, the rest at B) and came back.
    CHECK(a.eng.stats().place_jobs > 0);
    CHECK(b.eng.stats().place_jobs > 0);
    CHECK(a.eng.place_outstanding() == 0);
    CHECK(b.eng.place_outstanding() == 0);
    CHECK(a.eng.stats().rx_place_full + b.eng.stats().rx_place_full == 0);
    if (cc_stage) CHECK(a.eng.stats().cc_feedback > 0);
    // Quiet, then every wire copy a copy kept is back: nothing in flight.
    fab.run_for(50'000'000);
    CHECK(fab.packets_in_flight() == 0);
    return run;
}

}  // namespace

TEST_CASE("sim pipeline: payload copies on the hosts' placement stages, every byte in place", "[sim][engine][pipeline]") {
    const double loss = GENERATE(0.0, 0.02);
    const bool cc_stage = GENERATE(false, true);
    INFO("loss " << loss << " CC stage " << cc_stage);
    const PipelineRun first = pipeline_workload(31, loss, cc_stage);
    // A pipeline run replays like any other: the stages' transits are virtual time.
    const PipelineRun again = pipeline_workload(31, loss, cc_stage);
    CHECK(again.completed_at == first.completed_at);
    CHECK(again.place_jobs == first.place_jobs);
}
