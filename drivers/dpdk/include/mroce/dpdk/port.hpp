// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// DpdkPort: mroce packet I/O over one ethdev port (any PMD: a NIC, net_ring,
// net_memif, ...). TX turns engine TxPackets into Ethernet/IPv4/UDP frames
// (header mbuf + zero-copy external-buffer payload segments); RX validates
// frames and hands UDP payloads to the engine as RxPackets.
//
// Threading: each RX queue and each TX queue belongs to one lcore at a time;
// different queues may be driven from different lcores without locks. The
// burst calls never allocate, log, lock or make system calls.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mroce/dpdk/eal.hpp"
#include "mroce/packet_io.hpp"
#include "mroce/wire.hpp"

struct rte_mbuf;
struct rte_mempool;

namespace mroce::dpdk {

using MacAddr = std::array<uint8_t, 6>;

// Host-order IPv4 address from dotted quad; throws DpdkError when malformed.
uint32_t parse_ipv4(const std::string& s);
std::string format_ipv4(uint32_t ip);
MacAddr parse_mac(const std::string& s);

// A peer reachable on this port. The peer handle the engine sees is the
// index in PortConfig::neighbours.
struct Neighbour {
    uint32_t ip = 0;   // host order
    MacAddr mac{};
};

// Every pool is sized here, never by DPDK defaults: a default-sized pool does
// not fit a --no-huge EAL, and an undersized one fails later at queue setup
// with an unhelpful error. DpdkPort checks the sizes against the queue
// geometry and names the shortfall.
struct PoolConfig {
    uint32_t rx_mbufs = 0;    // >= rx_queues * (rx_desc + burst + 32 awaiting return) + cache slack
    uint32_t hdr_mbufs = 0;   // one per frame in flight: >= tx_queues * (tx_desc + burst)
    uint32_t ext_mbufs = 0;   // one per <= 64 KiB payload segment in flight
    uint32_t cache = 0;       // per-lcore cache of each pool (0: none)
    uint16_t rx_data_room = 2048 + 128;  // incl. RTE_PKTMBUF_HEADROOM (128)
};

struct PortConfig {
    uint16_t port_id = 0;
    uint16_t rx_queues = 1;
    uint16_t tx_queues = 1;
    uint16_t rx_desc = 1024;
    uint16_t tx_desc = 1024;
    uint16_t burst = 32;          // max packets per rx_burst call (scratch/array sizing)
    uint16_t mtu = 0;             // 0: keep the port's MTU; frames above the MTU are dropped on TX
    // Largest IPv4 datagram TX accepts; 0: the port's MTU. Only for software
    // PMDs that carry more than the MTU they report (net_memif reports 1500
    // and cannot be configured higher in 22.11, but chains buffers). With
    // net_memif keep every frame within one memif buffer (vdev arg bsize):
    // 22.11's memif TX never clears a reused first descriptor's flags on the
    // client-to-server ring, so after a multi-buffer frame a one-buffer frame
    // in that slot is chained past the ring head by the server's RX (stale
    // frames replayed, garbage, crashes; test_dpdk_integrity_memif.cpp).
    uint32_t tx_max_l3 = 0;
    // Payloads up to this many bytes are copied into the header mbuf instead
    // of attached as an external buffer: one single-segment frame, no second
    // mbuf to allocate, attach and free (for a 64 B payload that second mbuf
    // cost more than the copy: doc/performance.md 7.3). 0: always zero-copy.
    // Header mbufs grow by this much data room.
    uint16_t tx_inline_max = 0;
    uint32_t local_ip = 0;        // host order; RX drops frames to other addresses
    bool local_mac_from_port = true;
    MacAddr local_mac{};          // used when local_mac_from_port is false
    uint16_t udp_port = wire::kDefaultUdpPort;  // destination port, both directions
    // Source port = src_port_base + (entropy & src_port_mask): the ECMP
    // entropy of the path, kept inside the ephemeral range. Packets with
    // path == kControlPath leave from udp_port instead.
    uint16_t src_port_base = 49152;
    uint16_t src_port_mask = 0x3fff;
    uint8_t dscp = 0;
    uint8_t ttl = 64;
    // Static neighbour table, no ARP: the transport's peers are configured
    // endpoints of one fabric (like RoCE GIDs), resolving them on the data path
    // would put a slow, lossy, stateful protocol (and its timers and
    // retransmits) in front of a loss-tolerant one, and a DPDK port has no
    // kernel stack to answer ARP for us. A control plane fills this table.
    std::vector<Neighbour> neighbours;
    PoolConfig pools;
    // Per-RX-slot scratch for chained frames (mbuf chains) of a shape the
    // engine cannot take as two spans: the UDP payload is copied there so the
    // engine sees one contiguous datagram. Larger ones are dropped. A
    // two-segment chain whose first segment holds at least wire::kMaxHeaderLen
    // bytes of the datagram (net_ring carrying our TX chain) is not copied:
    // it goes to the engine as two spans (RxPacket::data2).
    uint32_t max_rx_datagram = wire::kMaxHeaderLen + wire::kMaxPayload;
    bool use_hw_cksum = true;     // use checksum offloads when the port advertises them
    bool promiscuous = false;
    int socket = -1;              // pools' NUMA socket; -1: the port's (or the caller's)
};

// Per queue counters, summed by DpdkPort::stats().
struct PortStats {
    uint64_t rx_packets = 0;       // handed to the engine
    uint64_t rx_bytes = 0;         // UDP payload bytes handed to the engine
    uint64_t rx_ce = 0;
    uint64_t rx_split = 0;         // two-segment frames handed over as two spans (header segment + payload), no copy
    uint64_t rx_linearized = 0;    // other multi-segment frames, copied into scratch
    uint64_t rx_not_ipv4 = 0;      // EtherType not IPv4 or IP version != 4
    uint64_t rx_not_udp = 0;
    uint64_t rx_wrong_port = 0;    // UDP destination port not ours
    uint64_t rx_wrong_dst = 0;     // IPv4 destination not local_ip
    uint64_t rx_bad_length = 0;    // truncated, or IPv4/UDP lengths contradict the frame
    uint64_t rx_bad_cksum = 0;     // IPv4 header checksum (or offload-reported L3/L4) bad
    uint64_t rx_fragment = 0;      // IPv4 fragments (mroce never fragments)
    uint64_t rx_unknown_peer = 0;  // source address not in the neighbour table
    uint64_t rx_too_big = 0;       // multi-segment datagram above max_rx_datagram
    uint64_t tx_packets = 0;       // taken by the PMD
    uint64_t tx_bytes = 0;         // UDP payload bytes (mroce header + payload) taken
    uint64_t tx_bursts = 0;        // PMD transmit calls (rte_eth_tx_burst with frames)
    uint64_t tx_bad_peer = 0;      // peer handle outside the neighbour table: dropped
    uint64_t tx_bad_len = 0;       // hdr_len > 72 or frame above MTU: dropped
    uint64_t tx_no_mbuf = 0;       // bursts refused for lack of mbufs
    uint64_t tx_ring_full = 0;     // packets the PMD did not take (caller may retry)
    uint64_t tx_cut = 0;           // TEST ONLY: consumed and dropped while the link was cut (set_link_cut)
    uint64_t rx_cut = 0;           // TEST ONLY: received and dropped while the link was cut

