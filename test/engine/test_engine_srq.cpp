// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Shared receive queues (doc/spec.md R-SRQ-*): streams of two connections
// consume one receive queue; a multi-packet SEND whose packets arrive out of
// order binds to exactly one entry; RNR when it is empty; limit events; what
// happens to bound entries when a message fails or a stream errors.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "stream_fixture.hpp"

using namespace mroce;
using mroce::test::fill_pattern;
using mroce::test::SplitMix;
using mroce::test::StreamPair;

namespace {

constexpr uint32_t kEntry = 4096;  // every SRQ entry's buffer

size_t drain_events(Engine& e, std::vector<ConnEvent>& out) {
    ConnEvent ev[8];
    size_t n, total = 0;
    while ((n = e.poll_events(ev, 8)) > 0) {
        out.insert(out.end(), ev, ev + n);
        total += n;
    }
    return total;
}

}  // namespace

TEST_CASE("srq: 8 streams on two connections share one SRQ; out-of-order multi-packet SENDs each bind one entry "
          "(R-SRQ-1..4, R-CMPL-3)",
          "[engine][srq]") {
    const bool deferred = GENERATE(false, true);
    EngineConfig cfg;
    cfg.max_payload = 512;  // messages of 1..7 packets
    cfg.num_paths = 4;
    cfg.deferred_placement = deferred;
    cfg.place_inline_max = 64;
    StreamPair p(cfg, 4 << 20, deferred ? 11 : 12);
    if (deferred) {
        p.link.enable_pipeline(0);
        p.link.enable_pipeline(1);
    }
    // A second connection between the same engines.
    uint32_t ca2 = 0, cb2 = 0;
    REQUIRE(mroce::test::connect_pair(p.link, ca2, cb2));
    p.link.loss = 0.05;
    p.link.dup = 0.03;
    p.link.per_path_skew = 3000;  // packets of one message overtake each other across paths
    uint32_t srq = 0;
    REQUIRE(p.b.eng.create_srq(p.b.pd, 48, srq) == Status::ok);
    const uint32_t conn_a[8] = {p.ca, p.ca, p.ca, p.ca, ca2, ca2, ca2, ca2};
    const uint32_t conn_b[8] = {p.cb, p.cb, p.cb, p.cb, cb2, cb2, cb2, cb2};
    for (uint32_t s = 0; s < 8; ++s) {
        StreamAttr sb = p.b.attr();
        sb.srq = srq;
        REQUIRE(p.a.eng.create_stream(conn_a[s], 100 + s, p.a.attr()) == Status::ok);
        REQUIRE(p.b.eng.create_stream(conn_b[s], 100 + s, sb) == Status::ok);
    }
    CHECK(p.b.eng.post_recv(conn_b[0], 100, p.b.recv(0, 0, 8)) == Status::invalid_argument);  // the SRQ's
    CHECK(p.b.eng.destroy_srq(srq) == Status::bad_state);

    // Entries: wr_ids 0, 1, 2, ... (each posted once), in 12 buffers of B's;
    // a completed entry's buffer serves the next one posted.
    uint64_t next_entry = 0;
    std::map<uint64_t, size_t> buf_of;
    auto post_entry = [&](size_t buf) {
        std::memset(p.b.mem.data() + buf, 0xA5, kEntry);
        buf_of[next_entry] = buf;
        REQUIRE(p.b.eng.post_srq_recv(srq, p.b.recv(next_entry, buf, kEntry)) == Status::ok);
        ++next_entry;
    };
    // Start with fewer entries than messages in flight: RNR (R-SEND-4, R-NAK-10) until reposted.
    for (size_t i = 0; i < 12; ++i) post_entry(i * kEntry);

    // 30 messages per stream: SEND / SEND_IMM of 0..3500 bytes, every 5th a WRITE_IMM.
    struct Msg {
        uint32_t len;
        OpKind op;
        size_t src;
    };
    constexpr uint32_t kPer = 30;
    std::vector<std::vector<Msg>> msgs(8);
    SplitMix rng(77);
    size_t src = 0;
    for (uint32_t s = 0; s < 8; ++s)
        for (uint32_t k = 0; k < kPer; ++k) {
            Msg m;
            m.len = uint32_t(rng.next() % 3501);
            m.op = k % 5 == 4 ? OpKind::write_imm : (k % 3 ? OpKind::send : OpKind::send_imm);
            m.src = src;
            fill_pattern(p.a.mem, src, m.len, s * 1000 + k);
            src += 3504;
            msgs[s].push_back(m);
        }
    uint32_t posted[8] = {};
    auto post_sends = [&] {
        for (uint32_t s = 0; s < 8; ++s)
            while (posted[s] < kPer) {
                const Msg& m = msgs[s][posted[s]];
                SendWr w = p.a.wr(s * 1000 + posted[s], m.op, m.src, m.len, p.b.addr((3u << 20) + m.src), p.b.mr.rkey);
                w.imm = s * 1000 + posted[s];
                if (p.a.eng.post_send(conn_a[s], 100 + s, w) != Status::ok) break;
                ++posted[s];
            }
    };

    uint32_t done[8] = {};
    std::set<uint64_t> consumed;
    auto untouched = [](const uint8_t* buf, uint32_t from) {
        for (uint32_t i = from; i < kEntry; ++i)
            if (buf[i] != 0xA5) return false;
        return true;
    };
    size_t checked = 0;
    uint64_t a_done = 0;
    const bool finished = p.run([&] {
        post_sends();
        for (; checked < p.b.got.size(); ++checked) {
            const Completion& c = p.b.got[checked];
            REQUIRE(c.status == WcStatus::success);
            const uint32_t s = c.stream - 100;
            REQUIRE(s < 8);
            REQUIRE(c.conn == conn_b[s]);
            const uint32_t k = done[s]++;  // R-CMPL-3: the stream's k-th receive completion is its k-th message
            REQUIRE(k < kPer);
            const Msg& m = msgs[s][k];
            REQUIRE(c.byte_len == m.len);
            REQUIRE(consumed.insert(c.wr_id).second);  // each entry consumed once
            REQUIRE(c.wr_id < next_entry);
            const size_t at = buf_of.at(c.wr_id);
            const uint8_t* buf = p.b.mem.data() + at;
            if (m.op == OpKind::write_imm) {
                REQUIRE(c.opcode == WcOpcode::recv_write_imm);
                REQUIRE(c.imm == s * 1000 + k);
                REQUIRE(std::memcmp(p.b.mem.data() + (3u << 20) + m.src, p.a.mem.data() + m.src, m.len) == 0);
                REQUIRE(untouched(buf, 0));  // its buffer is not written (R-SEND-8)
            } else {
                REQUIRE(c.opcode == WcOpcode::recv);
                REQUIRE(c.has_imm == (m.op == OpKind::send_imm));
                REQUIRE(std::memcmp(buf, p.a.mem.data() + m.src, m.len) == 0);
                REQUIRE(untouched(buf, m.len));
            }
            post_entry(at);  // keeps 12 entries posted or taken
        }
        a_done = p.a.got.size();
        return checked == 8 * kPer && a_done == 8 * kPer;
    }, 5'000'000'000);
    INFO("b completions " << checked << ", a completions " << a_done << ", entries posted " << next_entry);
    for (uint32_t s = 0; s < 8; ++s) INFO("stream " << s << ": posted " << posted[s] << " received " << done[s]);
    REQUIRE(finished);
    for (const Completion& c : p.a.got) REQUIRE(c.status == WcStatus::success);
    ConnStats cs{};
    p.b.eng.conn_stats(p.cb, cs);
    ConnStats cs2{};
    p.b.eng.conn_stats(cb2, cs2);
    CHECK(cs.rnr_drops + cs2.rnr_drops > 0);  // the SRQ ran empty and messages waited (R-SEND-4)
    CHECK(consumed.size() == 8 * kPer);
    uint32_t left = 0;
    REQUIRE(p.b.eng.srq_posted(srq, left) == Status::ok);
    CHECK(left == next_entry - consumed.size());
    CHECK(p.b.eng.stats().rx_stale == 0);
}

TEST_CASE("srq: the limit event fires once per arming when the posted entries drop below it (R-SRQ-5)",
          "[engine][srq]") {
    EngineConfig cfg;
    StreamPair p(cfg);
    uint32_t srq = 0;
    REQUIRE(p.b.eng.create_srq(p.b.pd, 16, srq) == Status::ok);
    StreamAttr sb = p.b.attr();
    sb.srq = srq;
    REQUIRE(p.a.eng.create_stream(p.ca, 1, p.a.attr()) == Status::ok);
    REQUIRE(p.b.eng.create_stream(p.cb, 1, sb) == Status::ok);
    for (uint32_t i = 0; i < 10; ++i) REQUIRE(p.b.eng.post_srq_recv(srq, p.b.recv(i, i * kEntry, kEntry)) == Status::ok);
    CHECK(p.b.eng.arm_srq_limit(srq, 17) == Status::invalid_argument);
    CHECK(p.b.eng.arm_srq_limit(srq + 1, 1) == Status::no_such_object);
    REQUIRE(p.b.eng.arm_srq_limit(srq, 6) == Status::ok);
    std::vector<ConnEvent> ev;
    uint64_t id = 0;
    auto send = [&](uint32_t n) {
        const size_t before = p.b.got.size();
        for (uint32_t i = 0; i < n; ++i) REQUIRE(p.a.eng.post_send(p.ca, 1, p.a.wr(id++, OpKind::send, 0, 100)) == Status::ok);
        REQUIRE(p.run([&] { return p.b.got.size() >= before + n; }));
        drain_events(p.b.eng, ev);
    };
    auto posted = [&] {
        uint32_t n = 0;
        REQUIRE(p.b.eng.srq_posted(srq, n) == Status::ok);
        return n;
    };
    send(4);  // 6 left: not below 6
    CHECK(posted() == 6);
    CHECK(ev.empty());
    send(1);  // 5 < 6: the event, once
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].kind == EventKind::srq_limit);
    CHECK(ev[0].srq == srq);
    CHECK(ev[0].conn == 0);
    send(2);  // disarmed: nothing more
    CHECK(ev.size() == 1);
    CHECK(posted() == 3);
    // Armed above the current count: the next entry taken fires it.
    REQUIRE(p.b.eng.arm_srq_limit(srq, 8) == Status::ok);
    drain_events(p.b.eng, ev);
    CHECK(ev.size() == 1);
    send(1);
    REQUIRE(ev.size() == 2);
    CHECK(ev[1].kind == EventKind::srq_limit);
    // Disarmed with 0.
    for (uint32_t i = 10; i < 20; ++i) REQUIRE(p.b.eng.post_srq_recv(srq, p.b.recv(i, (i % 16) * kEntry, kEntry)) == Status::ok);
    REQUIRE(p.b.eng.arm_srq_limit(srq, 11) == Status::ok);
    REQUIRE(p.b.eng.arm_srq_limit(srq, 0) == Status::ok);
    send(3);
    CHECK(ev.size() == 2);
    // queue_full: 16 entries posted or taken.
    CHECK(posted() == 9);
    for (uint32_t i = 0; i < 7; ++i) REQUIRE(p.b.eng.post_srq_recv(srq, p.b.recv(100 + i, 0, kEntry)) == Status::ok);
    CHECK(p.b.eng.post_srq_recv(srq, p.b.recv(200, 0, kEntry)) == Status::queue_full);
}

