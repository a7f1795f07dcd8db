// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// UDP socket driver: moves the engine's packets (packet_io.hpp) over plain
// Linux UDP sockets, batched with sendmmsg/recvmmsg and, where the kernel
// allows it, UDP GSO on send and UDP GRO on receive (on loopback batching is
// worth far more than anything else: see app/udp-ceiling).
//
// Addressing model (R-CONN-2, R-PATH-8):
//  - a device has one well-known "listen" address (ip:listen_port); a peer
//    handle names a remote device by its well-known address, and every packet
//    to that peer is sent *to* that address;
//  - packets are sent *from* a path socket whose source port encodes the
//    path's ECMP entropy: port = path_port_base + entropy % path_port_span,
//    bound lazily the first time an entropy value is used (a re-routed path
//    simply shows up with a new entropy, hence a new socket); connection
//    control (TxPacket::path == kControlPath) leaves from the listen socket,
//    so the passive side learns the initiator's well-known address;
//  - a datagram from an unknown source port is attributed to the device that
//    owns the connection it is addressed to (dst_conn, learned from our own
//    control packets), provided the IP matches; otherwise the source gets a
//    new handle. So one remote device keeps one handle whatever source ports
//    it sprays over, and several devices may share an IP (loopback).
//
// Planes (R-PLANE-1..4): with plane_ips, the port has one socket set per
// plane (a listen socket and path sockets bound to that plane's address, same
// port numbers on every plane). A packet leaves from the set of its
// TxPacket::plane toward the peer's address on that plane, which the port
// learns from the plane block of the peer's CONNECT_REQ/ACK (until then, and
// for a one-plane peer, toward the peer's well-known address). Datagrams from
// any of a peer's plane addresses are attributed to that peer's one handle.
//
// Not thread-safe, except wake(): one poll thread owns a UdpPort.
#pragma once

#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "mroce/packet_io.hpp"

namespace mroce::udp {

inline constexpr uint16_t kListenLocalPath = 0xFFFF;  // RxPacket::local_path of the listen socket
inline constexpr uint32_t kNoPeer = 0;                 // never a valid handle

inline constexpr size_t kMaxPlanes = wire::kMaxPlanes;

struct UdpConfig {
    std::string local_ip = "127.0.0.1";     // plane 0's address when plane_ips is empty
    // One address per plane (R-PLANE-1), at most kMaxPlanes; empty: one plane at local_ip.
    std::vector<std::string> plane_ips;
    uint16_t listen_port = 4793;            // the device's well-known port (wire::kDefaultUdpPort)
    uint16_t path_port_base = 4800;         // source ports of the paths start here
    uint16_t path_port_span = 64;           // distinct source ports (entropy values mod span)
    uint16_t open_paths = 0;                // path sockets bound up front (the rest lazily)
    uint32_t rx_batch = 64;                 // receive buffers, i.e. datagrams per recvmmsg round
    uint32_t max_datagram = 9216;           // larger datagrams are dropped as truncated
    bool gso = true;                        // coalesce equal-size runs into UDP_SEGMENT sends
    bool gro = true;                        // ask for UDP_GRO and split coalesced receives
    int sndbuf = 4 << 20;                   // SO_SNDBUF(FORCE) bytes; 0 keeps the default
    int rcvbuf = 8 << 20;                   // SO_RCVBUF(FORCE) bytes; 0 keeps the default
};

// Per-plane traffic (R-PLANE-5): packets and UDP payload bytes per direction.
struct PlaneCounters {
    uint64_t tx_packets = 0, tx_bytes = 0, rx_packets = 0, rx_bytes = 0;
};

struct UdpStats {
    uint64_t tx_packets = 0;
    uint64_t tx_bytes = 0;          // UDP payload bytes (header + payload)
    uint64_t tx_syscalls = 0;       // sendmmsg calls
    uint64_t tx_gso_sends = 0;      // messages that carried more than one packet
    uint64_t tx_errors = 0;         // packets not sent (EAGAIN, ENOBUFS, bind failure, ...)
    uint64_t tx_eagain = 0;         // ... of which the socket buffer was full
    uint64_t tx_no_peer = 0;        // ... of which the peer handle was unknown
    uint64_t rx_packets = 0;
    uint64_t rx_bytes = 0;
    uint64_t rx_syscalls = 0;       // recvmmsg + epoll_wait calls
    uint64_t rx_gro_datagrams = 0;  // received buffers that held more than one packet
    uint64_t rx_truncated = 0;      // dropped: longer than max_datagram (MSG_TRUNC)
    uint64_t rx_errors = 0;         // recvmmsg failures other than EAGAIN
    uint64_t peers_learned = 0;     // source addresses attributed through dst_conn
    uint64_t peers_created = 0;     // handles made for unknown sources
    uint64_t net_errors = 0;        // ICMP errors (IP_RECVERR) and send failures naming a destination
    uint64_t peer_planes_learned = 0;  // plane blocks taken from a peer's CONNECT_* (R-PLANE-1)
    PlaneCounters plane[kMaxPlanes];
};

// The last network error toward a peer (UdpPort::peer_error): errno as the
// kernel reported it (ECONNREFUSED: ICMP port unreachable; EHOSTUNREACH,
// ENETUNREACH: no route) and how many such errors there have been.
struct PeerError {
    int err = 0;
    uint64_t count = 0;
};
// Words for a PeerError's errno that say what it means for a connection.
std::string describe_peer_error(int err);

class UdpPort {
public:
    // Binds the listen socket and the first cfg.open_paths path sockets.
    // Throws std::system_error naming the address:port and the errno text.
    explicit UdpPort(const UdpConfig& cfg = {});
    ~UdpPort();
    UdpPort(const UdpPort&) = delete;
    UdpPort& operator=(const UdpPort&) = delete;

