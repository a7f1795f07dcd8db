// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// All-operation integrity workload for engines over DPDK ports, in the style
// of test/engine/test_engine_integrity.cpp, but split into a requester side
// and a responder side that never look at each other's memory: the two may
// live in different processes. Everything (message list, atomic operands,
// initial contents of both memories) derives from one seed, so each side
// regenerates what the other started with and checks its own memory alone.
// Checks: R-SACK-4/R-CSN-3 (byte-exact placement despite loss and
// retransmission), R-CMPL-1..3 (every completion exactly once, in stream
// order), R-ATOMIC-2 (atomics executed once).
//
// A LossyEngine wraps the real Engine for EngineLoop and drops a seeded random
// share of received packets before Engine::rx_burst: a test-only fault
// injector, since the virtual PMDs here never lose anything.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../common/test_random.hpp"
#include "mroce/dpdk/loop.hpp"
#include "mroce/dpdk/port.hpp"
#include "mroce/engine.hpp"

namespace mroce::test {

using Rng = SplitMix;

class LossyEngine {
public:
    LossyEngine(Engine& e, double loss, uint64_t seed) : e_(e), loss_(loss), rng_(seed) {}
    void rx_burst(const RxPacket* p, size_t n, Time now) {
        size_t k = 0;
        for (size_t i = 0; i < n; ++i) {
            if (loss_ > 0 && rng_.uniform() < loss_) {
                ++dropped_;
                continue;
            }
            if (k == kMax) {   // never with EngineLoop's bursts; keeps the copy bounded anyway
                e_.rx_burst(keep_, k, now);
                k = 0;
            }
            keep_[k++] = p[i];
        }
        if (k) e_.rx_burst(keep_, k, now);
    }
    size_t tx_burst(TxPacket* out, size_t max, Time now) { return e_.tx_burst(out, max, now); }
    Time next_deadline(Time now) const { return e_.next_deadline(now); }
    // Pipeline arrangement (PipelineLoop): the cookies survive the compaction above.
    size_t take_place_jobs(PlaceJob* out, size_t max) { return e_.take_place_jobs(out, max); }
    void placed(const uint32_t* tokens, size_t n, Time now) { e_.placed(tokens, n, now); }
    // Pipeline arrangement with the CC core on its own lcore (R-CC-8).
    size_t take_cc_feedback(CcFeedback* out, size_t max) { return e_.take_cc_feedback(out, max); }
    void cc_update(const CcView* v, size_t n) { e_.cc_update(v, n); }
    uint64_t dropped() const noexcept { return dropped_; }

private:
    static constexpr size_t kMax = 64;
    Engine& e_;
    double loss_;
    Rng rng_;
    uint64_t dropped_ = 0;
    RxPacket keep_[kMax];
};

inline bool consumes_recv(OpKind op) {
    return op == OpKind::send || op == OpKind::send_imm || op == OpKind::write_imm;
}

struct Msg {
    OpKind op;
    uint32_t len;
    size_t src_off;   // in the memory that holds the source bytes (B for READ, else A)
    size_t dst_off;   // in the other memory
    uint64_t wr_id;
    uint64_t cmp = 0, swp = 0;   // CAS compare/swap, FADD addend in cmp
};

constexpr uint32_t kStreamBase = 1000;
constexpr uint32_t kImmMul = 3;

struct Workload {
    uint64_t seed = 1;
    uint32_t nstreams = 4;
    size_t mem = 16u << 20;
    std::vector<std::vector<Msg>> msgs;
    size_t payload_bytes = 0;
    size_t want_recv = 0, want_send = 0;

    uint32_t done_stream() const { return kStreamBase + nstreams; }
    // The final SEND ("the requester has every completion") uses the last 64 B of A and B.
    size_t done_off() const { return mem - 64; }

    // Initial 8-byte word idx of side 0 (A) or 1 (B).
    uint64_t word(int side, size_t idx) const {
        Rng r(seed * 0x100000001b3ull + uint64_t(side) * 0x9e3779b97f4a7c15ull + idx * 0xd1342543de82ef95ull);
        return r.next();
    }
    void fill(int side, uint8_t* p) const {
        for (size_t i = 0; i + 8 <= mem; i += 8) {
            const uint64_t v = word(side, i / 8);
            std::memcpy(p + i, &v, 8);
        }
    }
    uint64_t init_u64(int side, size_t off) const { return word(side, off / 8); }   // off is 8-aligned

