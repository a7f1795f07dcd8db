// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Planes (doc/spec.md R-PLANE-1..4): the handshake carries each side's plane
// addresses, path i is on plane i % planes, a black-holed plane loses no data
// and ends nothing (ACKs, NAKs, probe replies and connection control take a
// live plane), and a hostile plane block is a counted drop.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "stream_fixture.hpp"

using namespace mroce;
using mroce::test::connect_pair;
using mroce::test::fill_pattern;
using mroce::test::PairLink;
using mroce::test::StreamSide;

namespace {

bool is_type(const TxPacket& t, wire::PacketType ty) { return t.hdr_len > 1 && t.hdr[1] == uint8_t(ty); }

EngineConfig planes_cfg(uint8_t n, uint32_t host) {
    EngineConfig c;
    c.num_paths = 6;
    c.num_planes = n;
    for (uint8_t p = 0; p < n; ++p) c.planes[p] = wire::PlaneAddr{0x0A000002u + (uint32_t(p + 1) << 16) + (host << 8), 4793};
    return c;
}

struct Pair {
    StreamSide a, b;
    PairLink link;
    uint32_t ca = 0, cb = 0;
    std::vector<TxPacket> connects;  // every CONNECT_* either side sent
    Pair(const EngineConfig& ca_cfg, const EngineConfig& cb_cfg) : a(ca_cfg, 1 << 20), b(cb_cfg, 1 << 20), link(a.eng, b.eng) {
        link.drop_if = [this](int, const TxPacket& p) {
            if (is_type(p, wire::PacketType::connect_req) || is_type(p, wire::PacketType::connect_ack))
                connects.push_back(p);
            return false;
        };
        REQUIRE(connect_pair(link, ca, cb));
        REQUIRE(a.eng.create_stream(ca, 3, a.attr()) == Status::ok);
        REQUIRE(b.eng.create_stream(cb, 3, b.attr()) == Status::ok);
    }
    uint8_t planes(Engine& e, uint32_t c) {
        ConnStats s{};
        REQUIRE(e.conn_stats(c, s) == Status::ok);
        return s.planes;
    }
};

}  // namespace

