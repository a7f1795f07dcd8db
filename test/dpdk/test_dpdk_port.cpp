// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// DpdkPort over two net_ring ports wired back to back through a test
// "fabric": each direction is two rings (sender's TX ring -> fabric ->
// receiver's RX ring), so a test can inspect, mark (CE), drop or inject
// frames on the wire. One process, one EAL (initialised once, lazily).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_udp.h>

#include "mroce/dpdk/planes.hpp"
#include "mroce/dpdk/port.hpp"
#include "ring_pair.hpp"

using namespace mroce;
using namespace mroce::dpdk;

namespace {

constexpr uint16_t kQueues = 2;
constexpr unsigned kRingSize = 1024;
constexpr uint32_t kIpA = 0x0a000001;   // 10.0.0.1
constexpr uint32_t kIpB = 0x0a000002;   // 10.0.0.2
constexpr uint32_t kIpOther = 0x0a000009;

struct Env {
    // ring[dir][stage][queue]: dir 0 = A->B, 1 = B->A; stage 0 = sender TX, 1 = receiver RX.
    rte_ring* ring[2][2][kQueues]{};
    uint16_t pid_a = 0, pid_b = 0;
    std::unique_ptr<DpdkPort> a, b;
    rte_mempool* craft = nullptr;   // test-made frames

    Env() {
        EalConfig ec;
        ec.program = "mroce-test-dpdk";
        ec.args = {"-l", "0", "--no-huge", "--no-pci", "-m", "256",
                   "--file-prefix", fmt::format("mroce-test-{}", ::getpid()), "--log-level", "lib.eal:warning"};
        eal_init(ec);
        for (int d = 0; d < 2; ++d)
            for (int s = 0; s < 2; ++s)
                for (uint16_t q = 0; q < kQueues; ++q) {
                    const std::string n = fmt::format("t_r{}{}{}", d, s, q);
                    ring[d][s][q] = rte_ring_create(n.c_str(), kRingSize, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
                    if (!ring[d][s][q]) throw DpdkError("rte_ring_create " + n + ": " + rte_strerror(rte_errno));
                }
        const int pa = rte_eth_from_rings("t_port_a", ring[1][1], kQueues, ring[0][0], kQueues, 0);
        const int pb = rte_eth_from_rings("t_port_b", ring[0][1], kQueues, ring[1][0], kQueues, 0);
        if (pa < 0 || pb < 0) throw DpdkError(std::string("rte_eth_from_rings: ") + rte_strerror(rte_errno));
        pid_a = uint16_t(pa);
        pid_b = uint16_t(pb);
        rte_ether_addr ma{}, mb{};
        rte_eth_macaddr_get(pid_a, &ma);
        rte_eth_macaddr_get(pid_b, &mb);
        MacAddr mac_a, mac_b;
        std::memcpy(mac_a.data(), ma.addr_bytes, 6);
        std::memcpy(mac_b.data(), mb.addr_bytes, 6);

        PortConfig c;
        c.rx_queues = c.tx_queues = kQueues;
        c.rx_desc = c.tx_desc = 512;
        c.burst = 32;
        c.mtu = 9000;
        c.pools.cache = 32;
        PortConfig ca = c, cb = c;
        ca.port_id = pid_a;
        ca.local_ip = kIpA;
        // B deliberately at index 1, so peer handles are checked as indices.
        ca.neighbours = {{kIpOther, parse_mac("02:00:00:00:00:09")}, {kIpB, mac_b}};
        cb.port_id = pid_b;
        cb.local_ip = kIpB;
        cb.neighbours = {{kIpA, mac_a}};
        for (PortConfig* p : {&ca, &cb}) {
            const PoolConfig need = DpdkPort::min_pools(*p);
            p->pools.rx_mbufs = need.rx_mbufs;
            p->pools.hdr_mbufs = need.hdr_mbufs;
            p->pools.ext_mbufs = need.ext_mbufs;
        }
        a = std::make_unique<DpdkPort>(ca);
        b = std::make_unique<DpdkPort>(cb);
        craft = rte_pktmbuf_pool_create("t_craft", 256, 0, 0, 2048 + RTE_PKTMBUF_HEADROOM, 0);
        if (!craft) throw DpdkError(std::string("craft pool: ") + rte_strerror(rte_errno));
    }
    ~Env() {
        drain_all();
        a.reset();
        b.reset();
        rte_mempool_free(craft);
        for (auto& d : ring)
            for (auto& s : d)
                for (auto* r : s) rte_ring_free(r);
        eal_cleanup();
    }
    void drain_all() {
        rte_mbuf* m[64];
        for (auto& d : ring)
            for (auto& s : d)
                for (auto* r : s)
                    while (unsigned n = rte_ring_dequeue_burst(r, reinterpret_cast<void**>(m), 64, nullptr))
                        rte_pktmbuf_free_bulk(m, n);
        for (uint16_t q = 0; q < kQueues; ++q) {
            a->rx_release(q);
            b->rx_release(q);
        }
    }
    // Moves frames of one direction/queue across the fabric; f may edit them.
    size_t fabric(int dir, uint16_t q, const std::function<void(rte_mbuf*)>& f = {}) {
        rte_mbuf* m[64];
        size_t total = 0;
        while (unsigned n = rte_ring_dequeue_burst(ring[dir][0][q], reinterpret_cast<void**>(m), 64, nullptr)) {
            if (f)
                for (unsigned i = 0; i < n; ++i) f(m[i]);
            const unsigned e = rte_ring_enqueue_burst(ring[dir][1][q], reinterpret_cast<void**>(m), n, nullptr);
            REQUIRE(e == n);
            total += n;
        }
        return total;
    }
    void inject(int dir, uint16_t q, rte_mbuf* m) {
        REQUIRE(rte_ring_enqueue(ring[dir][1][q], m) == 0);
    }
};

Env& env() {
    static Env e;
    return e;
}

// Checks that every mbuf taken during a test is back in its pool.
struct LeakGuard {
    PoolUsage a0, b0;
    unsigned c0;
    LeakGuard() : a0(env().a->pool_usage()), b0(env().b->pool_usage()), c0(rte_mempool_in_use_count(env().craft)) {
        env().a->reset_stats();
        env().b->reset_stats();
    }
    ~LeakGuard() {
        env().drain_all();
        const PoolUsage a1 = env().a->pool_usage(), b1 = env().b->pool_usage();
        CHECK(a1.rx == a0.rx);
        CHECK(a1.hdr == a0.hdr);
        CHECK(a1.ext == a0.ext);
        CHECK(b1.rx == b0.rx);
        CHECK(b1.hdr == b0.hdr);
        CHECK(b1.ext == b0.ext);
        CHECK(rte_mempool_in_use_count(env().craft) == c0);
    }
};

TxPacket make_pkt(uint32_t peer, uint16_t entropy, const uint8_t* payload, uint32_t len, uint8_t seed,
                  uint16_t hdr_len = 72) {
    TxPacket p;
    p.peer = peer;
    p.path = entropy % 4;
    p.entropy = entropy;
    p.hdr_len = hdr_len;
    for (uint16_t i = 0; i < hdr_len; ++i) p.hdr[i] = uint8_t(seed * 31 + i);
    p.payload = payload;
    p.payload_len = len;
    p.ect = 1;
    return p;
}

const rte_ipv4_hdr* ip_of(rte_mbuf* m) { return rte_pktmbuf_mtod_offset(m, const rte_ipv4_hdr*, 14); }

// A valid frame A -> B with a UDP payload of `len` bytes, single segment, then edited by f.
rte_mbuf* craft_frame(uint32_t len, const std::function<void(uint8_t*, rte_mbuf*)>& f = {},
                      rte_mempool* pool = nullptr) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool ? pool : env().craft);
    REQUIRE(m);
    const uint32_t frame = 42 + len;
    uint8_t* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, uint16_t(frame)));
    REQUIRE(d);
    std::memset(d, 0, frame);
    auto* eth = reinterpret_cast<rte_ether_hdr*>(d);
    eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(d + 14);
    ip->version_ihl = RTE_IPV4_VHL_DEF;
    ip->total_length = rte_cpu_to_be_16(uint16_t(28 + len));
    ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
    ip->time_to_live = 64;
    ip->next_proto_id = IPPROTO_UDP;
    ip->src_addr = rte_cpu_to_be_32(kIpA);
    ip->dst_addr = rte_cpu_to_be_32(kIpB);
    auto* udp = reinterpret_cast<rte_udp_hdr*>(d + 34);
    udp->src_port = rte_cpu_to_be_16(50000);
    udp->dst_port = rte_cpu_to_be_16(wire::kDefaultUdpPort);
    udp->dgram_len = rte_cpu_to_be_16(uint16_t(8 + len));
    for (uint32_t i = 0; i < len; ++i) d[42 + i] = uint8_t(i);
    if (f) f(d, m);
    // Checksum last so the edits above are tested for their own effect, not as checksum errors.
    ip->hdr_checksum = 0;
    ip->hdr_checksum = rte_ipv4_cksum(ip);
    return m;
}

// The released RX mbufs a queue holds gathered (port.cpp, RxQueue::ret):
// put back to the pool 32 at a time, so in use beside the pool's count.
struct GatheredCount {
    unsigned held = 0;
    bool put = false;  // a put of 32 happened
    void add(unsigned n) {
        held += n;
        if (held > 32) {
            held -= 32;
            put = true;
        }
    }
};

void send_all(DpdkPort& p, uint16_t q, const std::vector<TxPacket>& v) {
    REQUIRE(p.tx_burst(q, v.data(), v.size()) == v.size());
}

}  // namespace

