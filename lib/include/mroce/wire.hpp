// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// mroce wire format v1 (doc/spec.md, section "Wire format").
// Every multi-byte field is big-endian (network byte order) on the wire.
// The codec never allocates and never reads or writes outside the span it is
// given; decode() validates lengths and field consistency before returning.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace mroce::wire {

inline constexpr uint8_t kVersion = 1;
inline constexpr uint16_t kDefaultUdpPort = 4793;   // R-WIRE-2
inline constexpr size_t kCommonLen = 16;
inline constexpr size_t kDataLen = 72;              // common + data fields
inline constexpr size_t kAckLen = 72;               // common + ack fields
inline constexpr size_t kNakLen = 32;
inline constexpr size_t kProbeLen = 24;
inline constexpr size_t kConnectLen = 44;
inline constexpr size_t kDisconnectLen = 20;
inline constexpr size_t kMaxHeaderLen = 72;
inline constexpr size_t kMaxPayload = 9000;         // R-WIRE-6: largest payload_len accepted
inline constexpr size_t kSackBits = 256;            // R-SACK-1
inline constexpr size_t kAtomicReqPayload = 16;     // R-ATOMIC-1
inline constexpr size_t kAtomicRespPayload = 8;
// R-PLANE-1: a CONNECT_* may carry a plane block after its 44-byte header:
// num_planes (1 byte), 3 reserved bytes, then per plane an IPv4 address (4)
// and the UDP port its well-known socket listens on (2), 2 reserved bytes.
inline constexpr size_t kMaxPlanes = 8;
inline constexpr size_t kPlaneBlockHead = 4;
inline constexpr size_t kPlaneEntryLen = 8;
inline constexpr size_t kMaxPlaneBlock = kPlaneBlockHead + kMaxPlanes * kPlaneEntryLen;  // 68

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
    // R-PACK-1: k >= 2 whole WRITEs of one stream, consecutive msg_seq from the
    // header's, in one DATA packet; only toward a peer that accepts them (R-PACK-2).
    write_pack = 10,
};

// Data packet flags (R-DATA-9).
enum DataFlags : uint8_t {
    kDataRetransmit = 1u << 0,  // this CSN was sent before
    kDataSolicited = 1u << 1,   // solicited event requested (SEND/SEND_IMM)
    kDataAckNow = 1u << 2,      // receiver should ack this path without delay
    kDataVoid = 1u << 3,        // the requester gave this CSN up: consume it, place nothing (R-NAK-10)
};

// Common header flags of CONNECT_REQ and CONNECT_ACK (R-PACK-2); every
// other type sends 0 (R-WIRE-8).
enum ConnectFlags : uint16_t {
    kConnAcceptsPack = 1u << 0,  // "send me WRITE_PACK packets" (R-PACK-2)
};

// R-PACK-1: a WRITE_PACK payload is msg_len entries, each a 16-byte head
// (rkey, length, remote_addr) followed by the message's length bytes.
inline constexpr size_t kPackEntryHead = 16;
inline constexpr uint32_t kMaxPackEntries = 32;

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
    rnr = 9,             // receiver not ready: retry later, not an error (R-NAK-10)
};

struct CommonHeader {
    uint8_t version = kVersion;
    PacketType type = PacketType::data;
    uint16_t flags = 0;     // CONNECT_*: ConnectFlags (R-PACK-2); otherwise reserved (R-WIRE-8)
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
// Does DataHeader lay its fields out as the wire does (minus the common
// header)? Then the decoder swaps whole words (detail::decode_data_fields).
inline constexpr bool kDataHeaderWireLayout =
    sizeof(DataHeader) == 56 && offsetof(DataHeader, csn) == 4 && offsetof(DataHeader, opcode) == 8 &&
    offsetof(DataHeader, dflags) == 9 && offsetof(DataHeader, payload_len) == 10 &&
    offsetof(DataHeader, stream_id) == 12 && offsetof(DataHeader, msg_seq) == 16 &&
    offsetof(DataHeader, msg_len) == 20 && offsetof(DataHeader, offset) == 24 && offsetof(DataHeader, rkey) == 28 &&
    offsetof(DataHeader, remote_addr) == 32 && offsetof(DataHeader, recv_seq) == 40 &&
    offsetof(DataHeader, imm) == 44 && offsetof(DataHeader, ts) == 48 && offsetof(DataHeader, path_floor) == 52;

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
    uint32_t rate_hint = 0;     // connect_ack: fair share for the initiator, kbit/s; 0 = none (R-HINT-8)
    // Planes in the plane block that follows the header (R-PLANE-1); 0: no
    // block (a one-plane device). The block is Packet::payload (plane_addr).
    uint8_t num_planes = 0;
};

