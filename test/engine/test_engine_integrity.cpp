// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Data integrity under loss, reordering and duplication: random messages of
// every operation, 1/8/64 streams over 1/4/16 paths, 0/1/10/30% loss. Every
// byte checked, every completion exactly once and in stream order
// (doc/spec.md R-SACK-4, R-CSN-3, R-CMPL-1..3, R-ATOMIC-2). The same matrix
// runs in both arrangements of doc/architecture.md 4: run to completion
// (copies and congestion control inline) and pipeline (deferred placement,
// copies on a worker thread per engine, taking virtual time; the CC core on
// another thread per engine, R-CC-8). A wrap axis runs queue depths that
// are not powers of two (3, 500, 1000) with every counter started just below
// 2^32 (R-WRAP-1): posting waits for room, as a verbs program's does. A
// scatter/gather variant gives every WR a random list of 1..16 entries (odd
// sizes, zero-length ones, entries out of address order with gaps between
// them) on both sides, and delivers datagrams in two spans cut at random
// (R-SGE-*); the gaps must stay untouched. An inline variant posts most
// SEND/WRITE WRs of up to max_inline bytes inline (R-INLINE-1: no lkey, some
// from lists) and overwrites their source right after post_send: the
// destination must hold the bytes as they were at post.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <vector>

#include "pair_link.hpp"

using namespace mroce;
using mroce::test::PairLink;
using mroce::test::SplitMix;
using mroce::test::fnv;

namespace {

// Hostile responder axis: one protection error per stream, at a random WR.
enum class Fault : uint8_t { none, bad_rkey, out_of_range, bad_recv_lkey, short_recv };

// A piece of a scatter/gather list: len bytes at off in one side's memory.
struct Piece {
    size_t off;
    uint32_t len;
};

struct Msg {
    OpKind op;
    Fault fault = Fault::none;
    uint32_t len;
    size_t src_off;    // in the side that holds the source bytes
    size_t dst_off;
    uint64_t wr_id;
    uint64_t atomic_init = 0, atomic_a = 0, atomic_b = 0;
    // Scatter/gather variant: the source's list (A's for sends) and the
    // destination's (a receive's, a READ's); empty: the one buffer at
    // src_off / dst_off.
    std::vector<Piece> src_sg, dst_sg;
    size_t dst_span = 0;  // bytes the destination list takes from dst_off
    bool inline_data = false;     // inline variant: posted inline, source overwritten after post
    std::vector<uint8_t> posted;  // inline: the source bytes when it was posted
};

enum class Arrangement { run_to_completion, pipeline };
enum class Layout { buffers, sg_lists, inline_sends };

// A random list for len + extra bytes from base on: 1..16 entries of random
// (odd, some zero) lengths, laid out in a shuffled order with gaps of 0..40
// bytes between them. Returns the span it covers. extra: a receive longer
// than its SEND.
size_t random_list(SplitMix& rng, size_t base, uint32_t len, uint32_t extra, std::vector<Piece>& out) {
    const uint32_t total = len + extra;
    const uint32_t k = 1 + uint32_t(rng.next() % 16);
    std::vector<uint32_t> cuts{0, total};
    for (uint32_t i = 1; i < k; ++i) cuts.push_back(total ? uint32_t(rng.next() % (total + 1)) : 0);
    std::sort(cuts.begin(), cuts.end());
    std::vector<uint32_t> lens;
    for (uint32_t i = 0; i + 1 < cuts.size(); ++i) lens.push_back(cuts[i + 1] - cuts[i]);
    std::vector<uint32_t> order(lens.size());
    std::iota(order.begin(), order.end(), 0u);
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.next() % i]);
    out.assign(lens.size(), Piece{});
    size_t pos = base;
    for (const uint32_t i : order) {
        pos += rng.next() % 41;
        out[i] = Piece{pos, lens[i]};
        pos += lens[i];
    }
    return pos - base;
}
constexpr size_t kListSlack = 16 * 40 + 100;  // the most a list's span exceeds its message

std::vector<Sge> to_sge(const std::vector<Piece>& l, uint64_t base, uint32_t lkey) {
    std::vector<Sge> v;
    for (const Piece& p : l) v.push_back(Sge{base + p.off, p.len, lkey});
    return v;
}

