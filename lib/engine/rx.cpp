// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Receive path: decode, connection lookup, per-path SACK and CSN dedupe,
// direct placement, in-order completion and execution, ACK/NAK processing
// at the sender (doc/spec.md R-ERR-*, R-SACK-*, R-CSN-*, R-SEND-*, R-READ-*,
// R-ATOMIC-*, R-CMPL-*).
#include <algorithm>
#include <bit>

#include "engine_impl.hpp"

namespace mroce {

using wire::Opcode;
using wire::PacketType;
using wire::Syndrome;

static uint64_t get_be64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
    return v;
}
static void put_be64(uint8_t* p, uint64_t v) {
    for (int i = 7; i >= 0; --i) { p[i] = uint8_t(v); v >>= 8; }
}

void Engine::rx_burst(const RxPacket* pkts, size_t n, Time now) {
    Impl& I = *impl_;
    I.last_now = now;
    I.st.rx_packets += n;  // every datagram, whatever becomes of it
    for (const RxPacket* const end = pkts + n; pkts != end; ++pkts) I.rx_one(*pkts, now);
}

void Engine::Impl::rx_one(const RxPacket& rp, Time now) {
    wire::Packet& pk = rx_pk;
    const uint8_t* const p = rp.data;
    uint32_t dst, src;
    // What nearly every datagram is, a whole DATA packet in one buffer: its
    // common header read straight from the wire into registers, with
    // decode_data's checks in its order and the same result (issue 24). Of
    // the common header only path_id is stored (rx_data and nak() read it):
    // the engine reads nothing else of a data packet's once its connection
    // is found. Anything else: rx_other.
    if (rp.len2 == 0 && rp.len >= wire::kDataLen &&
        wire::detail::get16(p) == (wire::kVersion << 8 | uint8_t(PacketType::data))) [[likely]] {  // version, type
        if (p[24] == uint8_t(Opcode::write) && rx_whole_write(p, rp.len, rp.ce, now)) [[likely]]
            return;
        ++rx_may_send;
        cur_rx = &rp;  // read by the general steps only (deferred placement, connection set-up)
        // Read again, not held from before rx_whole_write: fewer values kept
        // in saved registers across the fast path.
        dst = wire::detail::get32(p + 4);
        src = wire::detail::get32(p + 8);
        wire::DecodeError e = wire::DecodeError::inconsistent;  // R-WIRE-5
        if (dst != 0 && src != 0) [[likely]]
            e = wire::detail::decode_data_fields(p, rp.len, pk.data);
        if (e != wire::DecodeError::ok) [[unlikely]] {
            count_decode_error(e);
            return;
        }
        pk.common.path_id = wire::detail::get16(p + 12);
        pk.payload = {p + wire::kDataLen, pk.data.payload_len};
        pk.payload_tail = {};
    } else {
        ++rx_may_send;
        cur_rx = &rp;
        if (!rx_other(rp, now)) return;
        dst = pk.common.dst_conn;  // a data packet in two spans, decoded whole
        src = pk.common.src_conn;
    }
    Conn* c = conn(dst);
    if (!c) [[unlikely]] {
        ++st.rx_unknown_conn;  // R-ERR-2
        return;
    }
    wake(*c);
    // R-ERR-2: a packet must come from the connection's peer endpoint (and
    // data only on a connection neither connecting nor closed).
    if (src != c->remote_conn || (c->state != ConnState::established && c->state != ConnState::closing))
        [[unlikely]] {
        ++st.rx_unknown_conn;
        return;
    }
    c->last_rx = now;
    rx_data(*c, pk, rp.ce != 0, now);
}

// A whole WRITE in one packet, fresh on its path and on the connection, next
// in its stream's order (issue 24): the steps rx_one, rx_data and
// place_next_write take for it, in their order, straight from the wire
// bytes (nothing decoded into rx_pk and read back). Entered only where
// decode_data would succeed with these fields (R-WIRE-5, R-WIRE-6, R-WIRE-7,
// R-PATH-5) and every later check passes as it would there. False: not
// such a packet, or a check that fails; rx_one then takes the general steps
// from the start, which decide it. What it changed by then the general steps
// repeat to the same effect: wake, last_rx, apply_floor (a no-op the second
// time).
bool Engine::Impl::rx_whole_write(const uint8_t* p, size_t n, const uint8_t& ce, Time now) {
    using wire::detail::get16;
    using wire::detail::get32;
    using wire::detail::get64;
    const uint32_t dst = get32(p + 4), src = get32(p + 8);
    const uint32_t plen = get16(p + 26);
    // payload_len == msg_len with offset 0: the whole message (R-WIRE-7), and
    // exactly the datagram after the header; a void packet places nothing.
    // msg_len (36) and offset (40) read as one big-endian word: plen, then 0.
    // No test of dst or src for 0 (R-WIRE-5): no connection has id 0
    // (KeyTable never issues it, and conn(0) finds no slot), and an
    // established or closing connection's remote_conn came from a decoded
    // CONNECT_REQ or CONNECT_ACK, whose src_conn decode requires nonzero; so
    // either one 0 fails the look-up or the peer test below and returns
    // false before anything is changed.
    if (get64(p + 36) != uint64_t(plen) << 32 || n != wire::kDataLen + plen || plen > wire::kMaxPayload ||
        (p[25] & wire::kDataVoid))
        return false;
    const uint64_t raddr = get64(p + 48);
    const uint64_t psn_csn = get64(p + 16);  // psn (16), csn (20): one read
    const uint32_t psn = uint32_t(psn_csn >> 32), csn = uint32_t(psn_csn), floor = get32(p + 68);
    if (raddr + plen < raddr || wire::seq_lt(psn, floor)) return false;
    Conn* cp = conn(dst);
    if (!cp) [[unlikely]] return false;
    Conn& c = *cp;
    // The peer test before the wake (which changes neither remote_conn nor
    // state): a packet that fails it, src 0 among them, leaves no trace here.
    if (src != c.remote_conn || (c.state != ConnState::established && c.state != ConnState::closing)) [[unlikely]]
        return false;
    wake(c);
    c.last_rx = now;
    const uint16_t pi = get16(p + 12);
    if (pi >= c.peer_paths || cfg.deferred_placement) [[unlikely]] return false;
    // place_next_write's steps, then the PSN's and the CSN's freshness
    // (round 41): each window's test next to its mark, with no check between
    // them, so that neither its cumulative point nor the test's outcome is
    // held in a register or a stack slot across the stream's and the
    // region's checks. The order of the checks is free: any that fails
    // hands the packet to the general steps, which decide it from the start.
    Stream* sp = c.find_stream(get32(p + 28));
    const uint32_t msg_seq = get32(p + 32);
    if (!sp || sp->error || msg_seq != sp->rx_next || (sp->rx_held && sp->rx[msg_seq & sp->rx_mask].active))
        [[unlikely]]
        return false;
    Stream& s = *sp;
    uint8_t* to = nullptr;
    Syndrome syn{};
    if (!mrs.check_remote(get32(p + 44), s.pd, kAccessRemoteWrite, raddr, plen, &to, syn)) [[unlikely]]
        return false;
    RxPath& rp = c.rx_paths[pi];
    rp.sack.apply_floor(floor);
    if (rp.sack.classify(psn) != SackBitmap::Result::fresh || c.rx_csn.classify(csn) != CsnWindow::Result::fresh)
        [[unlikely]]
        return false;
    ++s.rx_next;
    c.rx_csn.mark(csn);
    PendRec r;
    r.csn = csn;
    r.psn = psn;
    r.ts = get32(p + 64);
    r.plen = plen;
    r.path = pi;
    r.ce = ce != 0;  // read here: not held across the checks above
    r.psn_fresh = true;
    r.accepted = true;
    r.ack_now = true;  // a whole message ends its message (R-ACK-1)
    rx_accounted(c, rp, r, now, false);
    // The bytes after the bookkeeping, which neither reads them nor depends
    // on them (fewer registers kept across the call), and before the later
    // messages waiting for this one are executed (an atomic among them reads
    // what this WRITE wrote, R-CMPL-3); the ACK that reports them leaves
    // after this returns (R-ACK-8). rx_held is tested before the copy (which
    // writes application memory only), so that in the common case nothing of
    // this packet is kept across the call.
    if (s.rx_held) [[unlikely]] {
        ++rx_may_send;  // a READ or atomic waiting for it may answer now
        if (plen) std::memcpy(to, p + wire::kDataLen, plen);  // R-DATA-2
        if (s.rx[s.rx_next & s.rx_mask].active)  // later messages waiting for it
            advance_rx(c, s, uint32_t(sp - c.streams.data()));  // the index worked out here, not kept
        return true;
    }
    if (plen) std::memcpy(to, p + wire::kDataLen, plen);  // R-DATA-2
    return true;
}

