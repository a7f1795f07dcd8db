// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Engine internals shared by the engine's source files. Not a public header.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstring>
#include <limits>
#include <memory>
#include <unordered_map>
#include <vector>

#include "key_table.hpp"
#include "mr_table.hpp"
#include "mroce/engine.hpp"
#include "ring.hpp"
#include "sack_window.hpp"
#include "sg_list.hpp"
#include "timer_wheel.hpp"

namespace mroce {

inline constexpr uint32_t kPathRing = wire::kSackBits;  // R-SACK-2: in-flight span per path
inline constexpr uint32_t kKeepaliveSeq = 0;           // probe_seq of a keepalive PROBE (R-CONN-15)
inline constexpr uint32_t kMaxCtrlQueue = 4096;         // control items held per connection (NAKs beyond: dropped)
inline constexpr uint32_t kTxRecordsStart = 128;     // transmit records of a new connection (grown on demand)
inline constexpr uint32_t kPackArena = 64 * 1024;    // R-PACK-4: bytes of packed payloads in flight per connection
inline constexpr uint32_t kPackEntryMax = 256;       // R-PACK-3: the largest WRITE that is packed

// ---- sender side ----

enum class TxSlotState : uint8_t { empty, inflight, acked, lost };

// One transmission on a path: which CSN it carried and when.
struct PathTxSlot {
    Time sent = 0;
    uint32_t csn = 0;
    TxSlotState state = TxSlotState::empty;
};

struct TxPath {
    PathStateKind state = PathStateKind::active;
    // A data packet's TxPacket bytes from path to plane (path 0, the path's
    // entropy, hdr_len kDataLen, ect 1, the path's plane) as one word: the
    // only place entropy and plane are kept, so that send_on_path writes the
    // six fields with one store (issue 24); path is or'ed in per packet.
    uint64_t tx_stamp = stamp_of(0, 0);
    uint16_t entropy() const noexcept { return stamp_get<uint16_t>(offsetof(TxPacket, entropy)); }
    // R-PLANE-2: path i is on plane i % Conn::planes, for good.
    uint8_t plane() const noexcept { return stamp_get<uint8_t>(offsetof(TxPacket, plane)); }
    void set_entropy(uint16_t e) noexcept { tx_stamp = stamp_of(e, plane()); }
    void set_plane(uint8_t pl) noexcept { tx_stamp = stamp_of(entropy(), pl); }
    // The stamp with path pi: path is its first field.
    uint64_t stamp_for(uint16_t pi) const noexcept {
        return tx_stamp | (std::endian::native == std::endian::little ? uint64_t(pi) : uint64_t(pi) << 48);
    }
    // The same for an ACK on path pi: its header length, and Not-ECT (R-ECN-1).
    uint64_t ack_stamp_for(uint16_t pi) const noexcept {
        return stamp_for(pi) ^ stamp_of(0, 0) ^ stamp_of(0, 0, uint16_t(wire::kAckLen), 0);
    }
    uint32_t snd_nxt = 0;
    uint32_t snd_una = 0;       // oldest unresolved PSN (R-PATH-5: the floor we advertise, see tx_floor)
    uint32_t inflight = 0;      // slots in state inflight
    uint32_t consecutive_timeouts = 0;
    uint32_t silent_rounds = 0;  // R-TIMER-9: consecutive silences with no ACK of the path between
    Time last_heard = 0;         // R-TIMER-9: the last ACK that acknowledged anything of the path
    uint32_t reo_mult = 1;       // R-TIMER-9: doubles (to 8) when a packet declared lost arrives after all
    // R-TIMER-8: tlp_count tail-loss probes were sent while snd_una was
    // tlp_una; an ACK that moves snd_una starts the count again. The latest
    // left at tlp_at, which R-TIMER-9's silence also counts from: a probe in
    // flight is the path's own question, its answer not yet due.
    uint8_t tlp_count = 0;
    // R-TIMER-9: loss recoveries left before reo_mult returns to 1 (RFC 8985's
    // reo_wnd_persist), so that one episode of late packets does not slow the
    // path's loss detection for the rest of the connection.
    uint8_t reo_persist = 0;
    uint32_t tlp_una = 0;
    Time tlp_at = 0;
    // R-TIMER-7: while a timeout is pending, [rto_psn, rto_end) are the PSNs
    // it declared lost that no ACK has yet shown received; the advertised
    // floor stays at rto_psn, so a late ACK's cum_psn is a receipt. Such an
    // ACK delivers their CSNs and may prove the timeout spurious (once:
    // rto_undone). Pending ends when post-timeout data is acknowledged.
    uint32_t rto_psn = 0;
    uint32_t rto_end = 0;
    bool rto_pending = false;
    bool rto_undone = false;
    uint32_t probe_seq = 0;
    Time next_probe = 0;
    Time probe_gap = 0;          // current re-probe interval of a failed path (R-PATH-11 backoff)
    Time srtt = 0;
    Time rttvar = 0;
    Time rto = 0;
    bool have_rtt = false;
    bool rtt_borrowed = false;   // srtt is a sibling's first sample (R-TIMER-1): the path's own first replaces it
    uint32_t marked_rounds = 0;  // consecutive rounds with CE, for re-routing (R-SCHED-5)
    uint32_t rounds_seen = 0;
    uint32_t cc_slot = 0;        // the path's slot in the CC core (R-CC-8)
    // The window as the CC core last published it: all the scheduler reads
    // of congestion control. Inline CC: current; offloaded: one ring transit old.
    CcView ccv;
    uint32_t cc_timeouts_fed = 0;  // timeout records of this incarnation the CC core was given
    PathStats st;
    // Scheduler plan for the tx_burst in progress (R-SCHED-1..3), in place
    // when plan_paths returns: nothing that changes a path's window, RTT or
    // marks runs inside tx_burst, so only what the burst itself sends needs
    // tracking, and choosing a path costs no division per packet.
    uint32_t sched_room = 0;     // packets the path may still take (0: not eligible)
    uint64_t sched_step = 0;     // score per packet in flight
    // The score, (inflight + 1) * sched_step, is Conn::sched_score[path].
    // The plan (room, step, score) is kept across bursts (plan_kept): a
    // message alone changes one path's state, and a burst's sends change
    // its plan as a fresh one would (send_on_path). Everything else that
    // writes what plan_path reads (cwnd and the marks: a CC view; srtt;
    // inflight, snd_una, the timeout's floor, the state) calls replan(),
    // and the next plan_paths works the path's plan out again (a burst's
    // own plan is left as it is).
    bool plan_kept = false;
    void replan() { plan_kept = false; }
    Time sched_timer = 0;        // the timer a send arms: now + RTO, or the probe time (R-TIMER-8); 0: not worked out yet this burst
    // R-TIMER-9: evidence that a packet declared lost was late, not lost.
    void reo_late() noexcept {
        reo_mult = std::min<uint32_t>(8, 2 * reo_mult);
        reo_persist = kReoPersist;
    }
    // R-TIMER-9: the path declared losses (an ACK's, a silence, a timeout).
    void reo_recovered() noexcept {
        if (reo_mult > 1 && --reo_persist == 0) reo_mult = 1;
    }
    static constexpr uint8_t kReoPersist = 16;
    std::array<PathTxSlot, kPathRing> ring{};

private:
    static_assert(offsetof(TxPacket, entropy) == offsetof(TxPacket, path) + 2 &&
                  offsetof(TxPacket, hdr_len) == offsetof(TxPacket, path) + 4 &&
                  offsetof(TxPacket, ect) == offsetof(TxPacket, path) + 6 &&
                  offsetof(TxPacket, plane) == offsetof(TxPacket, path) + 7);
    template <class T>
    T stamp_get(size_t off) const noexcept {
        T v;
        std::memcpy(&v, reinterpret_cast<const uint8_t*>(&tx_stamp) + (off - offsetof(TxPacket, path)), sizeof v);
        return v;
    }
    static uint64_t stamp_of(uint16_t entropy, uint8_t plane, uint16_t hdr_len = uint16_t(wire::kDataLen),
                             uint8_t ect = 1) noexcept {
        TxPacket o;
        o.path = 0;
        o.entropy = entropy;
        o.hdr_len = hdr_len;
        o.ect = ect;  // R-ECN-1
        o.plane = plane;
        uint64_t v;
        std::memcpy(&v, &o.path, 8);
        return v;
    }
};

// R-PATH-5, R-TIMER-7: the path_floor DATA carries, and the base of the SACK
// span (R-SACK-2): snd_una, or while a timeout is pending the lowest PSN it
// declared lost that is not yet known to be received.
inline uint32_t tx_floor(const TxPath& p) { return p.rto_pending ? p.rto_psn : p.snd_una; }

// R-SCHED-1..3: a path's eligibility as a packet budget (sched_room) and its
// score as a step per packet in flight (sched_step); returns the score. The
// score is the spec's (inflight + 1) / max(1, cwnd) * (srtt + 1 us), in
// fixed point, times 4 after a fresh mark; a path that may take nothing
// scores kNoPath (its step is not worked out).
static constexpr uint64_t kNoPath = std::numeric_limits<uint64_t>::max();
[[gnu::always_inline]] inline uint64_t plan_path(TxPath& p) {
    // std::max(1.0, cwnd), NaN included, written so that it is one maxsd,
    // where std::max's reference is a compare and two jumps.
    const double cwnd = p.ccv.cwnd > 1.0 ? p.ccv.cwnd : 1.0;
    const uint32_t win = uint32_t(cwnd);
    const uint32_t span = p.snd_nxt - tx_floor(p);
    if (p.state != PathStateKind::active || p.inflight >= win || span >= kPathRing) {
        p.sched_room = 0;  // not eligible (path_open)
        return kNoPath;
    }
    p.sched_room = std::min(win - p.inflight, kPathRing - span);
    // srtt is 0 until have_rtt: only rtt_sample writes it, setting have_rtt.
    uint64_t k = p.srtt / 64 + 16;
    if (p.ccv.rounds_since_mark == 0) k *= 4;  // R-SCHED-3: steer away from a fresh mark
    // cwnd * 16 through int64_t: win's conversion above already needs
    // cwnd < 2^32, so the product fits, and the signed conversion is one
    // instruction where the unsigned one tests the range first.
    p.sched_step = std::max<uint64_t>(1, (k << 24) / uint64_t(int64_t(cwnd * 16.0)));
    return uint64_t(p.inflight + 1) * p.sched_step;
}

// snd_una passes the slots that are no longer in flight (acknowledged or
// declared lost), up to the oldest still in flight; unsettled is the
// connection's count (Conn::unsettled), less what snd_una passed.
inline void advance_una(TxPath& p, uint32_t& unsettled) {
    p.replan();
    const uint32_t from = p.snd_una;
    while (p.snd_una != p.snd_nxt) {
        PathTxSlot& sl = p.ring[p.snd_una & (kPathRing - 1)];
        if (sl.state == TxSlotState::inflight) break;
        sl.state = TxSlotState::empty;
        ++p.snd_una;
    }
    unsettled -= p.snd_una - from;
}

// delivered: resolved (acknowledged, or settled by a NAK without delivery);
// rnr_wait: refused as receiver-not-ready, resent when its delay ends (R-NAK-10).
// R-TIMER-10: inflight_dup: its latest transmission (TxPkt::path, psn) and a
// redundant copy on another path are both in flight; dup_only: that
// transmission was declared lost while the copy is still in flight, so
// nothing is resent unless the copy is lost too. Every regular transmission
// sets inflight, so a record never starts with a stale copy recorded.
enum class CsnState : uint8_t { free, inflight, lost, delivered, rnr_wait, inflight_dup, dup_only };

// Everything needed to (re)build one data packet: retransmission needs no
// other state, so request and response records may be recycled independently.
struct TxPkt {
    const uint8_t* payload = nullptr;
    uint64_t remote_addr = 0;
    uint32_t csn = 0;
    uint32_t stream_id = 0;
    uint32_t msg_seq = 0;
    uint32_t msg_len = 0;
    uint32_t offset = 0;
    uint32_t rkey = 0;
    uint32_t recv_seq = 0;
    uint32_t imm = 0;
    uint32_t stream_idx = 0;     // local stream index (for request acks)
    uint32_t sq_slot = 0;        // send-queue slot of the request (requests only)
    uint32_t src_key = 0;        // READ_RESP: the region its payload is read from (R-MEM-6)
    uint16_t payload_len = 0;
    uint16_t path = 0;           // path of the latest transmission
    uint32_t psn = 0;            // PSN of the latest transmission
    wire::Opcode opcode = wire::Opcode::write;
    uint8_t dflags = 0;
    CsnState state = CsnState::free;
    bool is_request = false;     // counts toward a send-queue entry when delivered
    bool sent_before = false;
    uint8_t rnr_tries = 0;       // RNR NAKs this packet has had (R-NAK-10)
    uint8_t inline_payload[8] = {};  // ATOMIC_RESP value (responder's copy)
};

// 128 bytes: a power of two, so finding a slot on the per-packet path
// (delivered, place) is a shift. What only lists and atomics need is in the
// slot's SendAux.
struct SendWqe {
    SendWr wr{};                  // wr.length: the message length (a list's sum); wr.sg_list unused
    uint8_t* local = nullptr;     // resolved local address (one buffer)
    uint32_t msg_seq = 0;
    uint32_t recv_seq = 0;
    uint32_t npkts = 0;
    uint32_t next_seg = 0;        // segments handed out for first transmission
    uint32_t pkts_acked = 0;
    uint32_t resp_bytes = 0;
    wire::Opcode opcode = wire::Opcode::write;
    WcStatus status = WcStatus::success;
    bool done = false;
    bool active = false;
    bool gather = false;          // a list of two or more entries (R-SGE-1): in the slot's SendAux
    bool rd_counted = false;      // counts toward the stream's max_rd_atomic (R-STREAM-10)
    WcOpcode wc_opcode = WcOpcode::send;  // the completion's opcode of `opcode`, set with it (advance_sq reads it)
};
static_assert(sizeof(SendWqe) == 128, "a send-queue slot is two cache lines (issue 24)");

// w.active && !w.done as one 2-byte compare (adjacent bools, 0 or 1): an ACK
// tests it per acknowledged packet (delivered), and the compiler keeps two
// byte tests as two.
inline bool active_not_done(const SendWqe& w) {
    static_assert(offsetof(SendWqe, active) == offsetof(SendWqe, done) + 1 && sizeof(bool) == 1);
    uint16_t f;
    std::memcpy(&f, &w.done, 2);
    return f == (std::endian::native == std::endian::little ? 0x100u : 0x1u);
}

// The rest of a send-queue slot: a list of two or more entries (the
// stream's entries of this slot) with the transmit cursor, segments being
// cut at entry boundaries (R-SEG-2); an atomic's operands.
struct SendAux {
    LocalSeg* sge = nullptr;
    uint32_t nsge = 0;
    uint32_t cur_sge = 0;         // entry of the next new segment
    uint32_t cur_off = 0;         // its offset in that entry
    uint8_t atomic_ops[wire::kAtomicReqPayload] = {};
};

struct RecvWqe {
    RecvWr wr{};                  // wr.length: the receive's length (a list's sum); wr.sg_list unused
    uint8_t* local = nullptr;     // one buffer (nsge <= 1)
    LocalSeg* sge = nullptr;      // nsge >= 2: the list (R-SGE-1)
    uint32_t nsge = 0;
    bool bad_lkey = false;
};

// Receiver record of one message in progress (R-CMPL-1).
struct RxMsg {
    uint8_t* target = nullptr;   // READ_REQ source / atomic target, checked on arrival
    uint32_t msg_seq = 0;
    uint32_t msg_len = 0;
    uint32_t bytes = 0;
    uint32_t recv_seq = 0;
    uint32_t imm = 0;
    uint32_t rkey = 0;
    wire::Opcode opcode = wire::Opcode::write;
    WcStatus status = WcStatus::success;
    bool active = false;
    bool complete = false;
    bool solicited = false;      // its receive completion is solicited (R-NOTIFY-1)
    wire::Syndrome syndrome{};   // why it failed: repeated to a resent refused packet (R-NAK-8)
    uint8_t atomic_ops[wire::kAtomicReqPayload] = {};
};

// A response the responder still has segments of to hand out.
struct RespJob {
    const uint8_t* src = nullptr;
    uint32_t src_key = 0;         // the region src lies in (R-MEM-6)
    uint32_t msg_seq = 0;
    uint32_t len = 0;
    uint32_t next_off = 0;
    wire::Opcode opcode = wire::Opcode::read_resp;
    uint8_t value[8] = {};
    bool active = false;
};

// A shared receive queue (R-SRQ-*): entries live in slots; posted ones wait
// in post order in `posted` until a message takes one (R-SRQ-2); a slot is
// free again when that message's receive completes.
struct Srq {
    uint32_t pd = 0;
    std::vector<RecvWqe> slots;
    std::vector<LocalSeg> sge;    // max_recv_sge entries per slot, when above 1 (R-SGE-1)
    Ring<uint32_t> posted{1};     // slots posted, not yet taken, in post order
    std::vector<uint32_t> free;   // slots neither posted nor taken
    uint32_t limit = 0;           // armed limit (R-SRQ-5); 0: not armed
    uint32_t users = 0;           // streams using it
    bool used = false;
};

inline constexpr uint32_t kStreamIncShift = 24;  // wire stream_id = incarnation << 24 | id (R-STREAM-11)
inline constexpr uint32_t kStreamIdMask = 0xffffff;
// TxPkt::stream_idx of a packet whose stream was destroyed (R-STREAM-11).
inline constexpr uint32_t kOrphanStream = 0xffffffffu;

struct Stream {
    uint32_t id = 0;
    uint32_t wire_id = 0;        // the id on the wire: id | incarnation << 24 (R-STREAM-11)
    uint32_t pd = 0;
    uint32_t send_cq = 0;
    uint32_t recv_cq = 0;
    uint32_t srq = 0;            // 0: own receive queue (rq)
    bool error = false;
    bool live = false;           // false: a free slot (destroyed, or never used)
    uint8_t slot_gen = 0;        // bumped when the slot is freed: deferred records of the old stream are stale
    // Every queue below holds a power of two of slots, indexed by its 32-bit
    // counter & mask, so slots stay consistent across the counter's wrap
    // whatever depth the user chose; the depth itself is the limit (R-WRAP-1).
    // requester
    std::vector<SendWqe> sq;     // bit_ceil(send_depth) slots, msg_seq & sq_mask
    uint32_t sq_mask = 0;
    std::vector<SendAux> sq_aux;   // one per send-queue slot
    std::vector<LocalSeg> sq_sge;  // max_send_sge entries per send-queue slot (R-SGE-1)
    // max_inline bytes per send-queue slot: the copies of inline sends and of
    // small lists (R-INLINE-1, R-INLINE-3). A slot's bytes are rewritten only
    // by a later WR in the slot, so retransmissions of a flushed WR still
    // read its own (R-INLINE-2).
    std::vector<uint8_t> sq_inline;
    uint32_t sq_depth = 0;       // send_depth: WRs posted and not yet completed (R-STREAM-9)
    uint32_t sq_head = 0;        // oldest msg_seq not yet completed
    uint32_t sq_tail = 0;        // next msg_seq
    uint32_t sq_jobs = 0;        // next msg_seq to hand to the connection's job ring (schedule_sq)
    uint32_t sq_limit = 0;       // messages in flight: the peer's stream_depth (R-STREAM-5); 0 before ESTABLISHED
    uint32_t rd_max = 0;         // max_rd_atomic (R-STREAM-10)
    uint32_t rd_out = 0;         // READ/atomic handed to the job ring and not yet retired
    uint32_t next_recv_seq = 0;
    bool sq_room() const noexcept { return sq_tail - sq_head < sq_depth; }  // R-STREAM-9
    // responder
    uint32_t rd_dest_max = 0;    // max_dest_rd_atomic (R-STREAM-10)
    uint32_t rd_dest_held = 0;   // READ/atomic received whose response is not yet all handed out
    // Own receive queue: bit_ceil(recv_depth) slots, recv_seq & rq_mask. With
    // an SRQ the stream binds SRQ entries in recv_seq order instead (R-SRQ-2):
    // rq then holds no entries, rq_mask names the srq_bound slot of a recv_seq
    // (the SRQ slot bound to it), and rq_posted counts the bound.
    std::vector<RecvWqe> rq;
    std::vector<uint32_t> srq_bound;
    uint32_t rq_mask = 0;
    uint32_t rq_limit = 0;       // recv_depth: receives posted and not yet completed
    std::vector<LocalSeg> rq_sge;  // max_recv_sge entries per receive slot
    uint32_t rq_posted = 0;      // receives posted (next recv_seq to post)
    uint32_t rq_done = 0;        // receives completed
    std::vector<RxMsg> rx;       // bit_ceil(stream_depth) slots, msg_seq & rx_mask (no division per packet)
    uint32_t rx_mask = 0;
    uint32_t depth = 0;          // stream_depth: messages accepted beyond rx_next (R-STREAM-5)
    uint32_t rx_next = 0;        // next msg_seq to complete in order
    // Records of rx active (place sets one, advance_rx retires it): with none,
    // no message waits for its turn and the next one has no record, which
    // the whole-WRITE path then need not look up twice per packet.
    uint32_t rx_held = 0;
    std::vector<RespJob> resp;   // as rx: msg_seq & rx_mask
    // R-ACK-8: the first incoming msg_seq the stream did not execute when it
    // entered ERROR; every message before it was placed and completed.
    uint32_t err_msg = 0;
    bool failed_known = false;   // the message that put the stream in ERROR (R-NAK-8)
    wire::Syndrome failed_syndrome{};
    uint32_t failed_msg = 0;
};

enum class JobKind : uint8_t { request, response };
struct TxJob {
    uint32_t stream_idx = 0;
    uint32_t slot = 0;
    JobKind kind = JobKind::request;
};

enum class CtrlKind : uint8_t { connect_req, connect_ack, nak, probe, probe_reply, disconnect, disconnect_ack };
struct CtrlItem {
    CtrlKind kind = CtrlKind::nak;
    uint16_t path = 0;
    uint32_t a = 0;  // nak: stream id; probe: seq
    uint32_t b = 0;  // nak: msg_seq; probe: ts
    uint32_t c = 0;  // nak: csn
    uint8_t syndrome = 0;
    uint8_t opcode = 0;
};

struct Conn {
    uint32_t id = 0;               // from Engine::Impl::conn_ids (R-CONN-1, R-KEY-1)
    uint32_t idx = 0;              // in Engine::Impl::conns
    uint32_t peer = 0;
    uint32_t remote_conn = 0;
    uint32_t cookie = 0;
    ConnState state = ConnState::idle;
    uint16_t num_paths = 0;        // our sending paths
    uint16_t peer_paths = 0;       // peer's sending paths = our receive paths
    uint16_t seg = 0;              // our segment size (min of both sides' max_payload)
    uint8_t planes = 1;            // R-PLANE-2: min(our planes, peer's); 1 before ESTABLISHED
    // R-PLANE-6: CONNECT_REQ k leaves on plane k % connect_planes (min(our
    // planes, the peer addresses the application gave)); 1: plane 0 only.
    uint8_t connect_planes = 1;
    uint32_t csn_limit = 0;        // min(own csn_window, peer's)
    uint32_t peer_depth = 0;
    uint32_t fair_idx = 0;
    Time last_rx = 0;
    // R-TIMER-9: the latest send time of a packet newly acknowledged on any
    // path (the evidence that the peer and some route are answering), and the
    // oldest send time of a path found overdue with no such evidence yet:
    // evidence past it calls the timers at once (rx_ack).
    Time acked_sent = 0;
    Time silence_wait = ~Time(0);
    bool rtt_lent = false;         // R-TIMER-1: the first RTT sample was given to the paths without one
    Time next_keepalive = 0;       // R-CONN-15: the earliest next keepalive
    uint16_t keepalive_path = 0;   // keepalives take the paths in turn
    Time next_ctrl_retry = 0;
    Time connect_sent = 0;         // first CONNECT_REQ transmission (R-HINT-8)
    Time handshake_rtt = 0;        // 0: unknown (the CONNECT_REQ was repeated)
    uint32_t ctrl_retries = 0;
    uint32_t rr_path = 0;          // round-robin start for equal paths (R-SCHED-4)
    uint32_t entropy_rng = 0;      // draws re-routed paths' entropies (new_entropy)
    // R-TIMER-10 (tail_redundancy on, two paths or more): a cursor over the
    // CSNs for idle-time copies, newest first, so each is looked at once:
    // [red_floor, red_next) are still to look at, downwards; red_top is
    // csn_nxt when the current idle spell began.
    uint32_t red_next = 0;
    uint32_t red_top = 0;
    uint32_t red_floor = 0;
    Time red_last = ~Time(0);      // the tx_burst time of the last idle copy
    bool red = false;
    bool in_ready = false;         // on Engine::Impl::ready (may have something to send)
    bool in_timed = false;         // on Engine::Impl::wheel (tnode scheduled), or its timers being run
    // in_ready and in_timed both set, tested as one 2-byte word (adjacent
    // bools, 0 or 1): every datagram and every post asks it.
    bool awake() const noexcept {
        static_assert(sizeof(bool) == 1);
        uint16_t v;
        std::memcpy(&v, &in_ready, 2);
        return v == 0x0101;
    }
    // The connection's place on the timing wheel: due at the earliest of its
    // timers (RTO, tail probe, connect/disconnect retry, RNR, probe, silence)
    // and, while parked off the ready list by its pacer, its release time.
    struct TimerNode : TimerWheel::Node {
        Conn* conn = nullptr;
    } tnode;
    Time timer_due = ~Time(0);     // earliest armed timer not yet looked at (conn_timers)
    Time pacer_due = ~Time(0);     // parked by the pacer until then
    bool unclaimed = false;        // accepted (R-CONN-8) and not yet returned by a connect() (R-CONN-14)

