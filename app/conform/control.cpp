// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
#include "control.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "suite.hpp"

namespace mroce::conform {

namespace {
constexpr int kAnswerTimeoutMs = 10000;  // an IUT that does not answer a command in 10 s is broken

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> w;
    std::istringstream in(s);
    for (std::string x; in >> x;) w.push_back(x);
    return w;
}
}  // namespace

std::string hex(uint64_t v) {
    char b[24];
    std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
    return b;
}

std::string to_hex(const uint8_t* p, size_t n) {
    static const char* d = "0123456789abcdef";
    std::string s(n * 2, '0');
    for (size_t i = 0; i < n; ++i) {
        s[2 * i] = d[p[i] >> 4];
        s[2 * i + 1] = d[p[i] & 15];
    }
    return s;
}

std::vector<uint8_t> from_hex(const std::string& s) {
    auto nib = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    std::vector<uint8_t> out;
    if (s == "-") return out;
    if (s.size() % 2) throw std::invalid_argument("odd hex length");
    out.reserve(s.size() / 2);
    for (size_t i = 0; i < s.size(); i += 2) {
        const int a = nib(s[i]), b = nib(s[i + 1]);
        if (a < 0 || b < 0) throw std::invalid_argument("bad hex digit");
        out.push_back(uint8_t(a << 4 | b));
    }
    return out;
}

uint64_t parse_u64(const std::string& s) {
    size_t pos = 0;
    const uint64_t v = std::stoull(s, &pos, 0);
    if (pos != s.size()) throw std::invalid_argument("not a number: " + s);
    return v;
}

std::string Wc::str() const {
    return "{wr_id=" + std::to_string(wr_id) + " status=" + status + " opcode=" + opcode +
           " byte_len=" + std::to_string(byte_len) + (has_imm ? " imm=" + hex(imm) : std::string()) +
           " stream=" + std::to_string(stream) + "}";
}

Control::~Control() {
    if (fd_ >= 0) {
        const char q[] = "quit\n";
        (void)!::write(fd_, q, sizeof q - 1);
        ::close(fd_);
    }
}

void Control::open(const std::string& host, uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) throw std::runtime_error(std::string("control socket: ") + std::strerror(errno));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) throw std::runtime_error("control: bad address " + host);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0)
        throw std::runtime_error("control: connect to " + host + ":" + std::to_string(port) + ": " +
                                 std::strerror(errno));
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const Answer a = try_call("hello");
    if (!a.ok || a.words.size() < 3 || a.words[0] != "1")
        throw std::runtime_error("control: the IUT does not speak protocol 1: '" + a.line + "'");
    udp_ip_ = a.words[1];
    udp_port_ = uint16_t(parse_u64(a.words[2]));
    for (size_t i = 3; i < a.words.size(); ++i) name_ += (i > 3 ? " " : "") + a.words[i];
}

Answer Control::try_call(const std::string& line) {
    const std::string out = line + "\n";
    for (size_t off = 0; off < out.size();) {
        const ssize_t n = ::send(fd_, out.data() + off, out.size() - off, MSG_NOSIGNAL);
        if (n <= 0) throw Failure("the IUT's control connection to accept '" + line + "'", "send failed");
        off += size_t(n);
    }
    for (;;) {
        const auto nl = buf_.find('\n');
        if (nl != std::string::npos) {
            Answer a;
            a.line = buf_.substr(0, nl);
            buf_.erase(0, nl + 1);
            auto w = split(a.line);
            if (w.empty() || (w[0] != "ok" && w[0] != "err"))
                throw Failure("an answer 'ok ...' or 'err ...' to '" + line + "'", "'" + a.line + "'");
            a.ok = w[0] == "ok";
            a.words.assign(w.begin() + 1, w.end());
            return a;
        }
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, kAnswerTimeoutMs) <= 0)
            throw Failure("an answer to '" + line + "'", "none within 10 s");
        char b[65536];
        const ssize_t n = ::recv(fd_, b, sizeof b, 0);
        if (n <= 0) throw Failure("an answer to '" + line + "'", "the control connection closed");
        buf_.append(b, size_t(n));
    }
}