TEST_CASE("dpdk: EAL arguments get a memory mode and a private file prefix", "[dpdk]") {
    auto has = [](const std::vector<std::string>& v, const std::string& a) {
        return std::find(v.begin(), v.end(), a) != v.end();
    };
    EalConfig c;
    c.args = {"--no-huge", "--no-pci"};
    c.memory_mb = 300;
    auto v = eal_args(c);
    CHECK(v[0] == "mroce");
    CHECK(has(v, "-m"));
    CHECK(has(v, "300"));   // --no-huge alone would give 64 MB
    CHECK(has(v, "--file-prefix"));
    CHECK(has(v, fmt::format("mroce-{}", ::getpid())));

    c.args = {"--no-huge", "-m", "128", "--in-memory", "--file-prefix=x"};
    v = eal_args(c);
    CHECK_FALSE(has(v, "--in-memory"));   // refused with --no-huge in 22.11
    CHECK(has(v, "--no-shconf"));
    CHECK_FALSE(has(v, "300"));
    CHECK_FALSE(has(v, "--file-prefix"));

    c.args = {"--no-pci"};
    c.file_prefix = "p1";
    v = eal_args(c);
    CHECK(has(v, "p1"));
    if (free_hugepage_bytes() >= (uint64_t(c.memory_mb) << 20))
        CHECK_FALSE(has(v, "--no-huge"));
    else
        CHECK(has(v, "--no-huge"));

    // A second initialisation is refused with a message saying so.
    env();
    CHECK_THROWS_WITH(eal_init(c), Catch::Contains("already initialised"));
}

TEST_CASE("dpdk: ports come up with explicit pools and report their offloads", "[dpdk]") {
    Env& e = env();
    INFO("driver " << e.a->caps().driver << " mtu " << e.a->caps().mtu);
    CHECK(e.a->caps().mtu == 9000);
    CHECK(e.a->caps().iova_va);
    CHECK(e.a->peer_of(kIpB) == 1);
    CHECK(e.b->peer_of(kIpA) == 0);
    CHECK(e.b->peer_of(kIpOther) == UINT32_MAX);
    // Undersized pools are refused with a message naming the shortfall.
    PortConfig bad = e.a->config();
    bad.pools.hdr_mbufs = 10;
    try {
        DpdkPort p(bad);
        FAIL("undersized pool accepted");
    } catch (const DpdkError& err) {
        CHECK_THAT(err.what(), Catch::Contains("hdr_mbufs 10 (need"));
    }
}

TEST_CASE("dpdk: bursts of 64 B and 4 KiB payloads arrive byte-exact, zero-copy on TX", "[dpdk]") {
    Env& e = env();
    LeakGuard guard;
    const uint32_t len = GENERATE(0u, 64u, 4096u, 8900u);
    const uint16_t q = GENERATE(uint16_t(0), uint16_t(1));
    constexpr size_t kBurst = 32;
    std::vector<uint8_t> mem(kBurst * len + 1);
    std::mt19937 rng(len + q);
    for (auto& x : mem) x = uint8_t(rng());
    std::vector<TxPacket> tx;
    for (size_t i = 0; i < kBurst; ++i)
        tx.push_back(make_pkt(1, uint16_t(100 + i), len ? mem.data() + i * len : nullptr, len, uint8_t(i)));
    send_all(*e.a, q, tx);
    CHECK(e.a->stats().tx_packets == kBurst);

    size_t seen = 0;
    e.fabric(0, q, [&](rte_mbuf* m) {
        // On the wire: Ethernet/IPv4/UDP built from the template, payload attached, not copied.
        const size_t i = seen++;
        const auto* ip = ip_of(m);
        const auto* udp = reinterpret_cast<const rte_udp_hdr*>(ip + 1);
        CHECK(rte_be_to_cpu_32(ip->src_addr) == kIpA);
        CHECK(rte_be_to_cpu_32(ip->dst_addr) == kIpB);
        CHECK((ip->type_of_service & 3) == 2);  // ECT(0)
        CHECK(rte_raw_cksum(ip, 20) == 0xffff);
        CHECK(rte_be_to_cpu_16(ip->total_length) == 28 + 72 + len);
        CHECK(rte_be_to_cpu_16(udp->src_port) == 49152 + 100 + i);
        CHECK(rte_be_to_cpu_16(udp->dst_port) == wire::kDefaultUdpPort);
        CHECK(rte_be_to_cpu_16(udp->dgram_len) == 8 + 72 + len);
        CHECK(m->pkt_len == 42 + 72 + len);
        if (len) {
            REQUIRE(m->nb_segs == 2);
            CHECK(RTE_MBUF_HAS_EXTBUF(m->next));
            CHECK(rte_pktmbuf_mtod(m->next, const uint8_t*) == mem.data() + i * len);
        } else {
            CHECK(m->nb_segs == 1);
        }
    });
    CHECK(seen == kBurst);

    RxPacket rx[64];
    const size_t n = e.b->rx_burst(q, rx, 64);
    REQUIRE(n == kBurst);
    for (size_t i = 0; i < n; ++i) {
        // net_ring hands over the TX chain as is: the header segment and the
        // payload's external buffer reach the engine as two spans, not copied.
        REQUIRE(rx[i].len == 72);
        REQUIRE(rx[i].len2 == len);
        CHECK(rx[i].peer == 0);
        CHECK(rx[i].ce == 0);
        CHECK(rx[i].local_path == q);
        CHECK(std::memcmp(rx[i].data, tx[i].hdr, 72) == 0);
        if (len) CHECK(rx[i].data2 == mem.data() + i * len);
    }
    e.b->rx_release(q);
    const PortStats s = e.b->stats();
    CHECK(s.rx_packets == kBurst);
    CHECK(s.rx_bytes == kBurst * (72 + len));
    CHECK(s.rx_dropped() == 0);
    CHECK(s.rx_split == (len ? kBurst : 0));
    CHECK(s.rx_linearized == 0);
}

TEST_CASE("dpdk: the payload segments a peer still holds are counted until it frees them (R-MEM-6)", "[dpdk]") {
    // Zero-copy TX: the frames' payloads are the sender's memory until the
    // PMD (here the peer that receives them) frees the mbufs; deregistration
    // waits for that before the application frees the region.
    Env& e = env();
    LeakGuard guard;
    constexpr uint32_t kLen = 3000;
    constexpr size_t kPkts = 7;
    std::vector<uint8_t> mem(kPkts * kLen, 0x5a);
    std::vector<TxPacket> tx;
    for (size_t i = 0; i < kPkts; ++i) tx.push_back(make_pkt(1, uint16_t(i), mem.data() + i * kLen, kLen, uint8_t(i)));
    tx.push_back(make_pkt(1, 9, nullptr, 0, 9));   // no payload: nothing held
    CHECK(e.a->tx_payload_held(0) == 0);
    send_all(*e.a, 1, tx);
    CHECK(e.a->tx_payload_held(2000) == kPkts);   // waits 2 ms: nobody frees them
    CHECK(e.fabric(0, 1) == kPkts + 1);
    CHECK(e.a->tx_payload_held(0) == kPkts);      // in the peer's RX ring
    RxPacket rx[16];
    REQUIRE(e.b->rx_burst(1, rx, 16) == kPkts + 1);
    CHECK(e.a->tx_payload_held(0) == kPkts);      // received, not yet released
    e.b->rx_release(1);
    CHECK(e.a->tx_payload_held(1'000'000) == 0);  // returns as soon as none is held
}

TEST_CASE("dpdk: connection control leaves from the well-known port", "[dpdk]") {
    Env& e = env();
    LeakGuard guard;
    TxPacket p[2] = {make_pkt(1, 5, nullptr, 0, 1, 40), make_pkt(1, 5, nullptr, 0, 2, 40)};
    p[0].path = kControlPath;
    REQUIRE(e.a->tx_burst(0, p, 2) == 2);
    int i = 0;
    e.fabric(0, 0, [&](rte_mbuf* m) {
        const auto* udp = reinterpret_cast<const rte_udp_hdr*>(ip_of(m) + 1);
        CHECK(rte_be_to_cpu_16(udp->src_port) == (i++ == 0 ? wire::kDefaultUdpPort : 49152 + 5));
    });
    RxPacket rx[2];
    CHECK(e.b->rx_burst(0, rx, 2) == 2);
}

TEST_CASE("dpdk: single-segment frames are handed over in place", "[dpdk]") {
    Env& e = env();
    LeakGuard guard;
    rte_mbuf* m = craft_frame(200);
    e.inject(0, 0, m);
    RxPacket rx[4];
    REQUIRE(e.b->rx_burst(0, rx, 4) == 1);
    CHECK(rx[0].data == rte_pktmbuf_mtod_offset(m, const uint8_t*, 42));
    CHECK(rx[0].len == 200);
    CHECK(e.b->stats().rx_linearized == 0);
    e.b->rx_release(0);
}

// The same bytes as m (one segment) in a chain whose segments end at the given frame offsets.
rte_mbuf* rechain(rte_mbuf* m, std::vector<uint32_t> ends, rte_mempool* pool = nullptr) {
    const uint8_t* src = rte_pktmbuf_mtod(m, const uint8_t*);
    ends.push_back(m->data_len);
    rte_mbuf* head = nullptr;
    uint32_t pos = 0;
    for (uint32_t end : ends) {
        rte_mbuf* seg = rte_pktmbuf_alloc(pool ? pool : env().craft);
        REQUIRE(seg);
        uint8_t* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(seg, uint16_t(end - pos)));
        REQUIRE(d);
        std::memcpy(d, src + pos, end - pos);
        if (!head) head = seg;
        else REQUIRE(rte_pktmbuf_chain(head, seg) == 0);
        pos = end;
    }
    rte_pktmbuf_free(m);
    return head;
}

