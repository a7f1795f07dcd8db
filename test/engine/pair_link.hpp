// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// A minimal two-engine harness for engine unit tests: a virtual clock and a
// lossy, reordering wire between two real engines. The richer fabric
// (queues, ECN, planes) is drivers/sim; this one keeps unit tests tiny.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <vector>

#include "../common/test_random.hpp"
#include "mroce/engine.hpp"
#include "cc_worker.hpp"
#include "placement_worker.hpp"

namespace mroce::test {

struct PairLink {
    Engine* eng[2];
    Time now = 0;
    Time base_delay = 2000;          // ns one way
    Time per_path_skew = 700;        // extra delay per path index: reorders across paths
    double loss = 0;                 // data and control alike
    double dup = 0;
    double ce = 0;                   // probability of marking CE on ect packets
    std::function<bool(int from, const TxPacket&)> drop_if;  // extra fault hook
    std::function<Time(int from, const TxPacket&)> delay_if;  // extra one-way delay of a packet (not a loss)
    // Two-span delivery (a DPDK header segment + payload segment): returns the
    // length of the first span for a datagram (0, or >= its size: one span).
    // The second span starts kSplitGap poison bytes after the first ends, in
    // the same buffer, so an engine that read past the first span would place
    // poison. split_seen counts the datagrams delivered in two spans.
    std::function<uint32_t(int to, const std::vector<uint8_t>&)> split_at;
    static constexpr uint32_t kSplitGap = 64;
    uint64_t split_seen = 0;
    SplitMix rng{1};
    uint64_t delivered = 0, dropped = 0, duplicated = 0;

    struct InFlight {
        Time at;
        uint64_t seq;
        int to;
        uint8_t ce;
        uint8_t plane = 0;  // TxPacket::plane, handed to the receiver as RxPacket::plane
        std::vector<uint8_t> bytes;
        bool operator>(const InFlight& o) const { return at != o.at ? at > o.at : seq > o.seq; }
    };
    std::priority_queue<InFlight, std::vector<InFlight>, std::greater<>> q;
    uint64_t seq = 0;

    // Pipeline arrangement (an engine built with deferred_placement): its
    // payload copies run on a PlacementWorker thread; a copy takes
    // place_latency of virtual time (0: done before the end of the step,
    // after one tx_burst saw it pending). Received datagrams stay in slots
    // until their job's token is back.
    Time place_latency = 0;
    uint64_t placements = 0;
    struct Held {
        Time ready;
        uint32_t cookie;
    };
    std::vector<std::vector<uint8_t>> slots;
    std::vector<uint32_t> free_slots;
    std::deque<Held> held[2];
    std::deque<PlaceDone> returned[2];
    std::unique_ptr<PlacementWorker> worker[2];  // after the slots: joined before they go
    // Pipeline arrangement of congestion control (an engine built with
    // offload_cc): its CcCore runs on a CcWorker thread. The link waits for
    // every view before virtual time moves on (a ring transit is shorter
    // than anything on the wire), so runs stay reproducible.
    std::unique_ptr<CcWorker> cc_worker[2];
    uint64_t cc_records = 0;

    PairLink(Engine& a, Engine& b, uint64_t seed = 1) : eng{&a, &b}, rng(seed) {}