// One plane's address as a CONNECT_* announces it (R-PLANE-1): IPv4 in host
// byte order and the plane's well-known UDP port.
struct PlaneAddr {
    uint32_t ipv4 = 0;
    uint16_t port = 0;
    bool operator==(const PlaneAddr&) const = default;
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
    split_header,      // decode_split: the header does not lie entirely in the first span
};

const char* to_string(DecodeError e) noexcept;
const char* to_string(PacketType t) noexcept;
const char* to_string(Opcode o) noexcept;
const char* to_string(Syndrome s) noexcept;

// A decoded packet. Only the member matching common.type is meaningful.
// payload points into the decoded buffer (data packets only); the payload is
// payload followed by payload_tail, which only decode_split makes non-empty
// (then payload is the part in the first span, possibly empty, and
// payload_tail the whole second span).
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
    std::span<const uint8_t> payload_tail;
    Packet() : data() {}
};

// Decodes one whole datagram (UDP payload). Never reads outside buf.
DecodeError decode(std::span<const uint8_t> buf, Packet& out) noexcept;

// Decodes one datagram that arrived in two pieces, first then second (a
// header segment and a payload segment): the same checks as decode() on
// their concatenation, and the header must lie entirely in first
// (split_header otherwise). Never reads outside either span.
DecodeError decode_split(std::span<const uint8_t> first, std::span<const uint8_t> second, Packet& out) noexcept;

// Header length for a type (0 for an unknown type).
size_t header_len(PacketType t) noexcept;

// Encoders write the header only (the payload travels by reference, R-DATA-1)
// and return the bytes written, or 0 if out is too small.
size_t encode_data(std::span<uint8_t> out, const CommonHeader& c, const DataHeader& d) noexcept;  // inline below
size_t encode_ack(std::span<uint8_t> out, const CommonHeader& c, const AckHeader& a) noexcept;
size_t encode_nak(std::span<uint8_t> out, const CommonHeader& c, const NakHeader& n) noexcept;
size_t encode_probe(std::span<uint8_t> out, const CommonHeader& c, const ProbeHeader& p) noexcept;
size_t encode_connect(std::span<uint8_t> out, const CommonHeader& c, const ConnectHeader& h) noexcept;
size_t encode_disconnect(std::span<uint8_t> out, const CommonHeader& c, const DisconnectHeader& h) noexcept;
// The plane block a CONNECT_* carries after its header (R-PLANE-1) for planes
// [0, n): 1 <= n <= kMaxPlanes. Returns its length, or 0 if n is out of range
// or out is too small. Senders put it where the payload goes (TxPacket::payload).
size_t encode_plane_block(std::span<uint8_t> out, const PlaneAddr* planes, size_t n) noexcept;
// Plane i of a decoded CONNECT_*'s block (i < connect.num_planes; decode checked it).
PlaneAddr plane_addr(const Packet& p, size_t i) noexcept;

// Opcode properties used by both codec and engine.
constexpr bool valid_opcode(uint8_t o) noexcept {
    return o >= uint8_t(Opcode::send) && o <= uint8_t(Opcode::write_pack);
}
// One entry of a WRITE_PACK payload (R-PACK-1): the message msg_seq =
// header's msg_seq + index; its bytes are bytes [at, at + length) of the
// payload (payload, then payload_tail).
struct PackEntry {
    uint32_t rkey = 0;
    uint32_t length = 0;
    uint64_t remote_addr = 0;
    uint32_t at = 0;
};

// Walks the entries of a WRITE_PACK payload given as two spans (the second
// empty for a contiguous datagram). next() returns false at the end or at
// a malformed entry (ok() then false); never reads outside the spans.
class PackReader {
public:
    PackReader(std::span<const uint8_t> a, std::span<const uint8_t> b, uint32_t count) noexcept
        : a_(a), b_(b), left_(count) {}
    bool next(PackEntry& e) noexcept;
    // Every entry read, and they filled the payload exactly.
    bool done() const noexcept { return left_ == 0 && pos_ == a_.size() + b_.size(); }
    bool ok() const noexcept { return ok_; }

private:
    std::span<const uint8_t> a_, b_;
    uint32_t left_;
    size_t pos_ = 0;
    bool ok_ = true;
};

