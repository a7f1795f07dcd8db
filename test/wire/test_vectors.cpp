// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Golden wire vectors (test/vectors/*.hex): decode each, check every field its
// header line gives, re-encode and compare bytes. The vector directory comes
// from the environment variable MROCE_VECTOR_DIR, else the compiled-in default
// (both set by test/wire/meson.build).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "mroce/wire.hpp"

using namespace mroce::wire;
namespace fs = std::filesystem;

namespace {

struct Vector {
    std::string name;
    std::string desc;
    std::vector<std::pair<std::string, std::string>> fields;  // in file order
    std::vector<uint8_t> bytes;
};

int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

Vector load(const fs::path& path) {
    Vector v;
    v.name = path.stem().string();
    std::ifstream in(path);
    REQUIRE(in.good());
    std::string line;
    std::string digits;
    bool first_comment = true;
    while (std::getline(in, line)) {
        const auto hash = line.find('#');
        if (hash != std::string::npos) {
            std::string comment = line.substr(hash + 1);
            line.resize(hash);
            if (first_comment) {
                // "# <name>: <description>"
                first_comment = false;
                const auto colon = comment.find(':');
                REQUIRE(colon != std::string::npos);
                std::string n = comment.substr(0, colon);
                n.erase(0, n.find_first_not_of(' '));
                CHECK(n == v.name);
                v.desc = comment.substr(colon + 1);
            } else {
                std::istringstream ss(comment);
                std::string tok;
                while (ss >> tok) {
                    const auto eq = tok.find('=');
                    if (eq == std::string::npos) continue;
                    v.fields.emplace_back(tok.substr(0, eq), tok.substr(eq + 1));
                }
            }
        }
        for (char ch : line) {
            if (std::isspace(static_cast<unsigned char>(ch))) continue;
            INFO("bad character in " << path << ": '" << ch << "'");
            REQUIRE(hexval(ch) >= 0);
            digits.push_back(ch);
        }
    }
    REQUIRE(digits.size() % 2 == 0);
    for (size_t i = 0; i < digits.size(); i += 2)
        v.bytes.push_back(uint8_t(hexval(digits[i]) * 16 + hexval(digits[i + 1])));
    return v;
}

// A decoded field, as a number or as an enum name.
struct Field {
    bool known = false;
    bool is_name = false;
    uint64_t num = 0;
    std::string name;
};

Field num(uint64_t x) { return Field{true, false, x, {}}; }
Field name(const char* s) { return Field{true, true, 0, s}; }

Field get(const Packet& p, const std::string& k) {
    const CommonHeader& c = p.common;
    if (k == "type") return name(to_string(c.type));
    if (k == "version") return num(c.version);
    if (k == "flags") return num(c.flags);
    if (k == "dst_conn") return num(c.dst_conn);
    if (k == "src_conn") return num(c.src_conn);
    if (k == "path_id") return num(c.path_id);
    switch (c.type) {
    case PacketType::data: {
        const DataHeader& d = p.data;
        if (k == "psn") return num(d.psn);
        if (k == "csn") return num(d.csn);
        if (k == "opcode") return name(to_string(d.opcode));
        if (k == "dflags") return num(d.dflags);
        if (k == "payload_len") return num(d.payload_len);
        if (k == "stream_id") return num(d.stream_id);
        if (k == "msg_seq") return num(d.msg_seq);
        if (k == "msg_len") return num(d.msg_len);
        if (k == "offset") return num(d.offset);
        if (k == "rkey") return num(d.rkey);
        if (k == "remote_addr") return num(d.remote_addr);
        if (k == "recv_seq") return num(d.recv_seq);
        if (k == "imm") return num(d.imm);
        if (k == "ts") return num(d.ts);
        if (k == "path_floor") return num(d.path_floor);
        break;
    }
    case PacketType::ack: {
        const AckHeader& a = p.ack;
        if (k == "cum_psn") return num(a.cum_psn);
        if (k == "ts_echo") return num(a.ts_echo);
        if (k == "rate_hint") return num(a.rate_hint);
        if (k == "ce_count") return num(a.ce_count);
        if (k == "rx_count") return num(a.rx_count);
        if (k == "cum_csn") return num(a.cum_csn);
        if (k == "ack_flags") return num(a.ack_flags);
        if (k == "sack0") return num(a.sack[0]);
        if (k == "sack1") return num(a.sack[1]);
        if (k == "sack2") return num(a.sack[2]);
        if (k == "sack3") return num(a.sack[3]);
        break;
    }
    case PacketType::nak: {
        const NakHeader& n = p.nak;
        if (k == "stream_id") return num(n.stream_id);
        if (k == "msg_seq") return num(n.msg_seq);
        if (k == "syndrome") return name(to_string(n.syndrome));
        if (k == "opcode") return name(to_string(n.opcode));
        if (k == "csn") return num(n.csn);
        break;
    }
    case PacketType::probe:
    case PacketType::probe_reply:
        if (k == "probe_seq") return num(p.probe.probe_seq);
        if (k == "ts") return num(p.probe.ts);
        break;
    case PacketType::connect_req:
    case PacketType::connect_ack: {
        const ConnectHeader& h = p.connect;
        if (k == "num_paths") return num(h.num_paths);
        if (k == "max_payload") return num(h.max_payload);
        if (k == "initial_csn") return num(h.initial_csn);
        if (k == "rx_capacity_mbps") return num(h.rx_capacity_mbps);
        if (k == "cookie") return num(h.cookie);
        if (k == "stream_depth") return num(h.stream_depth);
        if (k == "csn_window") return num(h.csn_window);
        if (k == "rate_hint") return num(h.rate_hint);
        if (k == "num_planes") return num(h.num_planes);  // R-PLANE-1
        if (k.size() > 5 && k.rfind("plane", 0) == 0) {
            const size_t i = std::stoul(k.substr(5));
            if (i >= h.num_planes) break;
            const PlaneAddr a = plane_addr(p, i);
            return num((uint64_t(a.ipv4) << 16) | a.port);
        }
        break;
    }
    case PacketType::disconnect:
    case PacketType::disconnect_ack:
        if (k == "reason") return num(p.disconnect.reason);
        break;
    }
    return Field{};
}

std::vector<uint8_t> reencode(const Packet& p) {
    std::vector<uint8_t> b(kMaxHeaderLen);
    size_t n = 0;
    switch (p.common.type) {
    case PacketType::data: n = encode_data(b, p.common, p.data); break;
    case PacketType::ack: n = encode_ack(b, p.common, p.ack); break;
    case PacketType::nak: n = encode_nak(b, p.common, p.nak); break;
    case PacketType::probe:
    case PacketType::probe_reply: n = encode_probe(b, p.common, p.probe); break;
    case PacketType::connect_req:
    case PacketType::connect_ack: n = encode_connect(b, p.common, p.connect); break;
    case PacketType::disconnect:
    case PacketType::disconnect_ack: n = encode_disconnect(b, p.common, p.disconnect); break;
    }
    b.resize(n);
    b.insert(b.end(), p.payload.begin(), p.payload.end());
    return b;
}

std::string hex(const std::vector<uint8_t>& b) {
    static const char* d = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < b.size(); ++i) {
        if (i) s += (i % 16 == 0) ? '\n' : ' ';
        s += d[b[i] >> 4];
        s += d[b[i] & 15];
    }
    return s;
}

