// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// A ping-pong (mroce-perf --lat's 8-byte WRITEs) over small send queues with
// exactly chosen ACKs lost or delayed: a lone packet's lost ACK, and its
// probe's, must cost round trips, not an RTO (doc/spec.md R-TIMER-8,
// R-TIMER-9, R-ACK-4, R-CSN-6; issue 24, latency).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "engine_fixture.hpp"

using namespace mroce;
using mroce::test::Fixture;
using mroce::test::Side;

namespace {

bool is_ack(const TxPacket& t) { return t.hdr[1] == uint8_t(wire::PacketType::ack); }

// Client A writes ping k (the value k + 1) into B's word 0; B answers each
// ping by writing the same value into A's word 8. Sources rotate over 512
// slots so a WRITE's bytes stay put while it may be resent. Either end waits
// while its send queue is full, as mroce-perf --lat does.
struct PingPong {
    Fixture& f;
    uint32_t pings = 0;         // pings posted
    uint32_t pongs = 0;         // pongs posted
    uint32_t answered = 0;      // pongs seen by the client
    bool ping_waits = false;    // the next ping could not be posted yet (queue full)
    Time started = 0;           // when the round trip in progress began
    std::vector<Time> rtt;      // per round trip
    std::vector<Time> posted;   // per ping: when it was posted
    std::vector<Time> done;     // per ping: when its completion came (0: not yet)
    explicit PingPong(Fixture& fx) : f(fx) {}

    static uint64_t word(const Side& s, size_t off) {
        uint64_t v;
        std::memcpy(&v, s.mem.data() + off, 8);
        return v;
    }
    static Status write(Side& s, uint32_t conn, const Side& to, size_t to_off, uint32_t seq) {
        const size_t src = 4096 + 8 * (seq % 512);
        const uint64_t v = uint64_t(seq) + 1;
        std::memcpy(s.mem.data() + src, &v, 8);
        return s.eng.post_send(conn, 7, write_wr(s, src, 8, to, to_off, seq));
    }
    void post_ping() {
        const Status st = write(f.a, f.ca, f.b, 0, pings);
        REQUIRE((st == Status::ok || st == Status::queue_full));
        ping_waits = st != Status::ok;
        if (st == Status::ok) {
            posted.push_back(f.link.now);
            done.push_back(0);
            ++pings;
        }
    }
    // One look at both ends, as their poll loops would take.
    bool step(uint32_t n) {
        Completion c[16];
        size_t k;
        while ((k = f.a.eng.poll_cq(f.a.cq, c, 16)) > 0)
            for (size_t i = 0; i < k; ++i) {
                REQUIRE(c[i].status == WcStatus::success);
                done[c[i].wr_id] = f.link.now;
            }
        while ((k = f.b.eng.poll_cq(f.b.cq, c, 16)) > 0)
            for (size_t i = 0; i < k; ++i) REQUIRE(c[i].status == WcStatus::success);
        if (pongs < pings && word(f.b, 0) == uint64_t(pongs) + 1) {
            const Status st = write(f.b, f.cb, f.a, 8, pongs);
            REQUIRE((st == Status::ok || st == Status::queue_full));
            if (st == Status::ok) ++pongs;
        }
        if (answered < pings && word(f.a, 8) == uint64_t(answered) + 1) {
            ++answered;
            rtt.push_back(f.link.now - started);
            if (answered < n) {
                started = f.link.now;
                post_ping();
            }
        } else if (ping_waits) {
            post_ping();
        }
        return answered >= n;
    }
    bool run(uint32_t n, Time limit = 100'000'000) {
        if (pings == answered) {  // nothing in flight: the next round trip starts now
            started = f.link.now;
            post_ping();
        }
        return f.link.run([&] { return step(n); }, limit);
    }
};

// Equal windows on every path (a lone packet never grows one), so with equal
// delays the scheduler sprays the pings round-robin over the four paths, as
// over loopback UDP, where R-SCHED-2's scores stay about equal.
EngineConfig lat_config(uint32_t depth) {
    EngineConfig cfg;
    cfg.stream_depth = depth;
    cfg.cc.max_cwnd = 4;
    return cfg;
}

uint32_t be32(const TxPacket& t, int o) {
    return (uint32_t(t.hdr[o]) << 24) | (uint32_t(t.hdr[o + 1]) << 16) | (uint32_t(t.hdr[o + 2]) << 8) | t.hdr[o + 3];
}
bool is_data(const TxPacket& t) { return t.hdr_len == wire::kDataLen && t.hdr[1] == uint8_t(wire::PacketType::data); }

// What A's paths counted, summed over the four.
struct Counts {
    uint64_t probes = 0, silences = 0, timeouts = 0, rerouted = 0, retransmits = 0;
};
Counts counts(Fixture& fx) {
    Counts n;
    for (uint16_t pi = 0; pi < 4; ++pi) {
        PathStats ps;
        REQUIRE(fx.a.eng.path_stats(fx.ca, pi, ps) == Status::ok);
        n.probes += ps.tail_probes;
        n.silences += ps.silences;
        n.timeouts += ps.timeouts;
        n.rerouted += ps.rerouted;
        n.retransmits += ps.retransmits;
    }
    return n;
}

// Ping K's first transmission, and then K's next transmission (its tail-loss
// probe or its resend, whichever goes first), each have the first ACK of B's
// on their path that covers them hit: dropped, or held back by `delay`.
struct HitAcks {
    int state = 0;  // 0: waiting for K; 1: K sent; 2: its ACK hit; 3: K sent again; 4: that ACK hit
    uint16_t path = 0;
    uint32_t psn = 0, csn = 0;
    uint64_t hit = 0;
    // Called for every packet sent; true: this is an ACK to hit.
    bool operator()(int side, const TxPacket& t, bool armed) {
        if (side == 0 && is_data(t) && armed && (state == 0 || (state == 2 && be32(t, 20) == csn))) {
            path = t.path;
            psn = be32(t, 16);
            csn = be32(t, 20);
            ++state;
            return false;
        }
        if (side == 1 && is_ack(t) && (state == 1 || state == 3) && t.path == path && wire::seq_lt(psn, be32(t, 16))) {
            ++state;
            ++hit;
            return true;
        }
        return false;
    }
};

}  // namespace

