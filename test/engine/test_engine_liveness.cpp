// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Liveness and probing that scale (doc/spec.md R-CONN-15, R-PATH-11,
// R-PATH-14): an idle but live peer is heard through keepalives; a silent
// one still fails a connection with work outstanding; failed paths are
// probed with backoff and a device never sends more probes per second than
// its probe_rate, however many connections and failed paths it has.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <vector>

#include "engine_fixture.hpp"

using namespace mroce;
using mroce::test::connect_stream;
using mroce::test::PairLink;
using mroce::test::Side;

namespace {

bool is_probe(const TxPacket& p) { return p.hdr[1] == uint8_t(wire::PacketType::probe); }
uint32_t be32(const uint8_t* p) { return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3]; }
uint32_t probe_seq_of(const TxPacket& p) { return be32(p.hdr + 16); }

// n connections from a to b, every one ESTABLISHED on both ends.
std::vector<uint32_t> connect_many(PairLink& link, Engine& a, Engine& b, int n, std::vector<uint32_t>* on_b = nullptr) {
    std::vector<uint32_t> ca(size_t(n), 0);
    std::vector<uint32_t> cb;
    for (int i = 0; i < n; ++i) REQUIRE(a.connect(1, ca[size_t(i)]) == Status::ok);
    REQUIRE(link.run(
        [&] {
            ConnEvent ev[64];
            for (size_t k; (k = b.poll_events(ev, 64)) > 0;)
                for (size_t i = 0; i < k; ++i)
                    if (ev[i].kind == EventKind::incoming) cb.push_back(ev[i].conn);
            for (uint32_t c : ca)
                if (a.conn_state(c) != ConnState::established) return false;
            return cb.size() == size_t(n);
        },
        2'000'000'000));
    ConnEvent drain[64];
    while (a.poll_events(drain, 64) > 0) {}
    if (on_b) *on_b = cb;
    return ca;
}

}  // namespace

TEST_CASE("liveness: an idle live peer is heard through keepalives; idle connections do not fail (R-CONN-15)",
          "[engine][liveness]") {
    EngineConfig cfg;
    cfg.conn_timeout = 200'000'000;  // keepalive every 50 ms
    Engine a(cfg), b(cfg);
    PairLink link(a, b);
    uint32_t ca = 0, cb = 0;
    REQUIRE(mroce::test::connect_pair(link, ca, cb));
    const uint64_t rx_a = a.stats().rx_packets, rx_b = b.stats().rx_packets;
    // Ten connection timeouts of idleness: both ends keep hearing each other.
    link.run([] { return false; }, 2'000'000'000);
    CHECK(a.conn_state(ca) == ConnState::established);
    CHECK(b.conn_state(cb) == ConnState::established);
    // Each end sends one keepalive per interval without news (answers are news too),
    // so about 2 s / 50 ms = 40 in all, give or take the sweep's granularity.
    const uint64_t ka = a.stats().keepalives_sent + b.stats().keepalives_sent;
    CHECK(ka >= 20);
    CHECK(ka <= 60);
    CHECK(a.stats().rx_packets > rx_a);
    CHECK(b.stats().rx_packets > rx_b);

    // B goes quiet (a process that stopped): an idle A does not fail ...
    link.drop_if = [](int from, const TxPacket&) { return from == 1; };
    link.run([] { return false; }, 600'000'000);
    CHECK(a.conn_state(ca) == ConnState::established);
    // ... but one with work outstanding does, after conn_timeout, naming the cause (R-CONN-6).
    uint32_t pd = a.alloc_pd(), cq = 0;
    REQUIRE(a.create_cq(16, cq) == Status::ok);
    std::vector<uint8_t> mem(4096);
    MrInfo mr{};
    REQUIRE(a.register_mr(pd, mem.data(), mem.size(), kAccessLocalWrite, mr) == Status::ok);
    REQUIRE(a.create_stream(ca, 1, pd, cq, cq) == Status::ok);
    SendWr w;
    w.op = OpKind::write;
    w.local_addr = uint64_t(reinterpret_cast<uintptr_t>(mem.data()));
    w.length = 4096;
    w.lkey = mr.lkey;
    w.remote_addr = 0x1000;
    w.rkey = 1;
    REQUIRE(a.post_send(ca, 1, w) == Status::ok);
    const Time t0 = link.now;
    REQUIRE(link.run([&] { return a.conn_state(ca) == ConnState::error; }, 1'000'000'000));
    CHECK(link.now - t0 <= cfg.conn_timeout + 10'000'000);
    ConnStats cs;
    REQUIRE(a.conn_stats(ca, cs) == Status::ok);
    CHECK(cs.error_cause == ConnErrorCause::peer_silent);
    CHECK(cs.silent_for >= cfg.conn_timeout);
}

// Issue 24: an ACK that leaves nothing outstanding takes the connection's
// timer node off the wheel, and the next post arms R-CONN-6's timeout itself
// instead of a timer look. One message at a time (each ACK settles), a lost
// data packet and a lost ACK are still recovered by the send's own timer,
// and a post to a peer gone silent still fails the connection in time.
TEST_CASE("liveness: one message at a time, timers settled by each ACK: losses still recovered, a silent peer "
          "still fails the connection (R-CONN-6, R-TIMER-8)",
          "[engine][liveness]") {
    EngineConfig cfg;
    cfg.conn_timeout = 200'000'000;
    // Each message in a packet of its own (the test loses the second message's
    // packet alone): posted together, two WRITEs would share a WRITE_PACK (R-PACK-3).
    cfg.pack_writes = false;
    Side sa(cfg, 64 * 64), sb(cfg, 64 * 64);
    Engine &a = sa.eng, &b = sb.eng;
    PairLink link(a, b);
    uint32_t ca = 0, cb = 0;
    connect_stream(link, sa, sb, 1, ca, cb);
    auto &src = sa.mem, &dst = sb.mem;
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 7 + 1);
    const MrInfo &ms = sa.mr, &md = sb.mr;
    const uint32_t cqa = sa.cq;
    // Round r posts messages 2r and 2r + 1 together and waits for both.
    // Every 4th round loses its second data packet once (the first's ACK
    // then leaves it outstanding: its timer must stay), every 4th + 3 its
    // first ACK (the send's timer resends). 20 ms each: a resend is due
    // within a few RTOs, a timer lost to the settling would wait for a
    // keepalive's answer (50 ms) to bring a look.
    int round = 0, data_in_round = 0;
    bool lost_data = false, lost_ack = false;
    link.drop_if = [&](int from, const TxPacket& t) {
        if (from == 0 && t.hdr[1] == uint8_t(wire::PacketType::data) && ++data_in_round == 2 && round % 4 == 1) {
            lost_data = true;
            return true;
        }
        if (from == 1 && t.hdr[1] == uint8_t(wire::PacketType::ack) && round % 4 == 3 && !lost_ack) {
            lost_ack = true;
            return true;
        }
        return false;
    };
    for (round = 0; round < 32; ++round) {
        data_in_round = 0;
        lost_data = lost_ack = false;
        for (int m = 2 * round; m < 2 * round + 2; ++m) {
            SendWr w;
            w.wr_id = uint64_t(m);
            w.op = OpKind::write;
            w.local_addr = uint64_t(reinterpret_cast<uintptr_t>(src.data() + 64 * m));
            w.length = 64;
            w.lkey = ms.lkey;
            w.remote_addr = uint64_t(reinterpret_cast<uintptr_t>(dst.data() + 64 * m));
            w.rkey = md.rkey;
            w.signaled = true;
            REQUIRE(a.post_send(ca, 1, w) == Status::ok);
        }
        Completion c[4];
        size_t got = 0;
        REQUIRE(link.run([&] { return (got += a.poll_cq(cqa, c + got, 4 - got)) == 2; }, 20'000'000));
        for (size_t i = 0; i < 2; ++i) {
            REQUIRE(c[i].status == WcStatus::success);
            REQUIRE(c[i].wr_id == uint64_t(2 * round) + i);
        }
        REQUIRE(std::memcmp(dst.data() + 128 * round, src.data() + 128 * round, 128) == 0);
        if (round % 4 == 1) CHECK(lost_data);
        if (round % 4 == 3) CHECK(lost_ack);
        // Quiet in between: every timer the round armed comes due.
        link.run([] { return false; }, 5'000'000);
    }
    CHECK(a.conn_state(ca) == ConnState::established);
    // B goes silent: the next message's post must still bring R-CONN-6's timeout.
    link.drop_if = [](int from, const TxPacket&) { return from == 1; };
    SendWr w;
    w.op = OpKind::write;
    w.local_addr = uint64_t(reinterpret_cast<uintptr_t>(src.data()));
    w.length = 64;
    w.lkey = ms.lkey;
    w.remote_addr = uint64_t(reinterpret_cast<uintptr_t>(dst.data()));
    w.rkey = md.rkey;
    const Time t0 = link.now;
    REQUIRE(a.post_send(ca, 1, w) == Status::ok);
    REQUIRE(link.run([&] { return a.conn_state(ca) == ConnState::error; }, 1'000'000'000));
    CHECK(link.now - t0 <= cfg.conn_timeout + 10'000'000);
    ConnStats cs;
    REQUIRE(a.conn_stats(ca, cs) == Status::ok);
    CHECK(cs.error_cause == ConnErrorCause::peer_silent);
}

// Round 38: a post to an asleep connection arms R-CONN-6's timeout without
// placing the wheel node; the burst that sends the message places it once
// (at the send's timer, the earlier), and a burst with room only for an ACK
// leaves it armed and the connection on the ready list. Engine::self_check
// tests the kept timer state (a node on the wheel is due no later than the
// connection's timers; one not placed belongs to a connection on the ready
// list with its timeout kept; one whose timers matter has a node) at every
// step, and a peer gone silent still fails the connection in time.
TEST_CASE("liveness: a post to an asleep connection keeps its R-CONN-6 timeout through a burst without room "
          "for it, and each ACK settles the timers again (round 38)",
          "[engine][liveness]") {
    EngineConfig cfg;
    cfg.conn_timeout = 200'000'000;
    Side sa(cfg, 1 << 16), sb(cfg, 1 << 16);
    Engine &a = sa.eng, &b = sb.eng;
    PairLink link(a, b);
    uint32_t ca = 0, cb = 0;
    connect_stream(link, sa, sb, 1, ca, cb);
    size_t bad = 0;
    auto checked = [&](const std::function<bool()>& pred) {
        return [&, pred] {
            bad += a.self_check() + b.self_check();
            return pred();
        };
    };
    auto completions = [](Side& s) {
        Completion c[8];
        size_t n = 0;
        for (size_t k; (k = s.eng.poll_cq(s.cq, c, 8)) > 0; n += k)
            for (size_t i = 0; i < k; ++i) REQUIRE(c[i].status == WcStatus::success);
        return n;
    };
    // Messages alone: each post finds the connection asleep (its last ACK
    // took the node off the wheel), each ACK puts it to sleep again.
    link.run([] { return false; }, 5'000'000);
    for (int m = 0; m < 20; ++m) {
        REQUIRE(a.post_send(ca, 1, write_wr(sa, 64 * size_t(m), 64, sb, 64 * size_t(m), uint64_t(m))) == Status::ok);
        bad += a.self_check();
        CHECK(a.tx_pending(link.now));
        size_t got = 0;
        REQUIRE(link.run(checked([&] { return (got += completions(sa)) == 1; }), 20'000'000));
        link.run(checked([] { return false; }), 1'000'000);  // every timer the message armed comes due
    }
    // A's post first, then B's WRITE reaches A, then a burst of one packet:
    // the room is kept for the ACK, so the post's data waits for the next
    // burst with its timeout armed (the connection stays on the ready list).
    REQUIRE(b.post_send(cb, 1, write_wr(sb, 8192, 64, sa, 8192, 100)) == Status::ok);
    TxPacket out[8];
    REQUIRE(b.tx_burst(out, 8, link.now) == 1);
    std::vector<uint8_t> wire(out[0].hdr, out[0].hdr + out[0].hdr_len);
    wire.insert(wire.end(), out[0].payload, out[0].payload + out[0].payload_len);
    REQUIRE(a.post_send(ca, 1, write_wr(sa, 4096, 64, sb, 4096, 101)) == Status::ok);
    CHECK(a.self_check() == 0);
    RxPacket r;
    r.data = wire.data();
    r.len = uint32_t(wire.size());
    r.peer = 1;
    a.rx_burst(&r, 1, link.now);
    REQUIRE(a.tx_burst(out, 1, link.now) == 1);
    CHECK(out[0].hdr[1] == uint8_t(wire::PacketType::ack));
    CHECK(a.self_check() == 0);
    CHECK(a.tx_pending(link.now));  // the data, next burst
    CHECK(a.next_deadline(link.now) == link.now);
    link.send(0, out[0]);
    size_t got_a = 0, got_b = 0;
    REQUIRE(link.run(checked([&] {
                         got_a += completions(sa);
                         got_b += completions(sb);
                         return got_a == 1 && got_b == 1;
                     }),
                     20'000'000));
    CHECK(std::memcmp(sb.mem.data() + 4096, sa.mem.data() + 4096, 64) == 0);
    CHECK(std::memcmp(sa.mem.data() + 8192, sb.mem.data() + 8192, 64) == 0);
    link.run(checked([] { return false; }), 1'000'000);
    CHECK(bad == 0);
    // The same with B silent from then on: the post's data goes at the next
    // burst, is never acknowledged, and R-CONN-6 fails the connection in time.
    link.drop_if = [](int from, const TxPacket&) { return from == 1; };
    REQUIRE(b.post_send(cb, 1, write_wr(sb, 8192 + 64, 64, sa, 8192 + 64, 102)) == Status::ok);
    REQUIRE(b.tx_burst(out, 8, link.now) == 1);
    wire.assign(out[0].hdr, out[0].hdr + out[0].hdr_len);
    wire.insert(wire.end(), out[0].payload, out[0].payload + out[0].payload_len);
    const Time t0 = link.now;
    REQUIRE(a.post_send(ca, 1, write_wr(sa, 4096 + 64, 64, sb, 4096 + 64, 103)) == Status::ok);
    r.data = wire.data();
    r.len = uint32_t(wire.size());
    a.rx_burst(&r, 1, link.now);
    REQUIRE(a.tx_burst(out, 1, link.now) == 1);
    CHECK(out[0].hdr[1] == uint8_t(wire::PacketType::ack));
    CHECK(a.self_check() == 0);
    REQUIRE(link.run(checked([&] { return a.conn_state(ca) == ConnState::error; }), 1'000'000'000));
    CHECK(link.now - t0 <= cfg.conn_timeout + 10'000'000);
    CHECK(link.now - t0 >= cfg.conn_timeout - 10'000'000);
    ConnStats cs;
    REQUIRE(a.conn_stats(ca, cs) == Status::ok);
    CHECK(cs.error_cause == ConnErrorCause::peer_silent);
    CHECK(bad == 0);
}

TEST_CASE("probing: a failed path backs off, and revives within probe_max_interval (R-PATH-11)",
          "[engine][liveness]") {
    EngineConfig cfg;
    cfg.num_paths = 2;
    cfg.probe_interval = 1'000'000;
    cfg.probe_max_interval = 50'000'000;
    Side sa(cfg), sb(cfg);
    Engine &a = sa.eng, &b = sb.eng;
    PairLink link(a, b);
    uint32_t ca = 0, cb = 0;
    connect_stream(link, sa, sb, 1, ca, cb);
    auto &src = sa.mem, &dst = sb.mem;
    std::fill(src.begin(), src.end(), 7);
    const MrInfo &ms = sa.mr, &md = sb.mr;
    const uint32_t cqa = sa.cq;
    bool down = true;
    uint64_t probes_on_1 = 0;
    link.drop_if = [&](int from, const TxPacket& t) {
        if (from == 0 && t.path == 1 && is_probe(t) && probe_seq_of(t) != 0) ++probes_on_1;
        return down && from == 0 && t.path == 1;
    };
    SendWr w;
    w.op = OpKind::write;
    w.local_addr = uint64_t(reinterpret_cast<uintptr_t>(src.data()));
    w.length = uint32_t(src.size());
    w.lkey = ms.lkey;
    w.remote_addr = uint64_t(reinterpret_cast<uintptr_t>(dst.data()));
    w.rkey = md.rkey;
    // Traffic until the dead path is retired (R-PATH-9); every WRITE completes, byte-exact.
    PathStats ps;
    for (int round = 0; round < 100; ++round) {
        std::fill(dst.begin(), dst.end(), 0);
        REQUIRE(a.post_send(ca, 1, w) == Status::ok);
        Completion c[4];
        size_t got = 0;  // run() evaluates its predicate once more at the end: count, do not test the poll
        REQUIRE(link.run([&] { return (got += a.poll_cq(cqa, c, 4)) == 1; }, 1'000'000'000));
        REQUIRE(c[0].status == WcStatus::success);
        REQUIRE(dst == src);
        REQUIRE(a.path_stats(ca, 1, ps) == Status::ok);
        if (ps.state == PathStateKind::failed) break;
    }
    REQUIRE(ps.state == PathStateKind::failed);
    // One second failed: 1, 2, 4, ..., 32 ms, then every 50 ms: about 26 probes, not 1,000.
    probes_on_1 = 0;
    link.run([] { return false; }, 1'000'000'000);
    CHECK(probes_on_1 >= 15);
    CHECK(probes_on_1 <= 30);
    // Healed: back within one probe_max_interval (plus a round trip).
    down = false;
    const Time healed = link.now;
    REQUIRE(link.run([&] { return a.path_stats(ca, 1, ps) == Status::ok && ps.state == PathStateKind::active; },
                     1'000'000'000));
    CHECK(link.now - healed <= cfg.probe_max_interval + 1'000'000);
}

TEST_CASE("probing: the device's probe_rate bounds probes whatever the number of failed paths (R-PATH-14)",
          "[engine][liveness]") {
    EngineConfig cfg;
    cfg.num_paths = 4;
    cfg.probe_interval = 1'000'000;
    cfg.probe_max_interval = 100'000'000;
    cfg.probe_rate = 2000;
    cfg.stream_depth = 4;
    cfg.csn_window = 64;
    cfg.conn_timeout = 10'000'000'000;
    Engine a(cfg), b(cfg);
    PairLink link(a, b);
    constexpr int kConns = 200;
    std::vector<uint32_t> cb;
    const std::vector<uint32_t> ca = connect_many(link, a, b, kConns, &cb);
    uint32_t pda = a.alloc_pd(), pdb = b.alloc_pd(), cqa = 0, cqb = 0;
    REQUIRE(a.create_cq(4096, cqa) == Status::ok);
    REQUIRE(b.create_cq(4096, cqb) == Status::ok);
    std::vector<uint8_t> src(16384, 5), dst(size_t(kConns) * 16384, 0);
    MrInfo ms{}, md{};
    REQUIRE(a.register_mr(pda, src.data(), src.size(), kAccessLocalWrite, ms) == Status::ok);
    REQUIRE(b.register_mr(pdb, dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite, md) == Status::ok);
    // Every path of every connection dead (A's data and probes lost): 800 failed paths.
    bool down = true;
    uint64_t probes = 0;
    link.drop_if = [&](int from, const TxPacket& t) {
        if (from == 0 && is_probe(t)) ++probes;
        return down && from == 0;
    };
    for (int i = 0; i < kConns; ++i) {
        REQUIRE(a.create_stream(ca[size_t(i)], 1, pda, cqa, cqa) == Status::ok);
        REQUIRE(b.create_stream(cb[size_t(i)], 1, pdb, cqb, cqb) == Status::ok);
        SendWr w;
        w.wr_id = uint64_t(i);
        w.op = OpKind::write;
        w.local_addr = uint64_t(reinterpret_cast<uintptr_t>(src.data()));
        w.length = 16384;
        w.lkey = ms.lkey;
        w.remote_addr = uint64_t(reinterpret_cast<uintptr_t>(dst.data())) + uint64_t(i) * 16384;
        w.rkey = md.rkey;
        REQUIRE(a.post_send(ca[size_t(i)], 1, w) == Status::ok);
    }
    // Let every path fail, then count a second of probing.
    link.run([] { return false; }, 500'000'000);
    uint32_t failed = 0;
    for (uint32_t c : ca)
        for (uint16_t p = 0; p < 4; ++p) {
            PathStats ps;
            REQUIRE(a.path_stats(c, p, ps) == Status::ok);
            failed += ps.state == PathStateKind::failed;
        }
    CHECK(failed == 4 * kConns);
    probes = 0;
    const uint64_t deferred0 = a.stats().probes_deferred;
    link.run([] { return false; }, 1'000'000'000);
    // Without the budget: 800 paths at one probe per 100 ms at least = 8,000.
    CHECK(probes <= cfg.probe_rate + cfg.probe_rate / 10);
    CHECK(probes >= cfg.probe_rate / 2);
    CHECK(a.stats().probes_deferred > deferred0);
    // Healed: every transfer completes, byte-exact.
    down = false;
    int done = 0;
    REQUIRE(link.run(
        [&] {
            Completion c[64];
            for (size_t n = a.poll_cq(cqa, c, 64), i = 0; i < n; ++i) {
                CHECK(c[i].status == WcStatus::success);
                ++done;
            }
            return done == kConns;
        },
        5'000'000'000));
    for (int i = 0; i < kConns; ++i) REQUIRE(std::memcmp(dst.data() + size_t(i) * 16384, src.data(), 16384) == 0);
}
