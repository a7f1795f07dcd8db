// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The drive loop: the one piece of code that moves packets between an engine
// and a port (doc/architecture.md 3 and 4). The UDP driver, the DPDK driver
// (one lcore, or the pipeline arrangement), the native API's progress (over
// its Transport) and the simulated fabric's hosts all run this loop; they
// differ only in the port they give it. The engine knows no clock and does no
// I/O: this loop is where both come in, through the port.
//
// A template over the port, the engine and a policy, so nothing on the packet
// path is a virtual call unless the port or the engine itself is one (the
// native API's Transport and the simulator's test endpoints are, per burst):
//  - RunToCompletion: payload copies and congestion control inline in the
//    engine (its defaults);
//  - Pipeline<Placement, Cc>: payload copies leave for a placement stage
//    (EngineConfig::deferred_placement) and window feedback for a CC stage
//    (EngineConfig::offload_cc, R-CC-8) over the stages' rings; either may be
//    NoStage (that work stays inline). RunToCompletion is Pipeline<NoStage,
//    NoStage>: the same code with both stages compiled out.
// Header-only and without any I/O of its own: the library links nothing.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "mroce/cc.hpp"
#include "mroce/packet_io.hpp"

namespace mroce {

// What the loop needs of an engine (mroce::Engine, or a stand-in: a test
// stub, a fault injector, the simulator's Endpoint).
template <class E>
concept PacketEngine = requires(E& e, const RxPacket* rx, TxPacket* tx, size_t n, Time t) {
    e.rx_burst(rx, n, t);
    { e.tx_burst(tx, n, t) } -> std::convertible_to<size_t>;
    { e.next_deadline(t) } -> std::convertible_to<Time>;
};
// Deferred placement (architecture 4.2): the engine hands payload copies out
// after rx_burst and is told when they are done.
template <class E>
concept PlacingEngine = PacketEngine<E> && requires(E& e, PlaceJob* j, const uint32_t* t, size_t n, Time now) {
    { e.take_place_jobs(j, n) } -> std::convertible_to<size_t>;
    e.placed(t, n, now);
};
// Congestion control on its own stage (R-CC-8).
template <class E>
concept CcOffloadingEngine = requires(E& e, CcFeedback* f, const CcView* v, size_t n) {
    { e.take_cc_feedback(f, n) } -> std::convertible_to<size_t>;
    e.cc_update(v, n);
};

// What the loop needs of a port. recv_burst: up to max received datagrams,
// valid until the next recv_burst (or rx_done). send_burst: returns how many
// it took; the indices of the others go to unsent, ascending.
//
// A port may also offer (each found at compile time, nothing to pay if absent):
//  - rx_done(): the datagrams of the last recv_burst are done with, except
//    those keep() took (DPDK: rx_release);
//  - kRxUntilEmpty (static constexpr bool): one pass receives until a burst
//    comes back short (the simulator hands over everything that has arrived);
//  - tx_ready(): checked before each engine tx_burst; false ends this pass's
//    transmit (the simulator's NIC ring is full);
//  - keep(const PlaceJob&): the pipeline's record of one copy for its
//    placement stage; it keeps the datagram's buffer past rx_done (DPDK: the
//    mbuf travels with the copy, and the stage frees it);
//  - now(): the port's clock, for run();
//  - idle(active, now, deadline) -> bool (blocked): its wait policy, for
//    idle() and run() (UDP: spin, then epoll; none: busy-poll). After work
//    (active) it returns at once and must not use now: the caller may hand
//    it the clock its pass began with (Device::idle does), a pass of
//    syscalls earlier. Otherwise now is current: a wait is timed from it;
//  - kRxBurst, kTxBurst (static constexpr size_t): its burst sizes.
template <class P>
concept DrivePort = requires(P& p, RxPacket* rx, const TxPacket* tx, size_t n, uint32_t* unsent) {
    { p.recv_burst(rx, n) } -> std::convertible_to<size_t>;
    { p.send_burst(tx, n, unsent) } -> std::convertible_to<size_t>;
};

// A stage of the pipeline seen from the engine's side of its rings.
// Placement: submit() all n copies (waiting while the ring is full: it holds
// more than the engine ever has outstanding), take_done() the tokens of
// finished ones, in order. Cc: exchange() moves the stage's views into the
// engine first, then the engine's feedback out. Either may also say when it
// next has something for the engine without new input: deadline(now).
template <class S, class Work>
concept PlacementStageRing = requires(S& s, const Work* w, uint32_t* tokens, size_t n, Time now) {
    s.submit(w, n, now);
    { s.take_done(tokens, n, now) } -> std::convertible_to<size_t>;
};
template <class S, class E>
concept CcStageRing = requires(S& s, E& e, Time now) {
    { s.exchange(e, now) } -> std::convertible_to<size_t>;
};

struct NoStage {};

// A port's spin window (the wait policy's "keep polling spin_ns after the
// last activity": udp::IdleWaiter, the DPDK transport). It opens at the first
// idle pass after work, by that pass's clock, not at the clock the active
// call carried: that may be the active pass's own, read before its work,
// and a pass of syscalls (a keepalive sent, an ICMP error received) used up
// a window measured from it before the window began, so the loop blocked
// right after every pass with work (round 42).
// Four instructions per empty pass more than a window from the active call's
// clock (a busy poller's every empty pass comes here).
class SpinWindow {
public:
    // After work, or a wake-up by I/O: the window reopens at the next idle pass.
    void reopen() noexcept { from_ = kReopen; }
    // How long the idle passes since the last reopen() have gone on, this
    // one (now, non-decreasing: R-TIMER-6) included.
    Time idle_for(Time now) noexcept {
        if (from_ == kReopen) [[unlikely]]
            from_ = now;   // a clock at 0 (a test's) only opens it a pass later
        return now - from_;
    }

private:
    static constexpr Time kReopen = 0;
    Time from_ = kReopen;
};

namespace detail {
struct NoWork {};
template <class P, bool kKeeps>
struct WorkOf {
    using type = NoWork;
};
template <class P>
struct WorkOf<P, true> {
    using type = decltype(std::declval<P&>().keep(std::declval<const PlaceJob&>()));
};
}  // namespace detail

template <class PlacementStage, class CcStage = NoStage>
struct Pipeline {
    using Placement = PlacementStage;
    using Cc = CcStage;
    Placement* placement = nullptr;
    Cc* cc = nullptr;
};
using RunToCompletion = Pipeline<NoStage, NoStage>;

struct Bursts {
    size_t rx = 32;
    size_t tx = 64;
};

// Where a pass sends the engine's transmit queue (issue 24).
//  - after_rx: receive, then transmit: what arrived is acknowledged in the
//    same pass (the loop alone, with no owner answering in between: DPDK
//    lcores, the simulator);
//  - before_rx: transmit, receive, then, if anything arrived that may make
//    more than a data ACK sendable (Engine::rx_may_send: all but whole
//    WRITEs placed at once; an engine without it: anything), transmit all
//    but data ACKs (control answers such as a CONNECT_ACK, data a received
//    ACK let out): what arrived is acknowledged at the start of the next
//    pass, right behind whatever the owner posted in between (the answer to
//    it, in a port burst of its own: a transmit without data ACKs first),
//    instead of an ACK burst that delays the answer by a send. The native
//    API, whose owner runs between passes. The ACK leaves as soon as the
//    owner makes the next pass: one that moved anything is followed by the
//    next without waiting (idle(), the engine's deadline). An engine without
//    tx_burst(..., acks) transmits everything after the receive instead.
enum class TxOrder : uint8_t { after_rx, before_rx };

// The loop's hooks for its owner, called in every pass (the native API: the
// test fault injector on received packets, connection events before TX).
struct NoHooks {
    size_t received(RxPacket*, size_t n) noexcept { return n; }
    void before_tx(Time) noexcept {}
};

// Port: a port type held by value (a small adaptor holding references) or a
// reference to one (the native API's abstract Transport&).
template <class Port, class Eng, class Policy = RunToCompletion>
    requires DrivePort<std::remove_reference_t<Port>> && PacketEngine<Eng>
class DriveLoop {
    using P = std::remove_reference_t<Port>;
    using Placement = typename Policy::Placement;
    using Cc = typename Policy::Cc;
    static constexpr bool kPlaces = !std::is_same_v<Placement, NoStage>;
    static constexpr bool kStagesCc = !std::is_same_v<Cc, NoStage>;
    using Work = typename detail::WorkOf<P, kPlaces>::type;
    // What the port offers beyond receive and send (see DrivePort).
    static constexpr bool kRxDone = requires(P& p) { p.rx_done(); };
    static constexpr bool kRxUntilEmpty = requires { requires P::kRxUntilEmpty; };
    static constexpr bool kTxReady = requires(P& p) { { p.tx_ready() } -> std::convertible_to<bool>; };
    static constexpr bool kWaits = requires(P& p, bool a, Time t) { { p.idle(a, t, t) } -> std::convertible_to<bool>; };
    // The engine counts the datagrams that may make more than a data ACK sendable (Engine::rx_may_send).
    static constexpr bool kRxMaySend = requires(const Eng& e) { { e.rx_may_send() } -> std::convertible_to<uint64_t>; };

public:
    static constexpr Bursts port_bursts() noexcept {
        if constexpr (requires { P::kRxBurst; P::kTxBurst; }) return Bursts{P::kRxBurst, P::kTxBurst};
        else return Bursts{};
    }
    // Finished copies taken per pass.
    static constexpr size_t kDoneBurst = 64;

