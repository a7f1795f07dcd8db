// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Unit tests of the wire codec (lib/wire/codec.cpp): round trip of every field
// of every packet type, and every decode error (R-WIRE-*).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "mroce/wire.hpp"

using namespace mroce::wire;

namespace {

using Bytes = std::vector<uint8_t>;

constexpr std::array<PacketType, 9> kAllTypes = {
    PacketType::data,        PacketType::ack,         PacketType::nak,
    PacketType::probe,       PacketType::probe_reply, PacketType::connect_req,
    PacketType::connect_ack, PacketType::disconnect,  PacketType::disconnect_ack,
};

constexpr std::array<Opcode, 9> kAllOpcodes = {
    Opcode::send,      Opcode::send_imm,   Opcode::write,
    Opcode::write_imm, Opcode::read_req,   Opcode::read_resp,
    Opcode::atomic_cas, Opcode::atomic_fadd, Opcode::atomic_resp,
};

CommonHeader common(PacketType t, uint16_t path = 0x0102) {
    CommonHeader c;
    c.type = t;
    c.dst_conn = t == PacketType::connect_req ? 0 : 0xA1B2C3D4;
    c.src_conn = 0x11223344;
    c.path_id = path;
    return c;
}

Bytes pattern(size_t n, uint8_t start = 1) {
    Bytes b(n);
    for (size_t i = 0; i < n; ++i) b[i] = uint8_t(start + 7 * i);
    return b;
}

// A valid data packet (header + payload) for an opcode, every field non-zero where allowed.
struct DataPkt {
    CommonHeader c;
    DataHeader d;
    Bytes payload;
};

DataPkt valid_data(Opcode op) {
    DataPkt p;
    p.c = common(PacketType::data);
    DataHeader& d = p.d;
    d.psn = 0x01020304;
    d.csn = 0x05060708;
    d.opcode = op;
    d.dflags = kDataRetransmit | kDataAckNow;
    d.stream_id = 0x0A0B0C0D;
    d.msg_seq = 0x10203040;
    d.rkey = 0x55667788;
    d.remote_addr = 0x0000123456789AB0ull;
    d.recv_seq = 0x01F2E3D4;
    d.imm = 0xCAFEBABE;
    d.ts = 0x99AABBCC;
    d.path_floor = 0x01020300;
    switch (op) {
    case Opcode::read_req:
        d.msg_len = 1u << 20;
        break;
    case Opcode::atomic_cas:
    case Opcode::atomic_fadd:
        d.msg_len = 8;
        p.payload = pattern(kAtomicReqPayload);
        break;
    case Opcode::atomic_resp:
        d.msg_len = 8;
        p.payload = pattern(kAtomicRespPayload);
        break;
    default:
        d.msg_len = 100000;
        d.offset = 4096;
        p.payload = pattern(1000);
        break;
    }
    d.payload_len = uint16_t(p.payload.size());
    return p;
}

Bytes encode(const DataPkt& p) {
    Bytes b(kDataLen);
    REQUIRE(encode_data(b, p.c, p.d) == kDataLen);
    b.insert(b.end(), p.payload.begin(), p.payload.end());
    return b;
}

Bytes encode(const CommonHeader& c, const AckHeader& a) {
    Bytes b(kAckLen);
    REQUIRE(encode_ack(b, c, a) == kAckLen);
    return b;
}
Bytes encode(const CommonHeader& c, const NakHeader& k) {
    Bytes b(kNakLen);
    REQUIRE(encode_nak(b, c, k) == kNakLen);
    return b;
}
Bytes encode(const CommonHeader& c, const ProbeHeader& h) {
    Bytes b(kProbeLen);
    REQUIRE(encode_probe(b, c, h) == kProbeLen);
    return b;
}
Bytes encode(const CommonHeader& c, const ConnectHeader& h) {
    Bytes b(kConnectLen);
    REQUIRE(encode_connect(b, c, h) == kConnectLen);
    return b;
}
Bytes encode(const CommonHeader& c, const DisconnectHeader& h) {
    Bytes b(kDisconnectLen);
    REQUIRE(encode_disconnect(b, c, h) == kDisconnectLen);
    return b;
}

AckHeader valid_ack() {
    AckHeader a;
    a.cum_psn = 0x10111213;
    a.ts_echo = 0x14151617;
    a.rate_hint = 0x18191A1B;
    a.ce_count = 0x0102;
    a.rx_count = 0x0304;
    a.cum_csn = 0x1C1D1E1F;
    a.ack_flags = kAckCe;
    a.sack[0] = 0x0102030405060708ull;
    a.sack[1] = 0x1112131415161718ull;
    a.sack[2] = 0x2122232425262728ull;
    a.sack[3] = 0x8182838485868788ull;
    return a;
}

NakHeader valid_nak() {
    NakHeader k;
    k.stream_id = 0x31323334;
    k.msg_seq = 0x35363738;
    k.syndrome = Syndrome::out_of_range;
    k.opcode = Opcode::write_imm;
    k.csn = 0x393A3B3C;
    return k;
}

ConnectHeader valid_connect() {
    ConnectHeader h;
    h.num_paths = 16;
    h.max_payload = 8192;
    h.initial_csn = 0xF0E0D0C0;
    h.rx_capacity_mbps = 400000;
    h.cookie = 0x600DC0DE;
    h.stream_depth = 1024;
    h.csn_window = 1u << 16;
    h.rate_hint = 0x0ABBCCDD;
    return h;
}

// One valid encoded packet of a type (data: a WRITE).
Bytes valid_packet(PacketType t) {
    const CommonHeader c = common(t);
    switch (t) {
    case PacketType::data: return encode(valid_data(Opcode::write));
    case PacketType::ack: return encode(c, valid_ack());
    case PacketType::nak: return encode(c, valid_nak());
    case PacketType::probe:
    case PacketType::probe_reply: return encode(c, ProbeHeader{0x41424344, 0x45464748});
    case PacketType::connect_req:
    case PacketType::connect_ack: return encode(c, valid_connect());
    case PacketType::disconnect:
    case PacketType::disconnect_ack: return encode(c, DisconnectHeader{0x51525354});
    }
    return {};
}

DecodeError dec(const Bytes& b, Packet& p) { return decode(std::span<const uint8_t>(b), p); }
DecodeError dec(const Bytes& b) {
    Packet p;
    return dec(b, p);
}

void put16(Bytes& b, size_t off, uint16_t v) {
    b[off] = uint8_t(v >> 8);
    b[off + 1] = uint8_t(v);
}
void put32(Bytes& b, size_t off, uint32_t v) {
    for (int i = 0; i < 4; ++i) b[off + i] = uint8_t(v >> (24 - 8 * i));
}

DecodeError dec_data(const DataPkt& p) { return dec(encode(p)); }

void check_common(const CommonHeader& got, const CommonHeader& want) {
    CHECK(got.version == kVersion);
    CHECK(got.type == want.type);
    CHECK(got.flags == 0);
    CHECK(got.dst_conn == want.dst_conn);
    CHECK(got.src_conn == want.src_conn);
    CHECK(got.path_id == want.path_id);
    CHECK(got.reserved == 0);
}

}  // namespace

TEST_CASE("header lengths", "[wire]") {
    CHECK(header_len(PacketType::data) == 72);
    CHECK(header_len(PacketType::ack) == 72);
    CHECK(header_len(PacketType::nak) == 32);
    CHECK(header_len(PacketType::probe) == 24);
    CHECK(header_len(PacketType::probe_reply) == 24);
    CHECK(header_len(PacketType::connect_req) == 44);
    CHECK(header_len(PacketType::connect_ack) == 44);
    CHECK(header_len(PacketType::disconnect) == 20);
    CHECK(header_len(PacketType::disconnect_ack) == 20);
    CHECK(header_len(PacketType(0)) == 0);
    CHECK(header_len(PacketType(10)) == 0);
    CHECK(header_len(PacketType(255)) == 0);
    for (PacketType t : kAllTypes) CHECK(header_len(t) <= kMaxHeaderLen);
}