    // sender CSN space (R-CSN-1)
    uint32_t csn_nxt = 0;
    uint32_t csn_una = 0;
    // Transmit records, csn & mask: kTxRecordsStart at first, doubled up to
    // csn_window when the CSNs in flight fill them (grow_txpkts, amortised:
    // each doubling copies only the records in flight). A replaced array is
    // kept in tx_retired until every CSN it held is acknowledged, since a
    // packet handed to the driver may point into it (an atomic response's
    // inline value).
    std::vector<TxPkt> txpkts;
    uint32_t txmask = 0;           // txpkts.size() - 1, kept beside it (no division by sizeof(TxPkt) per use)
    struct RetiredTx {
        uint32_t until_csn;        // csn_nxt when replaced: its records are all below
        std::vector<TxPkt> recs;
    };
    std::vector<RetiredTx> tx_retired;
    Ring<uint32_t> retx;           // CSNs waiting for retransmission
    Ring<uint32_t> red_retx;       // R-TIMER-10: CSNs resent, their copies not yet sent
    struct TailProbe {
        uint32_t csn;
        uint16_t path;
    };
    Ring<TailProbe> tlp;           // R-TIMER-8: newest packets to send again on their own path
    Ring<TxJob> jobs;              // messages with segments not yet sent
    // R-PACK-3: the peer accepts WRITE_PACK and this device packs (set at ESTABLISHED).
    bool pack = false;
    // R-PACK-4: the payloads of WRITE_PACK packets not yet resolved, built
    // once at their first transmission so that every retransmission (and
    // redundant copy) sends the same bytes: a byte ring of kPackArena bytes,
    // allocated at the connection's first pack and never grown, in use from
    // pack_tail to pack_head (counters; & (kPackArena - 1) is the position).
    // pack_live holds, oldest first, each such packet's CSN and the head
    // after its payload: once csn_una passes the CSN its bytes are free
    // (reclaimed by the packer when it needs room, so no other path pays).
    struct PackSpan {
        uint32_t csn;
        uint32_t end;
    };
    std::unique_ptr<uint8_t[]> pack_buf;
    uint32_t pack_head = 0;
    uint32_t pack_tail = 0;
    Ring<PackSpan> pack_live{1};
    struct RnrWait {
        uint32_t csn;
        Time due;
    };
    Ring<RnrWait> rnr;             // R-NAK-10: refused as not ready, resent at due (FIFO: one delay)
    struct GoneWait {
        uint32_t stream_idx;
        uint32_t wire_id;
        uint32_t msg_seq;
        Time due;
    };
    std::vector<GoneWait> gone;    // R-STREAM-11: refused invalid_stream, failed at due (FIFO: one delay)
    std::vector<TxPath> paths;
    // Packets out on the paths (snd_nxt - snd_una, summed) plus the failed
    // paths: 0 exactly when no path wants a timer (quiet, wants_timer),
    // known without walking the paths. Kept where snd_nxt (send_on_path),
    // snd_una (advance_una, rx_ack's cumulative PSN, path_timeout) or a
    // path's state (fail_path, the probe reply) changes.
    uint32_t unsettled = 0;
    // The burst plan's score of every path (TxPath's sched_*), twice over:
    // [i] and [i + num_paths], so that pick_path scans from any start without wrapping.
    std::vector<uint64_t> sched_score;
    void set_score(uint32_t path, uint64_t v) {
        sched_score[path] = v;
        sched_score[path + num_paths] = v;
    }
    TokenBucket pacer;
    uint32_t hint_kbps = 0;

