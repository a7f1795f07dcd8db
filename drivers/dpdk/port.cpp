// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
#include "mroce/dpdk/port.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include <fmt/format.h>
#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_udp.h>

#include "mroce/dpdk/intr_thread.hpp"

namespace mroce::dpdk {
namespace {

constexpr size_t kEth = sizeof(rte_ether_hdr);     // 14
constexpr size_t kIp = sizeof(rte_ipv4_hdr);       // 20
constexpr size_t kUdp = sizeof(rte_udp_hdr);       // 8
constexpr size_t kL2L4 = kEth + kIp + kUdp;        // 42
constexpr size_t kHdrRoom = 128;                   // >= kL2L4 + wire::kMaxHeaderLen (114)
static_assert(kHdrRoom >= kL2L4 + sizeof(TxPacket::hdr), "tx_burst copies the whole header array");
// An external buffer length is 16-bit: longer payloads become several segments.
constexpr uint32_t kExtSegMax = 65535;
// TX works in chunks so the per-call arrays are fixed-size members, not allocations.
constexpr size_t kTxChunk = 64;
constexpr size_t kTxExtMax = 2 * kTxChunk;
// Received mbufs waiting in an RX queue for their return to the pool in one
// put (DpdkPort::RxQueue::ret).
constexpr size_t kRxRet = 32;
constexpr uint32_t kNoPeer = UINT32_MAX;
constexpr uint8_t kEctMask = 0x3;
constexpr uint8_t kEct0 = 0x2;
constexpr uint8_t kCe = 0x3;

// The payload belongs to the engine's registered memory: freeing the mbuf
// must not free it.
void noop_free(void*, void*) {}

inline uint16_t be16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }

// Ones-complement sums (RFC 1071; byte order does not matter) folded to 16
// bits as rte_raw_cksum does: 0 only for an all-zero input, else 1..0xffff.
// memif and net_ring offload no checksum, and rte_raw_cksum's generic loop was
// about 65 instructions per packet on each side (doc/performance.md 7.3).
inline uint16_t fold16(uint64_t s) {
    s = (s & 0xffffffffu) + (s >> 32);
    s = (s & 0xffffu) + (s >> 16);
    s = (s & 0xffffu) + (s >> 16);
    s = (s & 0xffffu) + (s >> 16);
    return uint16_t(s);
}
// The same for a sum of at most three 16-bit words (at most 0x2fffd): two
// folds bring it to 16 bits (the first to at most 0x10001).
inline uint16_t fold16_3(uint32_t s) {
    s = (s & 0xffffu) + (s >> 16);
    s = (s & 0xffffu) + (s >> 16);
    return uint16_t(s);
}
inline uint16_t load16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}
inline void store16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
inline uint32_t load32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
// The words of a 20-byte IPv4 header summed, unrolled, not yet folded.
inline uint64_t ipv4_sum20(const uint8_t* ip) {
    return uint64_t(load32(ip)) + load32(ip + 4) + load32(ip + 8) + load32(ip + 12) + load32(ip + 16);
}
// Options go the generic way.
inline uint16_t ipv4_sum(const uint8_t* ip, uint32_t ihl) {
    if (ihl != 20) [[unlikely]] return rte_raw_cksum(ip, ihl);
    return fold16(ipv4_sum20(ip));
}
// A small message's payload (4 to 64 bytes) as two overlapping copies of a
// fixed size, inlined: the libc call cost about 20 instructions per frame,
// and 30 with the spills around it for an 8-byte ping-pong's (round 34).
[[gnu::always_inline]] inline void copy_payload(uint8_t* d, const uint8_t* s, uint32_t n) {
    const auto two = [&](auto size) {
        std::memcpy(d, s, size);
        std::memcpy(d + n - size, s + n - size, size);
    };
    if (n > 64 || n < 4) [[unlikely]]
        std::memcpy(d, s, n);
    else if (n >= 32)
        two(std::integral_constant<size_t, 32>{});
    else if (n >= 16)
        two(std::integral_constant<size_t, 16>{});
    else if (n >= 8)
        two(std::integral_constant<size_t, 8>{});
    else
        two(std::integral_constant<size_t, 4>{});
}
inline uint64_t load64(const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
// A 20-byte IPv4 header's checksum is right when its ones-complement sum is
// 0xffff (RFC 1071): when the sum of its words, which is never 0 (version
// 4), is a multiple of 0xffff; a remainder is cheaper than the folds. As
// 2^16 is 1 modulo 0xffff, an 8-byte load is congruent to the sum of its
// four words and a carry out of 64 bits to 1: two 8-byte loads and a 4-byte
// one, three adds and two carries instead of five loads and four adds.
inline bool ipv4_hdr20_ok(const uint8_t* ip) {
    uint64_t s;
    const bool c1 = __builtin_add_overflow(load64(ip), load64(ip + 8), &s);
    const bool c2 = __builtin_add_overflow(s, uint64_t(load32(ip + 16)) + c1, &s);
    return (s + c2) % 0xffff == 0;   // after a carry s is below 2^32 + 1: no overflow
}
inline uint32_t be32(const uint8_t* p) {
    return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

static_assert(offsetof(rte_mbuf, nb_segs) == offsetof(rte_mbuf, refcnt) + 2 && sizeof(rte_mbuf::refcnt) == 2,
              "retire_held reads refcnt and nb_segs as one 4-byte word");

// set_link_cut's flags, one per possible port id.
std::atomic<bool> g_link_cut[RTE_MAX_ETHPORTS];

std::string err_name(int rc) {
    const int e = rc < 0 ? -rc : rc;
    return fmt::format("{} ({})", rte_strerror(e), e);
}

// rx_burst's fast path tests the header bytes that are the same in every
// valid frame of ours (EtherType, version/IHL, the fragment bits, protocol,
// destination address, UDP destination port) as three 8-byte words against
// expected values under masks, built here as byte arrays so that the loads
// compare the same on either byte order.
struct FrameMatch {
    static constexpr size_t kOff[3] = {12, 20, 30};   // 12-19, 20-27, 30-37: all within the 42 B
    uint64_t want[3]{}, mask[3]{};

    FrameMatch() = default;
    FrameMatch(uint32_t local_ip, uint16_t udp_port) {
        uint8_t w[42]{}, k[42]{};
        auto set = [&](size_t off, uint32_t v, uint32_t m, int n) {   // n big-endian bytes
            for (int i = 0; i < n; ++i) {
                const int sh = 8 * (n - 1 - i);
                w[off + i] = uint8_t(v >> sh);
                k[off + i] = uint8_t(m >> sh);
            }
        };
        set(12, RTE_ETHER_TYPE_IPV4, 0xffff, 2);
        set(kEth, RTE_IPV4_VHL_DEF, 0xff, 1);
        set(kEth + 6, 0, RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK, 2);
        set(kEth + 9, IPPROTO_UDP, 0xff, 1);
        set(kEth + 16, local_ip, 0xffffffffu, 4);
        set(kEth + kIp + 2, udp_port, 0xffff, 2);
        for (int j = 0; j < 3; ++j) {
            want[j] = load64(w + kOff[j]);
            mask[j] = load64(k + kOff[j]);
        }
    }
    // f holds at least kL2L4 bytes.
    bool operator()(const uint8_t* f) const noexcept {
        return (((load64(f + kOff[0]) ^ want[0]) & mask[0]) | ((load64(f + kOff[1]) ^ want[1]) & mask[1]) |
                ((load64(f + kOff[2]) ^ want[2]) & mask[2])) == 0;
    }
};

}  // namespace

struct alignas(64) DpdkPort::RxQueue {
    uint16_t id = 0;
    uint16_t held = 0;
    uint32_t slot = 0;
    std::vector<rte_mbuf*> rx;       // burst
    std::vector<rte_mbuf*> keep;     // handed to the engine, freed by rx_release
    std::vector<rte_mbuf*> drop;
    std::vector<uint8_t> scratch;    // burst * slot
    uint32_t last_src = 0;           // rx_burst's one-entry peer_of cache: peer_of(last_src),
    uint32_t last_peer = kNoPeer;    // the table being fixed at construction (0 -> kNoPeer at first)
    FrameMatch match;
    PortStats st;
    // Released RX-pool mbufs (raw: one direct segment, refcnt 1, what
    // rte_mbuf_raw_alloc expects) that go back to the pool in one put when
    // kRxRet have gathered, or at rx_release. The put's fixed part (the
    // lcore's cache, the flush test, rte_memcpy's size dispatch) was about
    // half of a two-frame burst's release (117 instructions, about 60 with
    // it shared by kRxRet frames; round 37). min_pools counts them.
    uint16_t nret = 0;
    rte_mbuf* ret[kRxRet];
};

struct alignas(64) DpdkPort::TxQueue {
    uint16_t id = 0;
    // Header mbuf recycling. A PMD that copies the frame and frees the mbuf
    // inside rte_eth_tx_burst (net_memif) put every header mbuf back in the
    // pool (rte_pktmbuf_free: about 70 instructions, 11 more in
    // __tls_get_addr for its lcore) for the next burst to take out again
    // (about 37): with a reference of our own held across the burst, its free
    // only drops that count and the mbuf stays here, ours alone (refcnt 1).
    // The first burst after which the PMD still holds one (a NIC before
    // completion, a net_ring peer, memif zero-copy) turns it off for the
    // queue: from then on each frame's reference is the PMD's, as without it.
    // It needs a PMD that frees through the refcount: never enable
    // RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE, which puts mbufs back unchecked.
    // hdr[0, nidle): idle, clean raw mbufs (refcnt 1, next NULL, nb_segs 1),
    // used in place by the next burst before any comes from the pool.
    bool recycle = true;
    uint16_t nidle = 0;
    rte_mbuf* hdr[kTxChunk];
    rte_mbuf* ext[kTxExtMax];
    uint8_t valid[kTxChunk];
    PortStats st;
};

PortStats& PortStats::operator+=(const PortStats& o) noexcept {
    rx_packets += o.rx_packets; rx_bytes += o.rx_bytes; rx_ce += o.rx_ce;
    rx_linearized += o.rx_linearized; rx_split += o.rx_split; rx_not_ipv4 += o.rx_not_ipv4; rx_not_udp += o.rx_not_udp;
    rx_wrong_port += o.rx_wrong_port; rx_wrong_dst += o.rx_wrong_dst;
    rx_bad_length += o.rx_bad_length; rx_bad_cksum += o.rx_bad_cksum;
    rx_fragment += o.rx_fragment; rx_unknown_peer += o.rx_unknown_peer; rx_too_big += o.rx_too_big;
    tx_packets += o.tx_packets; tx_bytes += o.tx_bytes; tx_bursts += o.tx_bursts; tx_bad_peer += o.tx_bad_peer;
    tx_bad_len += o.tx_bad_len; tx_no_mbuf += o.tx_no_mbuf; tx_ring_full += o.tx_ring_full;
    tx_cut += o.tx_cut; rx_cut += o.rx_cut;
    return *this;
}

void set_link_cut(uint16_t port_id, bool cut) noexcept {
    if (port_id < RTE_MAX_ETHPORTS) g_link_cut[port_id].store(cut, std::memory_order_relaxed);
}

bool link_cut(uint16_t port_id) noexcept {
    return port_id < RTE_MAX_ETHPORTS && g_link_cut[port_id].load(std::memory_order_relaxed);
}

uint32_t parse_ipv4(const std::string& s) {
    unsigned a, b, c, d;
    char tail;
    if (std::sscanf(s.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) != 4 || a > 255 || b > 255 ||
        c > 255 || d > 255)
        throw DpdkError(fmt::format("bad IPv4 address '{}'", s));
    return a << 24 | b << 16 | c << 8 | d;
}

std::string format_ipv4(uint32_t ip) {
    return fmt::format("{}.{}.{}.{}", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
}

MacAddr parse_mac(const std::string& s) {
    unsigned v[6];
    char tail;
    if (std::sscanf(s.c_str(), "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6)
        throw DpdkError(fmt::format("bad MAC address '{}'", s));
    MacAddr m;
    for (int i = 0; i < 6; ++i) {
        if (v[i] > 255) throw DpdkError(fmt::format("bad MAC address '{}'", s));
        m[i] = uint8_t(v[i]);
    }
    return m;
}

PoolConfig DpdkPort::min_pools(const PortConfig& c) {
    PoolConfig p = c.pools;
    // A per-lcore cache can strand up to 1.5x its size per lcore; count one lcore's worth.
    const uint32_t slack = c.pools.cache * 3 / 2;
    p.rx_mbufs = uint32_t(c.rx_queues) * (c.rx_desc + c.burst + kRxRet) + slack;
    p.hdr_mbufs = uint32_t(c.tx_queues) * (c.tx_desc + kTxChunk) + slack;
    p.ext_mbufs = uint32_t(c.tx_queues) * (c.tx_desc + kTxExtMax) + slack;
    return p;
}

DpdkPort::DpdkPort(const PortConfig& cfg) : cfg_(cfg) {
    const uint16_t port = cfg.port_id;
    if (!eal_initialised()) throw DpdkError("DpdkPort: the EAL is not initialised (call eal_init first)");
    if (!rte_eth_dev_is_valid_port(port))
        throw DpdkError(fmt::format("DpdkPort: port {} does not exist ({} ports available)", port,
                                    rte_eth_dev_count_avail()));
    if (cfg.rx_queues == 0 || cfg.tx_queues == 0)
        throw DpdkError("DpdkPort: rx_queues and tx_queues must be >= 1");
    if (cfg.burst == 0 || cfg.burst > 1024) throw DpdkError("DpdkPort: burst must be in [1, 1024]");
    if (cfg.neighbours.size() >= kNoPeer) throw DpdkError("DpdkPort: neighbour table too large");
    if (cfg.tx_inline_max > 1024) throw DpdkError("DpdkPort: tx_inline_max must be <= 1024");

    rte_eth_dev_info info{};
    if (int rc = rte_eth_dev_info_get(port, &info); rc != 0)
        throw DpdkError(fmt::format("rte_eth_dev_info_get(port {}): {}", port, err_name(rc)));
    caps_.driver = info.driver_name ? info.driver_name : "?";
    if (cfg.rx_queues > info.max_rx_queues || cfg.tx_queues > info.max_tx_queues)
        throw DpdkError(fmt::format("DpdkPort: port {} ({}) supports {} RX / {} TX queues, {} / {} requested",
                                    port, caps_.driver, info.max_rx_queues, info.max_tx_queues,
                                    cfg.rx_queues, cfg.tx_queues));
    if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, &cfg_.rx_desc, &cfg_.tx_desc); rc != 0)
        throw DpdkError(fmt::format("rte_eth_dev_adjust_nb_rx_tx_desc(port {}): {}", port, err_name(rc)));

    const PoolConfig need = min_pools(cfg_);
    const PoolConfig& have = cfg.pools;
    if (have.rx_mbufs < need.rx_mbufs || have.hdr_mbufs < need.hdr_mbufs || have.ext_mbufs < need.ext_mbufs)
        throw DpdkError(fmt::format(
            "DpdkPort: pools too small for {} RX x {} desc / {} TX x {} desc, burst {}, cache {}: "
            "rx_mbufs {} (need {}), hdr_mbufs {} (need {}), ext_mbufs {} (need {})",
            cfg.rx_queues, cfg_.rx_desc, cfg.tx_queues, cfg_.tx_desc, cfg.burst, have.cache, have.rx_mbufs,
            need.rx_mbufs, have.hdr_mbufs, need.hdr_mbufs, have.ext_mbufs, need.ext_mbufs));
    if (have.cache > RTE_MEMPOOL_CACHE_MAX_SIZE)
        throw DpdkError(fmt::format("DpdkPort: pool cache {} above RTE_MEMPOOL_CACHE_MAX_SIZE {}", have.cache,
                                    RTE_MEMPOOL_CACHE_MAX_SIZE));
    if (have.rx_data_room <= RTE_PKTMBUF_HEADROOM)
        throw DpdkError(fmt::format("DpdkPort: rx_data_room {} leaves no room after the {} B headroom",
                                    have.rx_data_room, RTE_PKTMBUF_HEADROOM));

    int socket = cfg.socket;
    if (socket < 0) socket = rte_eth_dev_socket_id(port);
    if (socket < 0) socket = int(rte_socket_id());
    auto make_pool = [&](const char* tag, uint32_t n, uint16_t priv, uint16_t room) {
        const std::string name = fmt::format("mroce_{}_{}", tag, port);
        rte_mempool* mp = rte_pktmbuf_pool_create(name.c_str(), n, have.cache, priv, room, socket);
        if (!mp)
            throw DpdkError(fmt::format("rte_pktmbuf_pool_create({}, {} mbufs x {} B room, socket {}): {}", name,
                                        n, room, socket, rte_strerror(rte_errno)));
        return mp;
    };
    try {
        rx_pool_ = make_pool("rx", have.rx_mbufs, 0, have.rx_data_room);
        hdr_pool_ = make_pool("hd", have.hdr_mbufs, 0, uint16_t(RTE_PKTMBUF_HEADROOM + kHdrRoom + cfg.tx_inline_max));
        // Attach-only mbufs: no data room, the shared info lives in the private area
        // (one per mbuf, so its refcount is never shared and never needs atomics).
        ext_pool_ = make_pool("ex", have.ext_mbufs,
                              RTE_ALIGN_CEIL(sizeof(rte_mbuf_ext_shared_info), RTE_MBUF_PRIV_ALIGN), 0);

        const bool hw = cfg.use_hw_cksum;
        caps_.tx_ip_cksum = hw && (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM);
        caps_.tx_udp_cksum = hw && (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_UDP_CKSUM);
        caps_.tx_multi_seg = info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
        caps_.rx_ip_cksum = hw && (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM);
        caps_.rx_udp_cksum = hw && (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_UDP_CKSUM);
        // Payload segments carry the engine's virtual addresses; a device can DMA
        // them only when IOVA = VA (physical NICs in PA mode would need the
        // regions registered with rte_extmem_register + rte_dev_dma_map).
        caps_.iova_va = rte_eal_iova_mode() == RTE_IOVA_VA;

        rte_eth_conf conf{};
        if (cfg.mtu) conf.rxmode.mtu = cfg.mtu;
        const uint64_t rss_udp = info.flow_type_rss_offloads & RTE_ETH_RSS_NONFRAG_IPV4_UDP;
        if (cfg.rx_queues > 1 && rss_udp) {
            // Hash on the UDP ports: a path's frames (one source port) stay on one queue, in order.
            conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
            conf.rx_adv_conf.rss_conf.rss_key = nullptr;   // the PMD's default key
            conf.rx_adv_conf.rss_conf.rss_hf = rss_udp;
            caps_.rss_udp = true;
        }
        if (caps_.rx_ip_cksum) conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_IPV4_CKSUM;
        if (caps_.rx_udp_cksum) conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
        // The offload flags of every frame tx_burst builds, worked out once.
        if (caps_.tx_ip_cksum) tx_ol_ |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM;
        if (caps_.tx_udp_cksum) tx_ol_ |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_UDP_CKSUM;
        tx_offload_ = tx_ol_ ? rte_mbuf_tx_offload(kEth, kIp, 0, 0, 0, 0, 0) : 0;
        if (caps_.tx_ip_cksum) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
        if (caps_.tx_udp_cksum) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
        // Header + payload chains need MULTI_SEGS on a NIC. Software PMDs such
        // as net_ring pass mbufs through untouched and advertise nothing, so a
        // missing capability is not fatal; it is reported in caps().
        if (caps_.tx_multi_seg) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
        if (int rc = rte_eth_dev_configure(port, cfg.rx_queues, cfg.tx_queues, &conf); rc != 0)
            throw DpdkError(fmt::format("rte_eth_dev_configure(port {} [{}], {} rx, {} tx, mtu {}): {}", port,
                                        caps_.driver, cfg.rx_queues, cfg.tx_queues, cfg.mtu, err_name(rc)));
        if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, &cfg_.rx_desc, &cfg_.tx_desc); rc != 0)
            throw DpdkError(fmt::format("rte_eth_dev_adjust_nb_rx_tx_desc(port {}): {}", port, err_name(rc)));

        rte_eth_rxconf rxc = info.default_rxconf;
        rxc.offloads = conf.rxmode.offloads;
        for (uint16_t q = 0; q < cfg.rx_queues; ++q)
            if (int rc = rte_eth_rx_queue_setup(port, q, cfg_.rx_desc, unsigned(socket), &rxc, rx_pool_); rc != 0)
                throw DpdkError(fmt::format("rte_eth_rx_queue_setup(port {}, queue {}, {} desc): {}", port, q,
                                            cfg_.rx_desc, err_name(rc)));
        rte_eth_txconf txc = info.default_txconf;
        txc.offloads = conf.txmode.offloads;
        for (uint16_t q = 0; q < cfg.tx_queues; ++q)
            if (int rc = rte_eth_tx_queue_setup(port, q, cfg_.tx_desc, unsigned(socket), &txc); rc != 0)
                throw DpdkError(fmt::format("rte_eth_tx_queue_setup(port {}, queue {}, {} desc): {}", port, q,
                                            cfg_.tx_desc, err_name(rc)));

        if (cfg.local_mac_from_port) {
            rte_ether_addr a{};
            if (int rc = rte_eth_macaddr_get(port, &a); rc != 0)
                throw DpdkError(fmt::format("rte_eth_macaddr_get(port {}): {}", port, err_name(rc)));
            std::memcpy(mac_.data(), a.addr_bytes, 6);
        } else {
            mac_ = cfg.local_mac;
        }
        uint16_t mtu = 0;
        if (rte_eth_dev_get_mtu(port, &mtu) != 0 || mtu == 0) mtu = cfg.mtu ? cfg.mtu : RTE_ETHER_MTU;
        caps_.mtu = mtu;
        caps_.tx_max_l3 = cfg.tx_max_l3 ? cfg.tx_max_l3 : mtu;

        for (uint16_t q = 0; q < cfg.rx_queues; ++q) {
            auto r = std::make_unique<RxQueue>();
            r->id = q;
            r->match = FrameMatch(cfg.local_ip, cfg.udp_port);
            r->slot = RTE_ALIGN_CEIL(cfg.max_rx_datagram, 64u);
            r->rx.resize(cfg.burst);
            r->keep.resize(cfg.burst);
            r->drop.resize(cfg.burst);
            r->scratch.resize(size_t(cfg.burst) * r->slot);
            rxq_.push_back(std::move(r));
        }
        for (uint16_t q = 0; q < cfg.tx_queues; ++q) {
            auto t = std::make_unique<TxQueue>();
            t->id = q;
            txq_.push_back(std::move(t));
        }
        build_templates();
        build_peer_index();
        if (cfg.tx_queues > 1) {
            gather_.resize(kTxChunk);
            gather_idx_.resize(kTxChunk);
        }

        if (int rc = rte_eth_dev_start(port); rc != 0)
            throw DpdkError(fmt::format("rte_eth_dev_start(port {} [{}]): {}", port, caps_.driver, err_name(rc)));
        started_ = true;
        if (cfg.promiscuous) rte_eth_promiscuous_enable(port);
    } catch (...) {
        rte_mempool_free(rx_pool_);
        rte_mempool_free(hdr_pool_);
        rte_mempool_free(ext_pool_);
        throw;
    }
}