TEST_CASE("to_string names", "[wire]") {
    CHECK(std::string(to_string(DecodeError::ok)) == "ok");
    CHECK(std::string(to_string(DecodeError::truncated)) == "truncated");
    CHECK(std::string(to_string(DecodeError::bad_version)) == "bad_version");
    CHECK(std::string(to_string(DecodeError::bad_type)) == "bad_type");
    CHECK(std::string(to_string(DecodeError::bad_opcode)) == "bad_opcode");
    CHECK(std::string(to_string(DecodeError::oversized)) == "oversized");
    CHECK(std::string(to_string(DecodeError::inconsistent)) == "inconsistent");
    CHECK(std::string(to_string(PacketType::data)) == "DATA");
    CHECK(std::string(to_string(PacketType::disconnect_ack)) == "DISCONNECT_ACK");
    CHECK(std::string(to_string(PacketType(0))) == "UNKNOWN");
    CHECK(std::string(to_string(Opcode::atomic_fadd)) == "ATOMIC_FADD");
    CHECK(std::string(to_string(Opcode(0))) == "UNKNOWN");
    CHECK(std::string(to_string(Syndrome::stream_error)) == "stream_error");
    CHECK(std::string(to_string(Syndrome(0))) == "unknown");
    for (PacketType t : kAllTypes) CHECK(std::string(to_string(t)) != "UNKNOWN");
    for (Opcode o : kAllOpcodes) CHECK(std::string(to_string(o)) != "UNKNOWN");
    for (int s = 1; s <= 9; ++s) CHECK(std::string(to_string(Syndrome(s))) != "unknown");
}

TEST_CASE("data round trip, every opcode, every field", "[wire][data]") {
    for (Opcode op : kAllOpcodes) {
        CAPTURE(to_string(op));
        const DataPkt p = valid_data(op);
        const Bytes b = encode(p);
        Packet out;
        REQUIRE(dec(b, out) == DecodeError::ok);
        check_common(out.common, p.c);
        const DataHeader& d = out.data;
        CHECK(d.psn == p.d.psn);
        CHECK(d.csn == p.d.csn);
        CHECK(d.opcode == op);
        CHECK(d.dflags == p.d.dflags);
        CHECK(d.payload_len == p.d.payload_len);
        CHECK(d.stream_id == p.d.stream_id);
        CHECK(d.msg_seq == p.d.msg_seq);
        CHECK(d.msg_len == p.d.msg_len);
        CHECK(d.offset == p.d.offset);
        CHECK(d.rkey == p.d.rkey);
        CHECK(d.remote_addr == p.d.remote_addr);
        CHECK(d.recv_seq == p.d.recv_seq);
        CHECK(d.imm == p.d.imm);
        CHECK(d.ts == p.d.ts);
        CHECK(d.path_floor == p.d.path_floor);
        // The payload is a view into the decoded buffer, right after the header.
        REQUIRE(out.payload.size() == p.payload.size());
        if (!p.payload.empty()) {
            CHECK(out.payload.data() == b.data() + kDataLen);
            CHECK(std::memcmp(out.payload.data(), p.payload.data(), p.payload.size()) == 0);
        }
        // Re-encoding the decoded header gives the same bytes.
        Bytes again(kDataLen);
        REQUIRE(encode_data(again, out.common, out.data) == kDataLen);
        CHECK(std::equal(again.begin(), again.end(), b.begin()));
    }
}

TEST_CASE("data extreme field values round trip", "[wire][data]") {
    DataPkt p = valid_data(Opcode::write);
    p.c.dst_conn = 0xFFFFFFFF;
    p.c.src_conn = 0xFFFFFFFF;
    p.c.path_id = 0xFFFF;
    p.d.psn = 0xFFFFFFFF;
    p.d.path_floor = 0xFFFFFFFF;
    p.d.csn = 0xFFFFFFFF;
    p.d.dflags = 0xFF;
    p.d.stream_id = p.d.msg_seq = p.d.rkey = p.d.recv_seq = p.d.imm = p.d.ts = 0xFFFFFFFF;
    p.d.msg_len = 0xFFFFFFFF;
    p.d.offset = 0xFFFFFFFF - kMaxPayload;
    p.payload = pattern(kMaxPayload);
    p.d.payload_len = uint16_t(kMaxPayload);
    p.d.remote_addr = 0;
    Packet out;
    const Bytes b = encode(p);
    REQUIRE(dec(b, out) == DecodeError::ok);
    check_common(out.common, p.c);
    CHECK(out.data.psn == 0xFFFFFFFF);
    CHECK(out.data.dflags == 0xFF);
    CHECK(out.data.msg_len == 0xFFFFFFFF);
    CHECK(out.data.offset == 0xFFFFFFFF - kMaxPayload);
    CHECK(out.data.payload_len == kMaxPayload);
    CHECK(out.payload.size() == kMaxPayload);
    CHECK(out.data.imm == 0xFFFFFFFF);
}

TEST_CASE("data wire layout is big-endian at the documented offsets", "[wire][data]") {
    const DataPkt p = valid_data(Opcode::send_imm);
    const Bytes b = encode(p);
    CHECK(b[0] == 1);
    CHECK(b[1] == 1);
    CHECK(b[2] == 0);
    CHECK(b[3] == 0);
    CHECK(b[4] == 0xA1);
    CHECK(b[7] == 0xD4);
    CHECK(b[8] == 0x11);
    CHECK(b[11] == 0x44);
    CHECK(b[12] == 0x01);
    CHECK(b[13] == 0x02);
    CHECK(b[14] == 0);
    CHECK(b[15] == 0);
    CHECK(b[16] == 0x01);  // psn
    CHECK(b[19] == 0x04);
    CHECK(b[20] == 0x05);  // csn
    CHECK(b[24] == uint8_t(Opcode::send_imm));
    CHECK(b[25] == (kDataRetransmit | kDataAckNow));
    CHECK(b[26] == uint8_t(1000 >> 8));  // payload_len
    CHECK(b[27] == uint8_t(1000 & 0xFF));
    CHECK(b[28] == 0x0A);  // stream_id
    CHECK(b[32] == 0x10);  // msg_seq
    CHECK(b[44] == 0x55);  // rkey
    CHECK(b[48] == 0x00);  // remote_addr (8 bytes)
    CHECK(b[50] == 0x12);
    CHECK(b[55] == 0xB0);
    CHECK(b[56] == 0x01);  // recv_seq
    CHECK(b[60] == 0xCA);  // imm
    CHECK(b[64] == 0x99);  // ts
    CHECK(b[68] == 0x01);  // path_floor
    CHECK(b[71] == 0x00);
}

TEST_CASE("ack round trip", "[wire][ack]") {
    const CommonHeader c = common(PacketType::ack, 7);
    const AckHeader a = valid_ack();
    const Bytes b = encode(c, a);
    Packet out;
    REQUIRE(dec(b, out) == DecodeError::ok);
    check_common(out.common, c);
    CHECK(out.ack.cum_psn == a.cum_psn);
    CHECK(out.ack.ts_echo == a.ts_echo);
    CHECK(out.ack.rate_hint == a.rate_hint);
    CHECK(out.ack.ce_count == a.ce_count);
    CHECK(out.ack.rx_count == a.rx_count);
    CHECK(out.ack.cum_csn == a.cum_csn);
    CHECK(out.ack.ack_flags == a.ack_flags);
    CHECK(out.ack.reserved8 == 0);
    CHECK(out.ack.reserved16 == 0);
    for (int i = 0; i < 4; ++i) CHECK(out.ack.sack[i] == a.sack[i]);
    CHECK(out.payload.empty());
    // SACK words are big-endian, word 0 first.
    CHECK(b[40] == 0x01);
    CHECK(b[47] == 0x08);
    CHECK(b[64] == 0x81);
    CHECK(b[71] == 0x88);
    Bytes again(kAckLen);
    REQUIRE(encode_ack(again, out.common, out.ack) == kAckLen);
    CHECK(again == b);
}