    uint64_t rx_dropped() const noexcept {
        return rx_not_ipv4 + rx_not_udp + rx_wrong_port + rx_wrong_dst + rx_bad_length +
               rx_bad_cksum + rx_fragment + rx_unknown_peer + rx_too_big;
    }
    PortStats& operator+=(const PortStats& o) noexcept;
};

// Offloads in use after configuration.
struct PortCaps {
    bool tx_ip_cksum = false;
    bool tx_udp_cksum = false;
    bool tx_multi_seg = false;   // advertised; chains are sent regardless (see port.cpp)
    bool rx_ip_cksum = false;
    bool rx_udp_cksum = false;
    bool iova_va = false;        // payload IOVA = VA (false: physical NICs cannot DMA payloads)
    // RX queues > 1 and the port hashes UDP ports: RSS spreads the paths'
    // source ports (their ECMP entropy) over the RX queues. Without it (net_ring,
    // memif) a frame lands on the queue the sender's TX queue feeds.
    bool rss_udp = false;
    uint16_t mtu = 0;
    uint32_t tx_max_l3 = 0;      // largest IPv4 datagram sent
    std::string driver;
};

struct PoolUsage {
    // rte_mempool_in_use_count of each pool; rx less the released mbufs the
    // RX queues gather for one put (port.cpp, RxQueue::ret), hdr less the
    // recycled header mbufs the TX queues hold idle (TxQueue)
    unsigned rx = 0, hdr = 0, ext = 0;
    bool operator==(const PoolUsage&) const = default;
};

// TEST ONLY: cuts (or restores) the link of ethdev port_id as a failed
// plane would: while cut, every DpdkPort burst on it drops what it is given
// (counted as sent: the wire lost it, tx_cut) and everything it receives
// (rx_cut). A flag per port id, read once per burst; callable from any thread.
void set_link_cut(uint16_t port_id, bool cut) noexcept;
bool link_cut(uint16_t port_id) noexcept;

// Stops (when started) and closes ethdev port_id on the EAL interrupt thread,
// waiting until it is done, so that the close cannot overlap a callback of
// the PMD's own there (memif's control channel: see port.cpp). ~DpdkPort
// closes its port this way; a program that closes a port of its own should too.
void close_port_on_interrupt_thread(uint16_t port_id, bool started) noexcept;

class DpdkPort {
public:
    // Configures, sets up the queues and starts the port; throws DpdkError.
    explicit DpdkPort(const PortConfig& cfg);
    // Stops and closes the port (on the EAL interrupt thread:
    // close_port_on_interrupt_thread) and frees the pools. Every mbuf of this
    // port must be back in its pool by then: with net_ring the peer port holds
    // our TX mbufs until it has received and released them.
    ~DpdkPort();
    DpdkPort(const DpdkPort&) = delete;
    DpdkPort& operator=(const DpdkPort&) = delete;