TEST_CASE("dpdk: a chain is two spans when its first segment holds the header, else linearised", "[dpdk]") {
    Env& e = env();
    LeakGuard guard;
    constexpr uint32_t kLen = 72 + 1000;   // a data header and 1000 payload bytes
    struct Shape {
        std::vector<uint32_t> ends;   // segment ends in the frame (42 bytes of headers first)
        uint32_t len1;                // 0: linearised
    };
    const Shape shapes[] = {
        {{42 + 72}, 72},               // header segment + payload segment: our TX chain
        {{42 + 72 + 500}, 572},        // first segment holds the header and part of the payload
        {{42 + kLen - 1}, kLen - 1},   // all but the last byte
        {{42 + 71}, 0},                // the header cut short: linearised
        {{42}, 0},                     // Ethernet/IP/UDP alone in the first
        {{42 + 72, 42 + 600}, 0},      // three segments: linearised
    };
    for (const Shape& sh : shapes) {
        CAPTURE(sh.ends);
        e.b->reset_stats();
        rte_mbuf* m = rechain(craft_frame(kLen), sh.ends);
        e.inject(0, 0, m);
        RxPacket rx[4];
        REQUIRE(e.b->rx_burst(0, rx, 4) == 1);
        const PortStats st = e.b->stats();
        std::vector<uint8_t> got(rx[0].data, rx[0].data + rx[0].len);
        if (rx[0].len2) got.insert(got.end(), rx[0].data2, rx[0].data2 + rx[0].len2);
        REQUIRE(got.size() == kLen);
        for (uint32_t i = 0; i < kLen; ++i) REQUIRE(got[i] == uint8_t(i));
        if (sh.len1) {
            CHECK(rx[0].len == sh.len1);
            CHECK(rx[0].data == rte_pktmbuf_mtod_offset(m, const uint8_t*, 42));
            CHECK(rx[0].data2 == rte_pktmbuf_mtod(m->next, const uint8_t*));
            CHECK(st.rx_split == 1);
            CHECK(st.rx_linearized == 0);
        } else {
            CHECK(rx[0].len == kLen);
            CHECK(rx[0].len2 == 0);
            CHECK(st.rx_split == 0);
            CHECK(st.rx_linearized == 1);
        }
        e.b->rx_release(0);
    }
}

TEST_CASE("dpdk: ECT(0) on request, Not-ECT otherwise, CE reported", "[dpdk]") {
    Env& e = env();
    LeakGuard guard;
    uint8_t payload[64] = {1, 2, 3};
    std::vector<TxPacket> tx;
    for (int i = 0; i < 8; ++i) {
        tx.push_back(make_pkt(0, 7, payload, 64, uint8_t(i)));
        tx.back().peer = 1;
        tx.back().ect = uint8_t(i % 2);
    }
    send_all(*e.a, 0, tx);
    int idx = 0;
    e.fabric(0, 0, [&](rte_mbuf* m) {
        auto* ip = rte_pktmbuf_mtod_offset(m, rte_ipv4_hdr*, 14);
        const int i = idx++;
        CHECK((ip->type_of_service & 3) == (i % 2 ? 2 : 0));
        // A switch marks CE on ECT packets 1 and 5 (editing TOS + checksum as it would).
        if (i == 1 || i == 5) {
            ip->type_of_service |= 3;
            ip->hdr_checksum = 0;
            ip->hdr_checksum = rte_ipv4_cksum(ip);
        }
    });
    RxPacket rx[16];
    REQUIRE(e.b->rx_burst(0, rx, 16) == 8);
    for (int i = 0; i < 8; ++i) CHECK(rx[i].ce == (i == 1 || i == 5 ? 1 : 0));
    CHECK(e.b->stats().rx_ce == 2);
    e.b->rx_release(0);
}