namespace {

struct PortClose {
    uint16_t port_id;
    bool started;
};

void stop_and_close(void* arg) {
    const auto* c = static_cast<const PortClose*>(arg);
    if (c->started) rte_eth_dev_stop(c->port_id);
    // Closing releases the queues, and with them the RX mbufs a NIC keeps posted.
    rte_eth_dev_close(c->port_id);
}

}  // namespace

void close_port_on_interrupt_thread(uint16_t port_id, bool started) noexcept {
    // Why the interrupt thread: a PMD's control path runs there (memif's
    // control channel: the peer's DISCONNECT, or its closed socket, makes
    // memif_intr_handler call memif_disconnect(dev), which frees the
    // device's regions through its private data). DPDK 22.11's memif stop
    // does not wait for a handler that is running: rte_intr_callback_unregister
    // answers -EAGAIN, memif defers the unregistration and returns, and
    // rte_eth_dev_close then frees process_private and dev_private under the
    // running handler (a SIGSEGV in rte_free on eal-intr-thread at process
    // end: doc/architecture.md section 1, the DPDK driver row). That thread runs
    // one callback at a time: a stop and close made there cannot overlap
    // any of them, and leave none of the port's callbacks registered (none
    // is running, so each is unregistered at once).
    PortClose c{port_id, started};
    run_on_interrupt_thread(stop_and_close, &c);
}

