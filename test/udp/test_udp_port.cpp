// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// UdpPort over real loopback sockets (127.0.0.1 only).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "mroce/engine.hpp"
#include "mroce/udp/loop.hpp"
#include "mroce/udp/port.hpp"

using namespace mroce;
using namespace mroce::udp;

namespace {

// Ports move with the pid so parallel test runs (and other engineers' tests) rarely collide,
// and a collision just moves on to the next block.
uint16_t next_block() {
    static uint32_t n = 0;
    return uint16_t(30000 + ((uint32_t(getpid()) * 192u + 64u * n++) % 28000u));
}

struct Pair {
    std::unique_ptr<UdpPort> a, b;
    uint32_t a_to_b = 0;  // A's handle for B's well-known address
    uint32_t b_to_a = 0;
};

Pair make_pair(UdpConfig ca = {}, UdpConfig cb = {}) {
    for (int attempt = 0; attempt < 40; ++attempt) {
        const uint16_t base = next_block();
        ca.listen_port = base;
        ca.path_port_base = uint16_t(base + 1);
        ca.path_port_span = std::min<uint16_t>(ca.path_port_span, 30);
        cb.listen_port = uint16_t(base + 32);
        cb.path_port_base = uint16_t(base + 33);
        cb.path_port_span = std::min<uint16_t>(cb.path_port_span, 30);
        try {
            Pair p;
            p.a = std::make_unique<UdpPort>(ca);
            p.b = std::make_unique<UdpPort>(cb);
            p.a_to_b = p.a->add_peer("127.0.0.1", cb.listen_port);
            p.b_to_a = p.b->add_peer("127.0.0.1", ca.listen_port);
            return p;
        } catch (const std::system_error&) {
        }
    }
    FAIL("no free loopback port block");
    return {};
}

// Received copies, so packets survive the port's buffer reuse.
struct Got {
    std::vector<uint8_t> bytes;
    uint32_t peer;
    uint16_t local_path;
    uint8_t ce;
    uint8_t plane = 0;
};

std::vector<Got> receive(UdpPort& p, size_t want, size_t max_per_call = 64, int timeout_ms = 2000) {
    std::vector<Got> out;
    std::vector<RxPacket> rx(max_per_call);
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (out.size() < want && std::chrono::steady_clock::now() < end) {
        const size_t n = p.recv_burst(rx.data(), rx.size());
        REQUIRE(n <= max_per_call);
        for (size_t i = 0; i < n; ++i)
            out.push_back(Got{std::vector<uint8_t>(rx[i].data, rx[i].data + rx[i].len), rx[i].peer,
                              rx[i].local_path, rx[i].ce, rx[i].plane});
        if (n == 0) p.wait(1'000'000);
    }
    return out;
}

void put_be32(uint8_t* p, uint32_t v) {
    p[0] = uint8_t(v >> 24);
    p[1] = uint8_t(v >> 16);
    p[2] = uint8_t(v >> 8);
    p[3] = uint8_t(v);
}

// A header that the driver's peer attribution reads like the engine's (version 1, conns).
TxPacket make_pkt(uint32_t peer, uint16_t path, uint16_t entropy, uint16_t hdr_len, const uint8_t* payload,
                  uint32_t plen, uint32_t dst_conn = 0, uint32_t src_conn = 0, uint32_t tag = 0) {
    TxPacket t;
    t.peer = peer;
    t.path = path;
    t.entropy = entropy;
    t.hdr_len = hdr_len;
    t.payload = payload;
    t.payload_len = plen;
    for (uint16_t i = 0; i < hdr_len; ++i) t.hdr[i] = uint8_t(0xA0 + i);
    if (hdr_len >= 16) {
        t.hdr[0] = 1;
        put_be32(t.hdr + 4, dst_conn);
        put_be32(t.hdr + 8, src_conn);
        put_be32(t.hdr + 12, tag);  // where path_id/reserved live: free for tests
    }
    return t;
}

std::vector<uint8_t> concat(const TxPacket& t) {
    std::vector<uint8_t> v(t.hdr, t.hdr + t.hdr_len);
    v.insert(v.end(), t.payload, t.payload + t.payload_len);
    return v;
}

uint32_t tag_of(const std::vector<uint8_t>& b) { return b.size() >= 16 ? (uint32_t(b[12]) << 24) | (uint32_t(b[13]) << 16) | (uint32_t(b[14]) << 8) | b[15] : ~0u; }

// A plain socket on 127.0.0.1 (ephemeral port) that reports the TOS byte of what it gets.
struct RawSock {
    int fd = -1;
    uint16_t port = 0;
    RawSock() {
        fd = socket(AF_INET, SOCK_DGRAM, 0);
        REQUIRE(fd >= 0);
        int one = 1;
        setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof one);
        timeval tv{2, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
        socklen_t sl = sizeof sa;
        getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &sl);
        port = ntohs(sa.sin_port);
    }
    ~RawSock() { close(fd); }
    // Returns the datagram length (-1 on timeout); tos and source port out.
    ssize_t recv(std::vector<uint8_t>& buf, int& tos, uint16_t& src_port) {
        buf.resize(70000);
        sockaddr_in from{};
        iovec iov{buf.data(), buf.size()};
        alignas(cmsghdr) char ctrl[64];
        msghdr h{};
        h.msg_name = &from;
        h.msg_namelen = sizeof from;
        h.msg_iov = &iov;
        h.msg_iovlen = 1;
        h.msg_control = ctrl;
        h.msg_controllen = sizeof ctrl;
        const ssize_t r = recvmsg(fd, &h, 0);
        tos = -1;
        for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c))
            if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) tos = *CMSG_DATA(c);
        src_port = ntohs(from.sin_port);
        if (r >= 0) buf.resize(size_t(r));
        return r;
    }
    void send_to(uint16_t port_to, const void* data, size_t len) {
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sa.sin_port = htons(port_to);
        REQUIRE(sendto(fd, data, len, 0, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == ssize_t(len));
    }
};

