// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
#include "mroce/udp/port.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <linux/errqueue.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>

namespace mroce::udp {
namespace {

constexpr size_t kTxChunk = 256;          // packets handled per internal round of send_burst
constexpr uint32_t kMaxGsoSegs = 64;      // UDP_MAX_SEGMENTS on every kernel that has GSO
constexpr uint32_t kMaxGsoBytes = 65507;  // 0xFFFF minus IPv4 and UDP headers
constexpr size_t kGroBufSize = 65536;
constexpr uint32_t kMaxPeers = 1u << 16;  // unknown sources beyond this are not given handles
constexpr uint32_t kWakeTag = 0xFFFFFFFFu;
constexpr uint8_t kEct0 = 0x02;
// Room for UDP_SEGMENT (u16) and IP_TOS (int) on send, IP_TOS (u8) and UDP_GRO (int) on receive.
constexpr size_t kTxCtrl = CMSG_SPACE(sizeof(uint16_t)) + CMSG_SPACE(sizeof(int));
constexpr size_t kRxCtrl = CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(int)) + 16;

uint32_t load_be32(const uint8_t* p) noexcept {
    return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
}

std::string addr_str(in_addr a, uint16_t port) {
    char buf[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &a, buf, sizeof buf);
    return fmt::format("{}:{}", buf, port);
}

std::string errno_str(int e) { return std::error_code(e, std::generic_category()).message(); }

bool is_wouldblock(int e) noexcept { return e == EAGAIN || e == EWOULDBLOCK; }

// MTU of the interface that owns addr; for INADDR_ANY the smallest of the up
// IPv4 interfaces (the packets may leave by any of them). 0 if none is found.
uint32_t interface_mtu(int fd, in_addr addr, std::string& name) {
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) < 0) return 0;
    uint32_t best = 0;
    for (const ifaddrs* i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
        const in_addr a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr;
        if (addr.s_addr != htonl(INADDR_ANY) && a.s_addr != addr.s_addr) continue;
        ifreq rq{};
        std::strncpy(rq.ifr_name, i->ifa_name, IFNAMSIZ - 1);
        if (ioctl(fd, SIOCGIFMTU, &rq) < 0 || rq.ifr_mtu <= 0) continue;
        if (best == 0 || uint32_t(rq.ifr_mtu) < best) {
            best = uint32_t(rq.ifr_mtu);
            name = i->ifa_name;
        }
    }
    freeifaddrs(list);
    return best;
}

}  // namespace