DpdkPort::~DpdkPort() {
    for (uint16_t q = 0; q < rxq_.size(); ++q) rx_release(q);
    for (auto& t : txq_) {
        if (t->nidle) rte_mempool_put_bulk(hdr_pool_, reinterpret_cast<void* const*>(t->hdr), t->nidle);
        t->nidle = 0;
    }
    close_port_on_interrupt_thread(cfg_.port_id, started_);
    const PoolUsage u = pool_usage();
    if (u.hdr || u.ext) {
        // Our TX frames are still referenced elsewhere (the peer's RX ring with
        // net_ring/memif); freeing the pools would leave those dangling.
        std::fprintf(stderr, "mroce dpdk: port %u destroyed with %u header / %u payload mbufs still in use; "
                     "leaking its pools\n", cfg_.port_id, u.hdr, u.ext);
        return;
    }
    rte_mempool_free(rx_pool_);
    rte_mempool_free(hdr_pool_);
    rte_mempool_free(ext_pool_);
}

void DpdkPort::build_templates() {
    tmpl_.assign(cfg_.neighbours.size(), HdrTemplate{});
    for (size_t i = 0; i < cfg_.neighbours.size(); ++i) {
        uint8_t* b = tmpl_[i].bytes;
        auto* eth = reinterpret_cast<rte_ether_hdr*>(b);
        std::memcpy(eth->dst_addr.addr_bytes, cfg_.neighbours[i].mac.data(), 6);
        std::memcpy(eth->src_addr.addr_bytes, mac_.data(), 6);
        eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
        auto* ip = reinterpret_cast<rte_ipv4_hdr*>(b + kEth);
        ip->version_ihl = RTE_IPV4_VHL_DEF;
        ip->type_of_service = uint8_t(cfg_.dscp << 2);
        // DF with a constant ID (RFC 6864: atomic datagrams need no unique ID).
        ip->packet_id = 0;
        ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
        ip->time_to_live = cfg_.ttl;
        ip->next_proto_id = IPPROTO_UDP;
        ip->src_addr = rte_cpu_to_be_32(cfg_.local_ip);
        ip->dst_addr = rte_cpu_to_be_32(cfg_.neighbours[i].ip);
        auto* udp = reinterpret_cast<rte_udp_hdr*>(b + kEth + kIp);
        udp->dst_port = rte_cpu_to_be_16(cfg_.udp_port);
        udp->dgram_cksum = 0;   // IPv4 allows none; the Ethernet FCS covers the frame
        // The IP header's words that do not vary per packet, for each ECN
        // codepoint tx_burst sets: it adds the total length and stores.
        for (int e = 0; e < 2; ++e) {
            ip->type_of_service = uint8_t(cfg_.dscp << 2 | (e ? kEct0 : 0));
            tmpl_[i].vtos[e] = load16(b + kEth);
            uint64_t sum = 0;
            for (size_t w = 0; w < kIp; w += 2)
                if (w != 2 && w != 10) sum += load16(b + kEth + w);
            tmpl_[i].ip_sum[e] = fold16(sum);
        }
        ip->type_of_service = uint8_t(cfg_.dscp << 2);
    }
}