// A one-queue ethdev over its own ring r (looped back: what it sends it
// receives), for a test's own port.
static int ring_port(const char* ring_name, const char* port_name, rte_ring*& r) {
    r = rte_ring_create(ring_name, 64, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
    REQUIRE(r);
    const int pid = rte_eth_from_rings(port_name, &r, 1, &r, 1, 0);
    REQUIRE(pid >= 0);
    return pid;
}

// A port's configuration for a one-queue test port over ring-backed ethdev
// pid, its pools at their minimum.
static PortConfig one_queue_config(PortConfig c, int pid) {
    c.port_id = uint16_t(pid);
    c.rx_queues = c.tx_queues = 1;
    const PoolConfig need = DpdkPort::min_pools(c);
    c.pools.rx_mbufs = need.rx_mbufs;
    c.pools.hdr_mbufs = need.hdr_mbufs;
    c.pools.ext_mbufs = need.ext_mbufs;
    return c;
}

TEST_CASE("dpdk: DSCP from config combines with ECN bits; a port can be built and torn down", "[dpdk]") {
    Env& e = env();
    // A third port on its own ring, with DSCP 46 (EF), built and destroyed here.
    rte_ring* r = nullptr;
    const int pid = ring_port("t_dscp", "t_port_c", r);
    const unsigned mp_before = [] {
        unsigned n = 0;
        rte_mempool_walk([](rte_mempool*, void* arg) { ++*static_cast<unsigned*>(arg); }, &n);
        return n;
    }();
    {
        PortConfig c = one_queue_config(e.a->config(), pid);
        c.dscp = 46;
        DpdkPort p(c);
        TxPacket t[2] = {make_pkt(1, 3, nullptr, 0, 1), make_pkt(1, 3, nullptr, 0, 2)};
        t[1].ect = 0;
        REQUIRE(p.tx_burst(0, t, 2) == 2);
        rte_mbuf* m[2];
        REQUIRE(rte_ring_dequeue_burst(r, reinterpret_cast<void**>(m), 2, nullptr) == 2);
        CHECK(ip_of(m[0])->type_of_service == ((46 << 2) | 2));
        CHECK(ip_of(m[1])->type_of_service == (46 << 2));
        CHECK(rte_raw_cksum(ip_of(m[0]), 20) == 0xffff);
        rte_pktmbuf_free_bulk(m, 2);
        CHECK(p.pool_usage() == PoolUsage{});
        unsigned during = 0;
        rte_mempool_walk([](rte_mempool*, void* arg) { ++*static_cast<unsigned*>(arg); }, &during);
        CHECK(during == mp_before + 3);
    }
    // The destructor closed the port and freed its three pools.
    unsigned mp_after = 0;
    rte_mempool_walk([](rte_mempool*, void* arg) { ++*static_cast<unsigned*>(arg); }, &mp_after);
    CHECK(mp_after == mp_before);
    rte_ring_free(r);
}

TEST_CASE("dpdk: payloads up to tx_inline_max are copied into the header mbuf, longer ones attached", "[dpdk]") {
    Env& e = env();
    rte_ring* r = nullptr;
    const int pid = ring_port("t_inline", "t_port_inl", r);
    {
        PortConfig c = one_queue_config(e.a->config(), pid);
        c.tx_inline_max = 1025;
        CHECK_THROWS_AS(DpdkPort(c), DpdkError);
        c.tx_inline_max = 64;
        DpdkPort p(c);
        std::vector<uint8_t> mem(64 + 65);
        for (size_t i = 0; i < mem.size(); ++i) mem[i] = uint8_t(i * 7 + 1);
        const std::vector<uint8_t> want = mem;
        const uint32_t len[4] = {0, 64, 65, 1};
        TxPacket t[4] = {make_pkt(1, 3, nullptr, 0, 1), make_pkt(1, 4, mem.data(), 64, 2),
                         make_pkt(1, 5, mem.data() + 64, 65, 3), make_pkt(1, 6, mem.data(), 1, 4, 40)};
        t[1].ect = 0;
        t[3].path = kControlPath;
        REQUIRE(p.tx_burst(0, t, 4) == 4);
        std::memset(mem.data(), 0, 64);   // copied payloads keep their bytes, attached ones are the memory
        rte_mbuf* m[4];
        REQUIRE(rte_ring_dequeue_burst(r, reinterpret_cast<void**>(m), 4, nullptr) == 4);
        CHECK(p.pool_usage().ext == 1);
        for (int i = 0; i < 4; ++i) {
            INFO("packet " << i);
            const uint8_t* d = rte_pktmbuf_mtod(m[i], const uint8_t*);
            CHECK(rte_raw_cksum(ip_of(m[i]), 20) == 0xffff);
            CHECK(rte_be_to_cpu_16(ip_of(m[i])->total_length) == 28 + t[i].hdr_len + len[i]);
            CHECK(m[i]->pkt_len == 42 + t[i].hdr_len + len[i]);
            CHECK(std::memcmp(d + 42, t[i].hdr, t[i].hdr_len) == 0);
            if (i == 2) {
                REQUIRE(m[i]->nb_segs == 2);
                CHECK(m[i]->data_len == 42 + 72);
                CHECK(RTE_MBUF_HAS_EXTBUF(m[i]->next));
                CHECK(rte_pktmbuf_mtod(m[i]->next, const uint8_t*) == mem.data() + 64);
            } else {
                CHECK(m[i]->nb_segs == 1);
                CHECK(m[i]->data_len == m[i]->pkt_len);
                CHECK(std::memcmp(d + 42 + t[i].hdr_len, want.data(), len[i]) == 0);
            }
        }
        rte_pktmbuf_free_bulk(m, 4);
        CHECK(p.pool_usage() == PoolUsage{});
    }
    rte_ring_free(r);
}

// tx_burst finishes a per-neighbour template with a few stores and fills
// raw header mbufs itself: every frame must still come out as if built
// field by field, for each neighbour, path, ECN codepoint and length (odd
// ones too), and a recycled mbuf must carry nothing of its previous use.
TEST_CASE("dpdk: built frames carry each neighbour's addresses, the path's port, the lengths, a valid checksum",
          "[dpdk]") {
    Env& e = env();
    rte_ring* r = nullptr;
    const int pid = ring_port("t_frames", "t_port_frm", r);
    {
        PortConfig c = one_queue_config(e.a->config(), pid);
        c.local_ip = 0xc0a80a01;   // 192.168.10.1
        c.neighbours = {{0x0a000002, parse_mac("02:00:00:00:00:02")},
                        {0xc0a80a63, parse_mac("0e:11:22:33:44:55")},
                        {0xfffffffe, parse_mac("02:ff:ff:ff:ff:fe")}};
        c.dscp = 10;
        c.ttl = 17;
        c.udp_port = 4792;
        c.src_port_base = 40000;
        c.src_port_mask = 0x00ff;
        c.tx_inline_max = 256;
        DpdkPort p(c);
        const MacAddr mac = p.mac();
        std::vector<uint8_t> mem(1200);
        for (size_t i = 0; i < mem.size(); ++i) mem[i] = uint8_t(i * 13 + 5);
        const uint16_t hdr_lens[] = {12, 40, 71, 72};
        // Each size class of the inline copy (copy_payload: 1-3, 4-7, 8-15, 16-31, 32-64, longer) at its ends.
        const uint32_t pay_lens[] = {0, 1, 3, 4, 7, 8, 15, 16, 31, 32, 63, 64, 65, 255, 256, 257, 1001};
        const uint16_t paths[] = {0, 1, 3, kControlPath};
        const uint16_t entropies[] = {0, 0x1234, 0xffff};
        std::vector<TxPacket> all;
        int seed = 0;
        for (uint32_t peer = 0; peer < 3; ++peer)
            for (uint16_t hl : hdr_lens)
                for (uint32_t pl : pay_lens) {
                    TxPacket t = make_pkt(peer, entropies[seed % 3], pl ? mem.data() + seed % 7 : nullptr, pl,
                                          uint8_t(seed), hl);
                    t.path = paths[seed % 4];
                    t.ect = uint8_t(seed / 4 % 2);
                    all.push_back(t);
                    ++seed;
                }
        for (int round = 0; round < 2; ++round) {
            for (size_t base = 0; base < all.size(); base += 48) {   // the ring holds 63
                const size_t n = std::min<size_t>(48, all.size() - base);
                REQUIRE(p.tx_burst(0, all.data() + base, n) == n);
                rte_mbuf* m[48];
                REQUIRE(rte_ring_dequeue_burst(r, reinterpret_cast<void**>(m), unsigned(n), nullptr) == n);
                for (size_t i = 0; i < n; ++i) {
                    const TxPacket& t = all[base + i];
                    INFO("round " << round << " packet " << base + i << " peer " << t.peer << " path " << t.path
                                  << " hdr " << t.hdr_len << " payload " << t.payload_len << " ect " << int(t.ect));
                    const Neighbour& nb = c.neighbours[t.peer];
                    const uint32_t udp_len = 8 + t.hdr_len + t.payload_len;
                    std::vector<uint8_t> f(m[i]->pkt_len);
                    REQUIRE(m[i]->pkt_len == 42 + t.hdr_len + t.payload_len);
                    const uint8_t* fp = static_cast<const uint8_t*>(rte_pktmbuf_read(m[i], 0, m[i]->pkt_len, f.data()));
                    REQUIRE(fp);
                    const auto* eth = reinterpret_cast<const rte_ether_hdr*>(fp);
                    CHECK(std::memcmp(eth->dst_addr.addr_bytes, nb.mac.data(), 6) == 0);
                    CHECK(std::memcmp(eth->src_addr.addr_bytes, mac.data(), 6) == 0);
                    CHECK(rte_be_to_cpu_16(eth->ether_type) == RTE_ETHER_TYPE_IPV4);
                    rte_ipv4_hdr ip;
                    std::memcpy(&ip, fp + 14, 20);
                    CHECK(ip.version_ihl == 0x45);
                    CHECK(ip.type_of_service == ((10 << 2) | (t.ect ? 2 : 0)));
                    CHECK(rte_be_to_cpu_16(ip.total_length) == 20 + udp_len);
                    CHECK(ip.packet_id == 0);
                    CHECK(rte_be_to_cpu_16(ip.fragment_offset) == RTE_IPV4_HDR_DF_FLAG);
                    CHECK(ip.time_to_live == 17);
                    CHECK(ip.next_proto_id == IPPROTO_UDP);
                    CHECK(rte_be_to_cpu_32(ip.src_addr) == c.local_ip);
                    CHECK(rte_be_to_cpu_32(ip.dst_addr) == nb.ip);
                    const uint16_t sent_ck = ip.hdr_checksum;
                    ip.hdr_checksum = 0;
                    CHECK(sent_ck == rte_ipv4_cksum(&ip));   // DPDK's own, from scratch
                    CHECK(rte_raw_cksum(fp + 14, 20) == 0xffff);
                    rte_udp_hdr udp;
                    std::memcpy(&udp, fp + 34, 8);
                    const uint16_t sport = t.path == kControlPath ? 4792 : uint16_t(40000 + (t.entropy & 0xff));
                    CHECK(rte_be_to_cpu_16(udp.src_port) == sport);
                    CHECK(rte_be_to_cpu_16(udp.dst_port) == 4792);
                    CHECK(rte_be_to_cpu_16(udp.dgram_len) == udp_len);
                    CHECK(udp.dgram_cksum == 0);
                    CHECK(std::memcmp(fp + 42, t.hdr, t.hdr_len) == 0);
                    if (t.payload_len) CHECK(std::memcmp(fp + 42 + t.hdr_len, t.payload, t.payload_len) == 0);
                    // The mbuf fields rte_pktmbuf_reset would have set, and the frame's.
                    const bool attached = t.payload_len > 256;
                    CHECK(m[i]->nb_segs == (attached ? 2 : 1));
                    CHECK(m[i]->data_len == 42 + t.hdr_len + (attached ? 0 : t.payload_len));
                    if (!attached) CHECK(m[i]->next == nullptr);
                    CHECK(m[i]->data_off == RTE_PKTMBUF_HEADROOM);
                    CHECK(rte_mbuf_refcnt_read(m[i]) == 1);
                    CHECK(m[i]->ol_flags == 0);   // net_ring offloads nothing
                    CHECK(m[i]->tx_offload == 0);
                    CHECK(m[i]->packet_type == 0);
                    CHECK(m[i]->vlan_tci == 0);
                    CHECK(m[i]->vlan_tci_outer == 0);
                    CHECK(m[i]->port == RTE_MBUF_PORT_INVALID);
                    // Leave junk in the fields a receiver may set, for round 2's mbufs.
                    m[i]->packet_type = 0x211;
                    m[i]->vlan_tci = 0xabc;
                    m[i]->vlan_tci_outer = 0xdef;
                    m[i]->ol_flags |= RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_IP_CKSUM_BAD;
                    m[i]->tx_offload = 0x123456789;
                    m[i]->port = 3;
                    m[i]->data_off = 0;
                }
                rte_pktmbuf_free_bulk(m, unsigned(n));
            }
            std::reverse(all.begin(), all.end());   // round 2: other lengths on the recycled mbufs
        }
        CHECK(p.stats().tx_packets == 2 * all.size());
        CHECK(p.pool_usage() == PoolUsage{});
    }
    rte_ring_free(r);
}

// A lone frame leaves by tx_one only from a queue that recycles, that is
// after a PMD (memif) gave every header mbuf back inside its burst. A PMD
// that keeps one (net_ring passes pointers) ends recycling, and the held mbuf
// must leave the idle set: built into again, it would overwrite the frame
// still queued and go out twice. A TX callback on a ring port plays memif
// until told to stop: it copies each frame out and drops the PMD's
// reference, so the pointer net_ring then queues is the port's idle mbuf
// (the test takes it off the ring unfreed).
TEST_CASE("dpdk: a lone frame the PMD keeps ends recycling and leaves the idle header mbufs", "[dpdk]") {
    Env& e = env();
    rte_ring* r = nullptr;
    const int pid = ring_port("t_keep", "t_port_keep", r);
    struct CopyMode {
        bool copy = true;
        std::vector<std::vector<uint8_t>> frames;   // what the copying "PMD" took
    } mode;
    {
        PortConfig c = one_queue_config(e.a->config(), pid);
        DpdkPort p(c);
        const rte_eth_rxtx_callback* cb = rte_eth_add_tx_callback(
            uint16_t(pid), 0,
            [](uint16_t, uint16_t, rte_mbuf** pkts, uint16_t n, void* arg) -> uint16_t {
                auto* md = static_cast<CopyMode*>(arg);
                if (!md->copy) return n;
                for (uint16_t i = 0; i < n; ++i) {
                    const uint8_t* d = rte_pktmbuf_mtod(pkts[i], const uint8_t*);
                    md->frames.emplace_back(d, d + pkts[i]->data_len);
                    rte_pktmbuf_free(pkts[i]);   // refcnt 2 -> 1: the port's again
                }
                return n;
            },
            &mode);
        REQUIRE(cb);
        std::vector<TxPacket> tx;
        for (int i = 0; i < 6; ++i) tx.push_back(make_pkt(1, uint16_t(i), nullptr, 0, uint8_t(10 + i)));
        rte_mbuf* m[8];
        // Three frames by the general path; each header mbuf back at once: idle.
        REQUIRE(p.tx_burst(0, tx.data(), 3) == 3);
        CHECK(p.pool_usage().hdr == 0);
        // One frame by tx_one on a recycled mbuf, given back again.
        REQUIRE(p.tx_burst(0, &tx[3], 1) == 1);
        CHECK(p.pool_usage().hdr == 0);
        REQUIRE(rte_ring_dequeue_burst(r, reinterpret_cast<void**>(m), 8, nullptr) == 4);   // the idle ones
        REQUIRE(mode.frames.size() == 4);
        for (size_t i = 0; i < 4; ++i) {
            INFO("copied frame " << i);
            REQUIRE(mode.frames[i].size() == 42 + 72);
            CHECK(std::memcmp(mode.frames[i].data() + 42, tx[i].hdr, 72) == 0);
        }
        // The PMD keeps the next one: in use until the ring is drained.
        mode.copy = false;
        REQUIRE(p.tx_burst(0, &tx[4], 1) == 1);
        CHECK(p.pool_usage().hdr == 1);
        // The next lone frame must take another mbuf, by the general path now.
        REQUIRE(p.tx_burst(0, &tx[5], 1) == 1);
        CHECK(p.pool_usage().hdr == 2);
        CHECK(p.stats().tx_packets == 6);
        CHECK(p.stats().tx_bursts == 4);
        REQUIRE(rte_ring_dequeue_burst(r, reinterpret_cast<void**>(m), 8, nullptr) == 2);
        CHECK(m[0] != m[1]);
        for (size_t i = 0; i < 2; ++i) {
            INFO("kept frame " << i);
            REQUIRE(m[i]->pkt_len == 42 + 72);
            CHECK(std::memcmp(rte_pktmbuf_mtod_offset(m[i], const uint8_t*, 42), tx[4 + i].hdr, 72) == 0);
            CHECK(rte_mbuf_refcnt_read(m[i]) == 1);   // the ring's alone: ours was dropped
        }
        rte_pktmbuf_free_bulk(m, 2);
        CHECK(p.pool_usage() == PoolUsage{});
        // Recycling stays off: sends go on, every mbuf back to its pool once the ring lets go.
        REQUIRE(p.tx_burst(0, &tx[0], 1) == 1);
        REQUIRE(rte_ring_dequeue_burst(r, reinterpret_cast<void**>(m), 8, nullptr) == 1);
        CHECK(std::memcmp(rte_pktmbuf_mtod_offset(m[0], const uint8_t*, 42), tx[0].hdr, 72) == 0);
        rte_pktmbuf_free(m[0]);
        CHECK(p.pool_usage() == PoolUsage{});
        CHECK(rte_eth_remove_tx_callback(uint16_t(pid), 0, cb) == 0);
    }
    rte_ring_free(r);
}

// rx_release puts what it may straight back into the RX pool; anything
// shared, attached, chained or taken must still be freed the general way.
TEST_CASE("dpdk: rx_release returns plain RX-pool mbufs, frees the others the general way", "[dpdk]") {
    Env& e = env();
    LeakGuard guard;
    rte_mempool* rxp = e.b->rx_pool();
    const unsigned used0 = rte_mempool_in_use_count(rxp);
    rte_mbuf* plain = craft_frame(100, {}, rxp);
    rte_mbuf* shared = craft_frame(101, {}, rxp);
    rte_mbuf_refcnt_update(shared, 1);   // a second reference, ours
    rte_mbuf* chain = rechain(craft_frame(300, {}, rxp), {42 + 72}, rxp);
    rte_mbuf* orig = craft_frame(102, {}, rxp);
    rte_mbuf* clone = rte_pktmbuf_clone(orig, rxp);   // indirect: attached to orig
    REQUIRE(clone);
    rte_mbuf* taken = craft_frame(103, {}, rxp);
    rte_mbuf* other = craft_frame(104);   // another pool's (as a net_ring peer's TX mbufs)
    for (rte_mbuf* m : {plain, shared, chain, clone, taken, other}) e.inject(0, 0, m);
    CHECK(rte_mempool_in_use_count(rxp) == used0 + 7);   // the chain is two
    RxPacket rx[8];
    REQUIRE(e.b->rx_burst(0, rx, 8) == 6);
    const uint32_t lens[] = {100, 101, 300, 102, 103, 104};
    for (int i = 0; i < 6; ++i) {
        CHECK(rx[i].len + rx[i].len2 == lens[i]);
        CHECK(rx[i].data[7] == 7);
    }
    uint32_t off = 0;
    REQUIRE(e.b->rx_take(0, 4, &off) == taken);
    CHECK(off == 42);
    e.b->rx_release(0);
    // Freed: plain, chain (2), clone; held: shared (ours), orig (ours), taken.
    CHECK(rte_mempool_in_use_count(rxp) == used0 + 3);
    CHECK(rte_mbuf_refcnt_read(shared) == 1);
    CHECK(rte_mbuf_refcnt_read(orig) == 1);
    CHECK(shared->data_len == 42 + 101);
    rte_pktmbuf_free(shared);
    rte_pktmbuf_free(orig);
    rte_pktmbuf_free(taken);
    CHECK(rte_mempool_in_use_count(rxp) == used0);
    // The recycled mbufs work for the next burst.
    e.inject(0, 0, craft_frame(50, {}, rxp));
    REQUIRE(e.b->rx_burst(0, rx, 8) == 1);
    CHECK(rx[0].len == 50);
    e.b->rx_release(0);
    CHECK(rte_mempool_in_use_count(rxp) == used0);
}

// The release inside rx_burst gathers plain RX-pool mbufs and puts them back
// in one put per 32 (port.cpp, RxQueue::ret); anything else is freed at once.
// pool_usage() counts the gathered as free; rx_release puts them back.
TEST_CASE("dpdk: rx_burst's release gathers plain RX-pool mbufs for one put, frees the others at once", "[dpdk]") {
    Env& e = env();
    LeakGuard guard;
    rte_mempool* rxp = e.b->rx_pool();
    e.b->rx_release(0);
    const unsigned used0 = rte_mempool_in_use_count(rxp);
    const unsigned craft0 = rte_mempool_in_use_count(e.craft);
    REQUIRE(e.b->pool_usage().rx == used0);
    rte_mbuf* shared = craft_frame(101, {}, rxp);
    rte_mbuf_refcnt_update(shared, 1);   // a second reference, ours
    rte_mbuf* taken = craft_frame(103, {}, rxp);
    rte_mbuf* burst[] = {craft_frame(60, {}, rxp), shared, rechain(craft_frame(300, {}, rxp), {42 + 72}, rxp),
                         craft_frame(61), taken, craft_frame(62, {}, rxp), craft_frame(63, {}, rxp)};
    for (rte_mbuf* m : burst) e.inject(0, 0, m);
    RxPacket rx[8];
    REQUIRE(e.b->rx_burst(0, rx, 8) == 7);
    REQUIRE(e.b->rx_take(0, 4, nullptr) == taken);
    CHECK(rte_mempool_in_use_count(rxp) == used0 + 7);   // the chain is two, frame 61 another pool's
    // An empty burst releases the last: the chain, frame 61 and our second
    // reference of shared now; the three plain ones gathered.
    REQUIRE(e.b->rx_burst(0, rx, 8) == 0);
    CHECK(rte_mempool_in_use_count(e.craft) == craft0);
    CHECK(rte_mbuf_refcnt_read(shared) == 1);
    CHECK(rte_mempool_in_use_count(rxp) == used0 + 3 + 2);
    CHECK(e.b->pool_usage().rx == used0 + 2);
    rte_pktmbuf_free(shared);
    rte_pktmbuf_free(taken);
    // Bursts of plain frames, each released by the next rx_burst: never more
    // than 32 gathered, put back each time 32 have, and the mbufs come back
    // out of the pool intact for the frames after.
    GatheredCount gathered{3};
    for (int round = 0; round < 12; ++round) {
        for (uint32_t i = 0; i < 7; ++i) e.inject(0, 0, craft_frame(40 + i, {}, rxp));
        REQUIRE(e.b->rx_burst(0, rx, 8) == 7);
        for (uint32_t i = 0; i < 7; ++i) {
            CHECK(rx[i].len == 40 + i);
            CHECK(rx[i].data[7] == 7);
        }
        CHECK(e.b->pool_usage().rx == used0 + 7);
        REQUIRE(e.b->rx_burst(0, rx, 8) == 0);
        gathered.add(7);
        CHECK(rte_mempool_in_use_count(rxp) == used0 + gathered.held);
        CHECK(e.b->pool_usage().rx == used0);
    }
    CHECK(gathered.put);
    e.b->rx_release(0);
    CHECK(rte_mempool_in_use_count(rxp) == used0);
}

// A burst of one frame (a ping-pong's every receive) is released by the next
// rx_burst on a path of its own (port.cpp, retire_held): a plain RX-pool
// mbuf alone is gathered as in a longer burst, and every other kind alone
// goes the general way, at once.
TEST_CASE("dpdk: a lone frame's release gathers a plain RX-pool mbuf, frees any other the general way", "[dpdk]") {
    Env& e = env();
    LeakGuard guard;
    rte_mempool* rxp = e.b->rx_pool();
    e.b->rx_release(0);
    const unsigned used0 = rte_mempool_in_use_count(rxp);
    const unsigned craft0 = rte_mempool_in_use_count(e.craft);
    RxPacket rx[4];
    // One at a time, each released by the next (empty) burst: gathered, put back per 32.
    GatheredCount gathered;
    for (uint32_t i = 0; i < 40; ++i) {
        e.inject(0, 0, craft_frame(20 + i % 8, {}, rxp));
        REQUIRE(e.b->rx_burst(0, rx, 4) == 1);
        CHECK(rx[0].len == 20 + i % 8);
        CHECK(rx[0].data[7] == 7);
        REQUIRE(e.b->rx_burst(0, rx, 4) == 0);
        gathered.add(1);
        CHECK(rte_mempool_in_use_count(rxp) == used0 + gathered.held);
        CHECK(e.b->pool_usage().rx == used0);
    }
    CHECK(gathered.put);
    e.b->rx_release(0);
    CHECK(rte_mempool_in_use_count(rxp) == used0);
    // Shared (a second reference, ours): that reference stays.
    rte_mbuf* shared = craft_frame(101, {}, rxp);
    rte_mbuf_refcnt_update(shared, 1);
    e.inject(0, 0, shared);
    REQUIRE(e.b->rx_burst(0, rx, 4) == 1);
    REQUIRE(e.b->rx_burst(0, rx, 4) == 0);
    CHECK(rte_mbuf_refcnt_read(shared) == 1);
    CHECK(rte_mempool_in_use_count(rxp) == used0 + 1);
    rte_pktmbuf_free(shared);
    // A chain: both segments back at once.
    e.inject(0, 0, rechain(craft_frame(300, {}, rxp), {42 + 72}, rxp));
    REQUIRE(e.b->rx_burst(0, rx, 4) == 1);
    CHECK(rte_mempool_in_use_count(rxp) == used0 + 2);
    REQUIRE(e.b->rx_burst(0, rx, 4) == 0);
    CHECK(rte_mempool_in_use_count(rxp) == used0);
    // Indirect (attached to orig, ours): back at once, orig ours alone again.
    rte_mbuf* orig = craft_frame(102, {}, rxp);
    rte_mbuf* clone = rte_pktmbuf_clone(orig, rxp);
    REQUIRE(clone);
    e.inject(0, 0, clone);
    REQUIRE(e.b->rx_burst(0, rx, 4) == 1);
    REQUIRE(e.b->rx_burst(0, rx, 4) == 0);
    CHECK(rte_mbuf_refcnt_read(orig) == 1);
    CHECK(rte_mempool_in_use_count(rxp) == used0 + 1);
    rte_pktmbuf_free(orig);
    // Another pool's: back in that pool at once.
    e.inject(0, 0, craft_frame(104));
    REQUIRE(e.b->rx_burst(0, rx, 4) == 1);
    REQUIRE(e.b->rx_burst(0, rx, 4) == 0);
    CHECK(rte_mempool_in_use_count(e.craft) == craft0);
    // Taken by rx_take: the caller's.
    rte_mbuf* taken = craft_frame(103, {}, rxp);
    e.inject(0, 0, taken);
    REQUIRE(e.b->rx_burst(0, rx, 4) == 1);
    REQUIRE(e.b->rx_take(0, 0, nullptr) == taken);
    REQUIRE(e.b->rx_burst(0, rx, 4) == 0);
    CHECK(rte_mempool_in_use_count(rxp) == used0 + 1);
    rte_pktmbuf_free(taken);
    CHECK(rte_mempool_in_use_count(rxp) == used0);
    CHECK(e.b->pool_usage().rx == used0);
}

namespace {

// Frames that must be dropped, each an edit of craft_frame(100), and the
// counter that must count it.
struct BadFrame {
    const char* name;
    std::function<void(uint8_t*, rte_mbuf*)> edit;
    uint64_t PortStats::*counter;
};
std::vector<BadFrame> bad_frames() {
    auto ip = [](uint8_t* d) { return reinterpret_cast<rte_ipv4_hdr*>(d + 14); };
    auto udp = [](uint8_t* d) { return reinterpret_cast<rte_udp_hdr*>(d + 34); };
    return {
        {"arp", [](uint8_t* d, rte_mbuf*) { d[12] = 0x08; d[13] = 0x06; }, &PortStats::rx_not_ipv4},
        {"ipv6 ethertype", [](uint8_t* d, rte_mbuf*) { d[12] = 0x86; d[13] = 0xdd; }, &PortStats::rx_not_ipv4},
        {"ip version 6", [=](uint8_t* d, rte_mbuf*) { ip(d)->version_ihl = 0x65; }, &PortStats::rx_not_ipv4},
        {"tcp", [=](uint8_t* d, rte_mbuf*) { ip(d)->next_proto_id = IPPROTO_TCP; }, &PortStats::rx_not_udp},
        {"wrong port", [=](uint8_t* d, rte_mbuf*) { udp(d)->dst_port = rte_cpu_to_be_16(4791); },
         &PortStats::rx_wrong_port},
        {"wrong dst", [=](uint8_t* d, rte_mbuf*) { ip(d)->dst_addr = rte_cpu_to_be_32(kIpOther); },
         &PortStats::rx_wrong_dst},
        {"unknown src", [=](uint8_t* d, rte_mbuf*) { ip(d)->src_addr = rte_cpu_to_be_32(kIpOther); },
         &PortStats::rx_unknown_peer},
        {"ip len beyond frame", [=](uint8_t* d, rte_mbuf*) { ip(d)->total_length = rte_cpu_to_be_16(28 + 101); },
         &PortStats::rx_bad_length},
        {"ip len below udp", [=](uint8_t* d, rte_mbuf*) { ip(d)->total_length = rte_cpu_to_be_16(24); },
         &PortStats::rx_bad_length},
        {"ihl < 5", [=](uint8_t* d, rte_mbuf*) { ip(d)->version_ihl = 0x44; }, &PortStats::rx_bad_length},
        {"udp len beyond ip", [=](uint8_t* d, rte_mbuf*) { udp(d)->dgram_len = rte_cpu_to_be_16(8 + 101); },
         &PortStats::rx_bad_length},
        {"udp len < 8", [=](uint8_t* d, rte_mbuf*) { udp(d)->dgram_len = rte_cpu_to_be_16(7); },
         &PortStats::rx_bad_length},
        {"truncated frame", [](uint8_t*, rte_mbuf* m) { rte_pktmbuf_trim(m, 30); }, &PortStats::rx_bad_length},
        {"fragment (MF)", [=](uint8_t* d, rte_mbuf*) { ip(d)->fragment_offset = rte_cpu_to_be_16(0x2000); },
         &PortStats::rx_fragment},
        {"fragment (offset)", [=](uint8_t* d, rte_mbuf*) { ip(d)->fragment_offset = rte_cpu_to_be_16(0x0010); },
         &PortStats::rx_fragment},
    };
}

}  // namespace

TEST_CASE("dpdk: bad frames are dropped and counted", "[dpdk]") {
    Env& e = env();
    LeakGuard guard;
    for (const BadFrame& c : bad_frames()) {
        INFO(c.name);
        e.b->reset_stats();
        e.inject(0, 0, craft_frame(100, c.edit));
        e.inject(0, 0, craft_frame(100));   // a good one behind it still arrives
        RxPacket rx[4];
        REQUIRE(e.b->rx_burst(0, rx, 4) == 1);
        CHECK(rx[0].len == 100);
        e.b->rx_release(0);
        const PortStats s = e.b->stats();
        CHECK(s.*(c.counter) == 1);
        CHECK(s.rx_dropped() == 1);
    }
    SECTION("bad IPv4 checksum") {
        e.b->reset_stats();
        rte_mbuf* m = craft_frame(100);
        rte_pktmbuf_mtod_offset(m, rte_ipv4_hdr*, 14)->hdr_checksum ^= 0x0101;
        e.inject(0, 0, m);
        RxPacket rx[4];
        CHECK(e.b->rx_burst(0, rx, 4) == 0);
        CHECK(e.b->stats().rx_bad_cksum == 1);
    }
    SECTION("runt frames") {
        e.b->reset_stats();
        for (uint16_t len : {0, 10, 14, 41}) {
            rte_mbuf* m = rte_pktmbuf_alloc(e.craft);
            REQUIRE(m);
            auto* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, len));
            if (len) std::memset(d, 0, len);
            if (len >= 14) d[12] = 0x08;   // IPv4 EtherType, too short for IPv4+UDP
            e.inject(0, 0, m);
        }
        RxPacket rx[8];
        CHECK(e.b->rx_burst(0, rx, 8) == 0);
        CHECK(e.b->stats().rx_bad_length == 4);
    }
    SECTION("IPv4 options are skipped") {
        e.b->reset_stats();
        rte_mbuf* m = rte_pktmbuf_alloc(e.craft);
        auto* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, 46 + 20));
        rte_mbuf* tmpl = craft_frame(20);
        std::memcpy(d, rte_pktmbuf_mtod(tmpl, uint8_t*), 34);
        std::memset(d + 34, 1, 4);   // 4 bytes of NOP options
        std::memcpy(d + 38, rte_pktmbuf_mtod_offset(tmpl, uint8_t*, 34), 28);
        rte_pktmbuf_free(tmpl);
        auto* iph = reinterpret_cast<rte_ipv4_hdr*>(d + 14);
        iph->version_ihl = 0x46;
        iph->total_length = rte_cpu_to_be_16(24 + 8 + 20);
        iph->hdr_checksum = 0;
        iph->hdr_checksum = rte_ipv4_cksum(iph);
        e.inject(0, 0, m);
        RxPacket rx[2];
        REQUIRE(e.b->rx_burst(0, rx, 2) == 1);
        CHECK(rx[0].len == 20);
        CHECK(rx[0].data[5] == 5);
        e.b->rx_release(0);
    }
    SECTION("Ethernet padding beyond the IP length is ignored") {
        e.b->reset_stats();
        rte_mbuf* m = craft_frame(4);
        std::memset(rte_pktmbuf_append(m, 14), 0xee, 14);
        e.inject(0, 0, m);
        RxPacket rx[2];
        REQUIRE(e.b->rx_burst(0, rx, 2) == 1);
        CHECK(rx[0].len == 4);
        e.b->rx_release(0);
    }
}

