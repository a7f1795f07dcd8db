// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
#include "peer.hpp"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "suite.hpp"

namespace mroce::conform {

using wire::PacketType;

uint64_t now_ns() {
    return uint64_t(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = uint8_t(seed + i * 7 + (i >> 8));
    return v;
}

std::span<const uint8_t> RxPkt::payload() const {
    if (!is(PacketType::data) || raw.size() < wire::kDataLen) return {};
    return std::span<const uint8_t>(raw).subspan(wire::kDataLen, pk.data.payload_len);
}

std::string RxPkt::str() const {
    if (err != wire::DecodeError::ok)
        return std::string("{undecodable ") + wire::to_string(err) + " " + std::to_string(raw.size()) + "B}";
    std::string s = std::string("{") + wire::to_string(type()) + " path=" + std::to_string(pk.common.path_id);
    switch (type()) {
    case PacketType::data:
        s += std::string(" ") + wire::to_string(d().opcode) + " psn=" + std::to_string(d().psn) +
             " csn=" + std::to_string(d().csn) + " stream=" + hex(d().stream_id) + " msg=" + std::to_string(d().msg_seq) +
             " off=" + std::to_string(d().offset) + " len=" + std::to_string(d().payload_len) + "/" +
             std::to_string(d().msg_len) + " flags=" + hex(d().dflags);
        break;
    case PacketType::ack:
        s += " cum_psn=" + std::to_string(a().cum_psn) + " sack0=" + hex(a().sack[0]) + " rx=" +
             std::to_string(a().rx_count) + " ce=" + std::to_string(a().ce_count) +
             " hint=" + std::to_string(a().rate_hint);
        break;
    case PacketType::nak:
        s += std::string(" ") + wire::to_string(n().syndrome) + " stream=" + hex(n().stream_id) +
             " msg=" + std::to_string(n().msg_seq) + " csn=" + std::to_string(n().csn);
        break;
    case PacketType::probe:
    case PacketType::probe_reply:
        s += " seq=" + std::to_string(pk.probe.probe_seq);
        break;
    default: break;
    }
    return s + " sport=" + std::to_string(src_port) + "}";
}

void AckState::record(uint32_t psn, uint32_t ts, bool ce_mark) {
    if (wire::seq_lt(psn, cum) || above.count(psn)) {
        ++rx;
        return;
    }
    above.insert(psn);
    while (above.count(cum)) above.erase(cum++);
    last_ts = ts;
    ++rx;
    if (ce_mark) ++ce;
}

wire::AckHeader AckState::make(uint32_t rate_hint, bool echo_ts) const {
    wire::AckHeader a{};
    a.cum_psn = cum;
    a.ts_echo = echo_ts ? last_ts : 0;
    a.rate_hint = rate_hint;
    a.rx_count = rx;
    a.ce_count = ce;
    a.ack_flags = ce ? wire::kAckCe : 0;
    for (uint32_t p : above) {
        const uint32_t i = p - cum - 1;
        if (i < 256) a.sack[i / 64] |= uint64_t(1) << (i % 64);
    }
    return a;
}

namespace {
// The suite's sockets take ports 15000-19999, not ephemeral ones: the suite opens
// hundreds per run, and other tests running beside it bind fixed ports in the
// kernel's ephemeral range (an ephemeral socket of ours could take one first).
int udp_socket(const std::string& ip, uint16_t& port_out) {
    static uint32_t next = uint32_t(getpid()) * 397u;
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    inet_pton(AF_INET, ip.c_str(), &sa.sin_addr);
    bool bound = false;
    for (int attempt = 0; attempt < 5000 && !bound; ++attempt) {
        sa.sin_port = htons(uint16_t(15000 + next++ % 5000));
        bound = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    }
    if (!bound) {
        ::close(fd);
        throw std::runtime_error(std::string("bind: ") + std::strerror(errno));
    }
    socklen_t l = sizeof sa;
    getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &l);
    port_out = ntohs(sa.sin_port);
    int one = 1;
    setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof one);
    int buf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    return fd;
}
}  // namespace

Peer::Peer(const std::string& iut_ip, uint16_t iut_port, const std::string& local_ip) : local_ip_(local_ip) {
    fd_ = udp_socket(local_ip, port_);
    iut_.sin_family = AF_INET;
    iut_.sin_port = htons(iut_port);
    if (inet_pton(AF_INET, iut_ip.c_str(), &iut_.sin_addr) != 1) throw std::runtime_error("bad IUT address " + iut_ip);
}

