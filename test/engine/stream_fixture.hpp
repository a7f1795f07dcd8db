// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Two engines over a PairLink with one region each, for the tests of stream
// attributes, lifecycle and shared receive queues (doc/spec.md R-STREAM-*,
// R-SRQ-*): streams are created by the test, with the attributes it needs.
#pragma once

#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <vector>

#include "engine_fixture.hpp"

namespace mroce::test {

struct StreamSide : Side {
    std::vector<Completion> got;  // completions polled so far, in CQ order
    StreamSide(const EngineConfig& cfg, size_t bytes) : Side(cfg, bytes) {}
    StreamAttr attr() const {
        StreamAttr a;
        a.pd = pd;
        a.send_cq = cq;
        a.recv_cq = cq;
        return a;
    }
    void poll() {
        Completion c[64];
        for (size_t k; (k = eng.poll_cq(cq, c, 64)) > 0;) got.insert(got.end(), c, c + k);
    }
    SendWr wr(uint64_t id, OpKind op, size_t loc, uint32_t len, uint64_t raddr = 0, uint32_t rkey = 0) const {
        SendWr w;
        w.wr_id = id;
        w.op = op;
        w.local_addr = addr(loc);
        w.length = len;
        w.lkey = mr.lkey;
        w.remote_addr = raddr;
        w.rkey = rkey;
        return w;
    }
    RecvWr recv(uint64_t id, size_t off, uint32_t len) const {
        RecvWr r;
        r.wr_id = id;
        r.addr = addr(off);
        r.length = len;
        r.lkey = mr.lkey;
        return r;
    }
};

struct StreamPair {
    StreamSide a, b;
    PairLink link;
    uint32_t ca = 0, cb = 0;
    explicit StreamPair(const EngineConfig& cfg, size_t bytes = 1 << 20, uint64_t seed = 1)
        : a(cfg, bytes), b(cfg, bytes), link(a.eng, b.eng, seed) {
        REQUIRE(connect_pair(link, ca, cb));
    }
    // Runs until pred() holds (both CQs polled before every test of it).
    bool run(const std::function<bool()>& pred, Time limit = 2'000'000'000) {
        return link.run([&] {
            a.poll();
            b.poll();
            return pred();
        }, limit);
    }
};

// Bytes derived from (offset, seed): every message of a test has its own.
inline void fill_pattern(std::vector<uint8_t>& m, size_t off, size_t len, uint32_t seed) {
    for (size_t i = 0; i < len; ++i) m[off + i] = uint8_t((i * 131 + seed * 7 + (i >> 8)) ^ (seed >> 3) ^ seed);
}

}  // namespace mroce::test