UdpPort::UdpPort(const UdpConfig& cfg) : cfg_(cfg) {
    if (cfg_.plane_ips.size() > kMaxPlanes)
        throw std::invalid_argument(fmt::format("mroce udp: {} planes, at most {}", cfg_.plane_ips.size(), kMaxPlanes));
    const std::vector<std::string> ips = cfg_.plane_ips.empty() ? std::vector<std::string>{cfg_.local_ip} : cfg_.plane_ips;
    for (const std::string& ip : ips) {
        in_addr a{};
        if (inet_pton(AF_INET, ip.c_str(), &a) != 1)
            throw std::invalid_argument(fmt::format("mroce udp: local address '{}' is not an IPv4 address", ip));
        for (const in_addr& b : plane_addr_)
            if (b.s_addr == a.s_addr) throw std::invalid_argument(fmt::format("mroce udp: plane address {} given twice", ip));
        plane_addr_.push_back(a);
    }
    if (!cfg_.plane_ips.empty()) cfg_.local_ip = cfg_.plane_ips[0];
    if (cfg_.path_port_span == 0 || uint32_t(cfg_.path_port_base) + cfg_.path_port_span > 65536)
        throw std::invalid_argument(fmt::format("mroce udp: path ports {}+{} do not fit in 1..65535",
                                                cfg_.path_port_base, cfg_.path_port_span));
    // Socket indices are int16_t (slot_sock_): every plane's listen and path sockets must fit.
    if (plane_addr_.size() * (size_t(cfg_.path_port_span) + 1) > 32767)
        throw std::invalid_argument(fmt::format("mroce udp: {} planes x {} path ports: more sockets than a port holds "
                                                "(32767)", plane_addr_.size(), cfg_.path_port_span));
    if (cfg_.rx_batch == 0 || cfg_.max_datagram == 0 || cfg_.max_datagram > kGroBufSize)
        throw std::invalid_argument("mroce udp: rx_batch and max_datagram (<= 65536) must be positive");

    ep_ = epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) throw std::system_error(errno, std::generic_category(), "mroce udp: epoll_create1");
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) {
        int e = errno;
        close(ep_);
        throw std::system_error(e, std::generic_category(), "mroce udp: eventfd");
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = kWakeTag;
    epoll_ctl(ep_, EPOLL_CTL_ADD, wake_fd_, &ev);

    gro_ = cfg_.gro;  // open_socket clears it if the kernel refuses UDP_GRO
    std::string err;
    // Plane p's listen socket is socks_[p] (sock_for relies on it).
    for (size_t pl = 0; pl < plane_addr_.size(); ++pl) {
        if (open_socket(cfg_.listen_port, kListenLocalPath, uint8_t(pl), &err) < 0) {
            const int e = errno;
            for (Sock& s : socks_) close(s.fd);
            close(wake_fd_);
            close(ep_);
            throw std::system_error(e, std::generic_category(), "mroce udp: " + err);
        }
    }
    // Segments must fit every plane: the smallest MTU of the planes' interfaces.
    for (size_t pl = 0; pl < plane_addr_.size(); ++pl) {
        std::string name;
        const uint32_t m = interface_mtu(socks_[0].fd, plane_addr_[pl], name);
        if (m && (link_mtu_ == 0 || m < link_mtu_)) {
            link_mtu_ = m;
            link_name_ = name;
        }
    }
    if (cfg_.gso) {
        // Setting gso_size 0 is a no-op that only kernels with UDP GSO (4.18+) accept.
        int zero = 0;
        gso_ = setsockopt(socks_[0].fd, SOL_UDP, UDP_SEGMENT, &zero, sizeof zero) == 0;
    }

    slot_sock_.assign(plane_addr_.size() * cfg_.path_port_span, -1);
    for (size_t pl = 0; pl < plane_addr_.size(); ++pl)
    for (uint16_t i = 0; i < cfg_.open_paths && i < cfg_.path_port_span; ++i) {
        if (open_path_on(uint8_t(pl), i) == 0) {
            const int e = errno;
            const std::string msg = last_error_.substr(0, last_error_.rfind(": "));
            for (Sock& s : socks_) close(s.fd);
            close(wake_fd_);
            close(ep_);
            throw std::system_error(e, std::generic_category(), "mroce udp: " + msg);
        }
    }

    rx_buf_size_ = gro_ ? kGroBufSize : cfg_.max_datagram;
    const size_t nb = cfg_.rx_batch;
    rx_mem_.assign(nb * rx_buf_size_, 0);
    rx_msg_.assign(nb, mmsghdr{});
    rx_iov_.assign(nb, iovec{});
    rx_addr_.assign(nb, sockaddr_in{});
    rx_ctrl_.assign(nb * kRxCtrl, 0);
    rx_desc_.assign(nb, RxDesc{});
    for (size_t i = 0; i < nb; ++i) rx_iov_[i] = iovec{rx_mem_.data() + i * rx_buf_size_, rx_buf_size_};
    ep_events_.assign(64, epoll_event{});
    ep_idle_events_.assign(8, epoll_event{});

    tx_order_.assign(kTxChunk, 0);
    tx_sock_.assign(kTxChunk, -1);
    tx_socks_seen_.reserve(plane_addr_.size() * (cfg_.path_port_span + 1));
    tx_iov_.assign(2 * kTxChunk, iovec{});
    tx_msg_.assign(kTxChunk, mmsghdr{});
    tx_msg_first_.assign(kTxChunk, 0);
    tx_msg_count_.assign(kTxChunk, 0);
    tx_ctrl_.assign(kTxChunk * kTxCtrl, 0);

    peers_.assign(1, sockaddr_in{});  // handle 0 is kNoPeer
    peer_planes_.assign(1, PeerPlanes{});
    peer_by_addr_.reserve(64);
    peer_by_conn_.reserve(64);
}

UdpPort::~UdpPort() {
    for (Sock& s : socks_) close(s.fd);
    if (wake_fd_ >= 0) close(wake_fd_);
    if (ep_ >= 0) close(ep_);
}