Peer::~Peer() {
    ::close(fd_);
    for (int f : path_fds_) ::close(f);
}

int Peer::path_sock(int path) {
    if (path < 0) return fd_;
    while (path_fds_.size() <= size_t(path)) {
        uint16_t p;
        path_fds_.push_back(udp_socket(local_ip_, p));
    }
    return path_fds_[size_t(path)];
}

void Peer::send_raw(std::span<const uint8_t> dgram, int from_path, uint8_t ecn) {
    iovec iov{const_cast<uint8_t*>(dgram.data()), dgram.size()};
    msghdr h{};
    h.msg_name = &iut_;
    h.msg_namelen = sizeof iut_;
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))] = {};
    h.msg_control = ctrl;
    h.msg_controllen = sizeof ctrl;
    cmsghdr* c = CMSG_FIRSTHDR(&h);
    c->cmsg_level = IPPROTO_IP;
    c->cmsg_type = IP_TOS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    const int tos = ecn & 3;
    std::memcpy(CMSG_DATA(c), &tos, sizeof tos);
    if (::sendmsg(path_sock(from_path), &h, 0) < 0)
        throw std::runtime_error(std::string("sendmsg to the IUT: ") + std::strerror(errno));
}

std::vector<uint8_t> Peer::connect_req(const ConnParams& p) const {
    std::vector<uint8_t> b(wire::kConnectLen);
    wire::CommonHeader c;
    c.type = PacketType::connect_req;
    c.dst_conn = 0;
    c.src_conn = p.conn_id;
    c.flags = p.flags;
    wire::ConnectHeader h;
    h.num_paths = p.num_paths;
    h.max_payload = p.max_payload;
    h.initial_csn = p.initial_csn;
    h.rx_capacity_mbps = p.rx_mbps;
    h.cookie = p.cookie;
    h.stream_depth = p.stream_depth;
    h.csn_window = p.csn_window;
    wire::encode_connect(b, c, h);
    add_plane_block(b);
    return b;
}

void Peer::add_plane_block(std::vector<uint8_t>& b) const {
    if (planes.size() < 2) return;
    const size_t at = b.size();
    b.resize(at + wire::kMaxPlaneBlock);
    b.resize(at + wire::encode_plane_block({b.data() + at, wire::kMaxPlaneBlock}, planes.data(), planes.size()));
}

RxPkt Peer::connect(const ConnParams& p, uint64_t timeout_ns) {
    const auto req = connect_req(p);
    const uint64_t end = now_ns() + timeout_ns;
    for (;;) {
        send_raw(req);
        const uint64_t left = end > now_ns() ? end - now_ns() : 0;
        auto a = poll(
            [&](const RxPkt& r) {
                return r.is(PacketType::connect_ack) && r.pk.common.dst_conn == p.conn_id &&
                       r.pk.connect.cookie == p.cookie;
            },
            std::min<uint64_t>(left, 20 * kMs));
        if (a) {
            mine = p;
            theirs = a->pk.connect;
            my_conn = p.conn_id;
            iut_conn = a->pk.common.src_conn;
            next_csn = p.initial_csn;
            next_psn.assign(p.num_paths, 0);
            acks.clear();
            last_ack.clear();
            return *a;
        }
        if (now_ns() >= end) fail("a CONNECT_ACK to our CONNECT_REQ", "none within " + std::to_string(timeout_ns / kMs) + " ms; " + backlog_summary());
    }
}

void Peer::answer(const RxPkt& req, const ConnParams& p, uint32_t rate_hint, uint32_t cookie_override) {
    std::vector<uint8_t> b(wire::kConnectLen);
    wire::CommonHeader c;
    c.type = PacketType::connect_ack;
    c.dst_conn = req.pk.common.src_conn;
    c.src_conn = p.conn_id;
    c.flags = p.flags;
    wire::ConnectHeader h;
    h.num_paths = p.num_paths;
    h.max_payload = p.max_payload;
    h.initial_csn = p.initial_csn;
    h.rx_capacity_mbps = p.rx_mbps;
    h.cookie = cookie_override ? cookie_override : req.pk.connect.cookie;
    h.stream_depth = p.stream_depth;
    h.csn_window = p.csn_window;
    h.rate_hint = rate_hint;
    wire::encode_connect(b, c, h);
    add_plane_block(b);
    send_raw(b);
    if (cookie_override) return;
    mine = p;
    theirs = req.pk.connect;
    my_conn = p.conn_id;
    iut_conn = req.pk.common.src_conn;
    next_csn = p.initial_csn;
    next_psn.assign(p.num_paths, 0);
    acks.clear();
    last_ack.clear();
}