void DpdkPort::build_peer_index() {
    uint32_t size = 16;
    while (size < 2 * cfg_.neighbours.size()) size <<= 1;
    peer_mask_ = size - 1;
    peer_ip_.assign(size, 0);
    peer_idx_.assign(size, kNoPeer);
    for (uint32_t i = 0; i < cfg_.neighbours.size(); ++i) {
        const uint32_t ip = cfg_.neighbours[i].ip;
        uint32_t h = (ip * 2654435761u) & peer_mask_;
        while (peer_idx_[h] != kNoPeer) {
            if (peer_ip_[h] == ip)
                throw DpdkError(fmt::format("DpdkPort: neighbour {} listed twice (entries {} and {})",
                                            format_ipv4(ip), peer_idx_[h], i));
            h = (h + 1) & peer_mask_;
        }
        peer_ip_[h] = ip;
        peer_idx_[h] = i;
    }
}

uint32_t DpdkPort::peer_of(uint32_t ip) const noexcept {
    uint32_t h = (ip * 2654435761u) & peer_mask_;
    while (peer_idx_[h] != kNoPeer) {
        if (peer_ip_[h] == ip) return peer_idx_[h];
        h = (h + 1) & peer_mask_;
    }
    return kNoPeer;
}

// After a burst sent with a reference of ours on each header mbuf, when one
// was a chain's or the PMD still holds one: hdr[0, sent) compacted to those
// the PMD let go of (refcnt 1, read with acquire: its reads of the frame are
// done; the rest of a chain went with its free), which are idle again; the
// others end recycling for the queue and lose our reference. Returns how many are idle.
size_t DpdkPort::recycle_sent(TxQueue& tq, size_t sent) noexcept {
    size_t k = 0;
    for (size_t i = 0; i < sent; ++i) {
        rte_mbuf* m = tq.hdr[i];
        if (__atomic_load_n(&m->refcnt, __ATOMIC_ACQUIRE) == 1) {
            m->next = nullptr;
            m->nb_segs = 1;
            tq.hdr[k++] = m;
        } else {
            // Our reference dropped, never the chain after it (the PMD frees
            // that with its own): rte_pktmbuf_free_seg unlinks a segment it
            // frees, so a PMD that let go meanwhile leaves nothing dangling.
            tq.recycle = false;
            rte_pktmbuf_free_seg(m);
        }
    }
    return k;
}

