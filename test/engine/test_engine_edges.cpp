// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The engine at its edges: queues and CQs of depths that are not powers of
// two across the 32-bit wrap of their counters (R-WRAP-1). (The same depths
// with traffic, every counter wrapping, are the integrity matrix's wrap axis.)
#include <catch2/catch.hpp>

#include <vector>

#include "mroce/engine.hpp"

using namespace mroce;

namespace {

// One engine with a connection still CONNECTING (nothing is transmitted, so
// posted work stays queued) and one stream on it; every counter starts half
// a depth below 2^32.
struct QueueRig {
    Engine eng;
    uint32_t conn = 0, pd = 0, send_cq = 0, recv_cq = 0;
    static constexpr uint32_t kStream = 7;

    static EngineConfig config(uint32_t depth) {
        EngineConfig cfg;
        cfg.stream_depth = depth;
        cfg.recv_depth = depth;
        cfg.test_seq_base = 0u - depth / 2 - 1;
        return cfg;
    }
    explicit QueueRig(uint32_t depth) : eng(config(depth)) {
        pd = eng.alloc_pd();
        REQUIRE(eng.create_cq(depth, send_cq) == Status::ok);
        REQUIRE(eng.create_cq(depth, recv_cq) == Status::ok);
        REQUIRE(eng.connect(1, conn) == Status::ok);
        REQUIRE(eng.create_stream(conn, kStream, pd, send_cq, recv_cq) == Status::ok);
    }
    Status send(uint64_t wr_id) {
        SendWr w;
        w.wr_id = wr_id;
        w.op = OpKind::write;  // 0 bytes: no local region needed
        return eng.post_send(conn, kStream, w);
    }
    Status recv(uint64_t wr_id) {
        RecvWr r;
        r.wr_id = wr_id;
        return eng.post_recv(conn, kStream, r);
    }
    // A send WR whose lkey names no region: loc_prot_err, the stream enters ERROR (R-STREAM-2).
    void fail_stream() {
        SendWr w;
        w.wr_id = 999'999;
        w.length = 8;
        w.local_addr = 64;
        w.lkey = 0xdead;
        REQUIRE(eng.post_send(conn, kStream, w) == Status::ok);
    }
    std::vector<Completion> poll(uint32_t cq, size_t max = ~size_t(0)) {
        std::vector<Completion> out;
        Completion c[37];  // batches that do not divide the depths
        while (out.size() < max) {
            const size_t n = eng.poll_cq(cq, c, std::min<size_t>(37, max - out.size()));
            if (!n) break;
            out.insert(out.end(), c, c + n);
        }
        return out;
    }
};

}  // namespace

TEST_CASE("send queue: exactly its depth, flushed in post order across the counter wrap", "[engine][edges][wrap]") {
    const uint32_t depth = GENERATE(3u, 500u, 1000u);
    INFO("depth " << depth);
    QueueRig r(depth);
    for (uint32_t i = 0; i < depth; ++i) REQUIRE(r.send(i) == Status::ok);
    CHECK(r.send(depth) == Status::queue_full);  // R-STREAM-5: the depth the user chose
    REQUIRE(r.eng.disconnect(r.conn) == Status::ok);  // before ESTABLISHED: closes, flushes (R-CONN-9)
    const auto got = r.poll(r.send_cq);  // a full CQ of the same depth
    REQUIRE(got.size() == depth);
    for (uint32_t i = 0; i < depth; ++i) {
        CHECK(got[i].wr_id == i);
        CHECK(got[i].status == WcStatus::wr_flush_err);
    }
    CHECK(r.eng.stats().cq_overflows == 0);
}

TEST_CASE("receive queue: exactly its depth, flushed in post order across the counter wrap", "[engine][edges][wrap]") {
    const uint32_t depth = GENERATE(3u, 500u, 1000u);
    INFO("depth " << depth);
    QueueRig r(depth);
    for (uint32_t i = 0; i < depth; ++i) REQUIRE(r.recv(i) == Status::ok);
    CHECK(r.recv(depth) == Status::queue_full);
    r.fail_stream();  // R-STREAM-2: the posted receives are flushed, in order
    const auto got = r.poll(r.recv_cq);
    REQUIRE(got.size() == depth);
    for (uint32_t i = 0; i < depth; ++i) {
        CHECK(got[i].wr_id == i);
        CHECK(got[i].status == WcStatus::wr_flush_err);
        CHECK(got[i].opcode == WcOpcode::recv);
    }
    const auto failed = r.poll(r.send_cq);
    REQUIRE(failed.size() == 1);
    CHECK(failed[0].status == WcStatus::loc_prot_err);
}

TEST_CASE("CQ: holds exactly its depth, in order, through many wraps of its slots and one of its counters",
          "[engine][edges][wrap]") {
    const uint32_t depth = GENERATE(3u, 500u, 1000u);
    INFO("depth " << depth);
    QueueRig r(depth);
    r.fail_stream();
    REQUIRE(r.poll(r.send_cq).size() == 1);
    // Posts to a stream in ERROR complete at once (R-STREAM-3): each is one
    // completion. Keep the CQ between nearly empty and full while its
    // counters pass 2^32, polling uneven amounts.
    uint64_t next_id = 0, want_id = 0;
    uint32_t live = 0;
    for (int round = 0; round < 12; ++round) {
        const uint32_t add = depth - live;  // fill it
        for (uint32_t i = 0; i < add; ++i) REQUIRE(r.send(next_id++) == Status::ok);
        live += add;
        if (round == 5) {
            // R-CMPL-5: one more than the depth is lost and counted.
            REQUIRE(r.send(~uint64_t(0)) == Status::ok);
            CHECK(r.eng.stats().cq_overflows == 1);
        }
        const uint32_t take = round % 3 == 2 ? live : 1 + (live * 5 + uint32_t(round)) / 7 % live;
        const auto got = r.poll(r.send_cq, take);
        REQUIRE(got.size() == std::min(take, live));
        for (const Completion& c : got) {
            CHECK(c.wr_id == want_id);
            CHECK(c.status == WcStatus::wr_flush_err);
            ++want_id;
        }
        live -= uint32_t(got.size());
    }
    const auto rest = r.poll(r.send_cq);
    CHECK(rest.size() == live);
    for (const Completion& c : rest) CHECK(c.wr_id == want_id++);
    CHECK(want_id == next_id);
    CHECK(r.eng.stats().cq_overflows == 1);
}