TEST_CASE("nak round trip, every syndrome", "[wire][nak]") {
    const CommonHeader c = common(PacketType::nak, 9);
    for (int s = 1; s <= 9; ++s) {
        NakHeader k = valid_nak();
        k.syndrome = Syndrome(s);
        const Bytes b = encode(c, k);
        Packet out;
        REQUIRE(dec(b, out) == DecodeError::ok);
        check_common(out.common, c);
        CHECK(out.nak.stream_id == k.stream_id);
        CHECK(out.nak.msg_seq == k.msg_seq);
        CHECK(out.nak.syndrome == Syndrome(s));
        CHECK(out.nak.opcode == k.opcode);
        CHECK(out.nak.reserved == 0);
        CHECK(out.nak.csn == k.csn);
        CHECK(out.payload.empty());
    }
    for (Opcode op : kAllOpcodes) {
        NakHeader k = valid_nak();
        k.opcode = op;
        Packet out;
        REQUIRE(dec(encode(c, k), out) == DecodeError::ok);
        CHECK(out.nak.opcode == op);
    }
}

TEST_CASE("probe and probe_reply round trip", "[wire][probe]") {
    for (PacketType t : {PacketType::probe, PacketType::probe_reply}) {
        const CommonHeader c = common(t, 0xFFFF);
        const ProbeHeader h{0xDEADBEEF, 0x0BADCAFE};
        const Bytes b = encode(c, h);
        Packet out;
        REQUIRE(dec(b, out) == DecodeError::ok);
        check_common(out.common, c);
        CHECK(out.probe.probe_seq == h.probe_seq);
        CHECK(out.probe.ts == h.ts);
        CHECK(out.payload.empty());
    }
}

TEST_CASE("connect plane block: round trip and every malformed block (R-PLANE-1)", "[wire][connect][planes]") {
    std::array<PlaneAddr, kMaxPlanes> planes{};
    for (size_t i = 0; i < kMaxPlanes; ++i) planes[i] = PlaneAddr{0x0A000002u + uint32_t(i << 16), uint16_t(4793 + i)};
    for (PacketType t : {PacketType::connect_req, PacketType::connect_ack}) {
        for (size_t n = 1; n <= kMaxPlanes; ++n) {
            CAPTURE(to_string(t), n);
            Bytes b = encode(common(t, 0), valid_connect());
            uint8_t blk[kMaxPlaneBlock];
            const size_t bl = encode_plane_block(blk, planes.data(), n);
            REQUIRE(bl == kPlaneBlockHead + n * kPlaneEntryLen);
            b.insert(b.end(), blk, blk + bl);
            Packet out;
            REQUIRE(dec(b) == DecodeError::ok);
            REQUIRE(decode(b, out) == DecodeError::ok);
            REQUIRE(out.connect.num_planes == n);
            for (size_t i = 0; i < n; ++i) CHECK(plane_addr(out, i) == planes[i]);
            CHECK(plane_addr(out, n) == PlaneAddr{});  // beyond the block: nothing
            // Malformed: the count disagreeing with the length either way, zero
            // planes, a zero address or port, an address twice.
            Bytes bad = b;
            bad[44] = uint8_t(n + 1);
            CHECK(dec(bad) == DecodeError::inconsistent);
            bad[44] = uint8_t(n - 1);
            CHECK(dec(bad) == DecodeError::inconsistent);
            bad = b;
            bad.pop_back();
            CHECK(dec(bad) == DecodeError::inconsistent);
            bad = b;
            std::fill(bad.begin() + 48, bad.begin() + 52, 0);
            CHECK(dec(bad) == DecodeError::inconsistent);
            bad = b;
            bad[52] = bad[53] = 0;
            CHECK(dec(bad) == DecodeError::inconsistent);
            if (n >= 2) {
                bad = b;
                std::copy(b.begin() + 48, b.begin() + 52, bad.begin() + 48 + 8 * (n - 1));
                CHECK(dec(bad) == DecodeError::inconsistent);
            }
            // Reserved bytes are ignored (R-WIRE-8).
            bad = b;
            bad[45] = bad[46] = bad[47] = 0xFF;
            bad[54] = 0xFF;
            CHECK(dec(bad) == DecodeError::ok);
        }
        // A hostile block: more planes than fit (9 listed) is past the room, oversized.
        std::array<PlaneAddr, 9> nine{};
        for (size_t i = 0; i < 9; ++i) nine[i] = PlaneAddr{0x0B000002u + uint32_t(i), 1};
        Bytes b = encode(common(t, 0), valid_connect());
        b.push_back(9);
        b.insert(b.end(), 3, 0);
        for (const PlaneAddr& a : nine) {
            Bytes e(kPlaneEntryLen, 0);
            put32(e, 0, a.ipv4);
            put16(e, 4, a.port);
            b.insert(b.end(), e.begin(), e.end());
        }
        CHECK(dec(b) == DecodeError::oversized);
        b.resize(kConnectLen + kMaxPlaneBlock);  // 9 announced, 8 listed: no block
        CHECK(dec(b) == DecodeError::inconsistent);
    }
    // The encoder refuses 0 or more than kMaxPlanes planes and a short buffer.
    uint8_t blk[kMaxPlaneBlock + 8];
    CHECK(encode_plane_block(blk, planes.data(), 0) == 0);
    CHECK(encode_plane_block({blk, sizeof blk}, planes.data(), kMaxPlanes + 1) == 0);
    CHECK(encode_plane_block({blk, kPlaneBlockHead + 7}, planes.data(), 1) == 0);
}

TEST_CASE("connect_req and connect_ack round trip", "[wire][connect]") {
    for (PacketType t : {PacketType::connect_req, PacketType::connect_ack}) {
        CAPTURE(to_string(t));
        const CommonHeader c = common(t, 0);
        const ConnectHeader h = valid_connect();
        const Bytes b = encode(c, h);
        Packet out;
        REQUIRE(dec(b, out) == DecodeError::ok);
        check_common(out.common, c);
        CHECK(out.connect.num_paths == h.num_paths);
        CHECK(out.connect.max_payload == h.max_payload);
        CHECK(out.connect.initial_csn == h.initial_csn);
        CHECK(out.connect.rx_capacity_mbps == h.rx_capacity_mbps);
        CHECK(out.connect.cookie == h.cookie);
        CHECK(out.connect.stream_depth == h.stream_depth);
        CHECK(out.connect.csn_window == h.csn_window);
        CHECK(out.connect.rate_hint == h.rate_hint);
        CHECK(out.payload.empty());
        // R-HINT-8: rate_hint is the big-endian word at offset 40, the last one.
        REQUIRE(b.size() == 44);
        CHECK(b[40] == 0x0A);
        CHECK(b[41] == 0xBB);
        CHECK(b[42] == 0xCC);
        CHECK(b[43] == 0xDD);
    }
}

TEST_CASE("disconnect and disconnect_ack round trip", "[wire][disconnect]") {
    for (PacketType t : {PacketType::disconnect, PacketType::disconnect_ack}) {
        const CommonHeader c = common(t, 3);
        const Bytes b = encode(c, DisconnectHeader{0xFEEDFACE});
        Packet out;
        REQUIRE(dec(b, out) == DecodeError::ok);
        check_common(out.common, c);
        CHECK(out.disconnect.reason == 0xFEEDFACE);
        CHECK(out.payload.empty());
    }
}