// Every datagram but a whole DATA packet in one buffer, out of line so that
// the data path carries none of its register saves: decoded, and handled
// here unless it is a DATA packet (in two spans), for which it returns true
// and rx_one goes on.
bool Engine::Impl::rx_other(const RxPacket& rp, Time now) {
    wire::Packet& pk = rx_pk;
    const uint8_t* const p = rp.data;
    if (rp.len2 == 0 && rp.len == wire::kAckLen && p[0] == wire::kVersion && p[1] == uint8_t(PacketType::ack))
        [[likely]] {
        // An ACK in one buffer (the datagram rx_other meets most): decode()'s
        // checks and the steps below for it, in their order with their
        // results, read straight from the wire (issue 24). Only the fields
        // rx_ack reads are decoded, into a local: nothing goes through rx_pk.
        using wire::detail::get16;
        using wire::detail::get32;
        using wire::detail::get64;
        const uint32_t dst = get32(p + 4), src = get32(p + 8);
        wire::AckHeader a;
        a.cum_psn = get32(p + 16);
        a.ts_echo = get32(p + 20);
        a.rate_hint = get32(p + 24);
        a.ce_count = get16(p + 28);
        for (int i = 0; i < 4; ++i) a.sack[i] = get64(p + 40 + 8 * i);
        if (dst == 0 || src == 0 || a.ce_count > get16(p + 30)) [[unlikely]] {  // R-WIRE-5
            count_decode_error(wire::DecodeError::inconsistent);
            return false;
        }
        Conn* c = conn(dst);
        if (!c) [[unlikely]] {
            ++st.rx_unknown_conn;  // R-ERR-2
            return false;
        }
        wake(*c);
        // R-ERR-2: a packet must come from the connection's peer endpoint
        // (an ACK to a connecting connection is counted so too).
        if (src != c->remote_conn || (c->state != ConnState::established && c->state != ConnState::closing))
            [[unlikely]] {
            ++st.rx_unknown_conn;
            return false;
        }
        c->last_rx = now;
        rx_ack(*c, get16(p + 12), a, now);
        return false;
    }
    // A datagram in two spans (a chained mbuf) is decoded where it lies: no linearising copy.
    const wire::DecodeError e = rp.len2 == 0 ? wire::decode({rp.data, rp.len}, pk)
                                             : wire::decode_split({rp.data, rp.len}, {rp.data2, rp.len2}, pk);
    if (e != wire::DecodeError::ok) [[unlikely]] {
        count_decode_error(e);
        return false;
    }
    const PacketType t = pk.common.type;
    if (t == PacketType::data) return true;
    if (t == PacketType::connect_req) [[unlikely]] {
        rx_connect_req(pk, rp.peer, now);
        return false;
    }
    Conn* c = conn(pk.common.dst_conn);
    if (!c) [[unlikely]] {
        ++st.rx_unknown_conn;  // R-ERR-2
        return false;
    }
    wake(*c);
    if (c->state == ConnState::connecting) [[unlikely]] {
        if (t == PacketType::connect_ack) rx_connect_ack(*c, pk, now);
        else ++st.rx_unknown_conn;
        return false;
    }
    // R-ERR-2: a packet must come from the connection's peer endpoint.
    if (pk.common.src_conn != c->remote_conn ||
        (c->state != ConnState::established && c->state != ConnState::closing)) [[unlikely]] {
        ++st.rx_unknown_conn;
        return false;
    }
    c->last_rx = now;
    rx_control(*c, pk, now);
    return false;
}

// R-ERR-1: undecodable datagrams are dropped and counted by cause.
void Engine::Impl::count_decode_error(wire::DecodeError e) {
    ++st.rx_decode_errors;
    switch (e) {
    case wire::DecodeError::truncated: ++st.rx_truncated; break;
    case wire::DecodeError::bad_version: ++st.rx_bad_version; break;
    case wire::DecodeError::bad_type:
    case wire::DecodeError::bad_opcode: ++st.rx_bad_type; break;
    case wire::DecodeError::oversized: ++st.rx_oversized; break;
    case wire::DecodeError::split_header: ++st.rx_split_header; break;
    default: ++st.rx_inconsistent; break;
    }
}

// Every packet type but DATA and the handshake's, from an established or closing connection's peer.
void Engine::Impl::rx_control(Conn& conn_ref, const wire::Packet& pk, Time now) {
    Conn* c = &conn_ref;
    switch (pk.common.type) {
    case PacketType::ack: rx_ack(*c, pk.common.path_id, pk.ack, now); break;
    case PacketType::nak: rx_nak(*c, pk); break;
    case PacketType::probe: {
        if (pk.common.path_id >= c->peer_paths) { ++st.rx_bad_path; break; }  // R-PATH-3
        CtrlItem it{CtrlKind::probe_reply, pk.common.path_id};
        it.a = pk.probe.probe_seq;
        it.b = pk.probe.ts;
        c->ctrl.push(it);
        break;
    }
    case PacketType::probe_reply: {
        const uint16_t pi = pk.common.path_id;
        if (pi >= c->paths.size()) { ++st.rx_bad_path; break; }
        TxPath& p = c->paths[pi];
        if (p.state == PathStateKind::failed && pk.probe.probe_seq == p.probe_seq &&
            pk.probe.probe_seq != kKeepaliveSeq) {
            // R-PATH-10: a failed path that answers its probe is reused.
            p.state = PathStateKind::active;
            p.replan();
            --c->unsettled;
            p.consecutive_timeouts = 0;
            p.silent_rounds = 0;
            p.rto_pending = false;
            cc_fresh(*c, p, pi);
            const Time rtt = Time(uint32_t(now) - pk.probe.ts);
            rtt_sample(p, rtt);
        }
        break;
    }
    case PacketType::connect_ack: break;  // duplicate of one already processed
    case PacketType::disconnect: {
        c->ctrl.push(CtrlItem{CtrlKind::disconnect_ack, kControlPath});
        c->state = ConnState::closing;   // closes once the ack is sent
        c->ctrl_retries = 1000;          // marks "closing by peer"
        break;
    }
    case PacketType::disconnect_ack:
        if (c->state == ConnState::closing) close_conn(*c);
        break;
    default: break;
    }
}

// R-PLANE-7: the CONNECT_ACK answering a CONNECT_REQ goes back on the plane
// that REQ arrived on (it just crossed that plane), carried as plane + 1 in
// CtrlItem::a (0: no arrival plane, R-PLANE-3's rotation).
static CtrlItem connect_ack_item(const RxPacket* rx) {
    CtrlItem it{CtrlKind::connect_ack, kControlPath};
    it.a = rx ? uint32_t(rx->plane) + 1 : 0;
    return it;
}

void Engine::Impl::rx_connect_req(const wire::Packet& pk, uint32_t peer, Time now) {
    const wire::ConnectHeader& h = pk.connect;
    Conn* mine = nullptr;  // our own attempt toward this peer, waiting for its answer
    for (Conn* c : conns) {
        if (!c) continue;
        // R-CONN-4, R-PLANE-7: a repeat that arrived on another plane may carry
        // another peer handle (the driver met that address first in it); the
        // initiator's id and random cookie name the attempt all the same.
        const bool same_attempt = c->remote_conn == pk.common.src_conn && c->cookie == h.cookie &&
                                  (c->state == ConnState::established || c->state == ConnState::closing);
        if (c->peer != peer && !same_attempt) continue;
        if (c->remote_conn == pk.common.src_conn) {
            // R-CONN-4: a repeated CONNECT_REQ (our ACK was lost) gets the same answer.
            if (c->cookie == h.cookie) {
                c->ctrl.push(connect_ack_item(cur_rx));
                wake(*c);
            } else {
                ++st.connects_crossed;  // R-CONN-14: the peer's attempt that lost to this connection
            }
            return;
        }
        if (!mine && c->state == ConnState::connecting) mine = c;
    }
    if (mine) {
        // R-CONN-14: the CONNECT_REQs crossed. Both ends compare the same two
        // keys (each REQ carries its attempt's); the larger key's attempt is the connection.
        const uint64_t ours = uint64_t(mine->cookie) << 32 | mine->csn_una;
        const uint64_t theirs = uint64_t(h.cookie) << 32 | h.initial_csn;
        if (ours > theirs) {
            ++st.connects_crossed;  // the peer answers ours
            return;
        }
        if (ours < theirs) {
            answer_connect_req(*mine, pk, now);  // ours becomes the passive end of theirs
            event(EventKind::established, *mine);
            return;
        }
        // Equal keys (2^-64): two connections, as before crossings were detected.
    }
    if (!cfg.accept_incoming) {
        ++st.connects_refused;
        return;
    }
    Conn* c = new_conn(peer);
    if (!c) {
        ++st.connects_refused;
        return;
    }
    answer_connect_req(*c, pk, now);
    c->unclaimed = true;
    event(EventKind::incoming, *c);
}

// The passive end of a handshake (R-CONN-8): on a new connection, or on our
// own attempt that lost a crossing (R-CONN-14; its CONNECT_REQ is not sent again).
void Engine::Impl::answer_connect_req(Conn& c, const wire::Packet& pk, Time now) {
    c.remote_conn = pk.common.src_conn;
    c.cookie = pk.connect.cookie;
    establish(c, pk.connect, now);
    c.pack = accepts_pack() && (pk.common.flags & wire::kConnAcceptsPack);  // R-PACK-2, R-PACK-3
    fair.on_connect(c.fair_idx, now);  // R-HINT-2: active from its handshake on
    if (cfg.rate_hints) refresh_idle_hints(c);
    c.ctrl.push(connect_ack_item(cur_rx));
    wake(c);
}

void Engine::Impl::rx_connect_ack(Conn& c, const wire::Packet& pk, Time now) {
    if (pk.connect.cookie != c.cookie) {
        ++st.rx_unknown_conn;
        return;
    }
    c.remote_conn = pk.common.src_conn;
    establish(c, pk.connect, now);
    c.pack = accepts_pack() && (pk.common.flags & wire::kConnAcceptsPack);  // R-PACK-2, R-PACK-3
    // Karn: a handshake with a repeated CONNECT_REQ gives no RTT (R-HINT-8).
    c.handshake_rtt = c.ctrl_retries == 0 && now > c.connect_sent ? now - c.connect_sent : 0;
    if (cfg.rate_hints && pk.connect.rate_hint) start_from_hint(c, pk.connect.rate_hint, now);
    event(EventKind::established, c);
}

void Engine::Impl::start_from_hint(Conn& c, uint32_t hint_kbps, Time now) {
    // R-HINT-8: the first packet is already paced at the share, and the first
    // window is that share's bandwidth-delay product, split over the paths.
    // Without it an incast's first flights (init_cwnd on every path of every
    // sender) are tens of BDPs that no later hint can undo within a few RTTs.
    c.hint_kbps = hint_kbps;
    c.pacer.start_kbps(hint_kbps, now);  // no burst allowance banked before the first packet
    if (!c.handshake_rtt) return;  // init_cwnd stays
    const double bdp_pkts =
        double(hint_kbps) * 125.0 / 1e9 * double(c.handshake_rtt) / double(c.seg + uint32_t(wire::kDataLen));
    const double first = bdp_pkts / double(c.paths.size());
    for (TxPath& p : c.paths) {
        // Published at once: the first flight may leave before an offloaded
        // CC core answers (R-CC-8).
        p.ccv = CcCore::fresh_view(cfg.cc, p.cc_slot, p.ccv.gen, first);
        p.replan();
        CcFeedback f;
        f.slot = p.cc_slot;
        f.gen = p.ccv.gen;
        f.kind = CcEvent::initial;
        f.initial = float(first);
        cc_feed(c, p, f);
    }
}