// One frame into header mbuf m: the neighbour's template, the lengths, the
// mroce header and an inline payload (a larger payload's segments are the
// caller's), and every field rte_pktmbuf_reset would set. refs: the mbuf's
// reference count (2 while recycling, TxQueue). udp_data: hdr_len +
// payload_len; inline_max: cfg_.tx_inline_max, both the caller's (a loop's
// locals: read here after the frame's stores, which may alias anything, they
// were loaded again per frame).
[[gnu::always_inline]] inline void DpdkPort::build_frame(rte_mbuf* m, const TxPacket& p, uint16_t refs,
                                                         uint32_t udp_data, uint32_t inline_max) noexcept {
    const HdrTemplate& t = tmpl_[p.peer];
    const unsigned ect = p.ect != 0;
    uint8_t* d = static_cast<uint8_t*>(m->buf_addr) + RTE_PKTMBUF_HEADROOM;
    std::memcpy(d, t.bytes, sizeof t.bytes);
    const uint32_t l4 = uint32_t(kUdp) + udp_data;
    const uint16_t tot_be = rte_cpu_to_be_16(uint16_t(kIp + l4));
    // Connection control leaves from the well-known port so the peer learns
    // where to answer (R-CONN-2); every path gets its entropy's port.
    const uint16_t sport = p.path == kControlPath ? cfg_.udp_port
                                                  : uint16_t(cfg_.src_port_base + (p.entropy & cfg_.src_port_mask));
    store16(d + kEth, t.vtos[ect]);
    store16(d + kEth + 2, tot_be);
    if (!caps_.tx_ip_cksum) store16(d + kEth + 10, uint16_t(~fold16_3(t.ip_sum[ect] + tot_be)));
    store16(d + kEth + kIp, rte_cpu_to_be_16(sport));
    store16(d + kEth + kIp + 4, rte_cpu_to_be_16(uint16_t(l4)));
    // The whole array, a fixed-size copy inlined instead of a memcpy call for
    // hdr_len bytes (kHdrRoom holds it): the bytes past hdr_len lie past
    // data_len, or the inline payload overwrites them.
    std::memcpy(d + kL2L4, p.hdr, sizeof p.hdr);
    uint32_t dlen = uint32_t(kL2L4) + p.hdr_len;
    if (p.payload_len && p.payload_len <= inline_max) {
        copy_payload(d + dlen, p.payload, p.payload_len);
        dlen += p.payload_len;
    }
    // rte_pktmbuf_reset's fields; a raw mbuf already has refcnt 1,
    // nb_segs 1 and next NULL (rte_mbuf_raw_alloc, and a recycled one),
    // the refcnt and nb_segs written again so the four words merge into one store.
    m->data_off = RTE_PKTMBUF_HEADROOM;
    m->refcnt = refs;
    m->nb_segs = 1;
    m->port = RTE_MBUF_PORT_INVALID;
    m->ol_flags = tx_ol_;
    m->packet_type = 0;
    m->pkt_len = uint32_t(kL2L4) + udp_data;
    m->data_len = uint16_t(dlen);
    m->vlan_tci = 0;
    m->vlan_tci_outer = 0;
    m->tx_offload = tx_offload_;
    if (caps_.tx_udp_cksum) [[unlikely]]
        reinterpret_cast<rte_udp_hdr*>(d + kEth + kIp)->dgram_cksum =
            rte_ipv4_phdr_cksum(reinterpret_cast<rte_ipv4_hdr*>(d + kEth), tx_ol_);
}

// One frame, its payload copied, on a queue that recycles and has an idle
// header mbuf: a ping-pong's every send and most ACKs. The general path's
// chunking, payload-segment count, refusal bookkeeping and idle compaction
// cost about 120 of its 295 instructions for such a frame (round 39).
size_t DpdkPort::tx_one(TxQueue& tq, uint16_t queue, const TxPacket* pkts) noexcept {
    const TxPacket& p = *pkts;
    const uint32_t udp_data = uint32_t(p.hdr_len) + p.payload_len;
    const uint32_t inline_max = cfg_.tx_inline_max;
    if (tq.nidle == 0 || !tq.recycle || p.peer >= tmpl_.size() || p.hdr_len > wire::kMaxHeaderLen ||
        p.payload_len > inline_max || uint32_t(kIp + kUdp) + udp_data > caps_.tx_max_l3 ||
        (p.payload_len != 0 && p.payload == nullptr) || g_link_cut[cfg_.port_id].load(std::memory_order_relaxed))
        [[unlikely]]
        return tx_chunks(tq, queue, pkts, 1);
    rte_mbuf* m = tq.hdr[0];
    build_frame(m, p, 2, udp_data, inline_max);
    ++tq.st.tx_bursts;
    if (rte_eth_tx_burst(cfg_.port_id, queue, tq.hdr, 1) == 0) [[unlikely]] {
        m->refcnt = 1;   // never the PMD's: idle again, as it was
        ++tq.st.tx_ring_full;
        return 0;
    }
    // Back with our reference alone (memif frees inside the call): it stays
    // idle in place. Else the PMD still holds it, and recycling ends for the
    // queue as after any burst (recycle_sent); hdr[0] is no longer ours.
    if (__atomic_load_n(&m->refcnt, __ATOMIC_ACQUIRE) != 1) [[unlikely]]
        if (recycle_sent(tq, 1) == 0) tq.hdr[0] = tq.hdr[--tq.nidle];
    ++tq.st.tx_packets;
    tq.st.tx_bytes += udp_data;
    return 1;
}

// Both paths out of line and reached by a jump: a burst of several frames
// does not pay the lone frame's register saves, nor the lone frame the
// general path's (round 39).
size_t DpdkPort::tx_burst(uint16_t queue, const TxPacket* pkts, size_t n) noexcept {
    TxQueue& tq = *txq_[queue];
    if (n == 1) return tx_one(tq, queue, pkts);
    return tx_chunks(tq, queue, pkts, n);
}

