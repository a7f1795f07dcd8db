// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Out-of-order placement with ordered completion, path failure and reuse,
// protection violations, and message sizes from 0 bytes to 1 GiB
// (doc/spec.md R-DATA-2, R-CMPL-3, R-PATH-9, R-PATH-10, R-MEM-3, R-NAK-*).
#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <vector>

#include "pair_link.hpp"

using namespace mroce;
using mroce::test::PairLink;

namespace {

constexpr uint32_t kAll = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

uint32_t be32(const uint8_t* p) { return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3]; }
bool is_data(const TxPacket& p) { return p.hdr_len == wire::kDataLen && p.hdr[1] == uint8_t(wire::PacketType::data); }
uint32_t msg_seq_of(const TxPacket& p) { return be32(p.hdr + 32); }
uint32_t stream_of(const TxPacket& p) { return be32(p.hdr + 28); }
uint64_t va(const void* p) { return uint64_t(reinterpret_cast<uintptr_t>(p)); }

struct Pair {
    EngineConfig cfg;
    std::unique_ptr<Engine> a, b;
    std::unique_ptr<PairLink> link;
    uint32_t pda = 0, pdb = 0, cqa = 0, cqb = 0, ca = 0, cb = 0;
    // pipeline: both engines with deferred placement, copies on worker threads.
    explicit Pair(EngineConfig c = {}, bool pipeline = false) : cfg(c) {
        cfg.deferred_placement = pipeline;
        a = std::make_unique<Engine>(cfg);
        b = std::make_unique<Engine>(cfg);
        pda = a->alloc_pd();
        pdb = b->alloc_pd();
        REQUIRE(a->create_cq(4096, cqa) == Status::ok);
        REQUIRE(b->create_cq(4096, cqb) == Status::ok);
        link = std::make_unique<PairLink>(*a, *b);
        if (pipeline) {
            link->enable_pipeline(0);
            link->enable_pipeline(1);
            link->place_latency = 1000;
        }
        if (cfg.offload_cc) {  // the CC core on a thread of its own (R-CC-8)
            link->enable_cc_stage(0);
            link->enable_cc_stage(1);
        }
        REQUIRE(mroce::test::connect_pair(*link, ca, cb));
    }
    void stream(uint32_t id) {
        REQUIRE(a->create_stream(ca, id, pda, cqa, cqa) == Status::ok);
        REQUIRE(b->create_stream(cb, id, pdb, cqb, cqb) == Status::ok);
    }
    // n WRITEs of len bytes on stream id, src (registered at A) to dst (at B), back to back.
    void post_writes(uint32_t id, const MrInfo& ms, const uint8_t* src, const MrInfo& md, uint8_t* dst, int n,
                     uint32_t len) {
        for (int k = 0; k < n; ++k) {
            SendWr w;
            w.wr_id = uint64_t(k);
            w.op = OpKind::write;
            w.local_addr = va(src) + uint64_t(len) * uint64_t(k);
            w.length = len;
            w.lkey = ms.lkey;
            w.remote_addr = va(dst) + uint64_t(len) * uint64_t(k);
            w.rkey = md.rkey;
            REQUIRE(a->post_send(ca, id, w) == Status::ok);
        }
    }
    std::vector<Completion> wait(Engine& e, uint32_t cq, size_t n, Time limit = 1'000'000'000) {
        std::vector<Completion> got;
        link->run([&] {
            Completion c[64];
            size_t k;
            while ((k = e.poll_cq(cq, c, 64)) > 0) got.insert(got.end(), c, c + k);
            return got.size() >= n;
        }, limit);
        return got;
    }
};

// A source region at A filled with a pattern and a zeroed destination at B,
// both registered for every access.
struct WriteBuffers {
    std::vector<uint8_t> src, dst;
    MrInfo ms{}, md{};
    WriteBuffers(Pair& p, size_t len, unsigned shift) : src(len), dst(len, 0) {
        for (size_t i = 0; i < len; ++i) src[i] = uint8_t((i * 2654435761u) >> shift);
        REQUIRE(p.a->register_mr(p.pda, src.data(), len, kAll, ms) == Status::ok);
        REQUIRE(p.b->register_mr(p.pdb, dst.data(), len, kAll, md) == Status::ok);
    }
    // The whole source in 64 WRITEs of 64 KiB on the stream, into a zeroed
    // destination: every completion a success, every byte landed.
    void write_all(Pair& p, uint32_t stream) {
        std::fill(dst.begin(), dst.end(), 0);
        p.post_writes(stream, ms, src.data(), md, dst.data(), 64, 65536);
        auto got = p.wait(*p.a, p.cqa, 64);
        REQUIRE(got.size() == 64);
        for (auto& c : got) REQUIRE(c.status == WcStatus::success);
        REQUIRE(std::memcmp(src.data(), dst.data(), src.size()) == 0);
    }
};

// One path, no rate hints (the window alone governs), and an RTO far from the
// ~5 us RTT of this link (100 us: min_rto), so a test sees what comes before it.
static EngineConfig one_path_slow_rto(bool offload_cc) {
    EngineConfig cfg;
    cfg.num_paths = 1;
    cfg.rate_hints = false;
    cfg.min_rto = 100'000;
    cfg.offload_cc = offload_cc;
    return cfg;
}

// Every ACK B sends while the link's clock is in [from, until) is lost, counted in dropped.
struct AckLoss {
    Time from = 0, until = 0;
    uint64_t dropped = 0;
    explicit AckLoss(Pair& p) {
        p.link->drop_if = [this, &p](int side, const TxPacket& t) {
            const bool drop = side == 1 && t.hdr[1] == uint8_t(wire::PacketType::ack) && p.link->now >= from &&
                              p.link->now < until;
            dropped += drop;
            return drop;
        };
    }
    AckLoss(const AckLoss&) = delete;
    AckLoss& operator=(const AckLoss&) = delete;
};

}  // namespace

TEST_CASE("message k+1 is placed before message k arrives; its completion waits for k", "[engine][ooo]") {
    EngineConfig cfg;
    cfg.num_paths = 4;
    Pair p(cfg);
    p.stream(1);
    std::vector<uint8_t> src(16384), dst(16384, 0);
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 7 + 1);
    MrInfo ms, md;
    REQUIRE(p.a->register_mr(p.pda, src.data(), src.size(), kAll, ms) == Status::ok);
    REQUIRE(p.b->register_mr(p.pdb, dst.data(), dst.size(), kAll, md) == Status::ok);
    for (int k = 0; k < 2; ++k) {
        RecvWr r{uint64_t(100 + k), va(dst.data()) + 8192u * k, 8192, md.lkey};
        REQUIRE(p.b->post_recv(p.cb, 1, r) == Status::ok);
    }
    bool hold = true;  // message 0 is lost on the wire until released
    p.link->drop_if = [&](int from, const TxPacket& t) {
        return hold && from == 0 && is_data(t) && stream_of(t) == 1 && msg_seq_of(t) == 0;
    };
    for (int k = 0; k < 2; ++k) {
        SendWr s;
        s.wr_id = uint64_t(k);
        s.op = OpKind::send;
        s.local_addr = va(src.data()) + 8192u * k;
        s.length = 8192;
        s.lkey = ms.lkey;
        REQUIRE(p.a->post_send(p.ca, 1, s) == Status::ok);
    }
    // Message 1 lands in its own receive buffer while message 0 is missing.
    REQUIRE(p.link->run([&] { return std::memcmp(dst.data() + 8192, src.data() + 8192, 8192) == 0; },
                        10'000'000));
    CHECK(std::all_of(dst.begin(), dst.begin() + 8192, [](uint8_t v) { return v == 0; }));
    // Its completion is held back (R-CMPL-3), however long message 0 takes.
    p.link->run([] { return false; }, 2'000'000);
    Completion c[4];
    CHECK(p.b->poll_cq(p.cqb, c, 4) == 0);
    hold = false;
    auto got = p.wait(*p.b, p.cqb, 2);
    REQUIRE(got.size() == 2);
    CHECK(got[0].wr_id == 100);
    CHECK(got[1].wr_id == 101);
    CHECK(std::memcmp(dst.data(), src.data(), 16384) == 0);
}