    static Workload make(uint64_t seed, uint32_t nstreams, uint32_t per_stream, size_t mem) {
        Workload w;
        w.seed = seed;
        w.nstreams = nstreams;
        w.mem = mem;
        Rng rng(seed * 77 + 1);
        const size_t half = mem / 2;
        const size_t budget = (half - 65536) / nstreams;
        size_t bump = 0;   // same offsets on both sides: source on one, destination on the other
        uint64_t id = 1;
        w.msgs.resize(nstreams);
        for (uint32_t s = 0; s < nstreams; ++s) {
            size_t used = 0;
            for (uint32_t k = 0; k < per_stream; ++k) {
                Msg m;
                m.op = OpKind(rng.next() % 7);
                const uint32_t cls = uint32_t(rng.next() % 10);
                m.len = cls == 0 ? 0 : cls < 6 ? uint32_t(rng.next() % 4200) : uint32_t(rng.next() % 40000);
                const bool atomic = m.op == OpKind::atomic_cas || m.op == OpKind::atomic_fadd;
                if (atomic) m.len = 8;
                if (used + m.len + 16 > budget) m.len = atomic ? 8 : 0;
                bump = (bump + 7) & ~size_t(7);
                m.src_off = bump;
                m.dst_off = bump + half;
                bump += m.len + 8;
                used += m.len + 8;
                m.wr_id = id++;
                if (atomic) {
                    // Odd CAS ids compare equal to the target's initial value (swap happens), even ones do not.
                    const uint64_t init = w.word(1, m.dst_off / 8);
                    m.cmp = (m.op == OpKind::atomic_cas && (m.wr_id & 1)) ? init : rng.next();
                    m.swp = rng.next();
                }
                w.payload_bytes += m.len;
                if (consumes_recv(m.op)) ++w.want_recv;
                ++w.want_send;
                w.msgs[s].push_back(m);
            }
        }
        return w;
    }

    // One stream: a WRITE of write_len bytes, then a SEND of send_len bytes.
    static Workload make_write_send(uint64_t seed, uint32_t write_len, uint32_t send_len, size_t mem) {
        Workload w;
        w.seed = seed;
        w.nstreams = 1;
        w.mem = mem;
        w.msgs.resize(1);
        const size_t half = mem / 2;
        w.msgs[0].push_back(Msg{OpKind::write, write_len, 0, half, 1});
        const size_t off = (size_t(write_len) + 4096) & ~size_t(4095);
        w.msgs[0].push_back(Msg{OpKind::send, send_len, off, half + off, 2});
        w.payload_bytes = size_t(write_len) + send_len;
        w.want_send = 2;
        w.want_recv = 1;
        return w;
    }
};

// Collected completions per stream, and any that should never have come.
struct CqLog {
    std::vector<std::vector<Completion>> per_stream;
    size_t total = 0;
    std::vector<std::string> errors;
    void add(const Workload& w, const Completion& c) {
        if (c.stream < kStreamBase || c.stream > w.done_stream()) {
            errors.push_back(fmt::format("completion on unknown stream {} (wr_id {})", c.stream, c.wr_id));
            return;
        }
        per_stream.resize(w.nstreams + 1);
        per_stream[c.stream - kStreamBase].push_back(c);
        ++total;
    }
    size_t count(uint32_t idx) const { return idx < per_stream.size() ? per_stream[idx].size() : 0; }
};

// One endpoint's part of the workload, driven from a poll loop: app() once per pass.
class IntegritySide {
public:
    // base_a/base_b: A's and B's memory as the requester and the responder see
    // it (one process, or regions mapped before fork). remote_rkey 0: the same
    // key as our own region: fresh engines that register one region each hand
    // out the same keys, and the ring test checks that.
    IntegritySide(Engine& e, const Workload& w, bool requester, uint8_t* own_mem, uint64_t base_a, uint64_t base_b,
                  uint32_t remote_rkey)
        : e_(e), w_(w), req_(requester), mem_(own_mem), base_a_(base_a), base_b_(base_b), rkey_(remote_rkey) {
        pd_ = e_.alloc_pd();
        if (e_.create_cq(1 << 16, cq_) != Status::ok) fail("create_cq");
        const uint32_t all = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
        if (e_.register_mr(pd_, own_mem, w.mem, all, mr_) != Status::ok) fail("register_mr");
        if (rkey_ == 0) rkey_ = mr_.rkey;
        w_.fill(req_ ? 0 : 1, own_mem);
    }
    const MrInfo& mr() const { return mr_; }
    uint32_t conn() const { return conn_; }
    bool failed() const { return !errors_.empty(); }
    const std::vector<std::string>& errors() const { return errors_; }
    bool finished() const { return finished_; }