size_t DpdkPort::tx_chunks(TxQueue& tq, uint16_t queue, const TxPacket* pkts, size_t n) noexcept {
    PortStats& st = tq.st;
    const uint32_t max_l3 = caps_.tx_max_l3;
    const size_t npeers = tmpl_.size();
    const uint16_t port = cfg_.port_id;
    const uint32_t inline_max = cfg_.tx_inline_max;
    // The fields a frame takes from the configuration are read where they are
    // used, not copied into locals first: held across the loop, they were
    // spilled to the stack and read back, about 20 instructions a call (a
    // single frame's, round 34).
    const rte_iova_t bad_iova = RTE_BAD_IOVA;
    if (g_link_cut[port].load(std::memory_order_relaxed)) [[unlikely]] {
        st.tx_cut += n;
        return n;
    }

    size_t done = 0;
    while (done < n) {
        const TxPacket* chunk = pkts + done;
        size_t take = std::min(n - done, kTxChunk);
        // Only payload segments are counted ahead (a small payload is copied,
        // one test per packet); each packet is validated as it is built, and
        // the mbufs of refused ones go back unused.
        uint32_t nseg = 0;
        for (size_t i = 0; i < take; ++i) {
            const TxPacket& p = chunk[i];
            if (p.payload_len <= inline_max) continue;
            const uint32_t l3 = uint32_t(kIp + kUdp) + p.hdr_len + p.payload_len;
            const uint32_t segs = l3 <= max_l3 ? (p.payload_len + kExtSegMax - 1) / kExtSegMax : 0;
            if (nseg + segs > kTxExtMax) {
                take = i;
                break;
            }
            nseg += segs;
        }
        // Raw header mbufs, the idle recycled ones first, in place (hdr[0,
        // have); those past take stay idle): the build below sets every field
        // rte_pktmbuf_reset would (rte_pktmbuf_alloc_bulk's reset was most of
        // its 25 instructions per frame, each field then written again).
        const size_t have = tq.nidle;
        if (take > have && rte_mempool_get_bulk(hdr_pool_, reinterpret_cast<void**>(tq.hdr + have),
                                                unsigned(take - have)) != 0) {
            ++st.tx_no_mbuf;
            return done;
        }
        const size_t spare = std::max(have, take);   // hdr[0, spare): ours, clean
        if (nseg && rte_pktmbuf_alloc_bulk(ext_pool_, tq.ext, nseg) != 0) {
            tq.nidle = uint16_t(spare);
            ++st.tx_no_mbuf;
            return done;
        }
        // Our reference, held across the burst, when recycling.
        const uint16_t refs = tq.recycle ? 2 : 1;

        size_t h = 0, e = 0;
        uint64_t bytes = 0;  // of the valid packets, in order; the unsent are taken off after the burst
        for (size_t i = 0; i < take; ++i) {
            const TxPacket& p = chunk[i];
            const uint32_t udp_data = uint32_t(p.hdr_len) + p.payload_len;
            const bool ok = p.peer < npeers && p.hdr_len <= wire::kMaxHeaderLen &&
                            uint32_t(kIp + kUdp) + udp_data <= max_l3 && (p.payload_len == 0 || p.payload != nullptr);
            tq.valid[i] = ok;
            if (!ok) [[unlikely]] continue;
            rte_mbuf* m = tq.hdr[h++];
            build_frame(m, p, refs, udp_data, inline_max);
            bytes += udp_data;

            if (p.payload_len > inline_max) [[unlikely]] {
                rte_mbuf* tail = m;
                uint16_t segs = 1;
                for (uint32_t off = 0; off < p.payload_len; off += kExtSegMax) {
                    const uint16_t len = uint16_t(std::min(kExtSegMax, p.payload_len - off));
                    rte_mbuf* x = tq.ext[e++];
                    auto* sh = static_cast<rte_mbuf_ext_shared_info*>(rte_mbuf_to_priv(x));
                    sh->free_cb = noop_free;
                    sh->fcb_opaque = nullptr;
                    rte_mbuf_ext_refcnt_set(sh, 1);
                    void* va = const_cast<uint8_t*>(p.payload + off);
                    rte_pktmbuf_attach_extbuf(x, va, caps_.iova_va ? rte_iova_t(uintptr_t(va)) : bad_iova, len, sh);
                    x->data_len = len;
                    tail->next = x;
                    tail = x;
                    ++segs;
                }
                m->nb_segs = segs;
            }
        }
        const size_t nhdr = h;
        // Refused packets: their header mbufs untouched (idle below), their payload
        // segments (counted above when they had a valid length) reset and unattached.
        if (e < nseg) [[unlikely]]
            rte_mempool_put_bulk(ext_pool_, reinterpret_cast<void* const*>(tq.ext + e), nseg - unsigned(e));

        const uint16_t sent = nhdr ? rte_eth_tx_burst(port, queue, tq.hdr, uint16_t(nhdr)) : 0;
        // hdr[0, idle): sent and back, ours alone.
        size_t idle = 0;
        if (refs == 2) {
            // Single-segment frames all back (memif): idle in place, nothing to reset.
            uint32_t held = nseg;
            for (size_t i = 0; i < sent; ++i) held |= __atomic_load_n(&tq.hdr[i]->refcnt, __ATOMIC_ACQUIRE) ^ 1u;
            idle = held == 0 ? sent : recycle_sent(tq, sent);
        }
        size_t consumed = take;
        if (sent < nhdr) [[unlikely]] {
            // Never the PMD's: ours alone again, freed with their payload segments.
            if (refs == 2)
                for (size_t i = sent; i < nhdr; ++i) tq.hdr[i]->refcnt = 1;
            rte_pktmbuf_free_bulk(tq.hdr + sent, unsigned(nhdr - sent));
            st.tx_ring_full += nhdr - sent;
            // The first packet not taken (the sent-th valid one), and the
            // bytes of the valid ones from there on.
            size_t i = 0;
            for (size_t v = 0; i < take; ++i)
                if (tq.valid[i] && v++ == sent) break;
            consumed = i;
            for (; i < take; ++i)
                if (tq.valid[i]) bytes -= chunk[i].hdr_len + chunk[i].payload_len;
        }
        if (nhdr < take)  // some were refused: count those consumed by reason
            for (size_t i = 0; i < consumed; ++i) {
                if (tq.valid[i]) continue;
                const TxPacket& p = chunk[i];
                if (p.peer >= npeers) ++st.tx_bad_peer;
                else ++st.tx_bad_len;
            }
        // The idle: hdr[0, idle), then the refused packets' and those past take.
        if (idle == take) [[likely]] {
            tq.nidle = uint16_t(spare);
        } else {
            for (size_t i = nhdr; i < spare; ++i) tq.hdr[idle++] = tq.hdr[i];
            tq.nidle = uint16_t(idle);
        }
        st.tx_bytes += bytes;
        st.tx_packets += sent;
        st.tx_bursts += nhdr != 0;
        done += consumed;
        if (consumed < take) break;
    }
    return done;
}

namespace {

// The parsed header fields rx_burst needs; peer is kNoPeer for a dropped frame.
struct RxHdr {
    uint32_t peer = kNoPeer;
    uint32_t ihl = 0;
    uint32_t ulen = 0;   // UDP length, header included
    uint8_t tos = 0;
};

// c += v as one add to memory: GCC's SLP vectoriser paired two adjacent
// counters' adds into a 16-byte load, two inserts and a store, 6
// instructions for 2 (round 43); the empty asm, which emits nothing, ends
// the group.
[[gnu::always_inline]] inline void add_count(uint64_t& c, uint64_t v) noexcept {
    c += v;
    asm("" : "+m"(c));
}

// Every frame rx_burst's fast path does not take: the full checks in their
// order, the first that fails counted.
[[gnu::noinline, gnu::cold]] RxHdr rx_classify(const rte_mbuf* m, PortStats& st, uint32_t local_ip,
                                               uint16_t udp_port, const DpdkPort& port) noexcept {
    RxHdr h;
    const uint32_t plen = m->pkt_len;
    // Headers up to the largest IPv4 header; copied only if the first segment is shorter.
    uint8_t hbuf[kEth + 60 + kUdp];
    const uint8_t* f = plen >= kL2L4
        ? static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, std::min<uint32_t>(plen, sizeof hbuf), hbuf))
        : nullptr;
    const uint8_t* ip = f ? f + kEth : nullptr;
    const uint32_t ihl = ip ? (ip[0] & 0xfu) * 4u : 0;
    const uint16_t tot = ip ? be16(ip + 2) : 0;
    const uint64_t ipck = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
    uint32_t peer = kNoPeer;
    const uint8_t* udp = nullptr;
    if (!f) {
        if (m->data_len >= kEth && be16(rte_pktmbuf_mtod(m, const uint8_t*) + 12) != RTE_ETHER_TYPE_IPV4)
            ++st.rx_not_ipv4;
        else
            ++st.rx_bad_length;
    } else if (be16(f + 12) != RTE_ETHER_TYPE_IPV4 || (ip[0] >> 4) != 4) {
        ++st.rx_not_ipv4;
    } else if (ihl < kIp || tot < ihl + kUdp || kEth + tot > plen) {
        ++st.rx_bad_length;
    } else if (ipck == RTE_MBUF_F_RX_IP_CKSUM_BAD ||
               (ipck != RTE_MBUF_F_RX_IP_CKSUM_GOOD && ipv4_sum(ip, ihl) != 0xffff)) {
        ++st.rx_bad_cksum;
    } else if (be16(ip + 6) & (RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK)) {
        ++st.rx_fragment;
    } else if (ip[9] != IPPROTO_UDP) {
        ++st.rx_not_udp;
    } else if (be32(ip + 16) != local_ip) {
        ++st.rx_wrong_dst;
    } else if (udp = ip + ihl; be16(udp + 2) != udp_port) {
        ++st.rx_wrong_port;
    } else if (be16(udp + 4) < kUdp || be16(udp + 4) > tot - ihl) {
        ++st.rx_bad_length;
    } else if ((m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_BAD) {
        ++st.rx_bad_cksum;
    } else if ((peer = port.peer_of(be32(ip + 12))) == kNoPeer) {
        ++st.rx_unknown_peer;
    } else {
        h.peer = peer;
        h.ihl = ihl;
        h.ulen = be16(udp + 4);
        h.tos = ip[1];
    }
    return h;
}

}  // namespace