TEST_CASE("planes: the handshake announces each side's planes; path i is on plane i % n (R-PLANE-1, R-PLANE-2)",
          "[engine][planes]") {
    Pair t(planes_cfg(3, 0), planes_cfg(3, 1));
    CHECK(t.planes(t.a.eng, t.ca) == 3);
    CHECK(t.planes(t.b.eng, t.cb) == 3);
    REQUIRE(t.connects.size() >= 2);
    for (const TxPacket& p : t.connects) {
        // The plane block rides as the packet's payload; it decodes with the header.
        REQUIRE(p.payload_len == wire::kPlaneBlockHead + 3 * wire::kPlaneEntryLen);
        std::vector<uint8_t> d(p.hdr, p.hdr + p.hdr_len);
        d.insert(d.end(), p.payload, p.payload + p.payload_len);
        wire::Packet pk;
        REQUIRE(wire::decode(d, pk) == wire::DecodeError::ok);
        REQUIRE(pk.connect.num_planes == 3);
        CHECK(wire::plane_addr(pk, 2).port == 4793);
        CHECK((wire::plane_addr(pk, 2).ipv4 >> 16) == 0x0A03);
    }
    std::vector<std::pair<uint16_t, uint8_t>> seen;
    t.link.drop_if = [&](int from, const TxPacket& p) {
        if (from == 0 && is_type(p, wire::PacketType::data)) seen.emplace_back(p.path, p.plane);
        return false;
    };
    fill_pattern(t.a.mem, 0, 200000, 5);
    REQUIRE(t.a.eng.post_send(t.ca, 3, t.a.wr(1, OpKind::write, 0, 200000, t.b.addr(300000), t.b.mr.rkey)) ==
            Status::ok);
    REQUIRE(t.link.run([&] { t.a.poll(); return !t.a.got.empty(); }, 2'000'000'000));
    REQUIRE(t.a.got[0].status == WcStatus::success);
    CHECK(std::memcmp(t.a.mem.data(), t.b.mem.data() + 300000, 200000) == 0);
    REQUIRE(seen.size() > 12);
    bool plane_used[3] = {};
    for (const auto& [path, plane] : seen) {
        CHECK(plane == path % 3);
        plane_used[plane] = true;
    }
    CHECK((plane_used[0] && plane_used[1] && plane_used[2]));
}

TEST_CASE("planes: a one-plane peer makes a one-plane connection, and sends no block (R-PLANE-1)", "[engine][planes]") {
    Pair t(planes_cfg(3, 0), EngineConfig{});
    CHECK(t.planes(t.a.eng, t.ca) == 1);
    CHECK(t.planes(t.b.eng, t.cb) == 1);
    for (const TxPacket& p : t.connects) {
        if (is_type(p, wire::PacketType::connect_ack)) CHECK(p.payload_len == 0);
        CHECK(p.plane == 0);
    }
}

TEST_CASE("planes: any one plane black-holed both ways loses no data and ends nothing; "
          "control, ACKs and NAKs leave on live planes (R-PLANE-3, R-PLANE-4)", "[engine][planes]") {
    for (uint8_t dead = 0; dead < 3; ++dead) {
        CAPTURE(int(dead));
        Pair t(planes_cfg(3, 0), planes_cfg(3, 1));
        uint64_t on_dead = 0;
        t.link.drop_if = [&](int, const TxPacket& p) {
            if (p.plane != dead) return false;
            ++on_dead;
            return true;
        };
        fill_pattern(t.a.mem, 0, 100000, 1);
        fill_pattern(t.b.mem, 0, 100000, 2);
        // Both directions carry data, so both ends' paths on the dead plane fail.
        for (uint64_t i = 0; i < 4; ++i) {
            REQUIRE(t.a.eng.post_send(t.ca, 3, t.a.wr(10 + i, OpKind::write, 0, 100000, t.b.addr(200000), t.b.mr.rkey)) ==
                    Status::ok);
            REQUIRE(t.b.eng.post_send(t.cb, 3, t.b.wr(20 + i, OpKind::write, 0, 100000, t.a.addr(200000), t.a.mr.rkey)) ==
                    Status::ok);
        }
        // A refused WRITE (bad rkey), on a stream of its own (the refusal ends
        // that stream, R-NAK-8): its NAK must come back on a live plane.
        REQUIRE(t.a.eng.create_stream(t.ca, 4, t.a.attr()) == Status::ok);
        REQUIRE(t.b.eng.create_stream(t.cb, 4, t.b.attr()) == Status::ok);
        REQUIRE(t.a.eng.post_send(t.ca, 4, t.a.wr(30, OpKind::write, 0, 1000, t.b.addr(0), t.b.mr.rkey ^ 0x5a5a)) ==
                Status::ok);
        REQUIRE(t.link.run([&] { t.a.poll(); t.b.poll(); return t.a.got.size() >= 5 && t.b.got.size() >= 4; },
                           5'000'000'000));
        size_t ok = 0, refused = 0;
        for (const Completion& c : t.a.got) {
            ok += c.status == WcStatus::success && c.wr_id < 30;
            refused += c.status == WcStatus::rem_access_err && c.wr_id == 30;
        }
        CHECK(ok == 4);
        CHECK(refused == 1);
        for (const Completion& c : t.b.got) CHECK(c.status == WcStatus::success);
        CHECK(std::memcmp(t.a.mem.data(), t.b.mem.data() + 200000, 100000) == 0);
        CHECK(std::memcmp(t.b.mem.data(), t.a.mem.data() + 200000, 100000) == 0);
        CHECK(on_dead > 0);
        CHECK(t.a.eng.conn_state(t.ca) != ConnState::error);
        // A DISCONNECT and its answer get through while the plane is still dead.
        REQUIRE(t.a.eng.disconnect(t.ca) == Status::ok);
        CHECK(t.link.run([&] { return t.a.eng.conn_state(t.ca) == ConnState::closed; }, 2'000'000'000));
    }
}

TEST_CASE("planes: a hostile CONNECT_REQ's plane block is a counted drop (R-PLANE-1, R-ERR-1)", "[engine][planes]") {
    Engine e(planes_cfg(3, 1));
    wire::CommonHeader c;
    c.type = wire::PacketType::connect_req;
    c.src_conn = 0x1234;
    wire::ConnectHeader h;
    h.num_paths = 4;
    h.max_payload = 4096;
    h.stream_depth = 256;
    h.csn_window = 4096;
    auto rx = [&](const std::vector<uint8_t>& d) {
        RxPacket p;
        p.data = d.data();
        p.len = uint32_t(d.size());
        p.peer = 1;
        e.rx_burst(&p, 1, 1000);
    };
    std::vector<uint8_t> base(wire::kConnectLen);
    REQUIRE(wire::encode_connect(base, c, h) == wire::kConnectLen);
    // Nine planes (past the room for eight): oversized.
    std::vector<uint8_t> d = base;
    d.push_back(9);
    d.insert(d.end(), 3 + 9 * wire::kPlaneEntryLen, 1);
    rx(d);
    CHECK(e.stats().rx_oversized == 1);
    // Count and length disagree; a zero address; a repeated address: inconsistent.
    const wire::PlaneAddr two[2] = {{0x0A010002, 4793}, {0x0A020002, 4793}};
    std::vector<uint8_t> blk(wire::kMaxPlaneBlock);
    blk.resize(wire::encode_plane_block(blk, two, 2));
    d = base;
    d.insert(d.end(), blk.begin(), blk.end());
    d[wire::kConnectLen] = 3;
    rx(d);
    d[wire::kConnectLen] = 2;
    std::memset(&d[wire::kConnectLen + 4], 0, 4);
    rx(d);
    std::memcpy(&d[wire::kConnectLen + 4], &d[wire::kConnectLen + 12], 4);
    rx(d);
    CHECK(e.stats().rx_inconsistent == 3);
    CHECK(e.conn_count() == 0);
    // The same CONNECT_REQ with a good block is accepted.
    d = base;
    d.insert(d.end(), blk.begin(), blk.end());
    rx(d);
    CHECK(e.conn_count() == 1);
}

TEST_CASE("planes: plane addresses a peer would refuse make a one-plane device, not a failed handshake (R-PLANE-1)",
          "[engine][planes]") {
    EngineConfig bad = planes_cfg(3, 0);
    bad.planes[2] = bad.planes[0];  // an address twice
    Pair t(bad, planes_cfg(3, 1));
    CHECK(t.a.eng.config().num_planes == 1);
    CHECK(t.planes(t.a.eng, t.ca) == 1);
    for (const TxPacket& p : t.connects)
        if (is_type(p, wire::PacketType::connect_req)) CHECK(p.payload_len == 0);
}

TEST_CASE("planes: a connection is set up while plane 0 (or any one plane) is down: the CONNECT_REQs rotate over "
          "the peer's planes and the CONNECT_ACK comes back on the plane that carried one (R-PLANE-6, R-PLANE-7)",
          "[engine][planes]") {
    for (uint8_t dead = 0; dead < 3; ++dead) {
        CAPTURE(int(dead));
        StreamSide a(planes_cfg(3, 0), 1 << 20), b(planes_cfg(3, 1), 1 << 20);
        PairLink link(a.eng, b.eng);
        std::vector<uint8_t> req_planes, ack_planes;
        link.drop_if = [&](int, const TxPacket& p) {
            if (is_type(p, wire::PacketType::connect_req)) req_planes.push_back(p.plane);
            if (is_type(p, wire::PacketType::connect_ack)) ack_planes.push_back(p.plane);
            return p.plane == dead;
        };
        uint32_t ca = 0, cb = 0;
        // The application gave the peer's address on each of its 3 planes.
        REQUIRE(a.eng.connect(1, ca, 3) == Status::ok);
        REQUIRE(link.run([&] {
            ConnEvent ev[4];
            for (size_t i = 0, n = b.eng.poll_events(ev, 4); i < n; ++i)
                if (ev[i].kind == EventKind::incoming) cb = ev[i].conn;
            return cb != 0 && a.eng.conn_state(ca) == ConnState::established;
        }, 1'000'000'000));
        // Attempt k went on plane k % 3 until one crossed a live plane.
        REQUIRE(!req_planes.empty());
        for (size_t k = 0; k < req_planes.size(); ++k) CHECK(req_planes[k] == k % 3);
        CHECK(req_planes.size() == (dead == 0 ? 2u : 1u));
        // The answer went back on the plane its CONNECT_REQ arrived on (not plane 0 when that is the dead one).
        REQUIRE(ack_planes.size() == 1);
        CHECK(ack_planes[0] == req_planes.back());
        ConnStats cs{};
        REQUIRE(a.eng.conn_stats(ca, cs) == Status::ok);
        CHECK(cs.connect_planes == 3);
        CHECK(cs.planes == 3);
        // The connection carries verified data with the plane still down.
        REQUIRE(a.eng.create_stream(ca, 3, a.attr()) == Status::ok);
        REQUIRE(b.eng.create_stream(cb, 3, b.attr()) == Status::ok);
        fill_pattern(a.mem, 0, 100000, 7);
        REQUIRE(a.eng.post_send(ca, 3, a.wr(1, OpKind::write, 0, 100000, b.addr(200000), b.mr.rkey)) == Status::ok);
        REQUIRE(link.run([&] { a.poll(); return !a.got.empty(); }, 3'000'000'000));
        CHECK(a.got[0].status == WcStatus::success);
        CHECK(std::memcmp(a.mem.data(), b.mem.data() + 200000, 100000) == 0);
    }
}

TEST_CASE("planes: without the peer's plane addresses every CONNECT_REQ goes on plane 0, and the error after the "
          "last names the attempts and planes (R-PLANE-6, R-CONN-5)", "[engine][planes]") {
    for (uint8_t given : {uint8_t(1), uint8_t(3)}) {
        CAPTURE(int(given));
        EngineConfig ac = planes_cfg(3, 0);
        ac.conn_timeout = 200'000'000;  // 20 attempts of connect_retry 10 ms
        StreamSide a(ac, 1 << 16), b(planes_cfg(3, 1), 1 << 16);
        PairLink link(a.eng, b.eng);
        std::vector<uint8_t> req_planes;
        // given 1: plane 0 is down, the only one tried; given 3: every plane is down.
        link.drop_if = [&](int, const TxPacket& p) {
            if (is_type(p, wire::PacketType::connect_req)) req_planes.push_back(p.plane);
            return given == 1 ? p.plane == 0 : true;
        };
        uint32_t ca = 0;
        REQUIRE(a.eng.connect(1, ca, given) == Status::ok);
        REQUIRE(link.run([&] { return a.eng.conn_state(ca) == ConnState::error; }, 1'000'000'000));
        ConnStats cs{};
        REQUIRE(a.eng.conn_stats(ca, cs) == Status::ok);
        CHECK(cs.error_cause == ConnErrorCause::connect_unanswered);
        CHECK(cs.connect_planes == given);
        CHECK(cs.connect_attempts == req_planes.size());
        CHECK(req_planes.size() == 20);
        for (size_t k = 0; k < req_planes.size(); ++k) CHECK(req_planes[k] == k % given);
        CHECK(b.eng.conn_count() == 0);
    }
}

TEST_CASE("planes: a repeated CONNECT_REQ that arrives on another plane (another driver peer handle) is the same "
          "attempt: answered on its own plane, no second connection (R-PLANE-7, R-CONN-4)", "[engine][planes]") {
    Engine e(planes_cfg(3, 1));
    wire::CommonHeader c;
    c.type = wire::PacketType::connect_req;
    c.src_conn = 0x4321;
    wire::ConnectHeader h;
    h.num_paths = 3;
    h.max_payload = 4096;
    h.stream_depth = 256;
    h.csn_window = 4096;
    h.cookie = 0xabcdef;
    const wire::PlaneAddr pl[3] = {{0x0A010002, 4793}, {0x0A020002, 4793}, {0x0A030002, 4793}};
    std::vector<uint8_t> d(wire::kConnectLen + wire::kMaxPlaneBlock);
    REQUIRE(wire::encode_connect(d, c, h) == wire::kConnectLen);
    d.resize(wire::kConnectLen + wire::encode_plane_block({d.data() + wire::kConnectLen, wire::kMaxPlaneBlock}, pl, 3));
    std::vector<uint8_t> acks;  // planes of the CONNECT_ACKs
    Time now = 1000;
    for (uint8_t plane : {uint8_t(1), uint8_t(2), uint8_t(2)}) {
        RxPacket p;
        p.data = d.data();
        p.len = uint32_t(d.size());
        p.peer = 5 + plane;  // the driver met each plane's address first in this REQ
        p.plane = plane;
        e.rx_burst(&p, 1, now);
        TxPacket out[8];
        for (size_t i = 0, n = e.tx_burst(out, 8, now); i < n; ++i)
            if (is_type(out[i], wire::PacketType::connect_ack)) {
                acks.push_back(out[i].plane);
                CHECK(out[i].peer == 6);  // the connection's peer: the handle of the first REQ
            }
        now += 10'000'000;
    }
    CHECK(e.conn_count() == 1);
    CHECK(acks == std::vector<uint8_t>{1, 2, 2});
}
