// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The common start of a test: a fresh IUT endpoint (reset), a protection
// domain, a region, a CQ, the suite's peer connected to it and stream 1
// created at the IUT; and the small steps tests repeat (write a message,
// wait for an ACK that covers a PSN, for a NAK, for completions).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "control.hpp"
#include "peer.hpp"
#include "suite.hpp"

namespace mroce::conform {

// reset parameters: the tests' defaults (one path, 1024-byte segments, a 1 s RTO so that only what a
// test provokes resends anything) with extra overriding them.
std::map<std::string, std::string> iut_cfg(std::initializer_list<std::pair<const std::string, std::string>> extra = {});
// The key=value arguments of a one-buffer send WR (control protocol "send").
std::string wr_args(uint64_t id, uint64_t addr, uint32_t len, uint32_t lkey, uint64_t raddr = 0x10000, uint32_t rkey = 0x4242);

struct Setup {
    std::map<std::string, std::string> iut = iut_cfg();
    ConnParams cp{};
    bool connect = true;        // the suite opens the connection (IUT passive)
    bool stream = true;         // create stream 1 at the IUT
    std::string stream_extra;   // stream attributes (send_depth=.. max_rd_atomic=..)
    uint64_t mr_len = 65536;
    std::string access = "lwra";
};

struct Env {
    Ctx& t;
    Control& ctl;
    std::unique_ptr<Peer> peer;
    uint32_t conn = 0, pd = 0, cq = 0;
    Mr mr;
    Env(Ctx& c) : t(c), ctl(c.ctl) {}
    Peer& p() { return *peer; }
    // IUT-local address of byte off of the region.
    uint64_t at(uint64_t off) const { return mr.addr + off; }
    // wr_args of a WR on bytes [off, off + len) of the region
    std::string wr(uint64_t id, uint64_t off, uint32_t len, uint64_t raddr = 0x10000, uint32_t rkey = 0x4242) const {
        return wr_args(id, at(off), len, mr.lkey, raddr, rkey);
    }
    // "send <conn> 1 <op> ..." / "recv <conn> 1 ..."
    void post(const std::string& op, const std::string& args, uint32_t stream = 1);
    Answer try_post(const std::string& op, const std::string& args, uint32_t stream = 1);
    // "sends": every (op, args) WR posted in one call, queued together at the IUT (R-PACK-3).
    void post_all(const std::vector<std::pair<std::string, std::string>>& wrs, uint32_t stream = 1);
    void post_recv(uint64_t wr, uint64_t addr, uint32_t len, uint32_t stream = 1, uint32_t lkey = 0);
    // Polls cq until n completions arrived (fails after timeout_ms).
    std::vector<Wc> completions(size_t n, uint32_t timeout_ms = 2000, uint32_t cq = 0);
    // Fails if any completion shows up on cq within ms.
    void no_completion(uint32_t ms = 30, uint32_t cq = 0);
};

Env setup(Ctx& t, const Setup& s = {});

// A WRITE segment to the IUT's region: DataSpec with rkey and address filled.
DataSpec write_seg(const Env& e, uint32_t msg_seq, uint32_t region_off, uint32_t msg_len, uint32_t seg_off,
                   const std::vector<uint8_t>& bytes, wire::Opcode op = wire::Opcode::write);

bool acks_psn(const RxPkt& ack, uint32_t psn);
// The next ACK of path that covers psn (cumulatively or by its SACK bit).
RxPkt wait_acked(Peer& p, uint16_t path, uint32_t psn, uint64_t timeout_ns = 1000 * kMs);
// Fails if an ACK of path covering psn arrives within window.
void not_acked(Peer& p, uint16_t path, uint32_t psn, uint64_t window_ns = 40 * kMs);
RxPkt wait_nak(Peer& p, wire::Syndrome syn, uint32_t csn, uint64_t timeout_ns = 1000 * kMs);
// Counters of the IUT (optional in the control protocol; mroce's adapter has them).
uint64_t counter(Control& c, const std::string& name);

std::string wc_list(const std::vector<Wc>& v);
void check_wc(const Wc& w, uint64_t wr_id, const std::string& status, const std::string& what);

}  // namespace mroce::conform