bool have_nft() { return geteuid() == 0 && std::system("nft --version >/dev/null 2>&1") == 0; }

}  // namespace

TEST_CASE("udp: header+payload bursts arrive byte-exact, per-path order kept", "[udp]") {
    const bool gso = GENERATE(false, true);
    const bool gro = GENERATE(false, true);
    CAPTURE(gso, gro);
    UdpConfig ca, cb;
    ca.gso = gso;
    cb.gro = gro;
    Pair p = make_pair(ca, cb);
    REQUIRE(p.a->gso_enabled() == gso);
    REQUIRE(p.b->gro_enabled() == gro);

    std::vector<uint8_t> mem(9000 * 4);
    for (size_t i = 0; i < mem.size(); ++i) mem[i] = uint8_t(i * 7 + i / 251);
    // Runs of equal sizes (GSO candidates) with a short tail, odd sizes, an empty payload,
    // a jumbo payload, spread over 4 paths in interleaved order.
    std::vector<TxPacket> tx;
    uint32_t tag = 0;
    for (int i = 0; i < 40; ++i)
        tx.push_back(make_pkt(p.a_to_b, uint16_t(i % 4), uint16_t(i % 4), 72, mem.data() + i * 100, 4096, 0, 0,
                              tag++));
    tx.push_back(make_pkt(p.a_to_b, 1, 1, 72, mem.data() + 5, 1000, 0, 0, tag++));
    tx.push_back(make_pkt(p.a_to_b, 2, 2, 32, nullptr, 0, 0, 0, tag++));
    tx.push_back(make_pkt(p.a_to_b, 3, 3, 72, mem.data(), 9000, 0, 0, tag++));
    for (int i = 0; i < 20; ++i)
        tx.push_back(make_pkt(p.a_to_b, 0, 0, 72, mem.data() + 3 * i, 777, 0, 0, tag++));
    tx.push_back(make_pkt(p.a_to_b, 0, 0, 72, mem.data() + 11, 123, 0, 0, tag++));

    std::vector<uint32_t> unsent(tx.size());
    REQUIRE(p.a->send_burst(tx.data(), tx.size(), unsent.data()) == tx.size());
    CHECK(p.a->stats().tx_packets == tx.size());
    CHECK(p.a->stats().tx_errors == 0);
    if (gso) CHECK(p.a->stats().tx_gso_sends > 0);
    else CHECK(p.a->stats().tx_gso_sends == 0);
    CHECK(p.a->stats().tx_syscalls <= 5);  // one sendmmsg per path socket

    auto got = receive(*p.b, tx.size());
    REQUIRE(got.size() == tx.size());
    CHECK(p.b->stats().rx_packets == tx.size());
    if (gso && gro) CHECK(p.b->stats().rx_gro_datagrams > 0);

    std::vector<int> last_tag(4, -1);
    std::vector<bool> seen(tx.size(), false);
    for (const Got& g : got) {
        const uint32_t t = tag_of(g.bytes);
        REQUIRE(t < tx.size());
        CHECK_FALSE(seen[t]);
        seen[t] = true;
        CHECK(g.bytes == concat(tx[t]));
        CHECK(g.ce == 0);
        CHECK(g.local_path == kListenLocalPath);
        const uint16_t path = tx[t].path;
        CHECK(int(t) > last_tag[path]);  // one source socket per path: FIFO
        last_tag[path] = int(t);
    }
}