    // receiver
    CsnWindow rx_csn;              // CSNs accepted (deferred placement: maybe still being placed)
    CsnWindow rx_csn_done;         // deferred placement only: CSNs placed (what cum_csn reports)
    std::vector<RxPath> rx_paths;
    uint32_t acks_pending = 0;     // rx paths with ack_pending set
    // The rx path whose ack_pending was set last: with acks_pending 1 and its
    // flag still set, the one to ack, found without walking rx_paths (a lone
    // message's ACK, issue 24). A hint only: tx tests it before use.
    uint32_t ack_last = 0;

    Ring<CtrlItem> ctrl;
    std::vector<Stream> streams;   // slots; destroyed ones (!live) are reused
    std::vector<uint32_t> free_streams;
    std::unordered_map<uint32_t, uint32_t> stream_by_id;  // live streams by (24-bit) id
    // Next incarnation of every id ever created here (R-STREAM-11): kept after destroy.
    std::unordered_map<uint32_t, uint8_t> stream_inc;
    uint32_t last_stream_id = 0xffffffffu;  // wire id of the cached lookup; this one is never valid (kMaxStreamId)
    uint32_t last_stream_idx = 0;
    uint32_t job_bound = 0;        // jobs the live streams can have queued at once
    // Payloads of packets of destroyed streams still to be acknowledged
    // (R-STREAM-11): the application may free its buffers at once.
    struct Orphans {
        uint32_t until_csn;        // csn_nxt when the stream was destroyed
        std::unique_ptr<uint8_t[]> bytes;
    };
    std::vector<Orphans> orphans;

