// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Inline sends (verbs IBV_SEND_INLINE) and small lists gathered by copy
// (doc/spec.md R-INLINE-*): the bytes are taken at post, the buffer is the
// application's again at once, and every (re)transmission, also after the
// stream's flush, carries the bytes as they were posted.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "engine_fixture.hpp"

using namespace mroce;
using mroce::test::Fixture;
using mroce::test::fill;

namespace {

uint64_t addr_of(const std::vector<uint8_t>& v, size_t off = 0) {
    return uint64_t(reinterpret_cast<uintptr_t>(v.data())) + off;
}

SendWr inline_wr(uint64_t id, OpKind op, uint64_t laddr, uint32_t len) {
    SendWr w;
    w.wr_id = id;
    w.op = op;
    w.local_addr = laddr;
    w.length = len;
    w.lkey = 0;  // not checked (R-INLINE-1)
    w.inline_data = true;
    return w;
}

}  // namespace

// R-INLINE-1: no lkey, no registration, the buffer overwritten right after
// post_send, segments lost and resent: what lands is what was posted.
TEST_CASE("inline: the buffer is reusable as soon as post_send returns", "[engine][inline]") {
    EngineConfig cfg;
    cfg.max_payload = 64;  // 256 inline bytes are four segments, resent from the engine's copy
    cfg.max_send_sge = 4;
    Fixture f(cfg);
    f.link.loss = 0.2;
    std::vector<uint8_t> app(1024);  // never registered
    fill(app, 0, app.size(), 7);
    const std::vector<uint8_t> orig = app;
    RecvWr r;
    for (uint64_t id : {100, 101}) {
        r.wr_id = id;
        r.addr = f.b.addr(id == 100 ? 10000 : 20000);
        r.length = 4096;
        r.lkey = f.b.mr.lkey;
        REQUIRE(f.b.eng.post_recv(f.cb, 7, r) == Status::ok);
    }
    SendWr s = inline_wr(1, OpKind::send, addr_of(app), 256);
    REQUIRE(f.a.eng.post_send(f.ca, 7, s) == Status::ok);
    std::memset(app.data(), 0xee, 256);
    // From a list of three pieces of unregistered memory, into B by WRITE_IMM.
    const std::vector<Sge> sg = {{addr_of(app, 600), 100, 0}, {addr_of(app, 300), 1, 0xffffffff},
                                 {addr_of(app, 900), 99, 0}};
    SendWr w = inline_wr(2, OpKind::write_imm, 0, 0);
    w.sg_list = sg.data();
    w.num_sge = 3;
    w.remote_addr = f.b.addr(30000);
    w.rkey = f.b.mr.rkey;
    w.imm = 9;
    REQUIRE(f.a.eng.post_send(f.ca, 7, w) == Status::ok);
    std::memset(app.data() + 256, 0xee, app.size() - 256);
    SendWr z = inline_wr(3, OpKind::send_imm, 0, 0);  // 0 bytes inline: one packet, no copy
    REQUIRE(f.a.eng.post_send(f.ca, 7, z) == Status::ok);
    r.wr_id = 102;
    REQUIRE(f.b.eng.post_recv(f.cb, 7, r) == Status::ok);

    auto ca = f.wait(f.a, 3);
    auto cb = f.wait(f.b, 3);
    REQUIRE(ca.size() == 3);
    REQUIRE(cb.size() == 3);
    for (const auto& c : ca) CHECK(c.status == WcStatus::success);
    CHECK(ca[0].byte_len == 256);
    CHECK(ca[1].byte_len == 200);
    CHECK(cb[0].byte_len == 256);
    CHECK(cb[1].byte_len == 200);
    CHECK(cb[2].byte_len == 0);
    CHECK(std::memcmp(f.b.mem.data() + 10000, orig.data(), 256) == 0);
    CHECK(std::memcmp(f.b.mem.data() + 30000, orig.data() + 600, 100) == 0);
    CHECK(f.b.mem[30100] == orig[300]);
    CHECK(std::memcmp(f.b.mem.data() + 30101, orig.data() + 900, 99) == 0);
    ConnStats st;
    REQUIRE(f.a.eng.conn_stats(f.ca, st) == Status::ok);
    CHECK(st.retransmits > 0);
}