    const UdpConfig& config() const noexcept { return cfg_; }
    const UdpStats& stats() const noexcept { return st_; }
    void reset_stats() noexcept { st_ = {}; }
    bool gso_enabled() const noexcept { return gso_; }
    bool gro_enabled() const noexcept { return gro_; }
    // MTU of the interface local_ip is on (INADDR_ANY: the smallest up IPv4
    // interface's), read at construction; 0 if unknown. Every socket sets DF
    // and never fragments (IP_PMTUDISC_PROBE), so larger datagrams are refused.
    uint32_t link_mtu() const noexcept { return link_mtu_; }
    const std::string& link_name() const noexcept { return link_name_; }
    // Why the last path socket could not be opened (lazy binds fail silently on the fast path).
    const std::string& last_error() const noexcept { return last_error_; }

    // Handle of a remote device's well-known address (same handle if already known).
    // Throws std::invalid_argument for an address that does not parse.
    uint32_t add_peer(const std::string& ip, uint16_t port);
    uint32_t add_peer(const sockaddr_in& sa);
    // R-PLANE-6: a peer given by its address on each plane (plane 0 first,
    // at most kMaxPlanes): one handle, answering for every one of them (a
    // CONNECT_ACK may come from any), whose plane p's packets go to planes[p]
    // until the peer's own plane block says otherwise (R-PLANE-1).
    uint32_t add_peer(const sockaddr_in* planes, size_t n);
    // Address of a handle; false if the handle is unknown.
    bool peer_address(uint32_t handle, sockaddr_in& out) const;
    size_t num_peers() const noexcept { return peers_.size() - 1; }
    // The last network error about packets sent to the handle (none: err 0).
    // Every socket asks for ICMP errors (IP_RECVERR), so a peer host with no
    // listener on the port answers ECONNREFUSED and an unreachable one
    // EHOSTUNREACH; a send the routing table refuses gives ENETUNREACH.
    PeerError peer_error(uint32_t handle) const noexcept {
        return handle < peer_err_.size() ? peer_err_[handle] : PeerError{};
    }

    // Sends pkts[0..n). Packets are regrouped per source socket (order kept
    // within a socket, i.e. within a path), so the return value is a count,
    // not a prefix: the packets not sent are listed in `unsent` (indices into
    // pkts, ascending) when it is given. Payload is never copied in user space:
    // each packet is two iovecs (header, payload), and a run of equal-size
    // packets to one peer with the same ECT (the last may be shorter) leaves as
    // one UDP_SEGMENT message, which the kernel cuts at the packet boundaries.
    // If a route refuses GSO (segment above its MTU), GSO is switched off and
    // the packets go out one datagram each.
    size_t send_burst(const TxPacket* pkts, size_t n, uint32_t* unsent = nullptr);

    // Receives up to max datagrams from every socket that has some. The
    // RxPackets point into the port's buffers, valid until the next call.
    size_t recv_burst(RxPacket* out, size_t max);

    // Blocks until a socket is readable, wake() is called, or timeout_ns
    // passes (0: just poll; UINT64_MAX: no timeout). True if woken by I/O.
    // A blocking wait (timeout_ns != 0) may run in one thread while another
    // sends and receives (the API's engine thread idles without the device
    // lock while an application thread drives): it touches nothing that
    // recv_burst uses, so the next recv_burst asks epoll again.
    bool wait(uint64_t timeout_ns);
    // Interrupts wait() from any thread.
    void wake();

    // Source port used for an entropy value; opens its socket now if needed.
    // Returns 0 (and sets last_error) if the socket cannot be bound.
    uint16_t open_path(uint16_t entropy);
    uint16_t path_port(uint16_t entropy) const noexcept {
        return uint16_t(cfg_.path_port_base + entropy % cfg_.path_port_span);
    }
    int listen_fd() const noexcept { return socks_.empty() ? -1 : socks_[0].fd; }
    // Planes of this port (1 without plane_ips) and plane p's local address.
    size_t num_planes() const noexcept { return plane_addr_.size(); }
    in_addr plane_address(size_t p) const noexcept { return plane_addr_[p]; }
    // Planes known for a peer handle (0: none announced) and its address on plane p.
    size_t peer_planes(uint32_t handle) const noexcept {
        return handle < peer_planes_.size() ? peer_planes_[handle].n : 0;
    }
    bool peer_plane_address(uint32_t handle, size_t p, sockaddr_in& out) const;

private:
    struct Sock {
        int fd = -1;
        uint16_t port = 0;
        uint16_t local_path = 0;
        uint8_t plane = 0;
    };
    struct PeerPlanes {     // a peer's plane addresses, from its plane block (R-PLANE-1)
        uint8_t n = 0;
        sockaddr_in addr[kMaxPlanes];
    };
    struct RxDesc {         // one received buffer, split into packets on the way out
        uint8_t* data;
        uint32_t len;
        uint32_t seg;       // packet size inside a GRO buffer (== len when not coalesced)
        uint32_t peer;
        uint16_t local_path;
        uint8_t ce;
        uint8_t plane;
    };