int UdpPort::open_socket(uint16_t port, uint16_t local_path, uint8_t plane, std::string* err) {
    const std::string where = addr_str(plane_addr_[plane], port);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int e = errno;
        *err = fmt::format("socket for {}", where);
        errno = e;
        return -1;
    }
    auto fail = [&](const char* what) {
        int e = errno;
        *err = fmt::format("{} {}", what, where);
        close(fd);
        errno = e;
        return -1;
    };
    // Default ECT(0): data is the bulk of the traffic, so only Not-ECT packets need a cmsg.
    int tos = kEct0;
    if (setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos) < 0) return fail("setsockopt(IP_TOS)");
    int one = 1;
    if (setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof one) < 0) return fail("setsockopt(IP_RECVTOS)");
    // DF on every datagram and no local fragmentation (R-SEG-4): a datagram
    // above the interface's MTU fails with EMSGSIZE instead of leaving in
    // fragments that ECMP cannot hash and one loss of which loses the segment.
    // ICMP errors for what this socket sends (port or host unreachable) go
    // to its error queue, so a connection that fails can say why (drain_errors).
    if (setsockopt(fd, IPPROTO_IP, IP_RECVERR, &one, sizeof one) < 0) return fail("setsockopt(IP_RECVERR)");
    int pmtu = IP_PMTUDISC_PROBE;
    if (setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) < 0) return fail("setsockopt(IP_MTU_DISCOVER)");
    if (gro_ && setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof one) < 0) {
        if (socks_.empty()) gro_ = false;  // decided on the listen socket, before buffers are sized
        else return fail("setsockopt(UDP_GRO)");
    }
    // The FORCE variants exceed net.core.*mem_max when privileged; a quiet fallback otherwise.
    if (cfg_.sndbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &cfg_.sndbuf, sizeof cfg_.sndbuf) < 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &cfg_.sndbuf, sizeof cfg_.sndbuf);
    if (cfg_.rcvbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &cfg_.rcvbuf, sizeof cfg_.rcvbuf) < 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &cfg_.rcvbuf, sizeof cfg_.rcvbuf);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr = plane_addr_[plane];
    sa.sin_port = htons(port);
    if (bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) < 0) return fail("bind");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = uint32_t(socks_.size());
    if (epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) < 0) return fail("epoll_ctl");
    socks_.push_back(Sock{fd, port, local_path, plane});
    in_ready_.push_back(0);
    return fd;
}

uint16_t UdpPort::open_path(uint16_t entropy) { return open_path_on(0, entropy); }

uint16_t UdpPort::open_path_on(uint8_t plane, uint16_t entropy) {
    const uint16_t local = uint16_t(entropy % cfg_.path_port_span);
    const size_t slot = size_t(plane) * cfg_.path_port_span + local;
    if (slot_sock_[slot] >= 0) return socks_[size_t(slot_sock_[slot])].port;
    const uint16_t port = path_port(entropy);
    std::string err;
    if (open_socket(port, local, plane, &err) < 0) {
        const int e = errno;
        last_error_ = fmt::format("{}: {}", err, errno_str(e));
        errno = e;
        slot_sock_[slot] = -2;  // not retried per packet; the engine fails the path and re-routes
        return 0;
    }
    slot_sock_[slot] = int16_t(socks_.size() - 1);
    return port;
}

uint32_t UdpPort::add_peer(const std::string& ip, uint16_t port) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    if (inet_pton(AF_INET, ip.c_str(), &sa.sin_addr) != 1)
        throw std::invalid_argument(fmt::format("mroce udp: peer address '{}' is not IPv4", ip));
    return add_peer(sa);
}

uint32_t UdpPort::add_peer(const sockaddr_in& in) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr = in.sin_addr;
    sa.sin_port = in.sin_port;
    const uint64_t k = key(sa);
    if (auto it = peer_by_addr_.find(k); it != peer_by_addr_.end()) return it->second;
    const uint32_t h = uint32_t(peers_.size());
    peers_.push_back(sa);
    peer_err_.resize(peers_.size());
    peer_planes_.resize(peers_.size());
    peer_by_addr_.emplace(k, h);
    return h;
}

uint32_t UdpPort::add_peer(const sockaddr_in* planes, size_t n) {
    if (n == 0 || n > kMaxPlanes) throw std::invalid_argument(fmt::format("mroce udp: {} peer planes, 1..{}", n, kMaxPlanes));
    const uint32_t h = add_peer(planes[0]);
    if (n < 2) return h;
    PeerPlanes pp;
    pp.n = uint8_t(n);
    for (size_t i = 0; i < n; ++i) {
        sockaddr_in& sa = pp.addr[i];
        sa = sockaddr_in{};
        sa.sin_family = AF_INET;
        sa.sin_addr = planes[i].sin_addr;
        sa.sin_port = planes[i].sin_port;
        for (size_t j = 0; j < i; ++j)
            if (pp.addr[j].sin_addr.s_addr == sa.sin_addr.s_addr)
                throw std::invalid_argument("mroce udp: a peer's plane address given twice");
        peer_by_addr_.emplace(key(sa), h);  // an address already another peer's stays that peer's
    }
    peer_planes_[h] = pp;
    last_key_ = ~uint64_t(0);  // peer_for_rx's one-entry cache may name an older mapping
    return h;
}

bool UdpPort::peer_address(uint32_t handle, sockaddr_in& out) const {
    if (handle == kNoPeer || handle >= peers_.size()) return false;
    out = peers_[handle];
    return true;
}