    // The last streams destroyed here (R-NAK-8): a resent packet of theirs
    // whose original was placed is acknowledged again, not refused (the
    // requester's ACK was lost while the responder tore its QP down, the
    // usual end of a verbs program on a lossy fabric). Duplicates come
    // within the CSN window's lifetime; 64 covers a verbs program tearing
    // down many QPs of one connection at once (ibv_srq_pingpong: 16).
    struct Tombstone {
        uint32_t wire_id = 0;
        // Messages before it were placed whole (the stream's err_msg in
        // ERROR, else its rx_next); from it on, placed partly or refused.
        uint32_t placed_before = 0;
        bool valid = false;
    };
    std::array<Tombstone, 64> tombstones{};
    uint8_t tombstone_next = 0;

    ConnStats st;

    // By the wire stream_id (packets): the live stream of that id and incarnation.
    Stream* find_stream(uint32_t wire_sid, uint32_t* idx_out = nullptr) {
        if (wire_sid == last_stream_id) {
            if (idx_out) *idx_out = last_stream_idx;
            return &streams[last_stream_idx];
        }
        auto it = stream_by_id.find(wire_sid & kStreamIdMask);
        if (it == stream_by_id.end() || streams[it->second].wire_id != wire_sid) return nullptr;
        last_stream_id = wire_sid;
        last_stream_idx = it->second;
        if (idx_out) *idx_out = it->second;
        return &streams[it->second];
    }
    // By the application's id (API calls).
    Stream* find_local(uint32_t id, uint32_t* idx_out = nullptr) {
        if ((last_stream_id & kStreamIdMask) == id) {  // the invalid 0xffffffff names no id
            if (idx_out) *idx_out = last_stream_idx;
            return &streams[last_stream_idx];
        }
        auto it = stream_by_id.find(id);
        if (it == stream_by_id.end()) return nullptr;
        return find_stream(streams[it->second].wire_id, idx_out);
    }
    // For a wire_sid no live stream matches: true if it names an incarnation
    // of its id older than the newest created here (R-STREAM-11).
    bool old_incarnation(uint32_t wire_sid) const {
        auto it = stream_inc.find(wire_sid & kStreamIdMask);
        return it != stream_inc.end() && int8_t(uint8_t((wire_sid >> kStreamIncShift) - it->second)) < 0;
    }
    // Retransmissions, or new segments the CSN window admits (R-CSN-5).
    bool has_sendable() const {
        return !retx.empty() || !tlp.empty() || (!jobs.empty() && csn_nxt - csn_una < csn_limit) ||
               (red && red_pending());
    }
    // R-TIMER-10: CSNs the redundancy cursor has not looked at yet (maybe
    // acknowledged meanwhile: then one visit moves the cursor past them).
    bool red_pending() const {
        return !red_retx.empty() || red_top != csn_nxt || (red_next != red_floor && red_next != csn_una);
    }
    bool has_outstanding() const {
        if (csn_una != csn_nxt || !jobs.empty() || !retx.empty()) return true;
        // (a destroyed slot has sq_head == sq_tail)
        for (const Stream& s : streams)
            if (s.sq_head != s.sq_tail) return true;
        return false;
    }
};

// Deferred placement: one received data packet whose acknowledgement (and,
// with a copy, byte count and completion) waits for the placement stage.
// Kept in arrival order and finished in that order, so an ACK never shows a
// later PSN of a path as received while an earlier one is still being placed
// (the sender would take the hole for a loss, R-SACK-4).
enum class PendKind : uint8_t { ack_only, rx_msg, read_resp };
struct PendRec {
    uint32_t conn_id = 0;
    uint32_t csn = 0;
    uint32_t psn = 0;
    uint32_t ts = 0;
    uint32_t stream_idx = 0;
    uint32_t msg_seq = 0;
    uint32_t plen = 0;             // payload bytes (counted toward the message when placed)
    uint16_t path = 0;
    PendKind kind = PendKind::ack_only;
    uint8_t stream_gen = 0;        // Stream::slot_gen when recorded
    bool psn_fresh = false;        // record the PSN in the path's SACK state
    bool accepted = false;         // fresh CSN accepted: count it, mark it placed
    bool ce = false;
    bool ack_now = false;          // R-ACK-1 triggers known at arrival (dup, flag, message end)
    bool placed = false;
};

enum class CqArm : uint8_t { none, solicited, all };

struct Cq {
    std::vector<Completion> ring;  // bit_ceil(depth) slots, counter & mask (R-CMPL-5)
    uint32_t mask = 0;
    uint32_t depth = 0;
    uint32_t head = 0;
    uint32_t tail = 0;
    bool used = false;
    CqArm armed = CqArm::none;     // R-NOTIFY-1: one-shot
    bool listed = false;           // on Engine::Impl::notified
    uint32_t events = 0;           // raised, not yet taken by the drive loop
};

struct Engine::Impl {
    EngineConfig cfg;
    EngineStats st;
    MrTable mrs;
    uint32_t next_pd = 1;
    std::vector<Cq> cqs;
    std::vector<uint32_t> notified;  // CQs with events raised (each once; capacity: every CQ)
    std::vector<Srq> srqs;         // id = index + 1
    // Connections by dense index (Conn::idx: ready, timed, CC slots) and by id.
    static constexpr uint32_t kMaxConns = 0xffffe;
    std::vector<Conn*> conns;
    KeyTable<Conn*> conn_ids{kMaxConns};
    Ring<ConnEvent> events;
    FairShare fair;
    Time next_timer = 0;
    Time last_now = 0;
    // Received datagrams that may have made something other than a data ACK
    // sendable: all but a whole WRITE placed at once (Engine::rx_may_send).
    uint64_t rx_may_send = 0;
    // R-CONN-15: keepalives are looked for by one sweep over the
    // connections every keepalive_interval / 4, so idle connections stay off
    // the timed list. kNever while no connection is ESTABLISHED.
    Time next_sweep = ~Time(0);
    // R-PATH-14: the device's probe budget (tokens, refilled at probe_rate).
    double probe_tokens = 0;
    Time probe_refill = 0;
    bool probe_budget_started = false;
    // R-PLANE-1: the plane block every CONNECT_* carries (TxPacket payload),
    // encoded once from cfg.planes; length 0 for a one-plane device.
    std::array<uint8_t, wire::kMaxPlaneBlock> plane_block{};
    uint32_t plane_block_len = 0;
    // R-PLANE-3: pi if that path is active, else the next active path (pi if none).
    // pi taken modulo the path count, divided only when it is not an index
    // already (a division per ACK on the hardware); no paths: 0.
    uint16_t live_path(const Conn& c, uint16_t pi) const noexcept {
        const size_t n = c.paths.size();
        if (n == 0) [[unlikely]] return 0;
        if (pi >= n) [[unlikely]] pi = uint16_t(pi % n);
        if (c.paths[pi].state == PathStateKind::active) [[likely]] return pi;
        for (size_t k = 1; k < n; ++k) {
            const uint16_t q = uint16_t((pi + k) % n);
            if (c.paths[q].state == PathStateKind::active) return q;
        }
        return pi;
    }
    Time next_hint_update = 0;
    uint32_t rr_conn = 0;
    // Connection indices that tx_burst, next_deadline and tx_pending visit
    // (ready), so an idle connection costs nothing per burst, nor does one
    // that cannot send now: a pass drops those with nothing left and parks
    // those whose data is held by a window (an ACK wakes them) or by the
    // pacer (the wheel wakes them at its release time). Every input that can
    // give a connection work (a packet for it, an API call on it, a finished
    // placement, a timer) wakes it onto ready and, if it has no timer
    // scheduled, onto the wheel at once, so its timers are looked at.
    std::vector<uint32_t> ready;
    // Timers (doc/architecture.md, "Timers and the ready list"): one node per
    // connection on a hierarchical wheel, O(1) to arm and to fire, so a timer
    // pass visits only the connections with a timer due.
    TimerWheel wheel;
    static constexpr uint32_t kGone = 0xffffffffu;  // a dropped entry, compacted after the pass
    // deferred placement: records [pend_head, pend_tail) (token = position),
    // jobs [job_head, job_tail) not yet taken by the driver
    std::vector<PendRec> pend;
    std::vector<PlaceJob> place_jobs;
    uint32_t pend_head = 0, pend_tail = 0;
    uint32_t job_head = 0, job_tail = 0;
    // Congestion-control core (R-CC-8): run here (inline) or, with
    // cfg.offload_cc, on the driver's CC stage, fed from cc_fb.
    CcCore cc_core;
    std::vector<CcFeedback> cc_fb;     // offload_cc: records not yet taken, [cc_head, cc_tail)
    uint32_t cc_head = 0, cc_tail = 0;
    uint32_t cc_gen_next = 1;          // path incarnations (CcFeedback::gen)
    const RxPacket* cur_rx = nullptr;  // datagram rx_one is processing (set for the general steps: rx_whole_write reads none)
    // Decoded into in place by rx_one: a Packet on the stack would be zeroed per packet.
    wire::Packet rx_pk;
    // emit_segment_run's per-message template, transmit record and header
    // bytes: members, not locals, so that each segment copies them as whole
    // words instead of the compiler re-storing every field it tracked.
    TxPkt run_pkt;
    // rx_ack: the stream whose send queue has WRs newly done (delivered),
    // advanced once when the ACK is processed or another stream's WR is done.
    Stream* sq_due = nullptr;
    alignas(16) uint8_t run_hdr[wire::kDataLen];