TEST_CASE("a failed path costs no data; traffic moves; the path is reused after recovery", "[engine][failover]") {
    EngineConfig cfg;
    cfg.num_paths = 4;
    cfg.probe_interval = 500'000;
    Pair p(cfg);
    p.stream(3);
    const size_t kLen = 64 * 65536;
    WriteBuffers wb(p, kLen, 13);
    std::vector<uint8_t>&src = wb.src, &dst = wb.dst;
    const MrInfo &ms = wb.ms, &md = wb.md;
    bool down = false;  // path 2 dead both ways: every packet on it is lost
    p.link->drop_if = [&](int, const TxPacket& t) { return down && t.path == 2; };
    auto post_all = [&](uint64_t base_id) {
        for (int k = 0; k < 64; ++k) {
            SendWr w;
            w.wr_id = base_id + uint64_t(k);
            w.op = OpKind::write;
            w.local_addr = va(src.data()) + 65536u * k;
            w.length = 65536;
            w.lkey = ms.lkey;
            w.remote_addr = va(dst.data()) + 65536u * k;
            w.rkey = md.rkey;
            REQUIRE(p.a->post_send(p.ca, 3, w) == Status::ok);
        }
    };
    std::vector<Completion> got;
    PathStats ps2, ps0;
    // One round with every path up: path 2 learns its minimum RTT (R-HINT-7).
    post_all(900000);
    got = p.wait(*p.a, p.cqa, 64);
    REQUIRE(got.size() == 64);
    REQUIRE(p.a->path_stats(p.ca, 2, ps2) == Status::ok);
    CHECK(ps2.min_rtt >= 2 * p.link->base_delay);  // no sample is below the wire's round trip
    CHECK(ps2.min_rtt <= ps2.srtt + ps2.rttvar);
    // Keep traffic flowing until the dead path is retired (R-PATH-9).
    down = true;
    for (int round = 0; round < 50; ++round) {
        std::fill(dst.begin(), dst.end(), 0);
        post_all(uint64_t(round) * 100);
        got = p.wait(*p.a, p.cqa, 64);
        REQUIRE(got.size() == 64);
        for (auto& c : got) REQUIRE(c.status == WcStatus::success);
        REQUIRE(std::memcmp(src.data(), dst.data(), kLen) == 0);
        REQUIRE(p.a->path_stats(p.ca, 2, ps2) == Status::ok);
        if (ps2.state == PathStateKind::failed) break;
    }
    REQUIRE(p.a->path_stats(p.ca, 0, ps0) == Status::ok);
    CHECK(ps2.state == PathStateKind::failed);
    // Retired after fail_after_timeouts RTOs (R-PATH-9), or sooner after two
    // silences while the other paths were acked (R-TIMER-9): here the latter.
    CHECK(ps2.silences == 2);
    CHECK(ps0.tx_packets > 200);  // the load went elsewhere
    const uint64_t tx2_before = ps2.tx_packets;

    // Recovery: the path answers its probe and carries data again.
    down = false;
    std::fill(dst.begin(), dst.end(), 0);
    PathStats revived;
    REQUIRE(p.link->run([&] {
        p.a->path_stats(p.ca, 2, revived);
        return revived.state == PathStateKind::active;
    }, 50'000'000));
    CHECK(revived.min_rtt == 0);  // a revived path may have a new route: its minimum is relearnt
    post_all(100000);
    got = p.wait(*p.a, p.cqa, 64);
    REQUIRE(got.size() == 64);
    for (auto& c : got) CHECK(c.status == WcStatus::success);
    CHECK(std::memcmp(src.data(), dst.data(), kLen) == 0);
    REQUIRE(p.a->path_stats(p.ca, 2, ps2) == Status::ok);
    CHECK(ps2.tx_packets > tx2_before + 20);
    CHECK(ps2.min_rtt >= 2 * p.link->base_delay);
}

TEST_CASE("protection violations are NAKed and write nothing", "[engine][protection]") {
    enum Case { bad_rkey, stale_rkey, wrong_pd, out_of_range, no_write, no_read, no_atomic };
    const Case kase = GENERATE(bad_rkey, stale_rkey, wrong_pd, out_of_range, no_write, no_read, no_atomic);
    const bool pipeline = GENERATE(false, true);  // both arrangements (doc/architecture.md 4), CC offloaded too
    INFO("pipeline " << pipeline);
    Pair p({}, pipeline);
    p.stream(9);
    std::vector<uint8_t> src(8192, 0xab);
    MrInfo ms;
    REQUIRE(p.a->register_mr(p.pda, src.data(), src.size(), kAll, ms) == Status::ok);
    // B: a region framed by guard pages that no key covers.
    std::vector<uint8_t> mem(3 * 4096, 0xee);
    uint8_t* region = mem.data() + 4096;
    std::memset(region, 0x11, 4096);
    uint32_t access = kAll;
    uint32_t pd = p.pdb;
    if (kase == no_write) access = kAccessLocalWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    if (kase == no_read) access = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteAtomic;
    if (kase == no_atomic) access = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
    if (kase == wrong_pd) pd = p.b->alloc_pd();
    MrInfo md;
    REQUIRE(p.b->register_mr(pd, region, 4096, access, md) == Status::ok);
    uint32_t rkey = md.rkey;
    if (kase == bad_rkey) rkey = md.rkey + 0x100;
    if (kase == stale_rkey) {
        REQUIRE(p.b->deregister_mr(md.rkey) == Status::ok);
        MrInfo again;
        REQUIRE(p.b->register_mr(pd, region, 4096, access, again) == Status::ok);
        CHECK(again.rkey != rkey);  // the slot is reused under a new key
    }
    SendWr w;
    w.wr_id = 1;
    w.lkey = ms.lkey;
    w.local_addr = va(src.data());
    w.rkey = rkey;
    w.remote_addr = va(region);
    w.length = 4096;
    w.op = OpKind::write;
    if (kase == out_of_range) {
        w.remote_addr = va(region) + 4000;  // 96 bytes in, 4000 past the end
        w.length = 4096;
    }
    if (kase == no_read) w.op = OpKind::read;
    if (kase == no_atomic) {
        w.op = OpKind::atomic_fadd;
        w.length = 8;
        w.compare_add = 1;
    }
    REQUIRE(p.a->post_send(p.ca, 9, w) == Status::ok);
    SendWr after = w;
    after.wr_id = 2;
    after.op = OpKind::write;
    after.remote_addr = va(region);
    after.length = 64;
    REQUIRE(p.a->post_send(p.ca, 9, after) == Status::ok);
    auto got = p.wait(*p.a, p.cqa, 2);
    REQUIRE(got.size() == 2);
    CHECK(got[0].wr_id == 1);
    CHECK(got[0].status == WcStatus::rem_access_err);
    CHECK(got[1].wr_id == 2);
    CHECK(got[1].status == WcStatus::wr_flush_err);  // R-STREAM-2
    p.link->run([] { return false; }, 2'000'000);
    for (size_t i = 0; i < 4096; ++i) {
        REQUIRE(mem[i] == 0xee);
        REQUIRE(mem[8192 + i] == 0xee);
    }
    CHECK(std::all_of(region, region + 4096, [](uint8_t v) { return v == 0x11; }));
    ConnStats sb;
    REQUIRE(p.b->conn_stats(p.cb, sb) == Status::ok);
    CHECK(sb.naks_sent >= 1);
    ConnStats sa;
    REQUIRE(p.a->conn_stats(p.ca, sa) == Status::ok);
    CHECK(sa.naks_received >= 1);
    p.link->finish_placements(true);  // no copy may outlive the buffers above
}

