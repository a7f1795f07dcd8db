// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The drive loop (mroce/drive_loop.hpp, architecture 3.1) against a scripted
// port, engine and stages that log every call: the order of one pass, bursts
// of odd sizes, the one retry of packets a port refused (in any positions;
// dropped before a deregistration),
// ports that receive until empty or stop transmit (the simulator's), the
// pipeline's copies (cookies, kept buffers, tokens back before the next
// receive) and CC stage (exchanged before and after a pass), the hooks, and
// run()'s idle policy. Every driver runs this one loop; the driver suites
// (udp, dpdk, sim, perf) run it over real ports.
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "mroce/drive_loop.hpp"

using namespace mroce;

namespace {

using Log = std::vector<std::string>;

std::string str(const char* what, size_t n) { return std::string(what) + " " + std::to_string(n); }

// Emits tx_queue packets (ids in TxPacket::entropy) in bursts; records what it received.
struct ScriptEngine {
    Log& log;
    std::vector<uint16_t> tx_queue;
    size_t tx_head = 0;
    std::vector<uint32_t> rx_len;   // RxPacket::len of everything received
    Time deadline = UINT64_MAX;
    // Pipeline: one PlaceJob per received packet, token = 100 + its len.
    bool defer = false;
    std::deque<PlaceJob> jobs;
    std::vector<uint32_t> placed_tokens;
    // CC stage.
    std::deque<CcFeedback> feedback;
    std::vector<uint32_t> views;   // CcView::slot of every view applied

    void rx_burst(const RxPacket* p, size_t n, Time) {
        log.push_back(str("rx", n));
        for (size_t i = 0; i < n; ++i) {
            rx_len.push_back(p[i].len);
            if (defer) {
                PlaceJob j;
                j.cookie = p[i].cookie;
                j.token = 100 + p[i].len;
                j.len = p[i].len;
                jobs.push_back(j);
            }
        }
    }
    // Payload of packet i: payload_len bytes at payload_base + i * payload_len (none if null).
    const uint8_t* payload_base = nullptr;
    uint32_t payload_len = 0;

    size_t tx_burst(TxPacket* out, size_t max, Time) {
        size_t n = 0;
        for (; n < max && tx_head < tx_queue.size(); ++n) {
            const uint16_t id = tx_queue[tx_head++];
            out[n].entropy = id;
            out[n].payload = payload_base ? payload_base + size_t(id) * payload_len : nullptr;
            out[n].payload_len = payload_base ? payload_len : 0;
        }
        log.push_back(str("tx", n));
        return n;
    }
    Time next_deadline(Time) const { return deadline; }
    size_t take_place_jobs(PlaceJob* out, size_t max) {
        size_t n = 0;
        for (; n < max && !jobs.empty(); ++n) {
            out[n] = jobs.front();
            jobs.pop_front();
        }
        if (n) log.push_back(str("jobs", n));
        return n;
    }
    void placed(const uint32_t* t, size_t n, Time) {
        log.push_back(str("placed", n));
        placed_tokens.insert(placed_tokens.end(), t, t + n);
    }
    size_t take_cc_feedback(CcFeedback* out, size_t max) {
        size_t n = 0;
        for (; n < max && !feedback.empty(); ++n) {
            out[n] = feedback.front();
            feedback.pop_front();
        }
        return n;
    }
    void cc_update(const CcView* v, size_t n) {
        log.push_back(str("views", n));
        for (size_t i = 0; i < n; ++i) views.push_back(v[i].slot);
    }
};
static_assert(PacketEngine<ScriptEngine> && PlacingEngine<ScriptEngine> && CcOffloadingEngine<ScriptEngine>);

// An engine that counts the datagrams that may make more than a data ACK
// sendable (Engine::rx_may_send): here those of length 100 and up.
struct MaySendEngine : ScriptEngine {
    uint64_t may = 0;
    void rx_burst(const RxPacket* p, size_t n, Time t) {
        for (size_t i = 0; i < n; ++i) may += p[i].len >= 100;
        ScriptEngine::rx_burst(p, n, t);
    }
    uint64_t rx_may_send() const { return may; }
};
static_assert(PacketEngine<MaySendEngine>);

// An engine that holds data ACKs back on request (Engine::tx_burst(..., acks)):
// every datagram it receives makes one ACK due (ids 100 and up); tx_queue
// holds the owner's answers. Like a ping-pong's whole WRITEs, no arrival
// makes more than a data ACK sendable (rx_may_send never moves).
struct AckEngine : ScriptEngine {
    std::deque<uint16_t> acks_due;
    uint16_t next_ack = 100;
    void rx_burst(const RxPacket* p, size_t n, Time t) {
        for (size_t i = 0; i < n; ++i) acks_due.push_back(next_ack++);
        ScriptEngine::rx_burst(p, n, t);
    }
    using ScriptEngine::tx_burst;
    size_t tx_burst(TxPacket* out, size_t max, Time, bool acks) {
        size_t n = 0;
        for (; n < max && tx_head < tx_queue.size(); ++n) out[n].entropy = tx_queue[tx_head++];
        for (; acks && n < max && !acks_due.empty(); ++n) {
            out[n].entropy = acks_due.front();
            acks_due.pop_front();
        }
        log.push_back(str(acks ? "tx+acks" : "tx", n));
        return n;
    }
    uint64_t rx_may_send() const { return 0; }
};
static_assert(PacketEngine<AckEngine>);

// Hands out `arrivals` (datagram lengths) in bursts; refuses the packets whose
// ids are in `refuse` (each once per listing); records what it sent.
struct ScriptPort {
    Log* log;
    std::deque<uint32_t>* arrivals;
    std::vector<uint16_t>* refuse;
    std::vector<uint16_t>* sent;
    std::vector<uint32_t>* kept;   // cookies keep() was asked for
    std::vector<std::string>* payloads;   // the payload bytes of what it sent, read as it sends