    explicit Impl(const EngineConfig& c);
    ~Impl();

    // Inline: it runs for every received datagram.
    Conn* conn(uint32_t id) const {
        Conn* const* c = conn_ids.find(id);
        return c ? *c : nullptr;
    }
    Conn* new_conn(uint32_t peer);
    // Inline: every received datagram wakes its connection, nearly always already awake.
    [[gnu::always_inline]] void wake(Conn& c) {
        if (c.awake()) [[likely]]
            return;
        wake_slow(c);
    }
    // Round 38: the wheel's placement (wake_timed) and the ready vector's
    // growth (wake_grow) out of line, so that the common wake (a datagram
    // for a connection with its node on the wheel: the ready list alone)
    // saves no registers (it saved six, 14 of its 29 instructions).
    // (GCC folds push_back's own capacity test into the one here, so no
    // reallocation is left inline; the growth is a tail call that
    // finishes the wake.)
    [[gnu::noinline]] void wake_slow(Conn& c) {
        if (!c.in_ready) {
            c.in_ready = true;
            if (ready.size() == ready.capacity()) [[unlikely]]
                return wake_grow(c);
            ready.push_back(c.idx);
        }
        if (!c.in_timed) wake_timed(c);
    }
    [[gnu::noinline]] void wake_grow(Conn& c) {
        ready.push_back(c.idx);
        if (!c.in_timed) wake_timed(c);
    }
    [[gnu::noinline]] void wake_timed(Conn& c) {
        c.in_timed = true;
        // Its timers are looked at in the next timer pass (as any due
        // node's): the node is due now, but next_timer stays, so a wake
        // alone (an API call) never makes the engine's deadline now.
        c.timer_due = last_now;
        wheel.schedule(c.tnode, last_now);
    }
    // post_send's wake (issue 24, latency: a ping-pong's every message). A
    // connection off the wheel whose look would find, besides the post's
    // own R-CONN-6 timeout, nothing (established, no RNR or peer-gone wait,
    // no path failed or with packets in flight; the post arms no other
    // timer, its sends arm theirs) gets that timeout armed instead of a
    // look: the same timer conn_timers would schedule, at last_rx +
    // conn_timeout (fired no later than a look would find it due).
    // Armed, not yet placed (round 38, doc/performance.md 7.1): the wheel
    // node waits for the connection's transmit visit, where the post's
    // send arms an earlier timer and places the node once (arm places it
    // at the earliest of both), or a visit that sends nothing places it at
    // the timeout (place_deferred). Placed at once, it was placed far out,
    // moved to the send timer and, after the ACK, cancelled: one wheel
    // placement fewer per message alone. A timeout already due (a peer
    // silent past it) is placed at once, so the next burst's timer pass
    // finds it before anything is sent, as before.
    [[gnu::always_inline]] void wake_post(Conn& c) {
        if (c.awake()) [[likely]]
            return;
        if (!c.in_timed && quiet(c)) {
            if (!c.in_ready) {
                c.in_ready = true;
                ready.push_back(c.idx);
            }
            c.silence_wait = TimerWheel::kNever;  // as a look leaves it with no path in flight
            const Time due = c.last_rx + cfg.conn_timeout;
            if (due > last_now) [[likely]] {
                c.in_timed = true;  // awake: later inputs need not wake it
                c.timer_due = due;  // off the wheel, it was kNever
                return;
            }
            arm(c, due);
            return;
        }
        wake_slow(c);
    }
    // A node armed by wake_post and not placed since (in_timed, not on the
    // wheel: outside a timer pass, only wake_post leaves a node so). It
    // stays on the ready list until a send places it (arm) or the end of
    // its transmit visit does (place_deferred); next_deadline and
    // tx_pending count its timer meanwhile (Engine::self_check tests that
    // no other state occurs).
    static bool deferred(const Conn& c) { return c.in_timed && !c.tnode.linked(); }
    // The end of a transmit visit (and tx's drop of a connection with
    // nothing to do): a deferred node no send placed goes on the wheel at
    // its timeout. In a visit with room only for ACKs, the next visit's
    // send moves it earlier (the churn this saves in the common case).
    [[gnu::always_inline]] void place_deferred(Conn& c) {
        if (deferred(c)) [[unlikely]]
            place_node(c, c.timer_due);
    }
    // No timer of c but R-CONN-6's can be due, whatever it has outstanding:
    // what wants_timer asks of the paths, with no RNR or peer-gone wait.
    static bool quiet(const Conn& c) {
        return c.state == ConnState::established && c.rnr.empty() && c.gone.empty() && !c.unsettled;
    }
    // After an ACK: with nothing outstanding and no timer (wants_timer false)
    // nor pacer wait, the node is taken off the wheel now, as its next look
    // would (conn_timers finds nothing, timers() cancels it); an input
    // meanwhile wakes it as any connection off the wheel (issue 24: a
    // ping-pong's send timer no longer fires after its ACK for a look).
    // Not with redundant copies (R-TIMER-10): there the copies an idle
    // connection sends re-arm the node, and a look due meanwhile puts it
    // back on the ready list, where more copies go; without those looks
    // the simulator's figures change (ring.conf, 10% loss: jct_us 1,218 ->
    // 1,256), so their timers are left as they were.
    [[gnu::always_inline]] void settle_timers(Conn& c) {
        if (c.csn_una != c.csn_nxt || !c.jobs.empty() || !c.in_timed || c.pacer_due != TimerWheel::kNever || c.red)
            return;
        if (wants_timer(c)) return;
        wheel.cancel(c.tnode);
        c.in_timed = false;
        c.timer_due = TimerWheel::kNever;
        // Exact, as timers() would leave it: nothing else on the wheel, so
        // no timer pass until the keepalive sweep's.
        if (wheel.empty()) next_timer = next_sweep;
    }
    // A timer of c due at t: the connection's wheel node moves earlier if
    // needed (O(1)); a later t is found when the node fires and the
    // connection's timers are looked at again (conn_timers).
    // A node off the wheel goes at timer_due after the update: t, but for
    // a deferred node (wake_post), which keeps its R-CONN-6 timeout where t
    // is later. (Not so for a node on it: a wake's node, due now, does not
    // bring next_timer forward, so an arm after it must lower next_timer
    // only to t.)
    void arm(Conn& c, Time t) {
        if (t < c.timer_due) c.timer_due = t;
        place_node(c, c.tnode.linked() ? t : c.timer_due);
    }
    // Parked off the ready list by its pacer until t: the node fires then
    // only to put it back on the ready list (its timers are not looked at
    // unless one of them is due too).
    void park_paced(Conn& c, Time t) {
        c.pacer_due = t;
        place_node(c, t);
    }
    void place_node(Conn& c, Time t) {
        if (!c.tnode.linked() || t < c.tnode.due) {
            wheel.schedule(c.tnode, t);
            c.in_timed = true;
        }
        if (t < next_timer) next_timer = t;
    }
    static bool wants_tx(const Conn& c) {
        return wants_tx_other(c) || (c.state == ConnState::established && c.has_sendable());
    }
    // wants_tx but for data (tx keeps that term itself across a visit).
    static bool wants_tx_other(const Conn& c) {
        return !c.ctrl.empty() || c.acks_pending || c.state == ConnState::closing;
    }
    static bool wants_timer(const Conn& c) {
        if (c.state == ConnState::connecting || c.state == ConnState::closing) return true;
        if (c.state != ConnState::established) return false;
        return c.has_outstanding() || c.unsettled;
    }
    static void compact(std::vector<uint32_t>& v) { std::erase(v, kGone); }
    // Looks at every timer of c (fired on the wheel); returns its next.
    Time conn_timers(Conn& c, Time now);
    void free_conn(Conn* c);
    bool resolve_list(std::vector<LocalSeg>& table, uint32_t slot, uint32_t max_sge, const Sge* sg, uint32_t n,
                      bool need_write, uint8_t*& local, LocalSeg*& list, uint32_t& nsge);
    // solicited: a receive completion of a message sent solicited (R-NOTIFY-1).
    void push_cq(uint32_t cq, const Completion& c, bool solicited = false);
    // The CQ of id cq, or nullptr (0, or past the last): the bound as a
    // byte count, for cqs.size() is a multiply (a Cq is 48 bytes); one
    // unsigned compare takes 0 too (its end offset less one wraps).
    [[gnu::always_inline]] Cq* cq_of(uint32_t cq) {
        const size_t bytes = size_t(reinterpret_cast<const char*>(std::to_address(cqs.end())) -
                                    reinterpret_cast<const char*>(cqs.data()));
        return size_t(cq) * sizeof(Cq) - 1 < bytes ? &cqs[cq - 1] : nullptr;
    }
    // push_cq in two halves, so that advance_sq (a completion per message)
    // writes each completion straight into its slot: the next slot of the
    // CQ, taken (nullptr: no such CQ, or full, R-CMPL-5: counted, the
    // completion is lost); then, once it is written, its notification.
    [[gnu::always_inline]] Completion* cq_slot(uint32_t cq) {
        Cq* const qp = cq_of(cq);
        if (!qp) [[unlikely]] return nullptr;
        Cq& q = *qp;
        if (q.tail - q.head == q.depth) [[unlikely]] {
            ++st.cq_overflows;
            return nullptr;
        }
        return &q.ring[q.tail++ & q.mask];
    }
    [[gnu::always_inline]] void cq_pushed(uint32_t cq, const Completion& c, bool solicited) {
        Cq& q = cqs[cq - 1];
        if (q.armed != CqArm::none) [[unlikely]] notify(cq, q, c, solicited);
    }
    [[gnu::noinline]] void notify(uint32_t cq, Cq& q, const Completion& c, bool solicited);
    void event(EventKind k, Conn& c);
    void push_event(const ConnEvent& e);
    Srq* srq(uint32_t id) {
        return id && id <= srqs.size() && srqs[id - 1].used ? &srqs[id - 1] : nullptr;
    }
    // R-SRQ-2: binds SRQ entries to the stream's recv_seqs up to recv_seq, in
    // order, as far as the SRQ has them; true if recv_seq is bound.
    bool bind_srq(Stream& s, uint32_t recv_seq);
    bool fill_recv(RecvWqe& r, std::vector<LocalSeg>& lists, uint32_t slot, const RecvWr& wr);
    // The receive posted (own queue) or bound (SRQ) as the stream's recv_seq.
    RecvWqe& recv_of(Stream& s, uint32_t recv_seq) {
        return s.srq ? srqs[s.srq - 1].slots[s.srq_bound[recv_seq & s.rq_mask]] : s.rq[recv_seq & s.rq_mask];
    }
    // The receive rq_done is done with: next one; an SRQ entry's slot is free again.
    void retire_recv(Stream& s) {
        if (s.srq) srqs[s.srq - 1].free.push_back(s.srq_bound[s.rq_done & s.rq_mask]);
        ++s.rq_done;
    }
    // Hands the stream's posted send WRs to the job ring while R-STREAM-5 and R-STREAM-10 allow.
    void schedule_sq(Conn& c, Stream& s);
    // post_one_buffer's outcome: not its case (nothing written), posted and
    // in the job ring, or posted and waiting for schedule_sq.
    enum class Posted : uint8_t { no, queued, waits };
    [[gnu::always_inline]] inline Posted post_one_buffer(Conn& c, Stream& s, uint32_t sidx, const SendWr& wr);
    // The common post's stream (post_send, post_sends): c awake, its last
    // stream named again (sidx: its index), that stream's queue allocated
    // and not full (R-STREAM-9); else null.
    [[gnu::always_inline]] inline Stream* post_stream(Conn* c, uint32_t stream_id, uint32_t& sidx);
    void destroy_stream(Conn& c, uint32_t sidx);
    void reclaim_orphans(Conn& c);