TEST_CASE("srq: a failed message's entry, the stream's other bound entries and the shared ones (R-SRQ-4)",
          "[engine][srq]") {
    EngineConfig cfg;
    cfg.max_payload = 1024;
    cfg.num_paths = 1;
    StreamPair p(cfg);
    uint32_t srq = 0;
    REQUIRE(p.b.eng.create_srq(p.b.pd, 32, srq) == Status::ok);
    StreamAttr sb = p.b.attr();
    sb.srq = srq;
    for (uint32_t s = 1; s <= 3; ++s) {
        REQUIRE(p.a.eng.create_stream(p.ca, s, p.a.attr()) == Status::ok);
        REQUIRE(p.b.eng.create_stream(p.cb, s, sb) == Status::ok);
    }
    for (uint32_t i = 0; i < 10; ++i) REQUIRE(p.b.eng.post_srq_recv(srq, p.b.recv(i, i * kEntry, 2000)) == Status::ok);
    fill_pattern(p.a.mem, 0, 3000, 1);

    SECTION("a SEND longer than its entry: loc_len_err on that entry, the stream's later bound entries flushed") {
        // Stream 1: msg 0 (held back, so msgs 1, 2 arrive first), msg 1, msg 2 too long for its entry.
        bool hold = true;
        p.link.drop_if = [&](int from, const TxPacket& t) {
            if (from != 0 || !t.ect || t.payload_len == 0 || !hold) return false;
            const uint32_t msg = uint32_t(t.hdr[32]) << 24 | uint32_t(t.hdr[33]) << 16 | uint32_t(t.hdr[34]) << 8 | t.hdr[35];
            const uint32_t sid = uint32_t(t.hdr[31]);
            return sid == 1 && msg == 0;
        };
        REQUIRE(p.a.eng.post_send(p.ca, 1, p.a.wr(10, OpKind::send, 0, 1500)) == Status::ok);
        REQUIRE(p.a.eng.post_send(p.ca, 1, p.a.wr(11, OpKind::send, 0, 700)) == Status::ok);
        REQUIRE(p.a.eng.post_send(p.ca, 1, p.a.wr(12, OpKind::send, 0, 3000)) == Status::ok);  // > 2000
        p.run([] { return false; }, 2'000'000);
        CHECK(p.b.got.empty());  // msg 0 has not arrived: nothing completes (R-CMPL-3)
        uint32_t n = 0;
        p.b.eng.srq_posted(srq, n);
        CHECK(n == 7);  // msg 1 bound entries for recv_seq 0 (msg 0, still on its way) and 1; msg 2 one
        hold = false;
        REQUIRE(p.run([&] { return p.b.got.size() >= 3 && p.a.got.size() >= 3; }));
        // In msg_seq order, each with the entry of its recv_seq.
        CHECK(p.b.got[0].status == WcStatus::success);
        CHECK(p.b.got[0].wr_id == 0);
        CHECK(std::memcmp(p.b.mem.data(), p.a.mem.data(), 1500) == 0);
        CHECK(p.b.got[1].status == WcStatus::success);
        CHECK(p.b.got[1].wr_id == 1);
        CHECK(std::memcmp(p.b.mem.data() + kEntry, p.a.mem.data(), 700) == 0);
        CHECK(p.b.got[2].status == WcStatus::loc_len_err);
        CHECK(p.b.got[2].wr_id == 2);
        CHECK(p.a.got[0].status == WcStatus::success);
        CHECK(p.a.got[1].status == WcStatus::success);
        CHECK(p.a.got[2].status == WcStatus::rem_inv_req_err);
        p.b.eng.srq_posted(srq, n);
        CHECK(n == 7);  // the other entries stay for streams 2 and 3
    }
    SECTION("ERROR on demand flushes the entries the stream's incomplete messages took, and only those") {
        // Stream 1's msg 0 is held back: msgs 1, 2 bind and wait for it.
        bool hold = true;
        p.link.drop_if = [&](int from, const TxPacket& t) {
            if (from != 0 || !t.ect || t.payload_len == 0 || !hold) return false;
            const uint32_t msg = uint32_t(t.hdr[35]);
            return t.hdr[31] == 1 && msg == 0;
        };
        for (uint32_t k = 0; k < 3; ++k) REQUIRE(p.a.eng.post_send(p.ca, 1, p.a.wr(20 + k, OpKind::send, 0, 600)) == Status::ok);
        REQUIRE(p.a.eng.post_send(p.ca, 2, p.a.wr(30, OpKind::send, 0, 900)) == Status::ok);
        p.run([&] { return p.b.got.size() >= 1; }, 5'000'000);
        REQUIRE(p.b.got.size() == 1);  // stream 1 bound entries 0..2 (msg 0's too), stream 2's message entry 3
        CHECK(p.b.got[0].stream == 2);
        CHECK(p.b.got[0].wr_id == 3);
        REQUIRE(p.b.eng.set_stream_error(p.cb, 1) == Status::ok);
        p.b.poll();
        REQUIRE(p.b.got.size() == 4);
        for (uint32_t i = 0; i < 3; ++i) {  // in recv_seq order, msg 0's that never arrived included
            CHECK(p.b.got[1 + i].wr_id == i);
            CHECK(p.b.got[1 + i].status == WcStatus::wr_flush_err);
            CHECK(p.b.got[1 + i].stream == 1);
        }
        uint32_t n = 0;
        p.b.eng.srq_posted(srq, n);
        CHECK(n == 6);
        // Stream 3 still takes the next entries.
        hold = false;
        REQUIRE(p.a.eng.post_send(p.ca, 3, p.a.wr(40, OpKind::send, 1000, 1800)) == Status::ok);
        REQUIRE(p.run([&] { return p.b.got.size() >= 5; }));
        CHECK(p.b.got[4].stream == 3);
        CHECK(p.b.got[4].wr_id == 4);
        CHECK(p.b.got[4].status == WcStatus::success);
        CHECK(std::memcmp(p.b.mem.data() + 4 * kEntry, p.a.mem.data() + 1000, 1800) == 0);
        // Destroying an SRQ stream returns nothing; the SRQ goes once no stream uses it.
        for (uint32_t s = 1; s <= 3; ++s) REQUIRE(p.b.eng.destroy_stream(p.cb, s) == Status::ok);
        REQUIRE(p.b.eng.destroy_srq(srq) == Status::ok);
        CHECK(p.b.eng.post_srq_recv(srq, p.b.recv(0, 0, 8)) == Status::no_such_object);
    }
}

