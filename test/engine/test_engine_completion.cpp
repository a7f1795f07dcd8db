// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Success means placed (doc/spec.md R-ACK-8, R-NAK-1, R-NAK-8, R-STREAM-2,
// R-STREAM-8): adversarial completion tests. NAKs are lost, NAKs are
// delayed behind ACKs on faster paths with no loss at all, the responder's
// stream is already in ERROR, a bad rkey hides among many good WRs on a
// lossy, duplicating link; a stream the responder has not created yet is
// retried as receiver-not-ready (R-NAK-10). Every run is repeated in the
// four arrangements (placement inline or deferred x congestion control
// inline or on its own stage, doc/architecture.md 4). In every run every
// `success` completion's destination bytes are verified, every WR after a
// failed one is flushed, and nothing completes twice.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "engine_fixture.hpp"

using namespace mroce;
using mroce::test::PairLink;
using mroce::test::Side;
using mroce::test::SplitMix;
using mroce::test::fnv;

namespace {

struct Arrangement {
    bool deferred = false;
    bool offload_cc = false;
    std::string name() const {
        return std::string(deferred ? "deferred" : "inline") + " placement, " + (offload_cc ? "CC stage" : "inline CC");
    }
};

Arrangement arrangement(int k) { return Arrangement{(k & 1) != 0, (k & 2) != 0}; }

constexpr size_t kMem = 4u << 20;

EngineConfig config_for(const Arrangement& arr, uint16_t paths) {
    EngineConfig cfg;
    cfg.deferred_placement = arr.deferred;
    cfg.offload_cc = arr.offload_cc;
    cfg.num_paths = paths;
    cfg.stream_depth = 100;  // not a power of two
    cfg.recv_depth = 300;
    cfg.conn_timeout = 60'000'000'000ull;
    cfg.connect_retry = 1'000'000;
    cfg.rnr_delay = 50'000;
    return cfg;
}

struct Rig {
    Arrangement arr;
    EngineConfig cfg;
    Side a, b;
    PairLink link;
    uint32_t ca = 0, cb = 0;
    Rig(const Arrangement& ar, uint16_t paths, uint64_t seed) : Rig(ar, config_for(ar, paths), seed) {}
    Rig(const Arrangement& ar, const EngineConfig& c, uint64_t seed)
        : arr(ar), cfg(c), a(cfg, kMem), b(cfg, kMem), link(a.eng, b.eng, seed) {
        if (arr.deferred) {
            link.enable_pipeline(0);
            link.enable_pipeline(1);
            link.place_latency = 1500;
        }
        if (arr.offload_cc) {
            link.enable_cc_stage(0);
            link.enable_cc_stage(1);
        }
        REQUIRE(mroce::test::connect_pair(link, ca, cb));
    }
    void streams(std::initializer_list<uint32_t> ids) {
        for (uint32_t id : ids) {
            REQUIRE(a.eng.create_stream(ca, id, a.pd, a.cq, a.cq) == Status::ok);
            REQUIRE(b.eng.create_stream(cb, id, b.pd, b.cq, b.cq) == Status::ok);
        }
    }
    // Polls both CQs until pred() or the limit; completions keyed by side.
    std::vector<Completion> got[2];
    bool run_until(const std::function<bool()>& pred, Time limit = 20'000'000'000ull) {
        return link.run([&] {
            Completion c[64];
            for (int s = 0; s < 2; ++s) {
                Side& sd = s == 0 ? a : b;
                for (size_t k; (k = sd.eng.poll_cq(sd.cq, c, 64)) > 0;) got[s].insert(got[s].end(), c, c + k);
            }
            return pred();
        }, limit);
    }
    size_t count(int side, uint32_t stream) const {
        size_t n = 0;
        for (const Completion& c : got[side]) n += c.stream == stream;
        return n;
    }
    // A WRITE of A's bytes [off, off + len) to the same offsets at B.
    SendWr write_ab(uint64_t id, size_t off, uint32_t len) const { return write_wr(a, off, len, b, off, id); }
    // After the run: nothing more may complete while stray packets drain.
    void drain_and_check_quiet() {
        const size_t n0 = got[0].size(), n1 = got[1].size();
        run_until([] { return false; }, 20'000'000);
        CHECK(got[0].size() == n0);
        CHECK(got[1].size() == n1);
    }
};

uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }
bool is_type(const TxPacket& p, wire::PacketType t) { return p.hdr_len >= 2 && p.hdr[1] == uint8_t(t); }
bool is_nak(const TxPacket& p) { return is_type(p, wire::PacketType::nak); }
bool is_data(const TxPacket& p) { return is_type(p, wire::PacketType::data) && p.hdr_len >= wire::kDataLen; }
uint32_t data_stream(const TxPacket& p) { return be32(p.hdr + 28); }
uint32_t data_msg_seq(const TxPacket& p) { return be32(p.hdr + 32); }