    // rx
    [[gnu::always_inline]] inline void rx_one(const RxPacket& p, Time now);
    [[gnu::noinline]] bool rx_other(const RxPacket& p, Time now);
    [[gnu::always_inline]] inline bool rx_whole_write(const uint8_t* p, size_t n, const uint8_t& ce, Time now);
    [[gnu::noinline]] void count_decode_error(wire::DecodeError e);
    [[gnu::noinline]] void rx_control(Conn& c, const wire::Packet& pk, Time now);
    [[gnu::always_inline]] inline void rx_data(Conn& c, const wire::Packet& pk, bool ce, Time now);
    void rx_ack(Conn& c, uint16_t pi, const wire::AckHeader& a, Time now);
    bool rx_late_ack(Conn& c, TxPath& p, const wire::AckHeader& a, Time now);
    void void_read_resp(Conn& c, const wire::DataHeader& d);
    void rx_nak(Conn& c, const wire::Packet& pk);
    // R-PACK-2: this device advertises (and so may receive) WRITE_PACK.
    bool accepts_pack() const { return cfg.pack_writes && !cfg.deferred_placement; }
    bool refuse_pack_again(Conn& c, const wire::DataHeader& d);
    // R-PACK-5: the messages [t.msg_seq, upto) of the WRITE_PACK record t acknowledged.
    void pack_acked(Conn& c, const TxPkt& t, uint32_t upto);
    // A request's packet of message msg_seq acknowledged (R-CMPL-2).
    [[gnu::always_inline]] inline void packet_acked(Conn& c, Stream& s, SendWqe& w, uint32_t msg_seq);
    void rx_connect_req(const wire::Packet& pk, uint32_t peer, Time now);
    void answer_connect_req(Conn& c, const wire::Packet& pk, Time now);
    void rx_connect_ack(Conn& c, const wire::Packet& pk, Time now);
    enum class Placed : uint8_t { ok, rnr, stale, refused, deferred };
    struct Deferral {
        uint8_t* dst = nullptr;
        uint32_t stream_idx = 0;
        PendKind kind = PendKind::ack_only;
    };
    // defer == nullptr: copy inline. Otherwise a payload copy above
    // place_inline_max is described in *defer and Placed::deferred returned;
    // its bookkeeping waits for finish_pend.
    Placed place(Conn& c, const wire::Packet& pk, Time now, Deferral* defer);
    // R-PACK-6: a WRITE_PACK's entries placed in order, each as the whole WRITE it carries.
    Placed place_pack(Conn& c, const wire::Packet& pk, Time now);
    [[gnu::always_inline]] inline bool place_next_write(Conn& c, const wire::Packet& pk);
    [[gnu::noinline]] bool not_placed(Conn& c, const wire::DataHeader& d, Placed res);
    [[gnu::noinline]] static void split_copy(uint8_t* dst, const wire::Packet& pk);
    [[gnu::noinline]] bool place_in_list(const LocalSeg* e, uint32_t n, const wire::Packet& pk, Deferral* defer,
                                         const Deferral& job) const;
    [[gnu::noinline]] Placed fail_msg(Conn& c, Stream& s, uint32_t sidx, RxMsg& m, const wire::DataHeader& d,
                                      wire::Syndrome syn, WcStatus st_local);
    // Inlined into rx_data: a call per packet costs more than its body.
    // deferring: cfg.deferred_placement (a constant where the caller knows it).
    [[gnu::always_inline]] inline void rx_accounted(Conn& c, RxPath& rp, const PendRec& r, Time now, bool deferring);
    void finish_pend(const PendRec& r, Time now);
    void request_done(Conn& c, Stream& s, uint32_t sidx, RxMsg& m, uint32_t msg_seq);
    void advance_rx(Conn& c, Stream& s, uint32_t sidx);
    void nak(Conn& c, const wire::DataHeader& d, wire::Syndrome syn);
    bool refuse_again(Conn& c, const wire::DataHeader& d);
    void mutation_replay(Conn& c, const wire::Packet& pk);  // TEST ONLY: TestMutation::no_dup_filter
    [[gnu::always_inline]] inline void delivered(Conn& c, uint32_t csn);
    [[gnu::always_inline]] inline void delivered(Conn& c, TxPkt* tp, uint32_t txmask, uint32_t csn);
    void resolve_refused(Conn& c, const wire::NakHeader& n);
    TxPkt* unresolved_request(Conn& c, const wire::NakHeader& n);
    void settle_slot(Conn& c, TxPkt& t);
    void rx_rnr_nak(Conn& c, const wire::NakHeader& n);
    void rnr_timers(Conn& c, Time now, Time& next);
    void gone_timers(Conn& c, Time now, Time& next);
    void settle(Conn& c, TxPkt& t);
    void abandon(Conn& c, TxPkt& t);
    void advance_csn_una(Conn& c);
    [[gnu::always_inline]] inline void advance_csn_una(Conn& c, TxPkt* tp, uint32_t mask);
    void advance_sq(Conn& c, Stream& s);
    void advance_sq_run(Conn& c, Stream& s);
    void stream_error(Conn& c, Stream& s, uint32_t msg_seq, WcStatus st);
    void conn_error(Conn& c, ConnErrorCause why, Time now);
    void close_conn(Conn& c);
    void flush_conn(Conn& c, WcStatus status);
    void flush_recvs(Conn& c, Stream& s, WcStatus status);
    void establish(Conn& c, const wire::ConnectHeader& h, Time now);
    void start_from_hint(Conn& c, uint32_t hint_kbps, Time now);
    void refresh_idle_hints(const Conn& joined);

