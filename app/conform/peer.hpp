// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The scripted peer: one endpoint on UDP that talks to the IUT with packets
// it builds field by field with the wire codec (lib/wire), and keeps what
// the IUT sends in a backlog that tests search (wait, quiet, collect). It
// has no protocol engine: every sequence number, every ACK and NAK it sends
// is the test's choice, which is what lets a test lose, duplicate, reorder,
// mark or forge exactly the packet that matters.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "mroce/wire.hpp"

namespace mroce::conform {

uint64_t now_ns();
inline constexpr uint64_t kMs = 1'000'000;

// One datagram the IUT sent us.
struct RxPkt {
    std::vector<uint8_t> raw;
    wire::Packet pk;              // payload spans cleared: payload() reads raw
    wire::DecodeError err = wire::DecodeError::ok;
    uint16_t src_port = 0;
    uint32_t src_ip = 0;          // IPv4 source address, host order (which IUT plane sent it, R-PLANE-2)
    uint8_t ecn = 0;              // IP ECN bits it arrived with (0 Not-ECT, 2 ECT(0), 1 ECT(1), 3 CE)
    uint64_t at = 0;              // suite clock, ns
    wire::PacketType type() const { return pk.common.type; }
    bool is(wire::PacketType t) const { return err == wire::DecodeError::ok && pk.common.type == t; }
    const wire::DataHeader& d() const { return pk.data; }
    const wire::AckHeader& a() const { return pk.ack; }
    const wire::NakHeader& n() const { return pk.nak; }
    std::span<const uint8_t> payload() const;
    std::string str() const;
};
using Pred = std::function<bool(const RxPkt&)>;

// What the suite announces in its CONNECT packet.
struct ConnParams {
    uint16_t num_paths = 2;
    uint16_t max_payload = 1024;
    uint32_t initial_csn = 1000;
    uint32_t rx_mbps = 100000;
    uint32_t cookie = 0xc0ffee01;
    uint32_t stream_depth = 64;
    uint32_t csn_window = 1024;
    uint32_t conn_id = 0x5a17e001;
    // Common-header flags of our CONNECT_REQ / CONNECT_ACK: wire::kConnAcceptsPack makes the
    // IUT pack small WRITEs toward us (R-PACK-2); none by default, so that every requester test
    // but the R-PACK ones sees one message per packet.
    uint16_t flags = 0;
};

// One DATA packet to send; psn, csn, path_floor default to the peer's counters.
struct DataSpec {
    wire::Opcode op = wire::Opcode::write;
    uint32_t stream = 1, msg_seq = 0, msg_len = 0, offset = 0, rkey = 0, recv_seq = 0, imm = 0;
    uint64_t raddr = 0;
    uint8_t flags = 0;
    std::vector<uint8_t> payload;
    uint16_t path = 0;
    std::optional<uint32_t> psn, csn, floor;
    bool ce = false;
};
struct Sent {
    uint32_t psn = 0, csn = 0;
    uint16_t path = 0;
    uint32_t ts = 0;
};

// The suite's receiver state for the IUT's data paths: what it has
// "received", from which it builds cumulative and selective acks.
struct AckState {
    uint32_t cum = 0;             // next PSN expected (every one below received)
    std::set<uint32_t> above;     // received PSNs above cum (serial order)
    uint32_t last_ts = 0;
    uint16_t rx = 0, ce = 0;
    void record(uint32_t psn, uint32_t ts, bool ce_mark);
    // echo_ts false: ts_echo 0 ("none", R-RTT-1), so the IUT takes no RTT
    // sample and arms no tail-loss probe (R-TIMER-8) unless a test wants it.
    wire::AckHeader make(uint32_t rate_hint = 0, bool echo_ts = false) const;
};

class Peer {
public:
    Peer(const std::string& iut_ip, uint16_t iut_port, const std::string& local_ip = "127.0.0.1");
    ~Peer();
    Peer(const Peer&) = delete;
    Peer& operator=(const Peer&) = delete;

    uint16_t port() const noexcept { return port_; }
    const std::string& local_ip() const noexcept { return local_ip_; }

    // Raw datagrams. from_path < 0: from the listen socket; else from the
    // path socket of that index (its own UDP source port). ecn: IP ECN bits.
    void send_raw(std::span<const uint8_t> dgram, int from_path = -1, uint8_t ecn = 0);