TEST_CASE("encoders refuse a short buffer and a mismatched type", "[wire][encode]") {
    const DataPkt p = valid_data(Opcode::write);
    Bytes big(kMaxHeaderLen + 8, 0xEE);
    for (PacketType t : kAllTypes) {
        CAPTURE(to_string(t));
        const size_t hl = header_len(t);
        const CommonHeader c = common(t);
        Bytes small(hl - 1, 0xEE);
        std::span<uint8_t> s(small);
        switch (t) {
        case PacketType::data: CHECK(encode_data(s, c, p.d) == 0); break;
        case PacketType::ack: CHECK(encode_ack(s, c, valid_ack()) == 0); break;
        case PacketType::nak: CHECK(encode_nak(s, c, valid_nak()) == 0); break;
        case PacketType::probe:
        case PacketType::probe_reply: CHECK(encode_probe(s, c, ProbeHeader{}) == 0); break;
        case PacketType::connect_req:
        case PacketType::connect_ack: CHECK(encode_connect(s, c, valid_connect()) == 0); break;
        case PacketType::disconnect:
        case PacketType::disconnect_ack: CHECK(encode_disconnect(s, c, DisconnectHeader{}) == 0); break;
        }
        for (uint8_t x : small) CHECK(x == 0xEE);  // nothing written
        // Writes only its header into a larger buffer.
        Bytes b(big);
        std::span<uint8_t> bs(b);
        size_t n = 0;
        switch (t) {
        case PacketType::data: n = encode_data(bs, c, p.d); break;
        case PacketType::ack: n = encode_ack(bs, c, valid_ack()); break;
        case PacketType::nak: n = encode_nak(bs, c, valid_nak()); break;
        case PacketType::probe:
        case PacketType::probe_reply: n = encode_probe(bs, c, ProbeHeader{}); break;
        case PacketType::connect_req:
        case PacketType::connect_ack: n = encode_connect(bs, c, valid_connect()); break;
        case PacketType::disconnect:
        case PacketType::disconnect_ack: n = encode_disconnect(bs, c, DisconnectHeader{}); break;
        }
        CHECK(n == hl);
        for (size_t i = hl; i < b.size(); ++i) CHECK(b[i] == 0xEE);
    }
    // Type-fixed encoders set the type themselves; paired encoders need a matching type.
    Bytes b(kMaxHeaderLen);
    CHECK(encode_data(b, common(PacketType::ack), p.d) == kDataLen);
    CHECK(b[1] == uint8_t(PacketType::data));
    CHECK(encode_ack(b, common(PacketType::data), valid_ack()) == kAckLen);
    CHECK(b[1] == uint8_t(PacketType::ack));
    CHECK(encode_nak(b, common(PacketType::data), valid_nak()) == kNakLen);
    CHECK(b[1] == uint8_t(PacketType::nak));
    CHECK(encode_probe(b, common(PacketType::data), ProbeHeader{}) == 0);
    CHECK(encode_probe(b, common(PacketType::connect_req), ProbeHeader{}) == 0);
    CHECK(encode_connect(b, common(PacketType::probe), valid_connect()) == 0);
    CHECK(encode_connect(b, common(PacketType::disconnect), valid_connect()) == 0);
    CHECK(encode_disconnect(b, common(PacketType::probe_reply), DisconnectHeader{}) == 0);
    CHECK(encode_disconnect(b, common(PacketType::connect_ack), DisconnectHeader{}) == 0);
}

TEST_CASE("reserved fields: zero on send, ignored on receive", "[wire]") {
    for (PacketType t : kAllTypes) {
        CAPTURE(to_string(t));
        CommonHeader c = common(t);
        c.version = 9;  // encoders always write kVersion
        c.flags = 0xFFFF;
        c.reserved = 0xFFFF;
        Bytes b(kMaxHeaderLen);
        switch (t) {
        case PacketType::data: encode_data(b, c, valid_data(Opcode::read_req).d); break;
        case PacketType::ack: {
            AckHeader a = valid_ack();
            a.reserved8 = 0xFF;
            a.reserved16 = 0xFFFF;
            encode_ack(b, c, a);
            CHECK(b[37] == 0);
            CHECK(b[38] == 0);
            CHECK(b[39] == 0);
            break;
        }
        case PacketType::nak: {
            NakHeader k = valid_nak();
            k.reserved = 0xFFFF;
            encode_nak(b, c, k);
            CHECK(b[26] == 0);
            CHECK(b[27] == 0);
            break;
        }
        case PacketType::probe:
        case PacketType::probe_reply: encode_probe(b, c, ProbeHeader{}); break;
        case PacketType::connect_req:
        case PacketType::connect_ack: encode_connect(b, c, valid_connect()); break;
        case PacketType::disconnect:
        case PacketType::disconnect_ack: encode_disconnect(b, c, DisconnectHeader{}); break;
        }
        CHECK(b[0] == kVersion);
        CHECK(b[2] == 0);
        // R-PACK-2: CONNECT_*'s flags bit 0 (accepts_pack) is a field; every other bit is reserved.
        const bool connect = t == PacketType::connect_req || t == PacketType::connect_ack;
        CHECK(b[3] == (connect ? kConnAcceptsPack : 0));
        CHECK(b[14] == 0);
        CHECK(b[15] == 0);
    }
    // Non-zero reserved bits from the wire are accepted and reported as read.
    for (PacketType t : kAllTypes) {
        CAPTURE(to_string(t));
        Bytes b = valid_packet(t);
        put16(b, 2, 0xA5A5);
        put16(b, 14, 0x5A5A);
        if (t == PacketType::ack) {
            b[37] = 0x77;
            put16(b, 38, 0x8888);
        }
        if (t == PacketType::nak) put16(b, 26, 0x9999);
        Packet out;
        REQUIRE(dec(b, out) == DecodeError::ok);
        CHECK(out.common.flags == 0xA5A5);
        CHECK(out.common.reserved == 0x5A5A);
        if (t == PacketType::ack) {
            CHECK(out.ack.reserved8 == 0x77);
            CHECK(out.ack.reserved16 == 0x8888);
        }
        if (t == PacketType::nak) CHECK(out.nak.reserved == 0x9999);
    }
}

TEST_CASE("decode resets the previous packet's fields", "[wire]") {
    Packet out;
    const DataPkt p = valid_data(Opcode::write);
    const Bytes data = encode(p);
    REQUIRE(dec(data, out) == DecodeError::ok);
    REQUIRE(!out.payload.empty());
    REQUIRE(dec(valid_packet(PacketType::probe), out) == DecodeError::ok);
    CHECK(out.common.type == PacketType::probe);
    CHECK(out.payload.empty());
    REQUIRE(dec(data, out) == DecodeError::ok);
    // A failed decode never leaves a payload view behind.
    Bytes bad = data;
    bad.pop_back();
    CHECK(dec(bad, out) == DecodeError::truncated);
    CHECK(out.payload.empty());
}

// ---- Decode errors -------------------------------------------------------------------------

TEST_CASE("truncated: every length below the header, every type", "[wire][errors]") {
    for (PacketType t : kAllTypes) {
        CAPTURE(to_string(t));
        const Bytes full = valid_packet(t);
        const size_t hl = header_len(t);
        REQUIRE(full.size() >= hl);
        for (size_t n = 0; n < hl; ++n) {
            CAPTURE(n);
            Bytes b(full.begin(), full.begin() + long(n));
            Packet out;
            CHECK(dec(b, out) == DecodeError::truncated);
            CHECK(out.payload.empty());
        }
    }
    // An empty span, even with a null pointer.
    Packet out;
    CHECK(decode(std::span<const uint8_t>(), out) == DecodeError::truncated);
}

TEST_CASE("truncated: payload shorter than payload_len", "[wire][errors]") {
    for (Opcode op : kAllOpcodes) {
        CAPTURE(to_string(op));
        const DataPkt p = valid_data(op);
        const Bytes full = encode(p);
        for (size_t k = 0; k < p.payload.size(); ++k) {
            Bytes b(full.begin(), full.begin() + long(kDataLen + k));
            CHECK(dec(b) == DecodeError::truncated);
        }
    }
    // payload_len claims the maximum, nothing follows the header.
    DataPkt p = valid_data(Opcode::write);
    p.d.payload_len = uint16_t(kMaxPayload);
    Bytes b(kDataLen);
    REQUIRE(encode_data(b, p.c, p.d) == kDataLen);
    CHECK(dec(b) == DecodeError::truncated);
}