std::vector<std::string> Control::call(const std::string& line) {
    Answer a = try_call(line);
    if (!a.ok) fail("'" + line + "' to succeed", "'" + a.line + "'");
    return a.words;
}

void Control::reset(const std::map<std::string, std::string>& cfg) {
    std::string l = "reset";
    for (const auto& [k, v] : cfg) l += " " + k + "=" + v;
    auto w = call(l);
    if (w.size() < 2) fail("reset to answer 'ok <ip> <port>'", "'" + l + "'");
    udp_ip_ = w[0];
    udp_port_ = uint16_t(parse_u64(w[1]));
}

uint32_t Control::pd() { return uint32_t(parse_u64(call("pd").at(0))); }

Mr Control::mr(uint32_t pd, uint64_t len, const std::string& access) {
    auto w = call("mr " + std::to_string(pd) + " " + std::to_string(len) + " " + access);
    if (w.size() < 3) fail("mr to answer 'ok <addr> <lkey> <rkey>'", std::to_string(w.size()) + " words");
    return Mr{parse_u64(w[0]), uint32_t(parse_u64(w[1])), uint32_t(parse_u64(w[2])), len};
}

void Control::mem_write(uint64_t addr, const std::vector<uint8_t>& bytes) {
    call("mem_write " + hex(addr) + " " + (bytes.empty() ? "-" : to_hex(bytes.data(), bytes.size())));
}

std::vector<uint8_t> Control::mem_read(uint64_t addr, uint32_t len) {
    auto w = call("mem_read " + hex(addr) + " " + std::to_string(len));
    auto b = from_hex(w.empty() ? std::string("-") : w[0]);
    if (b.size() != len) fail("mem_read to return " + std::to_string(len) + " bytes", std::to_string(b.size()));
    return b;
}

uint32_t Control::cq(uint32_t depth) { return uint32_t(parse_u64(call("cq " + std::to_string(depth)).at(0))); }

std::vector<Wc> Control::poll(uint32_t cq, uint32_t max) {
    auto w = call("cq_poll " + std::to_string(cq) + " " + std::to_string(max));
    std::vector<Wc> out;
    const size_t n = w.empty() ? 0 : size_t(parse_u64(w[0]));
    for (size_t i = 0; i < n && i + 1 < w.size(); ++i) {
        // wr_id:status:opcode:byte_len:imm:has_imm:stream
        std::vector<std::string> f;
        std::string cur;
        for (char ch : w[i + 1]) {
            if (ch == ':') {
                f.push_back(cur);
                cur.clear();
            } else {
                cur += ch;
            }
        }
        f.push_back(cur);
        if (f.size() != 7) fail("a completion wr_id:status:opcode:byte_len:imm:has_imm:stream", w[i + 1]);
        Wc c;
        c.wr_id = parse_u64(f[0]);
        c.status = f[1];
        c.opcode = f[2];
        c.byte_len = uint32_t(parse_u64(f[3]));
        c.imm = uint32_t(parse_u64(f[4]));
        c.has_imm = f[5] == "1";
        c.stream = uint32_t(parse_u64(f[6]));
        out.push_back(c);
    }
    return out;
}

uint32_t Control::accept(uint32_t timeout_ms) {
    return uint32_t(parse_u64(call("accept " + std::to_string(timeout_ms)).at(0)));
}

std::string Control::conn_state(uint32_t conn) { return call("conn_state " + std::to_string(conn)).at(0); }

void Control::stream(uint32_t conn, uint32_t id, uint32_t pd, uint32_t scq, uint32_t rcq, const std::string& extra) {
    call("stream " + std::to_string(conn) + " " + std::to_string(id) + " " + std::to_string(pd) + " " +
         std::to_string(scq) + " " + std::to_string(rcq) + (extra.empty() ? "" : " " + extra));
}

std::map<std::string, uint64_t> Control::counters() {
    std::map<std::string, uint64_t> m;
    for (const auto& w : call("counters")) {
        const auto eq = w.find('=');
        if (eq != std::string::npos) m[w.substr(0, eq)] = parse_u64(w.substr(eq + 1));
    }
    return m;
}

}  // namespace mroce::conform