// A frame alone in its burst (a ping-pong's every receive; round 43 tried a
// path of its own for it): each bad frame alone must be dropped and counted
// as behind or before others, a good one alone handed over in place with its
// CE mark, and a lone frame on a cut link freed and counted (rx_cut) like a
// burst's.
TEST_CASE("dpdk: a frame alone in its burst is taken, dropped or counted as in a longer burst", "[dpdk]") {
    Env& e = env();
    LeakGuard guard;
    RxPacket rx[4];
    for (const BadFrame& c : bad_frames()) {
        INFO(c.name);
        e.b->reset_stats();
        e.inject(0, 0, craft_frame(100, c.edit));
        CHECK(e.b->rx_burst(0, rx, 4) == 0);
        const PortStats s = e.b->stats();
        CHECK(s.*(c.counter) == 1);
        CHECK(s.rx_dropped() == 1);
        CHECK(s.rx_packets == 0);
    }
    for (const bool ce : {false, true}) {
        e.b->reset_stats();
        rte_mbuf* m = craft_frame(100, [&](uint8_t* d, rte_mbuf*) {
            if (ce) reinterpret_cast<rte_ipv4_hdr*>(d + 14)->type_of_service = 3;
        });
        e.inject(0, 1, m);
        REQUIRE(e.b->rx_burst(1, rx, 4) == 1);
        CHECK(rx[0].data == rte_pktmbuf_mtod_offset(m, const uint8_t*, 42));
        CHECK(rx[0].len == 100);
        CHECK(rx[0].data2 == nullptr);
        CHECK(rx[0].len2 == 0);
        CHECK(rx[0].peer == 0);
        CHECK(rx[0].local_path == 1);
        CHECK(rx[0].ce == uint8_t(ce));
        for (uint32_t i = 0; i < 100; ++i) REQUIRE(rx[0].data[i] == uint8_t(i));
        const PortStats s = e.b->stats();
        CHECK(s.rx_packets == 1);
        CHECK(s.rx_bytes == 100);
        CHECK(s.rx_ce == uint64_t(ce));
        CHECK(s.rx_dropped() == 0);
        e.b->rx_release(1);
    }
    for (const int n : {1, 2}) {
        INFO(n << " frame(s) on a cut link");
        e.b->reset_stats();
        for (int i = 0; i < n; ++i) e.inject(0, 0, craft_frame(100));
        set_link_cut(e.b->port_id(), true);
        const size_t got = e.b->rx_burst(0, rx, 4);
        set_link_cut(e.b->port_id(), false);
        CHECK(got == 0);
        CHECK(e.b->stats().rx_cut == uint64_t(n));
        CHECK(e.b->stats().rx_packets == 0);
    }
}

