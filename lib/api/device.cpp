// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <type_traits>

#include "mroce/api.hpp"

namespace mroce {

namespace {

// Locks only in automatic mode: manual progress is single-threaded by contract,
// and an uncontended mutex still costs two atomics per call on the hot path.
struct MaybeLock {
    std::mutex* m;
    MaybeLock(std::mutex& mu, bool on) : m(on ? &mu : nullptr) {
        if (m) m->lock();
    }
    ~MaybeLock() {
        if (m) m->unlock();
    }
};

std::string status_msg(const char* what, Status s) { return std::string(what) + ": " + to_string(s); }

uint64_t threshold(double p) {
    if (p <= 0) return 0;
    if (p >= 1) return UINT64_MAX;
    return uint64_t(std::ldexp(p, 64));
}

// max_payload = auto from the link, and an explicit one checked against it
// (R-SEG-4: a segment and its headers must fit the MTU; a fragmenting link
// turns one lost fragment into a lost segment and hides the UDP ports from ECMP).
DeviceConfig with_segment_size(const DeviceConfig& cfg, const Transport* t) {
    DeviceConfig c = cfg;
    const uint32_t mtu = t ? t->link_mtu() : 0;
    if (c.engine.max_payload == kMaxPayloadAuto) {
        c.engine.max_payload = max_payload_for_mtu(mtu);
        if (c.engine.max_payload == 0)
            throw ConfigError("device '" + c.name + "': key 'max_payload': auto: the link's MTU of " +
                              std::to_string(mtu) + " B cannot carry 28 B IPv4/UDP + 72 B header + 64 B");
    } else if (mtu && 28u + 72u + c.engine.max_payload > mtu) {
        throw ConfigError("device '" + c.name + "': key 'max_payload': " + std::to_string(c.engine.max_payload) +
                          " needs " + std::to_string(28 + 72 + c.engine.max_payload) +
                          " B IPv4 datagrams, above the link's MTU of " + std::to_string(mtu) + " B (" +
                          t->describe() + ")" +
                          (mtu >= 164 ? "; use max_payload <= " + std::to_string(mtu - 100) + " or auto" : ""));
    }
    return c;
}

// The engine of the arrangement the key pipeline names (architecture 4.2):
// copies left to the placement stage, window feedback to the CC stage.
DeviceConfig with_arrangement(DeviceConfig c) {
    c.engine.deferred_placement = c.dpdk.pipeline != PipelineMode::none;
    c.engine.offload_cc = c.dpdk.pipeline == PipelineMode::placement_cc;
    return c;
}

Transport& transport_of(const std::unique_ptr<Transport>& t, const std::string& name) {
    if (!t) throw Error("mroce: device '" + name + "': no transport");
    return *t;
}

// The pipeline policy's view of the transport: its I/O, and keep() handing the
// job on as it is: the transport's stages find the datagram's buffer by the
// job's cookie when the loop submits the job, in the same pass as the receive.
struct StagedPort {
    Transport* t;
    size_t recv_burst(RxPacket* out, size_t max) { return t->recv_burst(out, max); }
    size_t send_burst(const TxPacket* pkts, size_t n, uint32_t* unsent) { return t->send_burst(pkts, n, unsent); }
    Time now() noexcept { return t->now(); }
    bool idle(bool active, Time now, Time deadline) { return t->idle(active, now, deadline); }
    PlaceJob keep(const PlaceJob& j) const noexcept { return j; }
};

// The stages as the loop's placement and CC stages. A copy or a window
// record on its way keeps the loop from napping (next_deadline: now).
struct PlacementOf {
    PipelineStages* s;
    uint64_t out = 0;
    void submit(const PlaceJob* j, size_t n, Time now) {
        s->submit(j, n, now);
        out += n;
    }
    size_t take_done(uint32_t* tokens, size_t max, Time now) {
        const size_t n = s->take_done(tokens, max, now);
        out -= n;
        return n;
    }
    Time deadline(Time now) const noexcept { return out ? now : UINT64_MAX; }
};
struct CcOf {
    PipelineStages* s;
    size_t exchange(Engine& e, Time now) { return s->exchange(e, now); }
    Time deadline(Time now) const noexcept { return s->cc_pending() ? now : UINT64_MAX; }
};

}  // namespace

const char* to_string(PipelineMode m) noexcept {
    switch (m) {
    case PipelineMode::none: return "none";
    case PipelineMode::placement: return "placement";
    case PipelineMode::placement_cc: return "placement+cc";
    }
    return "?";
}

std::unique_ptr<PipelineStages> Transport::start_stages(PipelineMode mode, const EngineConfig&) {
    throw ConfigError("key 'pipeline': " + std::string(to_string(mode)) + ": " + describe() +
                      " has no stage cores (pipeline = placement and placement+cc are for driver = dpdk)");
}

// The device's drive loop behind one virtual call per pass: the loop of the
// policy the key pipeline selects, one DriveLoop instantiation each.
struct Device::Loop {
    virtual ~Loop() = default;
    virtual size_t step(Time now, LoopHooks& h) = 0;
    virtual Time next_deadline(Time now) = 0;
    virtual bool idle(bool active, Time now) = 0;
    virtual void set_tx_order(TxOrder o) noexcept = 0;
    virtual uint64_t retry_dropped() const noexcept = 0;
    virtual void drop_retries() noexcept = 0;
};
// One DriveLoop instantiation; the Pipeline policy's stages live beside it
// (unused in run to completion).
template <class Port, class Policy>
struct Device::LoopOf final : Device::Loop {
    PlacementOf place;
    CcOf cc;
    DriveLoop<Port, Engine, Policy> l;
    LoopOf(Port port, Engine& e, PipelineStages* s, Bursts b) : place{s}, cc{s}, l(port, e, policy(), b) {}
    Policy policy() noexcept {
        Policy p;
        if constexpr (!std::is_same_v<typename Policy::Placement, NoStage>) p.placement = &place;
        if constexpr (!std::is_same_v<typename Policy::Cc, NoStage>) p.cc = &cc;
        return p;
    }
    size_t step(Time now, LoopHooks& h) override { return l.step(now, h); }
    Time next_deadline(Time now) override { return l.next_deadline(now); }
    bool idle(bool active, Time now) override { return l.idle(active, now); }
    void set_tx_order(TxOrder o) noexcept override { l.set_tx_order(o); }
    uint64_t retry_dropped() const noexcept override { return l.retry_dropped(); }
    void drop_retries() noexcept override { l.drop_retries(); }
};

uint16_t max_payload_for_mtu(uint32_t mtu) noexcept {
    if (mtu == 0) return 4096;
    for (uint32_t p = 8192; p >= 64; p /= 2)
        if (28 + 72 + p <= mtu) return uint16_t(p);
    return 0;
}

Device::Device(const DeviceConfig& cfg, std::unique_ptr<Transport> t)
    : cfg_(with_arrangement(with_segment_size(cfg, t.get()))), tr_(std::move(t)), eng_(cfg_.engine) {
    transport_of(tr_, cfg.name);
    loop_ = make_loop();
    rng_ = cfg.inject_seed ? cfg.inject_seed : 0x9E3779B97F4A7C15ull;
    loss_thr_ = threshold(cfg.inject_loss);
    ce_thr_ = threshold(cfg.inject_ce);
    if (cfg_.progress == ProgressMode::automatic) thr_ = std::thread([this] { engine_thread(); });
}

std::unique_ptr<Device::Loop> Device::make_loop() {
    const Bursts b{kRxBurst, kTxBurst};
    const PipelineMode mode = cfg_.dpdk.pipeline;
    if (mode == PipelineMode::none)
        return std::make_unique<LoopOf<Transport&, RunToCompletion>>(*tr_, eng_, nullptr, b);
    try {
        stages_ = tr_->start_stages(mode, eng_.config());
    } catch (const ConfigError& e) {
        throw ConfigError("device '" + cfg_.name + "': " + e.what());
    }
    if (!stages_) throw Error("device '" + cfg_.name + "': key 'pipeline': the driver started no stages");
    std::fprintf(stderr, "mroce: device '%s': pipeline %s: %s\n", cfg_.name.c_str(), to_string(mode),
                 stages_->describe().c_str());
    if (mode == PipelineMode::placement)
        return std::make_unique<LoopOf<StagedPort, Pipeline<PlacementOf, NoStage>>>(StagedPort{tr_.get()}, eng_,
                                                                                     stages_.get(), b);
    return std::make_unique<LoopOf<StagedPort, Pipeline<PlacementOf, CcOf>>>(StagedPort{tr_.get()}, eng_,
                                                                             stages_.get(), b);
}

Device::~Device() {
    if (thr_.joinable()) {
        {
            std::lock_guard<std::mutex> l(nap_mu_);
            stop_ = true;
        }
        nap_cv_.notify_one();
        tr_->wake();
        thr_.join();
    }
}

void Device::fail(const char* what, Status s) const { throw Error(status_msg(what, s)); }

void Device::kick() noexcept {
    if (sleeping_.load(std::memory_order_relaxed)) tr_->wake();
}

void Device::engine_thread() {
    // Its naps while callers drive are short: the default 50 us timer slack
    // would make each one at least that long.
    ::prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    while (!stop_.load(std::memory_order_relaxed)) {
        size_t moved;
        Time deadline;
        Time now = tr_->now();
        const Time until = driven_until_.load(std::memory_order_relaxed);
        if (now < until) {  // a caller drives the loop: stand by
            const Time run = now - driving_since_.load(std::memory_order_relaxed);
            const Time nap = std::min<Time>(std::max<Time>(until - now, run / 4), 1'000'000);
            std::unique_lock<std::mutex> l(nap_mu_);
            nap_cv_.wait_for(l, std::chrono::nanoseconds(nap), [this] {
                return stop_.load(std::memory_order_relaxed) || driven_until_.load(std::memory_order_relaxed) == 0;
            });
            continue;
        }
        {
            std::lock_guard<std::mutex> g(mu_);
            moved = step_locked(now);
            deadline = loop_->next_deadline(now);
        }
        sleeping_.store(true, std::memory_order_relaxed);
        // A post between the unlock and here makes tx pending: do not sleep through it.
        bool pending;
        {
            std::lock_guard<std::mutex> g(mu_);
            pending = eng_.tx_pending(tr_->now());
        }
        const bool blocked = tr_->idle(moved != 0 || pending, tr_->now(), deadline);
        sleeping_.store(false, std::memory_order_relaxed);
        if (blocked) {
            std::lock_guard<std::mutex> g(mu_);
            ++dst_.blocks;
        }
    }
}

// The loop's hooks: the test fault injector on what was received, and the
// connection events (streams of incoming connections) before transmit.
struct Device::LoopHooks {
    Device& d;
    size_t received(RxPacket* rx, size_t n) noexcept { return d.inject_faults(rx, n); }
    void before_tx(Time) { d.handle_events_locked(); }
};

size_t Device::step_locked(Time now) {
    ++dst_.passes;
    pass_now_ = now;
    LoopHooks h{*this};
    const size_t moved = loop_->step(now, h);
    deliver_cq_events_locked();
    return moved;
}

// R-NOTIFY-2: the notifications the engine raised in this pass (or API call)
// go to their CQs' channels; the eventfd writes happen here, in the loop, not
// in the engine (doc/architecture.md 4.1).
// Most posts and passes raise none: deliver_cq_events_locked (api.hpp) skips
// the array and the engine's queue then (about 65 instructions per posted
// message otherwise, doc/performance.md 7.3).
void Device::deliver_cq_events_now_locked() {
    CqEvent ev[16];
    for (size_t n; (n = eng_.take_cq_events(ev, 16)) > 0;)
        for (size_t i = 0; i < n; ++i)
            if (ev[i].cq <= cq_channel_.size())  // a CQ made through engine() has no channel here
                if (CompletionChannel* ch = cq_channel_[ev[i].cq - 1]) ch->post(ev[i].cq, ev[i].events);
}

size_t Device::inject_faults(RxPacket* rx, size_t n) noexcept {
    if (!n || !(loss_thr_ | ce_thr_)) return n;
    // TEST ONLY: the injector draws per packet, but only when enabled.
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) {
        rng_ ^= rng_ << 13, rng_ ^= rng_ >> 7, rng_ ^= rng_ << 17;
        if (loss_thr_ && rng_ < loss_thr_) {
            ++dst_.injected_drops;
            continue;
        }
        rx[k] = rx[i];
        if (ce_thr_) {
            rng_ ^= rng_ << 13, rng_ ^= rng_ >> 7, rng_ ^= rng_ << 17;
            if (rng_ < ce_thr_ && !rx[k].ce) {
                rx[k].ce = 1;
                ++dst_.injected_ce;
            }
        }
        ++k;
    }
    return k;
}

