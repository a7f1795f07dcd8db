// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The congestion-control core as its own stage (R-CC-8, doc/architecture.md
// 4.2): the engine reads windows only from the CcViews it is given, feeds
// CcFeedback records in order, drops and counts what nobody takes, and
// ignores views of a path incarnation that is gone.
#include <catch2/catch.hpp>

#include <vector>

#include "pair_link.hpp"

using namespace mroce;
using mroce::test::PairLink;

namespace {

struct Pair {
    EngineConfig cfg;
    std::unique_ptr<Engine> a, b;
    std::vector<uint8_t> ma, mb;
    MrInfo mra{}, mrb{};
    uint32_t cqa = 0, cqb = 0, ca = 0, cb = 0;
    std::unique_ptr<PairLink> link;

    explicit Pair(const EngineConfig& c) : cfg(c), ma(4 << 20), mb(4 << 20) {
        a = std::make_unique<Engine>(cfg);
        b = std::make_unique<Engine>(cfg);
        const uint32_t pda = a->alloc_pd(), pdb = b->alloc_pd();
        REQUIRE(a->create_cq(4096, cqa) == Status::ok);
        REQUIRE(b->create_cq(4096, cqb) == Status::ok);
        REQUIRE(a->register_mr(pda, ma.data(), ma.size(), kAccessLocalWrite, mra) == Status::ok);
        REQUIRE(b->register_mr(pdb, mb.data(), mb.size(), kAccessLocalWrite | kAccessRemoteWrite, mrb) == Status::ok);
        link = std::make_unique<PairLink>(*a, *b, 5);
        REQUIRE(mroce::test::connect_pair(*link, ca, cb));
        REQUIRE(a->create_stream(ca, 1, pda, cqa, cqa) == Status::ok);
        REQUIRE(b->create_stream(cb, 1, pdb, cqb, cqb) == Status::ok);
    }
    // One WRITE of len bytes A -> B, run to its completion.
    void write(uint32_t len, uint64_t id) {
        for (size_t i = 0; i < len; ++i) ma[i] = uint8_t(i * 7 + id);
        SendWr wr;
        wr.wr_id = id;
        wr.op = OpKind::write;
        wr.local_addr = uint64_t(reinterpret_cast<uintptr_t>(ma.data()));
        wr.length = len;
        wr.lkey = mra.lkey;
        wr.remote_addr = uint64_t(reinterpret_cast<uintptr_t>(mb.data()));
        wr.rkey = mrb.rkey;
        REQUIRE(a->post_send(ca, 1, wr) == Status::ok);
        bool done = false;
        REQUIRE(link->run(
            [&] {
                Completion c[8];
                for (size_t i = 0, n = a->poll_cq(cqa, c, 8); i < n; ++i) {
                    CHECK(c[i].status == WcStatus::success);
                    done |= c[i].wr_id == id;
                }
                return done;
            },
            10'000'000'000ull));
        CHECK(std::memcmp(ma.data(), mb.data(), len) == 0);
    }
    double cwnd(uint16_t path = 0) {
        PathStats ps;
        REQUIRE(a->path_stats(ca, path, ps) == Status::ok);
        return ps.cwnd;
    }
};

}  // namespace

TEST_CASE("offloaded CC: the scheduler runs on published views only (R-CC-8)", "[engine][cc-stage]") {
    EngineConfig cfg;
    cfg.offload_cc = true;
    cfg.num_paths = 1;
    cfg.rate_hints = false;
    cfg.cc.init_cwnd = 8;
    cfg.cc_depth = 64;
    Pair p(cfg);
    // Nobody takes the feedback: the window stays what was published at the
    // path's creation, whatever the acks said, and records beyond cc_depth
    // are dropped and counted, not written anywhere.
    p.write(4 << 20, 1);  // 1024 packets, far more acks than cc_depth
    CHECK(p.cwnd() == 8);
    CHECK(p.a->cc_feedback_waiting() == 64);
    CHECK(p.a->stats().cc_feedback == 64);
    CHECK(p.a->stats().cc_feedback_full > 0);

    // A CC core fed those records publishes a grown window, and only then
    // does the engine schedule on it.
    CcCore core(p.a->config().cc);
    std::vector<CcFeedback> fb(64);
    REQUIRE(p.a->take_cc_feedback(fb.data(), fb.size()) == 64);
    CHECK(p.a->cc_feedback_waiting() == 0);
    for (const CcFeedback& f : fb) CHECK(f.kind == CcEvent::ack);
    std::vector<CcView> views(fb.size());
    core.apply(fb.data(), fb.size(), views.data());
    CHECK(views.back().cwnd > 8);
    p.a->cc_update(views.data(), views.size());
    CHECK(p.cwnd() == views.back().cwnd);

    // A view of an incarnation of the path that is gone (a revived path, a
    // reused connection slot) changes nothing, nor one for no connection.
    CcView old = views.back();
    old.gen += 1;
    old.cwnd = 2;
    CcView nowhere = views.back();
    nowhere.slot = 1000 * cfg.num_paths;
    const uint64_t stale0 = p.a->stats().cc_views_stale;
    p.a->cc_update(&old, 1);
    p.a->cc_update(&nowhere, 1);
    CHECK(p.a->stats().cc_views_stale == stale0 + 2);
    CHECK(p.cwnd() == views.back().cwnd);
}

TEST_CASE("CC core: records in order give the window PathWindow computes; a new gen restarts the slot (R-CC-8)",
          "[cc-stage]") {
    CcConfig cfg;
    cfg.init_cwnd = 16;
    CcCore core(cfg);
    PathWindow ref(cfg);
    CcFeedback f;
    f.slot = 5;
    f.gen = 9;
    uint32_t psn = 0;
    CcView v;
    for (int i = 0; i < 200; ++i) {
        f.kind = CcEvent::ack;
        f.acked = 4;
        f.marked = (i % 17 == 3) ? 2 : 0;
        f.losses = (i % 29 == 7) ? 1 : 0;
        f.rtt = 10'000 + uint32_t(i);
        psn += 4;
        f.ack_psn = psn;
        f.snd_nxt = psn + 16;
        for (int k = 0; k < f.losses; ++k) ref.on_loss();
        ref.on_rtt(f.rtt);
        ref.on_ack(f.acked, f.marked, f.ack_psn, f.snd_nxt);
        ref.set_limit(0);
        v = core.apply_one(f);
        REQUIRE(v.cwnd == ref.cwnd());
        REQUIRE(v.rounds == ref.rounds());
        REQUIRE(v.rounds_since_mark == ref.rounds_since_mark());
    }
    CHECK(v.slot == 5);
    CHECK(v.gen == 9);
    CHECK(v.cuts > 0);
    f.kind = CcEvent::timeout;
    CHECK(core.apply_one(f).cwnd == cfg.min_cwnd);
    // The slot's next incarnation starts from a fresh window, as the engine published it.
    f.gen = 10;
    f.kind = CcEvent::reset;
    const CcView fresh = core.apply_one(f);
    CHECK(fresh.cwnd == CcCore::fresh_view(cfg, 5, 10).cwnd);
    CHECK(fresh.cwnd == 16);
    CHECK(fresh.rounds == 0);
    // The handshake's first window, clamped as PathWindow::set_initial clamps it.
    f.kind = CcEvent::initial;
    f.initial = 3.5f;
    CHECK(core.apply_one(f).cwnd == 3.5);
    CHECK(CcCore::fresh_view(cfg, 5, 10, 3.5).cwnd == 3.5);
    f.initial = 1000;
    CHECK(core.apply_one(f).cwnd == 16);
    CHECK(core.records() == 204);
}

TEST_CASE("offloaded CC: a timed-out path is held at min_cwnd before the core's view returns (R-CC-6, R-CC-8)",
          "[engine][cc-stage][timeout]") {
    EngineConfig cfg;
    cfg.offload_cc = true;
    cfg.num_paths = 2;
    cfg.rate_hints = false;
    cfg.cc.init_cwnd = 16;
    cfg.cc_depth = 4096;
    Pair p(cfg);
    // Nobody runs the CC core: the windows stay as published at creation
    // (16), so whatever path 0 sends after its timeouts is the engine's own
    // doing. Path 0 of A is a black hole.
    std::vector<uint32_t> sent_after(8, 0);  // data packets on path 0, by the path's timeouts so far
    p.link->drop_if = [&](int from, const TxPacket& t) {
        if (from != 0 || t.path != 0) return false;
        if (t.payload_len) {
            PathStats ps;
            REQUIRE(p.a->path_stats(p.ca, 0, ps) == Status::ok);
            ++sent_after[std::min<size_t>(ps.timeouts, 7)];
        }
        return true;
    };
    p.write(1 << 20, 1);  // completes on path 1
    PathStats ps;
    REQUIRE(p.a->path_stats(p.ca, 0, ps) == Status::ok);
    REQUIRE(ps.timeouts >= 2);
    CHECK(sent_after[0] >= 16);  // the first flight, at the published window
    // After each timeout the path sends at most min_cwnd (1) packet until the
    // next one: not the published 16 (the resends go to path 1, R-TIMER-2).
    CHECK(sent_after[1] <= 1);
    CHECK(sent_after[2] <= 1);
    CHECK(p.cwnd(0) == cfg.cc.min_cwnd);

    // Views the core published before it applied the timeout (still on the
    // ring) do not reopen the window; the one after it does.
    CcCore core(cfg.cc);
    std::vector<CcFeedback> fb(4096);
    const size_t n = p.a->take_cc_feedback(fb.data(), fb.size());
    REQUIRE(n > 0);
    std::vector<CcView> views(n);
    core.apply(fb.data(), n, views.data());
    // Path 0 saw no acks: its records are its timeouts, and the core's view
    // after them carries their count.
    const CcView* last0 = nullptr;
    for (size_t i = 0; i < n; ++i)
        if (fb[i].kind == CcEvent::timeout) last0 = &views[i];
    REQUIRE(last0 != nullptr);
    CHECK(last0->timeouts == ps.timeouts);
    CHECK(last0->cwnd == cfg.cc.min_cwnd);
    CcView before = *last0;  // what the core published for path 0 before its first timeout
    before.timeouts = 0;
    before.cwnd = 16;
    p.a->cc_update(&before, 1);
    CHECK(p.cwnd(0) == cfg.cc.min_cwnd);
    CcView caught_up = *last0;
    caught_up.cwnd = 5;  // e.g. grown again from acks after the timeouts
    p.a->cc_update(&caught_up, 1);
    CHECK(p.cwnd(0) == 5);
}