// The bytes a message's buffer holds: the first len bytes of its list in
// list order, or of the one buffer at off.
std::vector<uint8_t> bytes(const std::vector<uint8_t>& mem, const std::vector<Piece>& l, size_t off, size_t len) {
    if (l.empty()) return std::vector<uint8_t>(mem.begin() + long(off), mem.begin() + long(off + len));
    std::vector<uint8_t> v;
    for (const Piece& p : l) {
        const size_t k = std::min<size_t>(p.len, len - v.size());
        v.insert(v.end(), mem.begin() + long(p.off), mem.begin() + long(p.off + k));
        if (v.size() == len) break;
    }
    return v;
}

uint64_t digest(const std::vector<uint8_t>& v) { return fnv(v.data(), v.size()); }

// Clears covered[] over [from, from + span) except the first len bytes of list l:
// its gaps and, for a receive longer than its SEND, its unused tail.
void mark_unwritten(std::vector<uint8_t>& covered, size_t from, size_t span, const std::vector<Piece>& l,
                    size_t len) {
    for (size_t i = from; i < from + span; ++i) covered[i] = 0;
    for (const Piece& p : l) {
        const size_t k = std::min<size_t>(p.len, len);
        for (size_t i = p.off; i < p.off + k; ++i) covered[i] = 1;
        len -= k;
    }
}

// Queue depths and where the counters start (R-WRAP-1). The default is the
// matrix's own; the wrap axis gives depths that are not powers of two and
// starts msg_seq, recv_seq and every queue and CQ counter below 2^32, so
// they wrap while the queues are full.
struct Shape {
    uint32_t depth = 256;       // stream_depth and recv_depth; the CQs hold depth * streams
    uint32_t per_stream = 0;    // messages per stream; 0: max(4, 160 / streams)
    bool wrap = false;
    // At a random WR of most streams: a bad rkey or an out-of-range address
    // (R-MEM-3), or for a SEND a receive with a bad lkey (R-SEND-7) or too
    // short (R-SEND-5). That WR fails with its own status, everything after
    // it flushes, nothing after it executes (R-ACK-8, R-STREAM-2, R-STREAM-8).
    bool hostile = false;
    Layout layout = Layout::buffers;
    uint16_t max_payload = 4096;
};