TEST_CASE("bad_version", "[wire][errors]") {
    for (PacketType t : kAllTypes) {
        for (int v : {0, 2, 0x81, 0xFF}) {
            Bytes b = valid_packet(t);
            b[0] = uint8_t(v);
            CHECK(dec(b) == DecodeError::bad_version);
        }
    }
    // Version is checked before anything else once the common header is there.
    Bytes b(kCommonLen, 0);
    b[0] = 2;
    CHECK(dec(b) == DecodeError::bad_version);
    b.resize(kCommonLen - 1);
    CHECK(dec(b) == DecodeError::truncated);
}

TEST_CASE("bad_type", "[wire][errors]") {
    for (int ty : {0, 10, 11, 0x7F, 0xFF}) {
        CAPTURE(ty);
        Bytes b = valid_packet(PacketType::data);
        b[1] = uint8_t(ty);
        CHECK(dec(b) == DecodeError::bad_type);
        // Just a common header, zero ids: the type is judged first.
        Bytes c(kCommonLen, 0);
        c[0] = kVersion;
        c[1] = uint8_t(ty);
        CHECK(dec(c) == DecodeError::bad_type);
    }
}

TEST_CASE("bad_opcode in data and nak", "[wire][errors]") {
    for (int op : {0, 11, 0x80, 0xFF}) {  // (10 is WRITE_PACK, R-PACK-1)
        CAPTURE(op);
        DataPkt p = valid_data(Opcode::write);
        p.d.opcode = Opcode(op);
        CHECK(dec_data(p) == DecodeError::bad_opcode);
        NakHeader k = valid_nak();
        k.opcode = Opcode(op);
        CHECK(dec(encode(common(PacketType::nak), k)) == DecodeError::bad_opcode);
    }
}

TEST_CASE("oversized: payload_len above 9000", "[wire][errors]") {
    for (uint32_t len : {uint32_t(kMaxPayload + 1), 9216u, 0xFFFFu}) {
        CAPTURE(len);
        DataPkt p = valid_data(Opcode::write);
        p.d.offset = 0;
        p.d.msg_len = 1u << 20;
        p.payload = pattern(len);
        p.d.payload_len = uint16_t(len);
        CHECK(dec_data(p) == DecodeError::oversized);
        // Also when the datagram is shorter than the claim.
        Bytes b(kDataLen);
        REQUIRE(encode_data(b, p.c, p.d) == kDataLen);
        CHECK(dec(b) == DecodeError::oversized);
    }
    // Exactly 9000 is fine.
    DataPkt p = valid_data(Opcode::send);
    p.d.offset = 0;
    p.d.msg_len = uint32_t(kMaxPayload);
    p.payload = pattern(kMaxPayload);
    p.d.payload_len = uint16_t(kMaxPayload);
    CHECK(dec_data(p) == DecodeError::ok);
}

TEST_CASE("oversized: trailing bytes after header + payload", "[wire][errors]") {
    for (PacketType t : kAllTypes) {
        CAPTURE(to_string(t));
        for (size_t extra : {size_t(1), size_t(2), size_t(100), size_t(9000)}) {
            Bytes b = valid_packet(t);
            b.resize(b.size() + extra, 0);
            // R-PLANE-1: a CONNECT_* has room for a plane block (68 bytes at most);
            // zeros there are no block.
            const bool connect = t == PacketType::connect_req || t == PacketType::connect_ack;
            CHECK(dec(b) == (connect && extra <= kMaxPlaneBlock ? DecodeError::inconsistent : DecodeError::oversized));
        }
    }
    // A data packet with payload_len 0 followed by bytes.
    DataPkt p = valid_data(Opcode::read_req);
    Bytes b = encode(p);
    b.push_back(0);
    CHECK(dec(b) == DecodeError::oversized);
}

TEST_CASE("inconsistent: dst_conn 0 outside connect_req (R-WIRE-5)", "[wire][errors]") {
    for (PacketType t : kAllTypes) {
        CAPTURE(to_string(t));
        Bytes b = valid_packet(t);
        put32(b, 4, 0);
        CHECK(dec(b) == (t == PacketType::connect_req ? DecodeError::ok : DecodeError::inconsistent));
    }
    // Decode (spec 2.12 step 5, codec.cpp) checks dst_conn only outside CONNECT_REQ: a
    // CONNECT_REQ with a non-zero dst_conn is accepted and reported as read. (R-WIRE-5's
    // prose says it MUST be zero; the decode table and the codec do not reject it.)
    Bytes b = valid_packet(PacketType::connect_req);
    put32(b, 4, 0x12345678);
    Packet out;
    CHECK(dec(b, out) == DecodeError::ok);
    CHECK(out.common.dst_conn == 0x12345678);
}

TEST_CASE("inconsistent: src_conn 0, every type", "[wire][errors]") {
    for (PacketType t : kAllTypes) {
        CAPTURE(to_string(t));
        Bytes b = valid_packet(t);
        put32(b, 8, 0);
        CHECK(dec(b) == DecodeError::inconsistent);
    }
}

TEST_CASE("inconsistent: offset + payload_len beyond msg_len", "[wire][errors]") {
    for (Opcode op : {Opcode::send, Opcode::send_imm, Opcode::write, Opcode::write_imm,
                      Opcode::read_resp}) {
        CAPTURE(to_string(op));
        DataPkt p = valid_data(op);
        // Exactly at the end: fine.
        p.d.offset = p.d.msg_len - p.d.payload_len;
        CHECK(dec_data(p) == DecodeError::ok);
        p.d.offset += 1;
        CHECK(dec_data(p) == DecodeError::inconsistent);
        p.d.offset = p.d.msg_len;
        CHECK(dec_data(p) == DecodeError::inconsistent);
        // The sum is computed without 32-bit wrap-around.
        p.d.msg_len = 0xFFFFFFFF;
        p.d.offset = 0xFFFFFFFF - 10;
        CHECK(dec_data(p) == DecodeError::inconsistent);
        p.d.offset = 0xFFFFFFFF;
        CHECK(dec_data(p) == DecodeError::inconsistent);
        // Payload larger than the whole message.
        p.d.offset = 0;
        p.d.msg_len = p.d.payload_len - 1;
        CHECK(dec_data(p) == DecodeError::inconsistent);
    }
}

TEST_CASE("inconsistent: empty payload only for a 0-byte message", "[wire][errors]") {
    for (Opcode op : {Opcode::send, Opcode::send_imm, Opcode::write, Opcode::write_imm,
                      Opcode::read_resp}) {
        CAPTURE(to_string(op));
        DataPkt p = valid_data(op);
        p.payload.clear();
        p.d.payload_len = 0;
        p.d.offset = 0;
        p.d.msg_len = 0;
        Packet out;
        REQUIRE(dec(encode(p), out) == DecodeError::ok);
        CHECK(out.payload.empty());
        p.d.msg_len = 1;
        CHECK(dec_data(p) == DecodeError::inconsistent);
        p.d.msg_len = 4096;
        p.d.offset = 4096;  // "end of message" but still empty
        CHECK(dec_data(p) == DecodeError::inconsistent);
        p.d.msg_len = 0;
        p.d.offset = 1;
        CHECK(dec_data(p) == DecodeError::inconsistent);
    }
}

TEST_CASE("inconsistent: WRITE destination range wraps the address space", "[wire][errors]") {
    for (Opcode op : {Opcode::write, Opcode::write_imm}) {
        CAPTURE(to_string(op));
        DataPkt p = valid_data(op);
        p.d.remote_addr = 0xFFFFFFFFFFFFFFFFull - p.d.msg_len;  // last byte at 2^64 - 2
        CHECK(dec_data(p) == DecodeError::ok);
        p.d.remote_addr = 0xFFFFFFFFFFFFFFFFull - p.d.msg_len + 2;
        CHECK(dec_data(p) == DecodeError::inconsistent);
        p.d.remote_addr = 0xFFFFFFFFFFFFFFFFull;
        CHECK(dec_data(p) == DecodeError::inconsistent);
    }
    // SEND and READ_RESP do not carry a destination: remote_addr is not checked.
    for (Opcode op : {Opcode::send, Opcode::send_imm, Opcode::read_resp}) {
        DataPkt p = valid_data(op);
        p.d.remote_addr = 0xFFFFFFFFFFFFFFFFull;
        CHECK(dec_data(p) == DecodeError::ok);
    }
}