    void start() {
        if (req_ && e_.connect(0, conn_) != Status::ok) fail("connect");
    }

    void app() {
        ConnEvent ev[8];
        const size_t ne = e_.poll_events(ev, 8);
        for (size_t i = 0; i < ne; ++i) {
            if (ev[i].kind == EventKind::incoming && !req_ && conn_ == 0) {
                conn_ = ev[i].conn;
                setup_streams();
                post_recvs();
            } else if (ev[i].kind == EventKind::established && req_ && !posted_) {
                setup_streams();
                post_sends();
                posted_ = true;
            } else if (ev[i].kind == EventKind::error) {
                fail(fmt::format("connection error event (conn {})", ev[i].conn));
            }
        }
        Completion c[64];
        size_t k;
        while (cq_ != UINT32_MAX && (k = e_.poll_cq(cq_, c, 64)) > 0)
            for (size_t i = 0; i < k; ++i) {
                if (finished_) extra_.push_back(c[i]);
                else log_.add(w_, c[i]);
            }
        if (finished_) return;
        if (req_) {
            size_t got = 0;
            for (uint32_t s = 0; s < w_.nstreams; ++s) got += log_.count(s);
            if (!done_posted_ && got >= w_.want_send) {
                SendWr d;
                d.wr_id = kDoneId;
                d.op = OpKind::send;
                d.local_addr = base_a_ + w_.done_off();
                d.length = 8;
                d.lkey = mr_.lkey;
                if (e_.post_send(conn_, w_.done_stream(), d) != Status::ok) fail("post_send(done)");
                done_posted_ = true;
            }
            if (log_.count(w_.nstreams) >= 1) finished_ = true;
        } else {
            size_t got = 0;
            for (uint32_t s = 0; s < w_.nstreams; ++s) got += log_.count(s);
            if (got >= w_.want_recv && log_.count(w_.nstreams) >= 1) finished_ = true;
        }
    }

    // Completion order and counts, then the bytes this side's memory must hold.
    void verify() {
        for (const auto& c : extra_) fail(fmt::format("late completion wr_id {} stream {}", c.wr_id, c.stream));
        for (const auto& s : log_.errors) fail(s);
        log_.per_stream.resize(w_.nstreams + 1);
        const auto& dn = log_.per_stream[w_.nstreams];
        if (dn.size() != 1 || dn[0].wr_id != kDoneId || dn[0].status != WcStatus::success)
            fail(fmt::format("done stream: {} completions", dn.size()));
        std::vector<uint8_t> peer(w_.mem);
        w_.fill(req_ ? 1 : 0, peer.data());
        for (uint32_t s = 0; s < w_.nstreams && errors_.size() < 20; ++s) {
            const auto& cs = log_.per_stream[s];
            size_t ci = 0;
            for (const Msg& m : w_.msgs[s]) {
                if (errors_.size() >= 20) break;
                const bool mine = req_ || consumes_recv(m.op);
                if (mine) {
                    if (ci >= cs.size()) {
                        fail(fmt::format("stream {}: missing completion for wr_id {}", s, m.wr_id));
                        break;
                    }
                    const Completion& c = cs[ci++];
                    if (c.wr_id != m.wr_id || c.status != WcStatus::success)
                        fail(fmt::format("stream {}: completion {} is wr_id {} status {}, want wr_id {} success", s,
                                         ci - 1, c.wr_id, to_string(c.status), m.wr_id));
                    if (!req_ && (c.byte_len != m.len || (m.op != OpKind::send && c.imm != m.wr_id * kImmMul)))
                        fail(fmt::format("stream {}: wr_id {} byte_len {} imm {} (want {} / {})", s, m.wr_id,
                                         c.byte_len, c.imm, m.len, m.wr_id * kImmMul));
                }
                check_bytes(m, peer.data());
            }
            if (ci != cs.size()) fail(fmt::format("stream {}: {} completions, {} expected", s, cs.size(), ci));
        }
    }

    static constexpr uint64_t kDoneId = ~uint64_t(0);

private:
    void fail(const std::string& s) { errors_.push_back(s); }