    // Builds and sends frames for pkts[0, n). Returns how many were consumed:
    // sent, or dropped and counted as invalid (bad peer, oversize). pkts[ret, n)
    // were not taken (TX ring full or mbufs exhausted) and may be passed again.
    // Payloads are attached, not copied: they must stay unchanged until the
    // PMD has freed the mbufs (the engine keeps them until the op completes).
    size_t tx_burst(uint16_t queue, const TxPacket* pkts, size_t n) noexcept;
    // The payload segments of sent frames the PMD (a NIC that has not read
    // them yet, or a net_ring peer that has not freed them) still holds, after
    // asking every TX queue to free what is done and waiting up to wait_us for
    // the count to reach 0. Deregistration asks this before memory goes
    // (R-MEM-6). Not on the per-packet path: call it from the TX thread.
    uint32_t tx_payload_held(uint64_t wait_us) noexcept;

    // Receives up to min(max, cfg.burst) valid datagrams. out[i].data points
    // into an mbuf or into this queue's scratch, out[i].data2 (len2 > 0: a
    // two-segment chain) into the chain's second segment; both stay valid until
    // rx_release(queue) (or the next rx_burst on the queue, which releases first).
    size_t rx_burst(uint16_t queue, RxPacket* out, size_t max) noexcept;
    // Frees the last burst, and puts back in the RX pool the mbufs earlier
    // bursts' releases gathered for one put (see PoolUsage).
    void rx_release(uint16_t queue) noexcept;
    // Pipeline arrangement (deferred placement): takes datagram i of the last
    // rx_burst(queue) out of what rx_release frees; the caller owns the mbuf
    // (rte_pktmbuf_free). *payload_off = offset of the UDP payload in the
    // frame, for reading the payload from the mbuf (chain) when out[i].data
    // pointed into this queue's scratch, which the next rx_burst reuses.
    rte_mbuf* rx_take(uint16_t queue, size_t i, uint32_t* payload_off) noexcept;

    // Every queue from one thread (one engine drives the whole port):
    // TX queue of a packet: connection control on queue 0, path p on p % tx_queues,
    // so each path keeps its order on a queue of its own while there are queues.
    uint16_t tx_queue_of(const TxPacket& p) const noexcept {
        return p.path == kControlPath ? 0 : uint16_t(p.path % cfg_.tx_queues);
    }
    // tx_burst over all TX queues by tx_queue_of. Returns the packets consumed;
    // the indices of those not taken go to unsent, ascending (n - return of them).
    // One queue inline: the device's send reaches tx_burst in one call.
    size_t tx_burst_paths(const TxPacket* pkts, size_t n, uint32_t* unsent) noexcept {
        if (cfg_.tx_queues != 1) return tx_burst_queues(pkts, n, unsent);
        const size_t s = tx_burst(0, pkts, n);
        for (size_t i = s; i < n; ++i) *unsent++ = uint32_t(i);
        return s;
    }
    // rx_burst over all RX queues, starting one queue further each call so no
    // queue starves; out[i].local_path is the RX queue. Data stays valid until
    // the next rx_burst_queues (or rx_release of its queue).
    size_t rx_burst_queues(RxPacket* out, size_t max) noexcept {
        return cfg_.rx_queues == 1 ? rx_burst(0, out, max) : rx_burst_each(out, max);
    }
    void rx_release_all() noexcept;