std::vector<uint8_t> Peer::build(const DataSpec& d, Sent& s, bool consume) {
    s.path = d.path;
    if (next_psn.size() <= d.path) next_psn.resize(d.path + 1u, 0);
    s.psn = d.psn ? *d.psn : next_psn[d.path];
    s.csn = d.csn ? *d.csn : next_csn;
    if (consume) {
        if (!d.psn) ++next_psn[d.path];
        if (!d.csn) ++next_csn;
    }
    s.ts = uint32_t(now_ns());
    if (s.ts == 0) s.ts = 1;
    wire::CommonHeader c;
    c.type = PacketType::data;
    c.dst_conn = iut_conn;
    c.src_conn = my_conn;
    c.path_id = d.path;
    wire::DataHeader h;
    h.psn = s.psn;
    h.csn = s.csn;
    h.opcode = d.op;
    h.dflags = d.flags;
    h.payload_len = uint16_t(d.payload.size());
    h.stream_id = d.stream;
    h.msg_seq = d.msg_seq;
    h.msg_len = d.msg_len;
    h.offset = d.offset;
    h.rkey = d.rkey;
    h.remote_addr = d.raddr;
    h.recv_seq = d.recv_seq;
    h.imm = d.imm;
    h.ts = s.ts;
    h.path_floor = d.floor ? *d.floor : 0;
    std::vector<uint8_t> b(wire::kDataLen + d.payload.size());
    wire::encode_data(b, c, h);
    if (!d.payload.empty()) std::memcpy(b.data() + wire::kDataLen, d.payload.data(), d.payload.size());
    return b;
}

Sent Peer::send(const DataSpec& d) {
    Sent s;
    const auto b = build(d, s);
    send_raw(b, d.path, d.ce ? 3 : 2);
    return s;
}

void Peer::send_ack(uint16_t iut_path, const wire::AckHeader& a) {
    std::vector<uint8_t> b(wire::kAckLen);
    wire::CommonHeader c;
    c.type = PacketType::ack;
    c.dst_conn = iut_conn;
    c.src_conn = my_conn;
    c.path_id = iut_path;
    wire::encode_ack(b, c, a);
    send_raw(b, iut_path % std::max<uint16_t>(1, mine.num_paths));
}

void Peer::send_nak(const wire::NakHeader& n, uint16_t path) {
    std::vector<uint8_t> b(wire::kNakLen);
    wire::CommonHeader c;
    c.type = PacketType::nak;
    c.dst_conn = iut_conn;
    c.src_conn = my_conn;
    c.path_id = path;
    wire::encode_nak(b, c, n);
    send_raw(b, path);
}

void Peer::send_probe_reply(const RxPkt& probe) {
    std::vector<uint8_t> b(wire::kProbeLen);
    wire::CommonHeader c;
    c.type = PacketType::probe_reply;
    c.dst_conn = iut_conn;
    c.src_conn = my_conn;
    c.path_id = probe.pk.common.path_id;
    wire::encode_probe(b, c, probe.pk.probe);
    send_raw(b, 0);
}

void Peer::record(const RxPkt& p) {
    if (!p.is(PacketType::data)) return;
    acks[p.pk.common.path_id].record(p.d().psn, p.d().ts, p.ecn == 3);
}

void Peer::ack_path(uint16_t path, uint32_t rate_hint) {
    AckState& st = acks[path];
    send_ack(path, st.make(rate_hint, echo_ts));
    st.rx = st.ce = 0;
}

void Peer::ack_all(const std::vector<RxPkt>& pkts, uint32_t rate_hint) {
    std::set<uint16_t> paths;
    for (const auto& p : pkts)
        if (p.is(PacketType::data)) {
            record(p);
            paths.insert(p.pk.common.path_id);
        }
    for (uint16_t p : paths) ack_path(p, rate_hint);
}