// R-TIMER-9 and R-TIMER-8 together: ping K's ACK is lost; ping K+1 (another
// path) is acknowledged, so K's path is silent and K is resent; that resend's
// ACK (or the tail-loss probe's) is lost too. Before, the second silence came
// while the path's probe was still in flight, a timeout that retired a
// healthy path (R-PATH-9): two lost ACKs cost a route, its probes and a
// resend. Now the silence waits for the probe's answer, which completes K.
TEST_CASE("a ping whose ACK and whose resend's ACK are lost completes in a few round trips, no path retired "
          "(R-TIMER-8, R-TIMER-9)",
          "[engine][timer][tlp][silence][pingpong]") {
    const uint32_t depth = GENERATE(2u, 3u, 5u);
    const Time skew = GENERATE(Time(0), Time(700));
    INFO("send queues of " << depth << ", path skew " << skew);
    Fixture fx(lat_config(depth));
    fx.link.per_path_skew = skew;
    PingPong pp(fx);
    // Every path gets its own RTT samples first (R-TIMER-8/9 wait for them).
    REQUIRE(pp.run(64));
    const Time base = *std::max_element(pp.rtt.begin(), pp.rtt.end());
    const Counts before = counts(fx);
    REQUIRE(before.timeouts == 0);
    const uint32_t K = pp.pings;  // the next ping posted
    HitAcks hit;
    fx.link.drop_if = [&](int side, const TxPacket& t) { return hit(side, t, pp.pings > K); };
    REQUIRE(pp.run(64 + 16));
    const Counts n = counts(fx);
    Time worst = 0;
    std::string trace;
    for (size_t i = 64; i < pp.rtt.size(); ++i) {
        worst = std::max(worst, pp.rtt[i]);
        trace += std::to_string(pp.rtt[i]) + " ";
    }
    const Time k_done = pp.done[K] - pp.posted[K];
    INFO("loss-free round trip at most " << base << " ns; after K: " << trace << "; ping K completed after "
                                         << k_done << " ns; A: probes " << n.probes - before.probes << ", silences "
                                         << n.silences - before.silences << ", timeouts " << n.timeouts
                                         << ", rerouted " << n.rerouted << ", retransmits "
                                         << n.retransmits - before.retransmits);
    REQUIRE(hit.hit == 2);
    CHECK(n.timeouts == 0);  // before: 1 (depths 3 and 5), the path retired
    CHECK(n.rerouted == before.rerouted);
    // K waits for two lost ACKs: five round trips here (the evidence of K+1's
    // ACK, the resend, its probe 2 srtt later, the probe's ACK), far below the RTO.
    CHECK(k_done <= 6 * base);
    CHECK(k_done < fx.cfg.min_rto / 4);
    CHECK(worst <= 6 * base);
    CHECK(n.silences - before.silences <= 1);
    CHECK(n.probes - before.probes <= 2);
    // The bytes landed: B's word holds the last ping, A's the last pong.
    CHECK(PingPong::word(fx.b, 0) == uint64_t(pp.pings));
    CHECK(PingPong::word(fx.a, 8) == uint64_t(pp.pings));
}