    void setup_streams() {
        for (uint32_t s = 0; s <= w_.nstreams; ++s)
            if (e_.create_stream(conn_, kStreamBase + s, pd_, cq_, cq_) != Status::ok)
                fail(fmt::format("create_stream {}", kStreamBase + s));
    }
    void post_recvs() {
        for (uint32_t s = 0; s < w_.nstreams; ++s)
            for (const Msg& m : w_.msgs[s]) {
                if (!consumes_recv(m.op)) continue;
                RecvWr r;
                r.wr_id = m.wr_id;
                r.addr = base_b_ + m.dst_off;
                r.length = m.op == OpKind::write_imm ? 0 : m.len;
                r.lkey = mr_.lkey;
                if (e_.post_recv(conn_, kStreamBase + s, r) != Status::ok) fail("post_recv");
            }
        RecvWr d;
        d.wr_id = kDoneId;
        d.addr = base_b_ + w_.done_off();
        d.length = 64;
        d.lkey = mr_.lkey;
        if (e_.post_recv(conn_, w_.done_stream(), d) != Status::ok) fail("post_recv(done)");
    }
    void post_sends() {
        for (uint32_t s = 0; s < w_.nstreams; ++s)
            for (const Msg& m : w_.msgs[s]) {
                SendWr wr;
                wr.wr_id = m.wr_id;
                wr.op = m.op;
                wr.length = m.len;
                wr.imm = uint32_t(m.wr_id * kImmMul);
                wr.lkey = mr_.lkey;
                wr.rkey = rkey_;
                if (m.op == OpKind::read) {
                    wr.local_addr = base_a_ + m.dst_off;   // READ: bytes flow B -> A
                    wr.remote_addr = base_b_ + m.src_off;
                } else {
                    wr.local_addr = base_a_ + m.src_off;
                    wr.remote_addr = base_b_ + m.dst_off;
                    wr.compare_add = m.cmp;
                    wr.swap = m.swp;
                }
                if (e_.post_send(conn_, kStreamBase + s, wr) != Status::ok)
                    fail(fmt::format("post_send wr_id {}", m.wr_id));
            }
    }
    // `peer` is the other side's initial memory image.
    void check_bytes(const Msg& m, const uint8_t* peer) {
        switch (m.op) {
        case OpKind::write:
        case OpKind::write_imm:
        case OpKind::send:
        case OpKind::send_imm:
            if (!req_ && fnv(peer + m.src_off, m.len) != fnv(mem_ + m.dst_off, m.len))
                fail(fmt::format("wr_id {} ({} B, op {}): destination bytes differ", m.wr_id, m.len, int(m.op)));
            break;
        case OpKind::read:
            if (req_ && fnv(peer + m.src_off, m.len) != fnv(mem_ + m.dst_off, m.len))
                fail(fmt::format("READ wr_id {} ({} B): bytes differ", m.wr_id, m.len));
            break;
        case OpKind::atomic_cas:
        case OpKind::atomic_fadd: {
            const uint64_t init = w_.init_u64(1, m.dst_off);
            uint64_t v;
            if (req_) {
                std::memcpy(&v, mem_ + m.src_off, 8);
                if (v != init) fail(fmt::format("atomic wr_id {}: original {:#x}, want {:#x}", m.wr_id, v, init));
            } else {
                std::memcpy(&v, mem_ + m.dst_off, 8);
                const uint64_t want = m.op == OpKind::atomic_fadd ? init + m.cmp : (m.cmp == init ? m.swp : init);
                if (v != want) fail(fmt::format("atomic wr_id {}: memory {:#x}, want {:#x}", m.wr_id, v, want));
            }
            break;
        }
        }
    }

    Engine& e_;
    const Workload& w_;
    bool req_;
    uint8_t* mem_;
    uint64_t base_a_, base_b_;
    uint32_t rkey_;
    uint32_t pd_ = 0, cq_ = UINT32_MAX, conn_ = 0;
    MrInfo mr_;
    bool posted_ = false, done_posted_ = false, finished_ = false;
    CqLog log_;
    std::vector<Completion> extra_;
    std::vector<std::string> errors_;
};

// The engine settings every DPDK integrity case uses: loss-tolerant timers
// for a loaded 2-core machine where one thread may drive both engines.
inline EngineConfig integrity_engine_config(uint16_t max_payload) {
    EngineConfig c;
    c.num_paths = 4;
    c.max_payload = max_payload;
    c.stream_depth = 256;
    c.recv_depth = 256;
    c.conn_timeout = 30'000'000'000ull;
    c.connect_retry = 2'000'000;
    return c;
}

}  // namespace mroce::test