// R-PACK-1's checks of a WRITE_PACK payload (the header's checks passed):
// every entry whole within payload_len, no destination range that wraps,
// exactly msg_len entries filling the payload.
bool pack_valid(std::span<const uint8_t> a, std::span<const uint8_t> b, uint32_t count) noexcept;

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

// ---- inline parts of the codec (lib/wire/codec.cpp has the rest) ----

namespace detail {
// Big-endian field access at fixed offsets; callers have checked the length.
// One unaligned load or store plus a byte swap per field (a fixed-size
// memcpy compiles to a single mov).
template <class T>
inline T to_be(T v) noexcept {
    if constexpr (std::endian::native == std::endian::big) return v;
    else if constexpr (sizeof(T) == 2) return T(__builtin_bswap16(v));
    else if constexpr (sizeof(T) == 4) return T(__builtin_bswap32(v));
    else return T(__builtin_bswap64(v));
}
inline void put8(uint8_t* p, uint8_t v) noexcept { p[0] = v; }
inline void put16(uint8_t* p, uint16_t v) noexcept { v = to_be(v); std::memcpy(p, &v, 2); }
inline void put32(uint8_t* p, uint32_t v) noexcept { v = to_be(v); std::memcpy(p, &v, 4); }
inline void put64(uint8_t* p, uint64_t v) noexcept { v = to_be(v); std::memcpy(p, &v, 8); }
inline uint16_t get16(const uint8_t* p) noexcept { uint16_t v; std::memcpy(&v, p, 2); return to_be(v); }
inline uint32_t get32(const uint8_t* p) noexcept { uint32_t v; std::memcpy(&v, p, 4); return to_be(v); }
inline uint64_t get64(const uint8_t* p) noexcept { uint64_t v; std::memcpy(&v, p, 8); return to_be(v); }

inline void put_common(uint8_t* p, const CommonHeader& c) noexcept {
    put8(p + 0, kVersion);
    put8(p + 1, uint8_t(c.type));
    put16(p + 2, 0);
    put32(p + 4, c.dst_conn);
    put32(p + 8, c.src_conn);
    put16(p + 12, c.path_id);
    put16(p + 14, 0);
}

// R-WIRE-7: per-opcode consistency of a data header.
// pay: the payload when it lies whole after the header (a WRITE_PACK's
// entries are checked here, in D5, at no cost to the other opcodes), or null
// for a datagram in two spans (decode_split checks the entries itself).
[[gnu::always_inline]] inline bool data_consistent(const DataHeader& d, const uint8_t* pay) noexcept {
    const uint64_t end = uint64_t(d.offset) + d.payload_len;
    switch (d.opcode) {
    case Opcode::send:
    case Opcode::send_imm:
    case Opcode::write:
    case Opcode::write_imm:
    case Opcode::read_resp:
        if (end > d.msg_len) return false;
        if (d.payload_len == 0 && d.msg_len != 0) return false;  // only a 0-byte message has an empty packet
        if ((d.opcode == Opcode::write || d.opcode == Opcode::write_imm) &&
            d.remote_addr + d.msg_len < d.remote_addr)
            return false;  // destination range wraps the address space
        return true;
    case Opcode::read_req:
        return d.payload_len == 0 && d.offset == 0 && d.remote_addr + d.msg_len >= d.remote_addr;
    case Opcode::atomic_cas:
    case Opcode::atomic_fadd:
        return d.payload_len == kAtomicReqPayload && d.msg_len == 8 && d.offset == 0 &&
               (d.remote_addr & 7) == 0;
    case Opcode::atomic_resp:
        return d.payload_len == kAtomicRespPayload && d.msg_len == 8 && d.offset == 0;
    case Opcode::write_pack:  // R-PACK-1: msg_len is the entry count
        return d.msg_len >= 2 && d.msg_len <= kMaxPackEntries && d.offset == 0 &&
               d.payload_len >= d.msg_len * kPackEntryHead &&
               (!pay || pack_valid({pay, d.payload_len}, {}, d.msg_len));
    }
    return false;  // not an opcode (R-WIRE-4)
}

// Two big-endian 32-bit fields side by side, as one little-endian load:
// both swapped in place by one byte swap and one rotate.
inline uint64_t swap_be32_pair(uint64_t w) noexcept {
    w = __builtin_bswap64(w);
    return (w >> 32) | (w << 32);
}

// The data fields of a DATA header (bytes kCommonLen..kDataLen) and their
// checks, for decode(), decode_split() and decode_data(); p holds at least
// kDataLen bytes and n is the datagram's whole length; contiguous: the
// payload follows the header in p (every decoder but decode_split).
[[gnu::always_inline]] inline DecodeError decode_data_fields(const uint8_t* p, size_t n, DataHeader& d,
                                                             bool contiguous = true) noexcept {
    if constexpr (std::endian::native == std::endian::little && kDataHeaderWireLayout) {
        // DataHeader lays its fields out as the wire does (kDataHeaderWireLayout),
        // so the header is seven 8-byte words, each swapped in a register and
        // stored where it belongs (one word at a time: an array staged the
        // whole header through the stack).
        unsigned char* out = reinterpret_cast<unsigned char*>(&d);
        auto word = [&](size_t i, bool pair) {
            uint64_t w;
            std::memcpy(&w, p + kCommonLen + 8 * i, 8);
            w = pair ? swap_be32_pair(w) : __builtin_bswap64(w);
            std::memcpy(out + 8 * i, &w, 8);
        };
        word(0, true);   // psn, csn
        word(2, true);   // msg_seq, msg_len
        word(3, true);   // offset, rkey
        word(4, false);  // remote_addr
        word(5, true);   // recv_seq, imm
        word(6, true);   // ts, path_floor
        d.opcode = Opcode(p[24]);
        d.dflags = p[25];
        d.payload_len = get16(p + 26);  // word 1: opcode and dflags are bytes
        d.stream_id = get32(p + 28);
    } else {
        d.psn = get32(p + 16);
        d.csn = get32(p + 20);
        d.opcode = Opcode(p[24]);
        d.dflags = p[25];
        d.payload_len = get16(p + 26);
        d.stream_id = get32(p + 28);
        d.msg_seq = get32(p + 32);
        d.msg_len = get32(p + 36);
        d.offset = get32(p + 40);
        d.rkey = get32(p + 44);
        d.remote_addr = get64(p + 48);
        d.recv_seq = get32(p + 56);
        d.imm = get32(p + 60);
        d.ts = get32(p + 64);
        d.path_floor = get32(p + 68);
    }
    if (!valid_opcode(p[24])) return DecodeError::bad_opcode;
    if (d.payload_len > kMaxPayload) return DecodeError::oversized;
    // One test on the common path: the datagram is exactly header + payload.
    if (n != kDataLen + d.payload_len) [[unlikely]]
        return n < kDataLen + d.payload_len ? DecodeError::truncated : DecodeError::oversized;
    if (!data_consistent(d, contiguous ? p + kDataLen : nullptr)) return DecodeError::inconsistent;
    // R-PATH-5: the floor never passes the packet's own PSN.
    if (seq_lt(d.psn, d.path_floor)) return DecodeError::inconsistent;
    return DecodeError::ok;
}

inline void get_common(const uint8_t* p, CommonHeader& c) noexcept {
    c.version = p[0];
    c.type = PacketType(p[1]);
    c.flags = get16(p + 2);
    c.dst_conn = get32(p + 4);
    c.src_conn = get32(p + 8);
    c.path_id = get16(p + 12);
    c.reserved = get16(p + 14);
}

// The fields of an ACK header (bytes kCommonLen..kAckLen) and their check,
// for decode(), decode_split() and the engine's ACK receive; p holds at
// least kAckLen bytes.
[[gnu::always_inline]] inline DecodeError decode_ack_fields(const uint8_t* p, AckHeader& a) noexcept {
    a = AckHeader{};
    a.cum_psn = get32(p + 16);
    a.ts_echo = get32(p + 20);
    a.rate_hint = get32(p + 24);
    a.ce_count = get16(p + 28);
    a.rx_count = get16(p + 30);
    a.cum_csn = get32(p + 32);
    a.ack_flags = p[36];
    a.reserved8 = p[37];
    a.reserved16 = get16(p + 38);
    for (int i = 0; i < 4; ++i) a.sack[i] = get64(p + 40 + 8 * i);
    if (a.ce_count > a.rx_count) return DecodeError::inconsistent;
    return DecodeError::ok;
}

// An ACK's header bytes (kAckLen of them at p), for encode_ack() and the
// engine's ACK transmit (inline there: once per ACK, issue 24).
[[gnu::always_inline]] inline void encode_ack_fields(uint8_t* p, const CommonHeader& c, const AckHeader& a) noexcept {
    CommonHeader cc = c;
    cc.type = PacketType::ack;
    put_common(p, cc);
    put32(p + 16, a.cum_psn);
    put32(p + 20, a.ts_echo);
    put32(p + 24, a.rate_hint);
    put16(p + 28, a.ce_count);
    put16(p + 30, a.rx_count);
    put32(p + 32, a.cum_csn);
    put8(p + 36, a.ack_flags);
    put8(p + 37, 0);
    put16(p + 38, 0);
    for (int i = 0; i < 4; ++i) put64(p + 40 + 8 * i, a.sack[i]);
}

}  // namespace detail