void run_matrix(uint32_t nstreams, uint16_t npaths, double loss, uint64_t seed,
                Arrangement arr = Arrangement::run_to_completion, Shape shape = {}) {
    const bool pipeline = arr == Arrangement::pipeline;
    const uint32_t per_stream = shape.per_stream ? shape.per_stream : std::max<uint32_t>(4, 160 / nstreams);
    const bool lists = shape.layout == Layout::sg_lists;
    const bool inlines = shape.layout == Layout::inline_sends;
    EngineConfig cfg;
    cfg.max_send_sge = 16;
    cfg.max_recv_sge = 16;
    cfg.deferred_placement = pipeline;
    cfg.offload_cc = pipeline;
    cfg.num_paths = npaths;
    cfg.max_payload = shape.max_payload;
    if (shape.max_payload < 512) cfg.place_inline_max = 32;  // small segments still reach the placement stage
    cfg.stream_depth = shape.depth;
    cfg.recv_depth = shape.depth;
    // About 3/7 of the messages consume a receive: the counters start half
    // of that below 2^32 (at most 150), so recv_seq wraps too.
    if (shape.wrap) cfg.test_seq_base = 0u - std::min<uint32_t>(per_stream * 3 / 14, 150);
    cfg.conn_timeout = 60'000'000'000ull;  // 30% loss with unlucky streaks must not kill the connection
    cfg.connect_retry = 1'000'000;
    const size_t kMem = (shape.wrap ? 48u : 24u) << 20;
    Engine ea(cfg), eb(cfg);
    std::vector<uint8_t> ma(kMem), mb(kMem);
    const uint32_t pda = ea.alloc_pd(), pdb = eb.alloc_pd();
    uint32_t cqa, cqb;
    const uint32_t cq_depth = shape.wrap ? shape.depth * nstreams : 1u << 16;
    REQUIRE(ea.create_cq(cq_depth, cqa) == Status::ok);
    REQUIRE(eb.create_cq(cq_depth, cqb) == Status::ok);
    const uint32_t all = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    MrInfo mra, mrb;
    REQUIRE(ea.register_mr(pda, ma.data(), kMem, all, mra) == Status::ok);
    REQUIRE(eb.register_mr(pdb, mb.data(), kMem, all, mrb) == Status::ok);
    const uint64_t base_a = uint64_t(reinterpret_cast<uintptr_t>(ma.data()));
    const uint64_t base_b = uint64_t(reinterpret_cast<uintptr_t>(mb.data()));

    PairLink link(ea, eb, seed);
    link.loss = loss;
    link.dup = 0.02;
    if (pipeline) {
        link.enable_pipeline(0);
        link.enable_pipeline(1);
        link.enable_cc_stage(0);
        link.enable_cc_stage(1);
        link.place_latency = 1500;  // below the wire delay: copies overlap later arrivals and acks
    }
    SplitMix cut_rng(seed * 13 + 5);
    if (lists) {
        // Two spans, cut anywhere after the header: payloads straddle receive entries and spans at once.
        link.split_at = [&](int, const std::vector<uint8_t>& d) -> uint32_t {
            if (d.size() <= wire::kDataLen || d[1] != uint8_t(wire::PacketType::data)) return 0;
            return uint32_t(wire::kDataLen + cut_rng.next() % (d.size() - wire::kDataLen));
        };
    }
    uint32_t ca, cb;
    REQUIRE(mroce::test::connect_pair(link, ca, cb));
    for (uint32_t s = 0; s < nstreams; ++s) {
        REQUIRE(ea.create_stream(ca, 1000 + s, pda, cqa, cqa) == Status::ok);
        REQUIRE(eb.create_stream(cb, 1000 + s, pdb, cqb, cqb) == Status::ok);
    }

    SplitMix rng(seed * 77 + 1);
    for (size_t i = 0; i < kMem; i += 8) {
        const uint64_t v = rng.next();
        std::memcpy(ma.data() + i, &v, 8);
        std::memcpy(mb.data() + i, &v, 8);
    }
    for (size_t i = 0; i < kMem; ++i) mb[i] ^= 0x5a;

    const uint32_t budget_per_stream = uint32_t((kMem / 2 - 65536) / nstreams);
    std::vector<std::vector<Msg>> msgs(nstreams);
    size_t bump = 0;  // same offsets used on both sides: source on one, destination on the other
    uint64_t next_id = 1;
    for (uint32_t s = 0; s < nstreams; ++s) {
        size_t used = 0;
        for (uint32_t k = 0; k < per_stream; ++k) {
            Msg m;
            const uint32_t r = uint32_t(rng.next() % 7);
            m.op = OpKind(r);
            const uint32_t cls = uint32_t(rng.next() % 10);
            m.len = cls == 0 ? 0 : cls < 6 ? uint32_t(rng.next() % 4200) : uint32_t(rng.next() % 40000);
            const bool atomic = m.op == OpKind::atomic_cas || m.op == OpKind::atomic_fadd;
            if (atomic) m.len = 8;
            if (inlines && !atomic && m.op != OpKind::read && rng.next() % 10 < 7) {
                m.inline_data = true;
                m.len = uint32_t(rng.next() % 257);  // up to the default max_inline
            }
            if (used + m.len + (lists ? kListSlack : 0) + 16 > budget_per_stream) m.len = 0;
            bump = (bump + 7) & ~size_t(7);
            m.src_off = bump;
            m.dst_off = bump + kMem / 2;
            size_t span = m.len;
            if (m.inline_data && (rng.next() & 1)) {
                span = random_list(rng, m.src_off, m.len, 0, m.src_sg);  // inline from a list
            } else if (lists && atomic) {
                if (rng.next() & 1) m.src_sg.push_back(Piece{m.src_off, 8});  // a one-entry list of the 8 bytes
            } else if (lists && m.op == OpKind::read) {
                m.dst_span = random_list(rng, m.dst_off, m.len, 0, m.dst_sg);  // A scatters B's bytes
                span = m.dst_span;
            } else if (lists) {
                span = random_list(rng, m.src_off, m.len, 0, m.src_sg);
                if (m.op == OpKind::send || m.op == OpKind::send_imm) {
                    m.dst_span = random_list(rng, m.dst_off, m.len, uint32_t(rng.next() % 101), m.dst_sg);
                    span = std::max(span, m.dst_span);
                }
            }
            bump += span + 8;
            used += span + 8;
            m.wr_id = next_id++;
            msgs[s].push_back(m);
        }
        if (shape.hostile && rng.next() % 4 != 0) {
            Msg& m = msgs[s][rng.next() % per_stream];
            const bool alt = (rng.next() & 1) != 0;
            if (m.op == OpKind::send || m.op == OpKind::send_imm) {
                if (m.len == 0) m.len = 1;  // a 0-byte receive has no buffer to be bad (R-MEM-4)
                m.fault = alt && m.len > 1 ? Fault::short_recv : Fault::bad_recv_lkey;
            } else {
                m.fault = alt && m.len > 0 ? Fault::out_of_range : Fault::bad_rkey;
            }
        }
    }
    auto fault_of = [&](uint32_t s) {
        for (size_t k = 0; k < msgs[s].size(); ++k)
            if (msgs[s][k].fault != Fault::none) return k;
        return msgs[s].size();
    };
    // Receives in order (one per receive-consuming message), then sends in
    // order, each as far as its queue has room; the rest as room frees.
    auto consumes_recv = [](OpKind op) {
        return op == OpKind::send || op == OpKind::send_imm || op == OpKind::write_imm;
    };
    std::vector<size_t> recv_next(nstreams, 0), send_next(nstreams, 0);
    auto post_send = [&](uint32_t s, Msg& m) {
        SendWr w;
        w.wr_id = m.wr_id;
        w.op = m.op;
        w.length = m.len;
        w.imm = uint32_t(m.wr_id * 3);
        if (m.op == OpKind::read) {
            w.local_addr = base_a + m.dst_off;  // READ: bytes flow B -> A
            w.lkey = mra.lkey;
            w.remote_addr = base_b + m.src_off;
            w.rkey = mrb.rkey;
        } else if (m.op == OpKind::atomic_cas || m.op == OpKind::atomic_fadd) {
            std::memcpy(&m.atomic_init, mb.data() + m.dst_off, 8);
            m.atomic_a = (m.op == OpKind::atomic_cas && (m.wr_id & 1)) ? m.atomic_init : rng.next();
            m.atomic_b = rng.next();
            w.local_addr = base_a + m.src_off;
            w.lkey = mra.lkey;
            w.remote_addr = base_b + m.dst_off;
            w.rkey = mrb.rkey;
            w.compare_add = m.atomic_a;
            w.swap = m.atomic_b;
        } else {
            w.local_addr = base_a + m.src_off;
            w.lkey = mra.lkey;
            w.remote_addr = base_b + m.dst_off;
            w.rkey = mrb.rkey;
        }
        if (m.fault == Fault::bad_rkey) w.rkey ^= 0x00ff0000u;
        if (m.fault == Fault::out_of_range) w.remote_addr = base_b + kMem;  // just past the region
        // R-INLINE-1: no lkey is checked, so none is given.
        const uint32_t lkey = m.inline_data ? 0xbad0bad0u : mra.lkey;
        if (m.inline_data) {
            w.inline_data = true;
            w.lkey = lkey;
            m.posted = bytes(ma, m.src_sg, m.src_off, m.len);
        }
        // The list is read during post_send only: dropped right after it.
        const std::vector<Sge> sg = to_sge(m.op == OpKind::read ? m.dst_sg : m.src_sg, base_a, lkey);
        w.sg_list = sg.data();
        w.num_sge = uint32_t(sg.size());
        const Status st = ea.post_send(ca, 1000 + s, w);
        if (st == Status::ok && m.inline_data) {
            // The buffer is the application's again at once.
            if (m.src_sg.empty()) std::memset(ma.data() + m.src_off, 0xee, m.len);
            for (const Piece& p : m.src_sg) std::memset(ma.data() + p.off, 0xee, p.len);
        }
        return st;
    };
    auto post_more = [&] {
        for (uint32_t s = 0; s < nstreams; ++s) {
            for (size_t& k = recv_next[s]; k < msgs[s].size(); ++k) {
                const Msg& m = msgs[s][k];
                if (!consumes_recv(m.op)) continue;
                RecvWr r;
                r.wr_id = m.wr_id;
                r.addr = base_b + m.dst_off;
                r.length = m.op == OpKind::write_imm ? 0 : m.len;
                r.lkey = mrb.lkey;
                if (m.fault == Fault::bad_recv_lkey) r.lkey ^= 0x00ff0000u;
                if (m.fault == Fault::short_recv) r.length = m.len - 1;
                const std::vector<Sge> sg = to_sge(m.dst_sg, base_b, mrb.lkey);
                r.sg_list = sg.data();
                r.num_sge = uint32_t(sg.size());
                const Status st = eb.post_recv(cb, 1000 + s, r);
                if (st == Status::queue_full) break;
                REQUIRE(st == Status::ok);
            }
            for (size_t& k = send_next[s]; k < msgs[s].size(); ++k) {
                const Status st = post_send(s, msgs[s][k]);
                if (st == Status::queue_full) break;
                REQUIRE(st == Status::ok);
            }
        }
    };
    post_more();
    if (!shape.wrap) {
        // Depths above the message counts: everything is posted at once.
        for (uint32_t s = 0; s < nstreams; ++s) REQUIRE(send_next[s] == msgs[s].size());
    }
    // Collect completions.
    std::map<uint32_t, std::vector<Completion>> sent, recvd;
    size_t total_send = 0, total_recv = 0, want_recv = 0;
    for (auto& v : msgs)
        for (auto& m : v)
            if (consumes_recv(m.op)) ++want_recv;
    const size_t want_send = size_t(nstreams) * per_stream;
    const bool done = link.run([&] {
        Completion c[64];
        size_t k;
        while ((k = ea.poll_cq(cqa, c, 64)) > 0)
            for (size_t i = 0; i < k; ++i) { sent[c[i].stream].push_back(c[i]); ++total_send; }
        while ((k = eb.poll_cq(cqb, c, 64)) > 0)
            for (size_t i = 0; i < k; ++i) { recvd[c[i].stream].push_back(c[i]); ++total_recv; }
        post_more();
        return total_send >= want_send && total_recv >= want_recv;
    }, std::getenv("MROCE_LIMIT") ? std::strtoull(std::getenv("MROCE_LIMIT"), nullptr, 10) : 120'000'000'000ull);
    if (!done) {
        ConnStats x, y;
        ea.conn_stats(ca, x);
        eb.conn_stats(cb, y);
        WARN("A: state " << to_string(x.state) << " tx " << x.tx_data_packets << " retx " << x.retransmits
             << " dup " << x.duplicates << " naks " << x.naks_received << " rnr " << x.rnr_drops
             << " | B: rx " << y.rx_data_packets << " dup " << y.duplicates << " rnr " << y.rnr_drops
             << " naks_sent " << y.naks_sent << " stale " << eb.stats().rx_stale << " now " << link.now);
        for (uint16_t pi = 0; pi < npaths; ++pi) {
            PathStats ps;
            ea.path_stats(ca, pi, ps);
            WARN("path " << pi << " state " << int(ps.state) << " cwnd " << ps.cwnd << " inflight " << ps.inflight
                 << " tx " << ps.tx_packets << " losses " << ps.losses << " timeouts " << ps.timeouts << " rto "
                 << ps.rto);
        }
    }
    INFO("streams " << nstreams << " paths " << npaths << " loss " << loss << " sent " << total_send << "/"
                    << want_send << " recv " << total_recv << "/" << want_recv);
    REQUIRE(done);
    // Let stray duplicates drain; nothing more may complete.
    link.run([] { return false; }, 5'000'000);
    Completion extra[8];
    CHECK(ea.poll_cq(cqa, extra, 8) == 0);
    CHECK(eb.poll_cq(cqb, extra, 8) == 0);

    if (lists) {
        // R-SGE-4: bytes a destination list does not cover (its gaps, a
        // receive's tail beyond its SEND) still hold what they started with.
        std::vector<uint8_t> covered_a(kMem, 1), covered_b(kMem, 1);
        for (const auto& v : msgs)
            for (const Msg& m : v)
                if (!m.dst_sg.empty())
                    mark_unwritten(m.op == OpKind::read ? covered_a : covered_b, m.dst_off, m.dst_span, m.dst_sg,
                                   m.len);
        SplitMix again(seed * 77 + 1);  // the initial contents, as filled above
        size_t unwritten = 0, bad = 0;
        for (size_t i = 0; i < kMem; i += 8) {
            const uint64_t v = again.next();
            for (size_t j = 0; j < 8; ++j) {
                const uint8_t b = uint8_t(v >> (8 * j));
                if (!covered_a[i + j]) { ++unwritten; bad += ma[i + j] != b; }
                if (!covered_b[i + j]) { ++unwritten; bad += mb[i + j] != uint8_t(b ^ 0x5a); }
            }
        }
        CHECK(unwritten > 0);
        CHECK(bad == 0);
        CHECK(link.split_seen > 0);
    }

    for (uint32_t s = 0; s < nstreams; ++s) {
        const auto& sc = sent[1000 + s];
        REQUIRE(sc.size() == msgs[s].size());
        size_t ri = 0;
        const auto& rc = recvd[1000 + s];
        const size_t bad = fault_of(s);
        for (size_t k = 0; k < msgs[s].size(); ++k) {
            const Msg& m = msgs[s][k];
            INFO("stream " << s << " WR " << k << " op " << int(m.op) << " faulty WR " << bad);
            CHECK(sc[k].wr_id == m.wr_id);  // exactly once, in order
            if (k >= bad) {
                // R-NAK-4 for the faulty WR; R-STREAM-8 for every later one.
                static constexpr WcStatus kExpect[] = {WcStatus::wr_flush_err, WcStatus::rem_access_err,
                                                       WcStatus::rem_access_err, WcStatus::rem_op_err,
                                                       WcStatus::rem_inv_req_err};
                CHECK(to_string(sc[k].status) == to_string(kExpect[size_t(m.fault)]));
                if (consumes_recv(m.op)) {
                    // The faulty SEND reports its cause on its receive (R-SEND-5, R-SEND-7); the rest flush.
                    const WcStatus want = m.fault == Fault::bad_recv_lkey ? WcStatus::loc_prot_err
                                          : m.fault == Fault::short_recv  ? WcStatus::loc_len_err
                                                                          : WcStatus::wr_flush_err;
                    REQUIRE(ri < rc.size());
                    CHECK(rc[ri].wr_id == m.wr_id);
                    CHECK(to_string(rc[ri].status) == to_string(want));
                    ++ri;
                }
                if (m.op == OpKind::atomic_cas || m.op == OpKind::atomic_fadd) {
                    uint64_t mem;
                    std::memcpy(&mem, mb.data() + m.dst_off, 8);
                    CHECK(mem == m.atomic_init);  // nothing executes at or after the fault
                }
                continue;
            }
            CHECK(sc[k].status == WcStatus::success);
            switch (m.op) {
            case OpKind::write:
            case OpKind::write_imm:
            case OpKind::send:
            case OpKind::send_imm:
                CHECK(digest(m.inline_data ? m.posted : bytes(ma, m.src_sg, m.src_off, m.len)) ==
                      digest(bytes(mb, m.dst_sg, m.dst_off, m.len)));
                if (m.op != OpKind::write) {
                    REQUIRE(ri < rc.size());
                    CHECK(rc[ri].wr_id == m.wr_id);
                    CHECK(rc[ri].status == WcStatus::success);
                    CHECK(rc[ri].byte_len == m.len);
                    if (m.op != OpKind::send) CHECK(rc[ri].imm == uint32_t(m.wr_id * 3));
                    ++ri;
                }
                break;
            case OpKind::read:
                CHECK(digest(bytes(mb, {}, m.src_off, m.len)) == digest(bytes(ma, m.dst_sg, m.dst_off, m.len)));
                break;
            case OpKind::atomic_fadd: {
                uint64_t got, mem;
                std::memcpy(&got, ma.data() + m.src_off, 8);
                std::memcpy(&mem, mb.data() + m.dst_off, 8);
                CHECK(got == m.atomic_init);
                CHECK(mem == m.atomic_init + m.atomic_a);  // exactly once
                break;
            }
            case OpKind::atomic_cas: {
                uint64_t got, mem;
                std::memcpy(&got, ma.data() + m.src_off, 8);
                std::memcpy(&mem, mb.data() + m.dst_off, 8);
                CHECK(got == m.atomic_init);
                CHECK(mem == (m.atomic_a == m.atomic_init ? m.atomic_b : m.atomic_init));
                break;
            }
            }
        }
        CHECK(ri == rc.size());
    }
    CHECK(ea.stats().cq_overflows + eb.stats().cq_overflows == 0);  // the CQs were sized for the depths
    if (shape.hostile) {
        size_t faults = 0;
        for (uint32_t s = 0; s < nstreams; ++s) faults += fault_of(s) < msgs[s].size();
        ConnStats sb;
        REQUIRE(eb.conn_stats(cb, sb) == Status::ok);
        CHECK((faults > 0) == (sb.naks_sent > 0));
        if (nstreams >= 8) CHECK(faults > 0);
    }
    ConnStats st;
    REQUIRE(ea.conn_stats(ca, st) == Status::ok);
    if (loss >= 0.1) CHECK(st.retransmits > 0);  // at 1% a small run may lose only control packets
    if (pipeline) {
        // Every copy went through the workers (B places requests, A READ responses).
        link.finish_placements(true);
        CHECK(eb.stats().place_jobs > 0);
        CHECK(link.placements == ea.stats().place_jobs + eb.stats().place_jobs);
        CHECK(link.worker[0]->copies() + link.worker[1]->copies() == link.placements);
        CHECK(ea.place_outstanding() == 0);
        CHECK(eb.place_outstanding() == 0);
        CHECK(ea.stats().rx_place_full + eb.stats().rx_place_full == 0);
        // Every window update went through the CC threads, none was lost.
        CHECK(ea.stats().cc_feedback > 0);
        CHECK(link.cc_records == ea.stats().cc_feedback + eb.stats().cc_feedback);
        CHECK(link.cc_worker[0]->applied() + link.cc_worker[1]->applied() == link.cc_records);
        CHECK(ea.stats().cc_feedback_full + eb.stats().cc_feedback_full == 0);
        CHECK(ea.cc_feedback_waiting() + eb.cc_feedback_waiting() == 0);
    } else {
        CHECK(ea.stats().place_jobs + eb.stats().place_jobs == 0);
        CHECK(ea.stats().cc_feedback + eb.stats().cc_feedback == 0);
    }
}

}  // namespace

