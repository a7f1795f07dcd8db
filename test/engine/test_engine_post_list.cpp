// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Engine::post_sends (a WR list in one call, doc/performance.md 7.3 round 32)
// against post_send called for each WR: the same statuses, counts and
// completions for lists that mix the common case with every way a WR can
// fail at post (R-MEM-4 keys and bounds, R-SEG-5, R-STREAM-9, unknown
// connection or stream), keys deregistered and registered again between
// lists (R-MEM-2, R-KEY-1), and streams named in turn (the list's fast path
// tests the connection and the stream once per run of WRs).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

#include "engine_fixture.hpp"

using namespace mroce;
using namespace mroce::test;

namespace {

struct Outcome {
    std::vector<std::pair<Status, size_t>> posts;                   // per list: status, WRs posted
    std::vector<std::tuple<uint64_t, uint32_t, WcStatus>> cpl;     // wr_id, stream, status
};

Outcome run_script(bool as_list) {
    Fixture f;
    Side& a = f.a;
    Side& b = f.b;
    for (uint32_t id : {8u, 9u, 11u, 12u}) {
        REQUIRE(a.eng.create_stream(f.ca, id, a.pd, a.cq, a.cq) == Status::ok);
        REQUIRE(b.eng.create_stream(f.cb, id, b.pd, b.cq, b.cq) == Status::ok);
    }
    StreamAttr shallow;
    shallow.pd = a.pd;
    shallow.send_cq = shallow.recv_cq = a.cq;
    shallow.send_depth = 4;
    REQUIRE(a.eng.create_stream(f.ca, 10, shallow) == Status::ok);
    REQUIRE(b.eng.create_stream(f.cb, 10, b.pd, b.cq, b.cq) == Status::ok);

    // A second buffer whose region is registered, deregistered and registered
    // again: its first key is stale from then on.
    std::vector<uint8_t> buf2(4096);
    MrInfo r2{}, r3{}, r4{};
    REQUIRE(a.eng.register_mr(a.pd, buf2.data(), buf2.size(), kAccessLocalWrite, r2) == Status::ok);
    REQUIRE(a.eng.deregister_mr(r2.lkey) == Status::ok);
    REQUIRE(a.eng.register_mr(a.pd, buf2.data(), buf2.size(), kAccessLocalWrite, r3) == Status::ok);
    REQUIRE(r3.lkey != r2.lkey);
    const uint64_t b2 = uint64_t(reinterpret_cast<uintptr_t>(buf2.data()));

    Outcome out;
    uint64_t next_id = 1;
    const auto wr = [&](uint64_t laddr, uint32_t len, uint32_t lkey) {
        SendWr w;
        w.wr_id = next_id++;
        w.op = OpKind::write;
        w.local_addr = laddr;
        w.length = len;
        w.lkey = lkey;
        w.remote_addr = b.addr(4096);
        w.rkey = b.mr.rkey;
        return w;
    };
    const auto post = [&](uint32_t conn, uint32_t stream, const std::vector<SendWr>& l) {
        size_t posted = 0;
        Status s = Status::ok;
        if (as_list) {
            s = a.eng.post_sends(conn, stream, l.data(), l.size(), posted);
        } else {
            while (posted < l.size() && (s = a.eng.post_send(conn, stream, l[posted])) == Status::ok) ++posted;
        }
        out.posts.emplace_back(s, posted);
    };
    const size_t end = a.mem.size();
    const uint32_t lk = a.mr.lkey;

    // A region's last bytes exactly, one byte beyond its end, one before its start (R-MEM-4).
    post(f.ca, 7, {wr(a.addr(0), 64, lk), wr(a.addr(64), 64, lk), wr(a.addr(end - 64), 64, lk), wr(a.addr(128), 64, lk)});
    post(f.ca, 8, {wr(a.addr(0), 64, lk), wr(a.addr(end - 63), 64, lk), wr(a.addr(0), 64, lk)});
    post(f.ca, 9, {wr(b2 + 4096 - 1, 1, r3.lkey), wr(b2 - 1, 2, r3.lkey), wr(b2, 8, r3.lkey)});
    // R-SEG-5 in the middle of a list: refused, the list stops there.
    post(f.ca, 7, {wr(a.addr(0), 64, lk), wr(a.addr(0), kMaxMessageSize + 1, lk), wr(a.addr(0), 64, lk)});
    // A key deregistered before the list, the live key of the same buffer before it.
    post(f.ca, 11, {wr(b2, 8, r3.lkey), wr(b2, 8, r2.lkey)});
    // The live key, then deregistered and registered again between two lists:
    // the old key must fail in the second, between two WRs of the new one.
    post(f.ca, 12, {wr(b2, 8, r3.lkey), wr(b2, 8, r3.lkey)});
    REQUIRE(a.eng.deregister_mr(r3.lkey) == Status::ok);
    REQUIRE(a.eng.register_mr(a.pd, buf2.data(), buf2.size(), kAccessLocalWrite, r4) == Status::ok);
    post(f.ca, 12, {wr(b2, 8, r4.lkey), wr(b2, 8, r3.lkey), wr(b2, 8, r4.lkey)});
    // A full send queue in the middle of a list (R-STREAM-9: stream 10's depth is 4).
    post(f.ca, 10, {wr(a.addr(0), 64, lk), wr(a.addr(0), 64, lk), wr(a.addr(0), 64, lk), wr(a.addr(0), 64, lk),
                    wr(a.addr(0), 64, lk), wr(a.addr(0), 64, lk)});
    // No such connection, no such stream: nothing posted; an empty list.
    post(f.ca + 0x1000, 7, {wr(a.addr(0), 64, lk)});
    post(f.ca, 77, {wr(a.addr(0), 64, lk)});
    post(f.ca, 7, {});

    f.link.run([] { return false; }, 200'000'000);  // every completion in
    Completion c[64];
    for (size_t n; (n = a.eng.poll_cq(a.cq, c, 64)) > 0;)
        for (size_t i = 0; i < n; ++i) out.cpl.emplace_back(c[i].wr_id, c[i].stream, c[i].status);
    return out;
}

}  // namespace

