// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Completion notification in the engine (doc/spec.md R-NOTIFY-*): a CQ armed
// for all completions or solicited-only raises one notification, then is
// disarmed; the drive loop takes them with take_cq_events. The eventfd a
// completion channel wraps is the native API's (test/perf/test_api_events.cpp).
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "engine_fixture.hpp"

using namespace mroce;
using mroce::test::Fixture;
using mroce::test::Side;

namespace {

std::vector<CqEvent> take(Engine& e) {
    std::vector<CqEvent> v;
    CqEvent ev[8];
    for (size_t n; (n = e.take_cq_events(ev, 8)) > 0;) v.insert(v.end(), ev, ev + n);
    return v;
}

struct Events : Fixture {
    uint64_t id = 1;
    Events() : Fixture(config()) {
        mroce::test::fill(a.mem, 0, 100000, 3);
    }
    static EngineConfig config() {
        EngineConfig c;
        c.max_payload = 1024;
        return c;
    }
    void recv(size_t n) {
        for (size_t i = 0; i < n; ++i) {
            RecvWr r;
            r.wr_id = 1000 + i;
            r.addr = b.addr(200000 + 5000 * (id + i));
            r.length = 5000;
            r.lkey = b.mr.lkey;
            REQUIRE(b.eng.post_recv(cb, 7, r) == Status::ok);
        }
    }
    // A -> B: op of len bytes; completes at A (and, if it consumes a receive, at B).
    void send(OpKind op, bool solicited, uint32_t len = 3000) {
        SendWr w;
        w.wr_id = id++;
        w.op = op;
        w.local_addr = a.addr(0);
        w.length = len;
        w.lkey = a.mr.lkey;
        w.remote_addr = b.addr(500000);
        w.rkey = b.mr.rkey;
        w.solicited = solicited;
        REQUIRE(a.eng.post_send(ca, 7, w) == Status::ok);
        const bool at_b = op == OpKind::send || op == OpKind::send_imm || op == OpKind::write_imm;
        REQUIRE(wait(a, 1).size() == 1);
        if (at_b) REQUIRE(wait(b, 1).size() == 1);
    }
    // B -> A WRITE: a send completion at B (a bad lkey: also its stream's
    // posted receives, flushed, R-STREAM-2).
    void b_write(uint32_t lkey_xor = 0) {
        SendWr w;
        w.wr_id = id++;
        w.op = OpKind::write;
        w.local_addr = b.addr(0);
        w.length = 100;
        w.lkey = b.mr.lkey ^ lkey_xor;
        w.remote_addr = a.addr(600000);
        w.rkey = a.mr.rkey;
        REQUIRE(b.eng.post_send(cb, 7, w) == Status::ok);
        REQUIRE(wait(b, 1).size() >= 1);
    }
};

}  // namespace

TEST_CASE("cq events: none unless armed; armed for all, one per arming (R-NOTIFY-1)", "[engine][notify]") {
    Events f;
    f.recv(8);
    f.send(OpKind::send, true);
    f.b_write();
    CHECK(take(f.b.eng).empty());  // never armed: nothing, solicited or not
    CHECK(take(f.a.eng).empty());

    REQUIRE(f.b.eng.req_notify_cq(f.b.cq, false) == Status::ok);
    REQUIRE(f.b.eng.req_notify_cq(f.b.cq, false) == Status::ok);  // armed twice: still one notification
    CHECK(take(f.b.eng).empty());  // arming raises nothing by itself
    f.send(OpKind::send, false);
    auto ev = take(f.b.eng);
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].cq == f.b.cq);
    CHECK(ev[0].events == 1);
    f.send(OpKind::send, false);  // one-shot: disarmed now
    f.b_write();
    CHECK(take(f.b.eng).empty());

    // Re-armed: a send completion raises one too. Two arm-and-fire rounds
    // before the loop looks: one record, two events.
    REQUIRE(f.b.eng.req_notify_cq(f.b.cq, false) == Status::ok);
    f.b_write();
    REQUIRE(f.b.eng.req_notify_cq(f.b.cq, false) == Status::ok);
    f.send(OpKind::write_imm, false);
    ev = take(f.b.eng);
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].events == 2);
    CHECK(take(f.b.eng).empty());
    CHECK(f.b.eng.req_notify_cq(0, false) == Status::no_such_object);
    CHECK(f.b.eng.req_notify_cq(f.b.cq + 1, true) == Status::no_such_object);
}