    DriveLoop(Port port, Eng& eng, Policy policy = {}, Bursts b = port_bursts())
        : port_(port), eng_(eng), policy_(policy), b_(b), rx_(new RxPacket[b.rx]), tx_(new TxPacket[b.tx]),
          retry_(new TxPacket[b.tx]), unsent_(new uint32_t[b.tx]) {
        static_assert(!kPlaces || PlacingEngine<Eng>, "a placement stage needs an engine with deferred placement");
        static_assert(!kStagesCc || CcOffloadingEngine<Eng>, "a CC stage needs an engine with offload_cc");
        if constexpr (kPlaces) {
            static_assert(PlacementStageRing<Placement, Work>);
            jobs_.reset(new PlaceJob[b.rx]);
            work_.reset(new Work[b.rx]);
        }
        if constexpr (kStagesCc) static_assert(CcStageRing<Cc, Eng>);
    }
    DriveLoop(const DriveLoop&) = delete;
    DriveLoop& operator=(const DriveLoop&) = delete;

    // One pass: the stages' results into the engine, a received burst (or, on
    // a kRxUntilEmpty port, all that has arrived) into the engine, the
    // engine's transmit queue to the port, the engine's stage work out.
    // Returns what moved: packets both ways, copies finished, CC records.
    size_t step(Time now) {
        NoHooks h;
        return step(now, h);
    }
    template <class Hooks>
    size_t step(Time now, Hooks& hooks) {
        size_t moved = exchange_cc(now);   // views first: this pass's TX schedules on them
        if constexpr (kPlaces) moved += finish_copies(now);   // their acks go out in this pass's TX
        if (order_ == TxOrder::before_rx) {
            hooks.before_tx(now);
            // After a receive that brought anything (whose ACKs were held):
            // the answer in a port burst of its own, then the ACKs, so the
            // peer may take the answer before the ACK is even built. (One
            // burst for both saves a driver send but made a memif round trip
            // 25% longer: the ACK built and copied before the answer is
            // published, and taken in by the peer before it sees the answer;
            // round 39.)
            if (held_) moved += transmit(now, false);
            moved += transmit(now, true);
            held_ = false;
            // An empty receive changed nothing the first transmit did not
            // drain at this now: a busy poller's empty pass skips the second
            // (its hook and the engine's walk; doc/performance.md 7.3, round 27).
            // After a receive of whole WRITEs alone (a ping-pong's every
            // arrival) only data ACKs can be due, and they wait anyway: no
            // second transmit between the arrival and its owner (round 33).
            uint64_t may_send = 0;
            if constexpr (kRxMaySend) may_send = eng_.rx_may_send();
            if (const size_t got = receive(now, hooks)) {
                moved += got;
                held_ = true;
                bool again = true;
                if constexpr (kRxMaySend) again = eng_.rx_may_send() != may_send;
                if (again) {
                    hooks.before_tx(now);
                    moved += transmit(now, false);
                }
            }
        } else {
            moved += receive(now, hooks);
            hooks.before_tx(now);
            moved += transmit(now);
        }
        return moved + exchange_cc(now);   // then what RX and TX fed back
    }
    void set_tx_order(TxOrder o) noexcept { order_ = o; }
    TxOrder tx_order() const noexcept { return order_; }