bool UdpPort::peer_plane_address(uint32_t handle, size_t p, sockaddr_in& out) const {
    if (handle == kNoPeer || handle >= peer_planes_.size() || p >= peer_planes_[handle].n) return false;
    out = peer_planes_[handle].addr[p];
    return true;
}

bool UdpPort::is_peer_plane_ip(uint32_t peer, in_addr a) const noexcept {
    if (peer >= peer_planes_.size()) return false;
    const PeerPlanes& pp = peer_planes_[peer];
    for (size_t i = 0; i < pp.n; ++i)
        if (pp.addr[i].sin_addr.s_addr == a.s_addr) return true;
    return false;
}

// R-PLANE-1: a CONNECT_REQ/ACK with a plane block tells where the peer is on
// each plane. Taken only from a valid plane block (wire::parse_plane_block)
// in a datagram that came from one of the addresses it announces; the engine
// decodes and checks the rest of the packet.
void UdpPort::learn_planes(uint32_t peer, const uint8_t* data, uint32_t len, in_addr from) {
    if (peer == kNoPeer || peer >= peer_planes_.size()) return;
    wire::PlaneAddr planes[kMaxPlanes];
    if (len <= wire::kConnectLen || data[0] != wire::kVersion) return;
    const size_t n = wire::parse_plane_block({data + wire::kConnectLen, len - wire::kConnectLen}, planes);
    if (n == 0) return;
    PeerPlanes pp;
    bool from_ok = false;
    pp.n = uint8_t(n);
    for (size_t i = 0; i < pp.n; ++i) {
        const wire::PlaneAddr a = planes[i];
        sockaddr_in& sa = pp.addr[i];
        sa = sockaddr_in{};
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(a.ipv4);
        sa.sin_port = htons(a.port);
        from_ok |= sa.sin_addr.s_addr == from.s_addr;
    }
    if (!from_ok) return;
    peer_planes_[peer] = pp;
    // Every plane address now names this peer (an address already another
    // peer's stays that peer's): a later connect() to the peer by any one of
    // them, as a verbs program does with the GID it was given, finds this
    // handle and the connection it has, not a second handle and a second
    // connection the peer's streams are not on (R-PLANE-6, R-CONN-14).
    for (size_t i = 0; i < pp.n; ++i) peer_by_addr_.emplace(key(pp.addr[i]), peer);
    last_key_ = ~uint64_t(0);
    ++st_.peer_planes_learned;
}

// A CONNECT_* whose plane block lists addr (R-PLANE-1): a peer's CONNECT_ACK
// may come from another plane than the address it was sent to.
bool UdpPort::block_lists(const uint8_t* data, uint32_t len, in_addr addr) noexcept {
    if (len <= wire::kConnectLen ||
        (data[1] != uint8_t(wire::PacketType::connect_req) && data[1] != uint8_t(wire::PacketType::connect_ack)))
        return false;
    wire::PlaneAddr planes[kMaxPlanes];
    const size_t n = wire::parse_plane_block({data + wire::kConnectLen, len - wire::kConnectLen}, planes);
    for (size_t i = 0; i < n; ++i)
        if (htonl(planes[i].ipv4) == addr.s_addr) return true;
    return false;
}

int UdpPort::sock_for(const TxPacket& p) {
    const uint8_t plane = p.plane < plane_addr_.size() ? p.plane : 0;
    if (p.path == kControlPath) return plane;  // the plane's listen socket
    const size_t slot = size_t(plane) * cfg_.path_port_span + p.entropy % cfg_.path_port_span;
    int16_t si = slot_sock_[slot];
    if (si == -1) {
        open_path_on(plane, p.entropy);
        si = slot_sock_[slot];
    }
    return si;  // -2 when the bind failed
}

size_t UdpPort::send_burst(const TxPacket* pkts, size_t n, uint32_t* unsent) {
    size_t sent = 0, nunsent = 0;
    for (size_t base = 0; base < n; base += kTxChunk)
        sent += send_chunk(pkts + base, std::min(kTxChunk, n - base), uint32_t(base), unsent, nunsent);
    if (unsent && nunsent > 1) std::sort(unsent, unsent + nunsent);
    return sent;
}