TEST_CASE("message sizes: 0 bytes, one byte past a segment, 1 GiB", "[engine][large]") {
    EngineConfig cfg;
    cfg.num_paths = 8;
    cfg.cc.init_cwnd = 64;
    Pair p(cfg);
    p.stream(5);
    const size_t kGiB = size_t(1) << 30;
    const uint32_t len = GENERATE(0u, 1u, 4097u, uint32_t(1u << 30));
    std::vector<uint8_t> src(std::max<size_t>(len, 64)), dst(std::max<size_t>(len, 64), 0);
    for (size_t i = 0; i < src.size(); i += 4096) src[i] = uint8_t(i >> 12) | 1;
    if (len && len < kGiB) for (size_t i = 0; i < len; ++i) src[i] = uint8_t(i * 13 + 5);
    src[src.size() - 1] = 0x5c;
    MrInfo ms, md;
    REQUIRE(p.a->register_mr(p.pda, src.data(), src.size(), kAll, ms) == Status::ok);
    REQUIRE(p.b->register_mr(p.pdb, dst.data(), dst.size(), kAll, md) == Status::ok);
    SendWr w;
    w.wr_id = 77;
    w.op = OpKind::write_imm;
    w.imm = 5;
    w.local_addr = va(src.data());
    w.length = len;
    w.lkey = ms.lkey;
    w.remote_addr = va(dst.data());
    w.rkey = md.rkey;
    RecvWr r{9, 0, 0, 0};
    REQUIRE(p.b->post_recv(p.cb, 5, r) == Status::ok);
    REQUIRE(p.a->post_send(p.ca, 5, w) == Status::ok);
    auto ga = p.wait(*p.a, p.cqa, 1, 60'000'000'000ull);
    REQUIRE(ga.size() == 1);
    CHECK(ga[0].status == WcStatus::success);
    CHECK(ga[0].byte_len == len);
    auto gb = p.wait(*p.b, p.cqb, 1);
    REQUIRE(gb.size() == 1);
    CHECK(gb[0].byte_len == len);
    CHECK(gb[0].imm == 5);
    CHECK(std::memcmp(src.data(), dst.data(), len) == 0);
    if (len < src.size()) CHECK(dst[src.size() - 1] == 0);  // nothing past the message
}

// R-NAK-1, R-NAK-8, R-NAK-9: a NAK is made reliable by not acknowledging the
// refused packet. Before, the refused packet was acked, so losing the NAK of
// the last message of a stream completed it with success.
TEST_CASE("a lost NAK still fails the request with its cause", "[engine][protection][nak]") {
    const int naks_to_drop = GENERATE(1, 3);
    const OpKind op = GENERATE(OpKind::write, OpKind::read, OpKind::atomic_fadd);
    const bool pipeline = GENERATE(false, true);  // both arrangements (doc/architecture.md 4)
    INFO("op " << int(op) << ", NAKs dropped " << naks_to_drop << ", pipeline " << pipeline);
    EngineConfig cfg;
    cfg.num_paths = 4;
    Pair p(cfg, pipeline);
    p.stream(9);
    p.stream(10);
    std::vector<uint8_t> src(16384, 0xab);
    MrInfo ms;
    REQUIRE(p.a->register_mr(p.pda, src.data(), src.size(), kAll, ms) == Status::ok);
    std::vector<uint8_t> mem(3 * 4096, 0xee);
    uint8_t* region = mem.data() + 4096;
    MrInfo md;
    REQUIRE(p.b->register_mr(p.pdb, region, 4096, kAll, md) == Status::ok);
    int dropped = 0;
    p.link->drop_if = [&](int from, const TxPacket& t) {
        if (from != 1 || t.hdr_len < 2 || t.hdr[1] != uint8_t(wire::PacketType::nak)) return false;
        return dropped++ < naks_to_drop;
    };
    SendWr w;
    w.wr_id = 1;
    w.op = op;
    w.lkey = ms.lkey;
    w.local_addr = va(src.data());
    w.rkey = md.rkey + 0x100;  // names no region: rkey_invalid
    w.remote_addr = va(region);
    w.length = op == OpKind::atomic_fadd ? 8 : 4096 * 3;  // several packets: only the refused one stays unacked
    w.compare_add = 1;
    REQUIRE(p.a->post_send(p.ca, 9, w) == Status::ok);  // the stream's last message: nothing follows it
    auto got = p.wait(*p.a, p.cqa, 1);
    REQUIRE(got.size() == 1);
    CHECK(got[0].wr_id == 1);
    CHECK(got[0].status == WcStatus::rem_access_err);
    CHECK(dropped > naks_to_drop);  // the refused packet was resent and NAKed again
    CHECK(std::all_of(mem.begin(), mem.end(), [](uint8_t v) { return v == 0xee; }));
    // The refused CSNs were resolved: the connection's CSN window and paths move on.
    SendWr ok = w;
    ok.wr_id = 2;
    ok.op = OpKind::write;
    ok.rkey = md.rkey;
    ok.length = 4096;
    for (int i = 0; i < 8; ++i) {
        ok.wr_id = 10 + uint64_t(i);
        REQUIRE(p.a->post_send(p.ca, 10, ok) == Status::ok);
    }
    got = p.wait(*p.a, p.cqa, 8);
    REQUIRE(got.size() == 8);
    for (auto& c : got) CHECK(c.status == WcStatus::success);
    CHECK(std::memcmp(region, src.data(), 4096) == 0);
    p.link->run([] { return false; }, 50'000'000);  // let resent refused packets and their NAKs settle
    ConnStats sa;
    REQUIRE(p.a->conn_stats(p.ca, sa) == Status::ok);
    CHECK(sa.naks_received >= 1);
    PathStats ps;
    for (uint16_t i = 0; i < 4; ++i) {
        REQUIRE(p.a->path_stats(p.ca, i, ps) == Status::ok);
        CHECK(ps.state == PathStateKind::active);
        CHECK(ps.inflight == 0);
    }
    p.link->finish_placements(true);  // no copy may outlive the buffers above
    CHECK(p.a->place_outstanding() + p.b->place_outstanding() == 0);
}

// R-TIMER-7, R-CC-9: a timeout that fired because ACKs were late (a peer
// process descheduled past the RTO), not because data was lost. Before, the
// late ACKs were ignored (their PSNs were below snd_una): the path restarted
// at cwnd 1 and every CSN of the old flight was sent a second time.
TEST_CASE("a delayed ACK's spurious timeout is undone: window restored, retransmissions cancelled",
          "[engine][timer][undo]") {
    const bool lose = GENERATE(false, true);  // true: data really lost, the timeout stands
    const bool pipeline = GENERATE(false, true);  // both arrangements (doc/architecture.md 4)
    const bool offload = GENERATE(false, true);   // the CC core inline or on its own thread (R-CC-8)
    INFO((lose ? "data lost" : "acks delayed") << ", pipeline " << pipeline << ", cc offloaded " << offload);
    EngineConfig cfg = one_path_slow_rto(offload);  // rto = min_rto
    cfg.fail_after_timeouts = 10;
    Pair p(cfg, pipeline);
    p.stream(4);
    const size_t kLen = 64 * 65536;
    WriteBuffers wb(p, kLen, 11);
    std::vector<uint8_t>&src = wb.src, &dst = wb.dst;
    const MrInfo &ms = wb.ms, &md = wb.md;
    // B's ACKs sent before `release` arrive at `release` (in their order); with
    // `lose`, A's data is dropped instead for the same time.
    bool hold = false;
    Time release = 0;
    auto is_ack = [](const TxPacket& t) { return t.hdr[1] == uint8_t(wire::PacketType::ack); };
    p.link->delay_if = [&](int from, const TxPacket& t) -> Time {
        return !lose && hold && from == 1 && is_ack(t) && p.link->now < release ? release - p.link->now : 0;
    };
    p.link->drop_if = [&](int from, const TxPacket& t) {
        return lose && hold && from == 0 && is_data(t) && p.link->now < release;
    };
    p.post_writes(4, ms, src.data(), md, dst.data(), 64, 65536);
    PathStats ps;
    REQUIRE(p.link->run([&] {
        p.a->path_stats(p.ca, 0, ps);
        return ps.tx_packets >= 200;
    }, 100'000'000));
    const double w0 = ps.cwnd;
    REQUIRE(w0 >= 8);
    const Time min0 = ps.min_rtt;
    CHECK(min0 >= 2 * p.link->base_delay);
    // One timeout (100 us after the last ACK) and not a second (200 us after
    // that): everything comes back 250 us after the hold starts.
    hold = true;
    release = p.link->now + 250'000;
    REQUIRE(p.link->run([&] {
        p.a->path_stats(p.ca, 0, ps);
        return ps.timeouts >= 1;
    }, 250'000));
    CHECK(ps.cwnd == cfg.cc.min_cwnd);  // R-CC-6
    p.link->run([] { return false; }, release + 20'000 - p.link->now);
    REQUIRE(p.a->path_stats(p.ca, 0, ps) == Status::ok);
    CHECK(ps.timeouts == 1);
    // The late ACKs' 250 us reaches the RTO (R-TIMER-7), not the cap's minimum (R-HINT-7).
    CHECK(ps.min_rtt > 0);
    CHECK(ps.min_rtt <= min0);
    if (lose) {
        CHECK(ps.spurious_timeouts == 0);  // the held path_floor keeps cum_psn at the hole
        CHECK(ps.cwnd < w0);
    } else {
        CHECK(ps.spurious_timeouts == 1);
        CHECK(ps.cwnd >= w0);  // R-CC-9: back to the pre-timeout window
    }
    auto got = p.wait(*p.a, p.cqa, 64);
    REQUIRE(got.size() == 64);
    for (auto& c : got) REQUIRE(c.status == WcStatus::success);
    CHECK(std::memcmp(src.data(), dst.data(), kLen) == 0);
    ConnStats sb;
    REQUIRE(p.b->conn_stats(p.cb, sb) == Status::ok);
    INFO("retransmits declared " << ps.retransmits << ", duplicates at B " << sb.duplicates);
    // R-SACK-3: the queued copies of received originals were dropped; with
    // the CC core offloaded too, since the timeout clamps the path at once
    // (R-CC-8). A tail-loss probe (R-TIMER-8) may add one copy.
    if (!lose) CHECK(sb.duplicates <= 3);
    p.link->finish_placements(true);  // no copy may outlive the buffers above
}

// R-TIMER-9: the reordering multiplier that a spurious timeout doubled (the
// late ACKs were evidence of delay, not loss) returns to 1 after 16 loss
// recoveries with nothing late between (RFC 8985's reo_wnd_persist). Before,
// it only grew: one episode of late ACKs slowed the path's silence detection
// for the rest of the connection.
TEST_CASE("the reordering multiplier returns to 1 after 16 recoveries with nothing late (R-TIMER-9)",
          "[engine][timer][undo][silence]") {
    EngineConfig cfg = one_path_slow_rto(false);
    cfg.fail_after_timeouts = 10;
    Pair p(cfg);
    p.stream(4);
    const size_t kLen = 64 * 65536;
    WriteBuffers wb(p, kLen, 13);
    bool hold = false;
    Time release = 0;
    int drop_countdown = 0;  // the data packet to lose for good, counted down from a batch's start
    auto is_ack = [](const TxPacket& t) { return t.hdr[1] == uint8_t(wire::PacketType::ack); };
    p.link->delay_if = [&](int from, const TxPacket& t) -> Time {
        return hold && from == 1 && is_ack(t) && p.link->now < release ? release - p.link->now : 0;
    };
    p.link->drop_if = [&](int from, const TxPacket& t) {
        return from == 0 && is_data(t) && drop_countdown > 0 && --drop_countdown == 0;
    };
    auto batch = [&] { wb.write_all(p, 4); };
    PathStats ps;
    batch();
    REQUIRE(p.a->path_stats(p.ca, 0, ps) == Status::ok);
    REQUIRE(ps.reorder_mult == 1);
    // ACKs held past the RTO, then delivered: the timeout is undone, m doubles.
    hold = true;
    release = p.link->now + 250'000;
    batch();
    hold = false;
    REQUIRE(p.a->path_stats(p.ca, 0, ps) == Status::ok);
    REQUIRE(ps.spurious_timeouts == 1);
    REQUIRE(ps.reorder_mult == 2);
    // Then one data packet of each batch lost for good: each found by SACK
    // (R-SACK-4), a recovery with nothing late. m stays 2 through 15 and is
    // back to 1 at the 16th.
    const PathStats at = ps;
    for (int round = 0; round < 24 && ps.reorder_mult != 1; ++round) {
        drop_countdown = 10;
        batch();
        REQUIRE(drop_countdown == 0);
        REQUIRE(p.a->path_stats(p.ca, 0, ps) == Status::ok);
        const uint64_t recoveries = (ps.losses - at.losses) + (ps.timeouts - at.timeouts);
        INFO("round " << round << ": losses " << (ps.losses - at.losses) << ", timeouts "
                      << (ps.timeouts - at.timeouts) << ", m " << ps.reorder_mult);
        REQUIRE(ps.spurious_timeouts == 1);  // nothing late since
        if (recoveries < 16) CHECK(ps.reorder_mult == 2);
    }
    INFO("losses " << (ps.losses - at.losses) << ", timeouts " << (ps.timeouts - at.timeouts));
    CHECK(ps.reorder_mult == 1);
    CHECK(ps.losses - at.losses + ps.timeouts - at.timeouts == 16);  // one recovery per lost packet
    p.link->finish_placements(true);  // no copy may outlive the buffers above
}

TEST_CASE("lost ACKs of a path's last flight cost one tail-loss probe, not a timeout (R-TIMER-8)",
          "[engine][timer][tlp]") {
    const bool pipeline = GENERATE(false, true);
    const bool offload = GENERATE(false, true);
    INFO("pipeline " << pipeline << ", cc offloaded " << offload);
    EngineConfig cfg = one_path_slow_rto(offload);  // the RTO is 20 RTTs away
    Pair p(cfg, pipeline);
    p.stream(4);
    const size_t kLen = 64 * 65536;
    WriteBuffers wb(p, kLen, 13);
    std::vector<uint8_t>&src = wb.src, &dst = wb.dst;
    const MrInfo &ms = wb.ms, &md = wb.md;
    // Every ACK B sends during [from, until) is lost. A's window then stays
    // full with nothing acknowledged and B, having all A sent, has nothing
    // more to acknowledge: only A's timers can restart the path.
    AckLoss loss(p);
    Time &from = loss.from, &until = loss.until;
    const uint64_t& acks_dropped = loss.dropped;
    p.post_writes(4, ms, src.data(), md, dst.data(), 64, 65536);
    PathStats ps;
    REQUIRE(p.link->run([&] {
        p.a->path_stats(p.ca, 0, ps);
        return ps.tx_packets >= 200;
    }, 100'000'000));
    REQUIRE(ps.srtt > 0);
    REQUIRE(ps.timeouts == 0);
    // Lost for two smoothed RTTs: past the last flight's ACKs, not the probe's.
    from = p.link->now;
    until = from + 2 * ps.srtt;
    auto got = p.wait(*p.a, p.cqa, 64);
    REQUIRE(got.size() == 64);
    for (auto& c : got) REQUIRE(c.status == WcStatus::success);
    CHECK(std::memcmp(src.data(), dst.data(), kLen) == 0);
    REQUIRE(p.a->path_stats(p.ca, 0, ps) == Status::ok);
    CHECK(acks_dropped > 0);
    CHECK(ps.tail_probes >= 1);
    CHECK(ps.timeouts == 0);  // before R-TIMER-8: one RTO, 100 us of a stalled path
    p.link->finish_placements(true);
}

TEST_CASE("a tail-loss probe never takes a PSN beyond the path's SACK span (R-TIMER-8, R-SACK-2)",
          "[engine][timer][tlp]") {
    // Found on loopback UDP with one path at a 256-packet window: the probe of a
    // full span reused the ring slot of the oldest packet in flight, whose CSN
    // was then never resent, and the transfer stalled until the connection
    // timed out. Then, with the probe held back: a timeout of a full span held
    // path_floor (R-TIMER-7) where no PSN was left to send, a deadlock.
    const bool pipeline = GENERATE(false, true);
    const bool offload = GENERATE(false, true);
    INFO("pipeline " << pipeline << ", cc offloaded " << offload);
    EngineConfig cfg = one_path_slow_rto(offload);  // the probe is due long before the RTO
    cfg.cc.init_cwnd = cfg.cc.max_cwnd;  // the first flight fills the SACK span
    Pair p(cfg, pipeline);
    p.stream(4);
    const size_t kLen = 64 * 65536;
    WriteBuffers wb(p, kLen + 4096, 17);
    AckLoss loss(p);
    Time &from = loss.from, &until = loss.until;
    const uint64_t& acks_dropped = loss.dropped;
    // One packet first, for an RTT sample (a probe needs one).
    p.post_writes(4, wb.ms, wb.src.data() + kLen, wb.md, wb.dst.data() + kLen, 1, 4096);
    REQUIRE(p.wait(*p.a, p.cqa, 1).size() == 1);
    PathStats ps;
    REQUIRE(p.a->path_stats(p.ca, 0, ps) == Status::ok);
    REQUIRE(ps.srtt > 0);
    // Every ACK of the first full flight is lost, until after its probe would be due.
    from = p.link->now;
    until = from + 60'000;
    p.post_writes(4, wb.ms, wb.src.data(), wb.md, wb.dst.data(), 64, 65536);
    auto got = p.wait(*p.a, p.cqa, 64);
    REQUIRE(p.a->path_stats(p.ca, 0, ps) == Status::ok);
    INFO("A path 0: tx " << ps.tx_packets << ", timeouts " << ps.timeouts << ", probes " << ps.tail_probes
                         << ", retransmits " << ps.retransmits << ", acks dropped " << acks_dropped << ", B stale "
                         << p.b->stats().rx_stale);
    REQUIRE(got.size() == 64);
    for (auto& c : got) REQUIRE(c.status == WcStatus::success);
    CHECK(std::memcmp(wb.src.data(), wb.dst.data(), kLen + 4096) == 0);
    CHECK(acks_dropped > 0);
    CHECK(ps.tail_probes == 0);  // no PSN left in the span: the RTO recovers the tail
    CHECK(ps.timeouts >= 1);
    CHECK(p.b->stats().rx_stale == 0);  // nothing beyond B's SACK window
    p.link->finish_placements(true);
}

TEST_CASE("a path's first flight after idle gets its tail-loss probe before the RTO (R-TIMER-8)",
          "[engine][timer][tlp]") {
    // The probe time used to be armed only by a timer pass during the flight:
    // after idle the first pass came at the RTO.
    const bool pipeline = GENERATE(false, true);
    INFO("pipeline " << pipeline);
    const EngineConfig cfg = one_path_slow_rto(false);
    Pair p(cfg, pipeline);
    p.stream(4);
    WriteBuffers wb(p, 2 * 65536, 19);
    AckLoss loss(p);
    Time &from = loss.from, &until = loss.until;
    const uint64_t& acks_dropped = loss.dropped;
    p.post_writes(4, wb.ms, wb.src.data(), wb.md, wb.dst.data(), 1, 65536);
    REQUIRE(p.wait(*p.a, p.cqa, 1).size() == 1);
    PathStats ps;
    REQUIRE(p.a->path_stats(p.ca, 0, ps) == Status::ok);
    REQUIRE(ps.srtt > 0);
    const uint64_t probes0 = ps.tail_probes;
    from = p.link->now;
    until = from + 2 * ps.srtt;  // the flight's ACKs, not the probe's
    p.post_writes(4, wb.ms, wb.src.data() + 65536, wb.md, wb.dst.data() + 65536, 1, 65536);
    REQUIRE(p.wait(*p.a, p.cqa, 1).size() == 1);
    REQUIRE(p.a->path_stats(p.ca, 0, ps) == Status::ok);
    CHECK(std::memcmp(wb.src.data(), wb.dst.data(), 2 * 65536) == 0);
    CHECK(acks_dropped > 0);
    CHECK(ps.tail_probes > probes0);
    CHECK(ps.timeouts == 0);
    p.link->finish_placements(true);
}

// R-TIMER-9: a route that dies under load is found by its own RTT while its
// siblings are acked, and retired in two of its round trips: before R-TIMER-9
// it took three backed-off RTOs (100 + 200 + 400 us here, against a ~7 us RTT).
TEST_CASE("a dead path is found by its own RTT while its siblings are acked, and retired in a few RTTs (R-TIMER-9)",
          "[engine][failover][silence]") {
    const bool offload = GENERATE(false, true);
    INFO("cc offloaded " << offload);
    EngineConfig cfg;
    cfg.num_paths = 4;
    cfg.offload_cc = offload;
    Pair p(cfg);
    p.stream(3);
    const size_t kLen = 64 * 65536;
    WriteBuffers wb(p, kLen, 11);
    bool down = false;  // path 2 dead both ways
    Time first_resend = 0;
    p.link->drop_if = [&](int side, const TxPacket& t) {
        if (side == 0 && down && t.path != 2 && is_data(t) && !first_resend) {
            PathStats s;
            p.a->path_stats(p.ca, 2, s);
            if (s.retransmits) first_resend = p.link->now;
        }
        return down && t.path == 2;
    };
    p.post_writes(3, wb.ms, wb.src.data(), wb.md, wb.dst.data(), 64, 65536);
    auto got = p.wait(*p.a, p.cqa, 64);
    REQUIRE(got.size() == 64);
    PathStats ps2;
    REQUIRE(p.a->path_stats(p.ca, 2, ps2) == Status::ok);
    REQUIRE(ps2.srtt > 0);
    const Time rtt = ps2.srtt;
    // Path 2 dies in the middle of the next batch, with packets in flight on it.
    std::fill(wb.dst.begin(), wb.dst.end(), 0);
    p.post_writes(3, wb.ms, wb.src.data(), wb.md, wb.dst.data(), 64, 65536);
    REQUIRE(p.link->run([&] {
        p.a->path_stats(p.ca, 2, ps2);
        return ps2.tx_packets > 150 && ps2.inflight > 0;
    }, 100'000'000));
    down = true;
    const Time died = p.link->now;
    Time failed_at = 0, moved_at = 0;
    uint64_t tx_moved = 0;
    got.clear();
    size_t posted = 64;
    // Traffic keeps coming (the same bytes again) until the route is retired.
    REQUIRE(p.link->run([&] {
        Completion c[64];
        size_t k;
        while ((k = p.a->poll_cq(p.cqa, c, 64)) > 0) got.insert(got.end(), c, c + k);
        p.a->path_stats(p.ca, 2, ps2);
        if (!moved_at && ps2.cwnd <= cfg.cc.min_cwnd) {
            moved_at = p.link->now;
            tx_moved = ps2.tx_packets;
        }
        if (!failed_at && ps2.state == PathStateKind::failed) failed_at = p.link->now;
        if (got.size() >= posted && !failed_at) {
            p.post_writes(3, wb.ms, wb.src.data(), wb.md, wb.dst.data(), 64, 65536);
            posted += 64;
        }
        return got.size() >= posted && failed_at;
    }, 10'000'000));
    for (auto& c : got) REQUIRE(c.status == WcStatus::success);
    CHECK(std::memcmp(wb.src.data(), wb.dst.data(), kLen) == 0);
    INFO("rtt " << rtt << " ns, first resend after " << (first_resend - died) << " ns, window at its minimum after "
                << (moved_at - died) << " ns, failed after " << (failed_at - died) << " ns, silences " << ps2.silences
                << ", timeouts " << ps2.timeouts << ", sent after the move " << (ps2.tx_packets - tx_moved));
    CHECK(ps2.silences == 2);  // one as loss, the next with no ACK between retires the path
    CHECK(ps2.timeouts == 1);
    REQUIRE(first_resend > 0);
    REQUIRE(moved_at > 0);
    CHECK(first_resend - died <= 3 * rtt);  // the lost flight leaves on live paths within 3 RTTs
    CHECK(failed_at - died <= 5 * rtt);     // the route is retired within 5
    CHECK(moved_at == failed_at);
    CHECK(ps2.rerouted == 1);
    // Healed at once: probed on the scale of its RTT (R-PATH-11), not probe_interval (1 ms).
    down = false;
    const Time healed = p.link->now;
    REQUIRE(p.link->run([&] {
        p.a->path_stats(p.ca, 2, ps2);
        return ps2.state == PathStateKind::active;
    }, 10'000'000));
    INFO("revived " << (p.link->now - healed) << " ns after healing");
    CHECK(p.link->now - healed <= 12 * rtt);
    const uint64_t tx_revived = ps2.tx_packets;
    std::fill(wb.dst.begin(), wb.dst.end(), 0);
    p.post_writes(3, wb.ms, wb.src.data(), wb.md, wb.dst.data(), 64, 65536);
    got = p.wait(*p.a, p.cqa, 64);
    REQUIRE(got.size() == 64);
    for (auto& c : got) REQUIRE(c.status == WcStatus::success);
    CHECK(std::memcmp(wb.src.data(), wb.dst.data(), kLen) == 0);
    REQUIRE(p.a->path_stats(p.ca, 2, ps2) == Status::ok);
    CHECK(ps2.tx_packets - tx_revived > 100);  // its share back
}

// R-TIMER-9 must not mistake a queue for a dead route: path 3's delay from A
// to B grows by half the time that passes (a queue filling at 1.5 times its
// drain rate) up to ten RTTs; its packets come back ever later, but they do
// come back. Counting from the oldest packet's send alone, with a fixed window,
// the first version of this rule retired the path. (At twice the drain rate
// it may be retired once, and is revived by its probe: the two cannot be told
// apart by time until the ACK comes.)
TEST_CASE("a path whose queue builds while its ACKs keep coming is not silent (R-TIMER-9)", "[engine][silence]") {
    EngineConfig cfg;
    cfg.num_paths = 4;
    Pair p(cfg);
    p.stream(5);
    const size_t kLen = 64 * 65536;
    WriteBuffers wb(p, kLen, 9);
    p.post_writes(5, wb.ms, wb.src.data(), wb.md, wb.dst.data(), 64, 65536);
    REQUIRE(p.wait(*p.a, p.cqa, 64).size() == 64);
    PathStats before;
    REQUIRE(p.a->path_stats(p.ca, 3, before) == Status::ok);
    const Time ramp = p.link->now;
    const Time cap = 10 * before.srtt;
    p.link->delay_if = [&](int from, const TxPacket& t) {  // the data's way, A to B
        return from == 0 && t.path == 3 ? std::min(cap, (p.link->now - ramp) / 2) : Time(0);
    };
    for (int round = 0; round < 3; ++round) {
        wb.write_all(p, 5);
    }
    PathStats ps;
    REQUIRE(p.a->path_stats(p.ca, 3, ps) == Status::ok);
    INFO("path 3 srtt " << before.srtt << " -> " << ps.srtt << " ns, tx " << before.tx_packets << " -> "
                        << ps.tx_packets << ", ramp over " << (p.link->now - ramp) << " ns, silences " << ps.silences);
    CHECK(p.link->now - ramp > cap);  // the whole ramp was run through
    CHECK(ps.srtt > 4 * before.srtt);
    CHECK(ps.tx_packets - before.tx_packets > 20);
    // A packet found silent may be resent (each such one widens the path's
    // window for silence, R-TIMER-9), but the path is never retired for it.
    CHECK(ps.silences <= 4);
    CHECK(ps.timeouts == before.timeouts);
    CHECK(ps.rerouted == before.rerouted);
    CHECK(ps.state == PathStateKind::active);
}

// R-TIMER-9 must not mistake a slow route for a dead one: a path three times
// as far as its siblings, all the time, is never silent.
TEST_CASE("a path much slower than its siblings is not declared silent (R-TIMER-9)", "[engine][silence]") {
    EngineConfig cfg;
    cfg.num_paths = 4;
    Pair p(cfg);
    p.stream(7);
    p.link->delay_if = [](int, const TxPacket& t) { return t.path == 3 ? Time(12'000) : Time(0); };
    const size_t kLen = 64 * 65536;
    WriteBuffers wb(p, kLen, 7);
    for (int round = 0; round < 4; ++round) {
        wb.write_all(p, 7);
    }
    PathStats ps3, ps0;
    REQUIRE(p.a->path_stats(p.ca, 3, ps3) == Status::ok);
    REQUIRE(p.a->path_stats(p.ca, 0, ps0) == Status::ok);
    INFO("path 3 srtt " << ps3.srtt << ", path 0 srtt " << ps0.srtt);
    CHECK(ps3.srtt > 2 * ps0.srtt);
    CHECK(ps3.tx_packets > 20);
    CHECK(ps3.silences == 0);
    CHECK(ps3.retransmits == 0);
    CHECK(ps3.state == PathStateKind::active);
}

// R-TIMER-1 (lent sample): a path whose first flight is lost, before it has
// an RTT sample of its own, is timed by the connection's first sample, not by
// initial_rto (1 ms): before, one lost packet cost a short flow on a fresh
// connection 1 ms.
TEST_CASE("a path's first flight lost before its first RTT sample costs min_rto, not initial_rto (R-TIMER-1)",
          "[engine][silence]") {
    EngineConfig cfg;
    cfg.num_paths = 4;
    cfg.rate_hints = false;  // the whole message in the first flight, a quarter of it on path 3
    REQUIRE(cfg.initial_rto >= 1'000'000);
    Pair p(cfg);
    p.stream(9);
    const size_t kLen = 65536;
    WriteBuffers wb(p, kLen, 5);
    const Time start = p.link->now;
    uint64_t dropped = 0;
    bool acked = false;  // path 3's first flight, all it sends before B's first ACK leaves
    p.link->drop_if = [&](int side, const TxPacket& t) {
        acked |= side == 1 && t.hdr[1] == uint8_t(wire::PacketType::ack);
        const bool drop = side == 0 && is_data(t) && t.path == 3 && !acked;
        dropped += drop;
        return drop;
    };
    p.post_writes(9, wb.ms, wb.src.data(), wb.md, wb.dst.data(), 1, 65536);
    auto got = p.wait(*p.a, p.cqa, 1);
    REQUIRE(got.size() == 1);
    REQUIRE(got[0].status == WcStatus::success);
    REQUIRE(dropped > 0);
    CHECK(std::memcmp(wb.src.data(), wb.dst.data(), kLen) == 0);
    INFO("done " << (p.link->now - start) << " ns after the post; " << dropped << " dropped");
    CHECK(p.link->now - start < cfg.initial_rto / 2);
}

// ---- R-TIMER-10: redundant copies (tail_redundancy) ----

namespace {

// Four paths, no rate hints, an RTO far from the ~4-8 us RTTs of the paths.
EngineConfig redundancy_cfg(bool on) {
    EngineConfig cfg;
    cfg.num_paths = 4;
    cfg.rate_hints = false;
    cfg.min_rto = 100'000;
    cfg.tail_redundancy = on;
    return cfg;
}

bool retransmit_flag(const TxPacket& t) { return (t.hdr[25] & wire::kDataRetransmit) != 0; }
uint32_t offset_of(const TxPacket& t) { return be32(t.hdr + 40); }

// Every DATA transmission A sends of the packet at byte offset `off` of
// stream 5's WRITEs: when, and whether its k-th one is dropped.
struct TailWatch {
    uint32_t off = 0;
    bool armed = false;          // only the measured WRITE's packets count
    std::vector<Time> sent;      // transmissions of that packet
    std::vector<bool> drop;      // drop[k]: lose its k-th transmission
    uint64_t copies = 0;         // DATA with the retransmit flag, any packet
    TailWatch(Pair& p, uint32_t offset) : off(offset) {
        p.link->drop_if = [this, &p](int side, const TxPacket& t) {
            if (side != 0 || !is_data(t) || !armed) return false;
            copies += retransmit_flag(t);
            if (offset_of(t) != off) return false;
            const size_t k = sent.size();
            sent.push_back(p.link->now);
            return k < drop.size() && drop[k];
        };
    }
};

// A 4-packet WRITE after a warm-up that gave every path an RTT; returns its
// completion time after the post (0: not completed).
Time tail_write(Pair& p, WriteBuffers& wb, TailWatch& w) {
    p.post_writes(5, wb.ms, wb.src.data(), wb.md, wb.dst.data(), 8, 16384);  // warm-up
    REQUIRE(p.wait(*p.a, p.cqa, 8).size() == 8);
    w.armed = true;
    const Time t0 = p.link->now;
    p.post_writes(5, wb.ms, wb.src.data() + 131072, wb.md, wb.dst.data() + 131072, 1, 16384);
    auto got = p.wait(*p.a, p.cqa, 1);
    if (got.size() != 1 || got[0].status != WcStatus::success) return 0;
    return p.link->now - t0;
}

}  // namespace

TEST_CASE("a lost last packet whose copy arrives completes with no resend (R-TIMER-10)", "[engine][redundancy]") {
    Pair p(redundancy_cfg(true));
    p.stream(5);
    WriteBuffers wb(p, 131072 + 16384, 11);
    TailWatch w(p, 12288);  // the WRITE's last packet (DATA offset: within its message)
    w.drop = {true};  // its original is lost
    const Time took = tail_write(p, wb, w);
    REQUIRE(took > 0);
    CHECK(std::memcmp(wb.src.data(), wb.dst.data(), wb.src.size()) == 0);
    REQUIRE(w.sent.size() >= 2);
    INFO("transmissions " << w.sent.size() << ", second after " << (w.sent[1] - w.sent[0]) << " ns, took " << took);
    CHECK(w.sent[1] - w.sent[0] < 1000);  // the copy left with the original's burst, not a probe 2 RTTs later
    CHECK(w.sent.size() == 2);             // and nothing more was sent of it
    ConnStats cs;
    REQUIRE(p.a->conn_stats(p.ca, cs) == Status::ok);
    CHECK(cs.retransmits == 0);
    CHECK(cs.redundant >= 1);
    p.link->finish_placements(true);
}

TEST_CASE("a lost copy whose original arrives is no loss of its CSN, and holds no path (R-TIMER-10)",
          "[engine][redundancy]") {
    Pair p(redundancy_cfg(true));
    p.stream(5);
    WriteBuffers wb(p, 131072 + 16384, 12);
    TailWatch w(p, 12288);
    w.drop = {false, true};  // the original arrives, its copy is lost
    REQUIRE(tail_write(p, wb, w) > 0);
    CHECK(std::memcmp(wb.src.data(), wb.dst.data(), wb.src.size()) == 0);
    p.link->run([] { return false; }, 500'000);  // long past every path's RTO
    REQUIRE(w.sent.size() >= 2);
    CHECK(w.sent[1] - w.sent[0] < 1000);
    CHECK(w.sent.size() == 2);  // not resent
    ConnStats cs;
    REQUIRE(p.a->conn_stats(p.ca, cs) == Status::ok);
    CHECK(cs.retransmits == 0);
    for (uint16_t pi = 0; pi < 4; ++pi) {
        PathStats ps;
        REQUIRE(p.a->path_stats(p.ca, pi, ps) == Status::ok);
        INFO("path " << pi);
        CHECK(ps.retransmits == 0);
        CHECK(ps.timeouts == 0);  // the lost copy's slot was resolved, not timed out
        CHECK(ps.inflight == 0);
    }
    p.link->finish_placements(true);
}

TEST_CASE("an original and its copy both lost are recovered as any loss (R-TIMER-10)", "[engine][redundancy]") {
    Pair p(redundancy_cfg(true));
    p.stream(5);
    WriteBuffers wb(p, 131072 + 16384, 13);
    TailWatch w(p, 12288);
    w.drop = {true, true};
    REQUIRE(tail_write(p, wb, w) > 0);
    CHECK(std::memcmp(wb.src.data(), wb.dst.data(), wb.src.size()) == 0);
    REQUIRE(w.sent.size() >= 3);
    CHECK(w.sent[1] - w.sent[0] < 1000);  // the second was the copy
    p.link->finish_placements(true);
}

TEST_CASE("copies never go while new data waits, and only with the key on (R-TIMER-10)", "[engine][redundancy]") {
    const bool on = GENERATE(false, true);
    INFO("tail_redundancy " << on);
    Pair p(redundancy_cfg(on));
    p.stream(5);
    const size_t kLen = 64 * 65536;
    WriteBuffers wb(p, kLen, 14);
    size_t fresh = 0;        // first transmissions seen
    size_t fresh_after = 0;  // of those, after a packet with the retransmit flag
    uint64_t flagged = 0;
    p.link->drop_if = [&](int side, const TxPacket& t) {
        if (side != 0 || !is_data(t)) return false;
        if (retransmit_flag(t)) {
            ++flagged;
        } else {
            ++fresh;
            fresh_after += flagged > 0;
        }
        return false;
    };
    p.post_writes(5, wb.ms, wb.src.data(), wb.md, wb.dst.data(), 64, 65536);
    auto got = p.wait(*p.a, p.cqa, 64);
    REQUIRE(got.size() == 64);
    for (auto& c : got) REQUIRE(c.status == WcStatus::success);
    CHECK(std::memcmp(wb.src.data(), wb.dst.data(), kLen) == 0);
    ConnStats cs;
    REQUIRE(p.a->conn_stats(p.ca, cs) == Status::ok);
    INFO("fresh " << fresh << ", flagged " << flagged << ", redundant " << cs.redundant);
    CHECK(fresh == 64 * 16);
    CHECK(fresh_after == 0);  // no copy before the last new segment left
    if (on) {
        CHECK(cs.redundant > 0);  // once idle, the tail was copied
        CHECK(flagged == cs.redundant);
    } else {
        CHECK(cs.redundant == 0);
        CHECK(flagged == 0);
    }
    p.link->finish_placements(true);
}

TEST_CASE("with the key off a lost last packet waits for its probe (R-TIMER-8, R-TIMER-10)", "[engine][redundancy]") {
    Pair p(redundancy_cfg(false));
    p.stream(5);
    WriteBuffers wb(p, 131072 + 16384, 15);
    TailWatch w(p, 12288);
    w.drop = {true};
    REQUIRE(tail_write(p, wb, w) > 0);
    CHECK(std::memcmp(wb.src.data(), wb.dst.data(), wb.src.size()) == 0);
    REQUIRE(w.sent.size() >= 2);
    CHECK(w.sent[1] - w.sent[0] > 4000);  // a tail-loss probe, two smoothed RTTs on
    ConnStats cs;
    REQUIRE(p.a->conn_stats(p.ca, cs) == Status::ok);
    CHECK(cs.redundant == 0);
    p.link->finish_placements(true);
}

TEST_CASE("an ACK that shows a new hole goes twice, on two routes, counting nothing twice (R-TIMER-10)",
          "[engine][redundancy]") {
    const bool on = GENERATE(false, true);
    INFO("tail_redundancy " << on);
    Pair p(redundancy_cfg(on));
    p.link->ce = 1.0;  // every ECN-capable packet marked: a CE count sent twice would show
    p.stream(5);
    const size_t kLen = 16 * 65536;
    WriteBuffers wb(p, kLen, 16);
    uint64_t fresh = 0;
    struct Ack {
        uint16_t path_id, route;
        uint32_t cum_psn;
        uint64_t sack[4];
        uint16_t ce, rx;
        uint8_t flags;
        bool hole() const { return (sack[0] | sack[1] | sack[2] | sack[3]) != 0; }
        bool same(const Ack& o) const {
            return path_id == o.path_id && cum_psn == o.cum_psn && std::memcmp(sack, o.sack, sizeof sack) == 0;
        }
    };
    std::vector<Ack> acks;  // B's ACKs, in send order
    p.link->drop_if = [&](int side, const TxPacket& t) {
        if (side == 0 && is_data(t) && !retransmit_flag(t)) return ++fresh % 7 == 0;  // holes
        if (side == 1 && t.hdr[1] == uint8_t(wire::PacketType::ack)) {
            wire::Packet pk;
            REQUIRE(wire::decode({t.hdr, t.hdr_len}, pk) == wire::DecodeError::ok);
            Ack a{pk.common.path_id, t.path, pk.ack.cum_psn, {}, pk.ack.ce_count, pk.ack.rx_count, pk.ack.ack_flags};
            std::memcpy(a.sack, pk.ack.sack, sizeof a.sack);
            acks.push_back(a);
        }
        return false;
    };
    p.post_writes(5, wb.ms, wb.src.data(), wb.md, wb.dst.data(), 16, 65536);
    auto got = p.wait(*p.a, p.cqa, 16);
    REQUIRE(got.size() == 16);
    for (auto& c : got) REQUIRE(c.status == WcStatus::success);
    CHECK(std::memcmp(wb.src.data(), wb.dst.data(), kLen) == 0);
    p.link->run([] { return false; }, 500'000);  // every ACK out and in
    // A copy follows its original at once: same path and contents, another
    // route, no CE mark, no packet count, no flag. The first ACK of a path to
    // show a hole at its cum_psn (news: a new hole) is always copied.
    uint64_t copies = 0, news = 0, news_copied = 0;
    std::vector<const Ack*> last(4, nullptr);  // each path's previous original
    for (size_t i = 0; i < acks.size(); ++i) {
        const Ack& o = acks[i];
        REQUIRE(o.path_id < 4);
        const bool copied = i + 1 < acks.size() && acks[i + 1].same(o) && acks[i + 1].rx == 0 && o.rx != 0;
        const Ack* prev = last[o.path_id];
        const bool is_news = o.hole() && (!prev || !prev->hole() || prev->cum_psn != o.cum_psn);
        news += is_news;
        if (copied) {
            const Ack& d = acks[i + 1];
            INFO("ack " << i << " path " << o.path_id);
            CHECK(o.hole());
            CHECK(d.route != o.route);
            CHECK(d.ce == 0);
            CHECK(d.flags == 0);
            ++copies;
            news_copied += is_news;
            ++i;
        }
        last[o.path_id] = &o;
    }
    ConnStats bs;
    REQUIRE(p.b->conn_stats(p.cb, bs) == Status::ok);
    INFO("ACKs " << acks.size() << ", new holes " << news << ", copies " << copies);
    CHECK(news > 0);
    CHECK(bs.ack_copies == copies);
    if (on) {
        CHECK(news_copied == news);
    } else {
        CHECK(copies == 0);
    }
    // The sender counted every CE mark once: what B accepted marked is what A heard.
    uint64_t heard = 0, marked = 0;
    for (uint16_t pi = 0; pi < 4; ++pi) {
        PathStats as, bps;
        REQUIRE(p.a->path_stats(p.ca, pi, as) == Status::ok);
        REQUIRE(p.b->path_stats(p.cb, pi, bps) == Status::ok);
        heard += as.ce_marks;
        marked += bps.rx_ce;
    }
    CHECK(marked > 0);
    CHECK(heard == marked);
    p.link->finish_placements(true);
}