    // When the loop must run again without new input (UINT64_MAX: never).
    Time next_deadline(Time now) {
        Time d = eng_.next_deadline(now);
        if constexpr (requires { policy_.placement->deadline(now); }) d = std::min(d, policy_.placement->deadline(now));
        if constexpr (requires { policy_.cc->deadline(now); }) d = std::min(d, policy_.cc->deadline(now));
        return d;
    }

    // The port's wait policy: active says the caller just did work. True if it blocked.
    // After work the loop runs again at once: the deadline is now, not worked
    // out (no port waits then; a ping-pong's pass that posts its answer is one).
    bool idle(bool active, Time now)
        requires kWaits
    {
        return port_.idle(active, now, active ? now : next_deadline(now));
    }

    // Runs until stop() is true; app(now) runs once per pass (post work, poll
    // CQs) and may return true for "did something", which counts as activity
    // for a port's wait policy.
    template <class App, class Stop>
    void run(App&& app, Stop&& stop) {
        while (!stop()) {
            const Time now = port_.now();
            bool active = step(now) != 0;
            if constexpr (std::is_void_v<std::invoke_result_t<App&, Time>>) app(now);
            else active |= bool(app(now));
            // After work the port returns at once and reads no clock: the
            // pass's own serves (Device::idle does the same); before a wait,
            // a fresh one, which the wait is timed from.
            if constexpr (kWaits) idle(active, active ? now : port_.now());
        }
    }