size_t UdpPort::send_chunk(const TxPacket* pkts, size_t n, uint32_t base, uint32_t* unsent, size_t& nunsent) {
    auto drop = [&](uint32_t i) {
        ++st_.tx_errors;
        if (unsent) unsent[nunsent] = base + i;
        ++nunsent;
    };
    tx_socks_seen_.clear();
    for (uint32_t i = 0; i < n; ++i) {
        const TxPacket& p = pkts[i];
        if (p.peer == kNoPeer || p.peer >= peers_.size()) {
            ++st_.tx_no_peer;
            tx_sock_[i] = -1;
            drop(i);
            continue;
        }
        const int si = sock_for(p);
        tx_sock_[i] = si < 0 ? -1 : si;
        if (si < 0) {
            drop(i);
            continue;
        }
        // Our control packets name our connection id; the peer's later traffic, from
        // whatever source port, is addressed to it (see peer_for_rx).
        if (p.path == kControlPath && p.hdr_len >= 16) {
            const uint32_t src_conn = load_be32(p.hdr + 8);
            if (src_conn != 0) peer_by_conn_[src_conn] = p.peer;
        }
        if (std::find(tx_socks_seen_.begin(), tx_socks_seen_.end(), si) == tx_socks_seen_.end())
            tx_socks_seen_.push_back(si);
    }
    // Stable regrouping by socket: a path's packets keep their order (R-PSN: per-path order).
    size_t sent = 0, pos = 0;
    for (int32_t si : tx_socks_seen_) {
        const size_t first = pos;
        for (uint32_t i = 0; i < n; ++i)
            if (tx_sock_[i] == si) tx_order_[pos++] = i;
        send_group(pkts, tx_order_.data() + first, pos - first, socks_[size_t(si)], base, unsent, nunsent, sent);
    }
    return sent;
}

void UdpPort::send_group(const TxPacket* pkts, const uint32_t* idx, size_t cnt, const Sock& sock, uint32_t base,
                         uint32_t* unsent, size_t& nunsent, size_t& sent) {
    const int fd = sock.fd;
    PlaneCounters& pc = st_.plane[sock.plane];
    auto drop_range = [&](size_t from, size_t to) {
        for (size_t j = from; j < to; ++j) {
            ++st_.tx_errors;
            if (unsent) unsent[nunsent] = base + idx[j];
            ++nunsent;
        }
    };
    size_t j = 0;
    while (j < cnt) {
        // Build as many messages as the scratch holds, starting at packet j.
        size_t nmsg = 0, niov = 0;
        while (j < cnt && nmsg < kTxChunk) {
            const TxPacket& p0 = pkts[idx[j]];
            const uint32_t seg = uint32_t(p0.hdr_len) + p0.payload_len;
            const size_t iov0 = niov;
            uint32_t count = 0, total = 0;
            // A GSO run: same destination, same TOS, equal sizes; only the last may be shorter.
            while (j < cnt) {
                const TxPacket& p = pkts[idx[j]];
                const uint32_t len = uint32_t(p.hdr_len) + p.payload_len;
                if (count > 0) {
                    if (!gso_ || p.peer != p0.peer || p.ect != p0.ect || len > seg || count >= kMaxGsoSegs ||
                        total + len > kMaxGsoBytes)
                        break;
                }
                tx_iov_[niov++] = iovec{const_cast<uint8_t*>(p.hdr), p.hdr_len};
                if (p.payload_len) tx_iov_[niov++] = iovec{const_cast<uint8_t*>(p.payload), p.payload_len};
                ++count;
                total += len;
                ++j;
                if (len < seg) break;
            }
            mmsghdr& m = tx_msg_[nmsg];
            m.msg_len = 0;
            msghdr& h = m.msg_hdr;
            // R-PLANE-2: to the peer's address on this socket's plane once known.
            const PeerPlanes& pp = peer_planes_[p0.peer];
            h.msg_name = sock.plane < pp.n ? const_cast<sockaddr_in*>(&pp.addr[sock.plane]) : &peers_[p0.peer];
            h.msg_namelen = sizeof(sockaddr_in);
            h.msg_iov = &tx_iov_[iov0];
            h.msg_iovlen = niov - iov0;
            h.msg_flags = 0;
            tx_msg_first_[nmsg] = uint32_t(j - count);
            tx_msg_count_[nmsg] = count;
            uint8_t* ctrl = &tx_ctrl_[nmsg * kTxCtrl];
            size_t clen = 0;
            if (count > 1) {
                cmsghdr* c = reinterpret_cast<cmsghdr*>(ctrl);
                c->cmsg_level = SOL_UDP;
                c->cmsg_type = UDP_SEGMENT;
                c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
                const uint16_t gs = uint16_t(seg);
                std::memcpy(CMSG_DATA(c), &gs, sizeof gs);
                clen += CMSG_SPACE(sizeof(uint16_t));
            }
            if (!p0.ect) {
                cmsghdr* c = reinterpret_cast<cmsghdr*>(ctrl + clen);
                c->cmsg_level = IPPROTO_IP;
                c->cmsg_type = IP_TOS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                const int tos = 0;
                std::memcpy(CMSG_DATA(c), &tos, sizeof tos);
                clen += CMSG_SPACE(sizeof(int));
            }
            h.msg_control = clen ? ctrl : nullptr;
            h.msg_controllen = clen;
            ++nmsg;
        }
        size_t done = 0;
        while (done < nmsg) {
            const int r = sendmmsg(fd, &tx_msg_[done], unsigned(nmsg - done), MSG_DONTWAIT);
            ++st_.tx_syscalls;
            if (r > 0) {
                for (size_t m = done; m < done + size_t(r); ++m) {
                    sent += tx_msg_count_[m];
                    st_.tx_packets += tx_msg_count_[m];
                    st_.tx_bytes += tx_msg_[m].msg_len;
                    pc.tx_packets += tx_msg_count_[m];
                    pc.tx_bytes += tx_msg_[m].msg_len;
                    if (tx_msg_count_[m] > 1) ++st_.tx_gso_sends;
                }
                done += size_t(r);
                continue;
            }
            const int e = errno;
            if (e == EINTR) continue;
            const size_t mf = tx_msg_first_[done];
            if (is_wouldblock(e) || e == ENOBUFS) {
                // Socket buffer full: the rest of this group waits for loss recovery or a retry.
                size_t left = 0;
                for (size_t m = done; m < nmsg; ++m) left += tx_msg_count_[m];
                st_.tx_eagain += left;
                drop_range(mf, cnt);
                return;
            }
            if (tx_msg_count_[done] > 1 && (e == EINVAL || e == EIO || e == EMSGSIZE)) {
                // The route refuses GSO (MTU below the segment, no checksum offload): fall back
                // for good and resend from this message one datagram at a time.
                last_error_ = fmt::format("UDP GSO send failed ({}), GSO disabled", errno_str(e));
                gso_ = false;
                j = mf;
                break;
            }
            last_error_ = fmt::format("sendmmsg to {}: {}",
                                      addr_str(peers_[pkts[idx[mf]].peer].sin_addr,
                                               ntohs(peers_[pkts[idx[mf]].peer].sin_port)),
                                      errno_str(e));
            note_peer_error(peers_[pkts[idx[mf]].peer], e);
            drop_range(mf, mf + tx_msg_count_[done]);
            ++done;
        }
    }
}