TEST_CASE("inconsistent: READ_REQ rules", "[wire][errors]") {
    DataPkt p = valid_data(Opcode::read_req);
    CHECK(dec_data(p) == DecodeError::ok);
    SECTION("carries no payload") {
        p.payload = pattern(8);
        p.d.payload_len = 8;
        CHECK(dec_data(p) == DecodeError::inconsistent);
    }
    SECTION("offset is 0") {
        p.d.offset = 1;
        CHECK(dec_data(p) == DecodeError::inconsistent);
    }
    SECTION("source range does not wrap") {
        p.d.remote_addr = 0xFFFFFFFFFFFFFFFFull - p.d.msg_len;
        CHECK(dec_data(p) == DecodeError::ok);
        p.d.remote_addr += 2;
        CHECK(dec_data(p) == DecodeError::inconsistent);
    }
    SECTION("0-byte read is allowed") {
        p.d.msg_len = 0;
        CHECK(dec_data(p) == DecodeError::ok);
    }
}

TEST_CASE("inconsistent: atomic request rules (R-ATOMIC-1)", "[wire][errors]") {
    for (Opcode op : {Opcode::atomic_cas, Opcode::atomic_fadd}) {
        CAPTURE(to_string(op));
        DataPkt p = valid_data(op);
        CHECK(dec_data(p) == DecodeError::ok);
        for (size_t len : {size_t(0), size_t(8), size_t(15), size_t(17), size_t(32)}) {
            CAPTURE(len);
            DataPkt q = p;
            q.payload = pattern(len);
            q.d.payload_len = uint16_t(len);
            CHECK(dec_data(q) == DecodeError::inconsistent);
        }
        for (uint32_t ml : {0u, 4u, 16u, 0xFFFFFFFFu}) {
            DataPkt q = p;
            q.d.msg_len = ml;
            CHECK(dec_data(q) == DecodeError::inconsistent);
        }
        DataPkt q = p;
        q.d.offset = 8;
        CHECK(dec_data(q) == DecodeError::inconsistent);
        for (uint64_t mis = 1; mis < 8; ++mis) {
            DataPkt r = p;
            r.d.remote_addr = p.d.remote_addr + mis;
            CHECK(dec_data(r) == DecodeError::inconsistent);
        }
    }
}

TEST_CASE("inconsistent: ATOMIC_RESP rules", "[wire][errors]") {
    DataPkt p = valid_data(Opcode::atomic_resp);
    p.d.remote_addr = 3;  // not checked for a response
    CHECK(dec_data(p) == DecodeError::ok);
    for (size_t len : {size_t(0), size_t(4), size_t(16)}) {
        DataPkt q = p;
        q.payload = pattern(len);
        q.d.payload_len = uint16_t(len);
        CHECK(dec_data(q) == DecodeError::inconsistent);
    }
    DataPkt q = p;
    q.d.msg_len = 16;
    CHECK(dec_data(q) == DecodeError::inconsistent);
    q = p;
    q.d.offset = 4;
    CHECK(dec_data(q) == DecodeError::inconsistent);
}

TEST_CASE("inconsistent: psn below path_floor (R-PATH-5)", "[wire][errors]") {
    DataPkt p = valid_data(Opcode::write);
    struct Case {
        uint32_t psn, floor;
        bool ok;
    };
    for (const Case& k : {Case{10, 10, true}, Case{11, 10, true}, Case{9, 10, false},
                          Case{0, 1, false}, Case{5, 0xFFFFFFF0, true},  // serial wrap
                          Case{0xFFFFFFF0, 5, false}, Case{0x7FFFFFFF, 0, true},
                          Case{0, 0x80000000, false}, Case{0xFFFFFFFF, 0xFFFFFFFF, true}}) {
        CAPTURE(k.psn, k.floor);
        p.d.psn = k.psn;
        p.d.path_floor = k.floor;
        CHECK(dec_data(p) == (k.ok ? DecodeError::ok : DecodeError::inconsistent));
    }
}

TEST_CASE("inconsistent: ACK ce_count above rx_count", "[wire][errors]") {
    const CommonHeader c = common(PacketType::ack);
    AckHeader a = valid_ack();
    a.ce_count = a.rx_count;
    CHECK(dec(encode(c, a)) == DecodeError::ok);
    a.ce_count = uint16_t(a.rx_count + 1);
    CHECK(dec(encode(c, a)) == DecodeError::inconsistent);
    a.ce_count = 1;
    a.rx_count = 0;
    CHECK(dec(encode(c, a)) == DecodeError::inconsistent);
    a.ce_count = 0;
    CHECK(dec(encode(c, a)) == DecodeError::ok);
    a.ce_count = 0xFFFF;
    a.rx_count = 0xFFFF;
    CHECK(dec(encode(c, a)) == DecodeError::ok);
}

TEST_CASE("inconsistent: NAK syndrome out of range (R-NAK-2)", "[wire][errors]") {
    for (int s : {0, 10, 0x80, 0xFF}) {
        CAPTURE(s);
        NakHeader k = valid_nak();
        k.syndrome = Syndrome(s);
        CHECK(dec(encode(common(PacketType::nak), k)) == DecodeError::inconsistent);
    }
}

TEST_CASE("inconsistent: CONNECT parameter ranges (R-CONN-3)", "[wire][errors]") {
    for (PacketType t : {PacketType::connect_req, PacketType::connect_ack}) {
        CAPTURE(to_string(t));
        const CommonHeader c = common(t);
        auto check = [&](auto mutate, bool ok) {
            ConnectHeader h = valid_connect();
            mutate(h);
            CHECK(dec(encode(c, h)) == (ok ? DecodeError::ok : DecodeError::inconsistent));
        };
        // num_paths 1..256
        for (uint16_t v : {uint16_t(1), uint16_t(2), uint16_t(255), uint16_t(256)})
            check([v](ConnectHeader& h) { h.num_paths = v; }, true);
        for (uint16_t v : {uint16_t(0), uint16_t(257), uint16_t(0xFFFF)})
            check([v](ConnectHeader& h) { h.num_paths = v; }, false);
        // max_payload 1..9000
        for (uint16_t v : {uint16_t(1), uint16_t(4096), uint16_t(9000)})
            check([v](ConnectHeader& h) { h.max_payload = v; }, true);
        for (uint16_t v : {uint16_t(0), uint16_t(9001), uint16_t(0xFFFF)})
            check([v](ConnectHeader& h) { h.max_payload = v; }, false);
        // stream_depth 1..65536
        for (uint32_t v : {1u, 100u, 65536u})
            check([v](ConnectHeader& h) { h.stream_depth = v; }, true);
        for (uint32_t v : {0u, 65537u, 0xFFFFFFFFu})
            check([v](ConnectHeader& h) { h.stream_depth = v; }, false);
        // csn_window: power of two in [64, 2^20]
        for (uint32_t v = 64; v <= (1u << 20); v <<= 1)
            check([v](ConnectHeader& h) { h.csn_window = v; }, true);
        for (uint32_t v : {0u, 1u, 2u, 32u, 63u, 65u, 96u, 1000u, (1u << 20) + 1, 1u << 21,
                           3u << 19, 0x80000000u, 0xFFFFFFFFu})
            check([v](ConnectHeader& h) { h.csn_window = v; }, false);
        // Other fields are free.
        check([](ConnectHeader& h) {
            h.initial_csn = 0;
            h.rx_capacity_mbps = 0;
            h.cookie = 0;
            h.rate_hint = 0;
        }, true);
        check([](ConnectHeader& h) { h.rate_hint = 0xFFFFFFFFu; }, true);
    }
}