    size_t recv_burst(RxPacket* out, size_t max) {
        size_t n = 0;
        for (; n < max && !arrivals->empty(); ++n) {
            out[n] = RxPacket{};
            out[n].len = arrivals->front();
            arrivals->pop_front();
        }
        log->push_back(str("recv", n));
        return n;
    }
    size_t send_burst(const TxPacket* p, size_t n, uint32_t* unsent) {
        size_t s = 0;
        for (size_t i = 0; i < n; ++i) {
            auto it = std::find(refuse->begin(), refuse->end(), p[i].entropy);
            if (it != refuse->end()) {
                refuse->erase(it);
                *unsent++ = uint32_t(i);
            } else {
                sent->push_back(p[i].entropy);
                payloads->emplace_back(reinterpret_cast<const char*>(p[i].payload), p[i].payload_len);
                ++s;
            }
        }
        log->push_back(str("send", n) + "/" + std::to_string(s));
        return s;
    }
};
static_assert(DrivePort<ScriptPort>);

struct DonePort : ScriptPort {
    void rx_done() { log->push_back("rx_done"); }
};
struct DrainPort : DonePort {
    static constexpr bool kRxUntilEmpty = true;
};
struct GatedPort : ScriptPort {
    int* ready_left;
    bool tx_ready() {
        log->push_back("tx_ready");
        return (*ready_left)-- > 0;
    }
};
struct KeepPort : DonePort {
    uint32_t keep(const PlaceJob& j) {
        log->push_back(str("keep", j.cookie));
        kept->push_back(j.cookie);
        return j.token;
    }
};

// The placement stage's ring: tokens in, the same tokens back on demand.
struct ScriptPlacement {
    Log& log;
    std::deque<uint32_t> ring;
    size_t finish = 0;   // how many take_done may return next
    void submit(const uint32_t* w, size_t n, Time) {
        log.push_back(str("submit", n));
        ring.insert(ring.end(), w, w + n);
    }
    size_t take_done(uint32_t* t, size_t max, Time) {
        size_t n = 0;
        for (; n < max && n < finish && !ring.empty(); ++n) {
            t[n] = ring.front();
            ring.pop_front();
        }
        finish -= n;
        return n;
    }
    Time deadline(Time) const { return ring.empty() ? UINT64_MAX : 777; }
};

// The CC stage: every feedback record comes back as a view of its slot one exchange later.
struct ScriptCc {
    Log& log;
    std::vector<uint32_t> pending;
    size_t exchange(ScriptEngine& e, Time) {
        log.push_back("exchange");
        std::vector<CcView> v(pending.size());
        for (size_t i = 0; i < v.size(); ++i) v[i].slot = pending[i];
        if (!v.empty()) e.cc_update(v.data(), v.size());
        pending.clear();
        CcFeedback f[8];
        for (size_t n; (n = e.take_cc_feedback(f, 8)) > 0;)
            for (size_t i = 0; i < n; ++i) pending.push_back(f[i].slot);
        return v.size();
    }
};

struct World {
    Log log;
    std::deque<uint32_t> arrivals;
    std::vector<uint16_t> refuse, sent;
    std::vector<uint32_t> kept;
    std::vector<std::string> payloads;
    ScriptEngine eng{log};
    template <class P>
    P port() {
        P p{};
        p.log = &log;
        p.arrivals = &arrivals;
        p.refuse = &refuse;
        p.sent = &sent;
        p.kept = &kept;
        p.payloads = &payloads;
        return p;
    }
    void queue_tx(uint16_t n) {
        for (uint16_t i = 0; i < n; ++i) eng.tx_queue.push_back(uint16_t(eng.tx_queue.size()));
    }
    void arrive(size_t n) {
        for (size_t i = 0; i < n; ++i) arrivals.push_back(uint32_t(arrivals.size() + 1));
    }
};

}  // namespace