fs::path vector_dir() {
    const char* env = std::getenv("MROCE_VECTOR_DIR");
    if (env && *env) return env;
#ifdef MROCE_VECTOR_DIR
    return MROCE_VECTOR_DIR;
#else
    return fs::path(__FILE__).parent_path().parent_path() / "vectors";
#endif
}

std::vector<fs::path> vector_files() {
    std::vector<fs::path> out;
    const fs::path dir = vector_dir();
    INFO("vector dir " << dir);
    REQUIRE(fs::is_directory(dir));
    for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file() && e.path().extension() == ".hex") out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

TEST_CASE("golden vectors decode, match their fields and re-encode", "[vectors]") {
    const auto files = vector_files();
    REQUIRE(files.size() >= 18);
    std::set<std::string> types_seen, opcodes_seen, errors_seen;
    for (const fs::path& f : files) {
        const Vector v = load(f);
        INFO("vector " << v.name << ":" << v.desc);
        REQUIRE(!v.fields.empty());
        Packet p;
        const DecodeError e = decode(std::span<const uint8_t>(v.bytes), p);
        if (v.fields.front().first == "expect") {
            // A malformed datagram: only the error is given.
            REQUIRE(v.fields.size() == 1);
            CHECK(std::string(to_string(e)) == v.fields.front().second);
            errors_seen.insert(v.fields.front().second);
            continue;
        }
        REQUIRE(std::string(to_string(e)) == "ok");
        // The header line must give every field of the type, nothing unknown.
        std::set<std::string> given;
        for (const auto& [k, want] : v.fields) {
            INFO("field " << k << "=" << want);
            CHECK(given.insert(k).second);  // no duplicates
            const Field got = get(p, k);
            REQUIRE(got.known);
            if (got.is_name) {
                CHECK(got.name == want);
            } else {
                CHECK(got.num == std::stoull(want, nullptr, 0));
            }
        }
        CHECK(given.count("type") == 1);
        CHECK(given.count("dst_conn") == 1);
        CHECK(given.count("src_conn") == 1);
        CHECK(given.count("path_id") == 1);
        types_seen.insert(to_string(p.common.type));
        if (p.common.type == PacketType::data) {
            CHECK(given.size() == 4 + 15 + given.count("flags"));
            opcodes_seen.insert(to_string(p.data.opcode));
            CHECK(p.payload.size() == v.bytes.size() - kDataLen);
        }
        const auto again = reencode(p);
        INFO("expected\n" << hex(v.bytes) << "\nre-encoded\n" << hex(again));
        CHECK(again == v.bytes);
    }
    // Coverage: at least one vector per packet type and per data opcode.
    for (const char* t : {"DATA", "ACK", "NAK", "PROBE", "PROBE_REPLY", "CONNECT_REQ",
                          "CONNECT_ACK", "DISCONNECT", "DISCONNECT_ACK"})
        CHECK(types_seen.count(t) == 1);
    for (const char* o : {"SEND", "SEND_IMM", "WRITE", "WRITE_IMM", "READ_REQ", "READ_RESP",
                          "ATOMIC_CAS", "ATOMIC_FADD", "ATOMIC_RESP", "WRITE_PACK"})
        CHECK(opcodes_seen.count(o) == 1);
    for (const char* err : {"truncated", "bad_version", "bad_type", "bad_opcode", "oversized",
                            "inconsistent"})
        CHECK(errors_seen.count(err) == 1);
}