    Time now() noexcept { return port_.now(); }
    P& port() noexcept { return port_; }
    const P& port() const noexcept { return port_; }
    Eng& engine() noexcept { return eng_; }
    Bursts bursts() const noexcept { return b_; }
    uint64_t retry_dropped() const noexcept { return retry_dropped_; }   // refused twice by the port
    // The packets the port refused, kept for the next pass, go to loss
    // recovery instead (counted in retry_dropped). Their payloads point into
    // registered memory: the owner calls this before a region is deregistered
    // (R-MEM-6), as the next pass would read it, and the engine, which voids
    // what it builds from a deregistered region, did not build these since.
    void drop_retries() noexcept {
        retry_dropped_ += nretry_;
        nretry_ = 0;
    }
    uint64_t outstanding() const noexcept { return outstanding_; }       // copies on the placement stage
    uint64_t jobs_sent() const noexcept { return jobs_sent_; }

private:
    size_t exchange_cc(Time now) {
        if constexpr (kStagesCc) return policy_.cc->exchange(eng_, now);
        else return 0;
    }

    size_t finish_copies(Time now) {
        const size_t n = policy_.placement->take_done(done_, kDoneBurst, now);
        if (n) {
            eng_.placed(done_, n, now);
            outstanding_ -= n;
        }
        return n;
    }

    template <class Hooks>
    size_t receive(Time now, Hooks& hooks) {
        size_t moved = 0;
        for (;;) {
            const size_t got = port_.recv_burst(rx_.get(), b_.rx);
            moved += got;
            // A copy names its datagram by its index in the burst (keep() finds the buffer by it).
            if constexpr (kPlaces)
                for (size_t i = 0; i < got; ++i) rx_[i].cookie = uint32_t(i);
            if (const size_t n = hooks.received(rx_.get(), got)) {
                eng_.rx_burst(rx_.get(), n, now);
                if constexpr (kPlaces) hand_copies(now);
            }
            // The engine keeps nothing of an RxPacket past rx_burst but what a copy took.
            if constexpr (kRxDone) port_.rx_done();
            if (!kRxUntilEmpty || got < b_.rx) break;
        }
        return moved;
    }

    void hand_copies(Time now) {
        size_t k;
        while ((k = eng_.take_place_jobs(jobs_.get(), b_.rx)) > 0) {
            for (size_t i = 0; i < k; ++i) work_[i] = port_.keep(jobs_[i]);
            policy_.placement->submit(work_.get(), k, now);
            outstanding_ += k;
            jobs_sent_ += k;
        }
    }

    // The engine's queue to the port, in bursts. Packets the port refused get
    // one more chance in the next pass; after that the engine's loss recovery
    // owns them, as for any loss.
    // acks false: data ACKs stay in the engine for the next pass (TxOrder::before_rx).
    size_t transmit(Time now, bool acks = true) {
        size_t moved = 0;
        if (nretry_) {
            const size_t n = nretry_;
            nretry_ = 0;
            const size_t s = port_.send_burst(retry_.get(), n, unsent_.get());
            moved += s;
            retry_dropped_ += n - s;
            if (s < n) return moved;
        }
        for (;;) {
            if constexpr (kTxReady)
                if (!port_.tx_ready()) break;
            size_t n;
            if constexpr (requires(TxPacket* t) { eng_.tx_burst(t, b_.tx, now, acks); })
                n = eng_.tx_burst(tx_.get(), b_.tx, now, acks);
            else
                n = eng_.tx_burst(tx_.get(), b_.tx, now);
            if (n == 0) break;
            const size_t s = port_.send_burst(tx_.get(), n, unsent_.get());
            moved += n;
            if (s < n) {
                for (size_t i = 0; i < n - s; ++i) retry_[nretry_++] = tx_[unsent_[i]];
                break;   // the port is full: let it drain before asking for more
            }
            if (n < b_.tx) break;
        }
        return moved;
    }

    Port port_;
    Eng& eng_;
    Policy policy_;
    Bursts b_;
    TxOrder order_ = TxOrder::after_rx;
    bool held_ = false;   // before_rx: the last receive brought packets (their ACKs wait)
    std::unique_ptr<RxPacket[]> rx_;
    std::unique_ptr<TxPacket[]> tx_, retry_;
    std::unique_ptr<uint32_t[]> unsent_;
    size_t nretry_ = 0;
    uint64_t retry_dropped_ = 0;
    std::unique_ptr<PlaceJob[]> jobs_;
    std::unique_ptr<Work[]> work_;
    uint32_t done_[kPlaces ? kDoneBurst : 1];
    uint64_t outstanding_ = 0;
    uint64_t jobs_sent_ = 0;
};

}  // namespace mroce
