// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Wire codec (doc/spec.md "Wire format", rules R-WIRE-*).
#include "mroce/wire.hpp"

#include <cstring>

namespace mroce::wire {
namespace {

using detail::get16;
using detail::get32;
using detail::get64;
using detail::put16;
using detail::put32;
using detail::put64;
using detail::put8;
using detail::put_common;

inline constexpr uint16_t kMaxPaths = 256;

}  // namespace

const char* to_string(DecodeError e) noexcept {
    switch (e) {
    case DecodeError::ok: return "ok";
    case DecodeError::truncated: return "truncated";
    case DecodeError::bad_version: return "bad_version";
    case DecodeError::bad_type: return "bad_type";
    case DecodeError::bad_opcode: return "bad_opcode";
    case DecodeError::oversized: return "oversized";
    case DecodeError::inconsistent: return "inconsistent";
    case DecodeError::split_header: return "split_header";
    }
    return "unknown";
}

const char* to_string(PacketType t) noexcept {
    switch (t) {
    case PacketType::data: return "DATA";
    case PacketType::ack: return "ACK";
    case PacketType::nak: return "NAK";
    case PacketType::probe: return "PROBE";
    case PacketType::probe_reply: return "PROBE_REPLY";
    case PacketType::connect_req: return "CONNECT_REQ";
    case PacketType::connect_ack: return "CONNECT_ACK";
    case PacketType::disconnect: return "DISCONNECT";
    case PacketType::disconnect_ack: return "DISCONNECT_ACK";
    }
    return "UNKNOWN";
}

const char* to_string(Opcode o) noexcept {
    switch (o) {
    case Opcode::send: return "SEND";
    case Opcode::send_imm: return "SEND_IMM";
    case Opcode::write: return "WRITE";
    case Opcode::write_imm: return "WRITE_IMM";
    case Opcode::read_req: return "READ_REQ";
    case Opcode::read_resp: return "READ_RESP";
    case Opcode::atomic_cas: return "ATOMIC_CAS";
    case Opcode::atomic_fadd: return "ATOMIC_FADD";
    case Opcode::atomic_resp: return "ATOMIC_RESP";
    case Opcode::write_pack: return "WRITE_PACK";
    }
    return "UNKNOWN";
}

const char* to_string(Syndrome s) noexcept {
    switch (s) {
    case Syndrome::rkey_invalid: return "rkey_invalid";
    case Syndrome::pd_mismatch: return "pd_mismatch";
    case Syndrome::access_denied: return "access_denied";
    case Syndrome::out_of_range: return "out_of_range";
    case Syndrome::invalid_stream: return "invalid_stream";
    case Syndrome::invalid_request: return "invalid_request";
    case Syndrome::remote_op_error: return "remote_op_error";
    case Syndrome::stream_error: return "stream_error";
    case Syndrome::rnr: return "rnr";
    }
    return "unknown";
}

size_t header_len(PacketType t) noexcept {
    switch (t) {
    case PacketType::data: return kDataLen;
    case PacketType::ack: return kAckLen;
    case PacketType::nak: return kNakLen;
    case PacketType::probe:
    case PacketType::probe_reply: return kProbeLen;
    case PacketType::connect_req:
    case PacketType::connect_ack: return kConnectLen;
    case PacketType::disconnect:
    case PacketType::disconnect_ack: return kDisconnectLen;
    }
    return 0;
}

namespace {

// decode() and decode_split() in one body: Split is a template parameter so
// that the contiguous decoder, the one every datagram of every driver but a
// chained DPDK frame goes through, carries none of the split checks.
template <bool Split>
inline DecodeError decode_impl(std::span<const uint8_t> first, std::span<const uint8_t> second, Packet& out) noexcept {
    const uint8_t* p = first.data();
    const size_t n1 = first.size();
    const size_t n = Split ? n1 + second.size() : n1;   // the datagram's length
    if (n < kCommonLen) return DecodeError::truncated;
    if (Split && n1 < kCommonLen) {
        out.payload = {};
        out.payload_tail = {};
        return DecodeError::split_header;
    }
    if (p[0] != kVersion) return DecodeError::bad_version;
    const uint8_t type = p[1];
    if (type < uint8_t(PacketType::data) || type > uint8_t(PacketType::disconnect_ack))
        return DecodeError::bad_type;
    CommonHeader& c = out.common;
    detail::get_common(p, c);
    out.payload = {};
    out.payload_tail = {};

    // The type is in range (checked above): a table instead of a call per packet.
    static constexpr uint8_t kHeaderLen[] = {0, kDataLen, kAckLen, kNakLen, kProbeLen, kProbeLen,
                                             kConnectLen, kConnectLen, kDisconnectLen, kDisconnectLen};
    static_assert(sizeof kHeaderLen == size_t(PacketType::disconnect_ack) + 1);
    const size_t hl = kHeaderLen[type];
    if (n < hl) return DecodeError::truncated;
    if (Split && n1 < hl) return DecodeError::split_header;   // never read past first
    // R-WIRE-5: every packet but connect_req names the receiver's connection.
    if (c.type != PacketType::connect_req && c.dst_conn == 0) return DecodeError::inconsistent;
    if (c.src_conn == 0) return DecodeError::inconsistent;

    switch (c.type) {
    case PacketType::data: {
        const DecodeError e = detail::decode_data_fields(p, n, out.data, !Split);
        if (e != DecodeError::ok) return e;
        if constexpr (Split) {
            // n == hl + payload_len: the payload is the rest of first, then all of second.
            out.payload = first.subspan(hl);
            out.payload_tail = second;
        } else {
            out.payload = first.subspan(hl, out.data.payload_len);
        }
        if constexpr (Split) {
            // R-PACK-1: the entries across both spans (D5; the contiguous decoder checked them with the header).
            if (out.data.opcode == Opcode::write_pack && !pack_valid(out.payload, out.payload_tail, out.data.msg_len)) {
                out.payload = {};
                out.payload_tail = {};
                return DecodeError::inconsistent;
            }
        }
        return DecodeError::ok;
    }
    case PacketType::ack: {
        if (n > hl) return DecodeError::oversized;
        return detail::decode_ack_fields(p, out.ack);
    }
    case PacketType::nak: {
        if (n > hl) return DecodeError::oversized;
        NakHeader& k = out.nak;
        k = NakHeader{};
        k.stream_id = get32(p + 16);
        k.msg_seq = get32(p + 20);
        if (p[24] < uint8_t(Syndrome::rkey_invalid) || p[24] > uint8_t(Syndrome::rnr))
            return DecodeError::inconsistent;
        k.syndrome = Syndrome(p[24]);
        if (!valid_opcode(p[25])) return DecodeError::bad_opcode;
        k.opcode = Opcode(p[25]);
        k.reserved = get16(p + 26);
        k.csn = get32(p + 28);
        return DecodeError::ok;
    }
    case PacketType::probe:
    case PacketType::probe_reply: {
        if (n > hl) return DecodeError::oversized;
        out.probe = ProbeHeader{};
        out.probe.probe_seq = get32(p + 16);
        out.probe.ts = get32(p + 20);
        return DecodeError::ok;
    }
    case PacketType::connect_req:
    case PacketType::connect_ack: {
        // R-PLANE-1: bytes past the header are a plane block of 4 + 8k bytes,
        // at most kMaxPlanes planes; more bytes than the largest block are
        // oversized (R-WIRE-6), a block that is not one is inconsistent (below).
        if (n > hl + kMaxPlaneBlock) return DecodeError::oversized;
        if (Split && n1 < n) return DecodeError::split_header;  // the block is header, never split
        ConnectHeader& h = out.connect;
        h = ConnectHeader{};
        h.num_paths = get16(p + 16);
        h.max_payload = get16(p + 18);
        h.initial_csn = get32(p + 20);
        h.rx_capacity_mbps = get32(p + 24);
        h.cookie = get32(p + 28);
        h.stream_depth = get32(p + 32);
        h.csn_window = get32(p + 36);
        h.rate_hint = get32(p + 40);
        // R-CONN-3
        if (h.num_paths == 0 || h.num_paths > kMaxPaths) return DecodeError::inconsistent;
        if (h.max_payload == 0 || h.max_payload > kMaxPayload) return DecodeError::inconsistent;
        if (h.stream_depth == 0 || h.stream_depth > (1u << 16)) return DecodeError::inconsistent;
        if (h.csn_window < 64 || h.csn_window > (1u << 20) || (h.csn_window & (h.csn_window - 1)))
            return DecodeError::inconsistent;
        if (c.type == PacketType::connect_ack && c.dst_conn == 0) return DecodeError::inconsistent;
        if (n > hl) {
            // R-PLANE-1: num_planes in 1..8 and exactly the block's length; every
            // plane a nonzero address and port, no address twice.
            const size_t k = parse_plane_block(first.subspan(hl, n - hl), nullptr);
            if (k == 0) return DecodeError::inconsistent;
            h.num_planes = uint8_t(k);
            out.payload = first.subspan(hl, n - hl);
        }
        return DecodeError::ok;
    }
    case PacketType::disconnect:
    case PacketType::disconnect_ack: {
        if (n > hl) return DecodeError::oversized;
        out.disconnect = DisconnectHeader{};
        out.disconnect.reason = get32(p + 16);
        return DecodeError::ok;
    }
    }
    return DecodeError::bad_type;
}

}  // namespace

DecodeError decode(std::span<const uint8_t> buf, Packet& out) noexcept { return decode_impl<false>(buf, {}, out); }

DecodeError decode_split(std::span<const uint8_t> first, std::span<const uint8_t> second, Packet& out) noexcept {
    return decode_impl<true>(first, second, out);
}

size_t encode_ack(std::span<uint8_t> out, const CommonHeader& c, const AckHeader& a) noexcept {
    if (out.size() < kAckLen) return 0;
    detail::encode_ack_fields(out.data(), c, a);
    return kAckLen;
}

size_t encode_nak(std::span<uint8_t> out, const CommonHeader& c, const NakHeader& k) noexcept {
    if (out.size() < kNakLen) return 0;
    uint8_t* p = out.data();
    CommonHeader cc = c;
    cc.type = PacketType::nak;
    put_common(p, cc);
    put32(p + 16, k.stream_id);
    put32(p + 20, k.msg_seq);
    put8(p + 24, uint8_t(k.syndrome));
    put8(p + 25, uint8_t(k.opcode));
    put16(p + 26, 0);
    put32(p + 28, k.csn);
    return kNakLen;
}

size_t encode_probe(std::span<uint8_t> out, const CommonHeader& c, const ProbeHeader& h) noexcept {
    if (out.size() < kProbeLen) return 0;
    if (c.type != PacketType::probe && c.type != PacketType::probe_reply) return 0;
    uint8_t* p = out.data();
    put_common(p, c);
    put32(p + 16, h.probe_seq);
    put32(p + 20, h.ts);
    return kProbeLen;
}

size_t encode_connect(std::span<uint8_t> out, const CommonHeader& c, const ConnectHeader& h) noexcept {
    if (out.size() < kConnectLen) return 0;
    if (c.type != PacketType::connect_req && c.type != PacketType::connect_ack) return 0;
    uint8_t* p = out.data();
    put_common(p, c);
    put16(p + 2, uint16_t(c.flags & kConnAcceptsPack));  // R-PACK-2; other bits reserved (R-WIRE-8)
    put16(p + 16, h.num_paths);
    put16(p + 18, h.max_payload);
    put32(p + 20, h.initial_csn);
    put32(p + 24, h.rx_capacity_mbps);
    put32(p + 28, h.cookie);
    put32(p + 32, h.stream_depth);
    put32(p + 36, h.csn_window);
    put32(p + 40, h.rate_hint);
    return kConnectLen;
}

size_t encode_plane_block(std::span<uint8_t> out, const PlaneAddr* planes, size_t n) noexcept {
    const size_t len = kPlaneBlockHead + n * kPlaneEntryLen;
    if (n == 0 || n > kMaxPlanes || out.size() < len) return 0;
    uint8_t* p = out.data();
    put8(p, uint8_t(n));
    put8(p + 1, 0);
    put16(p + 2, 0);
    for (size_t i = 0; i < n; ++i) {
        uint8_t* e = p + kPlaneBlockHead + i * kPlaneEntryLen;
        put32(e, planes[i].ipv4);
        put16(e + 4, planes[i].port);
        put16(e + 6, 0);
    }
    return len;
}

bool PackReader::next(PackEntry& e) noexcept {
    if (left_ == 0 || !ok_) return false;
    const size_t total = a_.size() + b_.size();
    // The entry's head, possibly across the two spans: copied out byte-exact.
    if (total - pos_ < kPackEntryHead) return ok_ = false;
    uint8_t copy[kPackEntryHead];
    const uint8_t* h = a_.data() + pos_;
    if (pos_ + kPackEntryHead > a_.size()) [[unlikely]] {  // (across the spans, or in the second)
        for (size_t i = 0; i < kPackEntryHead; ++i) {
            const size_t at = pos_ + i;
            copy[i] = at < a_.size() ? a_[at] : b_[at - a_.size()];
        }
        h = copy;
    }
    e.rkey = get32(h);
    e.length = get32(h + 4);
    e.remote_addr = get64(h + 8);
    pos_ += kPackEntryHead;
    if (e.length > total - pos_) return ok_ = false;          // runs past payload_len
    if (e.remote_addr + e.length < e.remote_addr) return ok_ = false;  // wraps (as R-WIRE-7 for WRITE)
    e.at = uint32_t(pos_);
    pos_ += e.length;
    --left_;
    return true;
}

bool pack_valid(std::span<const uint8_t> a, std::span<const uint8_t> b, uint32_t count) noexcept {
    if (count < 2 || count > kMaxPackEntries) return false;
    PackReader r(a, b, count);
    PackEntry e;
    while (r.next(e)) {
    }
    return r.ok() && r.done();
}

PlaneAddr plane_addr(const Packet& p, size_t i) noexcept {
    const size_t off = kPlaneBlockHead + i * kPlaneEntryLen;
    if (i >= p.connect.num_planes || p.payload.size() < off + kPlaneEntryLen) return {};
    return PlaneAddr{get32(p.payload.data() + off), get16(p.payload.data() + off + 4)};
}

size_t encode_disconnect(std::span<uint8_t> out, const CommonHeader& c, const DisconnectHeader& h) noexcept {
    if (out.size() < kDisconnectLen) return 0;
    if (c.type != PacketType::disconnect && c.type != PacketType::disconnect_ack) return 0;
    uint8_t* p = out.data();
    put_common(p, c);
    put32(p + 16, h.reason);
    return kDisconnectLen;
}

}  // namespace mroce::wire