TEST_CASE("drive loop: one receive burst then transmit bursts until a short one", "[loop]") {
    World w;
    DriveLoop<ScriptPort, ScriptEngine> loop(w.port<ScriptPort>(), w.eng, {}, Bursts{5, 7});
    w.arrive(12);
    w.queue_tx(16);
    CHECK(loop.step(1) == 5 + 16);
    CHECK(w.log == Log{"recv 5", "rx 5", "tx 7", "send 7/7", "tx 7", "send 7/7", "tx 2", "send 2/2"});
    // A burst of exactly B is not short: the loop asks again and gets nothing.
    w.log.clear();
    w.queue_tx(7);
    CHECK(loop.step(2) == 5 + 7);
    CHECK(w.log == Log{"recv 5", "rx 5", "tx 7", "send 7/7", "tx 0"});
    w.log.clear();
    CHECK(loop.step(3) == 2);
    CHECK(w.log == Log{"recv 2", "rx 2", "tx 0"});
    // Nothing received: the engine's rx_burst is not called.
    w.log.clear();
    CHECK(loop.step(4) == 0);
    CHECK(w.log == Log{"recv 0", "tx 0"});
    CHECK(w.sent.size() == 23);
    for (size_t i = 0; i < w.sent.size(); ++i) CHECK(w.sent[i] == i);
}

TEST_CASE("drive loop: packets a port refused, in any positions, get one more chance, then loss recovery owns them",
          "[loop]") {
    World w;
    DriveLoop<ScriptPort, ScriptEngine> loop(w.port<ScriptPort>(), w.eng, {}, Bursts{4, 7});
    w.queue_tx(20);
    w.refuse = {1, 4, 6};   // a socket port regroups by path: refusals are not a prefix
    loop.step(1);
    // The port refused some: no more bursts this pass (let it drain).
    CHECK(w.log == Log{"recv 0", "tx 7", "send 7/4"});
    CHECK(w.sent == std::vector<uint16_t>{0, 2, 3, 5});
    w.log.clear();
    w.refuse = {4};   // refused again: dropped, and nothing new taken from the engine this pass
    loop.step(2);
    CHECK(w.log == Log{"recv 0", "send 3/2"});
    CHECK(loop.retry_dropped() == 1);
    w.log.clear();
    loop.step(3);
    CHECK(w.log == Log{"recv 0", "tx 7", "send 7/7", "tx 6", "send 6/6"});
    CHECK(w.sent == std::vector<uint16_t>{0, 2, 3, 5, 1, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19});
    CHECK(loop.retry_dropped() == 1);
}