// R-PLANE-1: the plane block of a CONNECT_* (the bytes after its header):
// num_planes in 1..kMaxPlanes and exactly 4 + 8 * num_planes bytes, every
// plane a nonzero address and port, no address twice. Returns num_planes and
// fills out[0, num_planes) (out may be null), or 0 if block is not one.
// Inline so that drivers, which do not link the codec, read it the same way.
inline size_t parse_plane_block(std::span<const uint8_t> block, PlaneAddr* out) noexcept {
    using detail::get16;
    using detail::get32;
    if (block.size() < kPlaneBlockHead) return 0;
    const uint8_t* b = block.data();
    const size_t k = b[0];
    if (k == 0 || k > kMaxPlanes || block.size() != kPlaneBlockHead + k * kPlaneEntryLen) return 0;
    for (size_t i = 0; i < k; ++i) {
        const uint8_t* e = b + kPlaneBlockHead + i * kPlaneEntryLen;
        if (get32(e) == 0 || get16(e + 4) == 0) return 0;
        for (size_t j = 0; j < i; ++j)
            if (get32(b + kPlaneBlockHead + j * kPlaneEntryLen) == get32(e)) return 0;
        if (out) out[i] = PlaneAddr{get32(e), get16(e + 4)};
    }
    return k;
}