    void enable_pipeline(int side) {
        if (!eng[side]->config().deferred_placement) {
            std::fprintf(stderr, "PairLink: engine %d was not built with deferred_placement\n", side);
            std::abort();
        }
        worker[side] = std::make_unique<PlacementWorker>();
    }
    void enable_cc_stage(int side) {
        if (!eng[side]->config().offload_cc) {
            std::fprintf(stderr, "PairLink: engine %d was not built with offload_cc\n", side);
            std::abort();
        }
        cc_worker[side] = std::make_unique<CcWorker>(eng[side]->config().cc);
    }
    // Feedback to the CC thread, and its views back into the engine; true if any.
    bool cc_sync(int side) {
        if (!cc_worker[side]) return false;
        CcFeedback f[64];
        bool any = false;
        for (size_t n; (n = eng[side]->take_cc_feedback(f, 64)) > 0;) {
            cc_worker[side]->submit(f, n);
            cc_records += n;
            any = true;
        }
        CcView v[64];
        while (cc_worker[side]->outstanding()) {
            const size_t n = cc_worker[side]->poll(v, 64);
            if (n) eng[side]->cc_update(v, n);
            else std::this_thread::yield();
        }
        return any;
    }
    uint32_t hold(std::vector<uint8_t>&& b) {
        if (free_slots.empty()) {
            slots.push_back(std::move(b));
            return uint32_t(slots.size() - 1);
        }
        const uint32_t k = free_slots.back();
        free_slots.pop_back();
        slots[k] = std::move(b);
        return k;
    }
    // Hands finished copies (those ready by now, or all) back to the engine, in order.
    void finish_placements(int side, bool all) {
        uint32_t tokens[64];
        size_t n = 0;
        while (!held[side].empty() && (all || held[side].front().ready <= now)) {
            while (returned[side].empty()) {
                PlaceDone d[64];
                const size_t k = worker[side]->poll(d, 64);
                returned[side].insert(returned[side].end(), d, d + k);
                if (!k) std::this_thread::yield();
            }
            const PlaceDone d = returned[side].front();
            returned[side].pop_front();
            if (d.cookie != held[side].front().cookie) {
                std::fprintf(stderr, "PairLink: placement returned out of order\n");
                std::abort();
            }
            held[side].pop_front();
            free_slots.push_back(d.cookie);
            tokens[n++] = d.token;
            ++placements;
            if (n == 64) {
                eng[side]->placed(tokens, n, now);
                n = 0;
            }
        }
        if (n) eng[side]->placed(tokens, n, now);
    }
    void finish_placements(bool all) {
        for (int i = 0; i < 2; ++i)
            if (worker[i]) finish_placements(i, all);
    }
    bool placing() const { return !held[0].empty() || !held[1].empty(); }

