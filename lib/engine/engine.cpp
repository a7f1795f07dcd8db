// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Engine: public API, objects (PDs, MRs, CQs, connections, streams) and the
// connection state machine (doc/spec.md R-CONN-*, R-STREAM-*, R-CMPL-*).
// The receive path is in rx.cpp, the transmit path and timers in tx.cpp.
#include <sys/random.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <random>
#include <utility>

#include "engine_impl.hpp"

namespace mroce {

const char* to_string(Status s) noexcept {
    switch (s) {
    case Status::ok: return "ok";
    case Status::invalid_argument: return "invalid argument";
    case Status::no_such_object: return "no such object";
    case Status::queue_full: return "queue full";
    case Status::bad_state: return "bad state";
    case Status::exists: return "already exists";
    case Status::no_memory: return "out of memory";
    case Status::message_too_long: return "message longer than kMaxMessageSize (2^31 bytes)";
    }
    return "unknown";
}

const char* to_string(WcStatus s) noexcept {
    switch (s) {
    case WcStatus::success: return "success";
    case WcStatus::loc_len_err: return "local length error";
    case WcStatus::loc_prot_err: return "local protection error";
    case WcStatus::rem_access_err: return "remote access error";
    case WcStatus::rem_inv_req_err: return "remote invalid request";
    case WcStatus::rem_op_err: return "remote operation error";
    case WcStatus::wr_flush_err: return "flushed";
    case WcStatus::transport_err: return "transport error (connection lost)";
    case WcStatus::rnr_retry_exc_err: return "receiver not ready, retries exhausted";
    }
    return "unknown";
}

const char* to_string(ConnErrorCause c) noexcept {
    switch (c) {
    case ConnErrorCause::none: return "none";
    case ConnErrorCause::connect_unanswered: return "connect unanswered";
    case ConnErrorCause::peer_silent: return "peer silent";
    }
    return "unknown";
}

const char* to_string(ConnState s) noexcept {
    switch (s) {
    case ConnState::idle: return "idle";
    case ConnState::connecting: return "connecting";
    case ConnState::established: return "established";
    case ConnState::closing: return "closing";
    case ConnState::closed: return "closed";
    case ConnState::error: return "error";
    }
    return "unknown";
}

static bool power_of_two(uint32_t v) { return v && !(v & (v - 1)); }

// The index mask of a ring sized to a power of two (bit_ceil of its depth).
template <typename T>
static uint32_t depth_mask(const std::vector<T>& ring) {
    return uint32_t(ring.size() - 1);
}

Engine::Impl::Impl(const EngineConfig& c)
    : cfg(c),
      events(256),
      fair(uint64_t(c.rx_capacity_mbps) * 1000, c.hint_interval ? c.hint_interval : 4 * c.min_rto) {}

Engine::Impl::~Impl() {
    for (Conn* c : conns) delete c;
}

Engine::Engine(const EngineConfig& cfg) : impl_(std::make_unique<Impl>(cfg)), notified_(&impl_->notified), rx_may_send_(&impl_->rx_may_send) {
    EngineConfig& c = impl_->cfg;
    // R-PLANE-1: at most kMaxPlanes; two or more are announced in a plane block.
    c.num_planes = uint8_t(std::min<size_t>(c.num_planes, wire::kMaxPlanes));
    if (c.num_planes >= 2)
        impl_->plane_block_len = uint32_t(wire::encode_plane_block(impl_->plane_block, c.planes.data(), c.num_planes));
    // Addresses a peer would refuse (zero, repeated): one plane, no block, rather than no handshake.
    if (impl_->plane_block_len &&
        !wire::parse_plane_block({impl_->plane_block.data(), impl_->plane_block_len}, nullptr)) {
        impl_->plane_block_len = 0;
        c.num_planes = 1;
    }
    // Clamp configuration into the ranges the wire allows (R-CONN-3); a
    // caller that needs errors validates first (drivers do, from config files).
    c.max_payload = std::clamp<uint16_t>(c.max_payload, 64, uint16_t(wire::kMaxPayload));
    c.num_paths = std::clamp<uint16_t>(c.num_paths, 1, 256);
    c.stream_depth = std::clamp<uint32_t>(c.stream_depth, 1, 1u << 16);
    c.recv_depth = std::clamp<uint32_t>(c.recv_depth, 1, 1u << 20);
    c.max_send_sge = std::clamp<uint32_t>(c.max_send_sge, 1, kMaxSge);
    c.max_recv_sge = std::clamp<uint32_t>(c.max_recv_sge, 1, kMaxSge);
    c.max_inline = std::min<uint32_t>(c.max_inline, kMaxInline);
    if (!power_of_two(c.csn_window) || c.csn_window < 64 || c.csn_window > (1u << 20)) c.csn_window = 4096;
    if (c.min_rto == 0) c.min_rto = 1000;
    if (c.max_rto < c.min_rto) c.max_rto = c.min_rto;
    c.cc.max_cwnd = std::min<double>(c.cc.max_cwnd, wire::kSackBits);
    impl_->cc_core = CcCore(c.cc);
    if (c.offload_cc) {
        uint32_t d = 64;
        while (d < c.cc_depth && d < (1u << 20)) d <<= 1;
        c.cc_depth = d;
        impl_->cc_fb.resize(d);
    }
    if (c.deferred_placement) {
        uint32_t d = 64;
        while (d < c.place_depth && d < (1u << 20)) d <<= 1;
        c.place_depth = d;
        impl_->pend.resize(d);
        impl_->place_jobs.resize(d);
    }
    Impl& I = *impl_;
    I.pend_head = I.pend_tail = I.job_head = I.job_tail = I.cc_head = I.cc_tail = c.test_seq_base;
}

Engine::~Engine() = default;

const EngineConfig& Engine::config() const noexcept { return impl_->cfg; }
const EngineStats& Engine::stats() const noexcept { return impl_->st; }

size_t Engine::conn_state_bytes() { return sizeof(Conn); }
size_t Engine::stream_state_bytes() { return sizeof(Stream); }

size_t Engine::self_check() const {
    size_t bad = 0;
    for (const Conn* c : impl_->conns) {
        if (!c) continue;
        uint32_t unsettled = 0;
        for (uint32_t i = 0; i < c->num_paths; ++i) {
            const TxPath& p = c->paths[i];
            unsettled += (p.snd_nxt - p.snd_una) + (p.state == PathStateKind::failed);
            // Inline CC: the path's view is the one the core published for
            // its latest record (cc_feed writes it in place), field by field.
            CcView v;
            if (!impl_->cfg.offload_cc && impl_->cc_core.view(p.cc_slot, v) && v.gen == p.ccv.gen) {
                if (v.timeouts < p.cc_timeouts_fed) v.cwnd = std::min(v.cwnd, impl_->cfg.cc.min_cwnd);
                if (v.slot != p.ccv.slot || v.cwnd != p.ccv.cwnd || v.rounds_since_mark != p.ccv.rounds_since_mark ||
                    v.rounds != p.ccv.rounds || v.cuts != p.ccv.cuts || v.timeouts != p.ccv.timeouts)
                    ++bad;
            }
            if (!p.plan_kept) continue;
            TxPath fresh = p;
            const uint64_t score = plan_path(fresh);
            if (fresh.sched_room != p.sched_room || score != c->sched_score[i] ||
                score != c->sched_score[i + c->num_paths] || (score != kNoPath && fresh.sched_step != p.sched_step))
                ++bad;
        }
        if (unsettled != c->unsettled) ++bad;
        // Timers: a node on the wheel is the connection's (in_timed) and due
        // no later than its timers; one off it with in_timed set is
        // wake_post's, not placed yet (round 38), so on the ready list with
        // its R-CONN-6 timeout in timer_due; a connection whose timers
        // matter (wants_timer) has its node one way or the other.
        const Time due = std::min(c->timer_due, c->pacer_due);
        if (c->tnode.linked() ? !c->in_timed || c->tnode.due > due
                              : c->in_timed && (!c->in_ready || c->timer_due == TimerWheel::kNever))
            ++bad;
        if (Impl::wants_timer(*c) && !c->in_timed) ++bad;
    }
    return bad;
}

// ---------------- memory ----------------

uint32_t Engine::alloc_pd() { return impl_->next_pd++; }

Status Engine::register_mr(uint32_t pd, void* addr, uint64_t length, uint32_t access, MrInfo& out) {
    if (pd == 0 || pd >= impl_->next_pd) return Status::no_such_object;
    if (impl_->cfg.test_mutation == TestMutation::no_rkey_bounds) [[unlikely]] {
        // TEST ONLY: the region's range check lets kMutationSlack bytes past its end through.
        const Status s = impl_->mrs.add(pd, addr, length + kMutationSlack, access, out);
        out.length = length;
        return s;
    }
    return impl_->mrs.add(pd, addr, length, access, out);
}

Status Engine::deregister_mr(uint32_t lkey) { return impl_->mrs.remove(lkey); }

// ---------------- completion queues ----------------

Status Engine::create_cq(uint32_t depth, uint32_t& cq_out) {
    if (depth == 0 || depth > (1u << 22)) return Status::invalid_argument;
    Cq q;
    q.ring.resize(std::bit_ceil(depth));
    q.mask = depth_mask(q.ring);
    q.depth = depth;
    q.head = q.tail = impl_->cfg.test_seq_base;
    q.used = true;
    impl_->cqs.push_back(std::move(q));
    impl_->notified.reserve(impl_->cqs.size());  // never grows when a notification is raised
    cq_out = uint32_t(impl_->cqs.size());  // ids start at 1
    return Status::ok;
}

void Engine::Impl::push_cq(uint32_t cq, const Completion& c, bool solicited) {
    if (Completion* slot = cq_slot(cq)) {
        *slot = c;
        cq_pushed(cq, c, solicited);
    }
}

// R-NOTIFY-1: an armed CQ raises one notification, for any completion or,
// armed solicited-only, for a solicited receive or any error; then it is
// disarmed until armed again.
void Engine::Impl::notify(uint32_t cq, Cq& q, const Completion& c, bool solicited) {
    if (q.armed == CqArm::solicited && !solicited && c.status == WcStatus::success) return;
    q.armed = CqArm::none;
    ++q.events;
    if (!q.listed) {
        q.listed = true;
        notified.push_back(cq);
    }
}

Status Engine::req_notify_cq(uint32_t cq, bool solicited_only) {
    if (cq == 0 || cq > impl_->cqs.size()) return Status::no_such_object;
    Cq& q = impl_->cqs[cq - 1];
    // Armed for all stays so when also armed solicited-only (the wider arming wins).
    const CqArm want = solicited_only ? CqArm::solicited : CqArm::all;
    if (q.armed < want) q.armed = want;
    return Status::ok;
}

bool Engine::events_pending() const noexcept { return !impl_->events.empty(); }

size_t Engine::take_cq_events(CqEvent* out, size_t max) {
    Impl& I = *impl_;
    const size_t n = std::min(max, I.notified.size());
    for (size_t i = 0; i < n; ++i) {  // in the order the CQs first fired
        Cq& q = I.cqs[I.notified[i] - 1];
        out[i] = CqEvent{I.notified[i], q.events};
        q.events = 0;
        q.listed = false;
    }
    I.notified.erase(I.notified.begin(), I.notified.begin() + long(n));
    return n;
}

size_t Engine::poll_cq(uint32_t cq, Completion* out, size_t max) {
    if (cq == 0 || cq > impl_->cqs.size()) return 0;
    Cq& q = impl_->cqs[cq - 1];
    // At most two contiguous runs of the ring (before and after its wrap), copied whole.
    const size_t n = std::min<size_t>(max, q.tail - q.head);
    if (n == 0) return 0;  // a busy poller's common case: no call to memcpy
    const size_t at = q.head & q.mask;
    const size_t first = std::min(n, q.ring.size() - at);
    std::memcpy(out, q.ring.data() + at, first * sizeof(Completion));
    if (n > first) std::memcpy(out + first, q.ring.data(), (n - first) * sizeof(Completion));
    q.head += uint32_t(n);
    return n;
}

// ---------------- shared receive queues (R-SRQ-*) ----------------

Status Engine::create_srq(uint32_t pd, uint32_t depth, uint32_t& srq_out) {
    Impl& I = *impl_;
    if (pd == 0 || pd >= I.next_pd) return Status::no_such_object;
    if (depth == 0 || depth > (1u << 20)) return Status::invalid_argument;
    Srq q;
    q.pd = pd;
    q.slots.resize(depth);
    q.posted.reserve(depth);
    if (I.cfg.max_recv_sge > 1) q.sge.resize(size_t(depth) * I.cfg.max_recv_sge);  // lists (R-SGE-1)
    q.free.resize(depth);
    for (uint32_t i = 0; i < depth; ++i) q.free[i] = depth - 1 - i;  // slot 0 is taken first
    q.used = true;
    I.srqs.push_back(std::move(q));
    srq_out = uint32_t(I.srqs.size());  // ids start at 1 and are never reused (as CQs)
    return Status::ok;
}

Status Engine::post_srq_recv(uint32_t srq, const RecvWr& wr) {
    Impl& I = *impl_;
    Srq* q = I.srq(srq);
    if (!q) return Status::no_such_object;
    if (q->free.empty()) return Status::queue_full;
    const uint32_t slot = q->free.back();
    if (!I.fill_recv(q->slots[slot], q->sge, slot, wr)) return Status::invalid_argument;
    q->free.pop_back();
    q->posted.push(slot);
    return Status::ok;
}

Status Engine::arm_srq_limit(uint32_t srq, uint32_t limit) {
    Srq* q = impl_->srq(srq);
    if (!q) return Status::no_such_object;
    if (limit > q->slots.size()) return Status::invalid_argument;
    q->limit = limit;
    return Status::ok;
}

Status Engine::srq_posted(uint32_t srq, uint32_t& out) const {
    const Srq* q = impl_->srq(srq);
    if (!q) return Status::no_such_object;
    out = q->posted.size();
    return Status::ok;
}

Status Engine::destroy_srq(uint32_t srq) {
    Srq* q = impl_->srq(srq);
    if (!q) return Status::no_such_object;
    if (q->users) return Status::bad_state;
    *q = Srq{};
    return Status::ok;
}

// R-SRQ-2: a packet of the stream's receive-consuming message recv_seq
// binds the SRQ's oldest posted entries to every recv_seq of the stream not
// yet bound up to it, in recv_seq order: messages still on their way get
// theirs first, so entries are only ever held by messages whose
// predecessors hold one too, and every bound message can complete.
bool Engine::Impl::bind_srq(Stream& s, uint32_t recv_seq) {
    if (recv_seq - s.rq_done >= s.depth) return false;  // no message in the window has it
    Srq& q = srqs[s.srq - 1];
    while (!wire::seq_lt(recv_seq, s.rq_posted)) {
        uint32_t slot = 0;
        if (!q.posted.pop(slot)) return false;  // R-SEND-4: the SRQ is empty
        s.srq_bound[s.rq_posted++ & s.rq_mask] = slot;
        if (q.limit && q.posted.size() < q.limit) {
            q.limit = 0;  // R-SRQ-5: once per arming
            push_event(ConnEvent{EventKind::srq_limit, 0, 0, s.srq});
        }
    }
    return true;
}

// ---------------- connections ----------------

// R-CSN-2, R-CONN-11: the initial CSN and the handshake cookie come from the
// kernel's cryptographic generator, once per connection set up (never per packet).
static uint64_t crypto_random64() {
    uint64_t v = 0;
    auto* p = reinterpret_cast<unsigned char*>(&v);
    size_t got = 0;
    while (got < sizeof v) {
        const ssize_t n = getrandom(p + got, sizeof v - got, 0);
        if (n > 0) {
            got += size_t(n);
        } else if (errno != EINTR) {
            // No getrandom (a kernel before 3.17): the C++ library's device, also the kernel's generator.
            std::random_device rd;
            return (uint64_t(rd()) << 32) | rd();
        }
    }
    return v;
}

Conn* Engine::Impl::new_conn(uint32_t peer) {
    size_t idx = 0;
    while (idx < conns.size() && conns[idx]) ++idx;
    if (idx == conns.size()) {
        if (conns.size() >= kMaxConns) return nullptr;
        conns.push_back(nullptr);
    }
    Conn* c = new Conn();
    c->id = conn_ids.add(c);
    if (!c->id) {
        delete c;
        return nullptr;
    }
    c->idx = uint32_t(idx);
    c->peer = peer;
    c->num_paths = cfg.num_paths;
    c->seg = cfg.max_payload;
    c->csn_limit = cfg.csn_window;
    // Sized to need (issue 22): grown with the CSNs in flight (grow_txpkts).
    c->txpkts.resize(std::min(cfg.csn_window, kTxRecordsStart));
    c->txmask = uint32_t(c->txpkts.size() - 1);
    // A CSN back from an RNR wait may meet its own stale entry still queued.
    c->retx.reserve(2 * uint32_t(c->txpkts.size()));
    if (cfg.tail_redundancy) c->red_retx.reserve(2 * uint32_t(c->txpkts.size()));
    c->rnr.reserve(uint32_t(c->txpkts.size()));
    c->tlp.reserve(cfg.num_paths);
    c->jobs.reserve(64);
    c->ctrl.reserve(64 + 2u * cfg.num_paths);
    c->paths.resize(cfg.num_paths);
    c->sched_score.assign(2u * cfg.num_paths, 0);
    for (uint16_t i = 0; i < cfg.num_paths; ++i) {
        TxPath& p = c->paths[i];
        p.cc_slot = uint32_t(idx) * cfg.num_paths + i;
        p.ccv = CcCore::fresh_view(cfg.cc, p.cc_slot, cc_gen_next++);
        p.set_entropy(i);
        p.rto = cfg.initial_rto;
    }
    const uint64_t r = crypto_random64();
    c->cookie = uint32_t(r >> 32) ? uint32_t(r >> 32) : 1;  // an accepting end takes the initiator's instead
    // Deterministic (the simulated fabric's runs are functions of their seed), distinct per connection.
    c->entropy_rng = (c->id * 0x9e3779b1u) ^ 0x5bd1e995u;
    c->csn_nxt = c->csn_una = uint32_t(r);  // R-CSN-2
    c->red_next = c->red_top = c->red_floor = c->csn_nxt;
    // R-TIMER-10: a copy goes on another path than its original: two paths at least.
    c->red = cfg.tail_redundancy && cfg.num_paths >= 2;
    c->fair_idx = fair.add_sender();
    c->tnode.conn = c;
    c->st.peer = peer;
    c->st.num_paths = cfg.num_paths;
    conns[idx] = c;
    wake(*c);
    return c;
}

void Engine::Impl::free_conn(Conn* c) {
    const uint32_t idx = c->idx;
    fair.remove_sender(c->fair_idx);
    if (c->in_ready) std::erase(ready, idx);
    wheel.cancel(c->tnode);
    conns[idx] = nullptr;
    conn_ids.remove(c->id);
    delete c;
}

void Engine::Impl::push_event(const ConnEvent& e) {
    if (!events.push(e)) {
        events.reserve(events.capacity() * 2);
        events.push(e);
    }
}

void Engine::Impl::event(EventKind k, Conn& c) { push_event(ConnEvent{k, c.id, c.peer, 0}); }

size_t Engine::poll_events(ConnEvent* out, size_t max) {
    size_t n = 0;
    while (n < max && impl_->events.pop(out[n])) ++n;
    return n;
}

Status Engine::connect(uint32_t peer, uint32_t& conn_out, uint8_t peer_planes) {
    // R-CONN-14: the peer's connect() reached us first; it is the one connection.
    for (Conn* o : impl_->conns) {
        if (o && o->peer == peer && o->unclaimed && o->state == ConnState::established) {
            o->unclaimed = false;
            conn_out = o->id;
            return Status::ok;
        }
    }
    Conn* c = impl_->new_conn(peer);
    if (!c) return Status::no_memory;
    c->state = ConnState::connecting;
    // R-PLANE-6: the attempts rotate over the planes both ends can use.
    c->connect_planes = uint8_t(std::max(1, std::min<int>(std::max<int>(impl_->cfg.num_planes, 1), peer_planes)));
    c->ctrl.push(CtrlItem{CtrlKind::connect_req, kControlPath});
    c->next_ctrl_retry = 0;  // set on first transmission
    conn_out = c->id;
    return Status::ok;
}

Status Engine::disconnect(uint32_t id) {
    Conn* c = impl_->conn(id);
    if (!c) return Status::no_such_object;
    if (c->state == ConnState::closed || c->state == ConnState::error) return Status::ok;
    if (c->state != ConnState::established) {
        impl_->close_conn(*c);
        return Status::ok;
    }
    c->state = ConnState::closing;
    c->ctrl_retries = 0;
    c->ctrl.push(CtrlItem{CtrlKind::disconnect, kControlPath});
    impl_->wake(*c);
    return Status::ok;
}

Status Engine::release_conn(uint32_t id) {
    Conn* c = impl_->conn(id);
    if (!c) return Status::no_such_object;
    if (c->state != ConnState::closed && c->state != ConnState::error) return Status::bad_state;
    impl_->free_conn(c);
    return Status::ok;
}

size_t Engine::conn_count() const noexcept {
    size_t n = 0;
    for (const Conn* c : impl_->conns) n += c != nullptr;
    return n;
}

ConnState Engine::conn_state(uint32_t id) const {
    const Conn* c = impl_->conn(id);
    return c ? c->state : ConnState::closed;
}

void Engine::Impl::establish(Conn& c, const wire::ConnectHeader& h, Time now) {
    c.peer_paths = h.num_paths;
    // R-PLANE-2: both ends use the planes both have; path i is on plane i % planes.
    c.planes = uint8_t(std::max(1, std::min<int>(std::max<int>(cfg.num_planes, 1), std::max<int>(h.num_planes, 1))));
    for (size_t i = 0; i < c.paths.size(); ++i) c.paths[i].set_plane(uint8_t(i % c.planes));
    c.st.planes = c.planes;
    c.rx_paths.assign(h.num_paths, RxPath{});
    c.seg = std::min<uint16_t>(cfg.max_payload, h.max_payload);
    c.csn_limit = std::min<uint32_t>(cfg.csn_window, h.csn_window);
    c.peer_depth = h.stream_depth;
    c.rx_csn.init(h.initial_csn, cfg.csn_window);
    if (cfg.deferred_placement) c.rx_csn_done.init(h.initial_csn, cfg.csn_window);
    c.ctrl.reserve(64 + 2u * (c.num_paths + c.peer_paths));
    c.last_rx = now;
    c.state = ConnState::established;
    // R-CONN-15: the keepalive sweep runs while a connection is ESTABLISHED.
    next_sweep = std::min(next_sweep, now + keepalive_interval());
    next_timer = std::min(next_timer, next_sweep);
    c.st.remote_conn = c.remote_conn;
    // Work posted while CONNECTING (R-CONN-12) is segmented at the negotiated size from here on.
    for (Stream& s : c.streams) {
        if (!s.live) continue;
        s.sq_limit = c.peer_depth;
        schedule_sq(c, s);
    }
}

Status Engine::create_stream(uint32_t conn, uint32_t stream_id, uint32_t pd, uint32_t send_cq, uint32_t recv_cq) {
    StreamAttr a;
    a.pd = pd;
    a.send_cq = send_cq;
    a.recv_cq = recv_cq;
    return create_stream(conn, stream_id, a);
}

Status Engine::create_stream(uint32_t conn, uint32_t stream_id, const StreamAttr& a) {
    Impl& I = *impl_;
    Conn* c = I.conn(conn);
    if (!c) return Status::no_such_object;
    if (a.pd == 0 || a.pd >= I.next_pd) return Status::no_such_object;
    if (a.send_cq == 0 || a.send_cq > I.cqs.size() || a.recv_cq == 0 || a.recv_cq > I.cqs.size())
        return Status::no_such_object;
    const EngineConfig& cfg = I.cfg;
    const uint32_t send_depth = a.send_depth ? a.send_depth : cfg.stream_depth;
    const uint32_t recv_depth = a.recv_depth ? a.recv_depth : cfg.recv_depth;
    if (stream_id > kMaxStreamId || send_depth > (1u << 16) || recv_depth > (1u << 20))
        return Status::invalid_argument;
    Srq* q = nullptr;
    if (a.srq) {
        q = I.srq(a.srq);
        if (!q) return Status::no_such_object;
        if (a.recv_depth) return Status::invalid_argument;  // its receives are the SRQ's
    }
    if (c->stream_by_id.count(stream_id)) return Status::exists;
    I.reclaim_orphans(*c);
    uint32_t idx;
    if (!c->free_streams.empty()) {
        idx = c->free_streams.back();
        c->free_streams.pop_back();
    } else {
        idx = uint32_t(c->streams.size());
        c->streams.emplace_back();
    }
    Stream& s = c->streams[idx];
    const uint8_t gen = s.slot_gen;
    s = Stream{};
    s.slot_gen = gen;
    s.live = true;
    s.id = stream_id;
    s.wire_id = uint32_t(c->stream_inc[stream_id]++) << kStreamIncShift | stream_id;  // R-STREAM-11
    s.pd = a.pd;
    s.send_cq = a.send_cq;
    s.recv_cq = a.recv_cq;
    // The send queue too comes with the first post_send (a stream that only
    // receives never has one); a response from the wire for a stream that
    // never sent finds none and is stale (rx: place, void_read_resp).
    s.sq_mask = std::bit_ceil(send_depth) - 1;
    s.sq_depth = send_depth;
    // Lists of two or more entries (sq_sge; one buffer: in the WQE itself),
    // inline and gathered copies (sq_inline) and the own receive queue
    // (rq, rq_sge) are allocated by the first post_send / post_recv that
    // needs them (issue 22: a stream that never uses them costs nothing;
    // an API call, never the per-packet path).
    if (q) {
        s.srq = a.srq;
        ++q->users;
        // recv_seqs bound and not yet complete all belong to messages in the window (bind_srq).
        s.srq_bound.resize(std::bit_ceil(cfg.stream_depth));
        s.rq_mask = uint32_t(s.srq_bound.size() - 1);
    } else {
        s.rq_mask = std::bit_ceil(recv_depth) - 1;  // rq: allocated by the first post_recv
        s.rq_limit = recv_depth;
    }
    // The receive window is the connection's (announced in CONNECT, R-STREAM-5).
    s.depth = cfg.stream_depth;
    s.rx.resize(std::bit_ceil(cfg.stream_depth));
    s.rx_mask = depth_mask(s.rx);
    s.resp.resize(s.rx.size());
    // R-STREAM-1 numbers from 0; test_seq_base moves every counter near its wrap.
    const uint32_t base = cfg.test_seq_base;
    s.sq_head = s.sq_tail = s.sq_jobs = s.next_recv_seq = base;
    s.rq_posted = s.rq_done = s.rx_next = base;
    s.sq_limit = c->peer_depth;  // 0 while CONNECTING: nothing is handed to the job ring before
    s.rd_max = a.max_rd_atomic ? a.max_rd_atomic : UINT32_MAX;
    s.rd_dest_max = a.max_dest_rd_atomic ? a.max_dest_rd_atomic : UINT32_MAX;
    c->stream_by_id[stream_id] = idx;
    c->last_stream_id = 0xffffffffu;
    // Every request a stream may have in flight (R-STREAM-5) and every response
    // it may owe can wait in the job ring: sized so that pushes never fail.
    c->job_bound += send_depth + cfg.stream_depth;
    c->jobs.reserve(c->job_bound + 16);
    c->ctrl.reserve(64 + 2u * (c->num_paths + c->peer_paths) + uint32_t(c->streams.size()) * 4);
    return Status::ok;
}

Status Engine::set_stream_error(uint32_t conn, uint32_t stream_id) {
    Impl& I = *impl_;
    Conn* c = I.conn(conn);
    if (!c) return Status::no_such_object;
    Stream* s = c->find_local(stream_id);
    if (!s) return Status::no_such_object;
    I.wake(*c);
    // R-STREAM-12: every outstanding send WR (all are later than sq_head - 1) flushes.
    if (!s->error) I.stream_error(*c, *s, s->sq_head - 1, WcStatus::wr_flush_err);
    return Status::ok;
}

Status Engine::set_stream_max_rd_atomic(uint32_t conn, uint32_t stream_id, uint32_t max_rd_atomic) {
    Impl& I = *impl_;
    Conn* c = I.conn(conn);
    if (!c) return Status::no_such_object;
    Stream* s = c->find_local(stream_id);
    if (!s) return Status::no_such_object;
    s->rd_max = max_rd_atomic ? max_rd_atomic : UINT32_MAX;
    I.wake(*c);  // a larger limit may release READs waiting for it
    return Status::ok;
}

Status Engine::destroy_stream(uint32_t conn, uint32_t stream_id) {
    Impl& I = *impl_;
    Conn* c = I.conn(conn);
    if (!c) return Status::no_such_object;
    uint32_t sidx = 0;
    if (!c->find_local(stream_id, &sidx)) return Status::no_such_object;
    I.destroy_stream(*c, sidx);
    return Status::ok;
}

// R-STREAM-11: after this nothing refers to the slot (it may carry the next
// stream created), and nothing the application posted on it is read or
// written any more (deferred placement: copies the driver already took excepted).
void Engine::Impl::destroy_stream(Conn& c, uint32_t sidx) {
    Stream& s = c.streams[sidx];
    // Its packets not yet acknowledged keep their CSNs (the receiver's filter
    // needs every one, R-CSN-4) and are resent until acknowledged, but no
    // longer name the slot, and resend a copy of their payload.
    const uint32_t mask = uint32_t(c.txpkts.size() - 1);
    auto orphan = [&](const TxPkt& t) {
        return t.stream_idx == sidx &&
               (t.state == CsnState::inflight || t.state == CsnState::lost || t.state == CsnState::rnr_wait ||
                t.state == CsnState::inflight_dup || t.state == CsnState::dup_only);
    };
    // A READ response's payload still points into the responder's region: one
    // deregistered before the QP is destroyed (freed, even unmapped) is not
    // copied but goes void, as its transmission would (R-MEM-6).
    size_t bytes = 0;
    for (uint32_t csn = c.csn_una; csn != c.csn_nxt; ++csn) {
        TxPkt& t = c.txpkts[csn & mask];
        if (t.csn != csn || !orphan(t)) continue;
        void_if_unregistered(t);
        if (t.payload && t.payload != t.inline_payload) bytes += t.payload_len;
    }
    std::unique_ptr<uint8_t[]> buf(bytes ? new uint8_t[bytes] : nullptr);
    size_t off = 0;
    for (uint32_t csn = c.csn_una; csn != c.csn_nxt; ++csn) {
        TxPkt& t = c.txpkts[csn & mask];
        if (t.csn != csn || !orphan(t)) continue;
        t.is_request = false;  // delivered() and resolve_refused() leave it alone
        t.stream_idx = kOrphanStream;
        if (t.payload && t.payload != t.inline_payload) {
            std::memcpy(buf.get() + off, t.payload, t.payload_len);
            t.payload = buf.get() + off;
            off += t.payload_len;
        }
    }
    if (buf) c.orphans.push_back(Conn::Orphans{c.csn_nxt, std::move(buf)});
    c.jobs.remove_if([sidx](const TxJob& j) { return j.stream_idx == sidx; });
    if (s.srq) {
        // The entries it bound go back to the SRQ's free slots without a
        // completion (R-SRQ-4: set_stream_error first to see them).
        while (s.rq_done != s.rq_posted) retire_recv(s);
        --srqs[s.srq - 1].users;
    }
    c.tombstones[c.tombstone_next++ % c.tombstones.size()] =
        Conn::Tombstone{s.wire_id, s.error ? s.err_msg : s.rx_next, true};
    c.stream_by_id.erase(s.id);
    c.last_stream_id = 0xffffffffu;
    c.job_bound -= s.sq_depth + s.depth;
    const uint8_t gen = uint8_t(s.slot_gen + 1);  // deferred records of it are stale (finish_pend)
    s = Stream{};
    s.slot_gen = gen;
    c.free_streams.push_back(sidx);
    reclaim_orphans(c);
}

// Orphaned payloads whose CSNs are all acknowledged (or flushed) are freed.
void Engine::Impl::reclaim_orphans(Conn& c) {
    std::erase_if(c.orphans, [&](const Conn::Orphans& o) { return !wire::seq_lt(c.csn_una, o.until_csn); });
}

static constexpr wire::Opcode opcode_of(OpKind k) {
    switch (k) {
    case OpKind::send: return wire::Opcode::send;
    case OpKind::send_imm: return wire::Opcode::send_imm;
    case OpKind::write: return wire::Opcode::write;
    case OpKind::write_imm: return wire::Opcode::write_imm;
    case OpKind::read: return wire::Opcode::read_req;
    case OpKind::atomic_cas: return wire::Opcode::atomic_cas;
    case OpKind::atomic_fadd: return wire::Opcode::atomic_fadd;
    }
    return wire::Opcode::write;
}

static constexpr WcOpcode wc_opcode_of(wire::Opcode o) {
    switch (o) {
    case wire::Opcode::send:
    case wire::Opcode::send_imm: return WcOpcode::send;
    case wire::Opcode::write:
    case wire::Opcode::write_imm: return WcOpcode::write;
    case wire::Opcode::read_req: return WcOpcode::read;
    case wire::Opcode::atomic_cas: return WcOpcode::atomic_cas;
    case wire::Opcode::atomic_fadd: return WcOpcode::atomic_fadd;
    default: return WcOpcode::send;
    }
}

static void put_be64(uint8_t* p, uint64_t v) {
    for (int i = 7; i >= 0; --i) { p[i] = uint8_t(v); v >>= 8; }
}

// R-SGE-1: the length of a work request's message (a receive's space): its
// one buffer's (num_sge 0), or its list's sum. False: a list beyond
// max_sge entries or without its array (the total's limit, R-SEG-5, is the caller's).
static bool wr_length(const Sge* sg, uint32_t n, uint32_t max_sge, uint32_t one, uint64_t& length) {
    length = one;
    if (n == 0) return true;
    if (n > max_sge || !sg) return false;
    length = 0;
    for (uint32_t i = 0; i < n; ++i) length += sg[i].length;  // at most kMaxSge * 2^32: no overflow
    return true;
}

// R-MEM-4 and R-SGE-2 for a posted list: its entries into the slot's share
// of a stream's entry table. A list that resolves to one entry is kept as a
// buffer (local, nsge 1), like a WR without a list; none (all zero-length): nsge 0.
bool Engine::Impl::resolve_list(std::vector<LocalSeg>& table, uint32_t slot, uint32_t max_sge, const Sge* sg,
                                uint32_t n, bool need_write, uint8_t*& local, LocalSeg*& list, uint32_t& nsge) {
    LocalSeg one[1];
    LocalSeg* out = max_sge > 1 ? table.data() + size_t(slot) * max_sge : one;
    uint64_t total = 0;
    if (n > max_sge || !resolve_sg(mrs, sg, n, need_write, out, nsge, total)) return false;
    local = nsge ? out[0].ptr : nullptr;
    list = nsge > 1 ? out : nullptr;
    return true;
}

// R-SEG-2: segments of a data-carrying WR: each entry of its list is cut
// into segments of at most seg bytes, so no segment spans two entries.
static uint32_t segments(const SendWqe& w, const SendAux& x, uint32_t seg) {
    if (!w.gather) return std::max<uint32_t>(1, uint32_t((uint64_t(w.wr.length) + seg - 1) / seg));
    uint32_t n = 0;
    for (uint32_t i = 0; i < x.nsge; ++i) n += (x.sge[i].len + seg - 1) / seg;
    return n;
}

// R-INLINE-1, R-INLINE-3: copies the bytes of list e[0, n) one after the
// other to dst; where(entry) gives an entry's {address, length}.
template <class Entry, class Where>
static void gather_copy(uint8_t* dst, const Entry* e, uint32_t n, Where where) {
    for (uint32_t i = 0; i < n; ++i) {
        const auto [src, len] = where(e[i]);
        if (len) std::memcpy(dst, src, len);
        dst += len;
    }
}

// post_send's common case, decided before anything is written: a SEND or
// WRITE (with or without immediate) of one registered buffer on a healthy
// stream of an established connection, whose local check passes. Its WQE
// is written field by field (no zeroing of the slot, no SendAux: nothing
// reads a slot's SendAux unless gather or an atomic says so) and, when every
// WR before it is in the job ring and the window allows, it joins the ring
// at once: what the general path and schedule_sq do, without their
// per-WR re-checks and divisions. Posted::no: nothing done, the general path runs.
inline Engine::Impl::Posted Engine::Impl::post_one_buffer(Conn& c, Stream& s, uint32_t sidx, const SendWr& wr) {
    static_assert(uint8_t(OpKind::send) == 0 && uint8_t(OpKind::send_imm) == 1 && uint8_t(OpKind::write) == 2 &&
                  uint8_t(OpKind::write_imm) == 3);
    if (wr.num_sge != 0 || wr.inline_data || uint8_t(wr.op) > uint8_t(OpKind::write_imm) || s.error ||
        c.state != ConnState::established || wr.length > kMaxMessageSize)
        return Posted::no;
    uint8_t* local = nullptr;
    if (wr.length > 0) {
        local = mrs.check_local(wr.lkey, wr.local_addr, wr.length, false);  // R-MEM-4
        if (!local) return Posted::no;  // the general path fails it (loc_prot_err)
    }
    // opcode_of and consumes_recv for the four kinds that pass above, by
    // arithmetic instead of opcode_of's table and three compares.
    static_assert(opcode_of(OpKind::send) == wire::Opcode(uint8_t(OpKind::send) + 1) &&
                  opcode_of(OpKind::send_imm) == wire::Opcode(uint8_t(OpKind::send_imm) + 1) &&
                  opcode_of(OpKind::write) == wire::Opcode(uint8_t(OpKind::write) + 1) &&
                  opcode_of(OpKind::write_imm) == wire::Opcode(uint8_t(OpKind::write_imm) + 1));
    static_assert(wire::consumes_recv(wire::Opcode::send) && wire::consumes_recv(wire::Opcode::send_imm) &&
                  !wire::consumes_recv(wire::Opcode::write) && wire::consumes_recv(wire::Opcode::write_imm));
    static_assert(wc_opcode_of(opcode_of(OpKind::send)) == WcOpcode(uint8_t(OpKind::send) >> 1) &&
                  wc_opcode_of(opcode_of(OpKind::send_imm)) == WcOpcode(uint8_t(OpKind::send_imm) >> 1) &&
                  wc_opcode_of(opcode_of(OpKind::write)) == WcOpcode(uint8_t(OpKind::write) >> 1) &&
                  wc_opcode_of(opcode_of(OpKind::write_imm)) == WcOpcode(uint8_t(OpKind::write_imm) >> 1));
    const wire::Opcode op = wire::Opcode(uint8_t(wr.op) + 1);
    const bool recv = wr.op != OpKind::write;
    const uint32_t msg_seq = s.sq_tail++;
    const uint32_t slot = msg_seq & s.sq_mask;
    SendWqe& w = s.sq[slot];
    w.wr = wr;
    w.wr.sg_list = nullptr;
    w.wr.solicited = wr.solicited && recv;  // R-DATA-9
    w.local = local;
    w.msg_seq = msg_seq;
    w.recv_seq = recv ? s.next_recv_seq++ : 0;
    // R-SEG-2 (one buffer): one packet up to the segment size, no division.
    const uint32_t seg = c.seg;
    w.npkts = wr.length <= seg ? 1 : uint32_t((uint64_t(wr.length) + seg - 1) / seg);
    w.next_seg = 0;
    w.pkts_acked = 0;
    w.resp_bytes = 0;
    w.opcode = op;
    w.wc_opcode = WcOpcode(uint8_t(wr.op) >> 1);  // wc_opcode_of(op)
    w.status = WcStatus::success;
    w.done = false;
    w.active = true;
    w.gather = false;
    w.rd_counted = false;
    // R-STREAM-5: the job ring in post order, inside the peer's window.
    if (s.sq_jobs == msg_seq && msg_seq - s.sq_head < s.sq_limit) {
        c.jobs.push(TxJob{sidx, slot, JobKind::request});
        ++s.sq_jobs;
        return Posted::queued;
    }
    return Posted::waits;  // the caller runs schedule_sq
}

// Everything post_one_buffer leaves (lists, inline data, READ, atomics, a
// stream in error, a connection still connecting): out of line, so that the
// common post saves none of its registers.
[[gnu::noinline]] static Status post_send_general(Engine::Impl& I, Conn* c, Stream* s, const SendWr& wr) {
    const wire::Opcode op = opcode_of(wr.op);
    const bool atomic = wire::is_atomic_req(op);
    uint64_t length = 0;
    if (!wr_length(wr.sg_list, wr.num_sge, I.cfg.max_send_sge, wr.length, length)) return Status::invalid_argument;
    if (atomic && (length != 8 || wr.num_sge > 1 || (wr.remote_addr & 7))) return Status::invalid_argument;
    if (length > kMaxMessageSize) return Status::message_too_long;  // R-SEG-5, a list's total too
    const bool carries_data = op != wire::Opcode::read_req && !atomic;
    if (wr.inline_data && (!carries_data || length > I.cfg.max_inline)) return Status::invalid_argument;  // R-INLINE-1

    const uint32_t msg_seq = s->sq_tail++;
    const uint32_t slot = msg_seq & s->sq_mask;
    SendWqe& w = s->sq[slot];
    w = SendWqe{};
    SendAux& x = s->sq_aux[slot];
    x = SendAux{};
    w.wr = wr;
    w.wr.length = uint32_t(length);
    w.wr.sg_list = nullptr;
    w.wr.solicited = wr.solicited && wire::consumes_recv(op);  // R-DATA-9
    w.msg_seq = msg_seq;
    w.opcode = op;
    w.wc_opcode = wc_opcode_of(op);
    w.active = true;
    if (wire::consumes_recv(op)) w.recv_seq = s->next_recv_seq++;

    if (s->error) {
        // R-STREAM-3: a stream in error flushes what is posted to it.
        w.status = WcStatus::wr_flush_err;
        w.done = true;
        I.advance_sq(*c, *s);
        return Status::ok;
    }
    auto copy_slot = [&] {  // the slot's inline bytes; the queue's on first use
        if (s->sq_inline.empty()) s->sq_inline.resize(s->sq.size() * I.cfg.max_inline);
        return s->sq_inline.data() + size_t(slot) * I.cfg.max_inline;
    };
    if (wr.inline_data) {
        uint8_t* const copy = copy_slot();
        // R-INLINE-1: the bytes now, from wherever the application has them; no lkey.
        const Sge one{wr.local_addr, wr.length, 0};
        gather_copy(copy, wr.num_sge ? wr.sg_list : &one, wr.num_sge ? wr.num_sge : 1, [](const Sge& e) {
            return std::pair{reinterpret_cast<const uint8_t*>(uintptr_t(e.addr)), e.length};
        });
        w.local = copy;
    } else {
        // R-MEM-4: local buffer check (R-SGE-2: of every entry). READ and atomics write into it.
        const bool local_write = (op == wire::Opcode::read_req) || atomic;
        bool local_ok = true;
        if (wr.num_sge == 0) {
            if (wr.length > 0) {
                w.local = I.mrs.check_local(wr.lkey, wr.local_addr, wr.length, local_write);
                local_ok = w.local != nullptr;
            }
        } else {
            if (I.cfg.max_send_sge > 1 && s->sq_sge.empty()) s->sq_sge.resize(s->sq.size() * I.cfg.max_send_sge);
            local_ok = I.resolve_list(s->sq_sge, slot, I.cfg.max_send_sge, wr.sg_list, wr.num_sge, local_write,
                                      w.local, x.sge, x.nsge);
        }
        if (!local_ok) {
            w.status = WcStatus::loc_prot_err;
            w.done = true;
            I.stream_error(*c, *s, msg_seq, WcStatus::loc_prot_err);
            return Status::ok;
        }
        w.gather = x.nsge > 1;
        if (carries_data && w.gather && length <= I.cfg.max_inline) {
            // R-INLINE-3: a small list is gathered by copy, into one packet
            // rather than one per entry; its bytes are read at post, not at transmission.
            uint8_t* const copy = copy_slot();
            gather_copy(copy, x.sge, x.nsge, [](const LocalSeg& e) { return std::pair{e.ptr, e.len}; });
            w.local = copy;
            w.gather = false;
        }
    }
    if (atomic) {
        put_be64(x.atomic_ops, wr.compare_add);
        put_be64(x.atomic_ops + 8, op == wire::Opcode::atomic_cas ? wr.swap : 0);
    }
    // Counted now (stream_error tells a WR with segments left by it), again at
    // hand-over (the segment size is known from ESTABLISHED on).
    w.npkts = carries_data ? segments(w, x, c->seg) : 1;
    I.schedule_sq(*c, *s);
    return Status::ok;
}

// post_send with every step (c: the connection post_send found, or null):
// the connection woken, the stream looked up by id, its first queue
// allocated, then post_one_buffer or the general path.
[[gnu::noinline]] static Status post_send_full(Engine::Impl& I, Conn* c, uint32_t stream_id, const SendWr& wr) {
    if (!c) return Status::no_such_object;
    I.wake_post(*c);
    if (c->state != ConnState::established && c->state != ConnState::connecting) return Status::bad_state;
    uint32_t sidx = 0;
    Stream* s = c->find_local(stream_id, &sidx);
    if (!s) return Status::no_such_object;
    if (!s->sq_room()) return Status::queue_full;  // R-STREAM-9: its own send depth
    if (s->sq.empty()) [[unlikely]] {  // the stream's first send: its queue (create_stream)
        s->sq.resize(size_t(s->sq_mask) + 1);
        s->sq_aux.resize(s->sq.size());
    }
    switch (I.post_one_buffer(*c, *s, sidx, wr)) {
    case Engine::Impl::Posted::queued: return Status::ok;
    case Engine::Impl::Posted::waits: I.schedule_sq(*c, *s); return Status::ok;
    case Engine::Impl::Posted::no: break;
    }
    return post_send_general(I, c, s, wr);
}

[[gnu::noinline]] static Status schedule_sq_ok(Engine::Impl& I, Conn& c, Stream& s) {
    I.schedule_sq(c, s);
    return Status::ok;
}

[[gnu::always_inline]] inline Stream* Engine::Impl::post_stream(Conn* c, uint32_t stream_id, uint32_t& sidx) {
    if (c && c->awake() && (c->last_stream_id & kStreamIdMask) == stream_id) [[likely]] {
        sidx = c->last_stream_idx;
        Stream& s = c->streams[sidx];
        if (s.sq_room() && !s.sq.empty()) [[likely]] return &s;
    }
    return nullptr;
}

// The common post (issue 24): post_stream's stream and post_one_buffer's
// case; every other post is post_send_full, from the start (nothing was
// changed before it). Its only calls are tail calls: no frame of locals, no
// value kept across a call, and the register saves only after the
// connection's tests.
Status Engine::post_send(uint32_t conn, uint32_t stream_id, const SendWr& wr) {
    Impl& I = *impl_;
    Conn* c = I.conn(conn);
    uint32_t sidx;
    if (Stream* s = I.post_stream(c, stream_id, sidx)) [[likely]] {
        switch (I.post_one_buffer(*c, *s, sidx, wr)) {
        case Engine::Impl::Posted::queued: return Status::ok;
        case Engine::Impl::Posted::waits: return schedule_sq_ok(I, *c, *s);
        case Engine::Impl::Posted::no: break;
        }
    }
    return post_send_full(I, c, stream_id, wr);
}

// post_send's common case for each WR of a list while it holds (the
// connection and stream, which no such post changes, tested once per run of
// them, the queue's room per WR); a WR that is not that case, or that finds
// the connection asleep or another stream named last (the first post of a
// pass, often), through post_send_full, and the run goes on after it.
Status Engine::post_sends(uint32_t conn, uint32_t stream_id, const SendWr* wrs, size_t n, size_t& posted) {
    Impl& I = *impl_;
    size_t k = 0;
    Status st = Status::ok;
    while (k < n) {
        Conn* c = I.conn(conn);
        uint32_t sidx;
        if (Stream* s = I.post_stream(c, stream_id, sidx)) [[likely]] {
            for (; k < n && s->sq_room(); ++k) {
                const Engine::Impl::Posted p = I.post_one_buffer(*c, *s, sidx, wrs[k]);
                if (p == Engine::Impl::Posted::no) break;
                if (p == Engine::Impl::Posted::waits) I.schedule_sq(*c, *s);
            }
            if (k == n) break;
        }
        if ((st = post_send_full(I, c, stream_id, wrs[k])) != Status::ok) break;
        ++k;
    }
    posted = k;
    return st;
}

static bool needs_response(wire::Opcode op) { return op == wire::Opcode::read_req || wire::is_atomic_req(op); }



// R-STREAM-5, R-STREAM-10: posted WRs go to the job ring in post order while
// the peer's receive window and max_rd_atomic allow; the rest wait in the
// send queue, and advance_sq calls this again as WRs retire.
void Engine::Impl::schedule_sq(Conn& c, Stream& s) {
    if (wire::seq_lt(s.sq_jobs, s.sq_head)) s.sq_jobs = s.sq_head;  // flushed before their turn
    const uint32_t sidx = uint32_t(&s - c.streams.data());
    while (s.sq_jobs != s.sq_tail && s.sq_jobs - s.sq_head < s.sq_limit) {
        const uint32_t slot = s.sq_jobs & s.sq_mask;
        SendWqe& w = s.sq[slot];
        if (!w.done) {  // done already: failed or flushed at post, nothing to send
            if (needs_response(w.opcode)) {
                if (s.rd_out >= s.rd_max) return;  // it waits, and every later WR behind it
                ++s.rd_out;
                w.rd_counted = true;
            }
            w.npkts = needs_response(w.opcode) ? 1 : segments(w, s.sq_aux[slot], c.seg);  // at the negotiated size
            c.jobs.push(TxJob{sidx, slot, JobKind::request});
        }
        ++s.sq_jobs;
    }
}

Status Engine::post_recv(uint32_t conn, uint32_t stream_id, const RecvWr& wr) {
    Impl& I = *impl_;
    Conn* c = I.conn(conn);
    if (!c) return Status::no_such_object;
    I.wake(*c);
    Stream* s = c->find_local(stream_id);
    if (!s) return Status::no_such_object;
    if (s->srq) return Status::invalid_argument;  // its receives are posted to the SRQ (R-SRQ-1)
    if (s->rq_posted - s->rq_done >= s->rq_limit) return Status::queue_full;
    if (s->rq.empty()) {  // the stream's first receive: its queue (create_stream)
        s->rq.resize(size_t(s->rq_mask) + 1);
        if (I.cfg.max_recv_sge > 1) s->rq_sge.resize(s->rq.size() * I.cfg.max_recv_sge);
    }
    const uint32_t slot = s->rq_posted & s->rq_mask;
    if (!I.fill_recv(s->rq[slot], s->rq_sge, slot, wr)) return Status::invalid_argument;
    ++s->rq_posted;
    if (s->error) I.flush_recvs(*c, *s, WcStatus::wr_flush_err);  // the stream will never consume it
    return Status::ok;
}

// A receive as posted into slot `slot` of a queue whose lists live in
// `lists` (R-MEM-4, R-SGE-1/2); false (nothing written) if the list is malformed.
bool Engine::Impl::fill_recv(RecvWqe& r, std::vector<LocalSeg>& lists, uint32_t slot, const RecvWr& wr) {
    uint64_t length = 0;
    if (!wr_length(wr.sg_list, wr.num_sge, cfg.max_recv_sge, wr.length, length) || length > 0xffffffffu) return false;
    r = RecvWqe{};
    r.wr = wr;
    r.wr.length = uint32_t(length);
    r.wr.sg_list = nullptr;
    if (wr.num_sge == 0) {
        if (wr.length > 0) {
            r.local = mrs.check_local(wr.lkey, wr.addr, wr.length, true);
            r.bad_lkey = r.local == nullptr;
        }
    } else {
        // R-SGE-2: one bad entry makes the whole receive bad (R-SEND-7 when consumed).
        r.bad_lkey = !resolve_list(lists, slot, cfg.max_recv_sge, wr.sg_list, wr.num_sge, true, r.local, r.sge, r.nsge);
    }
    return true;
}

// A send WR's completion, written into its CQ slot in place (push_cq's
// checks and order, no copy): conn and stream (ids: conn | stream << 32),
// then byte_len and imm (0), each pair one 8-byte store.
[[gnu::always_inline]] static inline void write_send_completion(Completion& cpl, const SendWqe& w, uint64_t ids) {
    static_assert(offsetof(Completion, stream) == offsetof(Completion, conn) + 4 &&
                  offsetof(Completion, imm) == offsetof(Completion, byte_len) + 4 &&
                  std::endian::native == std::endian::little);
    cpl.wr_id = w.wr.wr_id;
    std::memcpy(&cpl.conn, &ids, 8);
    const uint64_t len_imm = w.wr.length;
    std::memcpy(&cpl.byte_len, &len_imm, 8);
    cpl.status = w.status;
    cpl.opcode = w.wc_opcode;
    cpl.has_imm = false;
}

// R-CMPL-2: the send queue completes strictly in post order.
// The send queue's only WR done, completed into a CQ with room that is not
// armed, nothing waiting to be scheduled (a message alone, the ACK's common
// case) is retired here with nothing but tail calls, so without register
// saves (issue 24); anything else is advance_sq_run's loop. The tests are
// made before anything is written: the outcome is the loop's.
void Engine::Impl::advance_sq(Conn& c, Stream& s) {
    const uint32_t h = s.sq_head;
    if (h + 1 != s.sq_tail || s.sq_jobs != s.sq_tail) return advance_sq_run(c, s);
    SendWqe& w = s.sq[h & s.sq_mask];
    if (!w.done) return;
    if (w.wr.signaled || w.status != WcStatus::success) [[likely]] {
        Cq* const qp = cq_of(s.send_cq);
        if (!qp) [[unlikely]] return advance_sq_run(c, s);
        Cq& q = *qp;
        if (q.tail - q.head == q.depth || q.armed != CqArm::none) [[unlikely]] return advance_sq_run(c, s);
        write_send_completion(q.ring[q.tail++ & q.mask], w, c.id | uint64_t(s.id) << 32);
    }
    s.rd_out -= w.rd_counted;
    w.active = false;
    s.sq_head = h + 1;
}

void Engine::Impl::advance_sq_run(Conn& c, Stream& s) {
    const uint32_t head = s.sq_head;
    // Locals: the completions written below could alias any of these for the compiler.
    const uint32_t tail = s.sq_tail, mask = s.sq_mask, conn_id = c.id, stream_id = s.id, cq = s.send_cq;
    SendWqe* const sq = s.sq.data();
    // The CQ looked up once per run (cq_slot's checks, the same outcome per completion).
    Cq* const q = cq_of(cq);
    const uint64_t ids = conn_id | uint64_t(stream_id) << 32;
    uint32_t h = head;
    uint32_t rd_retired = 0;
    while (h != tail) {
        SendWqe& w = sq[h & mask];
        if (!w.done) break;
        if (w.wr.signaled || w.status != WcStatus::success) [[likely]] {
            // Written where the slot is taken: a pointer tested for null
            // afterwards costs a test per WR (a vector's data may be null).
            if (q) [[likely]] {
                if (q->tail - q->head != q->depth) [[likely]] {
                    Completion& cpl = q->ring[q->tail++ & q->mask];
                    write_send_completion(cpl, w, ids);
                    if (q->armed != CqArm::none) [[unlikely]] notify(cq, *q, cpl, false);
                } else {
                    ++st.cq_overflows;  // R-CMPL-5: counted, the completion is lost
                }
            }
        }
        rd_retired += w.rd_counted;
        w.active = false;
        ++h;
    }
    s.sq_head = h;
    s.rd_out -= rd_retired;
    if (s.sq_head != head && s.sq_jobs != s.sq_tail) schedule_sq(c, s);  // room in the window now
}

// Completes every posted, unconsumed receive of the stream with `status`, in
// order. With an SRQ: the entries it bound; the SRQ's posted entries stay
// for its other streams (R-SRQ-4).
void Engine::Impl::flush_recvs(Conn& c, Stream& s, WcStatus status) {
    while (s.rq_done != s.rq_posted) {
        Completion cpl;
        cpl.wr_id = recv_of(s, s.rq_done).wr.wr_id;
        cpl.conn = c.id;
        cpl.stream = s.id;
        cpl.status = status;
        cpl.opcode = WcOpcode::recv;
        push_cq(s.recv_cq, cpl);
        retire_recv(s);
    }
}

// R-STREAM-2, R-STREAM-8: an error completes the failing request with its
// status and flushes every later one, even one whose bytes are acknowledged
// already (verbs: nothing after a failed WR succeeds). Earlier requests whose
// segments are all out complete as their ACKs or NAKs decide; an earlier one
// with segments left can never finish (no new segment leaves a stream in
// ERROR) and is flushed.
void Engine::Impl::stream_error(Conn& c, Stream& s, uint32_t msg_seq, WcStatus status) {
    for (uint32_t m = s.sq_head; m != s.sq_tail; ++m) {
        SendWqe& w = s.sq[m & s.sq_mask];
        if (m == msg_seq) {
            if (w.done) continue;
            w.status = status;
        } else if (wire::seq_lt(msg_seq, m)) {
            if (w.done && w.status != WcStatus::success) continue;
            w.status = WcStatus::wr_flush_err;
        } else {
            if (w.done || w.next_seg >= w.npkts) continue;
            w.status = WcStatus::wr_flush_err;
        }
        w.done = true;
    }
    if (!s.error) {
        s.error = true;
        s.err_msg = s.rx_next;  // R-ACK-8: every incoming message before it was placed and completed
        flush_recvs(c, s, WcStatus::wr_flush_err);  // posted receives will never be consumed now
    }
    advance_sq(c, s);
}

// Completes every outstanding request and receive of the connection with
// `status`, in order, and stops all transmission of data.
void Engine::Impl::flush_conn(Conn& c, WcStatus status) {
    for (Stream& s : c.streams) {
        if (!s.live) continue;
        for (uint32_t m = s.sq_head; m != s.sq_tail; ++m) {
            SendWqe& w = s.sq[m & s.sq_mask];
            if (!w.done) {
                w.done = true;
                w.status = status;
            }
        }
        s.error = true;
        advance_sq(c, s);
        flush_recvs(c, s, status);
    }
    c.jobs.clear();
    c.retx.clear();
    c.red_retx.clear();
    c.rnr.clear();
    c.gone.clear();
    c.tlp.clear();
    for (TxPath& p : c.paths) {
        p.inflight = 0;
        p.replan();
    }
    c.csn_una = c.csn_nxt;
    c.red_next = c.red_top = c.red_floor = c.csn_nxt;  // R-TIMER-10: nothing left to copy
}

// R-CONN-6: the connection is lost: every outstanding request and receive
// completes with transport_err, in order.
void Engine::Impl::conn_error(Conn& c, ConnErrorCause why, Time now) {
    if (c.state == ConnState::error) return;
    c.st.error_cause = why;
    c.st.silent_for = c.last_rx ? now - c.last_rx : 0;
    c.state = ConnState::error;
    flush_conn(c, WcStatus::transport_err);
    c.ctrl.clear();
    event(EventKind::error, c);
}

// R-CONN-9: a closed connection flushes what is still outstanding.
void Engine::Impl::close_conn(Conn& c) {
    if (c.state == ConnState::closed) return;
    c.state = ConnState::closed;
    flush_conn(c, WcStatus::wr_flush_err);
    event(EventKind::closed, c);
}

// ---------------- statistics ----------------

Status Engine::conn_stats(uint32_t id, ConnStats& out) const {
    const Conn* c = impl_->conn(id);
    if (!c) return Status::no_such_object;
    out = c->st;
    out.state = c->state;
    out.rate_hint_kbps = c->hint_kbps;
    out.connect_planes = c->connect_planes;
    out.packing = c->pack;
    return Status::ok;
}

Status Engine::path_stats(uint32_t id, uint16_t path, PathStats& out) const {
    const Conn* c = impl_->conn(id);
    if (!c) return Status::no_such_object;
    if (path >= c->paths.size()) return Status::invalid_argument;
    const TxPath& p = c->paths[path];
    out = p.st;
    out.state = p.state;
    out.entropy = p.entropy();
    out.plane = p.plane();
    out.cwnd = p.ccv.cwnd;
    out.inflight = p.inflight;
    out.srtt = p.srtt;
    out.rttvar = p.rttvar;
    out.rto = p.rto;
    out.reorder_mult = p.reo_mult;
    if (path < c->rx_paths.size()) {
        out.rx_packets = c->rx_paths[path].rx_packets;
        out.rx_ce = c->rx_paths[path].rx_ce;
    }
    return Status::ok;
}

}  // namespace mroce

