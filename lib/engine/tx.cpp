// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Transmit path: control packets, acks, retransmissions and new segments,
// the multipath scheduler, pacing, and the timers (doc/spec.md R-SCHED-*,
// R-TIMER-*, R-PATH-*, R-ACK-*).
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>
#include <limits>

#include "engine_impl.hpp"

namespace mroce {

// The fields every segment of one request shares (R-DATA-5); the caller adds
// the per-segment ones (offset, payload, msg_len for READ and atomics).
// The DATA header fields of a packet's message (R-DATA-5): the same for
// every segment; the caller sets the per-packet ones.
static wire::DataHeader message_header(const TxPkt& t) {
    wire::DataHeader d;
    d.opcode = t.opcode;
    d.dflags = t.dflags;
    d.stream_id = t.stream_id;
    d.msg_seq = t.msg_seq;
    d.msg_len = t.msg_len;
    d.rkey = t.rkey;
    d.remote_addr = t.remote_addr;
    d.recv_seq = t.recv_seq;
    d.imm = t.imm;
    return d;
}

static TxPkt request_pkt(const Stream& s, const SendWqe& w, const TxJob& job) {
    TxPkt t{};
    t.opcode = w.opcode;
    t.is_request = true;
    t.stream_idx = job.stream_idx;
    t.sq_slot = job.slot;
    t.stream_id = s.wire_id;
    t.msg_seq = w.msg_seq;
    t.recv_seq = w.recv_seq;
    t.imm = w.wr.imm;
    t.rkey = w.wr.rkey;
    t.remote_addr = w.wr.remote_addr;
    t.dflags = w.wr.solicited ? wire::kDataSolicited : 0;
    return t;
}

using wire::Opcode;

static constexpr Time kNever = std::numeric_limits<Time>::max();
// Packets a connection parked by its pacer may send when it is woken (tx).
static constexpr uint32_t kPacedBatch = 4;

// R-TIMER-3: the effective RTO doubles per consecutive timeout, up to max_rto.
static Time backed_off_rto(const TxPath& p, const EngineConfig& cfg) {
    return std::min<Time>(p.rto << std::min<uint32_t>(p.consecutive_timeouts, 16), cfg.max_rto);
}

// R-TIMER-8/9 time the path by its own RTT samples: a sibling's lent one
// (R-TIMER-1) sets only its RTO, which stays above min_rto.
static bool own_rtt(const TxPath& p) { return p.have_rtt && !p.rtt_borrowed; }

// R-PATH-11: a failed path's first re-probe comes this many of its smoothed
// RTTs after the first probe (or at probe_interval, if sooner).
static constexpr Time kProbeRtts = 8;

// R-TIMER-9: how long a path's oldest packet may go unacknowledged, by the
// path's own RTT, before its silence is news when siblings are being acked.
// Inline, its maximum as two pairs (the initializer list's form went
// through the stack): once per message alone (plan_send_timer).
[[gnu::always_inline]] inline Time silence_delay(const TxPath& p, const EngineConfig& cfg) {
    // A second silence waits twice as long: if the first was a queue, not a
    // dead route, its late ACK has the time to say so before the path is retired.
    const Time d = p.srtt + std::max(std::max(p.rttvar, p.srtt / 4), Time(1000)) * p.reo_mult + cfg.ack_delay;
    return d << std::min<uint32_t>(p.silent_rounds, 1);
}

// R-ACK-1: a pending ack goes out at once unless ack_delay allows holding
// it, and then after kAckEvery packets or ack_delay at the latest.
static constexpr uint16_t kAckEvery = 8;
static bool ack_due(const RxPath& rp, const EngineConfig& cfg, Time now) {
    return cfg.ack_delay == 0 || rp.ack_now || rp.rx_pending >= kAckEvery || now - rp.first_pending >= cfg.ack_delay;
}

// R-SCHED-1: a path may take a packet when it is active, under its window and
// inside its SACK span. The scheduler and the deadline both ask this.
static bool path_open(const TxPath& p) {
    if (p.state != PathStateKind::active) return false;
    if (p.inflight >= uint32_t(std::max(1.0, p.ccv.cwnd))) return false;
    return p.snd_nxt - tx_floor(p) < kPathRing;  // R-SACK-2
}

size_t Engine::tx_burst(TxPacket* out, size_t max, Time now) { return impl_->tx(out, max, now); }
size_t Engine::tx_burst(TxPacket* out, size_t max, Time now, bool acks) { return impl_->tx(out, max, now, acks); }

bool Engine::tx_pending(Time now) const {
    const Impl& I = *impl_;
    if (now >= I.next_timer) return true;
    for (const uint32_t idx : I.ready) {
        const Conn* c = idx == Impl::kGone ? nullptr : I.conns[idx];
        if (!c) continue;
        if (Impl::deferred(*c) && now >= c->timer_due) return true;  // its node is not on the wheel yet
        if (!c->ctrl.empty()) return true;
        if (c->acks_pending)
            for (const RxPath& rp : c->rx_paths)
                if (rp.ack_pending && ack_due(rp, I.cfg, now)) return true;
        if (c->state != ConnState::established) continue;
        if (c->has_sendable() && c->pacer.allow(now, c->seg)) {
            for (const TxPath& p : c->paths)
                if (path_open(p)) return true;
        }
    }
    return false;
}

Time Engine::next_deadline(Time now) const { return impl_->deadline(now); }

Time Engine::Impl::deadline(Time now) const {
    Time t = next_timer;
    for (const uint32_t idx : ready) {
        const Conn* c = idx == kGone ? nullptr : conns[idx];
        if (!c) continue;
        if (deferred(*c)) t = std::min(t, c->timer_due);  // its node is not on the wheel yet (wake_post)
        if (!c->ctrl.empty()) return now;
        if (c->acks_pending) {
            for (const RxPath& rp : c->rx_paths) {
                if (!rp.ack_pending) continue;
                if (ack_due(rp, cfg, now)) return now;
                t = std::min(t, rp.first_pending + cfg.ack_delay);
            }
        }
        if (c->state != ConnState::established) continue;
        if (c->has_sendable()) {
            // Blocked by windows: an ack (input) or a timer unblocks it.
            bool window = false;
            for (const TxPath& p : c->paths)
                if (path_open(p)) window = true;
            if (window) t = std::min(t, c->pacer.release_time(now, c->seg));
        }
    }
    return std::max(t, now);
}

size_t Engine::Impl::tx(TxPacket* out, size_t max, Time now, bool acks) {
    last_now = now;
    if (now >= next_timer) timers(now);
    if (cfg.rate_hints && now >= next_hint_update) {
        fair.update(now);
        next_hint_update = now + (cfg.hint_interval ? cfg.hint_interval : 4 * cfg.min_rto);
    } else if (cfg.rate_hints && now >= fair.quiet_due()) {
        fair.check_quiet(now);
    }
    size_t n = 0;
    // Only connections that may have work (ready); those found with none
    // leave it. Wakes during the pass append: they wait for the next burst.
    const size_t nc = ready.size();
    size_t k = 0;
    for (; k < nc && n < max; ++k) {
        const size_t pos = (rr_conn + k) % nc;
        Conn* c = ready[pos] == kGone ? nullptr : conns[ready[pos]];
        // wants_tx's data term, worked out once per visit and kept up to
        // date below where the visit can change it (round 38: a lone
        // message's two visits asked has_sendable five times).
        bool sendable = c && c->state == ConnState::established && c->has_sendable();
        if (!c || !(sendable || wants_tx_other(*c))) {
            if (c) {
                c->in_ready = false;
                place_deferred(*c);
            }
            ready[pos] = kGone;
            continue;
        }
        if (!c->ctrl.empty()) [[unlikely]] {
            while (n < max && !c->ctrl.empty()) {
                if (emit_ctrl(*c, out[n], now)) ++n;
            }
            sendable = c->state == ConnState::established && c->has_sendable();
        }
        if (c->state != ConnState::established) [[unlikely]] {  // one test for the common case
            if (c->state == ConnState::closing && c->ctrl_retries >= 1000 && c->ctrl.empty())
                close_conn(*c);  // peer-initiated close: our DISCONNECT_ACK is out
            if (c->state != ConnState::closing) continue;
        }
        // Data first, then the connection's ACKs, in room kept for them
        // (never crowded out): an answer to what the ACK acknowledges leaves
        // one datagram earlier in the same burst (issue 24, latency).
        bool data_held = false;  // stopped by a window or the pacer, not by the burst's room
        // The room worked out only where there is data (not in an ACK's pass).
        size_t data_max;
        if (sendable && n < (data_max = max - std::min<size_t>(max - n, acks ? c->acks_pending : 0))) {
            plan_paths(*c, now);
            while (n < data_max) {
                bool blocked = false;
                const size_t k = emit_segment_run(*c, out + n, data_max - n, now, blocked);
                n += k;
                if (blocked) {  // where emit_data would have returned false
                    data_held = true;
                    break;
                }
                if (k) {
                    // Nothing left that emit_data could send (no job, resend or
                    // tail probe, no redundancy cursor): the call would return
                    // false with nothing changed, and data_held matters only
                    // while there is data (a ping-pong's one message, issue 24).
                    if (c->jobs.empty() && c->retx.empty() && c->tlp.empty() && !c->red) {
                        sendable = false;  // has_sendable's every term is false
                        break;
                    }
                    continue;
                }
                if (!emit_data(*c, out[n], now)) {
                    data_held = true;
                    break;
                }
                ++n;
            }
            if (sendable) sendable = c->has_sendable();  // still established: sends change no state
        }
        if (c->acks_pending && acks) {
            // Up to the last path with one pending: acks_pending counts the rx
            // paths with ack_pending set (set only with ++, cleared only in
            // emit_ack with --), so a ping-pong's one ACK walks no further.
            // The end of rx_paths bounds the walk all the same: a count gone
            // wrong must cost an ACK, never a read past the paths.
            uint32_t left = c->acks_pending;
            RxPath* const first = c->rx_paths.data();
            RxPath* const end = first + c->rx_paths.size();
            const uint32_t li = c->ack_last;
            if (left == 1 && li < c->rx_paths.size() && first[li].ack_pending) {
                // The only one pending (a lone message's): no walk to it.
                if (n < max && ack_due(first[li], cfg, now)) n += emit_ack(*c, uint16_t(li), out + n, max - n);
            } else {
                for (RxPath* rp = first; left && rp != end && n < max; ++rp) {
                    if (!rp->ack_pending) continue;
                    --left;
                    if (ack_due(*rp, cfg, now)) n += emit_ack(*c, uint16_t(rp - first), out + n, max - n);
                }
            }
        }
        // A deferred node that no send of this visit placed goes on the wheel
        // (before park_paced, which places no later than the pacer's release).
        place_deferred(*c);
        if (!sendable && !wants_tx_other(*c)) {  // !wants_tx(*c): emit_ack changes no data term
            c->in_ready = false;
            ready[pos] = kGone;
        } else if (data_held && c->ctrl.empty() && !c->acks_pending && c->state == ConnState::established) {
            // Only data left, and it cannot go now: parked off the ready list
            // (issue 22), so passes cost nothing for it. An ACK (rx wakes)
            // opens a window; the pacer's release time is a wheel timer.
            c->in_ready = false;
            ready[pos] = kGone;
            if (cfg.rate_hints && !c->pacer.allow(now, c->seg)) {
                // A connection paced so slowly that a packet's worth of
                // tokens takes longer than the bucket's burst time (thousands
                // sharing a receiver) is woken when kPacedBatch packets may
                // go, not one: a visit costs a burst plan (plan_paths) and a
                // header template, which it would otherwise pay per packet.
                // Within half the bucket's depth, so the long-run rate is the
                // hint's; faster connections are woken for one packet, as a
                // pass that comes back sooner would find more tokens anyway.
                Time t = c->pacer.release_time(now, c->seg);
                if (const uint32_t kbps = c->pacer.rate_kbps()) {
                    const double ns_per_byte = 8e6 / double(kbps);
                    const double pkt = double(c->seg + wire::kDataLen);
                    if (pkt * ns_per_byte > double(TokenBucket::kBurstTime)) {
                        const double batch =
                            std::min(double(c->pacer.burst_bytes()) / 2.0, double(kPacedBatch - 1) * pkt);
                        t += Time(batch * ns_per_byte);
                    }
                }
                park_paced(*c, std::max(t, now + 1));
            }
        }
    }
    if (nc) {
        rr_conn = uint32_t((rr_conn + 1) % nc);
        // Entries not reached keep their place (and any kGone) until a full
        // pass. One connection alone, dropped: nothing else to keep but what
        // wakes during the pass appended (a ping-pong's every pass, issue 24).
        if (k == nc) {
            if (nc == 1 && ready[0] == kGone) ready.erase(ready.begin());
            else compact(ready);
        }
    }
    st.tx_packets += n;
    return n;
}

// path: a path index, or kControlPath with the plane to use (R-PLANE-3).
static void fill_tx(TxPacket& o, const Conn& c, uint16_t path, size_t hl, uint8_t ctrl_plane = 0) {
    o.peer = c.peer;
    o.path = path;
    o.entropy = path == kControlPath ? 0 : c.paths[path % c.paths.size()].entropy();
    o.plane = path == kControlPath ? ctrl_plane : c.paths[path % c.paths.size()].plane();
    o.hdr_len = uint16_t(hl);
    o.ect = 0;
    o.payload = nullptr;
    o.payload_len = 0;
}

bool Engine::Impl::emit_ctrl(Conn& c, TxPacket& o, Time now) {
    CtrlItem it;
    if (!c.ctrl.pop(it)) return false;
    wire::CommonHeader h;
    h.src_conn = c.id;
    h.dst_conn = c.remote_conn;
    h.path_id = it.path == kControlPath ? 0 : it.path;
    size_t hl = 0;
    uint16_t txpath = kControlPath;
    switch (it.kind) {
    case CtrlKind::connect_req:
    case CtrlKind::connect_ack: {
        if (it.kind == CtrlKind::connect_req && c.state != ConnState::connecting) return false;
        h.type = it.kind == CtrlKind::connect_req ? wire::PacketType::connect_req : wire::PacketType::connect_ack;
        if (it.kind == CtrlKind::connect_req) h.dst_conn = 0;
        if (accepts_pack()) h.flags = wire::kConnAcceptsPack;  // R-PACK-2
        wire::ConnectHeader ch;
        ch.num_paths = c.num_paths;
        ch.max_payload = cfg.max_payload;
        ch.initial_csn = c.csn_una;
        ch.rx_capacity_mbps = cfg.rx_capacity_mbps;
        ch.cookie = c.cookie;
        ch.stream_depth = cfg.stream_depth;
        ch.csn_window = cfg.csn_window;
        // R-HINT-8: the initiator is counted from its handshake on, so this is its share.
        ch.rate_hint = it.kind == CtrlKind::connect_ack && cfg.rate_hints ? fair.hint_kbps(c.fair_idx) : 0;
        hl = wire::encode_connect({o.hdr, sizeof o.hdr}, h, ch);
        if (it.kind == CtrlKind::connect_req) {
            if (c.ctrl_retries == 0) c.connect_sent = now;
            ++c.st.connect_attempts;
            c.next_ctrl_retry = now + cfg.connect_retry;
            arm(c, c.next_ctrl_retry);
        }
        break;
    }
    case CtrlKind::nak: {
        wire::NakHeader k;
        k.stream_id = it.a;
        k.msg_seq = it.b;
        k.csn = it.c;
        k.syndrome = wire::Syndrome(it.syndrome);
        k.opcode = wire::Opcode(it.opcode);
        h.path_id = 0;  // R-WIRE-10
        hl = wire::encode_nak({o.hdr, sizeof o.hdr}, h, k);
        // R-PLANE-3: back on the plane the refused packet came on, if live.
        txpath = live_path(c, it.path);
        break;
    }
    case CtrlKind::probe:
    case CtrlKind::probe_reply: {
        h.type = it.kind == CtrlKind::probe ? wire::PacketType::probe : wire::PacketType::probe_reply;
        wire::ProbeHeader p{it.a, it.b};
        hl = wire::encode_probe({o.hdr, sizeof o.hdr}, h, p);
        // A probe travels the failed path's own route; a reply any live route
        // (R-PLANE-3): its own path's plane, or another if that path failed.
        txpath = it.kind == CtrlKind::probe ? uint16_t(it.path % c.paths.size()) : live_path(c, it.path);
        break;
    }
    case CtrlKind::disconnect:
    case CtrlKind::disconnect_ack: {
        h.type = it.kind == CtrlKind::disconnect ? wire::PacketType::disconnect : wire::PacketType::disconnect_ack;
        hl = wire::encode_disconnect({o.hdr, sizeof o.hdr}, h, wire::DisconnectHeader{0});
        if (it.kind == CtrlKind::disconnect) {
            c.next_ctrl_retry = now + cfg.connect_retry;
            arm(c, c.next_ctrl_retry);
        }
        break;
    }
    }
    if (!hl) return false;
    // R-PLANE-3: connection control leaves on the plane of a live path, a
    // different one on each repeat, so no one plane carries the handshake's
    // answer or a DISCONNECT alone.
    uint8_t ctrl_plane =
        c.planes > 1 ? c.paths[live_path(c, uint16_t(c.ctrl_retries % c.paths.size()))].plane() : 0;
    // R-PLANE-6: CONNECT_REQ k on plane k % connect_planes, so no one plane
    // is needed to set the connection up; R-PLANE-7: a CONNECT_ACK on the
    // plane its CONNECT_REQ came in on.
    if (it.kind == CtrlKind::connect_req) ctrl_plane = uint8_t(c.ctrl_retries % c.connect_planes);
    else if (it.kind == CtrlKind::connect_ack && it.a != 0 && it.a - 1 < c.planes) ctrl_plane = uint8_t(it.a - 1);
    fill_tx(o, c, txpath, hl, ctrl_plane);
    if ((it.kind == CtrlKind::connect_req || it.kind == CtrlKind::connect_ack) && plane_block_len) {
        // R-PLANE-1: the plane block travels as the packet's payload (engine memory, never freed).
        o.payload = plane_block.data();
        o.payload_len = plane_block_len;
    }
    return true;
}

// R-ACK-3; R-TIMER-10 (c): with redundancy on, an ACK that shows a hole is
// sent twice, the second on another live path's route. Returns the packets
// written (room: at least 1).
size_t Engine::Impl::emit_ack(Conn& c, uint16_t pi, TxPacket* out, size_t room) {
    TxPacket& o = out[0];
    RxPath& rp = c.rx_paths[pi];
    wire::CommonHeader h;
    h.src_conn = c.id;
    h.dst_conn = c.remote_conn;
    h.path_id = pi;
    wire::AckHeader a;
    a.cum_psn = rp.sack.cum;
    a.ts_echo = rp.ts_last;
    a.rate_hint = cfg.rate_hints ? fair.hint_kbps(c.fair_idx) : 0;
    a.ce_count = rp.ce_pending;
    a.rx_count = rp.rx_pending;
    a.cum_csn = cfg.deferred_placement ? c.rx_csn_done.cum() : c.rx_csn.cum();  // R-CSN-6: placed
    a.ack_flags = rp.ack_ce ? wire::kAckCe : 0;
    for (int i = 0; i < 4; ++i) a.sack[i] = rp.sack.bits[i];
    static_assert(sizeof o.hdr >= wire::kAckLen);
    wire::detail::encode_ack_fields(o.hdr, h, a);
    const bool news = rp.sack.hole_news;
    rp.sack.hole_news = false;
    rp.ack_pending = false;
    rp.ack_ce = false;
    rp.ack_now = false;
    rp.ce_pending = rp.rx_pending = 0;
    --c.acks_pending;
    // R-PLANE-3: on the acknowledged path's plane (our path of that index) while it is live.
    const uint16_t route = live_path(c, pi);  // which takes pi modulo the path count
    // fill_tx's fields, route being a path index (live_path's): path, entropy,
    // hdr_len, ect and plane in one store, as send_on_path does.
    const uint64_t stamp = c.paths[route].ack_stamp_for(route);
    o.peer = c.peer;
    std::memcpy(&o.path, &stamp, 8);
    o.payload = nullptr;
    o.payload_len = 0;
    // R-TIMER-10 (c): a new hole is a loss the sender learns of from this
    // ACK; lost, the news would wait for the path's next ACK, and at a
    // flight's tail there is none before the tail-loss probe. The copy counts
    // no CE mark and no packet twice.
    if (!news || !c.red || room < 2) return 1;
    return emit_ack_copy(c, route, out);
}

// R-TIMER-10 (c)'s copy of the ACK in out[0], into out[1]. Out of line and
// from the original's bytes (round 38): built from emit_ack's header
// structs, it kept them and six registers alive across every ACK.
size_t Engine::Impl::emit_ack_copy(Conn& c, uint16_t route, TxPacket* out) {
    const uint16_t other = live_path(c, uint16_t(route + 1));
    if (other == route) return 1;  // one live route: the copy would share the original's fate
    TxPacket& d = out[1];
    std::memcpy(d.hdr, out[0].hdr, wire::kAckLen);
    // No CE count, packet count or flag (wire::detail::encode_ack_fields' offsets).
    wire::detail::put16(d.hdr + 28, 0);
    wire::detail::put16(d.hdr + 30, 0);
    wire::detail::put8(d.hdr + 36, 0);
    fill_tx(d, c, other, wire::kAckLen);
    ++c.st.ack_copies;
    return 2;
}

// The retransmission timer every send on the path arms (send_on_path): the
// same for the whole burst (no RTT or timeout changes inside it), so worked
// out once per burst: for every path by plan_paths when the burst may carry
// many packets, else by the burst's first send on the path (0: not yet; a
// timer that is 0 itself is only worked out again, to the same value).
[[gnu::always_inline]] inline Time Engine::Impl::plan_send_timer(TxPath& p, Time now) const {
    const Time rto = backed_off_rto(p, cfg);
    p.sched_timer = now + (own_rtt(p) ? std::min(std::min(rto, 2 * p.srtt + cfg.ack_delay), silence_delay(p, cfg)) : rto);
    return p.sched_timer;
}

[[gnu::always_inline]] inline Time Engine::Impl::send_timer(TxPath& p, Time now) const {
    if (p.sched_timer) [[likely]] return p.sched_timer;
    return plan_send_timer(p, now);
}

// The loop once for each case (plan_paths), so that the case is decided
// once per burst, not tested once per path.
template <bool Lazy>
void Engine::Impl::plan_paths_as(Conn& c, Time now) {
    for (uint32_t pi = 0; pi < c.num_paths; ++pi) {
        TxPath& p = c.paths[pi];
        if constexpr (Lazy)
            p.sched_timer = 0;
        else
            plan_send_timer(p, now);
        if (p.plan_kept) continue;  // R-SCHED-1..3 once per path state (TxPath::plan_kept)
        p.plan_kept = true;
        c.set_score(pi, plan_path(p));
    }
}

void Engine::Impl::plan_paths(Conn& c, Time now) {
    // The retransmission timer a send on the path arms (send_timer): with
    // one message to send or none (a ping-pong's burst, most often of one
    // packet) worked out by the burst's first send on each path it uses, so
    // it pays for one path's, not every path's (issue 24, latency); with more,
    // here for every path, as the burst is likely to use them all.
    if (c.jobs.size() <= 1)
        plan_paths_as<true>(c, now);
    else
        plan_paths_as<false>(c, now);
}

// R-SCHED-1..4: the path of every packet, from the burst's plan. The scan
// starts after the last path chosen and keeps the first of equal scores.
// Branch-free: with equal paths taking turns, a compare-and-branch here was
// mispredicted about once per packet.
int Engine::Impl::pick_path(Conn& c) {
    const uint32_t n = c.num_paths;
    // The scores twice over (Conn::sched_score): the scan from start is one
    // contiguous run, with no wrap test per path.
    const uint64_t* sc = c.sched_score.data();
    const uint32_t start = c.rr_path < n ? c.rr_path : 0;
    uint32_t best = start;
    uint64_t best_score = sc[start];
    if (n == 4) [[likely]] {
        // The default four paths (EngineConfig::num_paths) as a tournament:
        // the first of each pair unless the second is strictly lower, then
        // the first pair's unless the second's is strictly lower, which is
        // the scan's choice (the first lowest in order from start) in
        // three compares instead of three steps of a loop.
        const uint64_t* q = sc + start;
        const bool b1 = q[1] < q[0], b3 = q[3] < q[2];
        const uint64_t s01 = b1 ? q[1] : q[0], s23 = b3 ? q[3] : q[2];
        const bool second = s23 < s01;
        best = start + (second ? 2 + uint32_t(b3) : uint32_t(b1));
        best_score = second ? s23 : s01;
    } else {
        for (uint32_t i = start + 1; i < start + n; ++i) {
            const uint64_t s = sc[i];
            const bool better = s < best_score;
            best = better ? i : best;
            best_score = better ? s : best_score;
        }
    }
    if (best_score == kNoPath) return -1;
    if (best >= n) best -= n;
    c.rr_path = best + 1 == n ? 0 : best + 1;
    return int(best);
}

// R-SEG-2: the next new segment of a WR with a list: the rest of the current
// entry, at most seg bytes, so a payload is always one span of one entry
// (zero copy, TxPacket's one payload reference). Its offset is where those
// bytes lie in the message, which is all the receiver places by (R-SEG-3).
void Engine::Impl::gather_segment(SendAux& x, uint16_t seg, TxPkt& t) {
    const LocalSeg& e = x.sge[x.cur_sge];
    t.offset = e.off + x.cur_off;
    t.payload = e.ptr + x.cur_off;
    t.payload_len = uint16_t(std::min<uint32_t>(seg, e.len - x.cur_off));
    x.cur_off += t.payload_len;
    if (x.cur_off == e.len) {
        ++x.cur_sge;
        x.cur_off = 0;
    }
}

void Engine::Impl::grow_txpkts(Conn& c) {
    const uint32_t old_size = uint32_t(c.txpkts.size());
    const uint32_t size = std::min<uint32_t>(2 * old_size, std::bit_ceil(cfg.csn_window));
    if (size <= old_size) return;
    std::vector<TxPkt> recs(size);
    const uint32_t om = old_size - 1, nm = size - 1;
    for (uint32_t csn = c.csn_una; csn != c.csn_nxt; ++csn) recs[csn & nm] = c.txpkts[csn & om];
    c.txpkts.swap(recs);
    c.txmask = nm;
    c.tx_retired.push_back(Conn::RetiredTx{c.csn_nxt, std::move(recs)});
    // The queues of CSNs are bounded by the records (R-NAK-10: twice for retx).
    c.retx.reserve(2 * size);
    if (c.red) c.red_retx.reserve(2 * size);
    c.rnr.reserve(size);
}

void Engine::Impl::release_retired(Conn& c) {
    std::erase_if(c.tx_retired, [&](const Conn::RetiredTx& r) { return !wire::seq_lt(c.csn_una, r.until_csn); });
}

[[gnu::always_inline]] inline bool Engine::Impl::next_new_segment(Conn& c, uint32_t& csn_out) {
    if (c.csn_nxt - c.csn_una >= c.csn_limit) return false;  // R-CSN-5
    if (c.csn_nxt - c.csn_una >= c.txpkts.size()) [[unlikely]] grow_txpkts(c);
    const uint32_t mask = uint32_t(c.txpkts.size() - 1);
    while (!c.jobs.empty()) {
        TxJob& job = c.jobs.front();
        Stream& s = c.streams[job.stream_idx];
        TxPkt& t = c.txpkts[c.csn_nxt & mask];
        if (job.kind == JobKind::request) {
            SendWqe& w = s.sq[job.slot];
            if (!w.active || w.done || s.error || w.next_seg >= w.npkts) {
                c.jobs.drop_front();
                continue;
            }
            const uint32_t k = w.next_seg++;
            t = request_pkt(s, w, job);
            if (w.opcode == Opcode::read_req) {
                t.msg_len = w.wr.length;
            } else if (wire::is_atomic_req(w.opcode)) {
                t.msg_len = 8;
                t.payload = s.sq_aux[job.slot].atomic_ops;
                t.payload_len = uint16_t(wire::kAtomicReqPayload);
            } else {
                t.msg_len = w.wr.length;
                if (w.gather) [[unlikely]] {
                    gather_segment(s.sq_aux[job.slot], c.seg, t);
                } else {
                    t.offset = k * c.seg;
                    t.payload_len = uint16_t(std::min<uint32_t>(c.seg, w.wr.length - t.offset));
                    t.payload = w.local ? w.local + t.offset : nullptr;
                }
            }
            if (w.next_seg >= w.npkts) c.jobs.drop_front();
        } else {
            RespJob& j = s.resp[job.slot];
            if (!j.active) {
                c.jobs.drop_front();
                continue;
            }
            t = TxPkt{};
            t.opcode = j.opcode;
            t.stream_idx = job.stream_idx;
            t.stream_id = s.wire_id;
            t.msg_seq = j.msg_seq;
            t.msg_len = j.len;
            if (j.opcode == Opcode::atomic_resp) {
                std::memcpy(t.inline_payload, j.value, 8);
                t.payload = t.inline_payload;
                t.payload_len = 8;
                j.active = false;
            } else {
                t.offset = j.next_off;
                t.payload_len = uint16_t(std::min<uint32_t>(c.seg, j.len - j.next_off));
                t.payload = j.src + j.next_off;
                t.src_key = j.src_key;
                j.next_off += t.payload_len;
                if (j.next_off >= j.len) j.active = false;
            }
            if (!j.active) {
                --s.rd_dest_held;  // R-STREAM-10: all of the response handed out
                c.jobs.drop_front();
            }
        }
        t.csn = c.csn_nxt++;
        csn_out = t.csn;
        return true;
    }
    return false;
}

// hdr_template: the message's data header with every per-message field
// filled in (emit_segment_run), or o.hdr itself when the caller wrote them
// there (single_run); only the per-packet fields are written here.
// in_run: single_run's call, which counts the connection's packets and arms
// the earliest of its paths' timers once per run (the same end state as
// per-packet arms: arm(t1), arm(t2) is arm(min(t1, t2))).
[[gnu::always_inline]] inline void Engine::Impl::send_on_path(Conn& c, TxPkt& t, int pi, TxPacket& o, Time now,
                                                              const uint8_t* hdr_template, bool in_run) {
    TxPath& p = c.paths[pi];
    const uint32_t psn = p.snd_nxt++;
    PathTxSlot& sl = p.ring[psn & (kPathRing - 1)];
    sl.sent = now;
    sl.csn = t.csn;
    sl.state = TxSlotState::inflight;
    ++p.inflight;
    // The burst's plan (plan_paths) follows what it sends.
    c.set_score(uint32_t(pi), --p.sched_room ? c.sched_score[pi] + p.sched_step : kNoPath);
    // in_run: single_run wrote the record just now, fresh (never sent, no
    // source region, offset 0); told here rather than read back from it (the
    // header's byte stores in between make the compiler reload every field).
    const bool retransmit = !in_run && t.sent_before;
    t.path = uint16_t(pi);
    t.psn = psn;
    if (!in_run) {  // in_run: single_run wrote both with the record
        t.state = CsnState::inflight;
        t.sent_before = true;
    }
    // R-MEM-6: a response is read from the responder's memory at each
    // transmission; once its region is deregistered (the application may
    // have freed it) the rest goes void: no payload, nothing read.
    if (!in_run) void_if_unregistered(t);

    const uint8_t dflags = uint8_t(t.dflags | (retransmit ? wire::kDataRetransmit : 0));
    const uint32_t ts = uint32_t(now) ? uint32_t(now) : 1;  // 0 means "no timestamp" in ts_echo
    if (hdr_template) {
        using namespace wire::detail;
        if (hdr_template != o.hdr) std::memcpy(o.hdr, hdr_template, wire::kDataLen);
        if (!in_run) put16(o.hdr + 12, uint16_t(pi));  // in_run: single_run writes it with the common header
        put32(o.hdr + 16, psn);
        put32(o.hdr + 20, t.csn);
        put8(o.hdr + 25, dflags);
        put16(o.hdr + 26, t.payload_len);
        put32(o.hdr + 40, in_run ? 0 : t.offset);
        put32(o.hdr + 64, ts);
        put32(o.hdr + 68, tx_floor(p));
    } else {
        wire::CommonHeader h;
        h.src_conn = c.id;
        h.dst_conn = c.remote_conn;
        h.path_id = uint16_t(pi);
        wire::DataHeader d = message_header(t);
        d.psn = psn;
        d.csn = t.csn;
        d.dflags = dflags;
        d.payload_len = t.payload_len;
        d.offset = t.offset;
        d.ts = ts;
        d.path_floor = tx_floor(p);
        o.hdr_len = uint16_t(wire::encode_data({o.hdr, sizeof o.hdr}, h, d));
    }
    o.peer = c.peer;
    if (hdr_template) {
        // path, entropy, hdr_len, ect (R-ECN-1) and plane (R-PLANE-2), adjacent: one store.
        const uint64_t stamp = p.stamp_for(uint16_t(pi));
        std::memcpy(&o.path, &stamp, 8);
    } else {
        o.path = uint16_t(pi);
        o.entropy = p.entropy();
        o.plane = p.plane();  // R-PLANE-2
        o.ect = 1;  // R-ECN-1
    }
    o.payload = t.payload;
    o.payload_len = t.payload_len;

    ++p.st.tx_packets;
    p.st.tx_bytes += t.payload_len;
    if (in_run) return;
    ++c.unsettled;  // (single_run adds its packets once per run)
    ++c.st.tx_data_packets;
    c.st.tx_payload_bytes += t.payload_len;
    // Armed from the send, or a path's first flight after idle would meet its
    // probe time (R-TIMER-8) only at the RTO, when no timer pass had run meanwhile.
    arm(c, send_timer(p, now));
}

// New segments of one multi-packet SEND or WRITE, back to back: what is
// the same for every segment of the message (the TxPkt fields, the header
// bytes) is built once per run, so a segment costs its offset, CSN and path.
// Same decisions in the same order as emit_data + next_new_segment; anything
// else (retransmissions, responses, READ, atomics, the last segment's job
// bookkeeping of other kinds) takes the general path.
// blocked: the run stopped where emit_data would have returned false (pacer,
// no eligible path, CSN window), so the caller ends this connection's turn.
static bool single_flags(const SendWqe& w);

size_t Engine::Impl::emit_segment_run(Conn& c, TxPacket* out, size_t max, Time now, bool& blocked) {
    if (c.state != ConnState::established || !c.retx.empty() || !c.tlp.empty() || c.jobs.empty()) return 0;
    const TxJob& job = c.jobs.front();
    if (job.kind != JobKind::request) return 0;
    // One packet: single_run's own tests of its first job decide (a superset
    // of the ones multi_run makes, which would send it to single_run or
    // return 0, as single_run does when its first job fails them), not made
    // twice. A dispatch alone, so that it is a tail call with no register
    // saved (issue 24: a message alone's every burst).
    Stream& s = c.streams[job.stream_idx];
    SendWqe& w = s.sq[job.slot];
    if (w.npkts == 1) {
        return single_run<true>(c, out, max, now, blocked);  // (R-PACK-3: single_run decides to pack)
    }
    return multi_run(c, s, w, out, max, blocked);
}

// R-PACK-3: how many jobs at the front of the job ring go in one WRITE_PACK:
// consecutive WRITEs (no immediate) of one stream in one packet each, not
// yet sent, each at most kPackEntryMax bytes, their entries within the
// segment size, at most kMaxPackEntries; bytes: the payload's length.
uint32_t Engine::Impl::packable(Conn& c, uint32_t& bytes) {
    const uint32_t njobs = std::min<uint32_t>(c.jobs.size(), wire::kMaxPackEntries);
    bytes = 0;
    if (njobs < 2) return 0;
    const TxJob& j0 = c.jobs.at(0);
    if (j0.kind != JobKind::request) return 0;
    const Stream& s = c.streams[j0.stream_idx];
    if (s.error) return 0;
    const uint32_t seq0 = s.sq[j0.slot].msg_seq;
    uint32_t k = 0;
    for (; k < njobs; ++k) {
        const TxJob& j = c.jobs.at(k);
        if (j.kind != JobKind::request || j.stream_idx != j0.stream_idx) break;
        const SendWqe& w = s.sq[j.slot];
        if (w.npkts != 1 || w.next_seg != 0 || !single_flags(w) || w.opcode != Opcode::write ||
            w.wr.length > kPackEntryMax || w.msg_seq != seq0 + k)
            break;
        const uint32_t add = uint32_t(wire::kPackEntryHead) + w.wr.length;
        if (bytes + add > c.seg) break;
        bytes += add;
    }
    if (k < 2) bytes = 0;
    return k;
}

// R-PACK-4: len bytes of the connection's pack arena for the payload of the
// WRITE_PACK with CSN csn, kept until csn_una passes it; null when the
// packets in flight hold the arena (the messages then go one by one).
uint8_t* Engine::Impl::pack_room(Conn& c, uint32_t csn, uint32_t len) {
    if (!c.pack_buf) {
        c.pack_buf.reset(new uint8_t[kPackArena]);  // once per connection, at its first pack
        c.pack_live.reserve(kPackArena / (2 * wire::kPackEntryHead));
    }
    while (!c.pack_live.empty() && wire::seq_lt(c.pack_live.front().csn, c.csn_una)) {
        c.pack_tail = c.pack_live.front().end;
        c.pack_live.drop_front();
    }
    uint32_t at = c.pack_head;
    const uint32_t off = at & (kPackArena - 1);
    if (off + len > kPackArena) at += kPackArena - off;  // a payload never wraps: skip to the start
    if (at + len - c.pack_tail > kPackArena || c.pack_live.size() == c.pack_live.capacity()) return nullptr;
    c.pack_head = at + len;
    c.pack_live.push(Conn::PackSpan{csn, c.pack_head});
    return c.pack_buf.get() + (at & (kPackArena - 1));
}

// R-PACK-3, R-PACK-4: WRITE_PACK packets from the front of the job ring,
// each built once into the pack arena and recorded as one transmit record
// (msg_seq the first message's, msg_len the entry count) that
// retransmissions send again unchanged. A front job that does not pack
// goes alone (single_run, one packet), so the jobs behind it still pack.
size_t Engine::Impl::pack_run(Conn& c, TxPacket* out, size_t max, Time now, bool& blocked) {
    size_t n = 0;
    while (n < max && !c.jobs.empty()) {
        uint32_t bytes = 0;
        const uint32_t k = packable(c, bytes);
        if (k < 2) {
            const size_t one = single_run<false>(c, out + n, 1, now, blocked);
            if (!one) break;  // (blocked, or a job single_run does not take: the caller's)
            ++n;
            continue;
        }
        if (cfg.rate_hints && !c.pacer.allow(now, c.seg)) { blocked = true; break; }
        const int pi = pick_path(c);
        if (pi < 0) { blocked = true; break; }
        if (c.csn_nxt - c.csn_una >= c.csn_limit) { blocked = true; break; }  // R-CSN-5
        if (c.csn_nxt - c.csn_una > c.txmask) [[unlikely]] grow_txpkts(c);
        uint8_t* const buf = pack_room(c, c.csn_nxt, bytes);
        if (!buf) {
            const size_t one = single_run<false>(c, out + n, 1, now, blocked);
            if (!one) break;
            ++n;
            continue;
        }
        const TxJob j0 = c.jobs.front();
        Stream& s = c.streams[j0.stream_idx];
        uint8_t* e = buf;
        uint32_t msg_seq = 0;
        for (uint32_t i = 0; i < k; ++i) {
            const TxJob j = c.jobs.front();
            c.jobs.drop_front();
            SendWqe& w = s.sq[j.slot];
            if (i == 0) msg_seq = w.msg_seq;
            w.next_seg = 1;
            using namespace wire::detail;
            put32(e, w.wr.rkey);
            put32(e + 4, w.wr.length);
            put64(e + 8, w.wr.remote_addr);
            e += wire::kPackEntryHead;
            if (w.wr.length) std::memcpy(e, w.local, w.wr.length);
            e += w.wr.length;
        }
        TxPkt& t = c.txpkts[c.csn_nxt & c.txmask];
        t = TxPkt{};
        t.payload = buf;
        t.payload_len = uint16_t(bytes);
        t.csn = c.csn_nxt++;
        t.stream_id = s.wire_id;
        t.msg_seq = msg_seq;
        t.msg_len = k;  // R-PACK-1: the entry count
        t.stream_idx = j0.stream_idx;
        t.sq_slot = j0.slot;
        t.opcode = Opcode::write_pack;
        // Not is_request: delivered() and the NAK's resolve take a packed
        // record's k messages by its opcode, off the one-message path.
        send_on_path(c, t, pi, out[n], now);
        if (cfg.rate_hints) c.pacer.consume(now, t.payload_len + uint32_t(wire::kDataLen));
        c.st.tx_packed_messages += k;
        ++n;
    }
    // Nothing packed (the front pair does not pack): the run goes as without packing.
    return n || blocked ? n : single_run<false>(c, out, max, now, blocked);
}

// emit_segment_run's message of more than one packet: w, of stream s, the
// first job's. The burst's time is last_now (tx() sets it): no argument on
// the stack.
size_t Engine::Impl::multi_run(Conn& c, Stream& s, SendWqe& w, TxPacket* out, size_t max, bool& blocked) {
    const Time now = last_now;
    const TxJob job = c.jobs.front();
    if (!w.active || w.done || s.error || w.next_seg >= w.npkts) return 0;
    if (w.opcode != Opcode::write && w.opcode != Opcode::write_imm && w.opcode != Opcode::send &&
        w.opcode != Opcode::send_imm)
        return 0;
    if (w.npkts - w.next_seg < 2) return 0;  // a run pays off from two segments on
    TxPkt& tmpl = run_pkt;
    tmpl = request_pkt(s, w, job);
    tmpl.msg_len = w.wr.length;
    uint8_t* hdr = run_hdr;
    {
        wire::CommonHeader h;
        h.src_conn = c.id;
        h.dst_conn = c.remote_conn;
        const wire::DataHeader d = message_header(tmpl);
        wire::encode_data({hdr, wire::kDataLen}, h, d);
    }
    // R-SEG-2: a list's segments are cut at its entry boundaries (a loop of
    // its own, so that the one-buffer loop tests nothing per segment).
    SendAux& x = s.sq_aux[job.slot];
    return w.gather ? segment_run<true>(c, w, x, out, max, now, blocked)
                    : segment_run<false>(c, w, x, out, max, now, blocked);
}

template <bool Gather>
size_t Engine::Impl::segment_run(Conn& c, SendWqe& w, SendAux& x, TxPacket* out, size_t max, Time now,
                                 bool& blocked) {
    const TxPkt& tmpl = run_pkt;
    const uint8_t* hdr = run_hdr;
    uint32_t mask = uint32_t(c.txpkts.size() - 1);
    size_t n = 0;
    while (n < max && w.next_seg < w.npkts) {
        if (cfg.rate_hints && !c.pacer.allow(now, c.seg)) { blocked = true; break; }
        const int pi = pick_path(c);
        if (pi < 0) { blocked = true; break; }
        if (c.csn_nxt - c.csn_una >= c.csn_limit) { blocked = true; break; }  // R-CSN-5
        if (c.csn_nxt - c.csn_una > mask) [[unlikely]] {
            grow_txpkts(c);
            mask = uint32_t(c.txpkts.size() - 1);
        }
        const uint32_t k = w.next_seg++;
        TxPkt& t = c.txpkts[c.csn_nxt & mask];
        t = tmpl;
        if constexpr (Gather) {
            gather_segment(x, c.seg, t);
        } else {
            t.offset = k * c.seg;
            t.payload_len = uint16_t(std::min<uint32_t>(c.seg, w.wr.length - t.offset));
            t.payload = w.local ? w.local + t.offset : nullptr;
        }
        t.csn = c.csn_nxt++;
        send_on_path(c, t, pi, out[n], now, hdr);
        if (cfg.rate_hints) c.pacer.consume(now, t.payload_len + uint32_t(wire::kDataLen));
        ++n;
    }
    if (w.next_seg >= w.npkts) c.jobs.drop_front();
    return n;
}

// single_run's flag tests (active, not done, no list, not counted towards
// max_rd_atomic) as one 4-byte compare: adjacent bytes, bools 0 or 1. A WQE
// of a kind single_run takes never has rd_counted set (READs and atomics
// only); were it set, the compare fails and the general path decides, as
// for any job single_run stops at.
static bool single_flags(const SendWqe& w) {
    static_assert(offsetof(SendWqe, active) == offsetof(SendWqe, done) + 1 &&
                  offsetof(SendWqe, gather) == offsetof(SendWqe, done) + 2 &&
                  offsetof(SendWqe, rd_counted) == offsetof(SendWqe, done) + 3 && sizeof(bool) == 1);
    uint32_t f;
    std::memcpy(&f, &w.done, 4);
    return f == (std::endian::native == std::endian::little ? 0x100u : 0x10000u);
}

// New one-packet SENDs and WRITEs, back to back from the front of the job
// ring (issue 24): each one's transmit record straight from its WQE and its
// header straight from the record, with none of the general path's re-checks
// of retransmissions and responses per packet. Same decisions in the same
// order as emit_data + next_new_segment; it stops at the first job of any
// other kind, which the caller hands to the general path or a segment run.
// MayPack (emit_segment_run's call): R-PACK-3, with two jobs or more queued
// toward a peer that accepts them and a small WRITE at the front, the run is
// pack_run's (a message alone never waits: one job leaves here, at once; a
// run of anything else goes here whole, as without packing). The job count
// is the one the run's end needs anyway: for a message alone the test is a
// compare. pack_run's own calls (MayPack false) send one job it did not pack.
template <bool MayPack>
size_t Engine::Impl::single_run(Conn& c, TxPacket* out, size_t max, Time now, bool& blocked) {
    const uint32_t njobs = c.jobs.size();
    if constexpr (MayPack) {
        if (njobs >= 2 && c.pack) [[unlikely]] {
            const TxJob& j = c.jobs.front();
            const SendWqe& w = c.streams[j.stream_idx].sq[j.slot];
            if (w.opcode == Opcode::write && w.wr.length <= kPackEntryMax) return pack_run(c, out, max, now, blocked);
        }
    }
    uint32_t mask = c.txmask;
    // The packet cursor against its end: no count kept in the loop. Nothing
    // in the run adds jobs and each packet takes one, so the end is also
    // where the job ring runs empty.
    TxPacket* op = out;
    TxPacket* const end = out + std::min<size_t>(max, njobs);
    uint64_t bytes = 0;
    Time due = TimerWheel::kNever;  // the earliest timer a send armed (send_on_path's arm, once per run)
    // Locals for what no step of the run changes but the run itself (the
    // header's byte stores would have the compiler reload them per packet):
    // the CSN cursor is written back after the run and before grow_txpkts.
    const bool hints = cfg.rate_hints;
    const uint32_t csn_una = c.csn_una, csn_limit = c.csn_limit;
    uint32_t csn_nxt = c.csn_nxt;
    const uint32_t csn_first = csn_nxt;
    // R-CSN-5's test (csn_nxt - csn_una >= csn_limit) and the records' room
    // (csn_nxt - csn_una > mask) as the CSN at which each first holds: the
    // run takes one CSN a packet, so it meets each exactly there (or now,
    // where one holds from the start).
    const uint32_t csn_stop = csn_nxt - csn_una >= csn_limit ? csn_nxt : csn_una + csn_limit;
    auto grow_at = [&] { return csn_nxt - csn_una > mask ? csn_nxt : csn_una + mask + 1; };
    uint32_t csn_grow = grow_at();
    // The common header's bytes, the same for every packet of the run but
    // its path id: built once, copied per packet.
    uint8_t common[wire::kCommonLen];
    wire::detail::put_common(common,
                             wire::CommonHeader{wire::kVersion, wire::PacketType::data, 0, c.remote_conn, c.id, 0, 0});
    while (op != end) {
        // The job's fields read where they lie (no copy through the stack).
        const TxJob& jr = c.jobs.front();
        if (jr.kind != JobKind::request) break;
        const TxJob job{jr.stream_idx, jr.slot, JobKind::request};
        Stream& s = c.streams[job.stream_idx];
        SendWqe& w = s.sq[job.slot];
        if (w.npkts != 1 || w.next_seg != 0 || !single_flags(w) || s.error ||
            (w.opcode != Opcode::write && w.opcode != Opcode::write_imm && w.opcode != Opcode::send &&
             w.opcode != Opcode::send_imm))
            break;
        if (hints && !c.pacer.allow(now, c.seg)) { blocked = true; break; }
        const int pi = pick_path(c);
        if (pi < 0) { blocked = true; break; }
        if (csn_nxt == csn_stop) { blocked = true; break; }  // R-CSN-5
        if (csn_nxt == csn_grow) [[unlikely]] {
            c.csn_nxt = csn_nxt;
            grow_txpkts(c);
            mask = c.txmask;
            csn_grow = grow_at();
        }
        c.jobs.drop_front();
        w.next_seg = 1;
        // The record field by field (request_pkt's, without a temporary),
        // and the header's message fields from the same values, still in
        // registers (read back from the record after send_on_path's header
        // byte stores, which the compiler must assume change it, they were
        // seven loads a packet); send_on_path adds the per-packet fields.
        TxPkt& t = c.txpkts[csn_nxt & mask];
        const uint32_t len = w.wr.length;  // one packet: at most the segment size
        const uint16_t plen = uint16_t(len);
        const Opcode opcode = w.opcode;
        const uint32_t stream_id = s.wire_id, msg_seq = w.msg_seq, rkey = w.wr.rkey, recv_seq = w.recv_seq,
                       imm = w.wr.imm;
        const uint64_t remote_addr = w.wr.remote_addr;
        t.payload = w.local;
        t.remote_addr = remote_addr;
        t.csn = csn_nxt++;
        t.stream_id = stream_id;
        t.msg_seq = msg_seq;
        t.msg_len = len;
        t.offset = 0;
        t.rkey = rkey;
        t.recv_seq = recv_seq;
        t.imm = imm;
        t.stream_idx = job.stream_idx;
        t.sq_slot = job.slot;
        t.payload_len = plen;
        t.opcode = opcode;
        t.dflags = w.wr.solicited ? wire::kDataSolicited : 0;
        // state and sent_before are send_on_path's, written here beside
        // is_request and rnr_tries: four adjacent constant bytes, one store.
        t.state = CsnState::inflight;
        t.is_request = true;
        t.sent_before = true;
        t.rnr_tries = 0;
        t.src_key = 0;  // a record last used by a READ response must not void this packet (R-MEM-6)
        TxPacket& o = *op;
        // The message's header fields first, then the per-packet ones:
        // send_on_path writes only its own offsets.
        {
            using namespace wire::detail;
            uint8_t* h = o.hdr;
            std::memcpy(h, common, wire::kCommonLen);
            put16(h + 12, uint16_t(pi));
            put8(h + 24, uint8_t(opcode));
            put32(h + 28, stream_id);
            put32(h + 32, msg_seq);
            put32(h + 36, len);
            put32(h + 44, rkey);
            put64(h + 48, remote_addr);
            put32(h + 56, recv_seq);
            put32(h + 60, imm);
        }
        send_on_path(c, t, pi, o, now, o.hdr, true);
        bytes += plen;
        due = std::min(due, c.paths[pi].sched_timer);  // 0: not worked out yet (plan_paths)
        if (hints) c.pacer.consume(now, plen + uint32_t(wire::kDataLen));
        ++op;
    }
    const size_t n = size_t(op - out);
    if (!due && n) [[unlikely]] {  // a path of the run had no timer yet: the run's paths' timers
        if (n == 1) {
            // A message alone (a lazy plan's burst): its one path, which its
            // packet's path field names (send_on_path's stamp).
            due = send_timer(c.paths[out->path], now);
        } else {
            due = TimerWheel::kNever;
            for (uint32_t csn = csn_first; csn != csn_nxt; ++csn)
                due = std::min(due, send_timer(c.paths[c.txpkts[csn & mask].path], now));
        }
    }
    c.csn_nxt = csn_nxt;
    if (n) {
        c.st.tx_data_packets += n;
        c.unsettled += uint32_t(n);
        c.st.tx_payload_bytes += bytes;
        arm(c, due);
    }
    return n;
}

bool Engine::Impl::emit_data(Conn& c, TxPacket& o, Time now) {
    if (c.state != ConnState::established) return false;
    if (cfg.rate_hints && !c.pacer.allow(now, c.seg)) return false;
    const uint32_t mask = uint32_t(c.txpkts.size() - 1);
    // R-TIMER-8: a tail-loss probe leaves on its own path, outside the window.
    while (!c.tlp.empty()) {
        const Conn::TailProbe pr = c.tlp.front();
        c.tlp.drop_front();
        TxPkt& t = c.txpkts[pr.csn & mask];
        TxPath& p = c.paths[pr.path];
        // (R-TIMER-10: a redundant copy is probed too while its CSN is unresolved.)
        if (t.csn != pr.csn || p.state != PathStateKind::active ||
            !((t.state == CsnState::inflight && t.path == pr.path) || t.state == CsnState::inflight_dup ||
              t.state == CsnState::dup_only))
            continue;  // acknowledged, declared lost or the path failed meanwhile
        // R-SACK-2 holds for the probe too: with the span full its fresh PSN would
        // share a ring slot with the oldest packet in flight. The RTO covers that tail.
        if (p.snd_nxt - tx_floor(p) >= kPathRing) continue;
        const uint32_t room = p.sched_room;
        t.dflags = uint8_t(t.dflags | wire::kDataAckNow);  // answered at once, whatever the receiver's ack delay
        send_on_path(c, t, int(pr.path), o, now);
        if (room == 0) {  // no window: the probe must not open the burst's plan for this path
            p.sched_room = 0;
            c.set_score(pr.path, kNoPath);
        }
        ++p.st.tail_probes;
        p.tlp_at = now;  // R-TIMER-9 waits for its answer
        if (c.red) c.red_retx.push(t.csn);  // R-TIMER-10: the probe's copy on another path next
        return true;
    }
    // R-TIMER-10: a resend's copy goes at once, before anything else.
    if (!c.red_retx.empty() && emit_redundant(c, o, now, true)) [[unlikely]] return true;
    // R-SACK-4: lost packets go before new ones.
    while (!c.retx.empty()) {
        const uint32_t csn = c.retx.front();
        TxPkt& t = c.txpkts[csn & mask];
        if (t.csn != csn || t.state != CsnState::lost) {
            c.retx.drop_front();  // delivered meanwhile (a late ack)
            continue;
        }
        const int pi = pick_path(c);
        if (pi < 0) return false;
        c.retx.drop_front();
        send_on_path(c, t, pi, o, now);
        if (cfg.rate_hints) c.pacer.consume(now, t.payload_len + uint32_t(wire::kDataLen));
        if (c.red) c.red_retx.push(csn);  // R-TIMER-10: and its copy next
        return true;
    }
    // R-TIMER-10: only when no new segment can go (nothing left to segment,
    // or the CSN window is full) does the idle capacity carry redundant copies.
    if (c.jobs.empty()) return c.red && emit_redundant(c, o, now, false);
    const int pi = pick_path(c);
    if (pi < 0) return false;
    uint32_t csn = 0;
    if (!next_new_segment(c, csn)) return c.red && emit_redundant(c, o, now, false);
    TxPkt& t = c.txpkts[csn & (c.txpkts.size() - 1)];  // (next_new_segment may have grown them)
    send_on_path(c, t, pi, o, now);
    if (cfg.rate_hints) c.pacer.consume(now, t.payload_len + uint32_t(wire::kDataLen));
    return true;
}

// R-TIMER-10: redundant copies. A copy of a CSN goes on the best path with
// room other than the one its latest transmission took (R-SCHED-2 scores),
// under a fresh PSN, counted in that path's window like any packet. The
// latest regular transmission stays the one loss detection tracks
// (TxPkt::path, psn); the copy only keeps the CSN from being resent when that
// one is lost (CsnState::inflight_dup, dup_only). First the copies of
// resends (a resend lost again costs its message another round trip); then,
// unless resends_only (the connection has new data to send), the
// unacknowledged CSNs newest first, each at most once: a cursor passes each
// CSN once, so the work is O(1) amortised per CSN sent.
bool Engine::Impl::emit_redundant(Conn& c, TxPacket& o, Time now, bool resends_only) {
    const uint32_t mask = uint32_t(c.txpkts.size() - 1);
    auto other_path = [&](const TxPkt& t) {
        int best = -1;
        uint64_t best_score = kNoPath;
        for (uint32_t q = 0; q < c.num_paths; ++q)
            if (q != t.path && c.sched_score[q] < best_score) {
                best = int(q);
                best_score = c.sched_score[q];
            }
        return best;
    };
    auto send_copy = [&](TxPkt& t, int q) {
        const uint16_t path = t.path;
        const uint32_t psn = t.psn;
        send_on_path(c, t, q, o, now);
        t.path = path;
        t.psn = psn;
        t.state = CsnState::inflight_dup;
        if (cfg.rate_hints) c.pacer.consume(now, t.payload_len + uint32_t(wire::kDataLen));
        ++c.paths[q].st.redundant;
        ++c.st.redundant;
    };
    while (!c.red_retx.empty()) {
        const uint32_t csn = c.red_retx.front();
        TxPkt& t = c.txpkts[csn & mask];
        if (t.csn != csn || t.state != CsnState::inflight) {  // acknowledged or lost again meanwhile
            c.red_retx.drop_front();
            continue;
        }
        const int q = other_path(t);
        if (q < 0) return false;  // no room elsewhere: an ACK opens a window
        c.red_retx.drop_front();
        send_copy(t, q);
        return true;
    }
    // One idle copy per connection per tx_burst: new data that arrives
    // meanwhile waits behind at most one copy.
    if (resends_only || c.red_last == now) return false;
    // Idle: the CSNs sent since the last idle spell, newest first, down to
    // where that spell began (older ones were looked at then, or are older
    // than anything still worth a copy).
    if (c.red_top != c.csn_nxt) {
        c.red_floor = c.red_top;
        c.red_top = c.red_next = c.csn_nxt;
    }
    if (wire::seq_lt(c.red_floor, c.csn_una)) c.red_floor = c.csn_una;  // below csn_una all is acknowledged
    if (wire::seq_lt(c.red_next, c.red_floor)) c.red_next = c.red_floor;
    while (c.red_next != c.red_floor) {
        const uint32_t csn = c.red_next - 1;
        TxPkt& t = c.txpkts[csn & mask];
        if (t.csn != csn || t.state != CsnState::inflight) {  // acknowledged, lost or copied already
            --c.red_next;
            continue;
        }
        // Older than its path's smoothed RTT, its loss, if any, is about to be
        // known (R-SACK-4), and a resend is as fast as a copy; so are all
        // older ones: the spell ends.
        const TxPath& tp = c.paths[t.path];
        if (!tp.have_rtt || now - tp.ring[t.psn & (kPathRing - 1)].sent >= tp.srtt) {
            c.red_next = c.red_floor;
            return false;
        }
        const int q = other_path(t);
        if (q < 0) return false;
        --c.red_next;
        c.red_last = now;
        send_copy(t, q);
        return true;
    }
    return false;
}

// R-TIMER-10: at the tail-loss probe's time, if the path's newest packet in
// flight carries a CSN already delivered (a copy's, or the original of one
// whose copy arrived), a probe could tell the sender nothing it needs: every
// packet of the path in flight whose CSN is delivered is resolved (as
// acknowledged: nothing resent, no loss counted), so the path's RTO does not
// wait on packets that no longer matter. True if so.
bool Engine::Impl::resolved_tail(Conn& c, TxPath& p) {
    const uint32_t mask = uint32_t(c.txpkts.size() - 1);
    auto done = [&](uint32_t csn) {
        const TxPkt& t = c.txpkts[csn & mask];
        return t.csn != csn || t.state == CsnState::delivered || t.state == CsnState::free;
    };
    if (!done(p.ring[(p.snd_nxt - 1) & (kPathRing - 1)].csn)) return false;
    for (uint32_t psn = p.snd_una; psn != p.snd_nxt; ++psn) {
        PathTxSlot& sl = p.ring[psn & (kPathRing - 1)];
        if (sl.state == TxSlotState::inflight && done(sl.csn)) {
            sl.state = TxSlotState::acked;
            p.replan();
            --p.inflight;
        }
    }
    advance_una(p, c.unsettled);
    return true;
}

// ---------------- timers ----------------

void Engine::Impl::path_timeout(Conn& c, uint16_t pi, Time now) {
    TxPath& p = c.paths[pi];
    p.replan();
    ++p.st.timeouts;
    ++p.consecutive_timeouts;
    if (!p.rto_pending || p.rto_undone) {  // R-TIMER-7: the first timeout of a sequence is what an undo tests
        p.rto_pending = true;
        p.rto_undone = false;
        p.rto_psn = p.snd_una;
    }
    p.rto_end = p.snd_nxt;
    // The held floor (R-TIMER-7) counts toward the span (R-SACK-2). After a
    // timeout of a full span it would leave the path no PSN to send, so no
    // packet and no ACK could ever end the hold: such a timeout is not tested.
    if (p.snd_nxt - p.rto_psn >= kPathRing) p.rto_pending = false;
    // R-TIMER-2: everything in flight on the path is resent elsewhere.
    for (uint32_t psn = p.snd_una; psn != p.snd_nxt; ++psn) declare_lost(c, p, psn);
    p.reo_recovered();
    c.unsettled -= p.snd_nxt - p.snd_una;
    while (p.snd_una != p.snd_nxt) {
        p.ring[p.snd_una & (kPathRing - 1)].state = TxSlotState::empty;
        ++p.snd_una;
    }
    CcFeedback f;
    f.slot = p.cc_slot;
    f.gen = p.ccv.gen;
    f.kind = CcEvent::timeout;
    if (cc_feed(c, p, f)) {
        ++p.cc_timeouts_fed;
        // R-CC-6 at once when the core is offloaded: everything the path had
        // in flight was just declared lost, so with the window as last
        // published the resends would leave on this path in one burst before
        // the core's cwnd = min_cwnd returns. apply_view keeps the clamp until
        // a view reflects the timeout. (Inline, the core has already answered.)
        p.ccv.cwnd = std::min(p.ccv.cwnd, cfg.cc.min_cwnd);
    }
    if (p.consecutive_timeouts >= cfg.fail_after_timeouts) fail_path(c, p, now);
}

// R-PATH-9: retire the path, try a new route for it, and probe it (R-PATH-11:
// the first re-probe on the scale of its RTT, never later than probe_interval).
void Engine::Impl::fail_path(Conn& c, TxPath& p, Time now) {
    if (p.state != PathStateKind::active) return;
    p.state = PathStateKind::failed;
    p.replan();
    ++c.unsettled;
    p.set_entropy(new_entropy(c, p.entropy()));
    ++p.st.rerouted;
    p.next_probe = now;
    p.probe_gap = p.have_rtt ? std::min<Time>(cfg.probe_interval, kProbeRtts * p.srtt) : cfg.probe_interval;
}

// R-TIMER-9: nothing of the path acknowledged for its own RTT (counted from
// its oldest packet's send or its last ACK, whichever is later) while a packet
// sent no earlier than that oldest one was acknowledged on another path: the
// peer answers, this route does not. The first silence is loss of its oldest
// packet (a lost tail, resent elsewhere at once, the window kept: random loss is
// not congestion, R-CC-5); a second with
// no ACK of the path between is a timeout (R-TIMER-2) and retires the path
// (R-PATH-9): a dead route is gone in two rounds of its RTT, not three
// backed-off RTOs, and probed on the scale of its RTT (R-PATH-11).
void Engine::Impl::path_silent(Conn& c, uint16_t pi, Time now) {
    TxPath& p = c.paths[pi];
    ++p.st.silences;
    if (p.silent_rounds++ > 0) {
        // Silent again, with nothing of the path acked since: the route is dead
        // while the peer answers on others. A timeout (R-TIMER-2), and retired.
        path_timeout(c, pi, now);
        fail_path(c, p, now);
        return;
    }
    // Only the oldest packet: a lost tail is mostly one packet (the rest follow
    // by SACK once its resend is acknowledged), and a silence that was a queue
    // after all then costs one duplicate, not a window. A dead route's whole
    // flight goes at the second silence.
    const uint32_t una = p.snd_una;  // as an ACK that showed this hole would report it
    declare_lost(c, p, p.snd_una);
    ++p.st.losses;
    p.reo_recovered();
    const uint16_t losses = 1;
    advance_una(p, c.unsettled);
    CcFeedback f;
    f.slot = p.cc_slot;
    f.gen = p.ccv.gen;
    f.kind = CcEvent::ack;
    f.losses = losses;
    f.ack_psn = una;
    f.snd_nxt = p.snd_nxt;
    cc_feed(c, p, f);
}

// R-NAK-10: packets refused as receiver-not-ready go back to the resend
// queue when their delay ends; those whose WR was flushed meanwhile are sent void.
void Engine::Impl::rnr_timers(Conn& c, Time now, Time& next) {
    const uint32_t mask = uint32_t(c.txpkts.size() - 1);
    while (!c.rnr.empty() && now >= c.rnr.front().due) {
        const uint32_t csn = c.rnr.front().csn;
        c.rnr.drop_front();
        TxPkt& t = c.txpkts[csn & mask];
        if (t.csn != csn || t.state != CsnState::rnr_wait) continue;
        if (t.stream_idx == kOrphanStream) {  // R-STREAM-11: no WR waits for it
            abandon(c, t);
            continue;
        }
        const Stream& s = c.streams[t.stream_idx];
        const SendWqe& w = s.sq[t.sq_slot];
        if (s.error || !w.active || w.msg_seq != t.msg_seq || w.done) {
            abandon(c, t);  // its WR was flushed meanwhile
            continue;
        }
        t.state = CsnState::lost;
        c.retx.push(csn);
    }
    if (!c.rnr.empty()) next = std::min(next, c.rnr.front().due);
}

// R-STREAM-11: a WR its peer refused as a destroyed stream's fails when its wait
// ends, unless its stream was destroyed, or failed, meanwhile.
void Engine::Impl::gone_timers(Conn& c, Time now, Time& next) {
    size_t i = 0;
    for (; i < c.gone.size() && now >= c.gone[i].due; ++i) {
        const Conn::GoneWait& g = c.gone[i];
        Stream& s = c.streams[g.stream_idx];
        if (s.wire_id != g.wire_id || s.error) continue;
        if (!wire::seq_lt(g.msg_seq, s.sq_tail) || wire::seq_lt(g.msg_seq, s.sq_head)) continue;
        stream_error(c, s, g.msg_seq, WcStatus::rem_inv_req_err);
    }
    c.gone.erase(c.gone.begin(), c.gone.begin() + ptrdiff_t(i));
    if (!c.gone.empty()) next = std::min(next, c.gone.front().due);
}

bool Engine::Impl::take_probe_token(Time now) {
    if (cfg.probe_rate == 0) return true;
    const double burst = std::max(1.0, cfg.probe_rate / 10.0);
    if (!probe_budget_started) {
        probe_budget_started = true;
        probe_tokens = burst;
    } else if (now > probe_refill) {
        probe_tokens = std::min(burst, probe_tokens + double(now - probe_refill) * cfg.probe_rate / 1e9);
    }
    probe_refill = std::max(probe_refill, now);
    if (probe_tokens < 1.0) return false;
    probe_tokens -= 1.0;
    return true;
}

// R-CONN-15: every ESTABLISHED connection that has heard nothing from its
// peer for keepalive_interval sends one keepalive PROBE (probe_seq 0), on
// its paths in turn (an active one where there is one), at most one per
// interval; the answer is an accepted packet like any other (last_rx).
// The sweep runs when the earliest connection is due, but at most every
// keepalive_interval / 8 (a keepalive may leave that much late): its cost is
// one pass over the connections per such period, whatever their number.
void Engine::Impl::keepalive_sweep(Time now) {
    const Time ka = keepalive_interval();
    Time due_min = kNever;
    for (Conn* c : conns) {
        if (!c || c->state != ConnState::established) continue;
        const Time due = std::max(c->last_rx + ka, c->next_keepalive);
        if (now < due) {
            due_min = std::min(due_min, due);
            continue;
        }
        if (!take_probe_token(now)) {
            ++st.probes_deferred;
            due_min = now;
            continue;
        }
        const uint16_t n = uint16_t(c->paths.size());
        uint16_t pi = uint16_t(c->keepalive_path % n);
        for (uint16_t k = 0; k < n; ++k) {
            const uint16_t q = uint16_t((c->keepalive_path + k) % n);
            if (c->paths[q].state == PathStateKind::active) {
                pi = q;
                break;
            }
        }
        c->keepalive_path = uint16_t((pi + 1) % n);
        CtrlItem it{CtrlKind::probe, pi};
        it.a = kKeepaliveSeq;
        it.b = uint32_t(now) ? uint32_t(now) : 1;
        c->ctrl.push(it);
        c->next_keepalive = now + ka;
        due_min = std::min(due_min, now + ka);
        ++st.keepalives_sent;
        wake(*c);
    }
    next_sweep = due_min == kNever ? kNever : std::max(due_min, now + std::max<Time>(ka / 8, 1));
}

void Engine::Impl::timers(Time now) {
    if (now >= next_sweep) keepalive_sweep(now);
    // Only the connections whose wheel node is due (issue 22: O(1) per
    // timer, not a pass over every connection with a timer armed).
    wheel.advance(now, [&](TimerWheel::Node& n) {
        Conn& c = *static_cast<Conn::TimerNode&>(n).conn;
        c.in_timed = true;  // arms while its timers run relink the node; wake must not
        if (c.pacer_due <= now) {  // the pacer lets it send again
            c.pacer_due = kNever;
            if (!c.in_ready) {
                c.in_ready = true;
                ready.push_back(c.idx);
            }
        }
        if (c.timer_due <= now) {
            c.timer_due = kNever;
            const Time next = conn_timers(c, now);  // may arm (timer_due)
            if (next < c.timer_due) c.timer_due = next;
            if (!wants_timer(c)) c.timer_due = kNever;
        }
        const Time due = std::min(c.timer_due, c.pacer_due);
        if (due != kNever) {
            wheel.schedule(c.tnode, due);
        } else {
            wheel.cancel(c.tnode);
            c.in_timed = false;
        }
    });
    next_timer = std::min(wheel.next_due(), next_sweep);
}

Time Engine::Impl::conn_timers(Conn& conn, Time now) {
    Time next = kNever;
    Conn* c = &conn;
    if (!wants_timer(*c)) return kNever;
    if (!c->in_ready) {  // a timer may give it something to send (retries, probes, resends)
        c->in_ready = true;
        ready.push_back(c->idx);
    }
    {
        switch (c->state) {
        case ConnState::connecting:
            if (c->next_ctrl_retry && now >= c->next_ctrl_retry) {
                // R-CONN-5: CONNECT_REQ is repeated until answered or conn_timeout.
                if (++c->ctrl_retries * cfg.connect_retry >= cfg.conn_timeout) {
                    conn_error(*c, ConnErrorCause::connect_unanswered, now);
                    return next;
                }
                c->ctrl.push(CtrlItem{CtrlKind::connect_req, kControlPath});
                c->next_ctrl_retry = now + cfg.connect_retry;
            }
            if (c->next_ctrl_retry) next = std::min(next, c->next_ctrl_retry);
            return next;
        case ConnState::closing:
            if (c->ctrl_retries < 1000 && c->next_ctrl_retry && now >= c->next_ctrl_retry) {
                if (++c->ctrl_retries >= 3) {
                    close_conn(*c);
                    return next;
                }
                c->ctrl.push(CtrlItem{CtrlKind::disconnect, kControlPath});
                c->next_ctrl_retry = now + cfg.connect_retry;
            }
            if (c->next_ctrl_retry) next = std::min(next, c->next_ctrl_retry);
            break;
        case ConnState::established: break;
        default: return next;
        }
        // R-CONN-6: a silent peer with work outstanding is a lost connection.
        if (c->has_outstanding()) {
            if (now - c->last_rx >= cfg.conn_timeout) {
                conn_error(*c, ConnErrorCause::peer_silent, now);
                return next;
            }
            next = std::min(next, c->last_rx + cfg.conn_timeout);
        }
        if (!c->rnr.empty()) rnr_timers(*c, now, next);
        if (!c->gone.empty()) gone_timers(*c, now, next);
        c->silence_wait = kNever;  // (re)found below
        for (uint16_t pi = 0; pi < c->paths.size(); ++pi) {
            TxPath& p = c->paths[pi];
            if (p.state == PathStateKind::failed) {
                if (now >= p.next_probe) {
                    // R-PATH-11: unanswered probes back off; R-PATH-14: a
                    // probe the device's budget has no token for waits out
                    // the same (growing) gap, so demand beyond the budget
                    // thins itself out instead of retrying every pass.
                    if (take_probe_token(now)) {
                        CtrlItem it{CtrlKind::probe, pi};
                        if (++p.probe_seq == kKeepaliveSeq) ++p.probe_seq;
                        it.a = p.probe_seq;
                        it.b = uint32_t(now) ? uint32_t(now) : 1;
                        c->ctrl.push(it);
                        ++st.probes_sent;
                    } else {
                        ++st.probes_deferred;
                    }
                    const Time gap = std::max<Time>(p.probe_gap, 1);
                    // Never sooner than a reply can come back: only the latest
                    // probe's reply revives (R-PATH-10), so probes faster than
                    // the round trip would each be overtaken by the next.
                    p.next_probe = now + std::max<Time>(gap, p.have_rtt ? 2 * p.srtt : 0);
                    p.probe_gap = std::min<Time>(2 * gap, std::max(cfg.probe_max_interval, cfg.probe_interval));
                }
                next = std::min(next, p.next_probe);
                continue;
            }
            if (p.snd_una == p.snd_nxt) continue;
            const PathTxSlot& oldest = p.ring[p.snd_una & (kPathRing - 1)];
            const Time rto = backed_off_rto(p, cfg);
            if (cfg.path_silence && own_rtt(p)) {  // R-TIMER-9
                // Silent since its oldest packet left or it was last heard, whichever
                // is later: a path whose ACKs keep coming, late behind a queue, is not.
                // And not before its latest tail-loss probe (R-TIMER-8) could be answered: a
                // lone packet's lost ACK and its probe's lost ACK are not a dead route.
                const Time quiet = std::max(std::max(oldest.sent, p.last_heard), p.tlp_at) + silence_delay(p, cfg);
                if (quiet < oldest.sent + rto) {
                    if (now < quiet) {
                        next = std::min(next, quiet);
                    } else if (c->acked_sent >= oldest.sent) {  // sent no earlier, acked already
                        path_silent(*c, pi, now);
                        if (p.state == PathStateKind::failed) {
                            next = std::min(next, p.next_probe);
                            continue;
                        }
                        // The rest of the flight is timed afresh (its own oldest, the doubled wait).
                        if (p.snd_una != p.snd_nxt) next = std::min(next, now);
                        continue;
                    } else {
                        c->silence_wait = std::min(c->silence_wait, oldest.sent);
                    }
                }
            }
            // R-TIMER-8: no ACK for two smoothed RTTs (plus the receiver's ack
            // delay) after the newest packet: send that packet once more on
            // this path, so that a lost ACK or a lost last packet costs one
            // RTT, not an RTO. One probe per snd_una, but a lone packet (the
            // path's flight is it and its probe) is probed once more, one srtt
            // later still: it has no later packet whose ACK could cover it.
            // Not on a path that timed out since its last ACK of new data
            // (R-TIMER-3's backoff governs a path in trouble).
            if (p.tlp_una != p.snd_una) p.tlp_count = 0;
            const uint32_t probes =
                p.snd_nxt - p.snd_una == 2 && p.tlp_count == 1 && p.consecutive_timeouts == 0 ? 2 : 1;
            if (own_rtt(p) && p.tlp_count < probes && now < oldest.sent + rto) {
                const PathTxSlot& newest = p.ring[(p.snd_nxt - 1) & (kPathRing - 1)];
                const Time pto = newest.sent + (2 + Time(p.tlp_count)) * p.srtt + cfg.ack_delay;
                if (newest.state == TxSlotState::inflight && pto < oldest.sent + rto) {
                    if (now >= pto && c->red && resolved_tail(*c, p)) [[unlikely]] {
                        // R-TIMER-10: its tail was packets of CSNs delivered elsewhere;
                        // what is left is timed afresh.
                        if (p.snd_una != p.snd_nxt) next = std::min(next, now);
                    } else if (now >= pto) {
                        c->tlp.push(Conn::TailProbe{newest.csn, pi});
                        ++p.tlp_count;
                        p.tlp_una = p.snd_una;
                    } else {
                        next = std::min(next, pto);
                    }
                }
            }
            if (now >= oldest.sent + rto) {
                path_timeout(*c, pi, now);
                if (p.state == PathStateKind::failed) next = std::min(next, p.next_probe);
            } else {
                next = std::min(next, oldest.sent + rto);
            }
        }
    }
    return next;
}

}  // namespace mroce