// R-TIMER-8's second probe of a lone packet: one path, so no sibling's ACK
// is evidence (R-TIMER-9 cannot apply), and a send queue of one WR, so no
// later ping (whose ACK would cover K's on the same path) can go before K
// completes: K's pong comes, but K's ACK and its probe's ACK are lost.
// Before, only the RTO (min_rto, 25 round trips here) was left.
TEST_CASE("one path: a ping whose ACK and whose probe's ACK are lost is probed again, not left to the RTO "
          "(R-TIMER-8)",
          "[engine][timer][tlp][pingpong]") {
    EngineConfig cfg = lat_config(1);
    cfg.num_paths = 1;
    Fixture fx(cfg);
    PingPong pp(fx);
    REQUIRE(pp.run(64));
    const Time base = *std::max_element(pp.rtt.begin(), pp.rtt.end());
    const uint32_t K = pp.pings;
    HitAcks hit;
    fx.link.drop_if = [&](int side, const TxPacket& t) { return hit(side, t, pp.pings > K); };
    REQUIRE(pp.run(64 + 16));
    PathStats ps;
    REQUIRE(fx.a.eng.path_stats(fx.ca, 0, ps) == Status::ok);
    const Time k_done = pp.done[K] - pp.posted[K];
    Time worst = 0;
    for (size_t i = 64; i < pp.rtt.size(); ++i) worst = std::max(worst, pp.rtt[i]);
    INFO("round trip " << base << " ns; ping K completed after " << k_done << " ns, worst round trip " << worst
                       << " ns; probes " << ps.tail_probes << ", timeouts " << ps.timeouts);
    REQUIRE(hit.hit == 2);
    CHECK(ps.timeouts == 0);  // before: 1, K complete after min_rto
    CHECK(k_done <= 7 * base);
    CHECK(k_done < fx.cfg.min_rto / 4);
    CHECK(worst <= 7 * base);
    CHECK(PingPong::word(fx.b, 0) == uint64_t(pp.pings));
    CHECK(PingPong::word(fx.a, 8) == uint64_t(pp.pings));
}