    uint16_t port_id() const noexcept { return cfg_.port_id; }
    const PortConfig& config() const noexcept { return cfg_; }
    const PortCaps& caps() const noexcept { return caps_; }
    MacAddr mac() const noexcept { return mac_; }
    PortStats stats() const noexcept;
    PortStats rx_queue_stats(uint16_t q) const noexcept;
    PortStats tx_queue_stats(uint16_t q) const noexcept;
    void reset_stats() noexcept;
    PoolUsage pool_usage() const noexcept;
    rte_mempool* rx_pool() const noexcept { return rx_pool_; }
    // Peer handle for a host-order source address, or UINT32_MAX.
    uint32_t peer_of(uint32_t ip) const noexcept;

    // Minimum pool sizes for a queue geometry (used to validate PoolConfig).
    static PoolConfig min_pools(const PortConfig& cfg);

    struct RxQueue;
    struct TxQueue;

private:
    size_t tx_burst_queues(const TxPacket* pkts, size_t n, uint32_t* unsent) noexcept;
    size_t rx_burst_each(RxPacket* out, size_t max) noexcept;
    void build_templates();
    size_t recycle_sent(TxQueue& tq, size_t sent) noexcept;
    void build_frame(rte_mbuf* m, const TxPacket& p, uint16_t refs, uint32_t udp_data, uint32_t inline_max) noexcept;
    [[gnu::noinline]] size_t tx_one(TxQueue& tq, uint16_t queue, const TxPacket* pkts) noexcept;
    [[gnu::noinline]] size_t tx_chunks(TxQueue& tq, uint16_t queue, const TxPacket* pkts, size_t n) noexcept;
    void retire_held(RxQueue& rq) noexcept;
    uint32_t rx_fast(RxQueue& rq, const rte_mbuf* m, const uint8_t* f, uint32_t& dlen) noexcept;
    size_t rx_frames(RxQueue& rq, RxPacket* out, uint16_t nb) noexcept;
    void build_peer_index();

    PortConfig cfg_;
    PortCaps caps_;
    uint64_t tx_ol_ = 0;        // mbuf ol_flags and tx_offload of every frame sent
    uint64_t tx_offload_ = 0;
    MacAddr mac_{};
    rte_mempool* rx_pool_ = nullptr;
    rte_mempool* hdr_pool_ = nullptr;
    rte_mempool* ext_pool_ = nullptr;
    bool started_ = false;
    std::vector<std::unique_ptr<RxQueue>> rxq_;
    std::vector<std::unique_ptr<TxQueue>> txq_;
    // One neighbour's Ethernet + IPv4 + UDP header (42 B), and what tx_burst
    // needs to finish it with a few stores: one cache line per neighbour.
    struct alignas(64) HdrTemplate {
        uint8_t bytes[48]{};      // the 42 B, copied as 48 (the mroce header overwrites the rest)
        uint16_t vtos[2]{};       // IPv4 bytes 0-1 (version/IHL, TOS) as stored: Not-ECT, ECT(0)
        uint32_t ip_sum[2]{};     // ones-complement sum of the IPv4 header's words but total length
                                  // and checksum, with vtos[0] / vtos[1]; at most 0xffff
    };
    std::vector<HdrTemplate> tmpl_;
    std::vector<TxPacket> gather_;      // tx_burst_paths: one queue's packets of a chunk
    std::vector<uint32_t> gather_idx_;  // ... and their indices in the caller's array
    uint16_t rx_next_ = 0;              // rx_burst_queues: queue to start with
    std::vector<uint32_t> peer_ip_;     // open-addressed: source IP -> ...
    std::vector<uint32_t> peer_idx_;    // ... neighbour index (UINT32_MAX: empty)
    uint32_t peer_mask_ = 0;
};

}  // namespace mroce::dpdk