void UdpPort::drain_errors(size_t si) {
    for (int i = 0; i < 64; ++i) {
        sockaddr_in dst{};
        uint8_t data[64];
        alignas(cmsghdr) uint8_t ctrl[256];
        iovec iov{data, sizeof data};
        msghdr h{};
        h.msg_name = &dst;
        h.msg_namelen = sizeof dst;
        h.msg_iov = &iov;
        h.msg_iovlen = 1;
        h.msg_control = ctrl;
        h.msg_controllen = sizeof ctrl;
        if (recvmsg(socks_[si].fd, &h, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
            if (i == 0) ++st_.rx_errors;  // an error that left nothing queued
            return;
        }
        for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
            if (c->cmsg_level != IPPROTO_IP || c->cmsg_type != IP_RECVERR) continue;
            sock_extended_err ee{};
            std::memcpy(&ee, CMSG_DATA(c), sizeof ee);
            // Local PMTU reports (EMSGSIZE) are the send's own business (R-SEG-4).
            if (ee.ee_errno != EMSGSIZE) note_peer_error(dst, int(ee.ee_errno));
        }
    }
}

void UdpPort::note_peer_error(const sockaddr_in& dst, int err) {
    ++st_.net_errors;
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr = dst.sin_addr;
    sa.sin_port = dst.sin_port;
    const auto it = peer_by_addr_.find(key(sa));
    if (it == peer_by_addr_.end() || it->second >= peer_err_.size()) return;
    PeerError& pe = peer_err_[it->second];
    pe.err = err;
    ++pe.count;
}

std::string describe_peer_error(int err) {
    switch (err) {
    case 0: return {};
    case ECONNREFUSED: return "ICMP port unreachable: no mroce device listens on that address and port";
    case EHOSTUNREACH: return "no route to host (EHOSTUNREACH: the host or its link does not answer)";
    case ENETUNREACH: return "no route to the network (ENETUNREACH: the routing table has none)";
    default: return errno_str(err);
    }
}

void UdpPort::add_ready(uint32_t si) {
    if (!in_ready_[si]) {
        in_ready_[si] = 1;
        ready_.push_back(si);
    }
}