void Device::handle_events_now_locked() {
    ConnEvent ev[16];
    size_t n;
    while ((n = eng_.poll_events(ev, 16)) > 0) {
        for (size_t i = 0; i < n; ++i) {
            if (ev[i].kind == EventKind::incoming) {
                for (const auto& s : accept_streams_) {
                    const Status st = eng_.create_stream(ev[i].conn, s.id, s.attr());
                    (void)st;  // a failure leaves the stream unknown: the peer retries it as RNR (R-NAK-10)
                }
                incoming_.push_back(ev[i]);
            } else if (ev[i].kind == EventKind::error || ev[i].kind == EventKind::closed) {
                failures_.push_back(ev[i]);
                if (event_listener_) event_listener_(ev[i]);
            } else if (ev[i].kind == EventKind::srq_limit) {
                srq_events_.push_back(ev[i].srq);
                if (event_listener_) event_listener_(ev[i]);
            }
        }
    }
}

void Device::set_tx_order(TxOrder o) {
    MaybeLock g(mu_, thr_.joinable());
    loop_->set_tx_order(o);
}

size_t Device::drive() {
    MaybeLock g(mu_, true);
    return drive_locked();
}

size_t Device::drive_locked() {
    const Time now = tr_->now();
    if (thr_.joinable()) {
        // A run of driving ends only after a gap of a millisecond (or a
        // stop_driving): a poller preempted for a while is still the poller.
        const Time until = driven_until_.load(std::memory_order_relaxed);
        if (until == 0 || now > until + 1'000'000) driving_since_.store(now, std::memory_order_relaxed);
        driven_until_.store(now + Time(cfg_.drive_handoff_us) * 1000, std::memory_order_relaxed);
        returned_locked(now);
    }
    return step_locked(now);
}