TEST_CASE("drive loop: refused packets dropped before their region is deregistered are never read again",
          "[loop]") {
    // R-MEM-6: the packets a port refused point into registered memory; the
    // owner drops them before deregistering (the application frees the region
    // next), and loss recovery, which voids what a deregistered region held,
    // owns them as for any loss. A zero-copy port would hand on a copy's
    // buffer to the NIC, so they are not copied instead.
    constexpr uint32_t kLen = 3000;   // packets straddle pages
    constexpr uint16_t kPkts = 6;
    const size_t bytes = size_t(kLen) * kPkts;
    auto* mem = static_cast<uint8_t*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(mem != MAP_FAILED);
    for (size_t i = 0; i < bytes; ++i) mem[i] = uint8_t(i / kLen * 37 + i % 251);
    const std::string original(reinterpret_cast<const char*>(mem), bytes);

    World w;
    w.eng.payload_base = mem;
    w.eng.payload_len = kLen;
    DriveLoop<ScriptPort, ScriptEngine> loop(w.port<ScriptPort>(), w.eng, {}, Bursts{4, 7});
    w.queue_tx(kPkts);
    w.refuse = {2, 5};
    loop.step(1);
    CHECK(w.sent == std::vector<uint16_t>{0, 1, 3, 4});
    loop.drop_retries();
    CHECK(loop.retry_dropped() == 2);
    munmap(mem, bytes);
    w.log.clear();
    loop.step(2);   // before: sent 2 and 5 from the unmapped region (SIGSEGV)
    CHECK(w.log == Log{"recv 0", "tx 0"});
    REQUIRE(w.sent == std::vector<uint16_t>{0, 1, 3, 4});
    for (size_t i = 0; i < w.sent.size(); ++i)
        CHECK(w.payloads[i] == original.substr(size_t(w.sent[i]) * kLen, kLen));
    loop.drop_retries();   // nothing kept: nothing counted
    CHECK(loop.retry_dropped() == 2);
}

TEST_CASE("drive loop: rx_done after the engine saw each burst; a kRxUntilEmpty port is drained before transmit",
          "[loop]") {
    SECTION("one burst a pass") {
        World w;
        DriveLoop<DonePort, ScriptEngine> loop(w.port<DonePort>(), w.eng, {}, Bursts{3, 5});
        w.arrive(7);
        loop.step(1);
        CHECK(w.log == Log{"recv 3", "rx 3", "rx_done", "tx 0"});
        w.log.clear();
        loop.step(2);
        loop.step(3);
        CHECK(w.log == Log{"recv 3", "rx 3", "rx_done", "tx 0", "recv 1", "rx 1", "rx_done", "tx 0"});
        w.log.clear();
        loop.step(4);   // empty: the buffers still go back
        CHECK(w.log == Log{"recv 0", "rx_done", "tx 0"});
    }
    SECTION("until empty") {
        World w;
        DriveLoop<DrainPort, ScriptEngine> loop(w.port<DrainPort>(), w.eng, {}, Bursts{3, 5});
        w.arrive(7);
        w.queue_tx(1);
        CHECK(loop.step(1) == 8);
        CHECK(w.log == Log{"recv 3", "rx 3", "rx_done", "recv 3", "rx 3", "rx_done", "recv 1", "rx 1", "rx_done",
                           "tx 1", "send 1/1"});
        // A multiple of the burst: one more, empty, receive ends it.
        w.log.clear();
        w.arrive(6);
        loop.step(2);
        CHECK(w.log == Log{"recv 3", "rx 3", "rx_done", "recv 3", "rx 3", "rx_done", "recv 0", "rx_done", "tx 0"});
        CHECK(w.eng.rx_len.size() == 13);
    }
}

