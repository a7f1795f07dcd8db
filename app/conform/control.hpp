// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The suite's side of the control protocol (doc/conformance.md section 3):
// one request line, one answer line ("ok ..." or "err <status> ..."), over
// TCP. Typed wrappers for the commands the tests use; every call that the
// IUT answers with err throws Failure naming the command, unless the caller
// asks for the raw answer (try_call).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mroce::conform {

struct Mr {
    uint64_t addr = 0;
    uint32_t lkey = 0;
    uint32_t rkey = 0;
    uint64_t len = 0;
};

struct Wc {
    uint64_t wr_id = 0;
    std::string status;  // success, rem_access_err, ... (doc/conformance.md 3.4)
    std::string opcode;  // send, write, read, atomic_cas, atomic_fadd, recv, recv_write_imm
    uint32_t byte_len = 0;
    uint32_t imm = 0;
    bool has_imm = false;
    uint32_t stream = 0;
    std::string str() const;
};

// One answer: ok, its words after "ok" (or after "err": the status first).
struct Answer {
    bool ok = false;
    std::vector<std::string> words;
    std::string line;
    std::string status() const { return ok || words.empty() ? std::string() : words[0]; }
};

class Control {
public:
    Control() = default;
    ~Control();
    Control(const Control&) = delete;
    Control& operator=(const Control&) = delete;

    void open(const std::string& host, uint16_t port);  // throws std::runtime_error
    Answer try_call(const std::string& line);
    std::vector<std::string> call(const std::string& line);  // throws Failure on err

    // reset: a fresh endpoint; returns nothing, udp_port() then names it.
    void reset(const std::map<std::string, std::string>& cfg);
    const std::string& udp_ip() const { return udp_ip_; }
    uint16_t udp_port() const { return udp_port_; }
    const std::string& iut_name() const { return name_; }

    uint32_t pd();
    Mr mr(uint32_t pd, uint64_t len, const std::string& access);
    void mem_write(uint64_t addr, const std::vector<uint8_t>& bytes);
    std::vector<uint8_t> mem_read(uint64_t addr, uint32_t len);
    uint32_t cq(uint32_t depth);
    std::vector<Wc> poll(uint32_t cq, uint32_t max = 64);
    uint32_t accept(uint32_t timeout_ms = 1000);
    std::string conn_state(uint32_t conn);
    void stream(uint32_t conn, uint32_t id, uint32_t pd, uint32_t scq, uint32_t rcq, const std::string& extra = {});
    std::map<std::string, uint64_t> counters();

private:
    int fd_ = -1;
    std::string buf_;
    std::string udp_ip_, name_;
    uint16_t udp_port_ = 0;
};

std::string to_hex(const uint8_t* p, size_t n);
std::vector<uint8_t> from_hex(const std::string& s);
uint64_t parse_u64(const std::string& s);

}  // namespace mroce::conform
