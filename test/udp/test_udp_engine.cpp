// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Two real engines over UdpPort on 127.0.0.1: the driver's addressing model
// (well-known port for connection control, path source ports for data,
// attribution of path ports to the peer through dst_conn) must let the
// engine's peer checks pass in both directions.
#include <arpa/inet.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <system_error>
#include <vector>

#include <catch2/catch.hpp>

#include "mroce/engine.hpp"
#include "mroce/udp/loop.hpp"
#include "mroce/udp/port.hpp"

using namespace mroce;
using namespace mroce::udp;

namespace {

struct Side {
    Engine eng;
    UdpPort port;
    EngineLoop<Engine> loop;
    uint32_t pd = 0, cq = 0, conn = 0;
    std::vector<uint8_t> mem;
    MrInfo mr{};
    Side(const EngineConfig& ec, const UdpConfig& uc, size_t bytes) : eng(ec), port(uc), loop(UdpDrivePort(port), eng), mem(bytes) {
        pd = eng.alloc_pd();
        REQUIRE(eng.create_cq(1024, cq) == Status::ok);
        REQUIRE(eng.register_mr(pd, mem.data(), mem.size(), kAccessLocalWrite | kAccessRemoteWrite, mr) ==
                Status::ok);
    }
    uint64_t addr(size_t off = 0) const { return uint64_t(reinterpret_cast<uintptr_t>(mem.data())) + off; }
};

std::unique_ptr<Side> make_side(const EngineConfig& ec, uint16_t base, size_t bytes) {
    UdpConfig uc;
    uc.listen_port = base;
    uc.path_port_base = uint16_t(base + 1);
    uc.path_port_span = 16;
    return std::make_unique<Side>(ec, uc, bytes);
}

// One thread steps both loops; loopback delivery needs no waiting.
template <class Pred>
bool pump(Side& a, Side& b, Pred&& done, Time limit_ns = 5'000'000'000) {
    const Time end = monotonic_ns() + limit_ns;
    while (!done()) {
        const Time now = monotonic_ns();
        if (now > end) return false;
        a.loop.step(now);
        b.loop.step(now);
    }
    return true;
}

void write_and_check(Side& from, Side& to, size_t len, uint64_t wr_id, uint8_t seed) {
    for (size_t i = 0; i < len; ++i) from.mem[i] = uint8_t(i * 131 + (i >> 9) + seed);
    SendWr wr;
    wr.wr_id = wr_id;
    wr.op = OpKind::write;
    wr.local_addr = from.addr();
    wr.length = uint32_t(len);
    wr.lkey = from.mr.lkey;
    wr.remote_addr = to.addr(512);
    wr.rkey = to.mr.rkey;
    REQUIRE(from.eng.post_send(from.conn, 1, wr) == Status::ok);
    std::vector<Completion> got;
    REQUIRE(pump(from, to, [&] {
        Completion c[8];
        const size_t n = from.eng.poll_cq(from.cq, c, 8);
        got.insert(got.end(), c, c + n);
        return !got.empty();
    }));
    REQUIRE(got.size() == 1);
    CHECK(got[0].wr_id == wr_id);
    CHECK(got[0].status == WcStatus::success);
    CHECK(std::memcmp(from.mem.data(), to.mem.data() + 512, len) == 0);
}

}  // namespace

TEST_CASE("udp+engine: connect and WRITE both ways over 4 paths on loopback", "[udp][engine]") {
    EngineConfig ec;
    ec.num_paths = 4;
    constexpr size_t len = (1 << 20) + 77;
    std::unique_ptr<Side> a, b;
    for (uint32_t attempt = 0; attempt < 40 && !b; ++attempt) {
        const uint16_t base = uint16_t(30000 + ((uint32_t(getpid()) * 192u + 64u * attempt + 96u) % 28000u));
        try {
            a = make_side(ec, base, len + 4096);
            b = make_side(ec, uint16_t(base + 32), len + 4096);
        } catch (const std::system_error&) {
            a.reset();
            b.reset();
        }
    }
    REQUIRE(b);
    const uint32_t a_to_b = a->port.add_peer("127.0.0.1", b->port.config().listen_port);
    REQUIRE(a->eng.connect(a_to_b, a->conn) == Status::ok);
    uint32_t b_to_a = kNoPeer;
    REQUIRE(pump(*a, *b, [&] {
        ConnEvent ev[8];
        const size_t n = b->eng.poll_events(ev, 8);
        for (size_t i = 0; i < n; ++i)
            if (ev[i].kind == EventKind::incoming) {
                b->conn = ev[i].conn;
                b_to_a = ev[i].peer;
            }
        return b_to_a != kNoPeer && a->eng.conn_state(a->conn) == ConnState::established;
    }));
    // The passive side's handle names A's well-known address, learned from CONNECT_REQ.
    sockaddr_in sa{};
    REQUIRE(b->port.peer_address(b_to_a, sa));
    CHECK(ntohs(sa.sin_port) == a->port.config().listen_port);
    REQUIRE(a->eng.create_stream(a->conn, 1, a->pd, a->cq, a->cq) == Status::ok);
    REQUIRE(b->eng.create_stream(b->conn, 1, b->pd, b->cq, b->cq) == Status::ok);

    write_and_check(*a, *b, len, 11, 0);
    write_and_check(*b, *a, len, 22, 7);

    for (Side* s : {a.get(), b.get()}) {
        CHECK(s->eng.stats().rx_unknown_conn == 0);
        CHECK(s->eng.stats().rx_decode_errors == 0);
        CHECK(s->port.stats().rx_truncated == 0);
        CHECK(s->port.stats().tx_errors == 0);
        // Data came from the peer's path ports and was attributed to the peer, not to new handles.
        CHECK(s->port.stats().peers_learned >= 1);
        CHECK(s->port.num_peers() == 1);
        ConnStats cs;
        REQUIRE(s->eng.conn_stats(s->conn, cs) == Status::ok);
        CHECK(cs.state == ConnState::established);
        uint32_t paths_used = 0;
        for (uint16_t p = 0; p < 4; ++p) {
            PathStats ps;
            REQUIRE(s->eng.path_stats(s->conn, p, ps) == Status::ok);
            // Every path carries data; how much each gets follows its RTT,
            // which on a loaded loopback is noise (R-SCHED-2).
            paths_used += ps.tx_packets > 0;
        }
        CHECK(paths_used == 4);
    }
    CHECK(a->port.stats().tx_gso_sends > 0);  // bursts of equal-size segments went out as GSO
}
