// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
#include "fabric.hpp"
#include "host_loop.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace mroce::sim {

uint64_t splitmix64(uint64_t x) noexcept {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void Rng::reseed(uint64_t seed) noexcept {
    uint64_t x = seed;
    for (auto& s : s_) {
        x = splitmix64(x);
        s = x;
    }
    // xoshiro's all-zero state is a fixed point; splitmix64 of a counter never
    // yields four zeros, but be explicit about the invariant.
    if ((s_[0] | s_[1] | s_[2] | s_[3]) == 0) s_[0] = 1;
}

const char* to_string(TraceEvent::Kind k) noexcept {
    switch (k) {
        case TraceEvent::Kind::send: return "send";
        case TraceEvent::Kind::enqueue: return "enqueue";
        case TraceEvent::Kind::drop_queue: return "drop_queue";
        case TraceEvent::Kind::drop_loss: return "drop_loss";
        case TraceEvent::Kind::drop_down: return "drop_down";
        case TraceEvent::Kind::drop_no_route: return "drop_no_route";
        case TraceEvent::Kind::ce_mark: return "ce_mark";
        case TraceEvent::Kind::duplicate: return "duplicate";
        case TraceEvent::Kind::deliver: return "deliver";
    }
    return "?";
}

namespace {

// Probability p as a threshold on a uniform 64-bit draw; p >= 1 must always
// hit, which no 64-bit threshold expresses, hence the saturation to max.
uint64_t probability_threshold(double p) {
    if (!(p > 0)) return 0;
    if (p >= 1) return UINT64_MAX;
    return uint64_t(std::ldexp(p, 64));
}

}  // namespace

// --- Link -------------------------------------------------------------------

Link::Link(LinkId id, const LinkConfig& cfg, uint64_t seed, Fabric* fab)
    : id_(id), cfg_(cfg), rng_(splitmix64(seed ^ (0x51ed270b00000000ull + id))), fab_(fab) {
    if (cfg_.rate_bps == 0) throw std::invalid_argument("sim link rate_bps must be > 0");
    loss_threshold_ = probability_threshold(cfg_.loss);
    dup_threshold_ = probability_threshold(cfg_.duplicate);
    set_ecn_ramp(cfg_.ecn_min_bytes, cfg_.ecn_max_bytes, cfg_.ecn_pmax);
    pfc_served_ = cfg_.pfc_xoff_bytes != kUnlimited;
    if (pfc_served_ && cfg_.pfc_xon_bytes >= cfg_.pfc_xoff_bytes)
        throw std::invalid_argument("sim link pfc_xon_bytes must be below pfc_xoff_bytes");
}

void Link::set_ecn_ramp(uint64_t min_bytes, uint64_t max_bytes, double pmax) {
    if (max_bytes && (min_bytes >= max_bytes || !(pmax > 0 && pmax <= 1)))
        throw std::invalid_argument("sim link ECN ramp: needs ecn_min_bytes < ecn_max_bytes, 0 < ecn_pmax <= 1");
    cfg_.ecn_min_bytes = min_bytes;
    cfg_.ecn_max_bytes = max_bytes;
    cfg_.ecn_pmax = pmax;
}

bool Link::ce_mark(uint64_t backlog) noexcept {
    if (cfg_.ecn_max_bytes == 0) return backlog > cfg_.ecn_threshold_bytes;
    if (backlog >= cfg_.ecn_max_bytes) return true;
    if (backlog <= cfg_.ecn_min_bytes) return false;
    return rng_.uniform() * double(cfg_.ecn_max_bytes - cfg_.ecn_min_bytes) <
           cfg_.ecn_pmax * double(backlog - cfg_.ecn_min_bytes);
}

void Link::set_loss(double p) noexcept {
    cfg_.loss = p;
    loss_threshold_ = probability_threshold(p);
}

void Link::set_duplicate(double p) noexcept {
    cfg_.duplicate = p;
    dup_threshold_ = probability_threshold(p);
}

void Link::set_rate(uint64_t bps) noexcept {
    if (bps == 0) return;
    // The exact remainder is in units of the old rate: round the busy time up.
    if (busy_rem_) {
        ++busy_ns_;
        busy_rem_ = 0;
    }
    cfg_.rate_bps = bps;
}

Time Link::serialize(Time now, uint64_t bytes) noexcept {
    if (busy_ns_ < now || (busy_ns_ == now && busy_rem_ == 0)) {
        busy_ns_ = now;
        busy_rem_ = 0;
    }
    const uint64_t rate = cfg_.rate_bps;
    const uint64_t bit_ns = bytes * 8'000'000'000ull;  // bits * 1e9: ns * rate
    busy_ns_ += bit_ns / rate;
    busy_rem_ += bit_ns % rate;
    if (busy_rem_ >= rate) {
        busy_rem_ -= rate;
        ++busy_ns_;
    }
    return busy_ns_ + (busy_rem_ ? 1 : 0);
}

void Link::drain(Time now) noexcept {
    while (!queue_.empty() && queue_.front().finish <= now) {
        backlog_bytes_ -= queue_.front().bytes;
        queue_.pop_front();
    }
}

uint64_t Link::queue_bytes() const noexcept {
    uint64_t backlog = backlog_bytes_;
    for (size_t i = 0; i < queue_.size() && queue_[i].finish <= fab_->now(); ++i) backlog -= queue_[i].bytes;
    return backlog;
}

// --- Fabric internals -------------------------------------------------------

namespace {

// kArrive: one packet (links that may reorder); kLinkHead: the head of a
// link's in-order arrival FIFO.
enum EventKind : uint8_t { kArrive = 0, kLinkHead = 1, kPoll = 2, kAction = 3 };

struct Event {
    Time t;
    uint64_t key;  // (insertion sequence << 2) | kind: FIFO among equal times, so runs are reproducible
    uint32_t idx;  // packet slot, host id or action slot
};

inline bool before(const Event& a, const Event& b) noexcept {
    return a.t != b.t ? a.t < b.t : a.key < b.key;
}

// A datagram on the wire: the sim's own copy of header + payload.
struct WirePacket {
    uint8_t* data = nullptr;
    uint32_t len = 0;
    uint8_t size_class = 0;
    uint8_t ect = 0;
    uint8_t ce = 0;
    uint8_t hop = 0;
    uint8_t nhops = 0;
    uint16_t path = 0;
    uint16_t entropy = 0;
    HostId src = 0;
    HostId dst = 0;
    uint32_t epoch = 0;  // epoch of route[hop] when the packet entered it
    LinkId route[kMaxHops + 1];
};

// Buffers come in 256-byte size classes up to 16 KiB (a 4 KiB payload plus
// header wastes little), recycled LIFO through free lists so the hottest
// buffers are reused first: after warm-up the wire allocates nothing.
constexpr size_t kClassBytes = 256;
constexpr size_t kNumClasses = 64;

constexpr size_t kNotInHeap = SIZE_MAX;
// An rx_pending entry whose wire copy a PlaceJob kept (HostPort::keep).
constexpr uint32_t kKeptSlot = UINT32_MAX;

struct Host {
    std::unique_ptr<HostLoop> loop;
    HostConfig cfg;
    HostCounters ctr;
    LinkId nic = kNoLink;
    // Position of this host's one poll event in the heap. Moving it in place
    // (rather than leaving stale copies) keeps the heap from filling with
    // far-future deadlines superseded by every delivery.
    size_t heap_pos = kNotInHeap;
    std::vector<uint32_t> rx_pending;  // packet slots delivered, not yet handed over
    size_t rx_next = 0;                // of rx_pending: the first not handed over in this poll
    size_t rx_burst = 0;               // ... the first of the last burst handed over
    size_t rx_freed = 0;               // ... the first not freed (or kept)
    bool rx_kept = false;              // ... and some of those are kept (kKeptSlot)
    bool stalled = false;              // this poll stopped at a full NIC ring
};

Time serialization_ns(uint64_t bytes, uint64_t rate_bps) noexcept;

}  // namespace

struct Fabric::Impl {
    explicit Impl(Fabric& f) : fab(f) {}
    Fabric& fab;
    std::vector<Event> heap;
    uint64_t next_seq = 1;

    std::vector<WirePacket> slots;
    std::vector<uint32_t> free_slots;
    std::vector<uint8_t*> free_bufs[kNumClasses];
    std::vector<std::unique_ptr<uint8_t[]>> buf_storage;
    uint64_t in_flight = 0;

    std::vector<Host> hosts;
    std::vector<std::unique_ptr<Endpoint>> owned;
    Router router;

    std::vector<std::function<void()>> actions;
    std::vector<uint32_t> free_actions;

    std::function<void(const TraceEvent&)> trace;

    void route_and_send(HostId src, const TxPacket& pkt);
    void send(HostId src, const TxPacket& pkt, const LinkId* route, size_t n);
    void enqueue(uint32_t slot);
    void arrive(uint32_t slot);
    void poll(HostId h);
    // Host h's port (HostPort): one poll hands over every packet that has
    // arrived. Packets only arrive from events, never during a poll, so the
    // pending list is stable while it is handed over.
    size_t host_recv(HostId h, RxPacket* out, size_t max) {
        Host& host = hosts[h];
        const size_t n = std::min(max, host.rx_pending.size() - host.rx_next);
        const uint32_t* pending = host.rx_pending.data() + host.rx_next;
        uint64_t bytes = 0;
        for (size_t k = 0; k < n; ++k) {
            const WirePacket& p = slots[pending[k]];
            RxPacket& rx = out[k];
            rx.data = p.data;
            rx.len = p.len;
            rx.peer = p.src;
            rx.local_path = p.path;
            rx.ce = p.ce;
            bytes += p.len;
            if (trace) [[unlikely]]
                trace_packet(p, TraceEvent::Kind::deliver, kNoLink);
        }
        if (n) {
            host.ctr.rx_packets += n;
            host.ctr.rx_bytes += bytes;
            ++host.ctr.rx_bursts;
            host.rx_burst = host.rx_next;
            host.rx_next += n;
        }
        return n;
    }
    // The wire copy of datagram i of the last burst stays until host_release.
    uint32_t host_keep(HostId h, size_t i) {
        Host& host = hosts[h];
        const uint32_t slot = host.rx_pending[host.rx_burst + i];
        host.rx_pending[host.rx_burst + i] = kKeptSlot;
        host.rx_kept = true;
        return slot;
    }
    void host_rx_done(HostId h) {
        Host& host = hosts[h];
        const uint32_t* pending = host.rx_pending.data();
        const size_t end = host.rx_next;
        if (!host.rx_kept) {
            for (size_t i = host.rx_freed; i < end; ++i) free_packet(pending[i]);
        } else {
            for (size_t i = host.rx_freed; i < end; ++i)
                if (pending[i] != kKeptSlot) free_packet(pending[i]);
            host.rx_kept = false;
        }
        host.rx_freed = host.rx_next;
        if (host.rx_next == host.rx_pending.size()) {
            host.rx_pending.clear();
            host.rx_next = host.rx_freed = 0;
        }
    }
    size_t host_send(HostId h, const TxPacket* pkts, size_t n) {
        for (size_t k = 0; k < n; ++k) route_and_send(h, pkts[k]);
        return n;
    }
    // False, and the poll that resumes is scheduled, while the NIC ring is full.
    bool host_tx_ready(HostId h) {
        Host& host = hosts[h];
        if (host.nic != kNoLink) {
            Link& nic = *fab.links_[host.nic];
            const Time now = fab.now_;
            nic.drain(now);
            if (nic.backlog_bytes_ > host.cfg.nic_ring_bytes) {
                // Resume when the ring is half empty rather than after every
                // packet: one wake-up per ring's worth of serialization.
                const Time drained = nic.busy_ns_ + (nic.busy_rem_ ? 1 : 0);
                const Time half_ring = serialization_ns(host.cfg.nic_ring_bytes / 2, nic.cfg_.rate_bps);
                const Time resume = std::max<Time>(drained - std::min(drained, half_ring), now + 1);
                ++host.ctr.nic_stalls;
                schedule_poll(h, resume);
                host.stalled = true;
                return false;
            }
        }
        ++host.ctr.tx_bursts;   // the loop asks the engine for a burst now
        return true;
    }
    void schedule_poll(HostId h, Time t) {
        const size_t pos = hosts[h].heap_pos;
        if (pos == kNotInHeap) {
            push(t, kPoll, h);
        } else if (t < heap[pos].t) {
            // Earlier only: a later deadline is picked up when this poll runs
            // and asks the endpoint again.
            sift_up(pos, Event{t, new_key(kPoll), h});
        }
    }
    void trace_packet(const WirePacket& p, TraceEvent::Kind kind, LinkId link) {
        trace(TraceEvent{fab.now_, kind, link, p.src, p.dst, p.path, p.entropy, p.len, p.ce});
    }

    uint64_t new_key(EventKind kind) { return (next_seq++ << 2) | kind; }
    uint64_t push(Time t, EventKind kind, uint32_t idx) {
        const uint64_t key = new_key(kind);
        heap_push(Event{t, key, idx});
        return key;
    }
    // Every store into the heap goes through here so poll events keep
    // their host's heap_pos current.
    void place(size_t i, const Event& e) {
        heap[i] = e;
        if ((e.key & 3) == kPoll) hosts[e.idx].heap_pos = i;
    }
    void sift_up(size_t i, const Event& e) {
        while (i > 0) {
            const size_t parent = (i - 1) / 2;
            if (!before(e, heap[parent])) break;
            place(i, heap[parent]);
            i = parent;
        }
        place(i, e);
    }
    void heap_push(const Event& e) {
        heap.push_back(e);
        sift_up(heap.size() - 1, e);
    }
    // Replacing the top in place costs one sift-down instead of a pop and a push.
    void heap_replace_top(const Event& e) {
        if ((heap[0].key & 3) == kPoll) hosts[heap[0].idx].heap_pos = kNotInHeap;
        const size_t n = heap.size();
        size_t i = 0;
        for (;;) {
            size_t child = 2 * i + 1;
            if (child >= n) break;
            if (child + 1 < n && before(heap[child + 1], heap[child])) ++child;
            if (!before(heap[child], e)) break;
            place(i, heap[child]);
            i = child;
        }
        place(i, e);
    }
    void heap_pop() {
        const Event last = heap.back();
        if (heap.size() == 1) {
            if ((last.key & 3) == kPoll) hosts[last.idx].heap_pos = kNotInHeap;
            heap.pop_back();
            return;
        }
        heap.pop_back();
        heap_replace_top(last);
    }
    void schedule_arrival(Link& L, Time t, uint32_t slot) {
        if (L.cfg_.jitter_reorders && L.cfg_.jitter) {
            push(t, kArrive, slot);
            return;
        }
        const uint64_t key = new_key(kLinkHead);
        const bool was_idle = L.arrivals_.empty();
        L.arrivals_.push_back(Link::Arrival{t, key, slot});
        if (was_idle) heap_push(Event{t, key, L.id_});
    }
    void drop_in_flight(Link& L);
    // After admission: loss, duplication and the arrival at the far end of a
    // packet whose serialization ends at finish.
    void put_on_wire(Link& L, uint32_t slot, Time finish);
    // PFC (LinkConfig::pfc_xoff_bytes): admission, service one packet at a
    // time, the downstream switch's ingress accounting and PAUSE/RESUME.
    void pfc_admit(Link& L, uint32_t slot, uint64_t bytes, LinkId upstream);
    void pfc_serve(Link& L);
    void pfc_served(Link& L);
    void pfc_ingress(LinkId upstream, int64_t delta);
    void pfc_signal(Link& U, bool pause);
    void pfc_drop_held(Link& L);

    uint32_t alloc_packet(uint32_t len) {
        const size_t cls = len ? (len - 1) / kClassBytes : 0;
        if (cls >= kNumClasses) throw std::length_error("sim packet larger than 16 KiB");
        uint8_t* buf;
        if (!free_bufs[cls].empty()) {
            buf = free_bufs[cls].back();
            free_bufs[cls].pop_back();
        } else {
            buf_storage.emplace_back(new uint8_t[(cls + 1) * kClassBytes]);
            buf = buf_storage.back().get();
        }
        uint32_t slot;
        if (!free_slots.empty()) {
            slot = free_slots.back();
            free_slots.pop_back();
        } else {
            slot = uint32_t(slots.size());
            slots.emplace_back();
        }
        WirePacket& p = slots[slot];
        p.data = buf;
        p.len = len;
        p.size_class = uint8_t(cls);
        ++in_flight;
        return slot;
    }

    void free_packet(uint32_t slot) {
        WirePacket& p = slots[slot];
        free_bufs[p.size_class].push_back(p.data);
        p.data = nullptr;
        free_slots.push_back(slot);
        --in_flight;
    }

    uint32_t clone_packet(uint32_t slot) {
        const uint32_t c = alloc_packet(slots[slot].len);  // may reallocate slots
        WirePacket& dst = slots[c];
        const WirePacket& src = slots[slot];
        uint8_t* data = dst.data;
        const uint8_t cls = dst.size_class;
        dst = src;
        dst.data = data;
        dst.size_class = cls;
        std::memcpy(dst.data, src.data, src.len);
        return c;
    }
};

Fabric::Fabric(uint64_t seed) : seed_(seed), impl_(std::make_unique<Impl>(*this)) {}
Fabric::~Fabric() = default;

size_t Fabric::num_hosts() const noexcept { return impl_->hosts.size(); }
const HostCounters& Fabric::host_counters(HostId h) const { return impl_->hosts.at(h).ctr; }
LinkId Fabric::nic_link(HostId h) const { return impl_->hosts.at(h).nic; }
uint64_t Fabric::packets_in_flight() const noexcept { return impl_->in_flight; }
size_t Fabric::events_pending() const noexcept { return impl_->heap.size(); }
void Fabric::set_router(Router r) { impl_->router = std::move(r); }
void Fabric::set_trace(std::function<void(const TraceEvent&)> fn) { impl_->trace = std::move(fn); }

LinkId Fabric::add_link(const LinkConfig& cfg) {
    const LinkId id = LinkId(links_.size());
    links_.emplace_back(new Link(id, cfg, seed_, this));
    return id;
}

HostId Fabric::new_host(const HostConfig& cfg) {
    if (cfg.burst == 0) throw std::invalid_argument("sim host burst must be > 0");
    const HostId id = HostId(impl_->hosts.size());
    Host h;
    h.cfg = cfg;
    if (cfg.nic_rate_bps) {
        LinkConfig nic;
        nic.rate_bps = cfg.nic_rate_bps;
        nic.delay = 0;
        nic.overhead_bytes = cfg.nic_overhead_bytes;
        nic.name = "nic" + std::to_string(id);
        h.nic = add_link(nic);
    }
    impl_->hosts.push_back(std::move(h));
    return id;
}

void Fabric::attach(HostId h, std::unique_ptr<HostLoop> loop) {
    impl_->hosts.at(h).loop = std::move(loop);
    kick(h);
}

HostId Fabric::add_host(Endpoint& endpoint, const HostConfig& cfg) {
    const HostId id = new_host(cfg);
    attach(id, std::make_unique<HostLoopOf<Endpoint>>(HostPort(*impl_, id), endpoint, cfg.burst));
    return id;
}

HostId Fabric::add_host(std::unique_ptr<Endpoint> endpoint, const HostConfig& cfg) {
    Endpoint& ep = *endpoint;
    impl_->owned.push_back(std::move(endpoint));
    return add_host(ep, cfg);
}

void Fabric::kick(HostId h) {
    (void)impl_->hosts.at(h);
    impl_->schedule_poll(h, now_);
}

void Fabric::kick_all() {
    for (HostId h = 0; h < impl_->hosts.size(); ++h) kick(h);
}

void Fabric::at(Time t, std::function<void()> fn) {
    if (t < now_) throw std::invalid_argument("sim: Fabric::at in the past");
    uint32_t slot;
    if (!impl_->free_actions.empty()) {
        slot = impl_->free_actions.back();
        impl_->free_actions.pop_back();
        impl_->actions[slot] = std::move(fn);
    } else {
        slot = uint32_t(impl_->actions.size());
        impl_->actions.push_back(std::move(fn));
    }
    impl_->push(t, kAction, slot);
}

// --- the packet path ----------------------------------------------------------

namespace {

Time serialization_ns(uint64_t bytes, uint64_t rate_bps) noexcept {
    return (bytes * 8'000'000'000ull + rate_bps - 1) / rate_bps;
}

bool draw(Rng& rng, uint64_t threshold) noexcept {
    if (threshold == 0) return false;
    const uint64_t r = rng.next();
    return threshold == UINT64_MAX || r < threshold;
}

}  // namespace

void Link::set_up(bool up) noexcept {
    if (cfg_.up && !up) {
        ++epoch_;
        // Whatever sat in the queue is lost with the link: it no longer
        // occupies the queue when the link returns.
        queue_.clear();
        backlog_bytes_ = 0;
        busy_ns_ = fab_->now();
        busy_rem_ = 0;
        last_arrival_ = 0;
        fab_->impl_->drop_in_flight(*this);
        fab_->impl_->pfc_drop_held(*this);
    }
    cfg_.up = up;
}

void Fabric::Impl::drop_in_flight(Link& L) {
    while (!L.arrivals_.empty()) {
        const uint32_t slot = L.arrivals_.front().slot;
        L.arrivals_.pop_front();
        ++L.ctr_.drop_down;
        if (trace) [[unlikely]]
            trace_packet(slots[slot], TraceEvent::Kind::drop_down, L.id_);
        free_packet(slot);
    }
}

void Fabric::Impl::route_and_send(HostId src, const TxPacket& pkt) {
    Host& host = hosts[src];
    LinkId route[kMaxHops];
    size_t n = 0;
    if (pkt.peer >= hosts.size()) {
        ++host.ctr.drop_bad_peer;
    } else {
        if (router) n = router(src, pkt.peer, pkt.path, pkt.entropy, route);
        if (n == 0 || n > kMaxHops) {
            n = 0;
            ++host.ctr.drop_no_route;
        }
    }
    if (n == 0) {
        if (trace) [[unlikely]]
            trace(TraceEvent{fab.now_, TraceEvent::Kind::drop_no_route, kNoLink, src, pkt.peer, pkt.path,
                             pkt.entropy, uint32_t(pkt.hdr_len + pkt.payload_len), 0});
        return;
    }
    send(src, pkt, route, n);
}

void Fabric::Impl::send(HostId src, const TxPacket& pkt, const LinkId* route, size_t n) {
    Host& host = hosts[src];
    const size_t extra = host.nic != kNoLink ? 1 : 0;
    const uint32_t len = uint32_t(pkt.hdr_len) + pkt.payload_len;
    const uint32_t slot = alloc_packet(len);
    WirePacket& p = slots[slot];
    // The copy is the wire: the engine may reuse its header array and the
    // application its memory as soon as the packet has left.
    std::memcpy(p.data, pkt.hdr, pkt.hdr_len);
    if (pkt.payload_len) std::memcpy(p.data + pkt.hdr_len, pkt.payload, pkt.payload_len);
    p.ect = pkt.ect ? 1 : 0;
    p.ce = 0;
    p.hop = 0;
    p.nhops = uint8_t(n + extra);
    p.path = pkt.path;
    p.entropy = pkt.entropy;
    p.src = src;
    p.dst = pkt.peer;
    if (extra) p.route[0] = host.nic;
    std::copy(route, route + n, p.route + extra);
    ++host.ctr.tx_packets;
    host.ctr.tx_bytes += len;
    if (trace) [[unlikely]]
        trace_packet(p, TraceEvent::Kind::send, kNoLink);
    enqueue(slot);
}

// Everything the link decides about a packet (drop, mark, departure, loss,
// duplicate, jitter) is settled when it is offered, so a packet costs one
// event per hop and the queue needs no service events.
void Fabric::Impl::enqueue(uint32_t slot) {
    WirePacket* p = &slots[slot];
    Link& L = *fab.links_[p->route[p->hop]];
    const LinkId lid = L.id_;
    if (!L.cfg_.up) {
        ++L.ctr_.drop_down;
        if (trace) [[unlikely]]
            trace_packet(*p, TraceEvent::Kind::drop_down, lid);
        free_packet(slot);
        return;
    }
    const Time now = fab.now_;
    const uint64_t bytes = uint64_t(p->len) + L.cfg_.overhead_bytes;
    L.drain(now);
    const uint64_t backlog = L.backlog_bytes_;
    ++L.ctr_.queue_samples;
    L.ctr_.queue_bytes_sum += backlog;
    if (backlog > L.ctr_.max_queue_bytes) L.ctr_.max_queue_bytes = backlog;
    const uint64_t cap = L.cfg_.capacity_bytes;
    if (bytes > cap || backlog > cap - bytes) {
        ++L.ctr_.drop_queue;
        if (trace) [[unlikely]]
            trace_packet(*p, TraceEvent::Kind::drop_queue, lid);
        free_packet(slot);
        return;
    }
    if (p->ect && !p->ce && L.ce_mark(backlog)) {
        p->ce = 1;
        ++L.ctr_.ce_marks;
        if (trace) [[unlikely]]
            trace_packet(*p, TraceEvent::Kind::ce_mark, lid);
    }
    ++L.ctr_.tx_packets;
    L.ctr_.tx_bytes += bytes;
    if (L.pfc_served_) {
        pfc_admit(L, slot, bytes, p->hop ? p->route[p->hop - 1] : kNoLink);
        return;
    }
    const Time finish = L.serialize(now, bytes);
    L.queue_.push_back(Link::QueueEntry{finish, bytes});
    L.backlog_bytes_ += bytes;
    put_on_wire(L, slot, finish);
}

void Fabric::Impl::put_on_wire(Link& L, uint32_t slot, Time finish) {
    WirePacket* p = &slots[slot];
    const LinkId lid = L.id_;
    if (trace) [[unlikely]]
        trace_packet(*p, TraceEvent::Kind::enqueue, lid);
    if (draw(L.rng_, L.loss_threshold_)) {
        ++L.ctr_.drop_loss;
        if (trace) [[unlikely]]
            trace_packet(*p, TraceEvent::Kind::drop_loss, lid);
        free_packet(slot);
        return;
    }
    Time arrival = finish + L.cfg_.delay;
    if (L.cfg_.jitter) arrival += L.rng_.below(L.cfg_.jitter + 1);
    if (!L.cfg_.jitter_reorders) {
        arrival = std::max(arrival, L.last_arrival_);
        L.last_arrival_ = arrival;
    }
    p->epoch = L.epoch_;
    schedule_arrival(L, arrival, slot);
    if (draw(L.rng_, L.dup_threshold_)) {
        const uint32_t copy = clone_packet(slot);
        p = &slots[slot];
        ++L.ctr_.duplicates;
        if (trace) [[unlikely]]
            trace_packet(*p, TraceEvent::Kind::duplicate, lid);
        schedule_arrival(L, arrival, copy);
    }
}

// --- PFC ----------------------------------------------------------------------

void Fabric::Impl::pfc_admit(Link& L, uint32_t slot, uint64_t bytes, LinkId upstream) {
    L.held_.push_back(Link::Held{slot, bytes, upstream});
    L.backlog_bytes_ += bytes;
    pfc_ingress(upstream, int64_t(bytes));
    if (!L.serving_ && !L.paused_) pfc_serve(L);
}

void Fabric::Impl::pfc_serve(Link& L) {
    const Link::Held h = L.held_.front();
    L.held_.pop_front();
    const Time finish = L.serialize(fab.now_, h.bytes);
    L.queue_.push_back(Link::QueueEntry{finish, h.bytes});  // bytes already in the backlog
    L.serving_ = true;
    L.in_service_ = h;
    put_on_wire(L, h.slot, finish);
    fab.at(finish, [this, &L] { pfc_served(L); });
}

void Fabric::Impl::pfc_served(Link& L) {
    L.serving_ = false;
    L.drain(fab.now_);
    pfc_ingress(L.in_service_.upstream, -int64_t(L.in_service_.bytes));
    if (!L.paused_ && !L.held_.empty()) pfc_serve(L);
}

void Fabric::Impl::pfc_ingress(LinkId upstream, int64_t delta) {
    if (upstream == kNoLink) return;
    Link& U = *fab.links_[upstream];
    U.ingress_bytes_ = uint64_t(int64_t(U.ingress_bytes_) + delta);
    if (!U.pfc_served_) return;
    if (!U.pause_wanted_ && U.ingress_bytes_ > U.cfg_.pfc_xoff_bytes) pfc_signal(U, true);
    else if (U.pause_wanted_ && U.ingress_bytes_ < U.cfg_.pfc_xon_bytes) pfc_signal(U, false);
}

// The PAUSE (or RESUME) frame reaches the upstream transmitter one
// propagation delay after the threshold was crossed.
void Fabric::Impl::pfc_signal(Link& U, bool pause) {
    U.pause_wanted_ = pause;
    fab.at(fab.now_ + U.cfg_.delay, [this, &U] {
        if (U.paused_ == U.pause_wanted_) return;
        U.paused_ = U.pause_wanted_;
        if (U.paused_) {
            ++U.ctr_.pfc_pauses;
            U.paused_since_ = fab.now_;
        } else {
            U.ctr_.pfc_paused_ns += fab.now_ - U.paused_since_;
            if (!U.serving_ && !U.held_.empty()) pfc_serve(U);
        }
    });
}

void Fabric::Impl::pfc_drop_held(Link& L) {
    while (!L.held_.empty()) {
        const Link::Held h = L.held_.front();
        L.held_.pop_front();
        ++L.ctr_.drop_down;
        if (trace) [[unlikely]]
            trace_packet(slots[h.slot], TraceEvent::Kind::drop_down, L.id_);
        free_packet(h.slot);
        pfc_ingress(h.upstream, -int64_t(h.bytes));
    }
}

void Fabric::Impl::arrive(uint32_t slot) {
    WirePacket& p = slots[slot];
    Link& L = *fab.links_[p.route[p.hop]];
    if (p.epoch != L.epoch_) {
        // The link failed while this packet was queued or on the wire.
        ++L.ctr_.drop_down;
        if (trace) [[unlikely]]
            trace_packet(p, TraceEvent::Kind::drop_down, L.id_);
        free_packet(slot);
        return;
    }
    ++L.ctr_.delivered;
    if (++p.hop < p.nhops) {
        enqueue(slot);
        return;
    }
    const HostId dst = p.dst;
    Host& host = hosts[dst];
    host.rx_pending.push_back(slot);
    schedule_poll(dst, fab.now_ + host.cfg.rx_coalesce);
}

void Fabric::Impl::poll(HostId h) {
    const Time now = fab.now_;
    ++hosts[h].ctr.polls;
    hosts[h].stalled = false;
    Time d = hosts[h].loop->poll(now);
    if (d != kNever) {
        if (d <= now) {
            ++hosts[h].ctr.deadline_spins;
            d = now + 1;
        }
        schedule_poll(h, d);
    }
}

// The drive loop's port (host_loop.hpp) is the fabric itself: these forward
// to it, and inline where the fabric's own hosts run the loop (fabric.cpp).
size_t HostPort::recv_burst(RxPacket* out, size_t max) { return im_->host_recv(h_, out, max); }
void HostPort::rx_done() { im_->host_rx_done(h_); }
size_t HostPort::send_burst(const TxPacket* pkts, size_t n, uint32_t*) { return im_->host_send(h_, pkts, n); }
bool HostPort::tx_ready() { return im_->host_tx_ready(h_); }
HostPort::Copy HostPort::keep(const PlaceJob& j) {
    return Copy{j.dst, j.src, j.len, j.token, im_->host_keep(h_, j.cookie)};
}
void HostPort::release(uint32_t slot) { im_->free_packet(slot); }
bool HostPort::stalled() const { return im_->hosts[h_].stalled; }

void Fabric::inject(HostId src, const TxPacket& pkt) {
    (void)impl_->hosts.at(src);
    impl_->route_and_send(src, pkt);
}

void Fabric::inject(HostId src, const TxPacket& pkt, std::span<const LinkId> route) {
    (void)impl_->hosts.at(src);
    if (route.empty() || route.size() > kMaxHops) throw std::invalid_argument("sim: route must have 1..kMaxHops links");
    for (LinkId l : route) (void)links_.at(l);
    if (pkt.peer >= impl_->hosts.size()) {
        ++impl_->hosts[src].ctr.drop_bad_peer;
        return;
    }
    impl_->send(src, pkt, route.data(), route.size());
}

bool Fabric::step(Time limit) {
    Impl& im = *impl_;
    if (im.heap.empty() || im.heap.front().t > limit) {
        if (limit != kNever && limit > now_) now_ = limit;
        return false;
    }
    const Event e = im.heap.front();
    now_ = e.t;
    ++events_;
    if (EventKind(e.key & 3) == kLinkHead) {
        Link& L = *links_[e.idx];
        if (L.arrivals_.empty() || L.arrivals_.front().key != e.key) {  // emptied by a failure
            im.heap_pop();
            return true;
        }
        const uint32_t slot = L.arrivals_.front().slot;
        L.arrivals_.pop_front();
        if (!L.arrivals_.empty()) {
            const Link::Arrival& next = L.arrivals_.front();
            im.heap_replace_top(Event{next.t, next.key, e.idx});
        } else {
            im.heap_pop();
        }
        im.arrive(slot);
        return true;
    }
    im.heap_pop();
    switch (EventKind(e.key & 3)) {
        case kLinkHead:
            break;
        case kArrive:
            im.arrive(e.idx);
            break;
        case kPoll:
            im.poll(e.idx);
            break;
        case kAction: {
            std::function<void()> fn = std::move(im.actions[e.idx]);
            im.actions[e.idx] = nullptr;
            im.free_actions.push_back(e.idx);
            fn();
            break;
        }
    }
    return true;
}

void Fabric::run_until(Time t) {
    kick_all();
    while (step(t)) {
    }
}

}  // namespace mroce::sim