    void pump_tx(int from) {
        TxPacket out[32];
        for (int round = 0; round < 2; ++round) {
            for (;;) {
                const size_t n = eng[from]->tx_burst(out, 32, now);
                for (size_t i = 0; i < n; ++i) send(from, out[i]);
                if (n < 32) break;
            }
            // Views the burst's feedback (or the rx before it) produced may open windows.
            if (!cc_sync(from)) break;
        }
    }
    void send(int from, const TxPacket& p) {
        if (drop_if && drop_if(from, p)) { ++dropped; return; }
        if (rng.uniform() < loss) { ++dropped; return; }
        InFlight f;
        f.to = 1 - from;
        f.ce = (p.ect && rng.uniform() < ce) ? 1 : 0;
        f.plane = p.plane;
        const uint16_t path = p.path == kControlPath ? 0 : p.path;
        f.at = now + base_delay + per_path_skew * (path % 8) + (delay_if ? delay_if(from, p) : 0);
        f.bytes.resize(p.hdr_len + p.payload_len);
        std::memcpy(f.bytes.data(), p.hdr, p.hdr_len);
        if (p.payload_len) std::memcpy(f.bytes.data() + p.hdr_len, p.payload, p.payload_len);
        const bool d = rng.uniform() < dup;
        f.seq = seq++;
        if (d) {
            InFlight g = f;
            g.at += 333;
            g.seq = seq++;
            q.push(std::move(g));
            ++duplicated;
        }
        q.push(std::move(f));
    }
    // Runs until pred() holds or the virtual time limit passes. Returns pred().
    bool run(const std::function<bool()>& pred, Time limit) {
        const Time end = now + limit;
        pump_tx(0);
        pump_tx(1);
        Time last = now;
        uint64_t same = 0;
        while (!pred()) {
            if (now == last) {
                if (++same > 100000) {
                    // The engines promise work now but produce none: a livelock bug.
                    std::fprintf(stderr, "PairLink: no progress at t=%llu (deadlines %llu %llu, pending %d %d)\n",
                                 (unsigned long long)now, (unsigned long long)eng[0]->next_deadline(now),
                                 (unsigned long long)eng[1]->next_deadline(now), int(eng[0]->tx_pending(now)),
                                 int(eng[1]->tx_pending(now)));
                    std::abort();
                }
            } else {
                last = now;
                same = 0;
            }
            Time t_next = end;
            if (!q.empty()) t_next = std::min(t_next, q.top().at);
            for (int i = 0; i < 2; ++i)
                if (!held[i].empty()) t_next = std::min(t_next, std::max(now, held[i].front().ready));
            for (int i = 0; i < 2; ++i) t_next = std::min(t_next, std::max(now, eng[i]->next_deadline(now)));
            if (t_next >= end) { now = end; break; }
            now = std::max(now, t_next);
            finish_placements(false);
            while (!q.empty() && q.top().at <= now) {
                InFlight f = q.top();
                q.pop();
                RxPacket r;
                r.len = uint32_t(f.bytes.size());
                r.peer = uint32_t(1 - f.to);
                r.ce = f.ce;
                r.plane = f.plane;
                const uint32_t cut = split_at ? split_at(f.to, f.bytes) : 0;
                if (cut > 0 && cut < r.len) {
                    std::vector<uint8_t> two(f.bytes.begin(), f.bytes.begin() + cut);
                    two.insert(two.end(), kSplitGap, uint8_t(0xcc));
                    two.insert(two.end(), f.bytes.begin() + cut, f.bytes.end());
                    f.bytes = std::move(two);
                    r.len = cut;
                    r.len2 = uint32_t(f.bytes.size()) - cut - kSplitGap;
                    ++split_seen;
                }
                auto spans = [&](const std::vector<uint8_t>& b) {
                    r.data = b.data();
                    if (r.len2) r.data2 = b.data() + r.len + kSplitGap;
                };
                if (!worker[f.to]) {
                    spans(f.bytes);
                    eng[f.to]->rx_burst(&r, 1, now);
                    cc_sync(f.to);
                } else {
                    r.cookie = hold(std::move(f.bytes));
                    spans(slots[r.cookie]);
                    eng[f.to]->rx_burst(&r, 1, now);
                    PlaceJob j[8];
                    bool kept = false;
                    size_t k;
                    while ((k = eng[f.to]->take_place_jobs(j, 8)) > 0) {
                        for (size_t i = 0; i < k; ++i) {
                            worker[f.to]->submit(j[i]);
                            held[f.to].push_back(Held{now + place_latency, j[i].cookie});
                            kept |= j[i].cookie == r.cookie;
                        }
                    }
                    if (!kept) free_slots.push_back(r.cookie);
                    cc_sync(f.to);
                }
                ++delivered;
            }
            pump_tx(0);
            pump_tx(1);
            if (place_latency == 0 && placing()) {
                finish_placements(false);
                pump_tx(0);
                pump_tx(1);
            }
        }
        return pred();
    }
};

// Establishes a connection A -> B; returns the two connection ids.
inline bool connect_pair(PairLink& link, uint32_t& ca, uint32_t& cb) {
    if (link.eng[0]->connect(1, ca) != Status::ok) return false;
    cb = 0;
    bool ok = link.run([&] {
        ConnEvent ev[4];
        size_t n = link.eng[1]->poll_events(ev, 4);
        for (size_t i = 0; i < n; ++i) if (ev[i].kind == EventKind::incoming) cb = ev[i].conn;
        return cb != 0 && link.eng[0]->conn_state(ca) == ConnState::established;
    }, 1'000'000'000);
    ConnEvent ev[4];
    link.eng[0]->poll_events(ev, 4);
    return ok;
}

}  // namespace mroce::test