void Engine::Impl::refresh_idle_hints(const Conn& joined) {
    // R-HINT-9: a handshake lowers every other active sender's share. Those
    // already sending learn it from their next ACK; those that have not sent
    // yet would start from the share their own CONNECT_ACK carried, so they
    // get an ACK on path 0 now (it acknowledges nothing and carries the hint).
    for (Conn* o : conns) {
        if (!o || o == &joined || o->state != ConnState::established || o->rx_paths.empty()) continue;
        if (o->st.rx_data_packets != 0 || o->st.duplicates != 0 || !fair.is_active(o->fair_idx)) continue;
        RxPath& rp = o->rx_paths[0];
        rp.ack_now = true;
        if (!rp.ack_pending) {
            rp.ack_pending = true;
            rp.first_pending = last_now;
            ++o->acks_pending;
            o->ack_last = 0;
            wake(*o);
        }
    }
}

// ---------------- data ----------------

// What rx_accounted (now, or after a deferred placement) needs of a data packet's arrival.
static PendRec arrival(const wire::DataHeader& d, uint16_t pi, bool ce, bool psn_fresh) {
    PendRec r;
    r.csn = d.csn;
    r.psn = d.psn;
    r.ts = d.ts;
    r.plen = d.payload_len;
    r.path = pi;
    r.ce = ce;
    r.psn_fresh = psn_fresh;
    return r;
}

void Engine::Impl::rx_data(Conn& c, const wire::Packet& pk, bool ce, Time now) {
    const wire::DataHeader& d = pk.data;
    const uint16_t pi = pk.common.path_id;
    if (pi >= c.peer_paths) {  // == rx_paths.size()
        ++st.rx_bad_path;
        return;
    }
    RxPath& rp = c.rx_paths[pi];
    const bool deferring = cfg.deferred_placement;
    if (!deferring) [[likely]] {
        // Run to completion, a packet new on its path and on the connection
        // (nearly every one): the steps below in a straight line, none of
        // the arrival-order record deferred placement needs (issue 24).
        rp.sack.apply_floor(d.path_floor);
        if (rp.sack.classify(d.psn) == SackBitmap::Result::fresh &&
            c.rx_csn.classify(d.csn) == CsnWindow::Result::fresh) [[likely]] {
            // A whole message placed by place_next_write ends its message (R-ACK-1).
            const bool whole = place_next_write(c, pk);
            const Placed res = whole ? Placed::ok : place(c, pk, now, nullptr);
            if (res == Placed::ok) [[likely]] c.rx_csn.mark(d.csn);
            else if (not_placed(c, d, res)) return;  // (refused: not_placed marked its CSN)
            PendRec r = arrival(d, pi, ce, true);
            r.accepted = true;
            r.ack_now = whole || ce || (d.dflags & wire::kDataAckNow) || uint64_t(d.offset) + d.payload_len >= d.msg_len;
            rx_accounted(c, rp, r, now, false);
            return;
        }
    } else if (pend_tail - pend_head == pend.size()) {
        ++st.rx_place_full;  // the placement stage is behind: like a full NIC queue, no ack
        return;
    }
    rp.sack.apply_floor(d.path_floor);  // (again without deferral: a no-op)
    const SackBitmap::Result pr = rp.sack.classify(d.psn);
    if (pr == SackBitmap::Result::beyond_window) {
        ++st.rx_stale;  // R-SACK-2 violated by the sender
        return;
    }
    PendRec r = arrival(d, pi, ce, pr == SackBitmap::Result::fresh);
    Deferral df;
    bool deferred = false;
    if (r.psn_fresh) {
        CsnWindow::Result cr = c.rx_csn.classify(d.csn);
        // Deferred: the placed filter lags the accepted one; never let a CSN
        // alias a slot of one still being placed (an honest sender cannot get
        // here, R-CSN-5 counts from acks, which follow placement).
        if (deferring && cr == CsnWindow::Result::fresh && d.csn - c.rx_csn_done.cum() >= cfg.csn_window)
            cr = CsnWindow::Result::beyond_window;
        if (cr == CsnWindow::Result::beyond_window) {
            ++st.rx_stale;  // R-CSN-4
            return;
        }
        if (cr == CsnWindow::Result::duplicate) {
            if (refuse_again(c, d)) return;  // R-NAK-8: a resent refused packet
            ++c.st.duplicates;  // R-CSN-3: acked, never placed twice
            if (cfg.test_mutation == TestMutation::no_dup_filter) [[unlikely]] mutation_replay(c, pk);
        } else {
            const Placed res = place(c, pk, now, deferring ? &df : nullptr);
            if (res != Placed::ok && res != Placed::deferred && not_placed(c, d, res)) return;
            // Deferred: marked now ("placement pending") so that a copy arriving
            // before the placement is a duplicate, never placed twice. (Refused: not_placed marked it.)
            if (res != Placed::refused) c.rx_csn.mark(d.csn);
            r.accepted = true;
            deferred = res == Placed::deferred;
        }
    } else {
        ++c.st.duplicates;
    }
    // R-ACK-1: what the sender must learn now is never delayed.
    r.ack_now = ce || !r.psn_fresh || (d.dflags & wire::kDataAckNow) ||
                uint64_t(d.offset) + d.payload_len >= d.msg_len;
    if (!deferring || (!deferred && pend_head == pend_tail)) {
        rx_accounted(c, rp, r, now, deferring);
        return;
    }
    // Queued behind (or as) a pending placement: finished in arrival order by placed().
    r.conn_id = c.id;
    r.kind = df.kind;
    r.stream_idx = df.stream_idx;
    if (df.kind != PendKind::ack_only) r.stream_gen = c.streams[df.stream_idx].slot_gen;
    r.msg_seq = d.msg_seq;
    r.placed = !deferred;
    const uint32_t token = pend_tail++;
    const uint32_t mask = uint32_t(pend.size() - 1);
    pend[token & mask] = r;
    if (deferred) {
        PlaceJob& j = place_jobs[job_tail++ & mask];
        if (pk.payload_tail.empty()) [[likely]] {
            j.dst = df.dst;
            j.src = pk.payload.data();
            j.len = d.payload_len;
            j.src_off = uint32_t(pk.payload.data() - cur_rx->data);
        } else {
            // Two spans: the part in the first (the end of a header segment, if any)
            // is copied here, the job carries the second span's part.
            const size_t head = pk.payload.size();
            if (head) std::memcpy(df.dst, pk.payload.data(), head);
            j.dst = df.dst + head;
            j.src = pk.payload_tail.data();
            j.len = uint32_t(pk.payload_tail.size());
            j.src_off = cur_rx->len;
        }
        j.cookie = cur_rx->cookie;
        j.token = token;
        ++st.place_jobs;
    }
}

// A fresh packet place() did not accept: nothing of it is acknowledged.
// Returns true (the caller stops); false only under the test mutation that
// acknowledges a refused packet (TestMutation::ack_refused), which then goes
// on as accepted, its CSN marked here.
bool Engine::Impl::not_placed(Conn& c, const wire::DataHeader& d, Placed res) {
    if (res == Placed::rnr) {
        // R-NAK-10: not acked, CSN not marked; the requester resends it after its RNR delay.
        ++c.st.rnr_drops;
        nak(c, d, Syndrome::rnr);
        return true;
    }
    if (res == Placed::stale) {
        // Names a message that cannot be in flight: a corrupted or forged packet.
        // Leaving its CSN unmarked keeps it from shadowing the real one (R-CSN-8).
        ++st.rx_stale;
        return true;
    }
    // Placed::refused. R-NAK-1, R-ACK-8: CSN consumed, PSN not acked, NAK sent; nothing placed.
    c.rx_csn.mark(d.csn);
    if (cfg.deferred_placement) c.rx_csn_done.mark(d.csn);
    return cfg.test_mutation != TestMutation::ack_refused;  // TEST ONLY: the mutation acks it
}

// Step 16 of doc/spec.md section 5 after the payload is in place: count it,
// record its PSN and make the path's ACK due (R-ACK-1, R-ACK-2).
void Engine::Impl::rx_accounted(Conn& c, RxPath& rp, const PendRec& r, Time now, bool deferring) {
    // First: nothing below reads it, and a caller that reads ts from the wire
    // then holds it across none of the stores below (which may alias the
    // wire bytes, so the load cannot move past them).
    rp.ts_last = r.ts;
    if (r.accepted) {
        if (deferring) c.rx_csn_done.mark(r.csn);
        ++c.st.rx_data_packets;
        c.st.rx_payload_bytes += r.plen;
    }
    // Deferred: the path floor may have passed the PSN meanwhile (the sender gave up on it).
    if (r.psn_fresh && (!deferring || rp.sack.classify(r.psn) == SackBitmap::Result::fresh))
        rp.sack.mark(r.psn);
    // R-ACK-2: every data packet, fresh or duplicate, is acked.
    ++rp.rx_packets;
    rp.rx_pending = uint16_t(rp.rx_pending + (rp.rx_pending != 0xffff));
    if (r.ce) {
        ++rp.rx_ce;
        if (rp.ce_pending < rp.rx_pending) ++rp.ce_pending;
        rp.ack_ce = true;
    }
    if (r.ack_now || rp.sack.has_gap()) rp.ack_now = true;
    if (!rp.ack_pending) {
        rp.ack_pending = true;
        rp.first_pending = now;
        ++c.acks_pending;
        c.ack_last = r.path;  // rp is rx_paths[r.path]
    }
    // The fair share's measure is read only for hints (update, check_quiet,
    // hint_kbps, refresh_idle_hints: each under cfg.rate_hints, fixed at
    // construction); without them nothing would read what this counts.
    if (cfg.rate_hints) fair.on_rx(c.fair_idx, r.plen + uint32_t(wire::kDataLen), now);
}

// ---------------- deferred placement ----------------

size_t Engine::take_place_jobs(PlaceJob* out, size_t max) {
    Impl& I = *impl_;
    const uint32_t mask = uint32_t(I.place_jobs.size() - 1);
    size_t n = 0;
    while (n < max && I.job_head != I.job_tail) out[n++] = I.place_jobs[I.job_head++ & mask];
    return n;
}