TEST_CASE("integrity: all ops under loss, reordering and duplication", "[engine][integrity]") {
    const uint32_t streams = GENERATE(1u, 8u, 64u);
    const uint16_t paths = GENERATE(uint16_t(1), uint16_t(4), uint16_t(16));
    const double loss = GENERATE(0.0, 0.01, 0.10, 0.30);
    run_matrix(streams, paths, loss, 1 + streams * 31 + paths * 7 + uint64_t(loss * 1000));
}

TEST_CASE("integrity, pipeline arrangement: all ops under loss, reordering and duplication",
          "[engine][integrity][pipeline]") {
    const uint32_t streams = GENERATE(1u, 8u, 64u);
    const uint16_t paths = GENERATE(uint16_t(1), uint16_t(4), uint16_t(16));
    const double loss = GENERATE(0.0, 0.01, 0.10, 0.30);
    run_matrix(streams, paths, loss, 1 + streams * 31 + paths * 7 + uint64_t(loss * 1000), Arrangement::pipeline);
}

// R-WRAP-1: depths that are not powers of two, every counter (msg_seq,
// recv_seq, send/receive queue, response jobs, CQs, placement and CC rings)
// started below 2^32 so that each wraps while its queue is full. Depth 3
// wraps with neighbours aliasing under a counter % depth; 500 and 1000 post
// twice their depth, so more than 296 (2^32 mod 500 and mod 1000) entries
// are live across the wrap.
TEST_CASE("integrity, wrap axis: depths 3, 500, 1000 across the 32-bit counter wrap", "[engine][integrity][wrap]") {
    const Arrangement arr = GENERATE(Arrangement::run_to_completion, Arrangement::pipeline);
    const double loss = GENERATE(0.01, 0.10);
    const uint32_t depth = GENERATE(3u, 500u, 1000u);
    const uint32_t streams = GENERATE(1u, 8u);
    if (streams > 1 && depth > 3) return;  // one stream fills the deep queues
    Shape shape;
    shape.depth = depth;
    shape.per_stream = depth == 3 ? 0 : 2 * depth;
    shape.wrap = true;
    INFO("depth " << depth << " streams " << streams << " loss " << loss << " pipeline "
                  << (arr == Arrangement::pipeline));
    run_matrix(streams, 4, loss, 3 + depth * 13 + streams * 31 + uint64_t(loss * 1000), arr, shape);
}