// The checks every test makes of one stream's send completions, in post order:
// wr_ids exactly once and in order; a prefix of successes (each verified by
// verify(k)), then at most one WR with its own error, then only wr_flush_err.
struct Expect {
    size_t first_error = SIZE_MAX;  // index of the first non-success completion
};
Expect check_send_order(const std::vector<Completion>& cs, uint32_t stream, const std::vector<uint64_t>& ids,
                        const std::function<bool(size_t)>& verify) {
    std::vector<Completion> mine;
    for (const Completion& c : cs)
        if (c.stream == stream && c.opcode != WcOpcode::recv && c.opcode != WcOpcode::recv_write_imm) mine.push_back(c);
    REQUIRE(mine.size() == ids.size());
    Expect e;
    for (size_t k = 0; k < mine.size(); ++k) {
        INFO("stream " << stream << " WR " << k << " status " << to_string(mine[k].status));
        CHECK(mine[k].wr_id == ids[k]);  // exactly once, in order (R-CMPL-2)
        if (mine[k].status == WcStatus::success) {
            CHECK(e.first_error == SIZE_MAX);  // R-STREAM-8: nothing succeeds after a failure
            CHECK(verify(k));                   // R-ACK-8: success means placed
        } else if (e.first_error == SIZE_MAX) {
            e.first_error = k;
        } else {
            CHECK(mine[k].status == WcStatus::wr_flush_err);  // R-STREAM-8
        }
    }
    return e;
}

}  // namespace

// The responder's stream is in ERROR before the requester knows (its own
// post failed its local check, R-MEM-4): every packet of the requester's
// WRITEs is refused, never acknowledged, whatever NAKs are lost.
TEST_CASE("completion: a responder stream in ERROR never yields success, NAKs lost", "[engine][completion]") {
    const Arrangement arr = arrangement(GENERATE(0, 1, 2, 3));
    INFO(arr.name());
    Rig r(arr, 4, 5);
    r.streams({3});
    SendWr bad;
    bad.wr_id = 99;
    bad.op = OpKind::write;
    bad.local_addr = r.b.addr(0);
    bad.length = 64;
    bad.lkey = 0xdeadbeef;  // R-MEM-4: fails at post, B's stream 3 enters ERROR
    bad.remote_addr = r.a.addr(0);
    bad.rkey = r.a.mr.rkey;
    REQUIRE(r.b.eng.post_send(r.cb, 3, bad) == Status::ok);
    int naks_dropped = 0;
    r.link.drop_if = [&](int from, const TxPacket& p) {
        if (from == 1 && is_nak(p) && naks_dropped < 40) return ++naks_dropped, true;
        return false;
    };
    std::vector<uint64_t> ids;
    for (uint32_t k = 0; k < 20; ++k) {
        mroce::test::fill(r.a.mem, k * 8192, 6000, k + 1);
        const SendWr w = r.write_ab(1000 + k, k * 8192, 6000);
        REQUIRE(r.a.eng.post_send(r.ca, 3, w) == Status::ok);
        ids.push_back(w.wr_id);
    }
    REQUIRE(r.run_until([&] { return r.count(0, 3) >= ids.size(); }));
    CHECK(naks_dropped == 40);
    const Expect e = check_send_order(r.got[0], 3, ids, [&](size_t k) {
        return std::memcmp(r.a.mem.data() + k * 8192, r.b.mem.data() + k * 8192, 6000) == 0;
    });
    CHECK(e.first_error == 0);  // nothing was placed, so nothing may succeed
    r.drain_and_check_quiet();
}