TEST_CASE("drive loop: tx_ready false ends the pass's transmit before the engine is asked", "[loop]") {
    World w;
    int ready = 2;
    GatedPort gp = w.port<GatedPort>();
    gp.ready_left = &ready;
    DriveLoop<GatedPort, ScriptEngine> loop(gp, w.eng, {}, Bursts{2, 3});
    w.queue_tx(10);
    CHECK(loop.step(1) == 6);
    CHECK(w.log == Log{"recv 0", "tx_ready", "tx 3", "send 3/3", "tx_ready", "tx 3", "send 3/3", "tx_ready"});
    w.log.clear();
    ready = 5;
    CHECK(loop.step(2) == 4);
    CHECK(w.log == Log{"recv 0", "tx_ready", "tx 3", "send 3/3", "tx_ready", "tx 1", "send 1/1"});
}

TEST_CASE("drive loop: hooks filter what was received and run before transmit", "[loop]") {
    World w;
    struct Hooks {
        Log& log;
        size_t received(RxPacket* rx, size_t n) {
            size_t k = 0;
            for (size_t i = 0; i < n; ++i)
                if (rx[i].len % 2) rx[k++] = rx[i];   // drop even lengths
            log.push_back(str("filter", n) + "/" + std::to_string(k));
            return k;
        }
        void before_tx(Time) { log.push_back("events"); }
    } hooks{w.log};
    DriveLoop<ScriptPort, ScriptEngine> loop(w.port<ScriptPort>(), w.eng, {}, Bursts{5, 5});
    w.arrive(5);
    CHECK(loop.step(1, hooks) == 5);   // what the port delivered counts as moved, dropped or not
    CHECK(w.log == Log{"recv 5", "filter 5/3", "rx 3", "events", "tx 0"});
    CHECK(w.eng.rx_len == std::vector<uint32_t>{1, 3, 5});
    w.log.clear();
    w.arrivals = {2, 4};
    loop.step(2, hooks);   // all filtered out: no engine call
    CHECK(w.log == Log{"recv 2", "filter 2/0", "events", "tx 0"});
}

TEST_CASE("drive loop: before_rx transmits, receives, and transmits again only after a receive that brought anything; "
          "after one, the pass's first transmit sends the answer alone, then the ACKs",
          "[loop]") {
    World w;
    struct Hooks {
        Log& log;
        size_t received(RxPacket*, size_t n) { return n; }
        void before_tx(Time) { log.push_back("events"); }
    } hooks{w.log};
    DriveLoop<ScriptPort, ScriptEngine> loop(w.port<ScriptPort>(), w.eng, {}, Bursts{5, 5});
    loop.set_tx_order(TxOrder::before_rx);
    w.queue_tx(2);
    w.arrive(3);
    CHECK(loop.step(1, hooks) == 2 + 3);
    CHECK(w.log == Log{"events", "tx 2", "send 2/2", "recv 3", "rx 3", "events", "tx 0"});
    // The last receive brought packets: the answer (acks false), then the ACKs,
    // in two port bursts; then an empty receive: the first transmit drained all
    // there was at this time, so there is no second (round 27).
    w.log.clear();
    w.queue_tx(1);
    CHECK(loop.step(2, hooks) == 1);
    CHECK(w.log == Log{"events", "tx 1", "send 1/1", "tx 0", "recv 0"});
    // Nothing received last pass: one transmit.
    w.log.clear();
    w.queue_tx(1);
    CHECK(loop.step(3, hooks) == 1);
    CHECK(w.log == Log{"events", "tx 1", "send 1/1", "recv 0"});
}

TEST_CASE("drive loop: before_rx makes no transmit after a receive of whole WRITEs alone (rx_may_send did not move), "
          "and one after a receive that may have made more than a data ACK sendable",
          "[loop]") {
    World w;
    MaySendEngine eng{{w.log}};
    struct Hooks {
        Log& log;
        size_t received(RxPacket*, size_t n) { return n; }
        void before_tx(Time) { log.push_back("events"); }
    } hooks{w.log};
    DriveLoop<ScriptPort, MaySendEngine> loop(w.port<ScriptPort>(), eng, {}, Bursts{5, 5});
    loop.set_tx_order(TxOrder::before_rx);
    w.arrivals = {8, 8};   // a ping-pong's arrival: straight to the owner
    CHECK(loop.step(1, hooks) == 2);
    CHECK(w.log == Log{"events", "tx 0", "recv 2", "rx 2"});
    // Its ACKs were held all the same: the answer alone, then the ACKs.
    w.log.clear();
    eng.tx_queue.push_back(0);
    CHECK(loop.step(2, hooks) == 1);
    CHECK(w.log == Log{"events", "tx 1", "send 1/1", "tx 0", "recv 0"});
    // An ACK or control packet among the arrivals: transmitted after it.
    w.log.clear();
    w.arrivals = {8, 120};
    CHECK(loop.step(3, hooks) == 2);
    CHECK(w.log == Log{"events", "tx 0", "recv 2", "rx 2", "events", "tx 0"});
}