// rx_burst's fast path masks the fields that may vary (TOS, ID, DF, TTL,
// source port) and checks the IPv4 checksum by a remainder: random values
// there, and checksums right or wrong by random bits, must be taken or
// counted as the header's ones-complement sum says.
TEST_CASE("dpdk: frames with random free fields and checksums are taken or counted as RFC 1071 says", "[dpdk]") {
    Env& e = env();
    LeakGuard guard;
    std::mt19937 rng(2507);
    uint64_t want_ok = 0, want_bad = 0;
    for (int round = 0; round < 20; ++round) {
        e.b->reset_stats();
        int ok = 0;
        for (int i = 0; i < 16; ++i) {
            const uint32_t len = 1 + rng() % 300;   // odd and even lengths
            const bool corrupt = rng() % 3 == 0;
            const uint16_t flip = uint16_t(1 + rng() % 0xfffe);
            rte_mbuf* m = craft_frame(len, [&](uint8_t* d, rte_mbuf*) {
                auto* ip = reinterpret_cast<rte_ipv4_hdr*>(d + 14);
                ip->type_of_service = uint8_t(rng());
                ip->packet_id = uint16_t(rng());
                ip->fragment_offset = rte_cpu_to_be_16(rng() % 2 ? RTE_IPV4_HDR_DF_FLAG : 0);
                ip->time_to_live = uint8_t(rng());
                reinterpret_cast<rte_udp_hdr*>(d + 34)->src_port = uint16_t(rng());
            });
            auto* ip = rte_pktmbuf_mtod_offset(m, rte_ipv4_hdr*, 14);
            if (corrupt) ip->hdr_checksum ^= flip;
            // 0xffff and 0 are the same in ones' complement: a flip between them stays right.
            const bool good = rte_raw_cksum(ip, 20) == 0xffff;
            ok += good;
            e.inject(0, 0, m);
        }
        RxPacket rx[32];
        CHECK(e.b->rx_burst(0, rx, 32) == size_t(ok));
        e.b->rx_release(0);
        const PortStats st = e.b->stats();
        CHECK(st.rx_packets == uint64_t(ok));
        CHECK(st.rx_bad_cksum == uint64_t(16 - ok));
        CHECK(st.rx_dropped() == uint64_t(16 - ok));
        want_ok += ok;
        want_bad += 16 - ok;
    }
    CHECK(want_ok > 150);   // both kinds were exercised
    CHECK(want_bad > 50);
}