// No loss at all: B's NAKs take 3 ms, its ACKs (of another stream's packets,
// on the same paths) microseconds. An ACK must never cover what was refused.
TEST_CASE("completion: NAKs delayed behind ACKs on other paths, no loss", "[engine][completion]") {
    const Arrangement arr = arrangement(GENERATE(0, 1, 2, 3));
    INFO(arr.name());
    Rig r(arr, 4, 6);
    r.streams({1, 2});
    SendWr bad;
    bad.wr_id = 99;
    bad.op = OpKind::send;
    bad.local_addr = r.b.addr(0);
    bad.length = 16;
    bad.lkey = 0x12345678;  // B's stream 2 enters ERROR at post
    REQUIRE(r.b.eng.post_send(r.cb, 2, bad) == Status::ok);
    r.link.delay_if = [&](int from, const TxPacket& p) -> Time { return from == 1 && is_nak(p) ? 3'000'000 : 0; };
    std::vector<uint64_t> ids[3];
    for (uint32_t k = 0; k < 30; ++k) {
        const uint32_t s = 1 + (k & 1);
        mroce::test::fill(r.a.mem, k * 16384, 9000, k + 7);
        SendWr w = r.write_ab(2000 + k, k * 16384, 9000);
        if (k % 3 == 0) w.op = OpKind::write_imm;
        if (w.op == OpKind::write_imm) {
            RecvWr rv;
            rv.wr_id = 5000 + k;
            REQUIRE(r.b.eng.post_recv(r.cb, s, rv) == Status::ok);
        }
        REQUIRE(r.a.eng.post_send(r.ca, s, w) == Status::ok);
        ids[s].push_back(w.wr_id);
    }
    REQUIRE(r.run_until([&] { return r.count(0, 1) >= ids[1].size() && r.count(0, 2) >= ids[2].size(); }));
    auto same = [&](size_t k, uint32_t s) {
        const size_t idx = 2 * k + (s - 1);
        return std::memcmp(r.a.mem.data() + idx * 16384, r.b.mem.data() + idx * 16384, 9000) == 0;
    };
    const Expect e1 = check_send_order(r.got[0], 1, ids[1], [&](size_t k) { return same(k, 1); });
    const Expect e2 = check_send_order(r.got[0], 2, ids[2], [&](size_t k) { return same(k, 2); });
    CHECK(e1.first_error == SIZE_MAX);  // the healthy stream is untouched
    CHECK(e2.first_error == 0);
    r.drain_and_check_quiet();
}

// WR 0 carries a bad rkey and its first transmission is lost, so WRs 1..n
// land and are acknowledged before B ever sees WR 0; B's NAK for it is then
// lost twice. WR 0 reports the real cause (R-NAK-8) and every later WR is
// flushed although its bytes landed (verbs: nothing after a failure succeeds).
TEST_CASE("completion: WRs acked before the failed one are flushed, the failed one keeps its cause",
          "[engine][completion]") {
    const Arrangement arr = arrangement(GENERATE(0, 1, 2, 3));
    INFO(arr.name());
    Rig r(arr, 3, 7);
    r.streams({4});
    bool first_lost = false;
    int naks_lost = 0;
    r.link.drop_if = [&](int from, const TxPacket& p) {
        if (from == 0 && is_data(p) && data_stream(p) == 4 && data_msg_seq(p) == 0 && !first_lost)
            return first_lost = true;
        if (from == 1 && is_nak(p) && naks_lost < 2) return ++naks_lost, true;
        return false;
    };
    std::vector<uint64_t> ids;
    for (uint32_t k = 0; k < 12; ++k) {
        mroce::test::fill(r.a.mem, k * 4096, 3000, k + 3);
        SendWr w = r.write_ab(3000 + k, k * 4096, 3000);
        if (k == 0) w.rkey ^= 0x00ff0000u;
        REQUIRE(r.a.eng.post_send(r.ca, 4, w) == Status::ok);
        ids.push_back(w.wr_id);
    }
    REQUIRE(r.run_until([&] { return r.count(0, 4) >= ids.size(); }));
    CHECK(first_lost);
    CHECK(naks_lost == 2);
    const Expect e = check_send_order(r.got[0], 4, ids, [](size_t) { return true; });
    REQUIRE(e.first_error == 0);
    std::vector<Completion> mine;
    for (const Completion& c : r.got[0]) if (c.stream == 4) mine.push_back(c);
    CHECK(mine[0].status == WcStatus::rem_access_err);
    for (size_t k = 1; k < mine.size(); ++k) CHECK(mine[k].status == WcStatus::wr_flush_err);
    r.drain_and_check_quiet();
}