void Engine::placed(const uint32_t* tokens, size_t n, Time now) {
    Impl& I = *impl_;
    if (I.pend.empty()) return;
    I.last_now = now;
    const uint32_t mask = uint32_t(I.pend.size() - 1);
    for (size_t i = 0; i < n; ++i)
        if (tokens[i] - I.pend_head < I.pend_tail - I.pend_head) I.pend[tokens[i] & mask].placed = true;
    while (I.pend_head != I.pend_tail && I.pend[I.pend_head & mask].placed) {
        const PendRec r = I.pend[I.pend_head & mask];
        ++I.pend_head;
        I.finish_pend(r, now);
    }
}

size_t Engine::place_outstanding() const noexcept { return impl_->pend_tail - impl_->pend_head; }

void Engine::Impl::finish_pend(const PendRec& r, Time now) {
    Conn* cp = conn(r.conn_id);
    if (!cp || (cp->state != ConnState::established && cp->state != ConnState::closing)) return;
    Conn& c = *cp;
    wake(c);
    if (r.path >= c.rx_paths.size()) return;
    // Whatever happened meanwhile (a NAK flushed the stream, a later segment
    // failed the message) leaves the record stale: then only the ack remains.
    if (r.kind != PendKind::ack_only && r.stream_idx < c.streams.size() &&
        c.streams[r.stream_idx].slot_gen == r.stream_gen && c.streams[r.stream_idx].live) {
        Stream& s = c.streams[r.stream_idx];
        if (r.kind == PendKind::rx_msg) {
            RxMsg& m = s.rx[r.msg_seq & s.rx_mask];
            if (m.active && m.msg_seq == r.msg_seq && !m.complete) {
                m.bytes += r.plen;
                if (m.bytes >= m.msg_len) m.complete = true;  // R-CMPL-1
                if (m.complete && m.msg_seq == s.rx_next) advance_rx(c, s, r.stream_idx);
            }
        } else if (!s.sq.empty()) {
            SendWqe& w = s.sq[r.msg_seq & s.sq_mask];
            if (w.active && w.msg_seq == r.msg_seq && !w.done) {
                w.resp_bytes += r.plen;
                if (w.resp_bytes >= w.wr.length) {
                    w.done = true;
                    advance_sq(c, s);
                }
            }
        }
    }
    rx_accounted(c, c.rx_paths[r.path], r, now, cfg.deferred_placement);
}

void Engine::Impl::nak(Conn& c, const wire::DataHeader& d, Syndrome syn) {
    // R-PLANE-3: the NAK goes back on the refused packet's path (its plane) while live.
    CtrlItem it{CtrlKind::nak, rx_pk.common.path_id};
    it.a = d.stream_id;
    it.b = d.msg_seq;
    it.c = d.csn;
    it.syndrome = uint8_t(syn);
    it.opcode = uint8_t(d.opcode);
    if (!c.ctrl.push(it)) {
        // Refused packets come back until a NAK gets through (R-NAK-8), so a
        // NAK beyond a bounded queue can be dropped like any lost NAK.
        if (c.ctrl.capacity() >= kMaxCtrlQueue) return;
        c.ctrl.reserve(c.ctrl.capacity() * 2);
        c.ctrl.push(it);
    }
    if (syn != Syndrome::rnr) ++c.st.naks_sent;
}

// R-NAK-8, R-ACK-8: a duplicate CSN is acknowledged only if its original
// was placed. A packet refused earlier comes back because it was never acked
// (its NAK was lost, or is still on its way): refuse it and NAK it again,
// with the original cause, so the requester learns it whatever NAKs it lost.
// Which originals were refused follows from the stream's state, never from a
// record that could be forgotten: a message that failed is refused whole,
// and once the stream is in ERROR every message from err_msg on is refused,
// while every message before err_msg was placed whole. (A duplicate of a
// packet placed just before its message failed is refused too: the requester
// then reports an error for bytes that landed, never success for bytes that
// did not.)
bool Engine::Impl::refuse_again(Conn& c, const wire::DataHeader& d) {
    if (d.opcode == Opcode::read_resp || d.opcode == Opcode::atomic_resp) return false;
    if (d.opcode == Opcode::write_pack) [[unlikely]] return refuse_pack_again(c, d);
    Stream* s = c.find_stream(d.stream_id);
    if (!s) {
        // Its stream is gone (destroyed). Lately, and its state then says the
        // original was placed: acknowledge it again. Otherwise (a message not
        // yet complete at the destroy, or one whose original came after it
        // and was refused, R-STREAM-11, its NAK lost) or if what the original
        // met is forgotten: refuse.
        for (const Conn::Tombstone& t : c.tombstones)
            if (t.valid && t.wire_id == d.stream_id) {
                if (wire::seq_lt(d.msg_seq, t.placed_before)) return false;
                break;
            }
        nak(c, d, Syndrome::invalid_stream);
        return true;
    }
    if (s->error) {
        if (wire::seq_lt(d.msg_seq, s->err_msg)) return false;
        nak(c, d, s->failed_known && d.msg_seq == s->failed_msg ? s->failed_syndrome : Syndrome::stream_error);
        return true;
    }
    const RxMsg& m = s->rx[d.msg_seq & s->rx_mask];
    if (m.active && m.msg_seq == d.msg_seq && m.complete && m.status != WcStatus::success) {
        nak(c, d, m.syndrome);
        return true;
    }
    return false;
}

// TEST ONLY (TestMutation::no_dup_filter): a duplicate atomic is executed
// again, as by an engine without a duplicate filter (R-CSN-3, R-ATOMIC-2).
void Engine::Impl::mutation_replay(Conn& c, const wire::Packet& pk) {
    const wire::DataHeader& d = pk.data;
    if (!wire::is_atomic_req(d.opcode) || pk.payload.size() < wire::kAtomicReqPayload) return;
    uint32_t sidx = 0;
    const Stream* s = c.find_stream(d.stream_id, &sidx);
    uint8_t* tgt = nullptr;
    Syndrome syn{};
    if (!s || !mrs.check_remote(d.rkey, s->pd, kAccessRemoteAtomic, d.remote_addr, 8, &tgt, syn)) return;
    uint64_t old = 0;
    std::memcpy(&old, tgt, 8);
    const uint64_t a = get_be64(pk.payload.data());
    const uint64_t b = get_be64(pk.payload.data() + 8);
    const uint64_t nv = d.opcode == Opcode::atomic_cas ? (old == a ? b : old) : old + a;
    std::memcpy(tgt, &nv, 8);
}

// A payload in two spans, straight from both into its final place (R-DATA-2):
// still one copy of every byte.
void Engine::Impl::split_copy(uint8_t* dst, const wire::Packet& pk) {
    const size_t head = pk.payload.size();
    if (head) std::memcpy(dst, pk.payload.data(), head);
    std::memcpy(dst + head, pk.payload_tail.data(), pk.payload_tail.size());
}

// R-SGE-4, R-SEND-2, R-READ-3 for a posted list (a receive's, a READ's):
// the payload of pk goes to message bytes [offset, + payload_len) of list
// e[0, n), the range bounded by the list's length by the caller (R-MEM-5).
// Lying in one entry, it is placed like a one-buffer payload: copied, or
// with defer (deferred placement) above place_inline_max described in
// *defer (as `job`, with its dst) and true returned. Straddling entries, it
// is copied here, split at their boundaries (each byte still copied once,
// never deferred). False: placed.
bool Engine::Impl::place_in_list(const LocalSeg* e, uint32_t n, const wire::Packet& pk, Deferral* defer,
                                 const Deferral& job) const {
    const wire::DataHeader& d = pk.data;
    uint8_t* dst = sg_dest(e, n, d.offset, d.payload_len);
    if (!dst) {
        const size_t head = pk.payload.size();
        sg_copy_in(e, n, d.offset, pk.payload.data(), head);
        if (!pk.payload_tail.empty())
            sg_copy_in(e, n, d.offset + uint32_t(head), pk.payload_tail.data(), pk.payload_tail.size());
        return false;
    }
    if (defer && d.payload_len > cfg.place_inline_max) {
        *defer = job;
        defer->dst = dst;
        return true;
    }
    if (!pk.payload_tail.empty()) split_copy(dst, pk);
    else std::memcpy(dst, pk.payload.data(), d.payload_len);
    return false;
}

// R-PACK-6: a WRITE_PACK's entries in order, each exactly as the whole
// WRITE it carries (message msg_seq + i, offset 0, its own rkey, address and
// length): the lone whole WRITE's placement first, place()'s steps for
// anything else (out of order, a check that fails). The first entry place()
// does not accept ends the packet: the entries before it stay placed and
// its NAK (place()'s, the packet's CSN, the entry's msg_seq) names it
// (R-PACK-5); the entries after it are not looked at. The CSN is then
// consumed as a refused packet's (not_placed). A range of msg_seq the
// stream cannot have in flight is stale as a whole, before anything lands.
Engine::Impl::Placed Engine::Impl::place_pack(Conn& c, const wire::Packet& pk, Time now) {
    const wire::DataHeader& d = pk.data;
    if (const Stream* s = c.find_stream(d.stream_id); s && !s->error) {
        if (wire::seq_lt(d.msg_seq, s->rx_next) || d.msg_seq + d.msg_len - 1 - s->rx_next >= s->depth)
            return Placed::stale;  // R-STREAM-5, R-DATA-10
    }
    wire::Packet e;
    e.common = pk.common;
    e.data = d;
    e.data.opcode = Opcode::write;
    e.data.offset = 0;
    e.data.dflags = uint8_t(d.dflags & ~wire::kDataVoid);
    const size_t head = pk.payload.size();
    wire::PackReader r(pk.payload, pk.payload_tail, d.msg_len);
    wire::PackEntry en;
    for (uint32_t i = 0; r.next(en); ++i) {
        e.data.msg_seq = d.msg_seq + i;
        e.data.msg_len = en.length;
        e.data.payload_len = uint16_t(en.length);
        e.data.rkey = en.rkey;
        e.data.remote_addr = en.remote_addr;
        // Its bytes: in the first span, in the second, or across both (decode_split).
        if (en.at + en.length <= head) {
            e.payload = pk.payload.subspan(en.at, en.length);
            e.payload_tail = {};
        } else if (en.at >= head) {
            e.payload = pk.payload_tail.subspan(en.at - head, en.length);
            e.payload_tail = {};
        } else {
            e.payload = pk.payload.subspan(en.at);
            e.payload_tail = pk.payload_tail.subspan(0, en.at + en.length - head);
        }
        if (place_next_write(c, e)) continue;
        const Placed res = place(c, e, now, nullptr);
        if (res != Placed::ok) return res;
    }
    return Placed::ok;
}