bool Peer::receive_one(uint64_t deadline) {
    const uint64_t now = now_ns();
    const int ms = deadline > now ? int((deadline - now + kMs - 1) / kMs) : 0;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return false;
    RxPkt r;
    r.raw.resize(65536);
    sockaddr_in from{};
    iovec iov{r.raw.data(), r.raw.size()};
    msghdr h{};
    h.msg_name = &from;
    h.msg_namelen = sizeof from;
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    alignas(cmsghdr) char ctrl[64];
    h.msg_control = ctrl;
    h.msg_controllen = sizeof ctrl;
    const ssize_t n = ::recvmsg(fd_, &h, MSG_DONTWAIT);
    if (n < 0) return false;
    r.raw.resize(size_t(n));
    r.at = now_ns();
    r.src_port = ntohs(from.sin_port);
    r.src_ip = ntohl(from.sin_addr.s_addr);
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c))
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) r.ecn = *CMSG_DATA(c) & 3;
    r.err = wire::decode(r.raw, r.pk);
    r.pk.payload = {};
    r.pk.payload_tail = {};
    backlog_.push_back(std::move(r));
    if (backlog_.size() > 100000) backlog_.pop_front();
    return true;
}

std::optional<RxPkt> Peer::poll(const Pred& p, uint64_t timeout_ns) {
    const uint64_t deadline = now_ns() + timeout_ns;
    size_t scanned = 0;
    for (;;) {
        for (; scanned < backlog_.size(); ++scanned)
            if (p(backlog_[scanned])) {
                RxPkt r = std::move(backlog_[scanned]);
                backlog_.erase(backlog_.begin() + long(scanned));
                if (r.is(PacketType::ack)) last_ack[r.pk.common.path_id] = r;
                return r;
            }
        if (!receive_one(deadline) && now_ns() >= deadline) return std::nullopt;
    }
}

RxPkt Peer::wait(const Pred& p, uint64_t timeout_ns, const std::string& what) {
    auto r = poll(p, timeout_ns);
    if (!r) fail(what, "none within " + std::to_string(timeout_ns / kMs) + " ms; " + backlog_summary());
    return *r;
}

Pred answer_from(const Peer& p) {
    const uint32_t conn = p.my_conn, cookie = p.mine.cookie;
    return [conn, cookie](const RxPkt& r) {
        return !(r.is(PacketType::connect_ack) && r.pk.common.dst_conn == conn && r.pk.connect.cookie == cookie);
    };
}

void Peer::quiet(const Pred& p, uint64_t window_ns, const std::string& what) {
    auto r = poll(p, window_ns);
    if (r) fail(what, r->str());
}

std::vector<RxPkt> Peer::collect(const Pred& p, uint64_t window_ns) {
    std::vector<RxPkt> out;
    const uint64_t deadline = now_ns() + window_ns;
    for (;;) {
        const uint64_t now = now_ns();
        auto r = poll(p, deadline > now ? deadline - now : 0);
        if (!r) return out;
        out.push_back(std::move(*r));
    }
}

std::vector<RxPkt> Peer::collect_n(const Pred& p, size_t n, uint64_t timeout_ns) {
    std::vector<RxPkt> out;
    const uint64_t deadline = now_ns() + timeout_ns;
    while (out.size() < n) {
        const uint64_t now = now_ns();
        auto r = poll(p, deadline > now ? deadline - now : 0);
        if (!r) break;
        out.push_back(std::move(*r));
    }
    return out;
}

std::string Peer::backlog_summary() const {
    if (backlog_.empty()) return "nothing else arrived";
    std::string s = "other arrivals: ";
    size_t k = 0;
    for (const auto& r : backlog_) {
        if (k++ == 4) {
            s += " ... (" + std::to_string(backlog_.size()) + " in all)";
            break;
        }
        s += r.str() + " ";
    }
    return s;
}

Pred is_type(PacketType t) {
    return [t](const RxPkt& r) { return r.is(t); };
}
Pred is_data() { return is_type(PacketType::data); }
Pred is_nak() { return is_type(PacketType::nak); }
Pred is_ctrl(PacketType t) { return is_type(t); }
Pred is_ack(int path) {
    return [path](const RxPkt& r) { return r.is(PacketType::ack) && (path < 0 || r.pk.common.path_id == path); };
}

}  // namespace mroce::conform
