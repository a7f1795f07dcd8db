// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// libFuzzer target for the wire decoder (scripts/fuzz.sh builds and runs it).
// For arbitrary bytes: decode() must never read outside the input (ASan), and
// when it accepts the datagram,
//   - the payload view lies inside the input, right after the header, and the
//     header + payload account for every input byte;
//   - re-encoding the decoded header reproduces the input bytes (reserved
//     fields, which encoders write as zero, excepted);
//   - the re-encoded datagram decodes again to the same fields.
// Any violation aborts.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <vector>
#include <span>

#include "mroce/wire.hpp"

using namespace mroce::wire;

namespace {

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "fuzz_decode: %s\n", what);
    std::abort();
}

size_t encode_header(const Packet& p, uint8_t* out, size_t cap) {
    std::span<uint8_t> s(out, cap);
    switch (p.common.type) {
    case PacketType::data: return encode_data(s, p.common, p.data);
    case PacketType::ack: return encode_ack(s, p.common, p.ack);
    case PacketType::nak: return encode_nak(s, p.common, p.nak);
    case PacketType::probe:
    case PacketType::probe_reply: return encode_probe(s, p.common, p.probe);
    case PacketType::connect_req:
    case PacketType::connect_ack: return encode_connect(s, p.common, p.connect);
    case PacketType::disconnect:
    case PacketType::disconnect_ack: return encode_disconnect(s, p.common, p.disconnect);
    }
    return 0;
}

// Byte ranges the encoders write as zero whatever the decoded value was.
bool reserved_byte(PacketType t, size_t i) {
    if (i == 2 || i == 3 || i == 14 || i == 15) return true;  // common flags, reserved
    if (t == PacketType::ack && i >= 37 && i <= 39) return true;
    if (t == PacketType::nak && (i == 26 || i == 27)) return true;
    return false;
}