    int open_socket(uint16_t port, uint16_t local_path, uint8_t plane, std::string* err);
    uint16_t open_path_on(uint8_t plane, uint16_t entropy);
    void learn_planes(uint32_t peer, const uint8_t* data, uint32_t len, in_addr from);
    bool is_peer_plane_ip(uint32_t peer, in_addr a) const noexcept;
    static bool block_lists(const uint8_t* data, uint32_t len, in_addr addr) noexcept;
    int sock_for(const TxPacket& p);
    uint32_t peer_for_rx(const sockaddr_in& sa, const uint8_t* data, uint32_t len);
    size_t recv_sock(size_t si, size_t first, size_t vlen, size_t& produced);
    size_t emit(RxPacket* out, size_t max);
    size_t send_chunk(const TxPacket* pkts, size_t n, uint32_t base, uint32_t* unsent, size_t& nunsent);
    void send_group(const TxPacket* pkts, const uint32_t* idx, size_t cnt, const Sock& sock, uint32_t base,
                    uint32_t* unsent, size_t& nunsent, size_t& sent);
    void add_ready(uint32_t si);
    void drain_errors(size_t si);
    void note_peer_error(const sockaddr_in& dst, int err);
    static uint64_t key(const sockaddr_in& sa) noexcept {
        return (uint64_t(sa.sin_addr.s_addr) << 16) | sa.sin_port;
    }

    UdpConfig cfg_;
    UdpStats st_;
    bool gso_ = false;
    bool gro_ = false;
    std::vector<in_addr> plane_addr_;    // plane -> local address (plane 0 = local_ip without plane_ips)
    uint32_t link_mtu_ = 0;
    std::string link_name_;
    int ep_ = -1;
    int wake_fd_ = -1;
    std::string last_error_;

    std::vector<Sock> socks_;            // [p] = plane p's listen socket, then path sockets in open order
    std::vector<int16_t> slot_sock_;     // plane * span + entropy % span -> index in socks_ (-1: not open, -2: failed)

    std::vector<sockaddr_in> peers_;     // handle -> address; [0] unused
    std::vector<PeerError> peer_err_;    // handle -> last network error
    std::vector<PeerPlanes> peer_planes_;  // handle -> its plane addresses (n 0: none known)
    std::unordered_map<uint64_t, uint32_t> peer_by_addr_;
    std::unordered_map<uint32_t, uint32_t> peer_by_conn_;  // our conn id (their dst_conn) -> handle
    uint64_t last_key_ = ~0ull;
    uint32_t last_peer_ = kNoPeer;

    // Transmit scratch, sized once: per-packet iovecs, messages, cmsg space.
    std::vector<uint32_t> tx_order_;
    std::vector<int32_t> tx_sock_;         // per packet: socket index, -1 if it cannot be sent
    std::vector<int32_t> tx_socks_seen_;
    std::vector<iovec> tx_iov_;
    std::vector<mmsghdr> tx_msg_;
    std::vector<uint32_t> tx_msg_first_;   // first position (in tx_order_) of each message
    std::vector<uint32_t> tx_msg_count_;
    std::vector<uint8_t> tx_ctrl_;

    // Receive ring.
    std::vector<uint8_t> rx_mem_;
    size_t rx_buf_size_ = 0;
    std::vector<mmsghdr> rx_msg_;
    std::vector<iovec> rx_iov_;
    std::vector<sockaddr_in> rx_addr_;
    std::vector<uint8_t> rx_ctrl_;
    std::vector<RxDesc> rx_desc_;
    size_t rx_desc_n_ = 0, rx_desc_pos_ = 0;
    uint32_t rx_seg_off_ = 0;            // offset inside rx_desc_[rx_desc_pos_]
    std::vector<uint32_t> ready_;        // socket indices known readable
    std::vector<uint8_t> in_ready_;      // per socket: already listed in ready_
    uint32_t rx_calls_ = 0;
    uint32_t listen_hot_ = 0;            // listen sockets (bit per plane) that gave packets last call: skip epoll
    size_t segs_hint_ = 1;               // packets per buffer in the last receive (GRO)
    std::vector<epoll_event> ep_events_;       // recv_burst's poll (the receiving thread)
    std::vector<epoll_event> ep_idle_events_;  // the blocking wait's own (maybe another thread)
    std::atomic<bool> rx_queued_{false};       // recv_burst left packets or ready sockets behind
};

}  // namespace mroce::udp