// The same ACKs held back instead of lost (reordering of ACKs against data on
// the other paths): what R-TIMER-9 and R-TIMER-8 may spend on a late ACK is
// two copies of K (the resend at the silence and a probe, or two probes of
// a lone packet), never a timeout or a retired path, and nothing at all while
// the ACK is less than half a round trip late.
TEST_CASE("a ping whose ACKs are late, not lost, costs at most a resend and a probe (R-TIMER-8, R-TIMER-9)",
          "[engine][timer][tlp][silence][pingpong]") {
    const uint32_t depth = GENERATE(2u, 3u, 7u);
    const Time late = GENERATE(Time(1000), Time(6000), Time(12000), Time(40000));
    INFO("send queues of " << depth << ", ACKs late by " << late << " ns");
    Fixture fx(lat_config(depth));
    fx.link.per_path_skew = 0;
    PingPong pp(fx);
    REQUIRE(pp.run(64));
    const Time base = *std::max_element(pp.rtt.begin(), pp.rtt.end());
    const Counts before = counts(fx);
    ConnStats sb0;
    REQUIRE(fx.b.eng.conn_stats(fx.cb, sb0) == Status::ok);
    const uint32_t K = pp.pings;
    HitAcks hit;
    fx.link.delay_if = [&](int side, const TxPacket& t) -> Time { return hit(side, t, pp.pings > K) ? late : 0; };
    REQUIRE(pp.run(64 + 16));
    const Counts n = counts(fx);
    ConnStats sb;
    REQUIRE(fx.b.eng.conn_stats(fx.cb, sb) == Status::ok);
    const uint64_t dups = sb.duplicates - sb0.duplicates;
    INFO("round trip " << base << " ns; ping K completed after " << pp.done[K] - pp.posted[K]
                       << " ns; A: probes " << n.probes - before.probes << ", silences "
                       << n.silences - before.silences << ", timeouts " << n.timeouts << "; duplicates at B " << dups);
    CHECK(hit.hit >= 1);
    CHECK(n.timeouts == 0);
    CHECK(n.rerouted == before.rerouted);
    CHECK(dups <= 2);
    if (late < base / 2) CHECK(dups == 0);
    CHECK(pp.done[K] - pp.posted[K] <= late + 6 * base);
    CHECK(PingPong::word(fx.b, 0) == uint64_t(pp.pings));
    CHECK(PingPong::word(fx.a, 8) == uint64_t(pp.pings));
}

// Not a check: the figures of doc/performance.md 7.3 round 31, the ping-pong
// at 5% loss of every packet both ways (PairLink's seeded loss), in virtual
// time. Run: test_engine "[.pingpong-loss]" -s
TEST_CASE("ping-pong latency at 5% loss, virtual time", "[.pingpong-loss]") {
    const uint32_t depth = GENERATE(2u, 256u);
    const uint64_t seed = GENERATE(1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u);
    Fixture fx(lat_config(depth));
    fx.link.per_path_skew = 0;
    PingPong pp(fx);
    REQUIRE(pp.run(64));
    const Counts c0 = counts(fx);
    fx.link.rng = mroce::test::SplitMix{seed};
    fx.link.loss = 0.05;
    const size_t from = pp.rtt.size();
    REQUIRE(pp.run(64 + 3000, 10'000'000'000));
    std::vector<Time> r(pp.rtt.begin() + long(from), pp.rtt.end());
    std::sort(r.begin(), r.end());
    auto pct = [&](double q) { return double(r[std::min(r.size() - 1, size_t(q * double(r.size())))]) / 1e3; };
    const Counts c = counts(fx);
    ConnStats sb;
    REQUIRE(fx.b.eng.conn_stats(fx.cb, sb) == Status::ok);
    WARN("depth " << depth << " seed " << seed << ": rtt us p50 " << pct(0.5) << " p90 " << pct(0.9) << " p99 "
                  << pct(0.99) << " p99.9 " << pct(0.999) << " max " << double(r.back()) / 1e3 << "; A: probes "
                  << c.probes - c0.probes << " silences " << c.silences - c0.silences << " timeouts "
                  << c.timeouts - c0.timeouts << " rerouted " << c.rerouted - c0.rerouted << " retransmits "
                  << c.retransmits - c0.retransmits << "; B duplicates " << sb.duplicates);
    CHECK(PingPong::word(fx.a, 8) == uint64_t(pp.pings));
}