uint32_t UdpPort::peer_for_rx(const sockaddr_in& sa, const uint8_t* data, uint32_t len) {
    const uint64_t k = key(sa);
    if (k == last_key_) return last_peer_;
    uint32_t h = kNoPeer;
    if (auto it = peer_by_addr_.find(k); it != peer_by_addr_.end()) {
        h = it->second;
    } else {
        if (len >= 16 && data[0] == 1) {
            const uint32_t dst_conn = load_be32(data + 4);
            if (auto c = peer_by_conn_.find(dst_conn);
                dst_conn != 0 && c != peer_by_conn_.end() &&
                (peers_[c->second].sin_addr.s_addr == sa.sin_addr.s_addr || is_peer_plane_ip(c->second, sa.sin_addr) ||
                 block_lists(data, len, sa.sin_addr))) {
                h = c->second;
                peer_by_addr_.emplace(k, h);
                ++st_.peers_learned;
            }
        }
        if (h == kNoPeer) {
            if (peers_.size() > kMaxPeers) return kNoPeer;
            h = add_peer(sa);
            ++st_.peers_created;
        }
    }
    last_key_ = k;
    last_peer_ = h;
    return h;
}

size_t UdpPort::recv_sock(size_t si, size_t first, size_t vlen, size_t& produced) {
    for (size_t b = first; b < first + vlen; ++b) {
        msghdr& h = rx_msg_[b].msg_hdr;
        h.msg_name = &rx_addr_[b];
        h.msg_namelen = sizeof(sockaddr_in);
        h.msg_iov = &rx_iov_[b];
        h.msg_iovlen = 1;
        h.msg_control = &rx_ctrl_[b * kRxCtrl];
        h.msg_controllen = kRxCtrl;
        h.msg_flags = 0;
    }
    const int r = recvmmsg(socks_[si].fd, &rx_msg_[first], unsigned(vlen), MSG_DONTWAIT, nullptr);
    ++st_.rx_syscalls;
    if (r <= 0) {
        // A pending ICMP error is returned once by the receive; its details
        // wait in the error queue, which keeps epoll reporting EPOLLERR until read.
        if (r < 0 && !is_wouldblock(errno) && errno != EINTR) drain_errors(si);
        return 0;
    }
    for (size_t b = first; b < first + size_t(r); ++b) {
        msghdr& h = rx_msg_[b].msg_hdr;
        const uint32_t len = rx_msg_[b].msg_len;
        if (h.msg_flags & MSG_TRUNC) {
            ++st_.rx_truncated;
            continue;
        }
        uint8_t tos = 0;
        uint32_t seg = 0;
        for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
            if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS && c->cmsg_len >= CMSG_LEN(1)) {
                tos = *CMSG_DATA(c);
            } else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
                int v = 0;
                std::memcpy(&v, CMSG_DATA(c), sizeof v);
                seg = uint32_t(v);
            }
        }
        if (seg == 0 || seg >= len) seg = len;
        if (seg > cfg_.max_datagram) {
            st_.rx_truncated += len / seg + (len % seg != 0);
            continue;
        }
        uint8_t* data = static_cast<uint8_t*>(rx_iov_[b].iov_base);
        if (seg < len) ++st_.rx_gro_datagrams;
        const uint32_t peer = peer_for_rx(rx_addr_[b], data, len);
        // A handshake with a plane block (R-PLANE-1): rare, never a data packet.
        if (seg == len && len > wire::kConnectLen &&
            (data[1] == uint8_t(wire::PacketType::connect_req) || data[1] == uint8_t(wire::PacketType::connect_ack)))
            [[unlikely]] learn_planes(peer, data, len, rx_addr_[b].sin_addr);
        rx_desc_[rx_desc_n_++] = RxDesc{data, len, seg, peer, socks_[si].local_path, uint8_t((tos & 3) == 3),
                                        socks_[si].plane};
        produced += seg ? (len + seg - 1) / seg : 1;
    }
    return size_t(r);
}

size_t UdpPort::emit(RxPacket* out, size_t max) {
    size_t n = 0;
    while (n < max && rx_desc_pos_ < rx_desc_n_) {
        const RxDesc& d = rx_desc_[rx_desc_pos_];
        const uint32_t len = std::min(d.seg, d.len - rx_seg_off_);
        RxPacket& p = out[n++];
        p.data = d.data + rx_seg_off_;
        p.len = len;
        p.peer = d.peer;
        p.local_path = d.local_path;
        p.ce = d.ce;
        p.plane = d.plane;
        st_.rx_bytes += len;
        st_.plane[d.plane].rx_packets += 1;
        st_.plane[d.plane].rx_bytes += len;
        rx_seg_off_ += len;
        if (rx_seg_off_ >= d.len) {
            rx_seg_off_ = 0;
            ++rx_desc_pos_;
        }
    }
    st_.rx_packets += n;
    return n;
}