// decode() for the datagram every data path receives most: a whole DATA
// packet in one buffer is decoded inline, with the same checks and result
// as decode(); anything else is handed to decode().
[[gnu::always_inline]] inline DecodeError decode_data(std::span<const uint8_t> buf, Packet& out) noexcept {
    const uint8_t* p = buf.data();
    const size_t n = buf.size();
    if (n < kDataLen || p[0] != kVersion || p[1] != uint8_t(PacketType::data)) [[unlikely]]
        return decode(buf, out);
    detail::get_common(p, out.common);
    out.payload = {};
    out.payload_tail = {};
    // R-WIRE-5
    if (out.common.dst_conn == 0 || out.common.src_conn == 0) return DecodeError::inconsistent;
    const DecodeError e = detail::decode_data_fields(p, n, out.data);
    if (e == DecodeError::ok) [[likely]] out.payload = buf.subspan(kDataLen, out.data.payload_len);
    return e;
}

// Inline because it runs once per data packet sent: the engine's header
// fields go straight to the wire without an intermediate copy or a call
// (doc/performance.md section 1).
inline size_t encode_data(std::span<uint8_t> out, const CommonHeader& c, const DataHeader& d) noexcept {
    using namespace detail;
    if (out.size() < kDataLen) return 0;
    uint8_t* p = out.data();
    CommonHeader cc = c;
    cc.type = PacketType::data;
    put_common(p, cc);
    put32(p + 16, d.psn);
    put32(p + 20, d.csn);
    put8(p + 24, uint8_t(d.opcode));
    put8(p + 25, d.dflags);
    put16(p + 26, d.payload_len);
    put32(p + 28, d.stream_id);
    put32(p + 32, d.msg_seq);
    put32(p + 36, d.msg_len);
    put32(p + 40, d.offset);
    put32(p + 44, d.rkey);
    put64(p + 48, d.remote_addr);
    put32(p + 56, d.recv_seq);
    put32(p + 60, d.imm);
    put32(p + 64, d.ts);
    put32(p + 68, d.path_floor);
    return kDataLen;
}

}  // namespace mroce::wire
