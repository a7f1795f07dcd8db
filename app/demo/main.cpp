// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// mroce-demo: a tour of wire format v1. Encodes one packet of each type, prints
// its bytes and its decoded fields, then feeds malformed datagrams to the
// decoder and prints each error with the spec rule it enforces (R-WIRE-*).
// Exits non-zero if any packet does not decode as expected.
#include <fmt/core.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "mroce/wire.hpp"

using namespace mroce::wire;

namespace {

using Bytes = std::vector<uint8_t>;

constexpr uint32_t kConnA = 0x0000A001;  // initiator
constexpr uint32_t kConnB = 0x0000B002;  // passive side

void print_hex(const Bytes& b) {
    for (size_t i = 0; i < b.size(); i += 16) {
        std::string line = fmt::format("    {:04x}  ", i);
        for (size_t j = i; j < i + 16 && j < b.size(); ++j)
            line += fmt::format("{:02x}{}", b[j], j % 16 == 7 ? "  " : " ");
        while (!line.empty() && line.back() == ' ') line.pop_back();
        fmt::print("{}\n", line);
    }
}

void print_fields(const Packet& p) {
    const CommonHeader& c = p.common;
    fmt::print("    {} v{} dst_conn={:#x} src_conn={:#x} path_id={}\n", to_string(c.type), c.version,
               c.dst_conn, c.src_conn, c.path_id);
    switch (c.type) {
    case PacketType::data: {
        const DataHeader& d = p.data;
        fmt::print("    psn={} csn={} opcode={} dflags={:#x} payload_len={} stream_id={} msg_seq={}\n",
                   d.psn, d.csn, to_string(d.opcode), d.dflags, d.payload_len, d.stream_id,
                   d.msg_seq);
        fmt::print("    msg_len={} offset={} rkey={:#x} remote_addr={:#x} recv_seq={} imm={:#x} "
                   "ts={} path_floor={}\n",
                   d.msg_len, d.offset, d.rkey, d.remote_addr, d.recv_seq, d.imm, d.ts,
                   d.path_floor);
        break;
    }
    case PacketType::ack: {
        const AckHeader& a = p.ack;
        fmt::print("    cum_psn={} ts_echo={} rate_hint={} kbit/s ce_count={} rx_count={} cum_csn={} "
                   "ack_flags={:#x}\n",
                   a.cum_psn, a.ts_echo, a.rate_hint, a.ce_count, a.rx_count, a.cum_csn,
                   a.ack_flags);
        fmt::print("    sack={:016x} {:016x} {:016x} {:016x}\n", a.sack[0], a.sack[1], a.sack[2],
                   a.sack[3]);
        std::string got;
        for (size_t i = 0; i < kSackBits; ++i)
            if ((a.sack[i / 64] >> (i % 64)) & 1) got += fmt::format(" {}", a.cum_psn + 1 + i);
        fmt::print("    PSNs acked above cum_psn:{}\n", got.empty() ? " none" : got);
        break;
    }
    case PacketType::nak:
        fmt::print("    stream_id={} msg_seq={} syndrome={} opcode={} csn={}\n", p.nak.stream_id,
                   p.nak.msg_seq, to_string(p.nak.syndrome), to_string(p.nak.opcode), p.nak.csn);
        break;
    case PacketType::probe:
    case PacketType::probe_reply:
        fmt::print("    probe_seq={} ts={}\n", p.probe.probe_seq, p.probe.ts);
        break;
    case PacketType::connect_req:
    case PacketType::connect_ack: {
        const ConnectHeader& h = p.connect;
        fmt::print("    num_paths={} max_payload={} initial_csn={} rx_capacity_mbps={} cookie={:#x} "
                   "stream_depth={} csn_window={} rate_hint={}\n",
                   h.num_paths, h.max_payload, h.initial_csn, h.rx_capacity_mbps, h.cookie,
                   h.stream_depth, h.csn_window, h.rate_hint);
        break;
    }
    case PacketType::disconnect:
    case PacketType::disconnect_ack:
        fmt::print("    reason={}\n", p.disconnect.reason);
        break;
    }
    if (!p.payload.empty()) {
        std::string s;
        for (size_t i = 0; i < p.payload.size() && i < 16; ++i) s += fmt::format("{:02x}", p.payload[i]);
        fmt::print("    payload {} bytes: {}{}\n", p.payload.size(), s, p.payload.size() > 16 ? "..." : "");
    }
}

CommonHeader common(PacketType t, uint32_t dst, uint32_t src, uint16_t path = 0) {
    CommonHeader c;
    c.type = t;
    c.dst_conn = dst;
    c.src_conn = src;
    c.path_id = path;
    return c;
}

Bytes data_packet(const CommonHeader& c, const DataHeader& d, const Bytes& payload) {
    Bytes b(kDataLen);
    encode_data(b, c, d);
    b.insert(b.end(), payload.begin(), payload.end());
    return b;
}

struct Example {
    const char* what;
    Bytes bytes;
};

std::vector<Example> examples() {
    std::vector<Example> v;
    {
        DataHeader d;
        d.psn = 100;
        d.csn = 5000;
        d.opcode = Opcode::write;
        d.dflags = kDataAckNow;
        d.stream_id = 7;
        d.msg_seq = 2;
        d.msg_len = 4096;
        d.offset = 0;
        d.rkey = 0x1234ABCD;
        d.remote_addr = 0x00007F0000001000;
        d.ts = 0x89ABCDEF;
        d.path_floor = 90;
        Bytes payload(16);
        for (size_t i = 0; i < payload.size(); ++i) payload[i] = uint8_t(i);
        d.payload_len = uint16_t(payload.size());
        v.push_back({"DATA: first 16 bytes of a 4096-byte RDMA WRITE on path 3",
                     data_packet(common(PacketType::data, kConnB, kConnA, 3), d, payload)});
    }
    {
        AckHeader a;
        a.cum_psn = 101;
        a.ts_echo = 0x89ABCDEF;
        a.rate_hint = 25'000'000;
        a.ce_count = 1;
        a.rx_count = 4;
        a.cum_csn = 4990;
        a.ack_flags = kAckCe;
        a.sack[0] = 0x6;
        Bytes b(kAckLen);
        encode_ack(b, common(PacketType::ack, kConnA, kConnB, 3), a);
        v.push_back({"ACK of path 3 (101, 102 missing; 103, 104 received; 25 Gbit/s hint)", b});
    }
    {
        NakHeader k;
        k.stream_id = 7;
        k.msg_seq = 2;
        k.syndrome = Syndrome::rkey_invalid;
        k.opcode = Opcode::write;
        k.csn = 5000;
        Bytes b(kNakLen);
        encode_nak(b, common(PacketType::nak, kConnA, kConnB, 3), k);
        v.push_back({"NAK: unknown rkey in a WRITE", b});
    }
    for (PacketType t : {PacketType::probe, PacketType::probe_reply}) {
        Bytes b(kProbeLen);
        const bool req = t == PacketType::probe;
        encode_probe(b, common(t, req ? kConnB : kConnA, req ? kConnA : kConnB, 2),
                     ProbeHeader{17, 0x01234567});
        v.push_back({req ? "PROBE of failed path 2" : "PROBE_REPLY echoing it", b});
    }
    {
        ConnectHeader h;
        h.num_paths = 4;
        h.max_payload = 4096;
        h.initial_csn = 1;
        h.rx_capacity_mbps = 100000;
        h.cookie = 0xC001D00D;
        h.stream_depth = 256;
        h.csn_window = 4096;
        Bytes b(kConnectLen);
        encode_connect(b, common(PacketType::connect_req, 0, kConnA), h);
        v.push_back({"CONNECT_REQ (dst_conn 0: the initiator does not know the peer's id yet)", b});
        h.num_paths = 8;
        h.max_payload = 9000;
        h.initial_csn = 0x80000000;
        h.rx_capacity_mbps = 25000;
        h.stream_depth = 65536;
        h.csn_window = 1u << 20;
        h.rate_hint = 6'250'000;
        encode_connect(b, common(PacketType::connect_ack, kConnA, kConnB), h);
        v.push_back({"CONNECT_ACK (echoes the cookie; fair share 6.25 Gbit/s for the initiator)", b});
    }
    for (PacketType t : {PacketType::disconnect, PacketType::disconnect_ack}) {
        Bytes b(kDisconnectLen);
        const bool req = t == PacketType::disconnect;
        encode_disconnect(b, common(t, req ? kConnB : kConnA, req ? kConnA : kConnB),
                          DisconnectHeader{0});
        v.push_back({req ? "DISCONNECT" : "DISCONNECT_ACK", b});
    }
    return v;
}

struct Malformed {
    const char* what;
    const char* rule;
    DecodeError expect;
    std::function<void(Bytes&)> mutate;  // applied to a copy of the base packet
    size_t base;                         // index into examples()
};

void put32(Bytes& b, size_t off, uint32_t x) {
    for (int i = 0; i < 4; ++i) b[off + i] = uint8_t(x >> (24 - 8 * i));
}
void put16(Bytes& b, size_t off, uint16_t x) {
    b[off] = uint8_t(x >> 8);
    b[off + 1] = uint8_t(x);
}

// Base packets (examples() order): 0 DATA WRITE, 1 ACK, 2 NAK, 3 PROBE, 4 PROBE_REPLY,
// 5 CONNECT_REQ, 6 CONNECT_ACK, 7 DISCONNECT, 8 DISCONNECT_ACK.
std::vector<Malformed> malformed() {
    using E = DecodeError;
    return {
        {"10 bytes: shorter than the 16-byte common header", "R-WIRE-3", E::truncated,
         [](Bytes& b) { b.resize(10); }, 0},
        {"DATA cut inside its 72-byte header", "R-WIRE-3", E::truncated,
         [](Bytes& b) { b.resize(40); }, 0},
        {"DATA missing the last payload byte", "R-WIRE-3", E::truncated,
         [](Bytes& b) { b.pop_back(); }, 0},
        {"version 2", "R-WIRE-4", E::bad_version, [](Bytes& b) { b[0] = 2; }, 3},
        {"type 10 (unknown)", "R-WIRE-4", E::bad_type, [](Bytes& b) { b[1] = 10; }, 3},
        {"DATA opcode 0 (unknown)", "R-WIRE-4", E::bad_opcode, [](Bytes& b) { b[24] = 0; }, 0},
        {"NAK naming opcode 42", "R-WIRE-4", E::bad_opcode, [](Bytes& b) { b[25] = 42; }, 2},
        {"DATA payload_len 9001", "R-WIRE-6", E::oversized,
         [](Bytes& b) { put16(b, 26, 9001); b.resize(kDataLen + 9001); }, 0},
        {"DISCONNECT with a trailing byte", "R-WIRE-6", E::oversized,
         [](Bytes& b) { b.push_back(0); }, 7},
        {"PROBE with dst_conn 0", "R-WIRE-5", E::inconsistent, [](Bytes& b) { put32(b, 4, 0); }, 3},
        {"ACK with src_conn 0", "R-WIRE-5", E::inconsistent, [](Bytes& b) { put32(b, 8, 0); }, 1},
        {"WRITE with offset + payload_len > msg_len", "R-WIRE-7", E::inconsistent,
         [](Bytes& b) { put32(b, 40, 4090); }, 0},
        {"WRITE whose destination range wraps 2^64", "R-WIRE-7", E::inconsistent,
         [](Bytes& b) { put32(b, 48, 0xFFFFFFFF); put32(b, 52, 0xFFFFF800); }, 0},
        {"empty payload in a 4096-byte WRITE", "R-WIRE-7", E::inconsistent,
         [](Bytes& b) { put16(b, 26, 0); b.resize(kDataLen); }, 0},
        {"READ_REQ carrying payload", "R-WIRE-7", E::inconsistent,
         [](Bytes& b) { b[24] = uint8_t(Opcode::read_req); }, 0},
        {"ATOMIC_CAS with a 16-byte operand at a misaligned address", "R-WIRE-7/R-ATOMIC-1", E::inconsistent,
         [](Bytes& b) { b[24] = uint8_t(Opcode::atomic_cas); put32(b, 36, 8); put32(b, 52, 0x1003); },
         0},
        {"ATOMIC_RESP with a 16-byte payload", "R-WIRE-7", E::inconsistent,
         [](Bytes& b) { b[24] = uint8_t(Opcode::atomic_resp); put32(b, 36, 8); }, 0},
        {"DATA psn 100 below its path_floor 200", "R-WIRE-7/R-PATH-5", E::inconsistent,
         [](Bytes& b) { put32(b, 68, 200); }, 0},
        {"ACK ce_count 5 > rx_count 4", "R-WIRE-7/R-ACK-5", E::inconsistent,
         [](Bytes& b) { put16(b, 28, 5); }, 1},
        {"NAK syndrome 0", "R-WIRE-7/R-NAK-2", E::inconsistent, [](Bytes& b) { b[24] = 0; }, 2},
        {"CONNECT_REQ num_paths 0", "R-WIRE-7/R-CONN-3", E::inconsistent,
         [](Bytes& b) { put16(b, 16, 0); }, 5},
        {"CONNECT_REQ max_payload 9001", "R-WIRE-7/R-CONN-3", E::inconsistent,
         [](Bytes& b) { put16(b, 18, 9001); }, 5},
        {"CONNECT_ACK stream_depth 65537", "R-WIRE-7/R-CONN-3", E::inconsistent,
         [](Bytes& b) { put32(b, 32, 65537); }, 6},
        {"CONNECT_ACK csn_window 96 (not a power of two)", "R-WIRE-7/R-CONN-3", E::inconsistent,
         [](Bytes& b) { put32(b, 36, 96); }, 6},
    };
}

}  // namespace