// What the PMD received into our RX pool, one direct segment held by us
// alone (every frame over memif or a NIC), goes back to the pool unchecked
// through rq.ret: rte_pktmbuf_free_bulk's per-mbuf generality (refcount
// update, detach, chain walk, a pool test per mbuf) was about 40
// instructions per frame at a memif receiver (doc/performance.md 7.3).
// Anything else (chains, attached or shared mbufs, another pool's: a
// net_ring peer's TX mbufs) is freed the general way, now.
[[gnu::always_inline]] inline void DpdkPort::retire_held(RxQueue& rq) noexcept {
    const uint16_t n = rq.held;
    rq.held = 0;
    rte_mbuf** keep = rq.keep.data();
    size_t nother = 0;
    // Whether m goes back unchecked: refcnt and nb_segs, adjacent, both 1 is
    // one 4-byte test, the same on either byte order.
    const auto raw = [this](const rte_mbuf* m) __attribute__((always_inline)) {
        uint32_t refs_segs;
        std::memcpy(&refs_segs, &m->refcnt, 4);
        return m->pool == rx_pool_ && m->next == nullptr && refs_segs == 0x00010001u && RTE_MBUF_DIRECT(m);
    };
    const auto retire = [this, &rq](rte_mbuf* m) __attribute__((always_inline)) {
        if (rq.nret == kRxRet) [[unlikely]] {
            rte_mempool_put_bulk(rx_pool_, reinterpret_cast<void* const*>(rq.ret), kRxRet);
            rq.nret = 0;
        }
        rq.ret[rq.nret++] = m;
    };
    // A ping-pong's every release: one frame of ours, without the loop,
    // whose setup was some 15 of a lone frame's 40 instructions (round 43).
    // Anything else goes the loop's way, which tests it again.
    if (n == 1 && keep[0] && raw(keep[0])) [[likely]] {
        retire(keep[0]);
        return;
    }
    for (uint16_t i = 0; i < n; ++i) {
        rte_mbuf* m = keep[i];
        if (!m) continue;   // taken by rx_take
        if (!raw(m)) [[unlikely]] {
            rq.drop[nother++] = m;
            continue;
        }
        retire(m);
    }
    if (nother) rte_pktmbuf_free_bulk(rq.drop.data(), unsigned(nother));
}

size_t DpdkPort::rx_burst(uint16_t queue, RxPacket* out, size_t max) noexcept {
    RxQueue& rq = *rxq_[queue];
    if (rq.held) retire_held(rq);
    const uint16_t want = uint16_t(std::min<size_t>(max, cfg_.burst));
    const uint16_t nb = rte_eth_rx_burst(cfg_.port_id, queue, rq.rx.data(), want);
    // A busy poller's most common call: out before the burst's setup (the
    // counters; round 34).
    if (nb == 0) return 0;
    return rx_frames(rq, out, nb);
}