TEST_CASE("no out-of-bounds: every single-byte mutation decodes or fails cleanly", "[wire]") {
    // Not a proof (that is the fuzzer's job), but every error path is reached with
    // a buffer that is exactly the datagram; payload views must stay inside it.
    for (PacketType t : kAllTypes) {
        const Bytes base = valid_packet(t);
        for (size_t i = 0; i < base.size() && i < kMaxHeaderLen; ++i) {
            for (int v : {0x00, 0x01, 0x7F, 0x80, 0xFF}) {
                Bytes b = base;
                b[i] = uint8_t(v);
                Packet out;
                const DecodeError e = dec(b, out);
                if (e == DecodeError::ok && !out.payload.empty()) {
                    CHECK(out.payload.data() >= b.data());
                    CHECK(out.payload.data() + out.payload.size() <= b.data() + b.size());
                }
                if (e != DecodeError::ok) CHECK(out.payload.empty());
            }
        }
    }
}

TEST_CASE("decode_data: the inline DATA decoder agrees with decode on every mutation and length", "[wire][data]") {
    // decode_data (the engine's receive path) must give decode()'s error and,
    // when both accept, the same fields and payload view: every opcode, every
    // header byte set to each of a few values, every truncation, and the
    // other types (which it hands to decode()).
    auto agree = [](const Bytes& b) {
        Packet x, y;
        const DecodeError ex = decode(std::span<const uint8_t>(b), x);
        const DecodeError ey = decode_data(std::span<const uint8_t>(b), y);
        REQUIRE(ex == ey);
        if (ex != DecodeError::ok) {
            CHECK(y.payload.empty());
            return;
        }
        CHECK(y.common.type == x.common.type);
        CHECK(y.common.dst_conn == x.common.dst_conn);
        CHECK(y.common.src_conn == x.common.src_conn);
        CHECK(y.common.path_id == x.common.path_id);
        CHECK(y.common.flags == x.common.flags);
        CHECK(y.payload.data() == x.payload.data());
        CHECK(y.payload.size() == x.payload.size());
        if (x.common.type != PacketType::data) return;
        const DataHeader &a = x.data, &d = y.data;
        CHECK(d.psn == a.psn);
        CHECK(d.csn == a.csn);
        CHECK(d.opcode == a.opcode);
        CHECK(d.dflags == a.dflags);
        CHECK(d.payload_len == a.payload_len);
        CHECK(d.stream_id == a.stream_id);
        CHECK(d.msg_seq == a.msg_seq);
        CHECK(d.msg_len == a.msg_len);
        CHECK(d.offset == a.offset);
        CHECK(d.rkey == a.rkey);
        CHECK(d.remote_addr == a.remote_addr);
        CHECK(d.recv_seq == a.recv_seq);
        CHECK(d.imm == a.imm);
        CHECK(d.ts == a.ts);
        CHECK(d.path_floor == a.path_floor);
    };
    size_t accepted = 0;
    for (Opcode op : kAllOpcodes) {
        const Bytes base = encode(valid_data(op));
        {
            Packet y;
            REQUIRE(decode_data(std::span<const uint8_t>(base), y) == DecodeError::ok);
            CHECK(y.data.opcode == op);
            CHECK(y.data.remote_addr == 0x0000123456789AB0ull);
            CHECK(y.data.path_floor == 0x01020300u);
        }
        for (size_t n = 0; n <= base.size(); ++n) agree(Bytes(base.begin(), base.begin() + long(n)));
        for (size_t i = 0; i < kDataLen; ++i) {
            for (int v : {0x00, 0x01, 0x09, 0x7F, 0x80, 0xFF}) {
                Bytes b = base;
                b[i] = uint8_t(v);
                agree(b);
                Packet q;
                if (decode(std::span<const uint8_t>(b), q) == DecodeError::ok) ++accepted;
            }
        }
    }
    CHECK(accepted > 1000);  // the mutations reach the accepting path too, not only errors
    for (PacketType t : kAllTypes) agree(valid_packet(t));
}

TEST_CASE("decode checks apply in the order of spec 2.12 (R-WIRE-9)", "[wire][errors]") {
    // Each case breaks two rules; the earlier check decides the error.
    Bytes b;
    // 1 truncated (n < 16) before 2 version.
    b = valid_packet(PacketType::probe);
    b[0] = 2;
    b.resize(15);
    CHECK(dec(b) == DecodeError::truncated);
    // 2 version before 3 type.
    b = valid_packet(PacketType::probe);
    b[0] = 0;
    b[1] = 0;
    CHECK(dec(b) == DecodeError::bad_version);
    // 3 type before 4 header length.
    b = valid_packet(PacketType::probe);
    b[1] = 0xEE;
    b.resize(kCommonLen);
    CHECK(dec(b) == DecodeError::bad_type);
    // 4 header length before 5/6 connection ids.
    b = valid_packet(PacketType::ack);
    put32(b, 4, 0);
    put32(b, 8, 0);
    b.resize(kAckLen - 1);
    CHECK(dec(b) == DecodeError::truncated);
    // 5/6 connection ids before D1 opcode, D2 payload_len and the per-type length checks.
    b = valid_packet(PacketType::data);
    put32(b, 8, 0);
    b[24] = 0;
    CHECK(dec(b) == DecodeError::inconsistent);
    b = valid_packet(PacketType::data);
    put32(b, 4, 0);
    put16(b, 26, 9001);
    CHECK(dec(b) == DecodeError::inconsistent);
    b = valid_packet(PacketType::nak);
    put32(b, 4, 0);
    b.push_back(0);
    CHECK(dec(b) == DecodeError::inconsistent);
    // D1 opcode before D2 payload_len.
    b = valid_packet(PacketType::data);
    b[24] = 0x20;
    put16(b, 26, 0xFFFF);
    CHECK(dec(b) == DecodeError::bad_opcode);
    // D2 payload_len before D3 truncation (covered above) and D3 before D5 consistency.
    {
        DataPkt p = valid_data(Opcode::write);
        p.d.offset = p.d.msg_len;  // inconsistent
        Bytes t = encode(p);
        t.pop_back();              // and truncated
        CHECK(dec(t) == DecodeError::truncated);
        t.push_back(0);
        t.push_back(0);            // and oversized
        CHECK(dec(t) == DecodeError::oversized);
    }
    // D5 and D6: both inconsistent.
    {
        DataPkt p = valid_data(Opcode::atomic_cas);
        p.d.remote_addr |= 1;
        p.d.path_floor = p.d.psn + 1;
        CHECK(dec_data(p) == DecodeError::inconsistent);
    }
    // Other types: trailing bytes before the per-type consistency checks.
    b = valid_packet(PacketType::ack);
    put16(b, 28, 0xFFFF);  // ce_count > rx_count
    b.push_back(0);
    CHECK(dec(b) == DecodeError::oversized);
    b = valid_packet(PacketType::connect_ack);
    put16(b, 16, 0);
    b.resize(b.size() + kMaxPlaneBlock + 1, 0);  // past the largest plane block (R-PLANE-1)
    CHECK(dec(b) == DecodeError::oversized);
    // NAK: syndrome before opcode.
    b = valid_packet(PacketType::nak);
    b[24] = 0;
    b[25] = 0;
    CHECK(dec(b) == DecodeError::inconsistent);
    b = valid_packet(PacketType::nak);
    b[25] = 0;
    CHECK(dec(b) == DecodeError::bad_opcode);
}

// ---- Two spans (decode_split) ----------------------------------------------------------------