int main() {
    int failures = 0;
    const auto ex = examples();
    fmt::print("mroce wire format v{} (UDP port {}): one packet of each type\n\n", kVersion,
               kDefaultUdpPort);
    for (const Example& e : ex) {
        fmt::print("{} ({} bytes)\n", e.what, e.bytes.size());
        print_hex(e.bytes);
        Packet p;
        const DecodeError err = decode(std::span<const uint8_t>(e.bytes), p);
        if (err != DecodeError::ok) {
            fmt::print("    decode FAILED: {}\n\n", to_string(err));
            ++failures;
            continue;
        }
        print_fields(p);
        fmt::print("\n");
    }

    fmt::print("malformed datagrams: decode error and the rule it enforces\n\n");
    for (const Malformed& m : malformed()) {
        Bytes b = ex.at(m.base).bytes;
        m.mutate(b);
        Packet p;
        const DecodeError err = decode(std::span<const uint8_t>(b), p);
        const bool ok = err == m.expect;
        if (!ok) ++failures;
        fmt::print("  {:<13} {:<20} {}{}\n", to_string(err), m.rule, m.what,
                   ok ? "" : fmt::format("  (UNEXPECTED: wanted {})", to_string(m.expect)));
    }
    fmt::print("\n{}\n", failures == 0 ? "all packets decoded as expected"
                                       : fmt::format("{} unexpected results", failures));
    return failures == 0 ? 0 : 1;
}