// rx_burst's fast test of one frame: a 20-byte-IP frame of ours whose
// headers lie in its first segment, every field that is constant for valid
// traffic tested at once. It accepts only frames the full classification
// (rx_classify) accepts, with the same results: their peer, and in dlen the
// UDP payload's length; kNoPeer for anything else, to be counted under the
// reason rx_classify gives.
[[gnu::always_inline]] inline uint32_t DpdkPort::rx_fast(RxQueue& rq, const rte_mbuf* m, const uint8_t* f,
                                                         uint32_t& dlen) noexcept {
    if (m->data_len < kL2L4) return kNoPeer;
    const uint32_t plen = m->pkt_len;
    const uint32_t tot = be16(f + kEth + 2);
    const uint32_t ulen = be16(f + kEth + kIp + 4);
    const uint64_t ck = m->ol_flags & (RTE_MBUF_F_RX_IP_CKSUM_MASK | RTE_MBUF_F_RX_L4_CKSUM_MASK);
    // By reference: the test's loads become the xor's and and's memory
    // operands; a copy was 13 instructions a call (round 37).
    const FrameMatch& match = rq.match;
    // (ulen >= 8 and ulen + 20 <= tot: tot >= 28, an IPv4 + UDP header.)
    // Branches, not the flags and'ed: each test of a frame of ours is taken
    // alike every time, and the setcc and and's cost 5 more (round 43).
    if (!match(f) || kEth + tot > plen || ulen < kUdp || ulen + kIp > tot) return kNoPeer;
    // No checksum flag at all (software PMDs: memif, net_ring) is the common case.
    if (ck == 0) [[likely]] {
        if (!ipv4_hdr20_ok(f + kEth)) return kNoPeer;
    } else if ((ck & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_BAD ||
               (ck & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_BAD ||
               ((ck & RTE_MBUF_F_RX_IP_CKSUM_MASK) != RTE_MBUF_F_RX_IP_CKSUM_GOOD && !ipv4_hdr20_ok(f + kEth))) {
        return kNoPeer;
    }
    // One-entry cache: a burst mostly comes from one peer. It may hold an
    // unknown source too (kNoPeer): peer_of's answer, the table being fixed;
    // rx_classify counts it.
    const uint32_t src = be32(f + kEth + 12);
    if (src != rq.last_src) [[unlikely]] {
        rq.last_peer = peer_of(src);
        rq.last_src = src;
    }
    dlen = ulen - uint32_t(kUdp);
    return rq.last_peer;
}

// Inlined: out of line (a call and a second prologue) it cost about 22
// instructions a burst with frames and saved an empty poll nothing, whose
// saved registers rte_eth_rx_burst's callback path needs anyway (round 37).
[[gnu::always_inline]] inline size_t DpdkPort::rx_frames(RxQueue& rq, RxPacket* out, uint16_t nb) noexcept {
    PortStats& st = rq.st;
    const uint16_t queue = rq.id;
    if (g_link_cut[cfg_.port_id].load(std::memory_order_relaxed)) [[unlikely]] {
        rte_pktmbuf_free_bulk(rq.rx.data(), nb);
        st.rx_cut += nb;
        return 0;
    }
    const uint32_t local_ip = cfg_.local_ip;
    const uint16_t udp_port = cfg_.udp_port;
    size_t k = 0, nd = 0;
    uint64_t ce_count = 0, bytes = 0;
    // A datagram of dlen bytes in one span (data2 null) or two, handed over in out[k].
    const auto hand_over = [&](rte_mbuf* m, uint32_t peer, uint8_t tos, const uint8_t* data, uint32_t len1,
                               const uint8_t* data2, uint32_t dlen) {
        const uint8_t ce = (tos & kEctMask) == kCe;
        RxPacket& r = out[k];
        r.data = data;
        r.len = len1;
        r.data2 = data2;
        r.len2 = dlen - len1;
        r.peer = peer;
        r.local_path = queue;
        r.ce = ce;
        ce_count += ce;
        bytes += dlen;
        rq.keep[k++] = m;
    };
    for (uint16_t i = 0; i < nb; ++i) {
        rte_mbuf* m = rq.rx[i];
        const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
        RxHdr h;
        uint32_t fdlen = 0;
        h.peer = rx_fast(rq, m, f, fdlen);
        if (h.peer != kNoPeer) {
            if (m->data_len >= kL2L4 + fdlen) [[likely]] {
                // The whole datagram in this segment: handed over here.
                hand_over(m, h.peer, f[kEth + 1], f + kL2L4, fdlen, nullptr, fdlen);
                continue;
            }
            h.ihl = kIp;
            h.ulen = fdlen + uint32_t(kUdp);
            h.tos = f[kEth + 1];
        } else {
            h = rx_classify(m, st, local_ip, udp_port, *this);
        }
        if (h.peer == kNoPeer) {
            rq.drop[nd++] = m;
            continue;
        }
        const uint32_t off = uint32_t(kEth) + h.ihl + uint32_t(kUdp);
        const uint32_t dlen = h.ulen - uint32_t(kUdp);
        const uint8_t* data = nullptr;
        const uint8_t* data2 = nullptr;
        uint32_t len1 = dlen;
        if (m->data_len >= off + dlen) {
            data = rte_pktmbuf_mtod_offset(m, const uint8_t*, off);
        } else if (m->nb_segs == 2 && m->data_len >= off + wire::kMaxHeaderLen &&
                   m->data_len - off + m->next->data_len >= dlen) {
            // Two segments, the first holding the whole mroce header whatever its
            // type (our own TX chain as net_ring delivers it: header mbuf + the
            // payload's external buffer): two spans, no copy (packet_io.hpp).
            len1 = m->data_len - off;
            data = rte_pktmbuf_mtod_offset(m, const uint8_t*, off);
            data2 = rte_pktmbuf_mtod(m->next, const uint8_t*);
            ++st.rx_split;
        } else if (dlen <= rq.slot) {
            // Any other chain (a header cut short, three or more segments): copy
            // it into this slot's scratch (NIC RX with MTU-sized buffers never gets here).
            data = static_cast<const uint8_t*>(
                rte_pktmbuf_read(m, off, dlen, rq.scratch.data() + size_t(k) * rq.slot));
            ++st.rx_linearized;
        } else {
            ++st.rx_too_big;
        }
        if (data) {
            hand_over(m, h.peer, h.tos, data, len1, data2, dlen);
            continue;
        }
        rq.drop[nd++] = m;
    }
    if (nd) rte_pktmbuf_free_bulk(rq.drop.data(), unsigned(nd));
    rq.held = uint16_t(k);
    add_count(st.rx_packets, k);
    add_count(st.rx_ce, ce_count);
    add_count(st.rx_bytes, bytes);
    return k;
}

rte_mbuf* DpdkPort::rx_take(uint16_t queue, size_t i, uint32_t* payload_off) noexcept {
    RxQueue& rq = *rxq_[queue];
    if (i >= rq.held) return nullptr;
    rte_mbuf* m = rq.keep[i];
    rq.keep[i] = nullptr;   // rte_pktmbuf_free_bulk skips NULL entries
    if (m && payload_off) {
        uint8_t vihl = 0;
        const uint8_t* p = static_cast<const uint8_t*>(rte_pktmbuf_read(m, kEth, 1, &vihl));
        *payload_off = uint32_t(kEth) + (p ? (*p & 0xfu) * 4u : uint32_t(kIp)) + uint32_t(kUdp);
    }
    return m;
}

void DpdkPort::rx_release(uint16_t queue) noexcept {
    RxQueue& rq = *rxq_[queue];
    if (rq.held) retire_held(rq);
    if (rq.nret) rte_mempool_put_bulk(rx_pool_, reinterpret_cast<void* const*>(rq.ret), rq.nret);
    rq.nret = 0;
}

size_t DpdkPort::tx_burst_queues(const TxPacket* pkts, size_t n, uint32_t* unsent) noexcept {
    const uint16_t nq = cfg_.tx_queues;
    size_t done = 0, nunsent = 0;
    for (size_t base = 0; base < n; base += kTxChunk) {
        const size_t m = std::min(n - base, kTxChunk);
        for (uint16_t q = 0; q < nq; ++q) {
            size_t k = 0;
            for (size_t i = 0; i < m; ++i) {
                if (tx_queue_of(pkts[base + i]) != q) continue;
                gather_[k] = pkts[base + i];
                gather_idx_[k++] = uint32_t(base + i);
            }
            if (k == 0) continue;
            const size_t s = tx_burst(q, gather_.data(), k);
            done += s;
            for (size_t j = s; j < k; ++j) unsent[nunsent++] = gather_idx_[j];
        }
    }
    // Queues were visited in turn: merge the refused indices back into order
    // (insertion sort: at most a burst, usually a handful).
    for (size_t i = 1; i < nunsent; ++i)
        for (size_t j = i; j > 0 && unsent[j - 1] > unsent[j]; --j) std::swap(unsent[j - 1], unsent[j]);
    return done;
}

size_t DpdkPort::rx_burst_each(RxPacket* out, size_t max) noexcept {
    const uint16_t nq = cfg_.rx_queues;
    size_t k = 0;
    const uint16_t first = rx_next_;
    rx_next_ = uint16_t((rx_next_ + 1) % nq);
    for (uint16_t i = 0; i < nq; ++i) {
        const uint16_t q = uint16_t((first + i) % nq);
        // A queue polled with no room left would release what the caller still holds.
        if (k == max) break;
        k += rx_burst(q, out + k, max - k);
    }
    return k;
}

void DpdkPort::rx_release_all() noexcept {
    for (uint16_t q = 0; q < rxq_.size(); ++q) rx_release(q);
}

PortStats DpdkPort::stats() const noexcept {
    PortStats s;
    for (const auto& q : rxq_) s += q->st;
    for (const auto& q : txq_) s += q->st;
    return s;
}

PortStats DpdkPort::rx_queue_stats(uint16_t q) const noexcept { return rxq_[q]->st; }
PortStats DpdkPort::tx_queue_stats(uint16_t q) const noexcept { return txq_[q]->st; }

void DpdkPort::reset_stats() noexcept {
    for (auto& q : rxq_) q->st = {};
    for (auto& q : txq_) q->st = {};
}

uint32_t DpdkPort::tx_payload_held(uint64_t wait_us) noexcept {
    if (!ext_pool_) return 0;
    const uint64_t end = rte_get_timer_cycles() + wait_us * (rte_get_timer_hz() / 1'000'000);
    for (;;) {
        // PMDs without it (net_ring, memif, af_packet) free on their own; the count tells.
        for (uint16_t q = 0; q < cfg_.tx_queues; ++q) (void)rte_eth_tx_done_cleanup(cfg_.port_id, q, 0);
        const uint32_t held = rte_mempool_in_use_count(ext_pool_);
        if (held == 0 || rte_get_timer_cycles() >= end) return held;
        rte_delay_us_sleep(10);
    }
}

PoolUsage DpdkPort::pool_usage() const noexcept {
    PoolUsage u;
    if (rx_pool_) {
        // Released mbufs waiting for their bulk return are as free as the pool's.
        unsigned ret = 0;
        for (const auto& r : rxq_) ret += r->nret;
        u.rx = rte_mempool_in_use_count(rx_pool_) - ret;
    }
    if (hdr_pool_) {
        // Recycled header mbufs waiting in a TX queue are as free as the pool's.
        unsigned idle = 0;
        for (const auto& t : txq_) idle += t->nidle;
        u.hdr = rte_mempool_in_use_count(hdr_pool_) - idle;
    }
    if (ext_pool_) u.ext = rte_mempool_in_use_count(ext_pool_);
    return u;
}

}  // namespace mroce::dpdk