TEST_CASE("drive loop: before_rx sends the owner's answer in a port burst of its own, the held ACKs in the next; "
          "a lone ACK alone; answers that fill bursts all go before the ACKs",
          "[loop]") {
    // Round 39: the ACKs in the answer's burst saved a driver send per round
    // trip but lengthened it (the ACK built and copied before memif publishes
    // the answer, and taken in by the peer before its application sees the
    // answer): the answer leaves alone.
    World w;
    AckEngine eng{{w.log}};
    struct Hooks {
        Log& log;
        size_t received(RxPacket*, size_t n) { return n; }
        void before_tx(Time) { log.push_back("events"); }
    } hooks{w.log};
    DriveLoop<ScriptPort, AckEngine> loop(w.port<ScriptPort>(), eng, {}, Bursts{5, 5});
    loop.set_tx_order(TxOrder::before_rx);
    w.arrivals = {8};   // the ping: its ACK is held for the owner's answer
    CHECK(loop.step(1, hooks) == 1);
    CHECK(w.log == Log{"events", "tx+acks 0", "recv 1", "rx 1"});
    // The owner answered between passes: the answer's burst, then the ACK's.
    w.log.clear();
    eng.tx_queue.push_back(0);
    CHECK(loop.step(2, hooks) == 2);
    CHECK(w.log == Log{"events", "tx 1", "send 1/1", "tx+acks 1", "send 1/1", "recv 0"});
    CHECK(w.sent == std::vector<uint16_t>{0, 100});
    // No answer: the ACK leaves at the start of the next pass, alone.
    w.arrivals = {8};
    loop.step(3, hooks);
    w.log.clear();
    w.sent.clear();
    CHECK(loop.step(4, hooks) == 1);
    CHECK(w.log == Log{"events", "tx 0", "tx+acks 1", "send 1/1", "recv 0"});
    CHECK(w.sent == std::vector<uint16_t>{101});
    // More answers than a burst holds: all of them first.
    w.arrivals = {8, 8};
    loop.step(5, hooks);
    w.log.clear();
    w.sent.clear();
    for (uint16_t i = 1; i <= 7; ++i) eng.tx_queue.push_back(i);
    CHECK(loop.step(6, hooks) == 9);
    CHECK(w.log == Log{"events", "tx 5", "send 5/5", "tx 2", "send 2/2", "tx+acks 2", "send 2/2", "recv 0"});
    CHECK(w.sent == std::vector<uint16_t>{1, 2, 3, 4, 5, 6, 7, 102, 103});
    // A refused ACK: retried first in the next pass, as any refusal.
    w.arrivals = {8};
    loop.step(7, hooks);
    w.log.clear();
    w.sent.clear();
    eng.tx_queue.push_back(8);
    w.refuse = {104};
    CHECK(loop.step(8, hooks) == 2);
    CHECK(w.log == Log{"events", "tx 1", "send 1/1", "tx+acks 1", "send 1/0", "recv 0"});
    w.log.clear();
    CHECK(loop.step(9, hooks) == 1);
    CHECK(w.log == Log{"events", "send 1/1", "tx+acks 0", "recv 0"});
    CHECK(w.sent == std::vector<uint16_t>{8, 104});
}