// The same where the fast path's 8-byte sums carry out of 64 bits (port.cpp,
// ipv4_hdr20_ok): a source address ending in 255.255 and DF set make the
// first add carry, random fields and checksums either way around it.
TEST_CASE("dpdk: checksums whose 8-byte sums carry are taken or counted as RFC 1071 says", "[dpdk]") {
    Env& e = env();
    rte_ring* r = nullptr;
    const int pid = ring_port("t_carry", "t_port_carry", r);
    const uint32_t src = 0x0afeffff, dst = 0xfffefffe;   // 10.254.255.255 -> 255.254.255.254
    {
        PortConfig c = one_queue_config(e.b->config(), pid);
        c.local_ip = dst;
        c.neighbours = {{src, parse_mac("02:00:00:00:00:0a")}};
        DpdkPort p(c);
        std::mt19937 rng(2512);
        uint64_t want_ok = 0, want_bad = 0, carries = 0;
        for (int round = 0; round < 20; ++round) {
            p.reset_stats();
            int ok = 0;
            for (int i = 0; i < 16; ++i) {
                const uint32_t len = 1 + rng() % 300;
                const bool corrupt = rng() % 3 == 0;
                const uint16_t flip = uint16_t(1 + rng() % 0xfffe);
                rte_mbuf* m = craft_frame(len, [&](uint8_t* d, rte_mbuf*) {
                    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(d + 14);
                    ip->src_addr = rte_cpu_to_be_32(src);
                    ip->dst_addr = rte_cpu_to_be_32(dst);
                    ip->type_of_service = uint8_t(rng());
                    ip->packet_id = uint16_t(rng());
                    ip->fragment_offset = rte_cpu_to_be_16(rng() % 4 ? RTE_IPV4_HDR_DF_FLAG : 0);
                    ip->time_to_live = uint8_t(rng());
                });
                auto* ip = rte_pktmbuf_mtod_offset(m, rte_ipv4_hdr*, 14);
                if (corrupt) ip->hdr_checksum ^= flip;
                uint64_t w[2];
                std::memcpy(w, ip, 16);
                carries += w[0] + w[1] < w[0];
                ok += rte_raw_cksum(ip, 20) == 0xffff;
                REQUIRE(rte_ring_enqueue(r, m) == 0);
            }
            RxPacket rx[32];
            CHECK(p.rx_burst(0, rx, 32) == size_t(ok));
            for (int i = 0; i < ok; ++i) CHECK(rx[i].peer == 0);
            p.rx_release(0);
            const PortStats st = p.stats();
            CHECK(st.rx_packets == uint64_t(ok));
            CHECK(st.rx_bad_cksum == uint64_t(16 - ok));
            CHECK(st.rx_dropped() == uint64_t(16 - ok));
            want_ok += ok;
            want_bad += 16 - ok;
        }
        CHECK(want_ok > 150);
        CHECK(want_bad > 50);
        CHECK(carries > 150);   // the carry was exercised
        CHECK(p.pool_usage() == PoolUsage{});
    }
    rte_ring_free(r);
}

// rx_burst remembers the last source's peer handle: frames alternating
// between neighbours, and an unknown source right behind a known one, must
// each still get their own answer. The cache remembers unknown sources too
// (two in a row), and starts as source 0.0.0.0 unknown.
TEST_CASE("dpdk: the peer handle follows each frame's source within a burst", "[dpdk]") {
    Env& e = env();
    LeakGuard guard;
    e.a->reset_stats();
    const uint32_t kIpUnknown = 0x0a000007;
    const uint32_t srcs[] = {0,          kIpOther,   kIpB, kIpB, kIpOther, kIpUnknown, kIpB,
                             kIpUnknown, kIpOther, kIpUnknown, kIpUnknown, kIpB};
    for (uint32_t src : srcs)
        e.inject(1, 0, craft_frame(16, [&](uint8_t* d, rte_mbuf*) {
            auto* ip = reinterpret_cast<rte_ipv4_hdr*>(d + 14);
            ip->src_addr = rte_cpu_to_be_32(src);
            ip->dst_addr = rte_cpu_to_be_32(kIpA);
        }));
    RxPacket rx[16];
    REQUIRE(e.a->rx_burst(0, rx, 16) == 7);
    const uint32_t want[] = {0, 1, 1, 0, 1, 0, 1};
    for (int i = 0; i < 7; ++i) CHECK(rx[i].peer == want[i]);
    e.a->rx_release(0);
    CHECK(e.a->stats().rx_unknown_peer == 5);
}

TEST_CASE("dpdk: invalid TxPackets are consumed and counted, never sent", "[dpdk]") {
    Env& e = env();
    LeakGuard guard;
    static uint8_t big[9000];
    std::vector<TxPacket> tx = {
        make_pkt(1, 1, big, 10, 1),
        make_pkt(2, 1, big, 10, 2),              // no such neighbour
        make_pkt(1, 1, big, 9000, 3),            // 9000 + 72 + 28 > MTU 9000
        make_pkt(1, 1, big, 10, 4),
    };
    tx.push_back(make_pkt(1, 1, big, 10, 5));
    tx.back().hdr_len = 73;                      // beyond kMaxHeaderLen
    tx.push_back(make_pkt(1, 1, nullptr, 10, 6)); // payload length without a pointer
    REQUIRE(e.a->tx_burst(0, tx.data(), tx.size()) == tx.size());
    const PortStats s = e.a->stats();
    CHECK(s.tx_packets == 2);
    CHECK(s.tx_bad_peer == 1);
    CHECK(s.tx_bad_len == 3);
    CHECK(e.fabric(0, 0) == 2);
}

TEST_CASE("dpdk: a full TX ring returns the packets not taken, for retry", "[dpdk]") {
    Env& e = env();
    LeakGuard guard;
    static uint8_t payload[4096];
    std::vector<TxPacket> tx;
    for (int i = 0; i < 1500; ++i) tx.push_back(make_pkt(1, uint16_t(i), payload, 4096, uint8_t(i)));
    const size_t first = e.a->tx_burst(0, tx.data(), tx.size());
    CHECK(first == kRingSize - 1);   // an rte_ring holds size - 1
    CHECK(e.a->stats().tx_ring_full > 0);
    REQUIRE(e.fabric(0, 0) == first);
    // The frames sit in B's RX ring holding A's mbufs until B receives them.
    RxPacket rx[32];
    size_t got = 0;
    while (size_t n = e.b->rx_burst(0, rx, 32)) {
        for (size_t i = 0; i < n; ++i) CHECK(std::memcmp(rx[i].data, tx[got + i].hdr, 72) == 0);
        got += n;
    }
    e.b->rx_release(0);
    CHECK(got == first);
    const size_t second = e.a->tx_burst(0, tx.data() + first, tx.size() - first);
    CHECK(second == tx.size() - first);
    CHECK(e.a->stats().tx_packets == tx.size());
    CHECK(e.a->stats().tx_no_mbuf == 0);
    REQUIRE(e.fabric(0, 0) == second);
    while (size_t n = e.b->rx_burst(0, rx, 32)) {
        for (size_t i = 0; i < n; ++i) CHECK(std::memcmp(rx[i].data, tx[got + i].hdr, 72) == 0);
        got += n;
    }
    CHECK(got == tx.size());
}