// R-INLINE-1: SEND, SEND_IMM, WRITE, WRITE_IMM of at most max_inline bytes;
// anything else is refused at post and takes no place in the send queue.
TEST_CASE("inline: only data WRs up to max_inline", "[engine][inline]") {
    const uint32_t max_inline = GENERATE(0u, 1u, 100u);
    EngineConfig cfg;
    cfg.max_inline = max_inline;
    Fixture f(cfg);
    std::vector<uint8_t> app(256, 0x31);
    CHECK(f.a.eng.config().max_inline == max_inline);
    SendWr w = inline_wr(1, OpKind::write, addr_of(app), max_inline + 1);
    w.remote_addr = f.b.addr(0);
    w.rkey = f.b.mr.rkey;
    CHECK(f.a.eng.post_send(f.ca, 7, w) == Status::invalid_argument);
    for (OpKind op : {OpKind::read, OpKind::atomic_fadd, OpKind::atomic_cas}) {
        SendWr x = inline_wr(1, op, addr_of(app), 8);
        x.remote_addr = f.b.addr(0);
        x.rkey = f.b.mr.rkey;
        CHECK(f.a.eng.post_send(f.ca, 7, x) == Status::invalid_argument);
    }
    w.wr_id = 2;
    w.length = max_inline;
    REQUIRE(f.a.eng.post_send(f.ca, 7, w) == Status::ok);
    auto c = f.wait(f.a, 1);
    REQUIRE(c.size() == 1);
    CHECK(c[0].wr_id == 2);
    CHECK(c[0].status == WcStatus::success);
    CHECK(std::memcmp(f.b.mem.data(), app.data(), max_inline) == 0);
    CHECK(f.b.mem[max_inline] == 0);
}

// R-INLINE-2: a WR flushed by its stream's error may still have packets to
// resend; they carry its own bytes, though the application overwrote its
// buffer and later WRs (flushed at post) took its send-queue slot.
TEST_CASE("inline: retransmissions after the stream's flush carry the posted bytes", "[engine][inline]") {
    EngineConfig cfg;
    cfg.max_payload = 64;
    cfg.num_paths = 1;
    cfg.stream_depth = 2;  // msg_seq 3 takes the slot of msg_seq 1
    Fixture f(cfg);
    std::vector<uint8_t> app(256);
    fill(app, 0, 256, 3);
    const std::vector<uint8_t> orig = app;
    // First transmissions of message 1 are lost; resent copies are recorded.
    std::vector<std::pair<uint32_t, std::vector<uint8_t>>> resent;
    f.link.drop_if = [&](int from, const TxPacket& p) {
        if (from != 0 || p.hdr_len != wire::kDataLen || p.hdr[1] != uint8_t(wire::PacketType::data)) return false;
        if (wire::detail::get32(p.hdr + 32) != 1) return false;
        if (!(p.hdr[25] & wire::kDataRetransmit)) return true;
        resent.emplace_back(wire::detail::get32(p.hdr + 40),
                            std::vector<uint8_t>(p.payload, p.payload + p.payload_len));
        return false;
    };
    SendWr bad;  // message 0 fails at the responder: NAK, the stream flushes
    bad.wr_id = 10;
    bad.op = OpKind::write;
    bad.local_addr = f.a.addr(0);
    bad.length = 10;
    bad.lkey = f.a.mr.lkey;
    bad.remote_addr = f.b.addr(0);
    bad.rkey = f.b.mr.rkey ^ 0x00ff0000u;
    REQUIRE(f.a.eng.post_send(f.ca, 7, bad) == Status::ok);
    SendWr w = inline_wr(11, OpKind::write, addr_of(app), 256);
    w.remote_addr = f.b.addr(1000);
    w.rkey = f.b.mr.rkey;
    REQUIRE(f.a.eng.post_send(f.ca, 7, w) == Status::ok);
    std::memset(app.data(), 0xee, app.size());
    auto c = f.wait(f.a, 2);
    REQUIRE(c.size() == 2);
    CHECK(c[0].status == WcStatus::rem_access_err);
    CHECK(c[1].status == WcStatus::wr_flush_err);
    // Later inline WRs on the errored stream: flushed at post, slot 1 included.
    std::vector<uint8_t> other(256, 0x77);
    for (uint64_t id : {12, 13}) {
        SendWr x = inline_wr(id, OpKind::write, addr_of(other), 256);
        x.remote_addr = f.b.addr(2000);
        x.rkey = f.b.mr.rkey;
        REQUIRE(f.a.eng.post_send(f.ca, 7, x) == Status::ok);
    }
    auto d = f.wait(f.a, 2);
    REQUIRE(d.size() == 2);
    CHECK(d[1].status == WcStatus::wr_flush_err);
    f.link.run([] { return false; }, 50'000'000);  // RTOs resend the lost segments
    REQUIRE(!resent.empty());
    for (const auto& [off, bytes] : resent) {
        REQUIRE(off + bytes.size() <= orig.size());
        CHECK(std::memcmp(bytes.data(), orig.data() + off, bytes.size()) == 0);
    }
    CHECK(f.b.mem[1000] == 0);  // the responder placed none of it (stream in ERROR)
}

