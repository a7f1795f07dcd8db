// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// mroce wire format v1 (doc/spec.md, section "Wire format").
// Every multi-byte field is big-endian (network byte order) on the wire.
// The codec never allocates and never reads or writes outside the span it is
// given; decode() validates lengths and field consistency before returning.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace mroce::wire {

inline constexpr uint8_t kVersion = 1;
inline constexpr uint16_t kDefaultUdpPort = 4793;   // R-WIRE-2
inline constexpr size_t kCommonLen = 16;
inline constexpr size_t kDataLen = 72;              // common + data fields
inline constexpr size_t kAckLen = 72;               // common + ack fields
inline constexpr size_t kNakLen = 32;
inline constexpr size_t kProbeLen = 24;
inline constexpr size_t kConnectLen = 40;
inline constexpr size_t kDisconnectLen = 20;
inline constexpr size_t kMaxHeaderLen = 72;
inline constexpr size_t kMaxPayload = 9000;         // R-WIRE-6: largest payload_len accepted
inline constexpr size_t kSackBits = 256;            // R-SACK-1
inline constexpr size_t kAtomicReqPayload = 16;     // R-ATOMIC-1
inline constexpr size_t kAtomicRespPayload = 8;

enum class PacketType : uint8_t {
    data = 1,
    ack = 2,
    nak = 3,
    probe = 4,
    probe_reply = 5,
    connect_req = 6,
    connect_ack = 7,
    disconnect = 8,
    disconnect_ack = 9,
};

enum class Opcode : uint8_t {
    send = 1,
    send_imm = 2,
    write = 3,
    write_imm = 4,
    read_req = 5,
    read_resp = 6,
    atomic_cas = 7,
    atomic_fadd = 8,
    atomic_resp = 9,
};

// Data packet flags (R-DATA-9).
enum DataFlags : uint8_t {
    kDataRetransmit = 1u << 0,  // this CSN was sent before
    kDataSolicited = 1u << 1,   // solicited event requested (SEND/SEND_IMM)
    kDataAckNow = 1u << 2,      // receiver should ack this path without delay
};

enum AckFlags : uint8_t {
    kAckCe = 1u << 0,  // a data packet on this path carried CE since the previous ack
};

// NAK syndromes (R-NAK-2).
enum class Syndrome : uint8_t {
    rkey_invalid = 1,
    pd_mismatch = 2,
    access_denied = 3,
    out_of_range = 4,
    invalid_stream = 5,
    invalid_request = 6,
    remote_op_error = 7,
    stream_error = 8,
};

struct CommonHeader {
    uint8_t version = kVersion;
    PacketType type = PacketType::data;
    uint16_t flags = 0;     // reserved in v1: zero on send, ignored on receive
    uint32_t dst_conn = 0;  // receiver's connection id (0 only for connect_req)
    uint32_t src_conn = 0;  // sender's connection id
    uint16_t path_id = 0;   // sender's path index the packet concerns
    uint16_t reserved = 0;
};

struct DataHeader {
    uint32_t psn = 0;         // per-path sequence number (R-PATH-1)
    uint32_t csn = 0;         // connection sequence number, kept across retransmits (R-CSN-1)
    Opcode opcode = Opcode::write;
    uint8_t dflags = 0;
    uint16_t payload_len = 0;
    uint32_t stream_id = 0;
    uint32_t msg_seq = 0;     // message sequence within the stream and direction
    uint32_t msg_len = 0;     // whole message length (READ_REQ: bytes to read)
    uint32_t offset = 0;      // byte offset of this payload within the message
    uint32_t rkey = 0;        // WRITE*, READ_REQ, ATOMIC_*
    uint64_t remote_addr = 0; // WRITE*: VA of message byte 0; READ_REQ/ATOMIC: target VA
    uint32_t recv_seq = 0;    // SEND*, WRITE_IMM: index of the posted receive consumed
    uint32_t imm = 0;         // SEND_IMM, WRITE_IMM
    uint32_t ts = 0;          // sender clock, ns mod 2^32, echoed in acks (R-RTT-1)
    uint32_t path_floor = 0;  // every PSN below this on this path is resolved (R-PATH-5)
};

struct AckHeader {
    uint32_t cum_psn = 0;    // next PSN expected on the path: all below it received or resolved
    uint32_t ts_echo = 0;    // ts of the newest data packet that caused this ack
    uint32_t rate_hint = 0;  // receiver fair-share for this sender, kbit/s; 0 = no hint (R-HINT-1)
    uint16_t ce_count = 0;   // CE-marked packets on this path since the previous ack
    uint16_t rx_count = 0;   // data packets received on this path since the previous ack
    uint32_t cum_csn = 0;    // all CSNs below this received on the connection
    uint8_t ack_flags = 0;
    uint8_t reserved8 = 0;
    uint16_t reserved16 = 0;
    uint64_t sack[4] = {};   // bit i of word i/64 (LSB first) = PSN cum_psn + 1 + i received
};