// ---------------- congestion-control core (R-CC-8) ----------------

namespace mroce {

bool Engine::Impl::cc_feed_other(Conn& c, TxPath& p, const CcFeedback& f) {
    if (!cfg.offload_cc) {
        // A record of another incarnation than the path's (none of cc_feed's
        // callers makes one): the core takes it, the engine not its view.
        apply_view(c, p, cc_core.apply_one(f));
        return true;
    }
    if (cc_tail - cc_head >= cfg.cc_depth) {
        // The window misses one update; the next record carries the path's
        // state again (psn, round), and the slot's gen survives.
        ++st.cc_feedback_full;
        return false;
    }
    cc_fb[cc_tail++ & (cfg.cc_depth - 1)] = f;
    ++st.cc_feedback;
    return true;
}

void Engine::Impl::cc_fresh(Conn& c, TxPath& p, uint16_t) {
    // Published before the CC core hears of it, so the scheduler never sends
    // on the old incarnation's window; the core resets the slot on the first
    // record with the new gen.
    p.ccv = CcCore::fresh_view(cfg.cc, p.cc_slot, cc_gen_next++);
    p.replan();
    p.cc_timeouts_fed = 0;
    p.st.min_rtt = 0;  // the core forgets it with the old incarnation (R-HINT-7)
    CcFeedback f;
    f.slot = p.cc_slot;
    f.gen = p.ccv.gen;
    f.kind = CcEvent::reset;
    cc_feed(c, p, f);
}

// R-PATH-9, R-SCHED-5: a re-routed path's new entropy, drawn from the whole
// 16-bit space by the connection's generator (xorshift32, seeded from the
// connection id) and never the old value: a driver that maps entropy mod a span of
// source ports sees each port equally likely, instead of the old
// entropy + num_paths, which with num_paths dividing the span cycled over
// span / num_paths ports (two, for 8 paths over 16 ports).
uint16_t Engine::Impl::new_entropy(Conn& c, uint16_t old) {
    for (;;) {
        uint32_t x = c.entropy_rng ? c.entropy_rng : 0x9e3779b9u;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        c.entropy_rng = x;
        const uint16_t e = uint16_t(x >> 16);
        if (e != old) return e;
    }
}

void Engine::Impl::apply_view(Conn& c, TxPath& p, const CcView& v) {
    if (v.gen != p.ccv.gen) {
        ++st.cc_views_stale;  // for an incarnation of the path that is gone
        return;
    }
    p.ccv = v;
    view_taken(c, p);
}

// R-SCHED-5: a path marked in reroute_after_marks consecutive rounds is
// moved to a new route (view_taken: its view has rounds not yet counted).
void Engine::Impl::count_marked_round(Conn& c, TxPath& p) {
    const CcView& v = p.ccv;
    p.rounds_seen = v.rounds;
    p.marked_rounds = v.rounds_since_mark == 0 ? p.marked_rounds + 1 : 0;
    // Only while another path's latest round was unmarked: when every
    // path is marked the bottleneck is common (the receiver's link, an
    // incast), and a new route cannot help. A lone path has no witness.
    bool others_clear = c.paths.size() == 1;
    for (const TxPath& q : c.paths)  // a live path, acknowledged since its last timeout
        others_clear |= &q != &p && q.state == PathStateKind::active && q.consecutive_timeouts == 0 &&
                        q.ccv.rounds_since_mark > 0;
    if (p.marked_rounds >= cfg.reroute_after_marks && others_clear) {
        p.marked_rounds = 0;
        p.set_entropy(new_entropy(c, p.entropy()));
        ++p.st.rerouted;
    }
}

size_t Engine::take_cc_feedback(CcFeedback* out, size_t max) {
    Impl& I = *impl_;
    size_t n = 0;
    while (n < max && I.cc_head != I.cc_tail) out[n++] = I.cc_fb[I.cc_head++ & (I.cfg.cc_depth - 1)];
    return n;
}

size_t Engine::cc_feedback_waiting() const noexcept { return impl_->cc_tail - impl_->cc_head; }

void Engine::cc_update(const CcView* views, size_t n) {
    Impl& I = *impl_;
    const uint32_t stride = I.cfg.num_paths;
    for (size_t i = 0; i < n; ++i) {
        const CcView& v = views[i];
        const uint32_t idx = v.slot / stride;
        const uint32_t pi = v.slot % stride;
        Conn* c = idx < I.conns.size() ? I.conns[idx] : nullptr;
        if (!c || pi >= c->paths.size()) {
            ++I.st.cc_views_stale;  // the connection closed meanwhile
            continue;
        }
        I.apply_view(*c, c->paths[pi], v);
    }
}

}  // namespace mroce