TEST_CASE("drive loop pipeline: copies leave with their kept buffers, their tokens come back before the next receive",
          "[loop][pipeline]") {
    World w;
    w.eng.defer = true;
    ScriptPlacement place{w.log};
    using Loop = DriveLoop<KeepPort, ScriptEngine, Pipeline<ScriptPlacement>>;
    Loop loop(w.port<KeepPort>(), w.eng, {&place, nullptr}, Bursts{3, 4});
    w.arrive(5);
    CHECK(loop.step(1) == 3);
    // Cookies are the datagrams' indices in the burst; every buffer is kept before rx_done.
    CHECK(w.log == Log{"recv 3", "rx 3", "jobs 3", "keep 0", "keep 1", "keep 2", "submit 3", "rx_done", "tx 0"});
    CHECK(loop.outstanding() == 3);
    w.log.clear();
    place.finish = 2;
    CHECK(loop.step(2) == 2 + 2);
    CHECK(w.log == Log{"placed 2", "recv 2", "rx 2", "jobs 2", "keep 0", "keep 1", "submit 2", "rx_done", "tx 0"});
    CHECK(w.eng.placed_tokens == std::vector<uint32_t>{101, 102});
    CHECK(loop.outstanding() == 3);
    CHECK(loop.next_deadline(0) == 777);   // a stage with work says when
    w.log.clear();
    place.finish = 10;
    loop.step(3);
    CHECK(w.log == Log{"placed 3", "recv 0", "rx_done", "tx 0"});
    CHECK(w.eng.placed_tokens == std::vector<uint32_t>{101, 102, 103, 104, 105});   // arrival order
    CHECK(loop.outstanding() == 0);
    CHECK(loop.jobs_sent() == 5);
    CHECK(w.kept == std::vector<uint32_t>{0, 1, 2, 0, 1});
    CHECK(loop.next_deadline(0) == UINT64_MAX);
}

TEST_CASE("drive loop pipeline: the CC stage is exchanged before a pass (views first) and after it (its feedback)",
          "[loop][pipeline]") {
    World w;
    ScriptCc cc{w.log};
    DriveLoop<ScriptPort, ScriptEngine, Pipeline<NoStage, ScriptCc>> loop(w.port<ScriptPort>(), w.eng,
                                                                          {nullptr, &cc}, Bursts{2, 2});
    CcFeedback f;
    f.slot = 7;
    w.eng.feedback.push_back(f);
    w.arrive(1);
    loop.step(1);
    // The record queued before the pass leaves in its first exchange; its view comes back in the second.
    CHECK(w.log == Log{"exchange", "recv 1", "rx 1", "tx 0", "exchange", "views 1"});
    CHECK(w.eng.views == std::vector<uint32_t>{7});
    CHECK(loop.next_deadline(5) == UINT64_MAX);   // no deadline of its own: the engine's
}

TEST_CASE("drive loop: run() passes the app's activity to the port's wait policy, the pass's own clock after work, and after a pass without work a fresh clock and the engine's deadline", "[loop]") {
    World w;
    struct WaitPort : ScriptPort {
        Time* clock;
        std::vector<std::string>* waits;
        Time now() { return ++*clock; }
        bool idle(bool active, Time now, Time deadline) {
            waits->push_back(std::to_string(active) + " " + std::to_string(now) + " " + std::to_string(deadline));
            return false;
        }
    };
    Time clock = 0;
    std::vector<std::string> waits;
    WaitPort wp = w.port<WaitPort>();
    wp.clock = &clock;
    wp.waits = &waits;
    DriveLoop<WaitPort, ScriptEngine> loop(wp, w.eng, {}, Bursts{4, 4});
    w.eng.deadline = 1000;
    int passes = 0;
    w.arrive(1);
    loop.run([&](Time) { return passes == 2; }, [&] { return ++passes > 3; });
    // Pass 1 moved a packet, pass 2 the app did something, pass 3 nothing
    // happened. After work the loop runs again at once: the deadline is now,
    // the engine's not worked out (round 33); after none, the engine's.
    // After work the pass's clock serves (one read per pass, as
    // Device::idle); before a wait, a fresh one.
    CHECK(waits == std::vector<std::string>{"1 1 1", "1 2 2", "0 4 1000"});
    CHECK(clock == 4);
}
