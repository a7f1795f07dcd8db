// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The multipath scheduler inside one tx_burst (doc/spec.md R-SCHED-1,
// R-SCHED-2, R-SCHED-4): paths are planned once per burst, so these tests pin
// what a burst must still do per packet: equal paths take turns, no path goes
// past its window, and the split of a burst into calls changes no choice.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "pair_link.hpp"

using namespace mroce;
using mroce::test::PairLink;

namespace {

bool is_data(const TxPacket& p) { return p.hdr_len == wire::kDataLen && p.hdr[1] == uint8_t(wire::PacketType::data); }

struct SchedPair {
    EngineConfig cfg;
    std::unique_ptr<Engine> a, b;
    std::unique_ptr<PairLink> link;
    std::vector<uint8_t> src, dst;
    uint32_t ca = 0, cb = 0;
    MrInfo ms{}, md{};

    SchedPair() {
        cfg.num_paths = 4;
        cfg.max_payload = 1024;
        cfg.rate_hints = false;  // no pacer: only the windows limit a burst
        cfg.cc.init_cwnd = 8;
        a = std::make_unique<Engine>(cfg);
        b = std::make_unique<Engine>(cfg);
        const uint32_t pda = a->alloc_pd(), pdb = b->alloc_pd();
        uint32_t cqa = 0, cqb = 0;
        REQUIRE(a->create_cq(256, cqa) == Status::ok);
        REQUIRE(b->create_cq(256, cqb) == Status::ok);
        link = std::make_unique<PairLink>(*a, *b);
        REQUIRE(mroce::test::connect_pair(*link, ca, cb));
        REQUIRE(a->create_stream(ca, 1, pda, cqa, cqa) == Status::ok);
        REQUIRE(b->create_stream(cb, 1, pdb, cqb, cqb) == Status::ok);
        src.assign(256 * 1024, 0x5a);
        dst.assign(src.size(), 0);
        REQUIRE(a->register_mr(pda, src.data(), src.size(), kAccessLocalWrite, ms) == Status::ok);
        REQUIRE(b->register_mr(pdb, dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite, md) == Status::ok);
        SendWr wr;
        wr.op = OpKind::write;
        wr.local_addr = uint64_t(reinterpret_cast<uintptr_t>(src.data()));
        wr.length = uint32_t(src.size());
        wr.lkey = ms.lkey;
        wr.remote_addr = uint64_t(reinterpret_cast<uintptr_t>(dst.data()));
        wr.rkey = md.rkey;
        REQUIRE(a->post_send(ca, 1, wr) == Status::ok);
    }

    // The paths of the data packets A sends at one instant, in bursts of `burst`.
    std::vector<uint16_t> data_paths(size_t burst) {
        std::vector<TxPacket> out(burst);
        std::vector<uint16_t> paths;
        for (int calls = 0; calls < 1000; ++calls) {
            const size_t n = a->tx_burst(out.data(), burst, link->now);
            if (n == 0) break;
            for (size_t i = 0; i < n; ++i)
                if (is_data(out[i])) paths.push_back(out[i].path);
        }
        return paths;
    }
};

}  // namespace

TEST_CASE("one burst: equal paths take turns and each stops at its window", "[engine][sched]") {
    SchedPair p;
    const std::vector<uint16_t> paths = p.data_paths(256);
    // 4 paths x init_cwnd 8: the windows, not the burst size, end the burst.
    REQUIRE(paths.size() == 32);
    std::vector<int> per_path(4, 0);
    for (size_t i = 0; i < paths.size(); ++i) {
        ++per_path[paths[i]];
        // R-SCHED-4: equal scores, round-robin from the path after the last one.
        CHECK(paths[i] == (paths[0] + i) % 4);
    }
    for (int n : per_path) CHECK(n == 8);  // R-SCHED-1: in flight never above cwnd
    CHECK(p.data_paths(256).empty());      // windows full: nothing more until acks
}

// plan_paths scores a path by srtt alone, with no test of have_rtt: a path
// with no RTT sample must read 0 (R-SCHED-2's srtt term before a sample).
TEST_CASE("a path with no RTT sample yet has srtt 0, sent on or not", "[engine][sched]") {
    SchedPair p;
    for (uint16_t i = 0; i < 4; ++i) {
        PathStats st;
        REQUIRE(p.a->path_stats(p.ca, i, st) == Status::ok);
        CHECK(st.srtt == 0);
    }
    REQUIRE(p.data_paths(256).size() == 32);  // in flight, none acknowledged
    for (uint16_t i = 0; i < 4; ++i) {
        PathStats st;
        REQUIRE(p.a->path_stats(p.ca, i, st) == Status::ok);
        CHECK(st.srtt == 0);
        CHECK(st.inflight == 8);
    }
}

TEST_CASE("cutting a burst into calls changes no path choice", "[engine][sched]") {
    SchedPair whole, single, small;
    const std::vector<uint16_t> a = whole.data_paths(256);
    const std::vector<uint16_t> b = single.data_paths(1);
    const std::vector<uint16_t> c = small.data_paths(3);
    REQUIRE(a.size() == 32);
    CHECK(a == b);
    CHECK(a == c);
}

TEST_CASE("a run of segments: every header carries its own segment's fields", "[engine][sched]") {
    SchedPair p;
    std::vector<TxPacket> out(256);
    const size_t n = p.a->tx_burst(out.data(), out.size(), p.link->now);
    REQUIRE(n >= 32);
    uint32_t next_psn[4] = {0, 0, 0, 0};
    bool first = true;
    uint32_t csn0 = 0, psn0 = 0, k = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!is_data(out[i])) continue;
        std::vector<uint8_t> dgram(out[i].hdr, out[i].hdr + out[i].hdr_len);
        dgram.insert(dgram.end(), out[i].payload, out[i].payload + out[i].payload_len);
        wire::Packet pk;
        REQUIRE(wire::decode(dgram, pk) == wire::DecodeError::ok);
        const wire::DataHeader& d = pk.data;
        if (first) {
            csn0 = d.csn;
            psn0 = d.psn;
            for (uint16_t j = 0; j < 4; ++j) next_psn[j] = d.psn;  // all paths start level
            first = false;
        }
        CHECK(pk.common.path_id == out[i].path);
        CHECK(pk.common.src_conn == p.ca);
        CHECK(d.psn == next_psn[out[i].path]++);                   // R-PATH-1: per path, in order
        CHECK(d.csn == csn0 + k);                                  // R-CSN-1: one per segment
        CHECK(d.opcode == wire::Opcode::write);
        CHECK(d.dflags == 0);
        CHECK(d.msg_len == p.src.size());
        CHECK(d.offset == k * 1024);
        CHECK(d.payload_len == 1024);
        CHECK(d.remote_addr == uint64_t(reinterpret_cast<uintptr_t>(p.dst.data())));
        CHECK(d.rkey == p.md.rkey);
        CHECK(out[i].payload == p.src.data() + k * 1024);
        CHECK(d.ts != 0);
        CHECK(d.path_floor == psn0);  // R-PATH-5: nothing acked yet, the floor stays at the first PSN
        ++k;
    }
    CHECK(k == 32);
}