// Refused packets among those a full ring does not take: the count returned
// ends at the first valid packet not taken, and only the refused packets
// before it are counted (those after it come back with it).
TEST_CASE("dpdk: a full TX ring with refused packets between the sent ones", "[dpdk]") {
    Env& e = env();
    rte_ring* r = nullptr;
    const int pid = ring_port("t_fullbad", "t_port_fb", r);   // holds 63
    {
        PortConfig c = one_queue_config(e.a->config(), pid);
        c.tx_inline_max = 64;
        DpdkPort p(c);
        static uint8_t payload[300];
        std::vector<TxPacket> tx;
        uint64_t want_bytes = 0;
        size_t valid = 0;
        for (int i = 0; i < 80; ++i) {
            // Every fifth a bad peer, inline and attached payloads mixed.
            tx.push_back(make_pkt(i % 5 == 4 ? 7 : 1, uint16_t(i), payload, i % 3 ? 33 : 300, uint8_t(i), uint16_t(40 + i % 3)));
            if (i % 5 != 4 && valid++ < 63) want_bytes += tx.back().hdr_len + tx.back().payload_len;
        }
        CHECK(p.tx_burst(0, tx.data(), tx.size()) == 78);   // the 64th valid packet is at 78
        PortStats s = p.stats();
        CHECK(s.tx_packets == 63);
        CHECK(s.tx_ring_full == 1);
        CHECK(s.tx_bad_peer == 15);   // 4, 9, ..., 74; 79 is not consumed
        CHECK(s.tx_bytes == want_bytes);
        rte_mbuf* m[64];
        REQUIRE(rte_ring_dequeue_burst(r, reinterpret_cast<void**>(m), 64, nullptr) == 63);
        rte_pktmbuf_free_bulk(m, 63);
        CHECK(p.tx_burst(0, tx.data() + 78, 2) == 2);
        s = p.stats();
        CHECK(s.tx_packets == 64);
        CHECK(s.tx_bad_peer == 16);
        REQUIRE(rte_ring_dequeue_burst(r, reinterpret_cast<void**>(m), 64, nullptr) == 1);
        CHECK(std::memcmp(rte_pktmbuf_mtod_offset(m[0], const uint8_t*, 42), tx[78].hdr, tx[78].hdr_len) == 0);
        rte_pktmbuf_free_bulk(m, 1);
        CHECK(p.pool_usage() == PoolUsage{});
    }
    rte_ring_free(r);
}

TEST_CASE("dpdk: mbuf exhaustion refuses the burst without leaking", "[dpdk]") {
    Env& e = env();
    LeakGuard guard;
    static uint8_t payload[64];
    std::vector<TxPacket> tx;
    for (int i = 0; i < 1000; ++i) tx.push_back(make_pkt(1, uint16_t(i), payload, 64, uint8_t(i)));
    // Fill queue 0's ring, move it to B, and fill queue 1's: more than the pools hold.
    size_t sent = e.a->tx_burst(0, tx.data(), tx.size());
    e.fabric(0, 0);
    sent += e.a->tx_burst(1, tx.data(), tx.size());
    CHECK(sent < 2 * tx.size());
    CHECK(e.a->stats().tx_no_mbuf >= 1);
}

TEST_CASE("dpdk: both directions at once, peer handles per side", "[dpdk]") {
    Env& e = env();
    LeakGuard guard;
    std::vector<uint8_t> mem(64 * 64);
    for (size_t i = 0; i < mem.size(); ++i) mem[i] = uint8_t(i * 7);
    for (int round = 0; round < 50; ++round) {
        std::vector<TxPacket> ab, ba;
        for (int i = 0; i < 16; ++i) {
            ab.push_back(make_pkt(1, uint16_t(i), mem.data() + i * 64, 64, uint8_t(round + i)));
            ba.push_back(make_pkt(0, uint16_t(i), mem.data() + i * 64, 64, uint8_t(round - i)));
        }
        send_all(*e.a, 1, ab);
        send_all(*e.b, 1, ba);
        e.fabric(0, 1);
        e.fabric(1, 1);
        RxPacket rx[32];
        REQUIRE(e.b->rx_burst(1, rx, 32) == 16);
        for (int i = 0; i < 16; ++i) {
            CHECK(rx[i].peer == 0);
            CHECK(std::memcmp(rx[i].data, ab[i].hdr, 72) == 0);
        }
        REQUIRE(e.a->rx_burst(1, rx, 32) == 16);
        for (int i = 0; i < 16; ++i) {
            CHECK(rx[i].peer == 1);
            REQUIRE(rx[i].len2 == 64);   // the payload's own segment, as sent (zero copy both ways)
            CHECK(std::memcmp(rx[i].data2, mem.data() + i * 64, 64) == 0);
        }
        // No explicit rx_release: the next rx_burst releases the previous burst.
    }
}

// PlanePorts (R-PLANE-*): two planes, each a net_ring pair of its own (A's
// port on plane p wired to B's port on plane p), one PlanePorts per side.
TEST_CASE("dpdk planes: one port per plane, peer handles joined, packets on their plane's port", "[dpdk][planes]") {
    env();   // the EAL
    static test::RingPortPair pl0("pl0", 1, 1024), pl1("pl1", 1, 1024);
    pl0.ip[0] = 0x0a010001;  // A: 10.1.0.1 / 10.2.0.1; B: 10.1.0.2 / 10.2.0.2
    pl0.ip[1] = 0x0a010002;
    pl1.ip[0] = 0x0a020001;
    pl1.ip[1] = 0x0a020002;
    {
        DpdkPort a0(pl0.config(0)), a1(pl1.config(0)), b0(pl0.config(1)), b1(pl1.config(1));
        PlanePorts a({&a0, &a1}), b({&b0, &b1});
        REQUIRE(a.num_planes() == 2);
        // Each address is a handle of its own until joined.
        CHECK(a.peer_of(0, 0x0a010002) == 0);
        CHECK(a.peer_of(1, 0x0a020002) == 1);
        CHECK(a.peer_of(1, 0x0a010002) == PlanePorts::kNoPeer);
        // R-PLANE-6: the peer named on both planes is one handle.
        const uint32_t ips[2] = {0x0a010002, 0x0a020002};
        uint8_t known = 0;
        const uint32_t h = a.add_peer(ips, 2, known);
        CHECK(h == 0);
        CHECK(known == 2);
        CHECK(a.peer_of(1, 0x0a020002) == h);
        CHECK(a.peer_planes(h) == 2);
        const uint32_t bad[2] = {0x0a010002, 0x0a020009};
        CHECK_THROWS_WITH(a.add_peer(bad, 2, known), Catch::Contains("10.2.0.9 (plane 1) is not in plane 1's"));

        // A CONNECT_REQ with A's plane block, on plane 0; a data-like packet on plane 1.
        TxPacket p[2];
        wire::PlaneAddr mine[2] = {{0x0a010001, wire::kDefaultUdpPort}, {0x0a020001, wire::kDefaultUdpPort}};
        p[0].peer = h;
        p[0].path = kControlPath;
        p[0].plane = 0;
        p[0].hdr[0] = wire::kVersion;
        p[0].hdr[1] = uint8_t(wire::PacketType::connect_req);
        const size_t blk = wire::encode_plane_block({p[0].hdr + wire::kConnectLen, 20}, mine, 2);
        REQUIRE(blk == 20);
        p[0].hdr_len = uint16_t(wire::kConnectLen + blk);
        p[1].peer = h;
        p[1].path = 1;
        p[1].plane = 1;
        p[1].hdr_len = 40;
        p[1].hdr[0] = wire::kVersion;
        p[1].hdr[1] = uint8_t(wire::PacketType::data);
        uint32_t unsent[2];
        REQUIRE(a.tx_burst(p, 2, unsent) == 2);
        CHECK(a0.stats().tx_packets == 1);
        CHECK(a1.stats().tx_packets == 1);
        RxPacket rx[8];
        size_t n = 0;
        for (int i = 0; i < 4 && n < 2; ++i) n += b.rx_burst(rx + n, 8 - n);
        REQUIRE(n == 2);
        for (size_t i = 0; i < n; ++i) {
            // R-PLANE-1: the block taught B that A's plane-1 address is the same peer.
            CHECK(rx[i].peer == 0);
            CHECK(rx[i].plane == (rx[i].data[1] == uint8_t(wire::PacketType::connect_req) ? 0 : 1));
        }
        CHECK(b.peer_planes_learned() == 1);
        CHECK(b.peer_of(1, 0x0a010001) == PlanePorts::kNoPeer);
        CHECK(b.peer_of(1, 0x0a020001) == 0);

        // TEST ONLY cut: plane 1's port drops what it is given, counted as sent (tx_cut).
        set_link_cut(a1.port_id(), true);
        REQUIRE(a.tx_burst(&p[1], 1, unsent) == 1);
        CHECK(a1.stats().tx_cut == 1);
        CHECK(a1.stats().tx_packets == 1);
        set_link_cut(a1.port_id(), false);
        CHECK(b.rx_burst(rx, 8) == 0);

        // A peer known on plane 0 only (a fresh PlanePorts: nothing joined): a
        // packet for plane 1 leaves on plane 0, the plane its handle came from.
        {
            PlanePorts fresh({&a0, &a1});
            CHECK(fresh.peer_planes(0) == 1);
            REQUIRE(fresh.tx_burst(&p[1], 1, unsent) == 1);
            CHECK(a0.stats().tx_packets == 2);
            CHECK(a1.stats().tx_packets == 1);
            n = 0;
            for (int i = 0; i < 4 && n < 1; ++i) n += b.rx_burst(rx, 8);
            REQUIRE(n == 1);
            CHECK(rx[0].plane == 0);
        }
        a.rx_release_all();
        b.rx_release_all();
    }
}