struct NakHeader {
    uint32_t stream_id = 0;
    uint32_t msg_seq = 0;
    Syndrome syndrome = Syndrome::invalid_request;
    Opcode opcode = Opcode::write;  // opcode of the offending packet
    uint16_t reserved = 0;
    uint32_t csn = 0;               // CSN of the offending packet
};

struct ProbeHeader {
    uint32_t probe_seq = 0;
    uint32_t ts = 0;  // probe: sender clock; reply: echo of the probe's ts
};

struct ConnectHeader {
    uint16_t num_paths = 0;     // paths the sender of this packet will use (1..kMaxPaths)
    uint16_t max_payload = 0;   // segment size the sender of this packet will send
    uint32_t initial_csn = 0;   // first CSN the sender of this packet will use
    uint32_t rx_capacity_mbps = 0;  // the sender's inbound capacity, Mbit/s (R-HINT-3)
    uint32_t cookie = 0;        // chosen by initiator; connect_ack echoes it
    uint32_t stream_depth = 0;  // max outstanding messages per stream and direction
    uint32_t csn_window = 0;    // max CSNs in flight toward the sender of this packet
};

struct DisconnectHeader {
    uint32_t reason = 0;
};

enum class DecodeError : uint8_t {
    ok = 0,
    truncated,         // shorter than its type's header, or than header + payload_len
    bad_version,
    bad_type,
    bad_opcode,
    oversized,         // payload_len above kMaxPayload, or bytes past header + payload
    inconsistent,      // fields contradict each other (R-WIRE-7)
};

const char* to_string(DecodeError e) noexcept;
const char* to_string(PacketType t) noexcept;
const char* to_string(Opcode o) noexcept;
const char* to_string(Syndrome s) noexcept;

// A decoded packet. Only the member matching common.type is meaningful.
// payload points into the decoded buffer (data packets only).
struct Packet {
    CommonHeader common;
    union {
        DataHeader data;
        AckHeader ack;
        NakHeader nak;
        ProbeHeader probe;
        ConnectHeader connect;
        DisconnectHeader disconnect;
    };
    std::span<const uint8_t> payload;
    Packet() : data() {}
};

// Decodes one whole datagram (UDP payload). Never reads outside buf.
DecodeError decode(std::span<const uint8_t> buf, Packet& out) noexcept;

// Header length for a type (0 for an unknown type).
size_t header_len(PacketType t) noexcept;

// Encoders write the header only (the payload travels by reference, R-DATA-1)
// and return the bytes written, or 0 if out is too small.
size_t encode_data(std::span<uint8_t> out, const CommonHeader& c, const DataHeader& d) noexcept;
size_t encode_ack(std::span<uint8_t> out, const CommonHeader& c, const AckHeader& a) noexcept;
size_t encode_nak(std::span<uint8_t> out, const CommonHeader& c, const NakHeader& n) noexcept;
size_t encode_probe(std::span<uint8_t> out, const CommonHeader& c, const ProbeHeader& p) noexcept;
size_t encode_connect(std::span<uint8_t> out, const CommonHeader& c, const ConnectHeader& h) noexcept;
size_t encode_disconnect(std::span<uint8_t> out, const CommonHeader& c, const DisconnectHeader& h) noexcept;

// Opcode properties used by both codec and engine.
constexpr bool carries_rkey(Opcode o) noexcept {
    return o == Opcode::write || o == Opcode::write_imm || o == Opcode::read_req ||
           o == Opcode::atomic_cas || o == Opcode::atomic_fadd;
}
constexpr bool consumes_recv(Opcode o) noexcept {
    return o == Opcode::send || o == Opcode::send_imm || o == Opcode::write_imm;
}
constexpr bool has_imm(Opcode o) noexcept {
    return o == Opcode::send_imm || o == Opcode::write_imm;
}
constexpr bool is_atomic_req(Opcode o) noexcept {
    return o == Opcode::atomic_cas || o == Opcode::atomic_fadd;
}
// Request whose arrival is one packet that carries no message bytes placed at the target.
constexpr bool is_single_packet(Opcode o) noexcept {
    return o == Opcode::read_req || is_atomic_req(o) || o == Opcode::atomic_resp;
}

// Serial-number arithmetic (RFC 1982 style) on 32-bit sequence spaces.
constexpr bool seq_lt(uint32_t a, uint32_t b) noexcept { return int32_t(a - b) < 0; }
constexpr bool seq_le(uint32_t a, uint32_t b) noexcept { return int32_t(a - b) <= 0; }

}  // namespace mroce::wire
