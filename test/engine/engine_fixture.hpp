// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Two engines connected over a PairLink with one stream (id 7), each with a
// PD, a CQ and one region over its whole memory: the setup of the engine
// operation tests.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "pair_link.hpp"

namespace mroce::test {

struct Side {
    Engine eng;
    uint32_t pd = 0, cq = 0;
    std::vector<uint8_t> mem;
    MrInfo mr{};
    explicit Side(const EngineConfig& cfg, size_t bytes = 1 << 20) : eng(cfg), mem(bytes) {
        pd = eng.alloc_pd();
        REQUIRE(eng.create_cq(1 << 16, cq) == Status::ok);
        REQUIRE(eng.register_mr(pd, mem.data(), mem.size(),
                                kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic,
                                mr) == Status::ok);
    }
    uint64_t addr(size_t off = 0) const { return uint64_t(reinterpret_cast<uintptr_t>(mem.data())) + off; }
};

// A WRITE of from's bytes [from_off, from_off + len) to `to` at to_off.
inline SendWr write_wr(const Side& from, size_t from_off, uint32_t len, const Side& to, size_t to_off, uint64_t wr_id) {
    SendWr w;
    w.wr_id = wr_id;
    w.op = OpKind::write;
    w.local_addr = from.addr(from_off);
    w.length = len;
    w.lkey = from.mr.lkey;
    w.remote_addr = to.addr(to_off);
    w.rkey = to.mr.rkey;
    return w;
}

// Connects a to b over link and opens stream `id` on both ends, each on its
// side's PD and CQ.
inline void connect_stream(PairLink& link, Side& a, Side& b, uint32_t id, uint32_t& ca, uint32_t& cb) {
    REQUIRE(connect_pair(link, ca, cb));
    REQUIRE(a.eng.create_stream(ca, id, a.pd, a.cq, a.cq) == Status::ok);
    REQUIRE(b.eng.create_stream(cb, id, b.pd, b.cq, b.cq) == Status::ok);
}

struct Fixture {
    EngineConfig cfg;
    Side a, b;
    PairLink link;
    uint32_t ca = 0, cb = 0;
    explicit Fixture(EngineConfig c = {}, size_t bytes = 1 << 20) : cfg(c), a(c, bytes), b(c, bytes), link(a.eng, b.eng) {
        connect_stream(link, a, b, 7, ca, cb);
    }
    std::vector<Completion> wait(Side& s, size_t n, Time limit = 2'000'000'000) {
        std::vector<Completion> got;
        link.run([&] {
            Completion c[64];
            size_t k;
            while ((k = s.eng.poll_cq(s.cq, c, 64)) > 0) got.insert(got.end(), c, c + k);
            return got.size() >= n;
        }, limit);
        return got;
    }
};

inline void fill(std::vector<uint8_t>& m, size_t off, size_t len, uint32_t seed) {
    for (size_t i = 0; i < len; ++i) m[off + i] = uint8_t((i * 131 + seed * 7 + (i >> 8)) ^ seed);
}

}  // namespace mroce::test