// One bad rkey (or out-of-range address) among many good WRs of every kind on
// one stream, 10% loss, 5% duplication, reordering over 4 paths: the WRs before
// it succeed with their bytes verified, it reports rem_access_err, the rest flush;
// at the responder the receives of the messages before it succeed, verified.
TEST_CASE("completion: a bad rkey among many good WRs at 10% loss with duplication", "[engine][completion]") {
    const int combo = GENERATE(0, 1, 2, 3);
    const uint64_t seed = GENERATE(1u, 2u, 3u);
    const Arrangement arr = arrangement(combo);
    INFO(arr.name() << " seed " << seed);
    Rig r(arr, 4, seed * 11 + uint64_t(combo));
    r.link.loss = 0.10;
    r.link.dup = 0.05;
    r.streams({9});
    SplitMix rng(seed * 1000 + uint64_t(combo));
    const uint32_t n = 60;
    const uint32_t bad_at = 10 + uint32_t(rng.next() % 40);
    const bool out_of_range = (rng.next() & 1) != 0;
    struct M {
        OpKind op;
        uint32_t len;
        size_t off;
        uint64_t init = 0;
    };
    std::vector<M> ms;
    std::vector<uint64_t> ids;
    for (size_t i = 0; i < kMem; ++i) r.b.mem[i] = uint8_t(rng.next());
    for (size_t i = 0; i < kMem; ++i) r.a.mem[i] = uint8_t(rng.next());
    for (uint32_t k = 0; k < n; ++k) {
        M m;
        m.op = OpKind(rng.next() % 7);
        m.len = (m.op == OpKind::atomic_cas || m.op == OpKind::atomic_fadd) ? 8 : uint32_t(rng.next() % 20000);
        m.off = size_t(k) * 32768;
        std::memcpy(&m.init, r.b.mem.data() + m.off, 8);
        if (k == bad_at && (m.op == OpKind::send || m.op == OpKind::send_imm)) m.op = OpKind::write;  // a SEND has no rkey
        const bool recv = m.op == OpKind::send || m.op == OpKind::send_imm || m.op == OpKind::write_imm;
        if (recv) {
            RecvWr rv;
            rv.wr_id = 7000 + k;
            rv.addr = r.b.addr(m.off);
            rv.length = m.op == OpKind::write_imm ? 0 : m.len;
            rv.lkey = r.b.mr.lkey;
            REQUIRE(r.b.eng.post_recv(r.cb, 9, rv) == Status::ok);
        }
        SendWr w;
        w.wr_id = 6000 + k;
        w.op = m.op;
        w.length = m.len;
        w.local_addr = r.a.addr(m.off);
        w.lkey = r.a.mr.lkey;
        w.remote_addr = r.b.addr(m.off);
        w.rkey = r.b.mr.rkey;
        w.compare_add = m.op == OpKind::atomic_cas && (k & 1) ? m.init : rng.next();
        w.swap = rng.next();
        if (k == bad_at) {
            if (out_of_range) w.remote_addr = r.b.addr(kMem - 8) + (m.len > 8 ? 16 : 8);
            else w.rkey ^= 0x00ff0000u;
        }
        REQUIRE(r.a.eng.post_send(r.ca, 9, w) == Status::ok);
        ms.push_back(m);
        ids.push_back(w.wr_id);
    }
    REQUIRE(r.run_until([&] { return r.count(0, 9) >= n; }, 60'000'000'000ull));
    const Expect e = check_send_order(r.got[0], 9, ids, [&](size_t k) {
        const M& m = ms[k];
        switch (m.op) {
        case OpKind::read:
            return std::memcmp(r.a.mem.data() + m.off, r.b.mem.data() + m.off, m.len) == 0;
        case OpKind::atomic_fadd:
        case OpKind::atomic_cas: {
            uint64_t got;
            std::memcpy(&got, r.a.mem.data() + m.off, 8);
            return got == m.init;  // executed exactly once, its old value returned
        }
        default:
            return std::memcmp(r.a.mem.data() + m.off, r.b.mem.data() + m.off, m.len) == 0;
        }
    });
    INFO("bad WR " << bad_at << (out_of_range ? " (out of range)" : " (bad rkey)"));
    REQUIRE(e.first_error == bad_at);
    std::vector<Completion> mine;
    for (const Completion& c : r.got[0]) if (c.stream == 9) mine.push_back(c);
    CHECK(mine[bad_at].status == WcStatus::rem_access_err);
    // Responder: receives before the bad WR succeed with their bytes in place, the rest flush.
    size_t ri = 0;
    for (const Completion& c : r.got[1]) {
        if (c.stream != 9) continue;
        REQUIRE(ri < n);
        while (ri < n && !(ms[ri].op == OpKind::send || ms[ri].op == OpKind::send_imm || ms[ri].op == OpKind::write_imm))
            ++ri;
        REQUIRE(ri < n);
        CHECK(c.wr_id == 7000 + ri);
        if (c.status == WcStatus::success) {
            CHECK(ri < bad_at);
            CHECK(std::memcmp(r.a.mem.data() + ms[ri].off, r.b.mem.data() + ms[ri].off, ms[ri].len) == 0);
        } else {
            CHECK(ri > bad_at);
            CHECK(c.status == WcStatus::wr_flush_err);
        }
        ++ri;
    }
    r.drain_and_check_quiet();
}

// R-NAK-10: a WRITE to a stream the responder has not created yet is not an
// error: it is refused as receiver-not-ready and retried until the stream
// exists, then placed and completed successfully.
TEST_CASE("completion: a stream the responder creates late is retried as RNR", "[engine][completion][rnr]") {
    const Arrangement arr = arrangement(GENERATE(0, 1, 2, 3));
    INFO(arr.name());
    Rig r(arr, 2, 8);
    REQUIRE(r.a.eng.create_stream(r.ca, 11, r.a.pd, r.a.cq, r.a.cq) == Status::ok);
    mroce::test::fill(r.a.mem, 0, 20000, 5);
    SendWr w;
    w.wr_id = 42;
    w.op = OpKind::write;
    w.local_addr = r.a.addr(0);
    w.length = 20000;
    w.lkey = r.a.mr.lkey;
    w.remote_addr = r.b.addr(0);
    w.rkey = r.b.mr.rkey;
    REQUIRE(r.a.eng.post_send(r.ca, 11, w) == Status::ok);
    SendWr s2 = w;
    s2.wr_id = 43;
    s2.op = OpKind::send;
    s2.length = 777;
    REQUIRE(r.a.eng.post_send(r.ca, 11, s2) == Status::ok);
    r.run_until([] { return false; }, 3'000'000);  // 3 ms of RNR
    CHECK(r.got[0].empty());
    ConnStats sa{}, sb{};
    REQUIRE(r.a.eng.conn_stats(r.ca, sa) == Status::ok);
    REQUIRE(r.b.eng.conn_stats(r.cb, sb) == Status::ok);
    CHECK(sb.rnr_drops > 0);
    CHECK(sa.rnr_naks_received > 0);
    REQUIRE(r.b.eng.create_stream(r.cb, 11, r.b.pd, r.b.cq, r.b.cq) == Status::ok);
    r.run_until([] { return false; }, 1'000'000);  // the WRITE lands; the SEND has no receive: RNR again
    REQUIRE(r.got[0].size() == 1);
    CHECK(r.got[0][0].wr_id == 42);
    const uint64_t rnr_before = [&] { ConnStats x{}; r.b.eng.conn_stats(r.cb, x); return x.rnr_drops; }();
    r.run_until([] { return false; }, 500'000);
    CHECK([&] { ConnStats x{}; r.b.eng.conn_stats(r.cb, x); return x.rnr_drops; }() > rnr_before);
    CHECK(r.got[0].size() == 1);
    RecvWr rv;
    rv.wr_id = 77;
    rv.addr = r.b.addr(100000);
    rv.length = 1000;
    rv.lkey = r.b.mr.lkey;
    REQUIRE(r.b.eng.post_recv(r.cb, 11, rv) == Status::ok);
    REQUIRE(r.run_until([&] { return r.got[0].size() >= 2 && r.got[1].size() >= 1; }));
    REQUIRE(r.got[0].size() == 2);
    CHECK(r.got[0][0].wr_id == 42);
    CHECK(r.got[0][0].status == WcStatus::success);
    CHECK(r.got[0][1].wr_id == 43);
    CHECK(r.got[0][1].status == WcStatus::success);
    CHECK(std::memcmp(r.a.mem.data(), r.b.mem.data(), 20000) == 0);
    CHECK(std::memcmp(r.a.mem.data(), r.b.mem.data() + 100000, 777) == 0);
    REQUIRE(r.got[1].size() == 1);
    CHECK(r.got[1][0].status == WcStatus::success);
    CHECK(r.got[1][0].byte_len == 777);
    // RNR is not loss: no path was retired while the responder was not ready.
    for (uint16_t pi = 0; pi < 2; ++pi) {
        PathStats ps{};
        REQUIRE(r.a.eng.path_stats(r.ca, pi, ps) == Status::ok);
        CHECK(ps.state == PathStateKind::active);
        CHECK(ps.timeouts == 0);
    }
    r.drain_and_check_quiet();
}

// R-NAK-10: the RNR retry count is the verbs one: 7 means retry forever,
// anything less ends the WR with rnr_retry_exc_err and flushes the rest.
TEST_CASE("completion: RNR retries exhausted", "[engine][completion][rnr]") {
    EngineConfig cfg = config_for(Arrangement{}, 2);
    cfg.rnr_retry = 3;
    cfg.csn_window = 64;  // a CSN given up without reaching B would stall B's filter a window later
    Rig r(Arrangement{}, cfg, 9);
    r.streams({5});
    SendWr w = r.write_ab(1, 0, 100);
    w.op = OpKind::send;
    w.remote_addr = w.rkey = 0;
    REQUIRE(r.a.eng.post_send(r.ca, 5, w) == Status::ok);
    w.wr_id = 2;
    REQUIRE(r.a.eng.post_send(r.ca, 5, w) == Status::ok);
    std::vector<Completion>& got = r.got[0];
    r.run_until([&] { return got.size() >= 2; }, 2'000'000'000);
    REQUIRE(got.size() == 2);
    CHECK(got[0].wr_id == 1);
    CHECK(got[0].status == WcStatus::rnr_retry_exc_err);
    CHECK(got[1].wr_id == 2);
    CHECK(got[1].status == WcStatus::wr_flush_err);
    ConnStats sa{};
    REQUIRE(r.a.eng.conn_stats(r.ca, sa) == Status::ok);
    CHECK(sa.rnr_naks_received >= 4);  // the first try and three retries
    // The CSN window is whole again: the given-up CSNs reached B as void
    // packets (R-NAK-11), so a later stream moves far more than a window.
    r.streams({6});
    REQUIRE(r.a.eng.post_send(r.ca, 6, r.write_ab(3, 0, 300 * 4096)) == Status::ok);
    r.run_until([&] { return got.size() >= 3; }, 2'000'000'000);
    REQUIRE(got.size() == 3);
    CHECK(got[2].status == WcStatus::success);
    CHECK(std::memcmp(r.a.mem.data(), r.b.mem.data(), 300 * 4096) == 0);
    CHECK(r.b.eng.stats().rx_stale == 0);
}

// The same when the WR is flushed while its packet waits out its RNR delay
// (the stream put in ERROR on demand, R-STREAM-12).
TEST_CASE("completion: an RNR'd packet whose WR is flushed still reaches the peer, void", "[engine][completion][rnr]") {
    EngineConfig cfg = config_for(Arrangement{}, 2);
    cfg.csn_window = 64;
    cfg.rnr_delay = 200'000;
    Rig r(Arrangement{}, cfg, 10);
    r.streams({5, 6});
    SendWr w = r.write_ab(1, 0, 3 * 4096);  // three packets, no receive posted: RNR
    w.op = OpKind::send;
    w.remote_addr = w.rkey = 0;
    REQUIRE(r.a.eng.post_send(r.ca, 5, w) == Status::ok);
    r.run_until([] { return false; }, 100'000);
    ConnStats sa{};
    REQUIRE(r.a.eng.conn_stats(r.ca, sa) == Status::ok);
    REQUIRE(sa.rnr_naks_received >= 1);
    REQUIRE(r.a.eng.set_stream_error(r.ca, 5) == Status::ok);
    std::vector<Completion>& got = r.got[0];
    REQUIRE(r.a.eng.post_send(r.ca, 6, r.write_ab(2, 0, 300 * 4096)) == Status::ok);
    r.run_until([&] { return got.size() >= 2; }, 2'000'000'000);
    REQUIRE(got.size() == 2);
    CHECK(got[0].wr_id == 1);
    CHECK(got[0].status == WcStatus::wr_flush_err);
    CHECK(got[1].wr_id == 2);
    CHECK(got[1].status == WcStatus::success);
    CHECK(std::memcmp(r.a.mem.data(), r.b.mem.data(), 300 * 4096) == 0);
    CHECK(r.b.eng.stats().rx_stale == 0);
}

// A message alone is the only WR in its send queue when its ACK arrives:
// the ACK retires it without the send queue's loop (round 40, issue 24),
// unless its CQ is armed, full or absent. Each message here is posted after
// the last one's ACK: its completion's fields (R-CMPL-2), unsignaled ones
// silent and still retired (more of them than the queue holds), a full
// CQ's lost completion counted (R-CMPL-5) and the queue going on after it,
// an armed CQ's notification (R-NOTIFY-1).
TEST_CASE("completion: messages alone, each retired by its ACK: fields, unsignaled, a full CQ, an armed one",
          "[engine][completion]") {
    using mroce::test::Fixture;
    Fixture f;
    uint32_t small_cq = 0;
    REQUIRE(f.a.eng.create_cq(1, small_cq) == Status::ok);
    REQUIRE(f.a.eng.create_stream(f.ca, 8, f.a.pd, small_cq, small_cq) == Status::ok);
    REQUIRE(f.b.eng.create_stream(f.cb, 8, f.b.pd, f.b.cq, f.b.cq) == Status::ok);
    const uint32_t depth = EngineConfig{}.stream_depth;
    // Posts one WRITE on the stream and runs the link until it is settled at
    // A (its ACK taken: nothing left to send or to time).
    auto alone = [&](uint32_t stream, uint64_t id, uint32_t len, bool signaled) {
        SendWr w = mroce::test::write_wr(f.a, 0, len, f.b, 4096, id);
        w.signaled = signaled;
        REQUIRE(f.a.eng.post_send(f.ca, stream, w) == Status::ok);
        f.link.run([&] { return false; }, 200'000);  // ACK delay and RTT are microseconds
    };
    auto poll = [&](uint32_t cq) {
        std::vector<Completion> got;
        Completion c[8];
        for (size_t k; (k = f.a.eng.poll_cq(cq, c, 8)) > 0;) got.insert(got.end(), c, c + k);
        return got;
    };
    alone(7, 41, 100, true);
    auto got = poll(f.a.cq);
    REQUIRE(got.size() == 1);
    CHECK(got[0].wr_id == 41);
    CHECK(got[0].conn == f.ca);
    CHECK(got[0].stream == 7);
    CHECK(got[0].byte_len == 100);
    CHECK(got[0].imm == 0);
    CHECK(got[0].status == WcStatus::success);
    CHECK(got[0].opcode == WcOpcode::write);
    CHECK(!got[0].has_imm);
    // More unsignaled WRs than the queue holds, one at a time: each retired silently.
    for (uint32_t i = 0; i < depth + 3; ++i) alone(7, 100 + i, 64, false);
    alone(7, 42, 200, true);
    got = poll(f.a.cq);
    REQUIRE(got.size() == 1);
    CHECK(got[0].wr_id == 42);
    CHECK(got[0].byte_len == 200);
    // A CQ of one entry: the second completion is lost and counted, the queue goes on.
    const uint64_t overflows = f.a.eng.stats().cq_overflows;
    alone(8, 51, 10, true);
    alone(8, 52, 10, true);
    CHECK(f.a.eng.stats().cq_overflows == overflows + 1);
    got = poll(small_cq);
    REQUIRE(got.size() == 1);
    CHECK(got[0].wr_id == 51);
    CHECK(got[0].stream == 8);
    alone(8, 53, 10, true);
    got = poll(small_cq);
    REQUIRE(got.size() == 1);
    CHECK(got[0].wr_id == 53);
    // Armed: the completion and one notification.
    REQUIRE(f.a.eng.req_notify_cq(f.a.cq, false) == Status::ok);
    alone(7, 43, 300, true);
    CqEvent ev[4];
    REQUIRE(f.a.eng.take_cq_events(ev, 4) == 1);
    CHECK(ev[0].cq == f.a.cq);
    CHECK(ev[0].events == 1);
    got = poll(f.a.cq);
    REQUIRE(got.size() == 1);
    CHECK(got[0].wr_id == 43);
    CHECK(f.a.eng.stats().cq_overflows == overflows + 1);
}