void Device::returned_locked(Time now) noexcept {
    if (left_at_ == 0) return;
    stays_away_ = now - left_at_ > Time(cfg_.drive_handoff_us) * 1000;
    if (stays_away_) lingers_ = true;
    left_at_ = 0;
}

bool Device::leave(std::unique_lock<std::mutex>& g) {
    if (!thr_.joinable() || driven_until_.load(std::memory_order_relaxed) == 0) return false;
    Time now = tr_->now();
    if (lingers_) {
        // Drive until a pass moves a packet (the answer the application waits
        // for lands now), at most spin_us; the lock is released between passes
        // so that the application's other threads may post.
        const Time end = now + Time(cfg_.spin_us) * 1000;
        for (;;) {
            g.unlock();
            g.lock();
            now = tr_->now();
            if (now >= end) {
                lingers_ = false;  // it waits longer than a linger: measure it again
                left_at_ = now;
                return true;
            }
            driven_until_.store(now + Time(cfg_.drive_handoff_us) * 1000, std::memory_order_relaxed);
            if (step_locked(now) != 0) return false;
        }
    }
    left_at_ = now;
    return stays_away_;
}

void Device::stop_driving() {
    {
        std::lock_guard<std::mutex> l(nap_mu_);
        driven_until_.store(0, std::memory_order_relaxed);
    }
    nap_cv_.notify_one();
}