// R-NAK-8 for a WRITE_PACK sent again: refused if any of its entries was
// (the first such, as refuse_again would a lone WRITE's packet; its NAK
// names that entry); acknowledged again if every one was placed.
bool Engine::Impl::refuse_pack_again(Conn& c, const wire::DataHeader& d) {
    wire::DataHeader e = d;
    e.opcode = Opcode::write;
    for (uint32_t i = 0; i < d.msg_len; ++i) {
        e.msg_seq = d.msg_seq + i;
        if (refuse_again(c, e)) return true;
    }
    return false;
}

// A whole WRITE in one packet, next in its stream's order (issue 24): placed
// and completed at once, with no message record (a WRITE's completion at the
// responder is nothing but its turn, R-CMPL-3). payload_len == msg_len means
// offset 0 (R-WIRE-7). False (nothing changed): anything else, and anything
// that would fail it, which place() records and refuses.
bool Engine::Impl::place_next_write(Conn& c, const wire::Packet& pk) {
    const wire::DataHeader& d = pk.data;
    if (d.opcode != Opcode::write || d.payload_len != d.msg_len || (d.dflags & wire::kDataVoid) ||
        !pk.payload_tail.empty())
        return false;
    uint32_t sidx = 0;
    Stream* sp = c.find_stream(d.stream_id, &sidx);
    if (!sp || sp->error || d.msg_seq != sp->rx_next || sp->rx[d.msg_seq & sp->rx_mask].active) return false;
    Stream& s = *sp;
    uint8_t* dst = nullptr;
    Syndrome syn{};
    const uint32_t plen = d.payload_len;
    if (!mrs.check_remote(d.rkey, s.pd, kAccessRemoteWrite, d.remote_addr, plen, &dst, syn)) [[unlikely]]
        return false;
    if (plen) std::memcpy(dst, pk.payload.data(), plen);  // R-DATA-2
    ++s.rx_next;
    if (s.rx[s.rx_next & s.rx_mask].active) advance_rx(c, s, sidx);  // later messages waiting for it
    return true;
}

Engine::Impl::Placed Engine::Impl::place(Conn& c, const wire::Packet& pk, Time now, Deferral* defer) {
    (void)now;
    const wire::DataHeader& d = pk.data;
    uint32_t sidx = 0;
    // R-NAK-11: a CSN the requester gave up after RNR: consumed (marked and
    // acknowledged), nothing placed, whatever its stream's state.
    if (d.dflags & wire::kDataVoid) [[unlikely]] {
        if (d.opcode == Opcode::read_resp) void_read_resp(c, d);
        return Placed::ok;
    }
    Stream* sp = c.find_stream(d.stream_id, &sidx);
    if (!sp) [[unlikely]] {
        // R-PACK-6: a WRITE_PACK for a missing stream is refused or not ready
        // as a whole, as its first entry would be (below).
        // R-STREAM-11: a response for a stream destroyed meanwhile: no WR
        // waits for it at either end; acknowledged, not placed.
        if (d.opcode == Opcode::read_resp || d.opcode == Opcode::atomic_resp) {
            ++st.rx_stale;
            return Placed::ok;
        }
        // R-STREAM-11: a late packet of a destroyed incarnation is never placed.
        if (c.old_incarnation(d.stream_id)) {
            nak(c, d, Syndrome::invalid_stream);
            return Placed::refused;
        }
        return Placed::rnr;  // R-NAK-10: the stream may not be created yet
    }
    Stream& s = *sp;
    const uint8_t* payload = pk.payload.data();
    const uint32_t plen = d.payload_len;
    // A payload in two spans (decode_split, payload_tail not empty) is copied
    // by split_copy: tested where it is copied, so the contiguous case keeps
    // nothing extra live across the checks.

    // Responses land in the requester's own work request (R-READ-3, R-ATOMIC-3).
    // One test for the three opcodes off the common path (responses and WRITE_PACK).
    static_assert(uint8_t(Opcode::write_pack) < 32);
    constexpr uint32_t kRare = 1u << uint8_t(Opcode::read_resp) | 1u << uint8_t(Opcode::atomic_resp) |
                               1u << uint8_t(Opcode::write_pack);
    if ((kRare >> (uint8_t(d.opcode) & 31)) & 1) [[unlikely]] {
        if (d.opcode == Opcode::write_pack) return place_pack(c, pk, now);
        if (s.sq.empty()) [[unlikely]] {  // the stream never sent a request: nothing it answers
            ++st.rx_stale;
            return Placed::ok;
        }
        SendWqe& w = s.sq[d.msg_seq & s.sq_mask];
        const Opcode want = d.opcode == Opcode::read_resp ? Opcode::read_req : w.opcode;
        if (!w.active || w.msg_seq != d.msg_seq || w.done || w.opcode != want ||
            (d.opcode == Opcode::atomic_resp && !wire::is_atomic_req(w.opcode)) || d.msg_len != w.wr.length) {
            // A response can outlive its request legitimately (the stream was
            // flushed meanwhile): acknowledge it so the responder stops resending.
            ++st.rx_stale;
            return Placed::ok;
        }
        if (d.opcode == Opcode::read_resp) {
            if (w.gather) [[unlikely]] {
                const SendAux& x = s.sq_aux[d.msg_seq & s.sq_mask];
                if (place_in_list(x.sge, x.nsge, pk, defer, Deferral{nullptr, sidx, PendKind::read_resp}))
                    return Placed::deferred;
            } else {
                if (defer && plen > cfg.place_inline_max) {
                    *defer = Deferral{w.local + d.offset, sidx, PendKind::read_resp};
                    return Placed::deferred;
                }
                if (!pk.payload_tail.empty()) [[unlikely]] split_copy(w.local + d.offset, pk);
                else if (plen) std::memcpy(w.local + d.offset, payload, plen);  // offset+plen <= msg_len checked by codec
            }
            w.resp_bytes += plen;
            if (w.resp_bytes >= w.wr.length) w.done = true;
        } else {
            uint8_t b[wire::kAtomicRespPayload];
            if (!pk.payload_tail.empty()) [[unlikely]] split_copy(b, pk);
            else std::memcpy(b, payload, sizeof b);
            const uint64_t v = get_be64(b);
            std::memcpy(w.local, &v, 8);
            w.done = true;
        }
        if (w.done) advance_sq(c, s);
        return Placed::ok;
    }

    if (s.error) {
        // A message completed before the ERROR has no fresh CSN left (R-DATA-10).
        if (wire::seq_lt(d.msg_seq, s.err_msg)) return Placed::stale;
        // R-NAK-7, R-ACK-8: an errored stream executes nothing more: every packet
        // is refused; the message that failed keeps its own cause (R-NAK-8).
        nak(c, d, s.failed_known && d.msg_seq == s.failed_msg ? s.failed_syndrome : Syndrome::stream_error);
        return Placed::refused;
    }
    if (wire::seq_lt(d.msg_seq, s.rx_next)) return Placed::stale;
    if (d.msg_seq - s.rx_next >= s.depth) return Placed::stale;  // R-STREAM-5: beyond stream_depth
    RxMsg& m = s.rx[d.msg_seq & s.rx_mask];
    if ((!defer || plen <= cfg.place_inline_max) && place_next_write(c, pk)) return Placed::ok;
    if (!m.active) {
        m = RxMsg{};
        m.active = true;
        ++s.rx_held;
        m.msg_seq = d.msg_seq;
        m.msg_len = d.msg_len;
        m.opcode = d.opcode;
        m.imm = d.imm;
        m.recv_seq = d.recv_seq;
        m.solicited = (d.dflags & wire::kDataSolicited) != 0;
        m.rkey = d.rkey;
    } else if (m.msg_seq != d.msg_seq) {
        return Placed::stale;
    }
    if (m.complete) {
        // Every byte of a successful message is already carried by other CSNs (R-DATA-10).
        if (m.status == WcStatus::success) return Placed::stale;
        nak(c, d, m.syndrome);  // R-NAK-1, R-ACK-8: every packet of a failed message is refused
        return Placed::refused;
    }
    // The packet that fails a message is refused, not acked (R-NAK-1). (A
    // member, not a capturing lambda: building the closure cost every packet.)
    auto fail = [&](Syndrome syn, WcStatus st_local) { return fail_msg(c, s, sidx, m, d, syn, st_local); };
    if (m.opcode != d.opcode || m.msg_len != d.msg_len || m.recv_seq != d.recv_seq) {
        return fail(Syndrome::invalid_request, WcStatus::rem_inv_req_err);  // R-DATA-7: segments disagree
    }

    switch (d.opcode) {
    case Opcode::write:
    case Opcode::write_imm: {
        // R-SEND-8: takes a receive for its completion only.
        if (d.opcode == Opcode::write_imm && !wire::seq_lt(d.recv_seq, s.rq_posted) && !(s.srq && bind_srq(s, d.recv_seq)))
            return Placed::rnr;
        uint8_t* dst = nullptr;
        Syndrome syn{};
        if (!mrs.check_remote(d.rkey, s.pd, kAccessRemoteWrite, d.remote_addr + d.offset, plen, &dst, syn)) {
            return fail(syn, WcStatus::rem_access_err);  // R-MEM-3: nothing written
        }
        if (defer && plen > cfg.place_inline_max) {
            *defer = Deferral{dst, sidx, PendKind::rx_msg};
            return Placed::deferred;
        }
        if (!pk.payload_tail.empty()) [[unlikely]] split_copy(dst, pk);
        else if (plen) std::memcpy(dst, payload, plen);  // R-DATA-2: straight into its final place
        break;
    }
    case Opcode::send:
    case Opcode::send_imm: {
        if (!wire::seq_lt(d.recv_seq, s.rq_posted) && !(s.srq && bind_srq(s, d.recv_seq)))
            return Placed::rnr;  // R-SEND-4 (R-SRQ-2)
        if (wire::seq_lt(d.recv_seq, s.rq_done)) return Placed::stale;
        RecvWqe& r = recv_of(s, d.recv_seq);
        if (d.msg_len > r.wr.length) {
            return fail(Syndrome::invalid_request, WcStatus::loc_len_err);  // R-SEND-5
        }
        if (r.bad_lkey) {
            return fail(Syndrome::remote_op_error, WcStatus::loc_prot_err);
        }
        if (r.nsge > 1) [[unlikely]] {
            if (place_in_list(r.sge, r.nsge, pk, defer, Deferral{nullptr, sidx, PendKind::rx_msg}))
                return Placed::deferred;
            break;
        }
        if (defer && plen > cfg.place_inline_max) {
            *defer = Deferral{r.local + d.offset, sidx, PendKind::rx_msg};
            return Placed::deferred;
        }
        if (!pk.payload_tail.empty()) [[unlikely]] split_copy(r.local + d.offset, pk);
        else if (plen) std::memcpy(r.local + d.offset, payload, plen);  // R-SEND-2
        break;
    }
    case Opcode::read_req: {
        uint8_t* src = nullptr;
        Syndrome syn{};
        if (s.rd_dest_held >= s.rd_dest_max) return fail(Syndrome::invalid_request, WcStatus::rem_inv_req_err);  // R-STREAM-10
        if (!mrs.check_remote(d.rkey, s.pd, kAccessRemoteRead, d.remote_addr, d.msg_len, &src, syn)) {
            return fail(syn, WcStatus::rem_access_err);
        }
        ++s.rd_dest_held;  // until its response is all handed out (next_new_segment)
        m.target = src;
        m.complete = true;
        break;
    }
    case Opcode::atomic_cas:
    case Opcode::atomic_fadd: {
        uint8_t* tgt = nullptr;
        Syndrome syn{};
        if (s.rd_dest_held >= s.rd_dest_max) return fail(Syndrome::invalid_request, WcStatus::rem_inv_req_err);  // R-STREAM-10
        if (!mrs.check_remote(d.rkey, s.pd, kAccessRemoteAtomic, d.remote_addr, 8, &tgt, syn)) {
            return fail(syn, WcStatus::rem_access_err);
        }
        ++s.rd_dest_held;  // until its response is all handed out (next_new_segment)
        m.target = tgt;
        if (!pk.payload_tail.empty()) [[unlikely]] split_copy(m.atomic_ops, pk);
        else std::memcpy(m.atomic_ops, payload, wire::kAtomicReqPayload);
        m.complete = true;
        break;
    }
    default:
        return Placed::stale;
    }
    if (!m.complete) {
        m.bytes += plen;
        if (m.bytes >= m.msg_len) m.complete = true;  // R-CMPL-1 (a 0-byte message: its one packet)
    }
    if (m.complete && m.msg_seq == s.rx_next) advance_rx(c, s, sidx);
    return Placed::ok;
}