// verbs ibv_req_notify_cq(solicited_only): a receive completion of a message
// sent solicited (SEND, SEND_IMM, WRITE_IMM), or any error completion.
TEST_CASE("cq events: solicited-only arming (R-NOTIFY-1)", "[engine][notify]") {
    Events f;
    f.recv(8);
    REQUIRE(f.b.eng.req_notify_cq(f.b.cq, true) == Status::ok);
    f.send(OpKind::send, false);       // unsolicited receive
    f.send(OpKind::write, true);       // no receive: the flag is not sent (R-DATA-9)
    f.b_write();                       // a successful send completion
    CHECK(take(f.b.eng).empty());
    f.send(OpKind::send_imm, true);
    auto ev = take(f.b.eng);
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].events == 1);
    f.send(OpKind::send, true);        // disarmed
    CHECK(take(f.b.eng).empty());

    REQUIRE(f.b.eng.req_notify_cq(f.b.cq, true) == Status::ok);
    f.send(OpKind::write_imm, true, 5000);  // five segments, every one solicited (R-DATA-5)
    CHECK(take(f.b.eng).size() == 1);

    // Armed for all, then solicited-only: the wider arming stays.
    REQUIRE(f.b.eng.req_notify_cq(f.b.cq, false) == Status::ok);
    REQUIRE(f.b.eng.req_notify_cq(f.b.cq, true) == Status::ok);
    f.b_write();
    CHECK(take(f.b.eng).size() == 1);
    // Solicited-only, then for all: widened.
    REQUIRE(f.b.eng.req_notify_cq(f.b.cq, true) == Status::ok);
    REQUIRE(f.b.eng.req_notify_cq(f.b.cq, false) == Status::ok);
    f.b_write();
    CHECK(take(f.b.eng).size() == 1);

    // An error completion is solicited: a send with a bad lkey (loc_prot_err at post).
    REQUIRE(f.b.eng.req_notify_cq(f.b.cq, true) == Status::ok);
    f.b_write(0x100);
    ev = take(f.b.eng);
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].cq == f.b.cq);
    CHECK(ev[0].events == 1);  // the flushed receives after it: disarmed by then
}

// Several CQs: each raises its own, and the loop sees them in firing order.
TEST_CASE("cq events: CQs fire independently, in order (R-NOTIFY-2)", "[engine][notify]") {
    EngineConfig cfg;
    Side a(cfg), b(cfg);
    mroce::test::PairLink link(a.eng, b.eng);
    uint32_t ca = 0, cb = 0;
    REQUIRE(mroce::test::connect_pair(link, ca, cb));
    uint32_t b_send = 0, b_recv = 0;
    REQUIRE(b.eng.create_cq(64, b_send) == Status::ok);
    REQUIRE(b.eng.create_cq(64, b_recv) == Status::ok);
    REQUIRE(a.eng.create_stream(ca, 1, a.pd, a.cq, a.cq) == Status::ok);
    REQUIRE(b.eng.create_stream(cb, 1, b.pd, b_send, b_recv) == Status::ok);
    for (uint32_t q : {b.cq, b_send, b_recv}) REQUIRE(b.eng.req_notify_cq(q, false) == Status::ok);
    RecvWr r{1, b.addr(0), 100, b.mr.lkey};
    REQUIRE(b.eng.post_recv(cb, 1, r) == Status::ok);
    SendWr s;
    s.op = OpKind::send;
    s.local_addr = a.addr(0);
    s.length = 10;
    s.lkey = a.mr.lkey;
    REQUIRE(a.eng.post_send(ca, 1, s) == Status::ok);
    Completion c[4];
    size_t got = 0;  // run() asks its predicate once more when it holds
    REQUIRE(link.run([&] { return (got += b.eng.poll_cq(b_recv, c, 4)) == 1; }, 1'000'000'000));
    SendWr w;
    w.op = OpKind::write;
    w.local_addr = b.addr(0);
    w.length = 10;
    w.lkey = b.mr.lkey;
    w.remote_addr = a.addr(0);
    w.rkey = a.mr.rkey;
    REQUIRE(b.eng.post_send(cb, 1, w) == Status::ok);
    got = 0;
    REQUIRE(link.run([&] { return (got += b.eng.poll_cq(b_send, c, 4)) == 1; }, 1'000'000'000));
    const auto ev = take(b.eng);
    REQUIRE(ev.size() == 2);
    CHECK(ev[0].cq == b_recv);
    CHECK(ev[1].cq == b_send);
    CHECK(b.eng.poll_cq(b.cq, c, 4) == 0);  // b.cq: armed, never fired
}