size_t UdpPort::recv_burst(RxPacket* out, size_t max) {
    if (max == 0) return 0;
    // Packets of GRO buffers left over from the previous call: those buffers are still
    // referenced by nothing else, but the ones handed out just now must not be refilled.
    if (rx_desc_pos_ < rx_desc_n_) {
        const size_t n = emit(out, max);
        rx_queued_.store(!ready_.empty() || rx_desc_pos_ < rx_desc_n_, std::memory_order_relaxed);
        return n;
    }
    rx_desc_n_ = rx_desc_pos_ = 0;
    rx_seg_off_ = 0;

    // mroce peers send everything to the listen socket, so while it yields packets it is
    // read again without asking epoll first (a pass costs one recvmmsg, not an epoll_wait
    // as well); other sockets are still looked at through epoll every 16th call. Once the
    // listen socket comes up empty, epoll decides again (replies to a path port, as raw
    // UDP peers send them, are found at once).
    if (listen_hot_ && (++rx_calls_ & 15) != 0) {
        for (uint32_t pl = 0; pl < plane_addr_.size(); ++pl)
            if (listen_hot_ & (1u << pl)) add_ready(pl);
    } else if (ready_.empty() || (++rx_calls_ & 15) == 0) {
        wait(0);
    }
    listen_hot_ = 0;
    size_t bufs = 0, produced = 0;
    size_t kept = 0;
    const size_t nready = ready_.size();
    for (size_t r = 0; r < nready; ++r) {
        const uint32_t si = ready_[r];
        // With GRO one buffer carries many packets: ask for about as many buffers as the
        // caller can take packets, so the ring's cache footprint follows the burst size.
        const size_t want = max > produced ? (max - produced + segs_hint_ - 1) / segs_hint_ : 0;
        const size_t vlen = std::min(cfg_.rx_batch - bufs, want);
        if (vlen == 0) {
            ready_[kept++] = si;  // not looked at this time: still readable
            continue;
        }
        const size_t before = produced;
        const size_t got = recv_sock(si, bufs, vlen, produced);
        if (si < plane_addr_.size() && got) listen_hot_ |= 1u << si;  // a plane's listen socket
        bufs += got;
        if (got) segs_hint_ = std::max<size_t>(1, (produced - before) / got);
        if (got == vlen) ready_[kept++] = si;
        else in_ready_[si] = 0;
    }
    ready_.resize(kept);
    // Rotate, so the socket served first changes from call to call.
    if (kept > 1) std::rotate(ready_.begin(), ready_.begin() + 1, ready_.end());
    const size_t n = emit(out, max);
    rx_queued_.store(kept != 0 || rx_desc_pos_ < rx_desc_n_, std::memory_order_relaxed);
    return n;
}

bool UdpPort::wait(uint64_t timeout_ns) {
    // Packets already waiting in the ring or on a socket known to be readable: nothing to wait for.
    if (timeout_ns != 0 && rx_queued_.load(std::memory_order_relaxed)) return true;
    timespec ts{};
    timespec* tp = &ts;
    if (timeout_ns == UINT64_MAX) tp = nullptr;
    else {
        ts.tv_sec = time_t(timeout_ns / 1'000'000'000u);
        ts.tv_nsec = long(timeout_ns % 1'000'000'000u);
    }
    if (timeout_ns != 0) {
        // Level-triggered: what woke it is still readable for the next
        // recv_burst's poll, which lists it under the caller's lock. Only the
        // wake-up is consumed here (non-blocking: a concurrent poll may have
        // read it first). Not counted in rx_syscalls, recv_burst's.
        const int r = epoll_pwait2(ep_, ep_idle_events_.data(), int(ep_idle_events_.size()), tp, nullptr);
        if (r <= 0) return false;
        for (int i = 0; i < r; ++i)
            if (ep_idle_events_[size_t(i)].data.u32 == kWakeTag) {
                uint64_t v;
                [[maybe_unused]] ssize_t rd = read(wake_fd_, &v, sizeof v);
            }
        return true;
    }
    const int r = epoll_pwait2(ep_, ep_events_.data(), int(ep_events_.size()), tp, nullptr);
    ++st_.rx_syscalls;
    if (r <= 0) return false;
    for (int i = 0; i < r; ++i) {
        const uint32_t tag = ep_events_[size_t(i)].data.u32;
        if (tag == kWakeTag) {
            uint64_t v;
            [[maybe_unused]] ssize_t rd = read(wake_fd_, &v, sizeof v);
        } else {
            add_ready(tag);
        }
    }
    return true;
}

void UdpPort::wake() {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t w = write(wake_fd_, &one, sizeof one);
}

}  // namespace mroce::udp