Engine::Impl::Placed Engine::Impl::fail_msg(Conn& c, Stream& s, uint32_t sidx, RxMsg& m, const wire::DataHeader& d,
                                            Syndrome syn, WcStatus st_local) {
    nak(c, d, syn);
    m.status = st_local;
    m.syndrome = syn;
    m.complete = true;
    if (m.msg_seq == s.rx_next) advance_rx(c, s, sidx);
    return Placed::refused;
}

// R-CMPL-3: receive completions, READ execution and atomics happen in stream order.
void Engine::Impl::advance_rx(Conn& c, Stream& s, uint32_t sidx) {
    while (!s.error) {
        RxMsg& m = s.rx[s.rx_next & s.rx_mask];
        if (!m.active || m.msg_seq != s.rx_next || !m.complete) break;
        request_done(c, s, sidx, m, s.rx_next);
        m.active = false;
        --s.rx_held;
        ++s.rx_next;
    }
}

void Engine::Impl::request_done(Conn& c, Stream& s, uint32_t sidx, RxMsg& m, uint32_t msg_seq) {
    auto recv_completion = [&](WcStatus status) {
        RecvWqe& r = recv_of(s, m.recv_seq);
        Completion cpl;
        cpl.wr_id = r.wr.wr_id;
        cpl.conn = c.id;
        cpl.stream = s.id;
        cpl.status = status;
        cpl.byte_len = m.msg_len;
        cpl.opcode = m.opcode == Opcode::write_imm ? WcOpcode::recv_write_imm : WcOpcode::recv;
        cpl.has_imm = wire::has_imm(m.opcode);
        cpl.imm = m.imm;
        push_cq(s.recv_cq, cpl, m.solicited);
        retire_recv(s);
    };
    if (m.status != WcStatus::success) {
        // R-STREAM-6: the responder's stream enters error at the failed message,
        // in order; a SEND that failed locally reports it on its receive.
        if ((m.opcode == Opcode::send || m.opcode == Opcode::send_imm) &&
            (m.status == WcStatus::loc_len_err || m.status == WcStatus::loc_prot_err) && m.recv_seq == s.rq_done &&
            wire::seq_lt(m.recv_seq, s.rq_posted))
            recv_completion(m.status);
        if (!s.failed_known) {
            s.failed_known = true;
            s.failed_msg = msg_seq;
            s.failed_syndrome = m.syndrome;
        }
        stream_error(c, s, s.sq_head - 1, WcStatus::wr_flush_err);  // flushes every outstanding request
        return;
    }
    switch (m.opcode) {
    case Opcode::send:
    case Opcode::send_imm:
    case Opcode::write_imm:
        recv_completion(WcStatus::success);
        break;
    case Opcode::write: break;
    case Opcode::read_req: {
        RespJob& j = s.resp[msg_seq & s.rx_mask];
        j = RespJob{};
        j.active = true;
        j.src = m.target;
        j.src_key = m.rkey;
        j.len = m.msg_len;
        j.msg_seq = msg_seq;
        j.opcode = Opcode::read_resp;
        c.jobs.push(TxJob{sidx, msg_seq & s.rx_mask, JobKind::response});
        break;
    }
    case Opcode::atomic_cas:
    case Opcode::atomic_fadd: {
        // R-ATOMIC-2: executed exactly once (CSN dedupe), in stream order.
        uint64_t old = 0;
        std::memcpy(&old, m.target, 8);
        const uint64_t a = get_be64(m.atomic_ops);
        const uint64_t b = get_be64(m.atomic_ops + 8);
        const uint64_t nv = m.opcode == Opcode::atomic_cas ? (old == a ? b : old) : old + a;
        std::memcpy(m.target, &nv, 8);
        RespJob& j = s.resp[msg_seq & s.rx_mask];
        j = RespJob{};
        j.active = true;
        j.msg_seq = msg_seq;
        j.len = 8;
        j.opcode = Opcode::atomic_resp;
        put_be64(j.value, old);
        c.jobs.push(TxJob{sidx, msg_seq & s.rx_mask, JobKind::response});
        break;
    }
    default: break;
    }
}

// R-MEM-6: the responder's region was deregistered before this segment of
// the response left: a READ still waiting for it fails, as a NAK
// rem_access_err would fail it; one already complete ignores it.
void Engine::Impl::void_read_resp(Conn& c, const wire::DataHeader& d) {
    Stream* s = c.find_stream(d.stream_id);
    if (!s || s->sq.empty()) return;
    const SendWqe& w = s->sq[d.msg_seq & s->sq_mask];
    if (!w.active || w.msg_seq != d.msg_seq || w.done || w.opcode != Opcode::read_req) return;
    stream_error(c, *s, d.msg_seq, WcStatus::rem_access_err);
}

void Engine::Impl::rx_nak(Conn& c, const wire::Packet& pk) {
    if (pk.nak.syndrome == Syndrome::rnr) {
        rx_rnr_nak(c, pk.nak);
        return;
    }
    ++c.st.naks_received;
    resolve_refused(c, pk.nak);
    uint32_t sidx = 0;
    Stream* s = c.find_stream(pk.nak.stream_id, &sidx);
    if (!s) return;
    const uint32_t m = pk.nak.msg_seq;
    if (!wire::seq_lt(m, s->sq_tail) || wire::seq_lt(m, s->sq_head)) return;  // not outstanding: stale
    if (pk.nak.syndrome == Syndrome::invalid_stream && cfg.peer_gone_wait && !s->error) {
        // R-STREAM-11: the WR stays outstanding (and the ones behind it) until due.
        const Time due = last_now + cfg.peer_gone_wait;
        c.gone.push_back(Conn::GoneWait{sidx, s->wire_id, m, due});
        arm(c, due);
        return;
    }
    WcStatus status = WcStatus::rem_op_err;
    switch (pk.nak.syndrome) {
    case Syndrome::rkey_invalid:
    case Syndrome::pd_mismatch:
    case Syndrome::access_denied:
    case Syndrome::out_of_range: status = WcStatus::rem_access_err; break;
    case Syndrome::invalid_stream:
    case Syndrome::invalid_request: status = WcStatus::rem_inv_req_err; break;
    case Syndrome::stream_error: status = WcStatus::wr_flush_err; break;
    default: break;
    }
    stream_error(c, *s, m, status);  // R-NAK-3
}

// ---------------- acks (sender side) ----------------

void Engine::Impl::delivered(Conn& c, uint32_t csn) { delivered(c, c.txpkts.data(), c.txmask, csn); }

// tp, txmask: c.txpkts.data() and c.txmask, kept in registers by rx_ack
// across its packets (the state stores below are byte stores, which the
// compiler must assume change the connection's fields).
void Engine::Impl::delivered(Conn& c, TxPkt* tp, uint32_t txmask, uint32_t csn) {
    TxPkt& t = tp[csn & txmask];
    // free or delivered: one bit test of the state (a record's state is one of the enum's seven).
    static_assert(uint8_t(CsnState::dup_only) < 32);
    constexpr uint32_t settled = 1u << uint8_t(CsnState::free) | 1u << uint8_t(CsnState::delivered);
    if (t.csn != csn || (settled >> uint8_t(t.state) & 1)) return;
    t.state = CsnState::delivered;
    if (t.is_request) {
        Stream& s = c.streams[t.stream_idx];
        packet_acked(c, s, s.sq[t.sq_slot], t.msg_seq);
    } else if (t.opcode == Opcode::write_pack && t.stream_idx != kOrphanStream) [[unlikely]] {
        // R-PACK-4: every message it carries (TEST ONLY: TestMutation::pack_acks_first, the first alone).
        pack_acked(c, t, t.msg_seq + (cfg.test_mutation == TestMutation::pack_acks_first ? 1 : t.msg_len));
    }
    // The caller (rx_ack) advances csn_una once per ACK, not once per packet.
}