    // tx
    size_t tx(TxPacket* out, size_t max, Time now, bool acks = true);
    bool emit_ctrl(Conn& c, TxPacket& o, Time now);
    size_t emit_ack(Conn& c, uint16_t path, TxPacket* out, size_t room);
    [[gnu::noinline]] size_t emit_ack_copy(Conn& c, uint16_t route, TxPacket* out);
    void plan_paths(Conn& c, Time now);
    // Out of line: inlined into tx() it cost a message alone 8 instructions
    // more (doc/performance.md 7.1, round 15).
    template <bool Lazy>
    [[gnu::noinline]] void plan_paths_as(Conn& c, Time now);
    Time send_timer(TxPath& p, Time now) const;
    Time plan_send_timer(TxPath& p, Time now) const;
    [[gnu::always_inline]] inline int pick_path(Conn& c);
    bool emit_data(Conn& c, TxPacket& o, Time now);
    [[gnu::noinline]] bool emit_redundant(Conn& c, TxPacket& o, Time now, bool resends_only);
    // R-MEM-6: a response whose source region is no longer registered (the
    // application may have freed it) keeps nothing of it: no payload to read.
    void void_if_unregistered(TxPkt& t) const noexcept {
        if (!t.src_key || mrs.registered(t.src_key)) [[likely]]
            return;
        t.src_key = 0;
        t.payload = nullptr;
        t.payload_len = 0;
        t.msg_len = 0;  // an empty packet is consistent only for a 0-byte message (R-WIRE-7)
        t.offset = 0;
        t.dflags |= wire::kDataVoid;
    }
    void send_on_path(Conn& c, TxPkt& t, int path, TxPacket& o, Time now, const uint8_t* hdr_template = nullptr,
                      bool in_run = false);
    size_t emit_segment_run(Conn& c, TxPacket* out, size_t max, Time now, bool& blocked);
    template <bool MayPack>
    size_t single_run(Conn& c, TxPacket* out, size_t max, Time now, bool& blocked);
    // R-PACK-3, R-PACK-4: WRITE_PACK packets from the front of the job ring.
    [[gnu::noinline]] size_t pack_run(Conn& c, TxPacket* out, size_t max, Time now, bool& blocked);
    uint32_t packable(Conn& c, uint32_t& bytes);
    uint8_t* pack_room(Conn& c, uint32_t csn, uint32_t len);
    [[gnu::noinline]] size_t multi_run(Conn& c, Stream& s, SendWqe& w, TxPacket* out, size_t max, bool& blocked);
    template <bool Gather>
    size_t segment_run(Conn& c, SendWqe& w, SendAux& x, TxPacket* out, size_t max, Time now, bool& blocked);
    bool next_new_segment(Conn& c, uint32_t& csn_out);
    // The CSNs in flight fill the transmit records: twice as many (at most csn_window).
    [[gnu::noinline]] void grow_txpkts(Conn& c);
    [[gnu::noinline]] static void release_retired(Conn& c);
    [[gnu::noinline]] static void gather_segment(SendAux& x, uint16_t seg, TxPkt& t);
    void timers(Time now);
    void keepalive_sweep(Time now);
    // R-PATH-14: takes one probe token if the budget has one.
    bool take_probe_token(Time now);
    Time keepalive_interval() const { return cfg.keepalive_interval ? cfg.keepalive_interval : cfg.conn_timeout / 4; }
    void path_timeout(Conn& c, uint16_t pi, Time now);
    void path_silent(Conn& c, uint16_t pi, Time now);
    bool resolved_tail(Conn& c, TxPath& p);
    void lend_rtt(Conn& c, Time r, Time now);
    void fail_path(Conn& c, TxPath& p, Time now);
    void declare_lost(Conn& c, TxPath& p, uint32_t psn);
    void rtt_sample(TxPath& p, Time rtt);
    // cc: hands one record to the CC core (inline: applies it and its view
    // now); false: dropped, queue full. Inline CC, the core writes the view
    // into the path's in place (every caller's f.gen is p.ccv.gen: the case
    // apply_view takes), all of it inline here: an ACK's window update.
    [[gnu::always_inline]] bool cc_feed(Conn& c, TxPath& p, const CcFeedback& f) {
        if (cfg.offload_cc || f.gen != p.ccv.gen) [[unlikely]]
            return cc_feed_other(c, p, f);
        cc_core.apply_into(f, p.ccv);
        view_taken(c, p);
        return true;
    }
    bool cc_feed_other(Conn& c, TxPath& p, const CcFeedback& f);
    void apply_view(Conn& c, TxPath& p, const CcView& v);
    // What a path's new view (p.ccv, as the core published it) moves in the engine.
    [[gnu::always_inline]] void view_taken(Conn& c, TxPath& p) {
        p.replan();
        // R-CC-6 / R-CC-8: views the core published before it applied the path's
        // latest timeout (still on the views ring) must not reopen the window.
        if (p.ccv.timeouts < p.cc_timeouts_fed) p.ccv.cwnd = std::min(p.ccv.cwnd, cfg.cc.min_cwnd);
        if (cfg.reroute_after_marks && p.ccv.rounds != p.rounds_seen) count_marked_round(c, p);
    }
    void count_marked_round(Conn& c, TxPath& p);
    uint16_t new_entropy(Conn& c, uint16_t old);
    // A new incarnation of the path's window (path creation, revival), published at once.
    void cc_fresh(Conn& c, TxPath& p, uint16_t pi);
    Time deadline(Time now) const;
};

}  // namespace mroce