bool same_fields(const Packet& a, const Packet& b) {
    const CommonHeader &x = a.common, &y = b.common;
    if (x.version != y.version || x.type != y.type || x.dst_conn != y.dst_conn ||
        x.src_conn != y.src_conn || x.path_id != y.path_id)
        return false;
    switch (x.type) {
    case PacketType::data: {
        const DataHeader &d = a.data, &e = b.data;
        return d.psn == e.psn && d.csn == e.csn && d.opcode == e.opcode && d.dflags == e.dflags &&
               d.payload_len == e.payload_len && d.stream_id == e.stream_id &&
               d.msg_seq == e.msg_seq && d.msg_len == e.msg_len && d.offset == e.offset &&
               d.rkey == e.rkey && d.remote_addr == e.remote_addr && d.recv_seq == e.recv_seq &&
               d.imm == e.imm && d.ts == e.ts && d.path_floor == e.path_floor &&
               a.payload.size() == b.payload.size() &&
               (a.payload.empty() ||
                std::memcmp(a.payload.data(), b.payload.data(), a.payload.size()) == 0);
    }
    case PacketType::ack: {
        const AckHeader &k = a.ack, &l = b.ack;
        return k.cum_psn == l.cum_psn && k.ts_echo == l.ts_echo && k.rate_hint == l.rate_hint &&
               k.ce_count == l.ce_count && k.rx_count == l.rx_count && k.cum_csn == l.cum_csn &&
               k.ack_flags == l.ack_flags && k.sack[0] == l.sack[0] && k.sack[1] == l.sack[1] &&
               k.sack[2] == l.sack[2] && k.sack[3] == l.sack[3];
    }
    case PacketType::nak:
        return a.nak.stream_id == b.nak.stream_id && a.nak.msg_seq == b.nak.msg_seq &&
               a.nak.syndrome == b.nak.syndrome && a.nak.opcode == b.nak.opcode &&
               a.nak.csn == b.nak.csn;
    case PacketType::probe:
    case PacketType::probe_reply:
        return a.probe.probe_seq == b.probe.probe_seq && a.probe.ts == b.probe.ts;
    case PacketType::connect_req:
    case PacketType::connect_ack: {
        const ConnectHeader &h = a.connect, &g = b.connect;
        return h.num_paths == g.num_paths && h.max_payload == g.max_payload &&
               h.initial_csn == g.initial_csn && h.rx_capacity_mbps == g.rx_capacity_mbps &&
               h.cookie == g.cookie && h.stream_depth == g.stream_depth &&
               h.csn_window == g.csn_window && h.rate_hint == g.rate_hint;
    }
    case PacketType::disconnect:
    case PacketType::disconnect_ack:
        return a.disconnect.reason == b.disconnect.reason;
    }
    return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const uint8_t> in(data, size);
    Packet p;
    const DecodeError e = decode(in, p);
    {
        // The engine's inline DATA decoder: same result and fields as decode().
        Packet q;
        const DecodeError eq = decode_data(in, q);
        if (eq != e) fail("decode_data and decode disagree on the error");
        if (e == DecodeError::ok && (!same_fields(p, q) || q.payload.data() != p.payload.data() ||
                                     q.payload.size() != p.payload.size() || !q.payload_tail.empty()))
            fail("decode_data differs from decode");
        if (eq != DecodeError::ok && !q.payload.empty()) fail("payload view set on a failed decode_data");
    }
    {
        // The same datagram in two spans (a DPDK chain), cut where the input says,
        // each span its own exact-size allocation: decode_split agrees with decode
        // or refuses a header that straddles the cut, and reads neither span past its end.
        const size_t cut = size ? (size_t(data[size - 1]) * 131) % (size + 1) : 0;
        const std::vector<uint8_t> first(data, data + cut), second(data + cut, data + size);
        Packet s;
        const DecodeError es = decode_split(first, second, s);
        if (e != DecodeError::ok) {
            if (es == DecodeError::ok) fail("decode_split accepted what decode refused");
        } else if (cut < header_len(p.common.type)) {
            if (es != DecodeError::split_header) fail("decode_split accepted a straddled header");
        } else if (p.common.type != PacketType::data && !p.payload.empty()) {
            // A CONNECT_*'s plane block (R-PLANE-1) comes whole or not at all
            // through decode_split: the DPDK driver, its only user, refuses planes.
        } else {
            if (es != DecodeError::ok) fail("decode_split refused what decode accepted");
            if (!s.payload.empty() && s.payload.data() != first.data() + header_len(p.common.type))
                fail("decode_split payload does not start right after the header");
            std::vector<uint8_t> joined(s.payload.begin(), s.payload.end());
            joined.insert(joined.end(), s.payload_tail.begin(), s.payload_tail.end());
            Packet j = s;
            j.payload = joined;
            j.payload_tail = {};
            if (!same_fields(p, j)) fail("decode_split differs from decode");
        }
        if (es != DecodeError::ok && (!s.payload.empty() || !s.payload_tail.empty()))
            fail("payload view set on a failed decode_split");
    }
    if (e != DecodeError::ok) {
        if (!p.payload.empty()) fail("payload view set on a failed decode");
        return 0;
    }
    const size_t hl = header_len(p.common.type);
    if (hl == 0 || hl > size) fail("accepted a packet shorter than its header");
    if (p.common.version != kVersion) fail("accepted a bad version");
    if (p.common.src_conn == 0) fail("accepted src_conn 0");
    if (p.common.type != PacketType::connect_req && p.common.dst_conn == 0)
        fail("accepted dst_conn 0");

    // Payload: inside the input, right after the header, covering the rest.
    if (p.common.type == PacketType::data) {
        if (p.data.payload_len > kMaxPayload) fail("payload_len above kMaxPayload");
        if (p.payload.size() != p.data.payload_len) fail("payload size != payload_len");
        if (hl + p.payload.size() != size) fail("header + payload != datagram length");
        if (!p.payload.empty()) {
            const uint8_t* b = p.payload.data();
            if (b < data || b + p.payload.size() > data + size) fail("payload outside input");
            if (b != data + hl) fail("payload does not start right after the header");
        }
        if (p.data.opcode == Opcode::write_pack) {
            // R-PACK-1: msg_len is the entry count; the entries fill the payload exactly.
            if (p.data.msg_len < 2 || p.data.msg_len > kMaxPackEntries) fail("accepted a WRITE_PACK of 0, 1 or > 32 entries");
            PackReader r(p.payload, {}, p.data.msg_len);
            PackEntry en;
            while (r.next(en))
                if (en.at + uint64_t(en.length) > p.payload.size()) fail("WRITE_PACK entry outside its payload");
            if (!r.ok() || !r.done()) fail("accepted a malformed WRITE_PACK");
        } else if (p.data.offset + uint64_t(p.data.payload_len) > p.data.msg_len &&
                   !is_single_packet(p.data.opcode)) {
            fail("accepted offset + payload_len > msg_len");
        }
        if (seq_lt(p.data.psn, p.data.path_floor)) fail("accepted psn below path_floor");
    } else if ((p.common.type == PacketType::connect_req || p.common.type == PacketType::connect_ack) &&
               p.connect.num_planes != 0) {
        // R-PLANE-1: the plane block is the CONNECT_*'s payload, the rest of the datagram.
        if (p.payload.data() != data + hl || hl + p.payload.size() != size) fail("plane block is not the rest");
        if (parse_plane_block(p.payload, nullptr) != p.connect.num_planes) fail("accepted a bad plane block");
    } else {
        if (!p.payload.empty()) fail("payload on a non-data packet");
        if (hl != size) fail("accepted trailing bytes");
    }

    // Re-encode and compare with the input.
    uint8_t out[kMaxHeaderLen + kMaxPayload];
    const size_t n = encode_header(p, out, kMaxHeaderLen);
    if (n != hl) fail("re-encode wrote a different header length");
    for (size_t i = 0; i < hl; ++i) {
        const bool connect = p.common.type == PacketType::connect_req || p.common.type == PacketType::connect_ack;
        if (connect && i == 3) {
            // R-PACK-2: flags bit 0 (accepts_pack) survives, the other bits are reserved.
            if (out[i] != (data[i] & kConnAcceptsPack)) fail("CONNECT_* flags not re-encoded as bit 0 alone");
        } else if (reserved_byte(p.common.type, i)) {
            if (out[i] != 0) fail("reserved byte not zero after re-encode");
        } else if (out[i] != data[i]) {
            fail("re-encoded header differs from the input");
        }
    }
    if (!p.payload.empty()) std::memcpy(out + n, p.payload.data(), p.payload.size());

    // The re-encoded datagram decodes to the same fields.
    Packet q;
    if (decode(std::span<const uint8_t>(out, n + p.payload.size()), q) != DecodeError::ok)
        fail("re-encoded packet does not decode");
    if (!same_fields(p, q)) fail("round trip changed a field");
    const bool connect = q.common.type == PacketType::connect_req || q.common.type == PacketType::connect_ack;
    if ((q.common.flags & ~(connect ? kConnAcceptsPack : 0)) != 0 || q.common.reserved != 0)
        fail("re-encoded reserved fields not zero");  // (R-PACK-2: CONNECT_*'s accepts_pack survives)
    return 0;
}