// R-PACK-5: the messages [t.msg_seq, upto) of a WRITE_PACK acknowledged, in
// order, as their own packets' ACKs would (each WQE's one packet).
void Engine::Impl::pack_acked(Conn& c, const TxPkt& t, uint32_t upto) {
    Stream& s = c.streams[t.stream_idx];
    for (uint32_t m = t.msg_seq; m != upto; ++m) packet_acked(c, s, s.sq[m & s.sq_mask], m);
}

// A packet of request msg_seq (WQE w of stream s) acknowledged (R-CMPL-2).
void Engine::Impl::packet_acked(Conn& c, Stream& s, SendWqe& w, uint32_t msg_seq) {
    if (active_not_done(w) && w.msg_seq == msg_seq) {
        ++w.pkts_acked;
        // A WQE holds a request opcode; of those, the four up to
        // write_imm complete when acked, READ and atomics at their response.
        static_assert(uint8_t(Opcode::send) < uint8_t(Opcode::send_imm) &&
                      uint8_t(Opcode::send_imm) < uint8_t(Opcode::write) &&
                      uint8_t(Opcode::write) < uint8_t(Opcode::write_imm) &&
                      uint8_t(Opcode::write_imm) < uint8_t(Opcode::read_req) &&
                      uint8_t(Opcode::write_imm) < uint8_t(Opcode::atomic_cas) &&
                      uint8_t(Opcode::write_imm) < uint8_t(Opcode::atomic_fadd));
        if (w.pkts_acked >= w.npkts && uint8_t(w.opcode) <= uint8_t(Opcode::write_imm)) {
            w.done = true;  // R-CMPL-2: acked = placed at the responder
            // Its completion (and any behind it) is generated once per
            // ACK (rx_ack's flush_sq), not per packet; a packet of
            // another stream flushes this one's first, so the CQ sees
            // the order per-packet advances would have given.
            if (sq_due != &s) {
                if (sq_due) advance_sq(c, *sq_due);
                sq_due = &s;
            }
        }
    }
}

void Engine::Impl::advance_csn_una(Conn& c) { advance_csn_una(c, c.txpkts.data(), c.txmask); }

// tp, mask: c.txpkts.data() and c.txmask (locals: the state stores below
// could alias the connection's fields for the compiler). Inline in rx_ack,
// which holds them already (issue 24: no call, no reload per ACK).
void Engine::Impl::advance_csn_una(Conn& c, TxPkt* const tp, const uint32_t mask) {
    const uint32_t nxt = c.csn_nxt;
    uint32_t una = c.csn_una;
    // A pointer walk, wrapping where `& mask` would: no index product per CSN.
    TxPkt* const end = tp + size_t(mask) + 1;
    TxPkt* e = tp + (una & mask);
    while (una != nxt && e->state == CsnState::delivered) {
        e->state = CsnState::free;
        ++una;
        if (++e == end) e = tp;
    }
    c.csn_una = una;
    if (!c.tx_retired.empty()) [[unlikely]] release_retired(c);
}


// R-NAK-9: the responder never acks the packet it refused, so the NAK is what
// resolves it: resolved without delivery, it leaves the retransmission queue
// (its state is no longer lost), frees its path slot and its CSN.
void Engine::Impl::resolve_refused(Conn& c, const wire::NakHeader& n) {
    TxPkt* t = unresolved_request(c, n);
    if (!t) return;
    if (t->opcode == Opcode::write_pack && t->stream_idx != kOrphanStream) [[unlikely]] {
        // R-PACK-5: the entries before the one the NAK names were placed:
        // they complete as their own packets' ACKs would have completed them.
        pack_acked(c, *t, n.msg_seq);
        if (sq_due) {
            advance_sq(c, *sq_due);
            sq_due = nullptr;
        }
    }
    settle(c, *t);
}

// The request packet a NAK names, if it is still unresolved (in flight, or
// declared lost and queued for a resend): csn, stream and msg_seq must match.
TxPkt* Engine::Impl::unresolved_request(Conn& c, const wire::NakHeader& n) {
    TxPkt& t = c.txpkts[n.csn & (c.txpkts.size() - 1)];
    // R-PACK-5: a WRITE_PACK's NAK names one of its entries.
    const bool packed = t.opcode == Opcode::write_pack;
    if (t.csn != n.csn || (packed ? n.msg_seq - t.msg_seq >= t.msg_len : t.msg_seq != n.msg_seq)) return nullptr;
    // A request names its stream by slot; an orphan (its stream destroyed,
    // R-STREAM-11) by the wire id it was sent with.
    if (t.is_request || (packed && t.stream_idx != kOrphanStream) ? c.streams[t.stream_idx].wire_id != n.stream_id
                     : t.stream_idx != kOrphanStream || t.stream_id != n.stream_id)
        return nullptr;
    if (t.state != CsnState::inflight && t.state != CsnState::lost && t.state != CsnState::inflight_dup &&
        t.state != CsnState::dup_only)
        return nullptr;
    return &t;
}

// The path slot of the packet's latest transmission, if still in flight, is
// resolved without delivery: path_floor moves past it (R-PATH-6).
void Engine::Impl::settle_slot(Conn& c, TxPkt& t) {
    // (A redundant copy's slot, R-TIMER-10, resolves on its path: acked,
    // or declared lost with the CSN resolved, which resends nothing.)
    if (t.state != CsnState::inflight && t.state != CsnState::inflight_dup) return;
    TxPath& p = c.paths[t.path];
    PathTxSlot& sl = p.ring[t.psn & (kPathRing - 1)];
    if (sl.state == TxSlotState::inflight && sl.csn == t.csn) {
        sl.state = TxSlotState::acked;
        --p.inflight;
        advance_una(p, c.unsettled);
    }
}

// Resolved without delivery: it leaves the retransmission queues and frees its CSN.
void Engine::Impl::settle(Conn& c, TxPkt& t) {
    settle_slot(c, t);
    t.state = CsnState::delivered;
    advance_csn_una(c);
}

// R-NAK-10: the responder refused the packet as receiver-not-ready (its stream
// not created yet, or no receive posted for it). Not loss and not an error:
// the packet is set aside and sent again after rnr_delay, at most rnr_retry
// times (7: forever), after which its WR fails with rnr_retry_exc_err.
void Engine::Impl::rx_rnr_nak(Conn& c, const wire::NakHeader& n) {
    TxPkt* tp = unresolved_request(c, n);
    if (!tp) return;  // resolved meanwhile, or a stale or forged NAK
    TxPkt& t = *tp;
    ++c.st.rnr_naks_received;
    auto park = [&] {
        settle_slot(c, t);
        t.state = CsnState::rnr_wait;
        const Time due = last_now + cfg.rnr_delay;
        c.rnr.push(Conn::RnrWait{t.csn, due});  // sized to the CSN window: never full
        arm(c, due);
    };
    if (t.stream_idx == kOrphanStream) {
        abandon(c, t);  // R-STREAM-11: no WR waits for it; its CSN still has to reach the peer
        return;
    }
    Stream& s = c.streams[t.stream_idx];
    SendWqe& w = s.sq[t.sq_slot];
    const bool outstanding = w.active && w.msg_seq == t.msg_seq && !w.done && !s.error;
    if (!outstanding) {
        abandon(c, t);  // its WR was flushed: nothing waits for it
        return;
    }
    if (cfg.rnr_retry < 7 && t.rnr_tries >= cfg.rnr_retry) {
        abandon(c, t);
        stream_error(c, s, t.msg_seq, WcStatus::rnr_retry_exc_err);
        return;
    }
    ++t.rnr_tries;
    park();
}

// R-NAK-10: a CSN the peer never consumed (it answered RNR) cannot simply be
// settled here: the peer's CSN filter would keep a hole at it and refuse
// every CSN a window beyond (R-CSN-4). Nor may its payload be read again (the
// WR is finished and the application may have freed its buffer). It is sent
// once more, reliably, as a void packet: no payload, no placement, consumed
// and acknowledged by the peer; its ACK completes nothing.
void Engine::Impl::abandon(Conn& c, TxPkt& t) {
    settle_slot(c, t);
    TxPkt v{};
    v.csn = t.csn;
    v.stream_id = t.stream_id;
    v.stream_idx = kOrphanStream;
    v.msg_seq = t.msg_seq;
    v.opcode = Opcode::write;  // msg_len 0, no payload: valid for every decoder (R-WIRE-7)
    v.dflags = wire::kDataVoid;
    v.sent_before = true;
    v.path = t.path;
    v.psn = t.psn;
    v.state = CsnState::lost;
    t = v;
    c.retx.push(t.csn);
}

void Engine::Impl::declare_lost(Conn& c, TxPath& p, uint32_t psn) {
    PathTxSlot& sl = p.ring[psn & (kPathRing - 1)];
    if (sl.state != TxSlotState::inflight) return;
    p.replan();
    sl.state = TxSlotState::lost;
    --p.inflight;
    TxPkt& t = c.txpkts[sl.csn & (c.txpkts.size() - 1)];
    const uint16_t pi = uint16_t(&p - c.paths.data());
    if (t.csn != sl.csn) return;
    const bool latest = t.path == pi && t.psn == psn;  // the CSN's latest regular transmission
    if (t.state == CsnState::inflight && latest) {
        // R-SACK-4: exactly this packet is queued for retransmission, now.
        t.state = CsnState::lost;
        c.retx.push(t.csn);
        ++p.st.retransmits;
        ++c.st.retransmits;
    } else if (t.state == CsnState::inflight_dup) [[unlikely]] {
        // R-TIMER-10: one of two copies lost; the other still covers the CSN.
        t.state = latest ? CsnState::dup_only : CsnState::inflight;
    } else if (t.state == CsnState::dup_only && !latest) [[unlikely]] {
        // The redundant copy is lost too: resent as the latest would have been.
        t.state = CsnState::lost;
        c.retx.push(t.csn);
        ++p.st.retransmits;
        ++c.st.retransmits;
    }
}