// A driver may hand a datagram over as a header span and the rest (a DPDK
// mbuf chain): decode_split accepts it wherever the cut lies after the
// header, gives the same fields as decode() of the whole, and the payload
// as the part in the first span followed by the whole second span. Each
// span is its own exact-size buffer: a read past either is a heap overflow.
TEST_CASE("decode_split: every cut after the header, every opcode, every type", "[wire][split]") {
    for (Opcode op : kAllOpcodes) {
        CAPTURE(to_string(op));
        const DataPkt p = valid_data(op);
        const Bytes b = encode(p);
        Packet whole;
        REQUIRE(dec(b, whole) == DecodeError::ok);
        for (size_t cut = kDataLen; cut <= b.size(); ++cut) {
            CAPTURE(cut);
            const Bytes first(b.begin(), b.begin() + long(cut)), second(b.begin() + long(cut), b.end());
            Packet out;
            REQUIRE(decode_split(first, second, out) == DecodeError::ok);
            CHECK(std::memcmp(&out.data, &whole.data, sizeof(DataHeader)) == 0);
            CHECK(out.common.src_conn == whole.common.src_conn);
            REQUIRE(out.payload.size() == cut - kDataLen);
            REQUIRE(out.payload.size() + out.payload_tail.size() == p.payload.size());
            if (!out.payload.empty()) CHECK(out.payload.data() == first.data() + kDataLen);
            if (!out.payload_tail.empty()) CHECK(out.payload_tail.data() == second.data());
            Bytes joined(out.payload.begin(), out.payload.end());
            joined.insert(joined.end(), out.payload_tail.begin(), out.payload_tail.end());
            CHECK(joined == p.payload);
            // One byte short or one too many in the second span, as for a contiguous datagram.
            if (!second.empty()) {
                const Bytes shorter(second.begin(), second.end() - 1);
                CHECK(decode_split(first, shorter, out) == DecodeError::truncated);
                CHECK(out.payload.empty());
                CHECK(out.payload_tail.empty());
            }
            Bytes longer = second;
            longer.push_back(0);
            CHECK(decode_split(first, longer, out) == DecodeError::oversized);
        }
    }
    for (PacketType t : kAllTypes) {
        CAPTURE(to_string(t));
        const Bytes full = valid_packet(t);
        const size_t hl = header_len(t);
        Packet out;
        // The whole packet in the first span and an empty second: as decode().
        CHECK(decode_split(full, {}, out) == DecodeError::ok);
        CHECK(out.payload_tail.empty());
        // A header that straddles the spans, at every cut: refused, whatever the type.
        for (size_t cut = 0; cut < hl; ++cut) {
            CAPTURE(cut);
            const Bytes first(full.begin(), full.begin() + long(cut)), second(full.begin() + long(cut), full.end());
            CHECK(decode_split(first, second, out) == DecodeError::split_header);
            CHECK(out.payload.empty());
            CHECK(out.payload_tail.empty());
        }
    }
    // Too short in total stays "truncated", even split.
    const Bytes tiny(10, 1);
    Packet out;
    CHECK(decode_split(std::span<const uint8_t>(tiny.data(), 3), std::span<const uint8_t>(tiny.data() + 3, 7), out) ==
          DecodeError::truncated);
    CHECK(std::string(to_string(DecodeError::split_header)) == "split_header");
}

TEST_CASE("decode after decode_split leaves no payload tail behind", "[wire][split]") {
    const Bytes b = encode(valid_data(Opcode::write));
    const Bytes first(b.begin(), b.begin() + long(kDataLen)), second(b.begin() + long(kDataLen), b.end());
    Packet out;
    REQUIRE(decode_split(first, second, out) == DecodeError::ok);
    REQUIRE(out.payload_tail.size() == 1000);
    REQUIRE(dec(b, out) == DecodeError::ok);
    CHECK(out.payload.size() == 1000);
    CHECK(out.payload_tail.empty());
}

// R-PACK-1: a WRITE_PACK of three entries (16, 8 and 0 bytes), decoded whole
// and in two spans cut at every byte: the same result, the entries read
// across the cut; every malformed variant inconsistent, in both decoders.
TEST_CASE("WRITE_PACK: entries decoded whole and split at every byte; malformed ones refused", "[wire][pack]") {
    DataPkt p = valid_data(Opcode::write_pack);
    p.d.offset = 0;
    p.d.msg_len = 3;
    p.payload.clear();
    const uint32_t lens[3] = {16, 8, 0};
    for (uint32_t i = 0; i < 3; ++i) {
        uint8_t h[kPackEntryHead];
        detail::put32(h, 0x100 + i);
        detail::put32(h + 4, lens[i]);
        detail::put64(h + 8, 0x7000 + 0x40 * i);
        p.payload.insert(p.payload.end(), h, h + sizeof h);
        const Bytes b = pattern(lens[i], uint8_t(0x30 * (i + 1)));
        p.payload.insert(p.payload.end(), b.begin(), b.end());
    }
    p.d.payload_len = uint16_t(p.payload.size());
    const Bytes whole = encode(p);
    Packet d;
    REQUIRE(decode(whole, d) == DecodeError::ok);
    REQUIRE(decode_data(whole, d) == DecodeError::ok);
    auto entries = [](std::span<const uint8_t> a, std::span<const uint8_t> b, uint32_t k) {
        std::vector<std::pair<PackEntry, Bytes>> out;
        PackReader r(a, b, k);
        PackEntry e;
        while (r.next(e)) {
            Bytes bytes;
            for (uint32_t i = 0; i < e.length; ++i) {
                const size_t at = e.at + i;
                bytes.push_back(at < a.size() ? a[at] : b[at - a.size()]);
            }
            out.emplace_back(e, bytes);
        }
        CHECK(r.ok());
        CHECK(r.done());
        return out;
    };
    const auto want = entries(d.payload, {}, 3);
    REQUIRE(want.size() == 3);
    for (uint32_t i = 0; i < 3; ++i) {
        CHECK(want[i].first.rkey == 0x100 + i);
        CHECK(want[i].first.length == lens[i]);
        CHECK(want[i].first.remote_addr == 0x7000 + 0x40 * i);
        CHECK(want[i].second == pattern(lens[i], uint8_t(0x30 * (i + 1))));
    }
    for (size_t cut = kDataLen; cut <= whole.size(); ++cut) {
        CAPTURE(cut);
        const Bytes a(whole.begin(), whole.begin() + cut), b(whole.begin() + cut, whole.end());
        Packet s;
        REQUIRE(decode_split(a, b, s) == DecodeError::ok);
        const auto got = entries(s.payload, s.payload_tail, 3);
        REQUIRE(got.size() == 3);
        for (uint32_t i = 0; i < 3; ++i) CHECK(got[i].second == want[i].second);
    }
    // Malformed: the entry count, an entry running past the payload, a wrap, bytes left over.
    auto refused = [&](DataPkt q) {
        const Bytes w = encode(q);
        Packet x;
        CHECK(decode(w, x) == DecodeError::inconsistent);
        CHECK(x.payload.empty());
        CHECK(decode_data(w, x) == DecodeError::inconsistent);
        for (size_t cut : {kDataLen, kDataLen + 5, kDataLen + 20, w.size()}) {
            const Bytes a(w.begin(), w.begin() + std::min(cut, w.size())), b(w.begin() + std::min(cut, w.size()), w.end());
            CHECK(decode_split(a, b, x) == DecodeError::inconsistent);
        }
    };
    for (uint32_t k : {0u, 1u, 2u, 4u, 33u}) {
        DataPkt q = p;
        q.d.msg_len = k;
        refused(q);
    }
    {
        DataPkt q = p;  // entry 1's length past the payload
        detail::put32(q.payload.data() + kPackEntryHead + 16 + 4, 9);
        refused(q);
    }
    {
        DataPkt q = p;  // entry 0's destination wraps
        detail::put64(q.payload.data() + 8, ~uint64_t(0) - 3);
        refused(q);
    }
    {
        DataPkt q = p;  // one byte after the last entry
        q.payload.push_back(0);
        q.d.payload_len = uint16_t(q.payload.size());
        refused(q);
    }
    {
        DataPkt q = p;  // a nonzero offset
        q.d.offset = 1;
        refused(q);
    }
}