// The hostile responder axis (Shape::hostile): protection errors at random
// WRs of most streams, in both arrangements, under loss and duplication.
TEST_CASE("integrity, hostile responder axis: protection errors among the WRs", "[engine][integrity][hostile]") {
    const Arrangement arr = GENERATE(Arrangement::run_to_completion, Arrangement::pipeline);
    const double loss = GENERATE(0.0, 0.01, 0.10);
    const uint32_t streams = GENERATE(1u, 8u, 64u);
    Shape shape;
    shape.hostile = true;
    INFO("streams " << streams << " loss " << loss << " pipeline " << (arr == Arrangement::pipeline));
    run_matrix(streams, 4, loss, 5 + streams * 31 + uint64_t(loss * 1000), arr, shape);
}

// R-SGE-1..4: the matrix with a random scatter/gather list on every WR and
// receive, datagrams in two spans; a smaller grid (the lists, not the
// fabric, are what is new), and once across the counter wrap.
TEST_CASE("integrity: scatter/gather lists under loss, reordering and duplication", "[engine][integrity][sge]") {
    const Arrangement arr = GENERATE(Arrangement::run_to_completion, Arrangement::pipeline);
    const uint32_t streams = GENERATE(1u, 8u);
    const uint16_t paths = GENERATE(uint16_t(1), uint16_t(4));
    const double loss = GENERATE(0.0, 0.10, 0.30);
    Shape shape;
    shape.layout = Layout::sg_lists;
    INFO("pipeline " << (arr == Arrangement::pipeline));
    run_matrix(streams, paths, loss, 5 + streams * 31 + paths * 7 + uint64_t(loss * 1000), arr, shape);
}