// Inline: once per ACK (issue 24).
[[gnu::always_inline]] inline void Engine::Impl::rtt_sample(TxPath& p, Time r) {
    // R-TIMER-1: RFC 6298 estimator per path.
    if (!p.have_rtt || p.rtt_borrowed) {
        p.srtt = r;
        p.rttvar = r / 2;
        p.have_rtt = true;
        p.rtt_borrowed = false;
    } else {
        const Time diff = p.srtt > r ? p.srtt - r : r - p.srtt;
        p.rttvar = (3 * p.rttvar + diff) / 4;
        p.srtt = (7 * p.srtt + r) / 8;
    }
    p.rto = std::clamp<Time>(p.srtt + std::max<Time>(4 * p.rttvar, 1000), cfg.min_rto, cfg.max_rto);
    p.replan();
}

// R-TIMER-1: the connection's first RTT sample is every other path's until it
// has its own, so a path whose first packets are lost waits an RTO of that
// RTT (and R-TIMER-8/9 apply), not initial_rto: a short flow on a fresh
// connection otherwise pays initial_rto (1 ms) for one lost packet.
void Engine::Impl::lend_rtt(Conn& c, Time r, Time now) {
    c.rtt_lent = true;
    for (TxPath& q : c.paths)
        if (!q.have_rtt) {
            rtt_sample(q, r);
            q.rtt_borrowed = true;
            // Its packets in flight were timed by initial_rto when they left.
            if (q.snd_una != q.snd_nxt) arm(c, now);
        }
}

// R-TIMER-7: an ACK of PSNs a timeout already declared lost (below snd_una).
// While the timeout is pending the floor stays at rto_psn (tx_floor), so the
// receiver's cum_psn above it is a receipt, as are SACK bits. Received
// originals' CSNs are delivered, so their queued retransmissions are dropped
// (R-SACK-3), and the floor moves up to what is known. Returns true if the
// timeout was spurious: the packet whose timer expired had arrived.
bool Engine::Impl::rx_late_ack(Conn& c, TxPath& p, const wire::AckHeader& a, Time now) {
    p.replan();  // rto_psn, rto_pending
    // The span rule (R-SACK-2 from tx_floor) keeps every slot of the range unreused.
    auto late = [&](uint32_t psn) {
        if (!wire::seq_lt(psn, p.rto_psn) && wire::seq_lt(psn, p.rto_end))
            delivered(c, p.ring[psn & (kPathRing - 1)].csn);
    };
    for (uint32_t w = 0; w < 4; ++w)
        for (uint64_t bits = a.sack[w]; bits; bits &= bits - 1)
            late(a.cum_psn + 1 + w * 64 + uint32_t(std::countr_zero(bits)));
    if (!wire::seq_lt(p.rto_psn, a.cum_psn)) return false;
    const uint32_t end = wire::seq_lt(a.cum_psn, p.rto_end) ? a.cum_psn : p.rto_end;
    for (uint32_t psn = p.rto_psn; psn != end; ++psn) late(psn);
    p.rto_psn = end;
    if (end == p.rto_end) p.rto_pending = false;  // all of it arrived: nothing left to learn
    if (p.rto_undone) return false;
    p.rto_undone = true;
    p.consecutive_timeouts = 0;
    ++p.st.spurious_timeouts;
    // The delay that fired the timer is a real RTT: the estimator must see it
    // (R-TIMER-1), or the RTO stays below the delays that recur.
    if (a.ts_echo) rtt_sample(p, Time(uint32_t(uint32_t(now) - a.ts_echo)));
    return true;
}

void Engine::Impl::rx_ack(Conn& c, uint16_t pi, const wire::AckHeader& a, Time now) {
    if (pi >= c.paths.size()) {
        ++st.rx_bad_path;
        return;
    }
    TxPath& p = c.paths[pi];
    if (wire::seq_lt(p.snd_nxt, a.cum_psn)) {
        ++st.rx_stale;  // acks data never sent on this path
        return;
    }
    p.replan();  // whatever it acknowledges, declares lost or ends (rto_pending)
    if (cfg.rate_hints && a.rate_hint != c.hint_kbps) {
        // R-HINT-9: before the first DATA the first window follows the hint too.
        if (c.st.tx_data_packets == 0 && a.rate_hint) {
            start_from_hint(c, a.rate_hint, now);
        } else {
            c.hint_kbps = a.rate_hint;  // R-HINT-5
            c.pacer.set_rate_kbps(a.rate_hint, now);
        }
    }
    const bool undo = p.rto_pending && rx_late_ack(c, p, a, now);  // R-TIMER-7
    uint32_t newly = 0;
    bool heard = undo;  // the path carried something to the peer (R-TIMER-9)
    Time acked_sent = c.acked_sent;
    // Locals for what no step below changes (the slot and record state
    // stores are byte stores: the compiler would reload these per packet).
    TxPkt* const tp = c.txpkts.data();
    const uint32_t txmask = c.txmask;
    const uint32_t cum = a.cum_psn;
    // to: the slot's state once acknowledged (acked; empty where the
    // cumulative PSN passes it, written once: nothing in between reads it).
    // False: the slot was neither in flight nor lost, and is left as it is.
    auto ack_slot = [&](uint32_t psn, TxSlotState to) __attribute__((always_inline)) {
        PathTxSlot& sl = p.ring[psn & (kPathRing - 1)];
        if (sl.state == TxSlotState::inflight) {
            sl.state = to;
            --p.inflight;
            ++newly;
            acked_sent = std::max(acked_sent, sl.sent);
            delivered(c, tp, txmask, sl.csn);
        } else if (sl.state == TxSlotState::lost) {
            // Declared lost by a timeout yet it arrived: the CSN is delivered.
            sl.state = to;
            heard = true;
            delivered(c, tp, txmask, sl.csn);
        } else {
            return false;
        }
        return true;
    };
    // Cumulatively acknowledged: resolved, so emptied and passed here
    // (advance_una's work for this range, without a second walk over it).
    for (uint32_t psn = p.snd_una; wire::seq_lt(psn, cum); ++psn)
        if (!ack_slot(psn, TxSlotState::empty)) p.ring[psn & (kPathRing - 1)].state = TxSlotState::empty;
    if (wire::seq_lt(p.snd_una, cum)) {
        c.unsettled -= cum - p.snd_una;
        p.snd_una = cum;
    }
    bool any_sack = false;
    uint32_t highest = 0;
    // No bit set, as a rule (nothing out of order on the path): one test, not four words' loops.
    if (a.sack[0] | a.sack[1] | a.sack[2] | a.sack[3]) [[unlikely]] {
        for (uint32_t w = 0; w < 4; ++w) {
            uint64_t bits = a.sack[w];
            while (bits) {
                const uint32_t b = uint32_t(std::countr_zero(bits));
                bits &= bits - 1;
                const uint32_t psn = cum + 1 + w * 64 + b;
                if (!wire::seq_lt(psn, p.snd_nxt) || wire::seq_lt(psn, p.snd_una)) continue;
                ack_slot(psn, TxSlotState::acked);
                any_sack = true;
                highest = psn;
            }
        }
    }
    // R-SACK-4: on one path a hole below an acked PSN is loss, not reordering.
    uint16_t losses = 0;
    if (any_sack) {
        // TEST ONLY go_back_n: everything in flight from the hole on is resent.
        if (cfg.test_mutation == TestMutation::go_back_n) [[unlikely]] {
            for (uint32_t psn = p.snd_una; wire::seq_lt(psn, highest); ++psn)
                if (p.ring[psn & (kPathRing - 1)].state == TxSlotState::inflight) {
                    highest = p.snd_nxt;
                    break;
                }
        }
        for (uint32_t psn = p.snd_una; wire::seq_lt(psn, highest); ++psn) {
            PathTxSlot& sl = p.ring[psn & (kPathRing - 1)];
            if (sl.state == TxSlotState::inflight) {
                declare_lost(c, p, psn);
                ++p.st.losses;
                ++losses;
            }
        }
    }
    advance_una(p, c.unsettled);
    advance_csn_una(c, tp, txmask);  // once per ACK for every CSN it delivered
    if (newly | heard) {
        p.silent_rounds = 0;
        p.last_heard = now;
    }
    if (heard | (losses != 0)) [[unlikely]] {
        if (heard)
            p.reo_late();  // it was late, not lost
        else
            p.reo_recovered();
    }
    c.acked_sent = acked_sent;
    // R-TIMER-9: a path found overdue waited for this evidence.
    if (acked_sent >= c.silence_wait) [[unlikely]] {
        c.silence_wait = TimerWheel::kNever;
        arm(c, now);
    }
    CcFeedback f;
    f.slot = p.cc_slot;
    f.gen = p.ccv.gen;
    f.kind = CcEvent::ack;
    f.undo = undo;
    f.losses = losses;
    if (newly) {
        p.consecutive_timeouts = 0;
        p.rto_pending = false;  // post-timeout data acked: originals not acked by now were lost (FIFO path)
        if (a.ts_echo) {
            const Time r = Time(uint32_t(uint32_t(now) - a.ts_echo));
            rtt_sample(p, r);
            if (!c.rtt_lent) [[unlikely]] lend_rtt(c, r, now);
            f.rtt = uint32_t(r);
            if (r && (!p.st.min_rtt || r < p.st.min_rtt)) p.st.min_rtt = r;  // as the CC core's (R-HINT-7)
        }
    }
    const uint32_t marked = a.ce_count;
    if (marked) p.st.ce_marks += marked;
    f.acked = std::max<uint32_t>(newly, marked);
    f.marked = marked;
    f.ack_psn = a.cum_psn;
    f.snd_nxt = p.snd_nxt;
    if (cfg.rate_hints && c.hint_kbps) {
        // R-HINT-7 (the cap itself is the CC core's): the hint is shared over the active paths.
        uint32_t active = 0;
        for (const TxPath& q : c.paths) active += q.state == PathStateKind::active;
        f.hint_kbps = c.hint_kbps;
        f.active_paths = uint16_t(active);
        f.pkt_bytes = uint16_t(c.seg + uint32_t(wire::kDataLen));
    }
    if (sq_due) {
        advance_sq(c, *sq_due);
        sq_due = nullptr;
    }
    cc_feed(c, p, f);
    settle_timers(c);
}

}  // namespace mroce