    // Handshake initiated by the suite: CONNECT_REQ (resent every 20 ms) until a CONNECT_ACK.
    RxPkt connect(const ConnParams& p, uint64_t timeout_ns = 1000 * kMs);
    // Builds the CONNECT_REQ of p (dst_conn 0), with a plane block when planes has two or more.
    std::vector<uint8_t> connect_req(const ConnParams& p) const;
    // The suite's planes (R-PLANE-1): announced in this peer's CONNECT_REQ and
    // CONNECT_ACK when two or more (each plane's address and listening port).
    std::vector<wire::PlaneAddr> planes;
    // The state of the connection once set up (by connect, or by a test that answered the IUT's REQ).
    ConnParams mine;
    wire::ConnectHeader theirs{};
    uint32_t my_conn = 0, iut_conn = 0;
    uint32_t next_csn = 0;
    std::vector<uint32_t> next_psn;   // per own path
    std::map<uint16_t, AckState> acks; // per IUT path
    bool echo_ts = false;              // our ACKs echo ts (RTT samples at the IUT)
    // The newest ACK of each path a wait or poll returned: one ACK covers a
    // whole receive burst, so a later wait for a PSN it covered looks here first.
    std::map<uint16_t, RxPkt> last_ack;
    // Answers the IUT's CONNECT_REQ req with a CONNECT_ACK of p (hint in
    // rate_hint) and takes the connection's state from it.
    void answer(const RxPkt& req, const ConnParams& p, uint32_t rate_hint = 0, uint32_t cookie_override = 0);

    // Builds and sends DATA from path d.path's socket; returns what it used.
    Sent send(const DataSpec& d);
    std::vector<uint8_t> build(const DataSpec& d, Sent& s, bool consume = true);
    void send_ack(uint16_t iut_path, const wire::AckHeader& a);
    void send_nak(const wire::NakHeader& n, uint16_t path = 0);
    void send_probe_reply(const RxPkt& probe);
    // Records the IUT's DATA packets in acks (for ack_path) without answering.
    void record(const RxPkt& p);
    // Sends the ACK of acks[path] (rx/ce counters restart).
    void ack_path(uint16_t path, uint32_t rate_hint = 0);
    // Records and acknowledges every DATA packet of pkts, one ACK per path.
    void ack_all(const std::vector<RxPkt>& pkts, uint32_t rate_hint = 0);

    // Receive side: the backlog first, then the socket.
    std::optional<RxPkt> poll(const Pred& p, uint64_t timeout_ns);
    RxPkt wait(const Pred& p, uint64_t timeout_ns, const std::string& what);
    // Fails if a packet matching p arrives within window_ns (the backlog counts).
    void quiet(const Pred& p, uint64_t window_ns, const std::string& what);
    // Every packet matching p within window_ns (backlog included), in arrival order.
    std::vector<RxPkt> collect(const Pred& p, uint64_t window_ns);
    // Collects until n packets matching p arrived or timeout_ns passed.
    std::vector<RxPkt> collect_n(const Pred& p, size_t n, uint64_t timeout_ns);
    void clear() { backlog_.clear(); }
    std::string backlog_summary() const;

private:
    bool receive_one(uint64_t deadline);
    void add_plane_block(std::vector<uint8_t>& b) const;
    int path_sock(int path);
    int fd_ = -1;
    uint16_t port_ = 0;
    std::string local_ip_;
    sockaddr_in iut_{};
    std::vector<int> path_fds_;
    std::deque<RxPkt> backlog_;
};

// Any packet but a repeat of p's handshake CONNECT_ACK: under load p resends
// its CONNECT_REQ when the first answer takes over 20 ms, and the IUT answers
// each (R-CONN-4); such an answer may land in a later quiet window, where it
// answers nothing the test sent.
Pred answer_from(const Peer& p);

// Predicates.
Pred is_type(wire::PacketType t);
Pred is_data();
Pred is_ack(int path = -1);
Pred is_nak();
Pred is_ctrl(wire::PacketType t);

std::vector<uint8_t> pattern(size_t n, uint8_t seed);

}  // namespace mroce::conform