TEST_CASE("srq: entries with scatter/gather lists take out-of-order multi-packet SENDs (R-SRQ-2, R-SGE-*)",
          "[engine][srq][sge]") {
    EngineConfig cfg;
    cfg.max_payload = 512;
    cfg.max_recv_sge = 5;
    StreamPair p(cfg, 1 << 20, 21);
    p.link.loss = 0.05;
    p.link.per_path_skew = 3000;
    uint32_t srq = 0;
    REQUIRE(p.b.eng.create_srq(p.b.pd, 7, srq) == Status::ok);  // not a power of two
    StreamAttr sb = p.b.attr();
    sb.srq = srq;
    for (uint32_t s = 1; s <= 2; ++s) {
        REQUIRE(p.a.eng.create_stream(p.ca, s, p.a.attr()) == Status::ok);
        REQUIRE(p.b.eng.create_stream(p.cb, s, sb) == Status::ok);
    }
    // An entry: five pieces of 300, 1, 700, 64, 1000 bytes, 17 bytes apart, in
    // one of 7 buffers of 10000 (a completed entry's buffer serves the next).
    const uint32_t piece[5] = {300, 1, 700, 64, 1000};
    std::map<uint64_t, size_t> buf_of;
    auto post = [&](uint64_t k, size_t buf) {
        Sge l[5];
        buf_of[k] = buf;
        size_t off = buf * 10000;
        std::memset(p.b.mem.data() + off, 0xEE, 10000);
        for (int i = 0; i < 5; ++i) {
            l[i] = Sge{p.b.addr(off), piece[i], p.b.mr.lkey};
            off += piece[i] + 17;
        }
        RecvWr r;
        r.wr_id = k;
        r.sg_list = l;
        r.num_sge = 5;
        REQUIRE(p.b.eng.post_srq_recv(srq, r) == Status::ok);
    };
    uint64_t posted = 0;
    for (; posted < 7; ++posted) post(posted, posted);
    Sge bad[2] = {Sge{p.b.addr(), 8, p.b.mr.lkey}, Sge{p.b.addr(), 8, p.b.mr.lkey}};
    RecvWr toolong;
    toolong.sg_list = bad;
    toolong.num_sge = 6;  // above max_recv_sge
    CHECK(p.b.eng.post_srq_recv(srq, toolong) == Status::queue_full);  // full first
    constexpr uint32_t kMsgs = 24;
    fill_pattern(p.a.mem, 0, kMsgs * 2100, 9);
    for (uint32_t m = 0; m < kMsgs; ++m)
        REQUIRE(p.a.eng.post_send(p.ca, 1 + m % 2, p.a.wr(m, OpKind::send, m * 2100, 1000 + m * 43)) == Status::ok);
    uint32_t next[3] = {0, 0, 1};  // the next message of streams 1 and 2
    size_t checked = 0;
    bool ok = true;
    const bool done = p.run([&] {
        for (; checked < p.b.got.size(); ++checked) {
            const Completion& c = p.b.got[checked];
            const uint32_t m = next[c.stream];
            next[c.stream] += 2;
            const uint32_t len = 1000 + m * 43;
            ok &= c.status == WcStatus::success && c.byte_len == len;
            // The message's bytes, piece after piece; the gaps untouched.
            const size_t buf = buf_of.at(c.wr_id);
            size_t off = buf * 10000, got = 0;
            for (int i = 0; i < 5 && ok; ++i) {
                const uint32_t n = std::min<uint32_t>(piece[i], len - uint32_t(got));
                ok &= std::memcmp(p.b.mem.data() + off, p.a.mem.data() + m * 2100 + got, n) == 0;
                for (uint32_t j = n; j < piece[i] + 17u && ok; ++j) ok &= p.b.mem[off + j] == 0xEE;
                got += n;
                off += piece[i] + 17;
            }
            post(posted++, buf);
        }
        return checked == kMsgs || !ok;
    });
    REQUIRE(ok);
    REQUIRE(done);
}