// R-INLINE-3: a list whose sum is at most max_inline is gathered by copy at
// post into one buffer: segmented as one buffer, not one packet per entry.
TEST_CASE("inline: a small list travels as one buffer", "[engine][inline][sge]") {
    EngineConfig cfg;
    cfg.max_payload = 64;
    cfg.max_send_sge = 16;
    Fixture f(cfg);
    fill(f.a.mem, 0, 4096, 5);
    std::vector<Sge> sg;
    for (uint32_t i = 0; i < 16; ++i) sg.push_back(Sge{f.a.addr(4000 - 200 * i), 10, f.a.mr.lkey});
    SendWr w;
    w.wr_id = 1;
    w.op = OpKind::write;
    w.sg_list = sg.data();
    w.num_sge = 16;
    w.remote_addr = f.b.addr(0);
    w.rkey = f.b.mr.rkey;
    ConnStats before;
    REQUIRE(f.a.eng.conn_stats(f.ca, before) == Status::ok);
    REQUIRE(f.a.eng.post_send(f.ca, 7, w) == Status::ok);
    auto c = f.wait(f.a, 1);
    REQUIRE(c.size() == 1);
    CHECK(c[0].status == WcStatus::success);
    ConnStats after;
    REQUIRE(f.a.eng.conn_stats(f.ca, after) == Status::ok);
    CHECK(after.tx_data_packets - before.tx_data_packets == 3);  // 160 bytes at 64: not 16 packets
    for (uint32_t i = 0; i < 16; ++i) CHECK(std::memcmp(f.b.mem.data() + 10 * i, f.a.mem.data() + 4000 - 200 * i, 10) == 0);
    // Above max_inline the list keeps its layout (R-SEG-2): one packet per entry.
    for (Sge& e : sg) e.length = 17;  // 272 bytes
    w.wr_id = 2;
    w.remote_addr = f.b.addr(1000);
    REQUIRE(f.a.eng.post_send(f.ca, 7, w) == Status::ok);
    c = f.wait(f.a, 1);
    REQUIRE(c.size() == 1);
    ConnStats last;
    REQUIRE(f.a.eng.conn_stats(f.ca, last) == Status::ok);
    CHECK(last.tx_data_packets - after.tx_data_packets == 16);
}