TEST_CASE("udp: recv_burst honours max when a GRO buffer holds more packets", "[udp]") {
    Pair p = make_pair();
    std::vector<uint8_t> mem(2000, 0x5A);
    std::vector<TxPacket> tx;
    for (uint32_t i = 0; i < 30; ++i) tx.push_back(make_pkt(p.a_to_b, 0, 0, 72, mem.data() + i, 1000, 0, 0, i));
    REQUIRE(p.a->send_burst(tx.data(), tx.size()) == tx.size());
    REQUIRE(p.b->wait(2'000'000'000));
    RxPacket rx[7];
    size_t first = 0;
    for (int k = 0; k < 100 && first == 0; ++k) first = p.b->recv_burst(rx, 7);
    REQUIRE(first == 7);
    CHECK(p.b->stats().rx_gro_datagrams > 0);
    std::vector<Got> got;
    for (size_t i = 0; i < first; ++i)
        got.push_back(Got{std::vector<uint8_t>(rx[i].data, rx[i].data + rx[i].len), rx[i].peer, 0, 0});
    // The rest of the coalesced buffer is already here: wait() must not block on it.
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(p.b->wait(1'000'000'000));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(100));
    auto more = receive(*p.b, tx.size() - first, 7);
    got.insert(got.end(), more.begin(), more.end());
    REQUIRE(got.size() == tx.size());
    for (uint32_t i = 0; i < got.size(); ++i) {
        CHECK(tag_of(got[i].bytes) == i);
        CHECK(got[i].bytes == concat(tx[i]));
    }
}

TEST_CASE("udp: peer handles from add_peer, unknown sources and learned path ports", "[udp]") {
    Pair p = make_pair();
    UdpPort& a = *p.a;
    UdpPort& b = *p.b;
    CHECK(p.a_to_b != kNoPeer);
    CHECK(a.add_peer("127.0.0.1", b.config().listen_port) == p.a_to_b);  // idempotent
    CHECK_THROWS_AS(a.add_peer("not-an-ip", 1), std::invalid_argument);
    sockaddr_in sa{};
    REQUIRE(a.peer_address(p.a_to_b, sa));
    CHECK(ntohs(sa.sin_port) == b.config().listen_port);
    CHECK_FALSE(a.peer_address(kNoPeer, sa));
    CHECK_FALSE(a.peer_address(999, sa));

    // A fresh B' that knows nobody: A's CONNECT-like control packet leaves from A's
    // well-known port and gets a new handle naming exactly that address.
    UdpConfig cc = b.config();
    p.b.reset();
    UdpPort c(cc);
    const uint32_t c_to_a_learned = [&] {
        TxPacket req = make_pkt(p.a_to_b, kControlPath, 0, 40, nullptr, 0, 0, /*src_conn*/ 7);
        REQUIRE(a.send_burst(&req, 1) == 1);
        auto got = receive(c, 1);
        REQUIRE(got.size() == 1);
        return got[0].peer;
    }();
    CHECK(c_to_a_learned != kNoPeer);
    CHECK(c.stats().peers_created == 1);
    REQUIRE(c.peer_address(c_to_a_learned, sa));
    CHECK(ntohs(sa.sin_port) == a.config().listen_port);

    // C answers on its control path, naming its connection 9; A already knows C's address.
    TxPacket ack = make_pkt(c_to_a_learned, kControlPath, 0, 40, nullptr, 0, 7, /*src_conn*/ 9);
    REQUIRE(c.send_burst(&ack, 1) == 1);
    auto got = receive(a, 1);
    REQUIRE(got.size() == 1);
    CHECK(got[0].peer == p.a_to_b);

    // Data from A's path ports (dst_conn 9) is attributed to A's handle, whatever the port.
    std::vector<uint8_t> pay(100, 1);
    std::vector<TxPacket> data;
    for (uint16_t e = 0; e < 6; ++e) data.push_back(make_pkt(p.a_to_b, e, e, 72, pay.data(), 100, 9, 7, e));
    REQUIRE(a.send_burst(data.data(), data.size()) == data.size());
    got = receive(c, data.size());
    REQUIRE(got.size() == data.size());
    for (const Got& g : got) CHECK(g.peer == c_to_a_learned);
    CHECK(c.stats().peers_learned == 6);
    CHECK(c.num_peers() == 1);

    // A source that names no connection of ours is a new peer, stable across datagrams.
    RawSock raw;
    uint8_t junk[20] = {1, 2, 0, 0, 0, 0, 0, 42};
    raw.send_to(cc.listen_port, junk, sizeof junk);
    raw.send_to(cc.listen_port, junk, sizeof junk);
    got = receive(c, 2);
    REQUIRE(got.size() == 2);
    CHECK(got[0].peer != c_to_a_learned);
    CHECK(got[0].peer == got[1].peer);
    CHECK(c.num_peers() == 2);
}

// A CONNECT_* as the engine sends it: 44-byte header, the plane block as payload (R-PLANE-1).
struct ConnectPkt {
    TxPacket t;
    std::vector<uint8_t> block;
    ConnectPkt(uint32_t peer, wire::PacketType type, uint32_t dst_conn, uint32_t src_conn,
               std::vector<wire::PlaneAddr> planes, uint8_t plane = 0) {
        wire::CommonHeader c;
        c.type = type;
        c.dst_conn = dst_conn;
        c.src_conn = src_conn;
        wire::ConnectHeader h;
        h.num_paths = 4;
        h.max_payload = 4096;
        h.stream_depth = 256;
        h.csn_window = 4096;
        t.peer = peer;
        t.path = kControlPath;
        t.plane = plane;
        t.hdr_len = uint16_t(wire::encode_connect({t.hdr, sizeof t.hdr}, c, h));
        block.resize(wire::kMaxPlaneBlock);
        block.resize(wire::encode_plane_block(block, planes.data(), planes.size()));
        t.payload = block.data();
        t.payload_len = uint32_t(block.size());
    }
};

uint32_t ip4(const char* s) {
    in_addr a{};
    inet_pton(AF_INET, s, &a);
    return ntohl(a.s_addr);
}

TEST_CASE("udp: planes: a socket set per plane, peer planes learned from the handshake's block (R-PLANE-1, R-PLANE-2)",
          "[udp][planes]") {
    UdpConfig ca, cb;
    ca.plane_ips = {"127.0.0.1", "127.0.0.2"};
    cb.plane_ips = {"127.0.0.3", "127.0.0.4"};
    cb.local_ip = "127.0.0.3";
    ca.open_paths = cb.open_paths = 4;
    Pair p = make_pair(ca, cb);  // A's handle for B names 127.0.0.1: replaced below
    UdpPort& a = *p.a;
    UdpPort& b = *p.b;
    REQUIRE(a.num_planes() == 2);
    const uint16_t la = a.config().listen_port, lb = b.config().listen_port;
    const uint32_t a_to_b = a.add_peer("127.0.0.3", lb);
    const std::vector<wire::PlaneAddr> a_planes = {{ip4("127.0.0.1"), la}, {ip4("127.0.0.2"), la}};
    const std::vector<wire::PlaneAddr> b_planes = {{ip4("127.0.0.3"), lb}, {ip4("127.0.0.4"), lb}};

    // A's CONNECT_REQ on plane 0: B learns A's two planes.
    ConnectPkt req(a_to_b, wire::PacketType::connect_req, 0, 7, a_planes);
    REQUIRE(a.send_burst(&req.t, 1) == 1);
    auto got = receive(b, 1);
    REQUIRE(got.size() == 1);
    const uint32_t b_to_a = got[0].peer;
    CHECK(got[0].plane == 0);
    CHECK(b.stats().peer_planes_learned == 1);
    REQUIRE(b.peer_planes(b_to_a) == 2);
    sockaddr_in sa{};
    REQUIRE(b.peer_plane_address(b_to_a, 1, sa));
    CHECK(ntohl(sa.sin_addr.s_addr) == ip4("127.0.0.2"));
    CHECK(ntohs(sa.sin_port) == la);

    // B's CONNECT_ACK on plane 1 goes to A's plane-1 address; A learns B's planes
    // and gives the ACK, from an address A did not know, the handle of B.
    ConnectPkt ack(b_to_a, wire::PacketType::connect_ack, 7, 9, b_planes, 1);
    REQUIRE(b.send_burst(&ack.t, 1) == 1);
    got = receive(a, 1);
    REQUIRE(got.size() == 1);
    CHECK(got[0].plane == 1);
    CHECK(got[0].peer == a_to_b);
    CHECK(a.peer_planes(a_to_b) == 2);

    // Data on each plane leaves from that plane's socket to the peer's address on it;
    // all of it is attributed to one peer, and counted per plane.
    std::vector<uint8_t> pay(100, 3);
    std::vector<TxPacket> data;
    for (uint16_t e = 0; e < 6; ++e) {
        data.push_back(make_pkt(a_to_b, e, e, 72, pay.data(), 100, 9, 7, e));
        data.back().plane = uint8_t(e % 2);
    }
    REQUIRE(a.send_burst(data.data(), data.size()) == data.size());
    got = receive(b, data.size());
    REQUIRE(got.size() == data.size());
    size_t on[2] = {};
    for (const Got& g : got) {
        CHECK(g.peer == b_to_a);
        CHECK(g.plane == tag_of(g.bytes) % 2);
        ++on[g.plane];
    }
    CHECK(on[0] == 3);
    CHECK(on[1] == 3);
    CHECK(a.stats().plane[1].tx_packets >= 3);
    CHECK(b.stats().plane[1].rx_packets == 3 + 0);
    CHECK(b.num_peers() == 1);

    // Hostile blocks teach nothing: one that does not list the sender's address,
    // and a malformed one (count beyond the entries).
    ConnectPkt liar(a_to_b, wire::PacketType::connect_req, 0, 8, {{ip4("127.0.0.9"), la}, {ip4("127.0.0.10"), la}});
    REQUIRE(a.send_burst(&liar.t, 1) == 1);
    ConnectPkt bad(a_to_b, wire::PacketType::connect_req, 0, 8, a_planes);
    bad.block[0] = 3;
    REQUIRE(a.send_burst(&bad.t, 1) == 1);
    got = receive(b, 2);
    REQUIRE(got.size() == 2);
    CHECK(b.stats().peer_planes_learned == 1);
    REQUIRE(b.peer_plane_address(b_to_a, 1, sa));
    CHECK(ntohl(sa.sin_addr.s_addr) == ip4("127.0.0.2"));
}

TEST_CASE("udp: planes: more than 8 or a repeated address is refused", "[udp][planes]") {
    UdpConfig c;
    c.plane_ips = {"127.0.0.1", "127.0.0.1"};
    CHECK_THROWS_WITH(UdpPort(c), Catch::Contains("plane address 127.0.0.1 given twice"));
    c.plane_ips.clear();
    for (int i = 1; i <= 9; ++i) c.plane_ips.push_back("127.0.0." + std::to_string(i));
    CHECK_THROWS_WITH(UdpPort(c), Catch::Contains("9 planes, at most 8"));
}

TEST_CASE("udp: entropy selects the source port; lazily bound, re-routable", "[udp]") {
    Pair p = make_pair();
    UdpPort& a = *p.a;
    RawSock sink;
    const uint32_t h = a.add_peer("127.0.0.1", sink.port);
    std::vector<uint8_t> buf;
    int tos = -1;
    uint16_t src = 0;
    const uint16_t span = a.config().path_port_span;
    for (uint16_t e : {uint16_t(0), uint16_t(3), uint16_t(3 + span), uint16_t(17)}) {
        TxPacket t = make_pkt(h, 2, e, 72, nullptr, 0);
        REQUIRE(a.send_burst(&t, 1) == 1);
        REQUIRE(sink.recv(buf, tos, src) == 72);
        CHECK(src == a.path_port(e));
        CHECK(src == a.config().path_port_base + e % span);
    }
    TxPacket t = make_pkt(h, kControlPath, 5, 20, nullptr, 0);
    REQUIRE(a.send_burst(&t, 1) == 1);
    REQUIRE(sink.recv(buf, tos, src) == 20);
    CHECK(src == a.config().listen_port);
}

TEST_CASE("udp: ECT(0) for ect=1 and Not-ECT for ect=0 on the wire", "[udp]") {
    Pair p = make_pair();
    RawSock sink;
    const uint32_t h = p.a->add_peer("127.0.0.1", sink.port);
    std::vector<uint8_t> pay(4096, 3);
    std::vector<uint8_t> buf;
    int tos = -1;
    uint16_t src = 0;
    for (uint16_t path : {uint16_t(1), kControlPath}) {
        for (uint8_t ect : {uint8_t(1), uint8_t(0), uint8_t(1)}) {
            CAPTURE(path, int(ect));
            TxPacket t = make_pkt(h, path, 1, 72, pay.data(), 4096);
            t.ect = ect;
            REQUIRE(p.a->send_burst(&t, 1) == 1);
            REQUIRE(sink.recv(buf, tos, src) == 72 + 4096);
            CHECK((tos & 3) == (ect ? 2 : 0));
        }
    }
    // A GSO run keeps its TOS; mixed ect in a run splits it.
    std::vector<TxPacket> run;
    for (int i = 0; i < 6; ++i) {
        run.push_back(make_pkt(h, 1, 1, 72, pay.data(), 1000, 0, 0, uint32_t(i)));
        run.back().ect = i < 3;
    }
    REQUIRE(p.a->send_burst(run.data(), run.size()) == run.size());
    for (int i = 0; i < 6; ++i) {
        REQUIRE(sink.recv(buf, tos, src) == 1072);
        CHECK(tag_of(buf) == uint32_t(i));
        CHECK((tos & 3) == (i < 3 ? 2 : 0));
    }
    // And the driver's own receive path reports not-CE for both.
    auto t = make_pkt(p.a_to_b, 0, 0, 72, pay.data(), 100);
    REQUIRE(p.a->send_burst(&t, 1) == 1);
    auto got = receive(*p.b, 1);
    REQUIRE(got.size() == 1);
    CHECK(got[0].ce == 0);
}

TEST_CASE("udp: CE marked by nftables is reported as ce=1", "[udp][root]") {
    if (!have_nft()) {
        WARN("skipped: needs root and nft to mark CE on loopback");
        return;
    }
    const bool gro = GENERATE(false, true);
    CAPTURE(gro);
    UdpConfig cb;
    cb.gro = gro;
    Pair p = make_pair({}, cb);
    const std::string table = "mroce_udp_test_" + std::to_string(getpid());
    const uint16_t dport = p.b->config().listen_port;
    const std::string add = "nft -f - <<'EOF'\ntable ip " + table +
                            " {\n chain output {\n  type filter hook output priority 0; policy accept;\n"
                            "  ip daddr 127.0.0.1 udp dport " +
                            std::to_string(dport) + " ip ecn set ce\n }\n}\nEOF";
    REQUIRE(std::system(add.c_str()) == 0);
    struct Cleanup {
        std::string t;
        ~Cleanup() { std::system(("nft delete table ip " + t).c_str()); }
    } cleanup{table};

    std::vector<uint8_t> pay(4096, 9);
    std::vector<TxPacket> tx;
    for (uint32_t i = 0; i < 10; ++i) tx.push_back(make_pkt(p.a_to_b, 0, 0, 72, pay.data(), 4096, 0, 0, i));
    REQUIRE(p.a->send_burst(tx.data(), tx.size()) == tx.size());
    auto got = receive(*p.b, tx.size());
    REQUIRE(got.size() == tx.size());
    for (const Got& g : got) CHECK(g.ce == 1);

    // Traffic the rule does not match stays unmarked.
    TxPacket back = make_pkt(p.b_to_a, 0, 0, 72, pay.data(), 64);
    REQUIRE(p.b->send_burst(&back, 1) == 1);
    got = receive(*p.a, 1);
    REQUIRE(got.size() == 1);
    CHECK(got[0].ce == 0);
}

TEST_CASE("udp: oversized datagrams are dropped and counted, later ones still delivered", "[udp]") {
    const bool gro = GENERATE(false, true);
    CAPTURE(gro);
    UdpConfig cb;
    cb.gro = gro;
    cb.max_datagram = 9216;
    Pair p = make_pair({}, cb);
    RawSock raw;
    const uint16_t to = p.b->config().listen_port;
    std::vector<uint8_t> big(12000, 0xEE), ok(500, 0x11);
    raw.send_to(to, big.data(), big.size());
    raw.send_to(to, ok.data(), ok.size());
    raw.send_to(to, big.data(), 9217);
    raw.send_to(to, big.data(), 9216);
    auto got = receive(*p.b, 2);
    REQUIRE(got.size() == 2);
    CHECK(got[0].bytes == ok);
    CHECK(got[1].bytes.size() == 9216);
    CHECK(p.b->stats().rx_truncated == 2);
    CHECK(p.b->stats().rx_packets == 2);
}

TEST_CASE("udp: a datagram at a path port is found within a few calls after listen-socket traffic", "[udp]") {
    // recv_burst skips epoll while the listen socket yields packets; once it comes up
    // empty epoll must decide again, or a reply sent to a path port (raw UDP peers, the
    // udp-ceiling ping-pong) waits for the periodic epoll look: 64 calls before the fix.
    UdpConfig cb;
    cb.open_paths = 1;
    Pair p = make_pair({}, cb);
    RawSock raw;
    const uint8_t a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8] = {9, 9, 9, 9, 9, 9, 9, 9};
    raw.send_to(p.b->config().listen_port, a, sizeof a);
    REQUIRE(receive(*p.b, 1).size() == 1);
    raw.send_to(p.b->path_port(0), b, sizeof b);
    RxPacket rx[64];
    size_t got = 0, calls = 0;
    while (got == 0 && calls < 4) {
        got = p.b->recv_burst(rx, 64);
        ++calls;
    }
    REQUIRE(got == 1);
    CHECK(rx[0].local_path == 0);
    CHECK(std::memcmp(rx[0].data, b, sizeof b) == 0);
}

TEST_CASE("udp: packets that cannot be sent are counted and reported as unsent", "[udp]") {
    Pair p = make_pair();
    UdpPort& a = *p.a;
    // Occupy the source port of entropy 5 so its lazy bind fails.
    const uint16_t busy_port = a.path_port(5);
    int busy = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(busy_port);
    REQUIRE(bind(busy, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);

    std::vector<uint8_t> pay(64, 2);
    std::vector<TxPacket> tx;
    tx.push_back(make_pkt(p.a_to_b, 0, 0, 72, pay.data(), 64, 0, 0, 0));
    tx.push_back(make_pkt(kNoPeer, 0, 0, 72, pay.data(), 64, 0, 0, 1));   // no handle
    tx.push_back(make_pkt(p.a_to_b, 1, 5, 72, pay.data(), 64, 0, 0, 2));  // bind fails
    tx.push_back(make_pkt(12345, 0, 0, 72, pay.data(), 64, 0, 0, 3));     // unknown handle
    tx.push_back(make_pkt(p.a_to_b, 1, 5, 72, pay.data(), 64, 0, 0, 4));
    tx.push_back(make_pkt(p.a_to_b, 2, 2, 72, pay.data(), 64, 0, 0, 5));
    std::vector<uint32_t> unsent(tx.size(), 99);
    CHECK(a.send_burst(tx.data(), tx.size(), unsent.data()) == 2);
    CHECK(unsent[0] == 1);
    CHECK(unsent[1] == 2);
    CHECK(unsent[2] == 3);
    CHECK(unsent[3] == 4);
    CHECK(a.stats().tx_errors == 4);
    CHECK(a.stats().tx_no_peer == 2);
    CHECK(a.last_error().find("127.0.0.1:" + std::to_string(busy_port)) != std::string::npos);
    CHECK(a.last_error().find("in use") != std::string::npos);
    auto got = receive(*p.b, 2);
    REQUIRE(got.size() == 2);
    close(busy);
}

TEST_CASE("udp: bind failure names the address and the cause", "[udp]") {
    Pair p = make_pair();
    UdpConfig dup = p.a->config();
    try {
        UdpPort again(dup);
        FAIL("second bind of the same port succeeded");
    } catch (const std::system_error& e) {
        const std::string what = e.what();
        CHECK(what.find("bind") != std::string::npos);
        CHECK(what.find("127.0.0.1:" + std::to_string(dup.listen_port)) != std::string::npos);
        CHECK(what.find("in use") != std::string::npos);
    }
    UdpConfig bad;
    bad.local_ip = "300.1.1.1";
    CHECK_THROWS_AS(UdpPort(bad), std::invalid_argument);
}

TEST_CASE("udp: wait() blocks until data, wake() or the timeout", "[udp]") {
    Pair p = make_pair();
    UdpPort& b = *p.b;
    using clk = std::chrono::steady_clock;
    auto t0 = clk::now();
    CHECK_FALSE(b.wait(20'000'000));
    CHECK(clk::now() - t0 >= std::chrono::milliseconds(19));

    std::thread waker([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        b.wake();
    });
    t0 = clk::now();
    CHECK(b.wait(2'000'000'000));
    CHECK(clk::now() - t0 < std::chrono::milliseconds(1000));
    waker.join();

    uint8_t pay[8] = {};
    TxPacket t = make_pkt(p.a_to_b, 0, 0, 16, pay, 8);
    REQUIRE(p.a->send_burst(&t, 1) == 1);
    t0 = clk::now();
    CHECK(b.wait(2'000'000'000));
    CHECK(clk::now() - t0 < std::chrono::milliseconds(1000));
    RxPacket rx[4];
    CHECK(b.recv_burst(rx, 4) == 1);
}

namespace {
// Stand-in engine: answers every datagram with the same bytes, has a fixed deadline.
struct EchoEngine {
    std::vector<TxPacket> q;
    Time deadline_after = 5'000'000;
    uint64_t rx = 0;
    std::vector<std::vector<uint8_t>> keep;
    void rx_burst(const RxPacket* p, size_t n, Time) {
        for (size_t i = 0; i < n; ++i) {
            ++rx;
            TxPacket t;
            t.peer = p[i].peer;
            t.path = 0;
            t.entropy = 0;
            t.hdr_len = uint16_t(std::min<uint32_t>(p[i].len, 72));
            std::memcpy(t.hdr, p[i].data, t.hdr_len);
            t.payload_len = 0;
            q.push_back(t);
        }
    }
    size_t tx_burst(TxPacket* out, size_t max, Time) {
        const size_t n = std::min(max, q.size());
        std::copy(q.begin(), q.begin() + long(n), out);
        q.erase(q.begin(), q.begin() + long(n));
        return n;
    }
    Time next_deadline(Time now) const { return now + deadline_after; }
};
static_assert(PacketEngine<EchoEngine>);
static_assert(PacketEngine<mroce::Engine>);  // the real engine plugs into EngineLoop unchanged

double cpu_seconds() {
    rusage ru{};
    getrusage(RUSAGE_THREAD, &ru);
    return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}
}  // namespace

TEST_CASE("udp: EngineLoop moves packets and sleeps when idle", "[udp]") {
    Pair p = make_pair();
    EchoEngine eng;
    std::atomic<bool> stop{false};
    std::atomic<double> loop_cpu{0};
    uint64_t blocks = 0;
    std::thread t([&] {
        IdlePolicy pol;
        pol.spin_ns = 200'000;
        EngineLoop<EchoEngine> loop(UdpDrivePort(*p.b, pol), eng);
        const double c0 = cpu_seconds();
        loop.run([](Time) { return false; }, [&] { return stop.load(); });
        loop_cpu = cpu_seconds() - c0;
        blocks = loop.port().waiter().blocks();
    });
    std::vector<uint8_t> pay(100, 4);
    std::vector<TxPacket> tx;
    for (uint32_t i = 0; i < 50; ++i) tx.push_back(make_pkt(p.a_to_b, uint16_t(i % 3), uint16_t(i % 3), 72, pay.data(), 100, 0, 0, i));
    REQUIRE(p.a->send_burst(tx.data(), tx.size()) == tx.size());
    auto got = receive(*p.a, tx.size());
    CHECK(got.size() == tx.size());
    // The echo goes back to the source (A's path ports), from B's path socket 0.
    for (const Got& g : got) CHECK(g.local_path != kListenLocalPath);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // idle: the loop must block
    stop = true;
    p.b->wake();
    t.join();
    CHECK(eng.rx == tx.size());
    CHECK(blocks > 0);
    CHECK(loop_cpu.load() < 0.15);  // spinning the whole 300 ms would cost ~0.3 s
}

TEST_CASE("udp: IdleWaiter yields the CPU on idle passes inside the spin window after yield_after_ns, only then", "[udp]") {
    Pair p = make_pair();
    for (const bool y : {true, false}) {
        IdlePolicy pol;
        pol.spin_ns = 1'000'000'000;  // the whole test is inside the spin window
        pol.yield = y;
        IdleWaiter w(pol);
        const Time t0 = 1'000'000;
        CHECK_FALSE(w.idle(*p.a, true, t0, UINT64_MAX));  // activity: no yield
        // The window opens at the first idle pass after work (SpinWindow).
        CHECK_FALSE(w.idle(*p.a, false, t0, UINT64_MAX));
        // Idle for less than yield_after_ns: spin without yielding (a reply is due any moment).
        CHECK_FALSE(w.idle(*p.a, false, t0 + pol.yield_after_ns - 1, UINT64_MAX));
        CHECK(w.yields() == 0);
        for (int i = 0; i < 5; ++i)
            CHECK_FALSE(w.idle(*p.a, false, t0 + pol.yield_after_ns + Time(i) * 1000, UINT64_MAX));
        CHECK_FALSE(w.idle(*p.a, true, t0 + 90'000, UINT64_MAX));
        CHECK(w.yields() == (y ? 5u : 0u));
        CHECK(w.blocks() == 0);
        CHECK_FALSE(w.idle(*p.a, false, t0 + 100'000, UINT64_MAX));
        // Past the spin window it blocks (here: polls with a zero-length wait), never yields.
        CHECK(w.idle(*p.a, false, t0 + 2'000'000'000, t0 + 2'000'000'000 + 1));
        CHECK(w.blocks() == 1);
        CHECK(w.yields() == (y ? 5u : 0u));
    }
}

// R-TIMER-5 / R-CONN-15: the clock an active call carries may be its pass's
// own, read before the pass's work (Device::idle after work). The window
// measured from it was used up by a pass of syscalls (a keepalive's send, then
// an ICMP error's receives) before it began: the loop blocked right after
// every pass with work, and a dead peer's silence, checked on quiet passes,
// went unnoticed (round 42).
TEST_CASE("udp: IdleWaiter's spin window opens at the first idle pass after work, not at the clock the active call "
          "carried (R-TIMER-5, R-CONN-15)", "[udp]") {
    Pair p = make_pair();
    IdlePolicy pol;
    IdleWaiter w(pol);
    const Time start = 1'000'000;               // the active pass's clock, read before its work
    const Time end = start + 3 * pol.spin_ns;   // when its work (and the next pass) was done
    CHECK_FALSE(w.idle(*p.a, true, start, start));
    CHECK_FALSE(w.idle(*p.a, false, end, end + 1));                     // the window opens: spin
    CHECK_FALSE(w.idle(*p.a, false, end + pol.spin_ns - 1, end + 1));  // still inside it
    CHECK(w.blocks() == 0);
    CHECK(w.idle(*p.a, false, end + pol.spin_ns, end + pol.spin_ns + 1));  // past it: blocks
    CHECK(w.blocks() == 1);
    // A wake-up by I/O reopens it at the next idle pass as well.
    std::vector<uint8_t> pay(8, 1);
    TxPacket t = make_pkt(p.b_to_a, 0, 0, 72, pay.data(), 8, 0, 0, 1);
    REQUIRE(p.b->send_burst(&t, 1) == 1);
    const Time later = end + 10 * pol.spin_ns;
    CHECK(w.idle(*p.a, false, later, later + 1'000'000'000));  // woken by the datagram
    CHECK(w.blocks() == 2);
    CHECK_FALSE(w.idle(*p.a, false, later + 5 * pol.spin_ns, UINT64_MAX));
    CHECK(w.blocks() == 2);
}

// The API's engine thread idles in wait() without the device lock while an
// application thread drives the port (Device::drive). The blocking wait used
// to list the sockets it found readable in the receiver's ready list, and
// poll into the receiver's epoll buffer, from the other thread (a data race:
// a torn ready list, an index out of range; found with the verbs provider).
TEST_CASE("udp: a blocking wait in another thread while one thread receives: every packet once, intact",
          "[udp][threads]") {
    Pair p = make_pair();
    std::vector<uint8_t> mem(4096);
    for (size_t i = 0; i < mem.size(); ++i) mem[i] = uint8_t(i * 13 + 1);
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> woken{0};
    std::thread idler([&] {
        while (!stop.load(std::memory_order_relaxed))
            if (p.b->wait(200'000)) woken.fetch_add(1, std::memory_order_relaxed);
    });
    constexpr uint32_t kBursts = 1500, kPerBurst = 12;
    std::vector<uint8_t> seen(kBursts * kPerBurst, 0);
    std::vector<RxPacket> rx(64);
    std::vector<TxPacket> tx(kPerBurst);
    size_t got = 0, bad = 0;
    for (uint32_t b = 0; b < kBursts; ++b) {
        for (uint32_t i = 0; i < kPerBurst; ++i) {
            const uint16_t path = uint16_t(i % 5);
            tx[i] = make_pkt(p.a_to_b, path, path, 72, mem.data() + i, 200 + 100 * i, 0, 0, b * kPerBurst + i);
        }
        REQUIRE(p.a->send_burst(tx.data(), tx.size()) == tx.size());
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (got < size_t(b + 1) * kPerBurst && std::chrono::steady_clock::now() < end) {
            const size_t n = p.b->recv_burst(rx.data(), rx.size());
            for (size_t k = 0; k < n; ++k) {
                const std::vector<uint8_t> bytes(rx[k].data, rx[k].data + rx[k].len);
                const uint32_t t = tag_of(bytes);
                if (t >= seen.size() || seen[t] || rx[k].len != 72 + 200 + 100 * (t % kPerBurst) ||
                    std::memcmp(rx[k].data + 72, mem.data() + t % kPerBurst, rx[k].len - 72) != 0) {
                    ++bad;
                    continue;
                }
                seen[t] = 1;
                ++got;
            }
        }
    }
    stop = true;
    p.b->wake();
    idler.join();
    CHECK(bad == 0);
    CHECK(got == seen.size());
    CHECK(woken.load() > 0);  // the idler did run into readable sockets meanwhile
}