TEST_CASE("integrity, wrap axis: scatter/gather lists at depth 500", "[engine][integrity][wrap][sge]") {
    const Arrangement arr = GENERATE(Arrangement::run_to_completion, Arrangement::pipeline);
    Shape shape;
    shape.depth = 500;
    shape.per_stream = 1000;
    shape.wrap = true;
    shape.layout = Layout::sg_lists;
    run_matrix(1, 4, 0.10, 17, arr, shape);
}

// R-INLINE-1..3: inline SENDs and WRITEs (some from lists, none with a
// valid lkey), their sources overwritten right after post, under loss and
// duplication: what lands is what was posted, retransmissions included.
TEST_CASE("integrity: inline sends under loss, reordering and duplication", "[engine][integrity][inline]") {
    const Arrangement arr = GENERATE(Arrangement::run_to_completion, Arrangement::pipeline);
    const uint32_t streams = GENERATE(1u, 8u);
    const double loss = GENERATE(0.0, 0.10, 0.30);
    Shape shape;
    shape.layout = Layout::inline_sends;
    shape.max_payload = 100;  // inline WRs of several packets, each resent from the engine's copy
    INFO("pipeline " << (arr == Arrangement::pipeline));
    run_matrix(streams, 4, loss, 9 + streams * 31 + uint64_t(loss * 1000), arr, shape);
}

// Hidden: one combination from MROCE_COMBO="streams,paths,loss" (debugging aid).
TEST_CASE("integrity: one combination", "[.integrity-one]") {
    const char* e = std::getenv("MROCE_COMBO");
    if (!e) return;
    unsigned s = 1, p = 1;
    double l = 0;
    REQUIRE(std::sscanf(e, "%u,%u,%lf", &s, &p, &l) == 3);
    run_matrix(s, uint16_t(p), l, 1 + s * 31 + p * 7 + uint64_t(l * 1000));
}