TEST_CASE("post_sends: as post_send for each WR, hostile lists included", "[engine][post_list]") {
    const Outcome one = run_script(false);
    const Outcome list = run_script(true);
    CHECK(list.posts == one.posts);
    CHECK(list.cpl == one.cpl);

    const std::vector<std::pair<Status, size_t>> want_posts = {
        {Status::ok, 4}, {Status::ok, 3}, {Status::ok, 3}, {Status::message_too_long, 1}, {Status::ok, 2},
        {Status::ok, 2}, {Status::ok, 3}, {Status::queue_full, 4}, {Status::no_such_object, 0},
        {Status::no_such_object, 0}, {Status::ok, 0}};
    CHECK(list.posts == want_posts);
    // Every WR posted completes once, with what R-MEM-4 and R-STREAM-2 say
    // (no list is transmitted before the next is posted, so a failure also
    // flushes the WRs before it on its stream: their segments were not sent).
    const auto S = WcStatus::success, P = WcStatus::loc_prot_err, F = WcStatus::wr_flush_err;
    const std::vector<std::pair<uint64_t, WcStatus>> want = {
        {1, S}, {2, S}, {3, S}, {4, S},  // the region's last 64 bytes are in it
        {5, F}, {6, P}, {7, F},          // one byte beyond its end
        {8, F}, {9, P}, {10, F},         // one byte before the second region's start (8: its last byte)
        {11, S},                         // 12 refused at post (R-SEG-5), 13 not posted
        {14, F}, {15, P},                // a key deregistered before the list
        {16, F}, {17, F}, {18, F}, {19, P}, {20, F},  // the old key after the region's new registration
        {21, S}, {22, S}, {23, S}, {24, S}};          // 25 finds the queue full, 26 not posted
    std::vector<std::pair<uint64_t, WcStatus>> got;
    for (const auto& [id, stream, st] : list.cpl) got.emplace_back(id, st);
    std::sort(got.begin(), got.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    CHECK(got == want);
}