size_t Device::progress() {
    if (cfg_.progress == ProgressMode::automatic) return 0;
    return step_locked(tr_->now());
}

bool Device::idle(bool active) {
    if (cfg_.progress == ProgressMode::automatic) {
        if (!active) std::this_thread::sleep_for(std::chrono::microseconds(20));
        return false;
    }
    // After work no clock is read: the port does not use it then (DrivePort),
    // and the pass's own stands in (one read fewer between a frame's arrival
    // and the answer).
    const Time now = active ? pass_now_ : tr_->now();
    if (!loop_->idle(active || eng_.tx_pending(now), now)) return false;
    ++dst_.blocks;
    return true;
}

uint32_t Device::alloc_pd() {
    MaybeLock g(mu_, thr_.joinable());
    return eng_.alloc_pd();
}

MemoryRegion Device::register_mr(uint32_t pd, void* addr, uint64_t length, uint32_t access) {
    MaybeLock g(mu_, thr_.joinable());
    MrInfo mi{};
    const Status s = eng_.register_mr(pd, addr, length, access, mi);
    if (s != Status::ok)
        throw Error(status_msg(("register_mr(" + std::to_string(length) + " bytes)").c_str(), s));
    return MemoryRegion{mi.lkey, mi.rkey, mi.pd, mi.access, mi.addr, mi.length};
}

void Device::deregister_mr(const MemoryRegion& mr) {
    MaybeLock g(mu_, thr_.joinable());
    // R-MEM-6: the application frees the region once this returns. Packets
    // the port refused last pass would read it in the next; a zero-copy
    // driver's NIC reads payloads after send_burst returned (it releases
    // them within microseconds; a second is a peer that stopped reading).
    loop_->drop_retries();
    if (const uint32_t held = tr_->tx_payload_held(1'000'000'000))
        throw TimeoutError("deregister_mr: " + std::to_string(held) + " payload segments of sent packets are still held by " +
                    tr_->describe() + " after 1 s (zero-copy TX not yet released); the region stays registered");
    const Status s = eng_.deregister_mr(mr.lkey);
    if (s != Status::ok) fail("deregister_mr", s);
}

uint32_t Device::create_cq(uint32_t depth) { return create_cq(depth, nullptr); }

uint32_t Device::create_cq(uint32_t depth, CompletionChannel* channel) {
    MaybeLock g(mu_, thr_.joinable());
    if (channel && &channel->dev_ != this) throw Error("create_cq: the completion channel belongs to another device");
    uint32_t cq = 0;
    const Status s = eng_.create_cq(depth, cq);
    if (s != Status::ok) fail("create_cq", s);
    cq_channel_.resize(cq, nullptr);
    cq_channel_[cq - 1] = channel;
    std::lock_guard<std::mutex> e(ev_mu_);
    events_got_.resize(cq, 0);
    events_acked_.resize(cq, 0);
    return cq;
}

CompletionChannel& Device::create_comp_channel() {
    MaybeLock g(mu_, thr_.joinable());
    channels_.push_back(std::unique_ptr<CompletionChannel>(new CompletionChannel(*this)));
    return *channels_.back();
}

void Device::req_notify_cq(uint32_t cq, bool solicited_only) {
    MaybeLock g(mu_, thr_.joinable());
    if (cq == 0 || cq > cq_channel_.size()) fail(("req_notify_cq " + std::to_string(cq)).c_str(), Status::no_such_object);
    if (!cq_channel_[cq - 1])
        throw Error("req_notify_cq: CQ " + std::to_string(cq) + " was created without a completion channel");
    const Status s = eng_.req_notify_cq(cq, solicited_only);
    if (s != Status::ok) fail("req_notify_cq", s);
}

void Device::ack_cq_events(uint32_t cq, uint32_t n) {
    std::lock_guard<std::mutex> e(ev_mu_);
    if (cq == 0 || cq > events_got_.size()) fail(("ack_cq_events " + std::to_string(cq)).c_str(), Status::no_such_object);
    if (events_acked_[cq - 1] + n > events_got_[cq - 1])
        throw Error("ack_cq_events: " + std::to_string(n) + " events of CQ " + std::to_string(cq) + ", but " +
                    std::to_string(events_got_[cq - 1] - events_acked_[cq - 1]) + " taken and not acknowledged");
    events_acked_[cq - 1] += n;
}

uint64_t Device::unacked_cq_events(uint32_t cq) const {
    std::lock_guard<std::mutex> e(ev_mu_);
    if (cq == 0 || cq > events_got_.size()) return 0;
    return events_got_[cq - 1] - events_acked_[cq - 1];
}

size_t Device::poll_cq(uint32_t cq, Completion* out, size_t max) {
    MaybeLock g(mu_, thr_.joinable());
    return eng_.poll_cq(cq, out, max);
}

uint32_t Device::create_srq(uint32_t pd, uint32_t depth) {
    MaybeLock g(mu_, thr_.joinable());
    uint32_t srq = 0;
    const Status s = eng_.create_srq(pd, depth, srq);
    if (s != Status::ok) fail(("create_srq(depth " + std::to_string(depth) + ")").c_str(), s);
    return srq;
}

bool Device::try_post_srq_recv(uint32_t srq, const RecvWr& wr) {
    size_t posted = 0;
    const Status s = submit_srq_recvs(srq, &wr, 1, posted);
    if (s == Status::queue_full) return false;
    if (s != Status::ok) fail(("post_srq_recv on srq " + std::to_string(srq)).c_str(), s);
    return true;
}

// The one place the engine's post calls are made for the API (a template
// over the engine call, post(wrs, n, posted) -> Status, so sends, receives
// and SRQ receives share the locking, the notification and the wake-up).
// Under manual progress (no engine thread) it is inline in each caller: no
// lock, and no wake-up, since only the engine thread ever sleeps with
// sleeping_ set (doc/performance.md 7.3, round 32).
template <class Wr, class Post>
Status Device::submit(const Wr* wrs, size_t n, size_t& posted, bool wake, Post post) noexcept {
    if (thr_.joinable()) [[unlikely]] return submit_locked(wrs, n, posted, wake, post);
    const Status s = post(wrs, n, posted);
    deliver_cq_events_locked();  // a completion at post (an error, a flush) may notify
    return s;
}

template <class Wr, class Post>
Status Device::submit_locked(const Wr* wrs, size_t n, size_t& posted, bool wake, Post post) noexcept {
    Status s;
    {
        std::lock_guard<std::mutex> g(mu_);
        s = post(wrs, n, posted);
        deliver_cq_events_locked();
        // A caller that drives the loop and posts between its polls is still driving.
        const Time now = tr_->now();
        returned_locked(now);
        if (now < driven_until_.load(std::memory_order_relaxed))
            driven_until_.store(now + Time(cfg_.drive_handoff_us) * 1000, std::memory_order_relaxed);
    }
    if (wake && posted) kick();
    return s;
}

// submit's post from an engine call of one WR: in order, to the first refused.
template <class Post1>
static auto one_by_one(Post1 post1) {
    return [post1](const auto* wrs, size_t n, size_t& posted) {
        Status s = Status::ok;
        size_t k = 0;  // a local: the loop does not store through posted per entry
        while (k < n && (s = post1(wrs[k])) == Status::ok) ++k;
        posted = k;
        return s;
    };
}

Status Device::submit_sends(uint32_t conn, uint32_t stream, const SendWr* wrs, size_t n, size_t& posted) noexcept {
    return submit(wrs, n, posted, true, [this, conn, stream](const SendWr* w, size_t m, size_t& k) {
        return eng_.post_sends(conn, stream, w, m, k);
    });
}
Status Device::submit_recvs(uint32_t conn, uint32_t stream, const RecvWr* wrs, size_t n, size_t& posted) noexcept {
    return submit(wrs, n, posted, false, one_by_one([&](const RecvWr& w) { return eng_.post_recv(conn, stream, w); }));
}
Status Device::submit_srq_recvs(uint32_t srq, const RecvWr* wrs, size_t n, size_t& posted) noexcept {
    return submit(wrs, n, posted, false, one_by_one([&](const RecvWr& w) { return eng_.post_srq_recv(srq, w); }));
}

void Device::post_srq_recv(uint32_t srq, const RecvWr& wr) {
    if (!try_post_srq_recv(srq, wr)) throw Error("post_srq_recv on srq " + std::to_string(srq) + ": queue full");
}

void Device::arm_srq_limit(uint32_t srq, uint32_t limit) {
    MaybeLock g(mu_, thr_.joinable());
    const Status s = eng_.arm_srq_limit(srq, limit);
    if (s != Status::ok) fail(("arm_srq_limit(" + std::to_string(limit) + ") on srq " + std::to_string(srq)).c_str(), s);
}

uint32_t Device::srq_posted(uint32_t srq) const {
    MaybeLock g(mu_, thr_.joinable());
    uint32_t n = 0;
    const Status s = eng_.srq_posted(srq, n);
    if (s != Status::ok) fail("srq_posted", s);
    return n;
}

size_t Device::poll_srq_events(uint32_t* srqs, size_t max) {
    MaybeLock g(mu_, thr_.joinable());
    size_t n = 0;
    while (n < max && !srq_events_.empty()) {
        srqs[n++] = srq_events_.front();
        srq_events_.pop_front();
    }
    return n;
}

void Device::destroy_srq(uint32_t srq) {
    MaybeLock g(mu_, thr_.joinable());
    const Status s = eng_.destroy_srq(srq);
    if (s == Status::bad_state) throw Error("destroy_srq " + std::to_string(srq) + ": a stream still uses it");
    if (s != Status::ok) fail("destroy_srq", s);
}

void Device::set_event_listener(std::function<void(const ConnEvent&)> f) {
    MaybeLock g(mu_, thr_.joinable());
    event_listener_ = std::move(f);
}

void Device::set_accept_streams(std::vector<StreamSpec> streams) {
    MaybeLock g(mu_, thr_.joinable());
    accept_streams_ = std::move(streams);
}

// Why a connection to peer failed, in words: the engine's cause and the
// driver's last network error about the peer since net_errors_before.
std::string Device::failure_cause(uint32_t conn, uint32_t peer, uint64_t net_errors_before) const {
    ConnStats cs;
    std::string why;
    const Time ms = 1'000'000;
    if (eng_.conn_stats(conn, cs) == Status::ok) {
        if (cs.error_cause == ConnErrorCause::connect_unanswered)
            why = "no CONNECT_ACK after " + std::to_string(cs.connect_attempts) + " CONNECT_REQ attempts" +
                  (cs.connect_planes > 1 ? " over " + std::to_string(cs.connect_planes) + " planes" : std::string()) +
                  " in " + std::to_string(cfg_.engine.conn_timeout / ms) + " ms (conn_timeout_ms)";
        else if (cs.error_cause == ConnErrorCause::peer_silent)
            why = "peer silent for " + std::to_string(cs.silent_for / ms) + " ms with work outstanding (conn_timeout_ms " +
                  std::to_string(cfg_.engine.conn_timeout / ms) + ")";
        else
            why = to_string(cs.state);
    }
    const Transport::PeerNetError ne = tr_->peer_error(peer);
    if (ne.count > net_errors_before && !ne.what.empty()) why += "; network: " + ne.what;
    else if (cs.error_cause == ConnErrorCause::connect_unanswered)
        why += "; the peer answered nothing (no listener there, or every packet lost)";
    return why;
}

Connection Device::connect(const std::string& ip, uint16_t port, Time timeout_ns) {
    return connect(std::vector<PeerAddress>{PeerAddress{ip, port}}, timeout_ns);
}

Connection Device::connect(const std::vector<PeerAddress>& planes, Time timeout_ns) {
    if (planes.empty() || planes.size() > wire::kMaxPlanes)
        throw Error("connect: " + std::to_string(planes.size()) + " peer addresses, 1.." +
                    std::to_string(wire::kMaxPlanes) + " (one per plane)");
    // What the error names: the first address, and every plane's when given more (R-PLANE-6).
    std::string where = planes[0].ip + ":" + std::to_string(planes[0].port);
    uint32_t peer, conn = 0;
    uint8_t known = 1;
    uint64_t net_errors_before = 0;
    {
        MaybeLock g(mu_, thr_.joinable());
        peer = tr_->resolve_peer(planes, known);
        net_errors_before = tr_->peer_error(peer).count;
        // R-CONN-14: connect() may return a connection the peer opened and
        // this device accepted; drained first, so that accept() never returns it too.
        handle_events_locked();
        const Status s = eng_.connect(peer, conn, known);
        if (s != Status::ok) throw ConnectionError(status_msg(("connect to " + where).c_str(), s));
        std::erase_if(incoming_, [conn](const ConnEvent& e) { return e.conn == conn; });
    }
    // The planes the attempts rotate over (min of ours and the peer's known
    // addresses: those given, or more the device learned from the peer's own
    // CONNECT_REQ earlier, R-PLANE-6; planes[] has only those given).
    const size_t tried = std::min<size_t>(known, std::max<size_t>(1, tr_->num_planes()));
    if (tried > 1) {
        where += " (attempts rotated over its planes:";
        for (size_t p = 0; p < tried; ++p)
            where += " " + std::to_string(p) + "=" +
                     (p < planes.size() ? planes[p].ip + ":" + std::to_string(planes[p].port)
                                        : std::string("learned from the peer"));
        where += ")";
    }
    kick();
    const Time start = now();
    for (;;) {
        const bool moved = progress() != 0;
        ConnState st;
        {
            MaybeLock g(mu_, thr_.joinable());
            st = eng_.conn_state(conn);
        }
        if (st == ConnState::established) return Connection(this, conn, peer);
        if (st == ConnState::error || st == ConnState::closed) {
            MaybeLock g(mu_, thr_.joinable());
            throw ConnectionError("connect to " + where + ": " + failure_cause(conn, peer, net_errors_before));
        }
        if (now() - start > timeout_ns) {
            MaybeLock g(mu_, thr_.joinable());
            ConnStats cs;
            (void)eng_.conn_stats(conn, cs);
            const Transport::PeerNetError ne = tr_->peer_error(peer);
            throw ConnectionError("connect to " + where + ": no answer within " +
                                  std::to_string(timeout_ns / 1'000'000) + " ms (" +
                                  std::to_string(cs.connect_attempts) + " CONNECT_REQ attempts)" +
                                  (ne.count > net_errors_before && !ne.what.empty() ? "; network: " + ne.what : ""));
        }
        idle(moved);
    }
}

Connection Device::accept(Time timeout_ns) {
    const Time start = now();
    for (;;) {
        const bool moved = progress() != 0;
        {
            MaybeLock g(mu_, thr_.joinable());
            if (!incoming_.empty()) {
                const ConnEvent ev = incoming_.front();
                incoming_.pop_front();
                return Connection(this, ev.conn, ev.peer);
            }
        }
        if (timeout_ns != UINT64_MAX && now() - start > timeout_ns)
            throw TimeoutError("accept on " + tr_->describe() + ": no connection within " +
                               std::to_string(timeout_ns / 1'000'000) + " ms");
        idle(moved);
    }
}

EngineStats Device::engine_stats() const {
    MaybeLock g(mu_, thr_.joinable());
    return eng_.stats();
}
TransportStats Device::transport_stats() const {
    MaybeLock g(mu_, thr_.joinable());
    return tr_->stats();
}
size_t Device::num_planes() const { return tr_->num_planes(); }
bool Device::query_plane(size_t plane, PlaneInfo& out) const {
    MaybeLock g(mu_, thr_.joinable());
    if (plane >= tr_->num_planes()) return false;
    out = tr_->plane_info(plane);
    if (out.address.empty()) out.address = cfg_.address;
    return true;
}
DeviceStats Device::device_stats() const {
    MaybeLock g(mu_, thr_.joinable());
    DeviceStats s = dst_;
    s.tx_retry_dropped = loop_->retry_dropped();
    if (stages_) {
        s.stage_copies = stages_->copies();
        s.stage_cc_records = stages_->cc_records();
    }
    return s;
}

// ---------------------------------------------------------------------------

void Connection::create_stream(uint32_t stream_id, uint32_t pd, uint32_t send_cq, uint32_t recv_cq) {
    StreamSpec sp;
    sp.id = stream_id;
    sp.pd = pd;
    sp.send_cq = send_cq;
    sp.recv_cq = recv_cq;
    create_stream(sp);
}

void Connection::create_stream(const StreamSpec& sp) {
    MaybeLock g(dev_->mu_, dev_->thr_.joinable());
    const Status s = dev_->eng_.create_stream(id_, sp.id, sp.attr());
    if (s != Status::ok) dev_->fail(("create_stream " + std::to_string(sp.id)).c_str(), s);
}

void Connection::set_stream_error(uint32_t stream_id) {
    {
        MaybeLock g(dev_->mu_, dev_->thr_.joinable());
        const Status s = dev_->eng_.set_stream_error(id_, stream_id);
        if (s != Status::ok) dev_->fail(("set_stream_error " + std::to_string(stream_id)).c_str(), s);
    }
    dev_->kick();
}

void Connection::destroy_stream(uint32_t stream_id) {
    MaybeLock g(dev_->mu_, dev_->thr_.joinable());
    const Status s = dev_->eng_.destroy_stream(id_, stream_id);
    if (s != Status::ok) dev_->fail(("destroy_stream " + std::to_string(stream_id)).c_str(), s);
}

void Connection::set_max_rd_atomic(uint32_t stream_id, uint32_t max_rd_atomic) {
    {
        MaybeLock g(dev_->mu_, dev_->thr_.joinable());
        const Status s = dev_->eng_.set_stream_max_rd_atomic(id_, stream_id, max_rd_atomic);
        if (s != Status::ok) dev_->fail(("set_max_rd_atomic on stream " + std::to_string(stream_id)).c_str(), s);
    }
    dev_->kick();
}

// Calls submit itself, not submit_sends: its manual-progress path is then
// inline here, without submit_sends' frame (round 32).
bool Connection::try_post_send(uint32_t stream_id, const SendWr& wr) {
    size_t posted = 0;
    Device& d = *dev_;
    const Status s = d.submit(&wr, 1, posted, true, one_by_one([&d, id = id_, stream_id](const SendWr& w) {
        return d.eng_.post_send(id, stream_id, w);
    }));
    if (s == Status::ok) [[likely]] return true;
    return send_refused(stream_id, s);  // out of line: the error paths' strings cost the post a frame
}

size_t Connection::try_post_sends(uint32_t stream_id, const SendWr* wrs, size_t n) {
    size_t posted = 0;
    const Status s = dev_->submit_sends(id_, stream_id, wrs, n, posted);  // its frame: once per list
    if (s != Status::ok) [[unlikely]] send_refused(stream_id, s);  // queue_full: posted < n
    return posted;
}

[[gnu::noinline, gnu::cold]] bool Connection::send_refused(uint32_t stream_id, Status s) {
    if (s == Status::queue_full) return false;
    if (s == Status::bad_state) {
        check();
        throw ConnectionError("post_send on stream " + std::to_string(stream_id) + ": stream in error");
    }
    dev_->fail(("post_send on stream " + std::to_string(stream_id)).c_str(), s);
}

bool Connection::try_post_recv(uint32_t stream_id, const RecvWr& wr) {
    size_t posted = 0;
    const Status s = dev_->submit_recvs(id_, stream_id, &wr, 1, posted);
    if (s == Status::ok) return true;
    if (s == Status::queue_full) return false;
    if (s == Status::bad_state) check();
    dev_->fail(("post_recv on stream " + std::to_string(stream_id)).c_str(), s);
}

void Connection::post_send(uint32_t stream_id, const SendWr& wr) {
    if (!try_post_send(stream_id, wr))
        throw Error("post_send on stream " + std::to_string(stream_id) + ": send queue full");
}
void Connection::post_recv(uint32_t stream_id, const RecvWr& wr) {
    if (!try_post_recv(stream_id, wr))
        throw Error("post_recv on stream " + std::to_string(stream_id) + ": receive queue full");
}

SendWr Connection::write_wr(uint64_t wr_id, const MemoryRegion& mr, uint64_t laddr, uint32_t len, uint64_t raddr,
                            uint32_t rkey, bool signaled) {
    SendWr w;
    w.wr_id = wr_id;
    w.op = OpKind::write;
    w.local_addr = laddr;
    w.length = len;
    w.lkey = mr.lkey;
    w.remote_addr = raddr;
    w.rkey = rkey;
    w.signaled = signaled;
    return w;
}
SendWr Connection::read_wr(uint64_t wr_id, const MemoryRegion& mr, uint64_t laddr, uint32_t len, uint64_t raddr,
                           uint32_t rkey, bool signaled) {
    SendWr w = write_wr(wr_id, mr, laddr, len, raddr, rkey, signaled);
    w.op = OpKind::read;
    return w;
}
SendWr Connection::send_wr(uint64_t wr_id, const MemoryRegion& mr, uint64_t laddr, uint32_t len, bool signaled) {
    SendWr w;
    w.wr_id = wr_id;
    w.op = OpKind::send;
    w.local_addr = laddr;
    w.length = len;
    w.lkey = mr.lkey;
    w.signaled = signaled;
    return w;
}
SendWr Connection::cas_wr(uint64_t wr_id, const MemoryRegion& mr, uint64_t laddr, uint64_t raddr, uint32_t rkey,
                          uint64_t compare, uint64_t swap) {
    SendWr w = write_wr(wr_id, mr, laddr, 8, raddr, rkey, true);
    w.op = OpKind::atomic_cas;
    w.compare_add = compare;
    w.swap = swap;
    return w;
}
SendWr Connection::fadd_wr(uint64_t wr_id, const MemoryRegion& mr, uint64_t laddr, uint64_t raddr, uint32_t rkey,
                           uint64_t add) {
    SendWr w = write_wr(wr_id, mr, laddr, 8, raddr, rkey, true);
    w.op = OpKind::atomic_fadd;
    w.compare_add = add;
    return w;
}

ConnState Connection::state() const {
    MaybeLock g(dev_->mu_, dev_->thr_.joinable());
    return dev_->eng_.conn_state(id_);
}

void Connection::check() const {
    const ConnState s = state();
    if (s == ConnState::error) {
        MaybeLock g(dev_->mu_, dev_->thr_.joinable());
        throw ConnectionError("connection " + std::to_string(id_) + " to " + peer_name() + ": " +
                              dev_->failure_cause(id_, peer_, 0));
    }
    if (s == ConnState::closed || s == ConnState::closing)
        throw ConnectionError("connection " + std::to_string(id_) + " to " + peer_name() + ": " + to_string(s));
}

ConnStats Connection::stats() const {
    MaybeLock g(dev_->mu_, dev_->thr_.joinable());
    ConnStats cs;
    const Status s = dev_->eng_.conn_stats(id_, cs);
    if (s != Status::ok) dev_->fail("conn_stats", s);
    return cs;
}

uint16_t Connection::num_paths() const { return stats().num_paths; }

PathStats Connection::path_stats(uint16_t path) const {
    MaybeLock g(dev_->mu_, dev_->thr_.joinable());
    PathStats ps;
    const Status s = dev_->eng_.path_stats(id_, path, ps);
    if (s != Status::ok) dev_->fail(("path_stats " + std::to_string(path)).c_str(), s);
    return ps;
}

std::string Connection::peer_name() const { return dev_->tr_->peer_name(peer_); }

void Connection::release() {
    MaybeLock g(dev_->mu_, dev_->thr_.joinable());
    const ConnState st = dev_->eng_.conn_state(id_);
    const Status s = dev_->eng_.release_conn(id_);
    if (s == Status::bad_state)
        throw Error("release of connection " + std::to_string(id_) + " to " + peer_name() + ": it is " +
                    to_string(st) + "; disconnect it and wait for closed first");
    if (s != Status::ok) dev_->fail("release_conn", s);
}

void Connection::disconnect() {
    {
        MaybeLock g(dev_->mu_, dev_->thr_.joinable());
        const Status s = dev_->eng_.disconnect(id_);
        if (s != Status::ok && s != Status::bad_state) dev_->fail("disconnect", s);
    }
    dev_->kick();
}

}  // namespace mroce
